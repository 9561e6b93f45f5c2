#!/usr/bin/env python3
"""Rounds of `gdn bench --json`, one run per kernel a round, alternating, and per shape the median and range over
the rounds of each run's ratios (time, % of the FMA peak, % of the copy rate, x floor; and the ratios of each run's
fastest call, a call the neighbours disturbed least, against the same best-of peaks): for a machine whose
neighbours move its peaks between runs, where one run's ratio is one draw. Extra arguments (after --) go to every
run. Each row goes to --out as it comes; an interrupt (Ctrl-C, or the TERM of `timeout`) summarizes the rounds so
far.

    python3 dev/cpu_rounds.py --gdn build/cpu/gdn --rounds 7 --kernel packed_avx512 --kernel packed_decode_avx512 \
        [--out rounds.jsonl] [-- --layout kv]
"""
import argparse
import json
import signal
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gdn", default="build/cpu/gdn")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernel", action="append", required=True)
    ap.add_argument("--out", help="every JSON line, with its round, to this file")
    ap.add_argument("extra", nargs="*", help="arguments for every gdn bench run (after --)")
    opt = ap.parse_args()
    rows = []
    sink = open(opt.out, "w") if opt.out else None
    try:
        for r in range(opt.rounds):
            for k in opt.kernel:
                out = subprocess.run([opt.gdn, "bench", "--json", "--kernel", k] + opt.extra, check=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
                for line in out.splitlines():
                    if line.strip():
                        row = json.loads(line)
                        row["round"] = r
                        rows.append(row)
                        if sink:
                            sink.write(json.dumps(row) + "\n")
                            sink.flush()
            print("round %d done" % (r + 1), file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # (and SIGTERM, below): the rounds so far are summarized
        print("interrupted: %d rows" % len(rows), file=sys.stderr)
    summarize(rows)
    return 0


def summarize(rows):
    shapes = {}
    for row in rows:
        shapes.setdefault((row["mode"], row["B"], row["T"], row["kernel"]), []).append(row)

    def stat(xs, fmt):
        xs = [x for x in xs if x is not None]
        if not xs:
            return "-"
        return (fmt + " [" + fmt + ".." + fmt + "]") % (statistics.median(xs), min(xs), max(xs))

    print("%-8s %4s %5s %-22s %2s  %-26s %-22s %-22s %-19s %s" % (
        "mode", "B", "T", "kernel", "n", "ms median [range]", "%peak", "%bw", "x floor", "best call: %peak %bw"))
    for key in sorted(shapes):
        rs = shapes[key]
        floor = [r["ms_median"] / r["floor_ms"] if r.get("floor_ms") else None for r in rs]
        best = lambda f: [r[f] * r["ms_median"] / r["ms_min"] if r.get(f) is not None else None for r in rs]
        print("%-8s %4d %5d %-22s %2d  %-26s %-22s %-22s %-19s %s %s" % (
            key[0], key[1], key[2], key[3], len(rs), stat([r["ms_median"] for r in rs], "%.3f"),
            stat([r["pct_peak_gflops"] for r in rs], "%.1f"), stat([r["pct_peak_gbps"] for r in rs], "%.1f"),
            stat(floor, "%.2f"), stat(best("pct_peak_gflops"), "%.1f"), stat(best("pct_peak_gbps"), "%.1f")))
    sys.stdout.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `timeout` ends the rounds, not the summary
    sys.exit(main())
