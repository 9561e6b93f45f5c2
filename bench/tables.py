#!/usr/bin/env python3
"""Markdown tables from the results files in bench/results/, one file per machine and bench.

    python3 bench/tables.py bench/results/cpu_zen3.json     # print every table of one file
    python3 bench/tables.py --update docs/PERFORMANCE.md     # rewrite the generated blocks of a document
    python3 bench/tables.py --check docs/PERFORMANCE.md      # exit 1 if a generated block is out of date

The kinds of file (told apart by their content):
  cpu          `gdn bench --json` (one JSON object per line). Lines of both state layouts may share a file; a line's
               `layout` field tells them apart ("vk" where the field is absent: lines written before `gdn bench` had
               --layout). Tables: machine (the floors measured in the run), prefill (B=1), decode (T=1; with the state
               floor: the f32 state read and written once at the measured copy bandwidth).
  gpu          `bench/gpu_compare.py --out` ("meta", "results", "checks"). Tables: machine, shapes (one row per shape:
               routed call per layout, the best libgdn call, FLA beside it), checks.
  layer        `gdn layer --json` lines ("op": "layer"). Table: layer (a row per point and kernel, against its floor;
               kernels=a,b and hv=N keep those rows).
  layer_ggml   `bench/ggml_layer.sh -- --json` lines. Tables: ggml (both sides per point, the runs of the file side
               by side), checks.
  layer_peers  `bench/layer_peers.py --out` ("meta", "points"). Tables: machine, peers (a row per point), agreement.
  decode_peers `bench/decode_peers.py --out` runs gathered under "runs". Tables: machine, peers (per run: a row per
               point, a column per implementation, us and x floor), checks. run=N picks one run (from 1).
  chunked      `bench/chunked_h200.py --out` ("rows" with "us" per implementation). Tables: machine, chunked.
  accuracy     `bench/chunk_accuracy.py --out` ("rows" with "y_err"). Table: accuracy.
  distributed  `bench/distributed_cpu.py` (a case per world size). Table: accuracy.
  log          a text log (NAME.txt) of `gdn bench` and `bench/ggml_delta.sh` runs, sections opened by "== " lines or
               by "# " comment lines after a blank line. Tables: bench (per section with `gdn bench` rows: its
               machine line and rows; kernels=a,b and mode=prefill|decode keep those rows), ggml (per section with ggml_delta rows),
               rounds (per section with `dev/cpu_rounds.py` summaries). run=N picks the N-th section (from 1) that
               has the part's rows.

--update rewrites, in place, every block of the document between a line

    <!-- tables: NAME [PART] [key=value ...] -->

and the next line `<!-- /tables -->` with the tables of bench/results/NAME.json (or NAME.txt), and leaves every
other line alone. PART picks one table (default: all of the kind's). Options: layout=vk|kv (cpu: that layout's
lines only; default: each layout present, in turn), run=N (decode_peers, log), kernels=a,b (layer, log bench), hv=N
(layer), mode=prefill|decode (log bench).
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
    """(kind, data): see the module's docstring for the kinds"""
    with open(path) as f:
        text = f.read()
    if path.endswith(".txt"):
        return "log", text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        if "results" in doc and "meta" in doc:
            return "gpu", doc
        if "points" in doc and "meta" in doc:
            return "layer_peers", doc
        if "runs" in doc:
            return "decode_peers", doc
        rows = doc.get("rows")
        if rows and "us" in rows[0]:
            return "chunked", doc
        if rows and "y_err" in rows[0]:
            return "accuracy", doc
        if doc and all(isinstance(v, dict) and "world" in v for v in doc.values()):
            return "distributed", doc
        sys.exit("no kind of results file known for " + path)
    lines = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    if not lines:
        sys.exit("no results in " + path)
    op = lines[0].get("op", "")
    if op == "layer":
        return "layer", lines
    if op.startswith("layer_ggml"):
        return "layer_ggml", lines
    return "cpu", lines


def us(x):
    """a time in us: 4 significant figures, at most 2 decimals"""
    return f"{x:.1f}" if x >= 1000 else f"{x:.2f}" if x < 100 else f"{x:.1f}"


