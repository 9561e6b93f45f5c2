#!/usr/bin/env python3
"""Markdown tables from `gdn bench --json` lines (one JSON object per line).

    build/gdn bench --json > bench/results/cpu_zen3.json
    python3 bench/tables.py bench/results/cpu_zen3.json

Prints the measured floors, then one table for prefill and one for decode. The decode table adds the state
floor: the time to read and write the f32 state once at the measured copy bandwidth, and the ratio to it.
"""
import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def eq(r):
    v = r.get("bitwise_equal_ref")
    return "-" if v is None else ("yes" if v else "**NO**")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rs = rows(sys.argv[1])
    if not rs:
        sys.exit("no JSON lines in " + sys.argv[1])
    for backend in sorted({r["backend"] for r in rs}):
        r0 = next(r for r in rs if r["backend"] == backend)
        print(f"{backend}: {r0['device']}, {r0['threads']} threads: FMA peak {r0['peak_gflops']:.1f} GFLOP/s, "
              f"copy {r0['peak_gbps']:.1f} GB/s (read + written)\n")
    print("Prefill (B=1):\n")
    print("| kernel | backend | T | ms (median) | GFLOP/s | % FMA peak | GB/s | x floor | ==ref |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rs:
        if r["mode"] != "prefill":
            continue
        print(f"| {r['kernel']} | {r['backend']} | {r['T']} | {r['ms_median']:.3f} | {r['gflops']:.1f} | "
              f"{r['pct_peak_gflops']:.1f}% | {r['gbps']:.1f} | {r['ms_median'] / r['floor_ms']:.2f} | {eq(r)} |")
    print("\nDecode (T=1), pool rotated (pool MiB):\n")
    print("| kernel | backend | B | ms (median) | GB/s | % copy bw | state floor ms | x state floor | pool MiB | ==ref |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rs:
        if r["mode"] != "decode":
            continue
        state_bytes = 2.0 * r["B"] * r["Hv"] * r["Dk"] * r["Dv"] * 4.0
        floor_ms = state_bytes / (r["peak_gbps"] * 1e9) * 1e3
        print(f"| {r['kernel']} | {r['backend']} | {r['B']} | {r['ms_median']:.3f} | {r['gbps']:.1f} | "
              f"{r['pct_peak_gbps']:.1f}% | {floor_ms:.3f} | {r['ms_median'] / floor_ms:.2f} | {r['pool_mb']:.0f} | {eq(r)} |")


if __name__ == "__main__":
    main()
