#!/usr/bin/env python3
"""Markdown tables from the results files in bench/results/, one file per machine kind.

    python3 bench/tables.py bench/results/cpu_zen3.json     # print every table of one file
    python3 bench/tables.py --update docs/PERFORMANCE.md     # rewrite the generated blocks of a document

Two kinds of file:
  - CPU (`gdn bench --json`: one JSON object per line). Lines of both state layouts may share a file; a line's
    `layout` field tells them apart ("vk" where the field is absent: lines written before `gdn bench` had --layout,
    when it timed the default VK layout only). Tables: the measured floors, prefill (B=1) and decode (T=1). The
    decode table adds the state floor: the time to read and write the f32 state once at the measured copy
    bandwidth, and the ratio to it.
  - GPU (`bench/gpu_compare.py --out`: one JSON object with "meta", "results", "checks"). Tables: the machine and
    its floors, one row per shape (routed call per layout, the best libgdn call, FLA beside it), the checks.

--update rewrites, in place, every block of the document between a line

    <!-- tables: NAME [PART] [layout=vk|kv] -->

and the next line `<!-- /tables -->` with the tables of bench/results/NAME.json, and leaves every other line alone.
PART picks one table (CPU: machine, prefill, decode; GPU: machine, shapes, checks; default: all of them); layout=
picks the CPU lines of one layout (default: each layout present, in turn).
"""
import json
import os
import re
import sys
import textwrap

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
OPEN = re.compile(r"^<!-- tables: (\S+)((?: \S+)*) -->\s*$")
CLOSE = "<!-- /tables -->"


def load(path):
    """('gpu', dict) or ('cpu', [line objects])"""
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and "results" in doc and "meta" in doc:
            return "gpu", doc
    except json.JSONDecodeError:
        pass
    rows = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    if not rows:
        sys.exit("no results in " + path)
    return "cpu", rows


# ---- CPU: gdn bench --json lines ----

def layout_of(r):
    return r.get("layout", "vk")


def eq(r):
    v = r.get("bitwise_equal_ref")
    return "-" if v is None else ("yes" if v else "**NO**")


def cpu_machine(rs):
    out = []
    for backend in sorted({r["backend"] for r in rs}):
        r0 = next(r for r in rs if r["backend"] == backend)
        out.append(f"{backend}: {r0['device']}, {r0['threads']} threads, state layout {layout_of(r0).upper()}: "
                   f"FMA peak {r0['peak_gflops']:.1f} GFLOP/s, copy {r0['peak_gbps']:.1f} GB/s (read + written), "
                   f"measured in the run")
    return out