def sci(x):
    """4.1e-3, not 4.1e-03"""
    m, e = f"{x:.1e}".split("e")
    return f"{m}e{int(e)}"


def span(xs, fmt=sci):
    """'a' or 'a .. b' over the values ('0' where all are 0)"""
    if fmt is sci and max(xs) == 0:
        return "0"
    lo, hi = fmt(min(xs)), fmt(max(xs))
    return lo if lo == hi else f"{lo} .. {hi}" if fmt is sci else f"{lo}-{hi}"


# ---- cpu: gdn bench --json lines ----

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


def cpu_tables(rows, parts, opts):
    layout = opts.get("layout")
    layouts = [layout] if layout else sorted({layout_of(r) for r in rows}, key=lambda x: (x != "vk", x))
    blocks = []
    for lay in layouts:
        rs = [r for r in rows if layout_of(r) == lay]
        if not rs:
            sys.exit(f"no lines of layout {lay}")
        for part in parts or CPU_PARTS:
            blocks.append(CPU_PARTS[part](rs))
    return blocks


# ---- gpu: bench/gpu_compare.py --out ----

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

        def t(x):
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
            c = t(first["median_us"]) + (f" / {t(last['median_us'])}" if last else "") + f" us ({routed_kernel[lay]}"
            cells.append(c + (f"; in place {t(inplace['median_us'])})" if inplace else ")"))
        ours = [r for r in here if is_ours(r) and r["impl"] != "routed_in_place"]
        best = min(ours, key=lambda r: r["median_us"])
        bname = routed_kernel.get(best["layout"], "?") if best["impl"].startswith("routed") else best["impl"]
        state = f"{best['state_tbps']:.2f}"
        if kind == "decode":
            state += f" ({100 * best['copy_bw_fraction']:.1f}% of copy)"

        def fla(impl):
            r = next((r for r in here if r["impl"] == impl), None)
            return t(r["median_us"]) + " us" if r else "-"

        out.append(f"| {name} | {cells[0]} | {cells[1]} | {t(best['median_us'])} us ({bname}, "
                   f"{best['layout'].upper()}) | {100 * best['fp32_peak_fraction']:.1f}% | {state} | "
                   f"{fla('fla_chunk')} | {fla('fla_fused_recurrent')} |")
    return out


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


# ---- layer: gdn layer --json lines ----

def layer_point(r):
    if r["floor"] == "delta":
        return f"prefill T={r['n']}"
    if r["n"] == 1:
        return f"decode B={r['B']}"
    return f"verify n={r['n']}, B={r['B']}" + (", k=0" if r["commit"] == 0 else "")


def layer_tables(lines, parts, opts):
    keep, hv = opts.get("kernels"), opts.get("hv")
    rows = [r for r in lines if r.get("op") == "layer" and (not keep or r["kernel"] in keep.split(","))
            and (not hv or r["Hv"] == int(hv))]
    if not rows:
        sys.exit("no layer rows left by kernels= and hv=")
    out = ["| Hv | point | kernel | backend | us (median) | floor us | x floor | ==ref |",
           "|---:|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        floor = f"{us(r['floor_us'])} ({'recurrence alone' if r['floor'] == 'delta' else 'copy'})"
        same = {1: "yes", 0: "**NO**"}.get(r["equal"], "-")
        out.append(f"| {r['Hv']} | {layer_point(r)} | {r['kernel']} | {r['backend']} | {us(r['us'])} | {floor} | "
                   f"{r['us'] / r['floor_us']:.2f} | {same} |")
    return [out]


LAYER_PARTS = {"layer": None}


# ---- layer_ggml: bench/ggml_layer.sh -- --json lines ----

def ggml_point(r):
    if r["n"] == 1:
        return f"decode n=1, {'cold (' + str(r['sets']) + ' sets)' if r['cold'] else 'hot'}"
    return f"prefill T={r['n']}"


def ms_or_us(x):
    return f"{x / 1e3:.1f} ms" if x >= 10000 else f"{x:.0f} us"


def layer_ggml_table(lines):
    rows = [r for r in lines if r["op"] == "layer_ggml"]
    runs = sorted({r["run"] for r in rows})
    keys = []
    for r in rows:
        k = (r["threads"], r["n"], r["sets"], r["cold"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: -k[0])
    head = " / ".join(f"run {n}" for n in runs)
    out = [f"| threads | point | ggml chain ({head}) | ggml, no write-back | libgdn `staged` | ggml / libgdn | "
           f"no write-back / libgdn |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    for k in keys:
        side = {}
        for r in rows:
            if (r["threads"], r["n"], r["sets"], r["cold"]) == k:
                side[(r["side"], r["run"])] = r
        any_r = next(r for r in rows if (r["threads"], r["n"], r["sets"], r["cold"]) == k)

        def cell(name):
            return " / ".join(ms_or_us(side[(name, n)]["us"]) if (name, n) in side else "-" for n in runs)

        def ratio(name):
            return " / ".join(f"{side[(name, n)]['us'] / side[('libgdn', n)]['us']:.2f}x"
                              if (name, n) in side and ("libgdn", n) in side else "-" for n in runs)

        out.append(f"| {k[0]} | {ggml_point(any_r)} | {cell('ggml')} | {cell('ggml_nowb')} | {cell('libgdn')} | "
                   f"**{ratio('ggml')}** | {ratio('ggml_nowb')} |")
    return out


def layer_ggml_checks(lines):
    cs = [r for r in lines if r["op"] == "layer_ggml_check"]
    if not cs:
        return ["No checks in the file."]
    return [f"Checks ({len(cs)}, one call each from the same pools, libgdn as the reference): y relative L2 "
            f"{span([c['y_rel_l2'] for c in cs])} (max |dy| {span([c['y_max_abs'] for c in cs])}), final state "
            f"{span([c['state_rel_l2'] for c in cs])}, history relative L2 "
            f"{span([c['hist_rel_l2'] for c in cs])}."]


LAYER_GGML_PARTS = {"ggml": layer_ggml_table, "checks": layer_ggml_checks}


# ---- layer_peers: bench/layer_peers.py --out ----

def peers_point(p):
    if p["kind"] == "decode":
        return f"decode B={p['B']}"
    if p["kind"] == "verify":
        return f"verify n={p['n']}, B={p['B']}"
    return f"prefill T={p['T']}"


def layer_peers_machine(doc):
    m = doc["meta"]
    st = m.get("transformers_stages", {})
    picked = ", ".join(f"{k} {v.rsplit('.', 1)[-1]}" for k, v in st.items())
    return [f"{m['device']}, Hk {m['Hk']}, Hv {m['Hv']}, D {m['D']}, {m['dtype']}, state layout "
            f"{m['layout'].upper()}; copy bandwidth measured in the run {m['copy_bandwidth_tbps']:.2f} TB/s. torch "
            f"{m['torch']}, triton {m['triton']}, transformers {m['transformers']} (its stages: {picked}), "
            f"{m['fla'].split(' (')[0]}."]


def layer_peers_points(doc):
    """decode, verify, prefill; by B, then by window"""
    order = {"decode": 0, "verify": 1, "prefill": 2}
    return sorted(doc["points"], key=lambda p: (order[p["kind"]], p["B"], p["n"]))


def layer_peers_table(doc):
    out = ["| point | libgdn routed (kernel) | k = 0 | floor: all / k = 0 | x floor | cuda_fused | cuda_staged | "
           "transformers | fla_chain | fla_chain_swap | fla_chain_verify |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in layer_peers_points(doc):
        rows = {r["impl"]: r for r in p["rows"]}

        def t(impl):
            r = rows.get(impl)
            return us(r["median_us"]) if r and r.get("median_us") is not None else "-"

        routed = rows["libgdn routed"]
        k0 = rows.get("libgdn routed k=0")
        if p["kind"] == "prefill":
            floor, ratio = "-", "-"
        else:
            floor = us(p["state_hist_floor_us"]) + (f" / {us(p['state_hist_read_floor_us'])}" if k0 else "")
            ratio = f"{routed['median_us'] / p['state_hist_floor_us']:.2f}" + (
                f" / {k0['median_us'] / p['state_hist_read_floor_us']:.2f}" if k0 else "")
        out.append(f"| {peers_point(p)} | {t('libgdn routed')} ({routed['kernel_run']}) | {t('libgdn routed k=0')} | "
                   f"{floor} | {ratio} | {t('libgdn cuda_fused')} | {t('libgdn cuda_staged')} | {t('transformers')} | "
                   f"{t('fla_chain')} | {t('fla_chain_swap')} | {t('fla_chain_verify')} |")
    return out


def layer_peers_agreement(doc):
    rows = [r for p in doc["points"] for r in p["rows"] if r.get("median_us") is not None]

    def of(prefix, key):
        xs = [r[key] for r in rows if r["impl"].startswith(prefix) and r.get(key) is not None]
        return span(xs) if xs else "-"

    ours = [r for r in rows if r["impl"].startswith("libgdn")]
    same = all(r["y_rel"] == 0 and r.get("state_rel", 0) in (0, None) for r in ours)
    k0 = [r for r in ours if r["impl"].endswith("k=0")]
    untouched = all(r.get("pools_untouched") and r.get("y_bitwise_commit_all") for r in k0)
    hist = all(r["hist_equal"] for r in rows if r.get("hist_equal") is not None)
    bits = "returned the routed call's bits" if same else "**differed from the routed call**"
    hists = "equal everywhere" if hist else "**not equal**"
    k0_says = ("left both pools untouched with y bitwise the committing call's" if untouched
               else "**wrote a pool or changed y**")
    return [f"Agreement, one call from the same pools, normwise relative to a float64 torch reference of the layer: "
            f"libgdn y {of('libgdn', 'y_rel_f64')}, state {of('libgdn', 'state_rel_f64')}; transformers y "
            f"{of('transformers', 'y_rel_f64')}, state {of('transformers', 'state_rel_f64')}; fla's chain y "
            f"{of('fla_chain', 'y_rel_f64')}, state {of('fla_chain', 'state_rel_f64')}. Every libgdn kernel {bits}; "
            f"histories {hists}; k = 0 {k0_says}."]


LAYER_PEERS_PARTS = {"machine": layer_peers_machine, "peers": layer_peers_table, "agreement": layer_peers_agreement}


# ---- decode_peers: bench/decode_peers.py runs ----

def run_point(r):
    return f"decode B={r['B']}" if r["point"] == "decode" else f"verify n={r['T']}, B={r['B']}"


def pick_runs(doc, opts):
    runs = list(enumerate(doc["runs"], 1))
    if "run" in opts:
        n = int(opts["run"])
        if not 1 <= n <= len(runs):
            sys.exit(f"run={n}: the file has {len(runs)} runs")
        runs = [runs[n - 1]]
    return runs


def decode_peers_machine(doc, opts):
    out = []
    for n, run in pick_runs(doc, opts):
        m = run["meta"]
        peers = ", ".join(f"{k} {m[k]}" for k in ("flashinfer", "fla") if m.get(k))
        out.append(f"Run {n}: {run['note']}. {m['device']}; measured in the run: copy bandwidth "
                   f"{m['copy_bandwidth_tbps']:.2f} TB/s (read + written), a trivial kernel "
                   f"{m['call_floor_us']:.2f} us per call. torch {m['torch']}, {peers}.")
    return out


def decode_peers_table(doc, opts):
    blocks = []
    for n, run in pick_runs(doc, opts):
        impls, points = [], []
        for r in run["rows"]:
            if r["impl"] not in impls:
                impls.append(r["impl"])
            if (r["point"], r["B"], r["T"]) not in points:
                points.append((r["point"], r["B"], r["T"]))
        out = [f"| run {n}: point | floor us | " + " | ".join(impls) + " |",
               "|---|---:|" + "---:|" * len(impls)]
        for pt in points:
            here = {r["impl"]: r for r in run["rows"] if (r["point"], r["B"], r["T"]) == pt}
            r0 = next(iter(here.values()))
            cells = []
            for impl in impls:
                r = here.get(impl)
                if r is None:
                    cells.append("-")
                    continue
                loop = "" if r["mode"] == "graph" else ", loop"
                cells.append(f"{us(r['us'])} ({r['over_floor']:.2f}x{loop})")
            out.append(f"| {run_point(r0)} | {us(r0['floor_us'])} | " + " | ".join(cells) + " |")
        blocks.append(out)
    return blocks


def decode_peers_checks(doc, opts):
    out = []
    for n, run in pick_runs(doc, opts):
        cs = run["checks"]
        bit = [c for c in cs if c["bitwise"] is not None]
        bad = [c for c in bit if not c["bitwise"]]
        text = (f"Run {n}'s checks, against libgdn_fla's y and state from the same pool: {len(bit)} bitwise between "
                f"libgdn's rows ({len(bad)} differ)")
        peers = []
        for impl in dict.fromkeys(c["against"] for c in cs if c["bitwise"] is None):
            here = [c for c in cs if c["against"] == impl]
            peers.append(f"{impl} y {span([c['y_rel'] for c in here])}, state {span([c['state_rel'] for c in here])}")
        if peers:
            text += "; relative L2 over the points: " + "; ".join(peers)
        out.append(text + ".")
    return out


def decode_peers_tables(doc, parts, opts):
    blocks = []
    for part in parts or ("machine", "peers", "checks"):
        got = {"machine": decode_peers_machine, "peers": decode_peers_table, "checks": decode_peers_checks}[part](
            doc, opts)
        blocks += got if part == "peers" else [got]
    return blocks


DECODE_PEERS_PARTS = {"machine": None, "peers": None, "checks": None}


# ---- chunked: bench/chunked_h200.py --out ----

def chunked_machine(doc):
    s = doc["shape"]
    return [f"{doc['device']}: Hk {s['Hk']}, Hv {s['Hv']}, D {s['D']}, {s['dtype']} q, k, v; a bf16 matmul of "
            f"8192^3 measured in the run: {doc['peak_tflops']:.0f} TFLOP/s."]


def chunked_table(doc):
    fi = any("flashinfer" in r["us"] for r in doc["rows"])  # runs with FlashInfer beside fla
    acc = any(r.get("accuracy") for r in doc["rows"])
    out = ["| point | cuda_chunked us |" + (" FlashInfer us | FlashInfer / ours |" if fi else "") +
           " fla chunk us | fla / ours | exact recurrence us | TFLOP/s | of the matmul rate |" +
           (" o rel. L2 vs exact: ours / FlashInfer / fla |" if acc else ""),
           "|---|---:|" + ("---:|---:|" if fi else "") + "---:|---:|---:|---:|---:|" + ("---|" if acc else "")]
    for r in doc["rows"]:
        t = r["us"]
        opt = lambda n: us(t[n]) if n in t else "-"  # noqa: E731
        ratio = lambda n: f"{t[n] / t['libgdn_chunked']:.2f}" if n in t else "-"  # noqa: E731
        name = r["point"]
        if len(r["lengths"]) > 1 and name.startswith("B="):
            name = f"{len(r['lengths'])} windows of {r['lengths'][0]}"
        elif name.startswith("B=1 "):
            name = name[4:]
        elif name == "varlen mixed":
            name = f"varlen mixed ({len(r['lengths'])} windows of {min(r['lengths'])} .. {max(r['lengths'])}, " \
                   f"{sum(r['lengths'])} tokens)"
        a = r.get("accuracy", {})
        err = " / ".join(sci(a[n]["o_rel_l2"]) if n in a else "-" for n in ("libgdn_chunked", "flashinfer", "fla_chunk"))
        out.append(f"| {name} | {us(t['libgdn_chunked'])} |" + (f" {opt('flashinfer')} | {ratio('flashinfer')} |" if fi else "")
                   + f" {opt('fla_chunk')} | {ratio('fla_chunk')} | {opt('libgdn_exact')} | {r['tflops']:.1f} | "
                   f"{100 * r['tflops'] / r['peak_tflops']:.1f}% |" + (f" {err} |" if acc else ""))
    return out


CHUNKED_PARTS = {"machine": chunked_machine, "chunked": chunked_table}


# ---- accuracy: bench/chunk_accuracy.py --out ----

def accuracy_table(doc):
    gates = {"ordinary": "ordinary", "zero": "exact zero every 97th token", "huge": "log-decays down to -50 per token"}
    impls = [("libgdn_chunked", "cuda_chunked"), ("libgdn", "exact (routed)"), ("fla_chunk", "fla chunk"),
             ("fla_fused_recurrent", "fla fused recurrent"), ("flashinfer_chunk", "FlashInfer chunk")]
    impls = [(i, label) for i, label in impls if any(r["impl"] == i for r in doc["rows"])]  # those the run had
    out = ["| gates | T | " + " | ".join(f"{label}: y / state" for _, label in impls) + " | y rounded to bf16 |",
           "|---|---:|" + "---|" * len(impls) + "---:|"]
    keys = []
    for r in doc["rows"]:
        if (r["gate"], r["T"]) not in keys:
            keys.append((r["gate"], r["T"]))
    for gate, T in keys:
        here = {r["impl"]: r for r in doc["rows"] if (r["gate"], r["T"]) == (gate, T)}

        def cell(impl):
            r = here.get(impl)
            if r is None:
                return "-"
            if not r["finite"]:
                return "NaN"
            return f"{sci(r['y_err'])} / {sci(r['state_err'])}"

        out.append(f"| {gates.get(gate, gate)} | {T} | " + " | ".join(cell(i) for i, _ in impls) +
                   f" | {sci(here['(y rounded to bf16)']['y_err'])} |")
    return out


ACCURACY_PARTS = {"accuracy": accuracy_table}


# ---- distributed: bench/distributed_cpu.py ----

def distributed_table(doc):
    cases = sorted(doc.values(), key=lambda c: c["world"])
    out = ["| op | how | W | y | final state | against one rank: y, state |", "|---|---|---|---:|---:|---|"]
    for op, name in (("delta", "gdn_delta"), ("layer", "layer step")):
        e0 = cases[0]["errors"][op]
        out.append(f"| {name} | one rank (exact) | 1 | {sci(e0['single'][0])} | {sci(e0['single'][1])} | |")
        if "transformers chunked" in e0:
            tc = e0["transformers chunked"]
            out.append(f"| {name} | transformers' chunked | 1 | {sci(tc[0])} | {sci(tc[1])} | |")
        groups = []  # worlds whose rows read the same
        for c in cases:
            e = c["errors"][op]
            rel = e["cp/single"]
            versus = "bitwise" if rel == [0.0, 0.0] else f"{sci(rel[0])}, {sci(rel[1])}"
            if op == "layer":
                hist = "too" if versus == "bitwise" else "bitwise"
                versus += f" (history {hist})" if c["layer_history_equal"] else " (history **differs**)"
            row = (sci(e["cp"][0]), sci(e["cp"][1]), versus)
            if groups and groups[-1][1] == row:
                groups[-1][0].append(c["world"])
            else:
                groups.append(([c["world"]], row))
        for worlds, (y, s, versus) in groups:
            out.append(f"| {name} | context parallel | {', '.join(map(str, worlds))} | {y} | {s} | {versus} |")
    return out


DISTRIBUTED_PARTS = {"accuracy": distributed_table}


# ---- log: text logs of gdn bench, bench/ggml_delta.sh and dev/cpu_rounds.py ----

NUM = r"(-|[\d.]+)"
BENCH_ROW = re.compile(r"^(prefill|decode)\s+(\d+)\s+(\d+)\s+(\S+)\s+(cpu|cuda)\s+" + NUM + r"\s+" + NUM + r"\s+"
                       + NUM + r"%\s+" + NUM + r"\s+" + NUM + r"%\s+" + NUM + r"\s+" + NUM + r"x\s+(\S+)")
BENCH_CPU = re.compile(r"^CPU: (.*), (\d+) threads, (.*?)FMA peak ([\d.]+) GFLOP/s, copy ([\d.]+) GB/s")
GGML_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(yes|no)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x")
GGML_CHECK = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(yes|no)\s+(\S+)\s+check: y rel L2 (\S+) \(max \|dy\| (\S+)\), "
                        r"state (\S+)")
GGML_HEAD = re.compile(r"^ggml_delta: .*?(\d+) threads .*memcpy floor ([\d.]+) GB/s")
RANGE = r"([\d.]+) \[([\d.]+)\.\.([\d.]+)\]"
ROUNDS_TUPLE = re.compile(r"^#\s+\('(\w+)', (\d+), (\d+), '(\w+)'\) n (\d+) ms med " + RANGE + r" peak% med " + RANGE
                          + r" bw% med " + RANGE + r" /floor med " + RANGE)
ROUNDS_ROW = re.compile(r"^#\s+(prefill|decode)\s+(\d+)\s+(\d+) (\w+)\s+(\d+)\s+" + RANGE + r"\s+" + RANGE + r"\s+"
                        + RANGE + r"\s+" + RANGE)


def log_sections(text):
    """[[lines]]: a section opens at a '== ' line, or at a '# ' line after a blank line (or at the start)"""
    sections, prev = [[]], ""
    for line in text.splitlines():
        opens = line.startswith("== ") or (line.startswith("# ") and not line.startswith("#  ") and not prev.strip())
        if opens and sections[-1]:
            sections.append([])
        sections[-1].append(line)
        prev = line
    return sections


def val(x):
    return None if x == "-" else float(x)


def log_bench(lines, opts):
    rows = [m.groups() for m in map(BENCH_ROW.match, lines) if m]
    if not rows:
        return None
    keep, mode = opts.get("kernels"), opts.get("mode")
    rows = [r for r in rows if (not keep or r[3] in keep.split(",")) and (not mode or r[0] == mode)]
    blocks = []
    cpu = next((m for m in map(BENCH_CPU.match, lines) if m), None)
    if cpu:
        threads = cpu.group(2) + (" thread" if cpu.group(2) == "1" else " threads")
        blocks.append([f"{cpu.group(1)}, {threads}: {cpu.group(3)}FMA peak {cpu.group(4)} GFLOP/s, "
                       f"copy {cpu.group(5)} GB/s (read + written), measured in the run"])
    out = ["| mode | B | T | kernel | ms (median) | GFLOP/s | % FMA peak | % copy bw | x floor | ==ref |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for mode, B, T, kernel, be, ms, gf, pk, gb, bw, floor, ratio, same in rows:
        out.append(f"| {mode} | {B} | {T} | {kernel} | {ms} | {gf} | {pk}% | {bw}% | {ratio} | {same} |")
    return blocks + [out]


def log_ggml(lines, opts):
    rows = [m.groups() for m in map(GGML_ROW.match, lines) if m]
    if not rows:
        return None
    checks = [m.groups() for m in map(GGML_CHECK.match, lines) if m]
    head = next((m for m in map(GGML_HEAD.match, lines) if m), None)
    out = ["| B | T | state sets | cold | libgdn kernel | ggml ms | ggml, no state copy-back ms | libgdn ms | "
           "ggml / libgdn | no copy-back / libgdn |",
           "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    for B, T, sets, cold, kernel, g, nowb, ours, ratio in rows:
        out.append(f"| {B} | {T} | {sets} | {cold} | {kernel} | {g} | {nowb} | {ours} | **{ratio}x** | "
                   f"{float(nowb) / float(ours):.2f}x |")
    if not (head or checks):
        return [out]
    text = f"{head.group(1)} threads on each side. " if head else ""
    if checks:
        text += (f"Checked at every point, libgdn against ggml: y relative L2 {span([float(c[5]) for c in checks])}, "
                 f"state {span([float(c[7]) for c in checks])}.")
    return [[text.strip()], out]


def log_rounds(lines, opts):
    rows = []
    for line in lines:
        m = ROUNDS_TUPLE.match(line) or ROUNDS_ROW.match(line)
        if m:
            rows.append(m.groups())
    if not rows:
        return None
    out = ["| mode | B | T | kernel | rounds | ms: median [range] | % FMA peak | % copy bw | x floor |",
           "|---|---:|---:|---|---:|---|---|---|---|"]
    for g in rows:
        mode, B, T, kernel, n = g[:5]
        ms, pk, bw, fl = (f"{g[i]} [{g[i + 1]}-{g[i + 2]}]" for i in (5, 8, 11, 14))
        out.append(f"| {mode} | {B} | {T} | {kernel} | {n} | {ms} | {pk} | {bw} | {fl} |")
    return [out]


LOG_PARTS = {"bench": log_bench, "ggml": log_ggml, "rounds": log_rounds}


def log_tables(text, parts, opts):
    blocks = []
    for part in parts or LOG_PARTS:
        found = [b for b in (LOG_PARTS[part](s, opts) for s in log_sections(text)) if b]
        if "run" in opts:
            n = int(opts["run"])
            if not 1 <= n <= len(found):
                sys.exit(f"run={n}: {len(found)} sections with {part} rows")
            found = [found[n - 1]]
        blocks += [b for f in found for b in f]
    return blocks


# ---- driver ----

def simple(parts_of):
    """a kind whose tables each take the whole file"""
    def run(data, parts, opts):
        return [parts_of[p](data) for p in parts or parts_of]
    return run


KINDS = {
    "cpu": (CPU_PARTS, cpu_tables, {"layout"}),
    "gpu": (GPU_PARTS, simple(GPU_PARTS), set()),
    "layer": (LAYER_PARTS, layer_tables, {"kernels", "hv"}),
    "layer_ggml": (LAYER_GGML_PARTS, simple(LAYER_GGML_PARTS), set()),
    "layer_peers": (LAYER_PEERS_PARTS, simple(LAYER_PEERS_PARTS), set()),
    "decode_peers": (DECODE_PEERS_PARTS, decode_peers_tables, {"run"}),
    "chunked": (CHUNKED_PARTS, simple(CHUNKED_PARTS), set()),
    "accuracy": (ACCURACY_PARTS, simple(ACCURACY_PARTS), set()),
    "distributed": (DISTRIBUTED_PARTS, simple(DISTRIBUTED_PARTS), set()),
    "log": (LOG_PARTS, log_tables, {"run", "kernels", "mode"}),
}


def tables(path, parts=(), opts=None):
    opts = opts or {}
    kind, data = load(path)
    known, run, options = KINDS[kind]
    for p in parts:
        if p not in known:
            sys.exit(f"{path}: no table '{p}' for a {kind} file (one of {', '.join(known)})")
    for o in opts:
        if o not in options:
            sys.exit(f"{path}: no option {o}= for a {kind} file")
    return run(data, parts, opts)


def results_path(name):
    path = os.path.join(RESULTS, name + ".json")
    return path if os.path.exists(path) else os.path.join(RESULTS, name + ".txt")


def render(blocks):
    """tables as they are; a line of prose wrapped at 116 columns"""
    def lines(b):
        for line in b:
            if line.startswith("|"):
                yield line
            else:
                yield from textwrap.wrap(line, 116, break_long_words=False, break_on_hyphens=False)
    return "\n\n".join("\n".join(lines(b)) for b in blocks)


def rewrite(doc_path):
    """(the document with its generated blocks rewritten, the number of blocks)"""
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
        opts = dict(a.split("=", 1) for a in args if "=" in a)
        parts = [a for a in args if "=" not in a]
        body = render(tables(results_path(m.group(1)), parts, opts))
        out += [lines[i], "", body, "", lines[end]]
        i = end + 1
        n += 1
    return "\n".join(out), n


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] in ("--update", "--check"):
        text, n = rewrite(args[1])
        with open(args[1]) as f:
            same = f.read() == text
        if args[0] == "--check":
            print(f"{args[1]}: {n} blocks, {'in sync' if same else 'OUT OF DATE (run --update)'}")
            sys.exit(0 if same else 1)
        if not same:
            with open(args[1], "w") as f:
                f.write(text)
        print(f"{args[1]}: {n} blocks, {'rewritten' if not same else 'already in sync'}")
    elif len(args) == 1 and not args[0].startswith("-"):
        print(render(tables(args[0])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