def cpu_prefill(rs):
    out = ["| kernel | backend | T | ms (median) | GFLOP/s | % FMA peak | GB/s | x floor | ==ref |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rs:
        if r["mode"] == "prefill":
            out.append(f"| {r['kernel']} | {r['backend']} | {r['T']} | {r['ms_median']:.3f} | {r['gflops']:.1f} | "
                       f"{r['pct_peak_gflops']:.1f}% | {r['gbps']:.1f} | {r['ms_median'] / r['floor_ms']:.2f} | {eq(r)} |")
    return out


def cpu_decode(rs):
    out = ["| kernel | backend | B | ms (median) | GB/s | % copy bw | state floor ms | x state floor | pool MiB | ==ref |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rs:
        if r["mode"] == "decode":
            state_bytes = 2.0 * r["B"] * r["Hv"] * r["Dk"] * r["Dv"] * 4.0
            floor_ms = state_bytes / (r["peak_gbps"] * 1e9) * 1e3
            out.append(f"| {r['kernel']} | {r['backend']} | {r['B']} | {r['ms_median']:.3f} | {r['gbps']:.1f} | "
                       f"{r['pct_peak_gbps']:.1f}% | {floor_ms:.3f} | {r['ms_median'] / floor_ms:.2f} | "
                       f"{r['pool_mb']:.0f} | {eq(r)} |")
    return out


CPU_PARTS = {"machine": cpu_machine, "prefill": cpu_prefill, "decode": cpu_decode}


def cpu_tables(rows, parts, layout):
    layouts = [layout] if layout else sorted({layout_of(r) for r in rows}, key=lambda x: (x != "vk", x))
    blocks = []
    for lay in layouts:
        rs = [r for r in rows if layout_of(r) == lay]
        if not rs:
            sys.exit(f"no lines of layout {lay}")
        for part in parts or CPU_PARTS:
            blocks.append(CPU_PARTS[part](rs))
    return blocks


# ---- GPU: bench/gpu_compare.py --out ----

def is_ours(r):
    return not r["impl"].startswith("fla_")


def gpu_machine(doc):
    m = doc["meta"]
    return [f"{m['device']}: {m['sms']} SMs, {m['max_sm_clock_mhz']:.0f} MHz max, fp32 peak "
            f"{m['fp32_peak_tflops']:.1f} TFLOP/s (SMs x 128 lanes x 2 flop x clock); measured in the run: copy "
            f"bandwidth {m['copy_bandwidth_tbps']:.2f} TB/s (read + written), a trivial kernel "
            f"{m['call_floor_us']:.2f} us per call. CUDA {m['cuda']}, torch {m['torch']}, triton {m['triton']}, "
            f"fla {m['fla']}."]


def gpu_shapes(doc):
    rs = doc["results"]
    out = ["| shape | routed, KV (kernel) | routed, VK (kernel) | best libgdn | % fp32 peak | state TB/s | FLA chunk | "
           "FLA fused recurrent |",
           "|---|---|---|---|---:|---|---:|---:|"]
    shapes = []
    for r in rs:
        key = (r["kind"], r["B"], r["T"])
        if key not in shapes:
            shapes.append(key)
    for kind, B, T in shapes:
        here = [r for r in rs if (r["kind"], r["B"], r["T"]) == (kind, B, T)]
        name = f"prefill T={T}" if kind == "prefill" else f"decode B={B}"

        def us(x):
            return f"{x:.1f}" if x >= 1000 else f"{x:.2f}"

        routed_kernel = {}
        cells = []
        for lay in ("kv", "vk"):
            first = next((r for r in here if r["layout"] == lay and r["impl"].startswith("routed=")), None)
            last = next((r for r in here if r["layout"] == lay and r["impl"] == "routed_last"), None)
            inplace = next((r for r in here if r["layout"] == lay and r["impl"] == "routed_in_place"), None)
            if first is None:
                cells.append("-")
                continue
            routed_kernel[lay] = first["impl"].split("=", 1)[1]
            c = us(first["median_us"]) + (f" / {us(last['median_us'])}" if last else "") + f" us ({routed_kernel[lay]}"
            cells.append(c + (f"; in place {us(inplace['median_us'])})" if inplace else ")"))
        ours = [r for r in here if is_ours(r) and r["impl"] != "routed_in_place"]
        best = min(ours, key=lambda r: r["median_us"])
        bname = routed_kernel.get(best["layout"], "?") if best["impl"].startswith("routed") else best["impl"]
        state = f"{best['state_tbps']:.2f}"
        if kind == "decode":
            state += f" ({100 * best['copy_bw_fraction']:.1f}% of copy)"

        def fla(impl):
            r = next((r for r in here if r["impl"] == impl), None)
            return us(r["median_us"]) + " us" if r else "-"

        out.append(f"| {name} | {cells[0]} | {cells[1]} | {us(best['median_us'])} us ({bname}, "
                   f"{best['layout'].upper()}) | {100 * best['fp32_peak_fraction']:.1f}% | {state} | "
                   f"{fla('fla_chunk')} | {fla('fla_fused_recurrent')} |")
    return out


def sci(x):
    """4.1e-3, not 4.1e-03"""
    m, e = f"{x:.1e}".split("e")
    return f"{m}e{int(e)}"


def gpu_checks(doc):
    checks = doc.get("checks", [])
    bitwise = [c for c in checks if "ok" in c]
    failed = [c for c in bitwise if not c["ok"]]
    out = [f"Checks in the run: {len(bitwise)} bitwise ({len(failed)} failed): at every shape, every libgdn kernel "
           f"and variant timed returned the same bits in each layout, and the KV layout the same bits as VK."]
    for impl, label in (("fla_chunk", "`chunk_gated_delta_rule`"),
                        ("fla_fused_recurrent", "`fused_recurrent_gated_delta_rule`")):
        rel = [c for c in checks if c.get("check") == f"libgdn vs {impl} relative L2"]
        if rel:
            out[0] += (f" libgdn against FLA's {label} on the same inputs, relative L2, the largest over the shapes: "
                       f"y {sci(max(c['y_rel'] for c in rel))}, state {sci(max(c['state_rel'] for c in rel))}.")
    return out


GPU_PARTS = {"machine": gpu_machine, "shapes": gpu_shapes, "checks": gpu_checks}


def gpu_tables(doc, parts):
    return [GPU_PARTS[part](doc) for part in parts or GPU_PARTS]


# ---- driver ----

def tables(path, parts=(), layout=None):
    kind, data = load(path)
    known = CPU_PARTS if kind == "cpu" else GPU_PARTS
    for p in parts:
        if p not in known:
            sys.exit(f"{path}: no table '{p}' for a {kind} file (one of {', '.join(known)})")
    if kind == "cpu":
        return cpu_tables(data, parts, layout)
    if layout:
        sys.exit(f"{path}: layout= is for CPU files")
    return gpu_tables(data, parts)


def render(blocks):
    """tables as they are; a line of prose wrapped at 116 columns"""
    def lines(b):
        for line in b:
            if line.startswith("|"):
                yield line
            else:
                yield from textwrap.wrap(line, 116, break_long_words=False, break_on_hyphens=False)
    return "\n\n".join("\n".join(lines(b)) for b in blocks)


def update(doc_path):
    with open(doc_path) as f:
        lines = f.read().split("\n")
    out, i, n = [], 0, 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            if lines[i].strip() == CLOSE:
                sys.exit(f"{doc_path}:{i + 1}: {CLOSE} without an opening marker")
            out.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == CLOSE), None)
        if end is None:
            sys.exit(f"{doc_path}:{i + 1}: no {CLOSE} after this marker")
        if any(OPEN.match(lines[j]) for j in range(i + 1, end)):
            sys.exit(f"{doc_path}:{i + 1}: a marker inside this block")
        args = m.group(2).split()
        layout = next((a.split("=", 1)[1] for a in args if a.startswith("layout=")), None)
        parts = [a for a in args if not a.startswith("layout=")]
        body = render(tables(os.path.join(RESULTS, m.group(1) + ".json"), parts, layout))
        out += [lines[i], "", body, "", lines[end]]
        i = end + 1
        n += 1
    text = "\n".join(out)
    with open(doc_path, "w") as f:
        f.write(text)
    print(f"{doc_path}: {n} blocks rewritten")


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--update":
        update(args[1])
    elif len(args) == 1 and not args[0].startswith("-"):
        print(render(tables(args[0])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
