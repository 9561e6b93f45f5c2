#!/usr/bin/env python3
"""Plots of the benchmark results in bench/results/: time and fraction of the floor against T and against B, CPU and
GPU, the peers beside libgdn where a file has them.

    python3 bench/plots.py                              # every bench/results/*.json -> docs/plots/*.png + README.md
    python3 bench/plots.py --results DIR --out DIR      # other folders

Needs matplotlib (pip install matplotlib). Each *.json is recognised by its structure, not its name:
  - `bench/gpu_compare.py --out`: one object with "meta" and "results" (the recurrence on the GPU, FLA beside it);
  - `gdn bench --json`: lines with "mode" and "ms_median" (the recurrence on the CPU, each kernel and layout);
  - `gdn layer --json`: lines with "op": "layer" (the fused layer step, CPU and CUDA kernels);
  - `bench/ggml_layer.sh -- --json`: lines with "op": "layer_ggml" (the CPU layer step against ggml's op chain);
  - `bench/layer_peers.py --out`: one object with "meta" and "points" (the layer step against transformers and fla).
A file of another shape, or one that lacks what a plot needs, is skipped with a message (and listed as not drawn in
the README); the other plots are still drawn. Fraction of the floor = floor / measured time, each file's floor as it
defines it, measured in the same run (docs/PERFORMANCE.md, "How it is measured").
"""
import argparse
import glob
import json
import math
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
OUT = os.path.join(HERE, "..", "docs", "plots")
DPI = 100
plt = ticker = Line2D = None  # matplotlib, imported by main()


class Skip(Exception):
    """a plot that cannot be drawn from this file; the message says why"""


# ---------------------------------------------------------------- reading

def read_json(path):
    """('doc', object) for a file that is one JSON document, ('lines', [objects]) for JSON lines"""
    with open(path) as f:
        text = f.read()
    try:
        return "doc", json.loads(text)
    except json.JSONDecodeError:
        pass
    rows, bad = [], 0
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    if bad:
        print(f"  {os.path.basename(path)}: left out {bad} line%s that %s not JSON" % (("s", "are") if bad > 1
                                                                                   else ("", "is")))
    return "lines", rows


def classify(form, data):
    """the kind of results file, or None"""
    if form == "doc" and isinstance(data, dict):
        if isinstance(data.get("results"), list):
            return "delta_gpu"
        if isinstance(data.get("points"), list):
            return "layer_peers"
        if isinstance(data.get("rows"), list) and positive(data.get("peak_tflops")):
            return "chunked"
        return None
    if form != "lines" or not data:
        return None
    ops = {r.get("op") for r in data if isinstance(r, dict)}
    if "layer_ggml" in ops:
        return "layer_ggml"
    if "layer" in ops:
        return "layer"
    if any(isinstance(r, dict) and "mode" in r and "ms_median" in r for r in data):
        return "delta_cpu"
    return None


def having(rows, fields, what):
    """the rows that have every field (a number where the field is a time); says how many were left out"""
    keep, missing = [], {}
    for r in rows:
        lacks = [f for f in fields if not isinstance(r, dict) or r.get(f) is None]
        if lacks:
            for f in lacks:
                missing[f] = missing.get(f, 0) + 1
        else:
            keep.append(r)
    if missing:
        print(f"  {what}: left out %s" % ", ".join(f"{n} lacking '{f}'" for f, n in sorted(missing.items())))
    if not keep:
        raise Skip("no usable rows" + (" (%s)" % ", ".join(f"{n} lacking '{f}'" for f, n in sorted(missing.items()))
                                       if missing else ""))
    return keep


def positive(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and math.isfinite(x)


# ---------------------------------------------------------------- drawing

STYLES = {  # implementation -> line style; anything else gets the next colour of a spare cycle
    "libgdn routed": dict(color="C0", lw=2.2, marker="o"),
    "libgdn routed, VK": dict(color="C0", lw=2.2, marker="o"),
    "libgdn routed, KV": dict(color="C0", lw=1.6, marker="s", ls="--"),
    "libgdn routed k=0": dict(color="C9", lw=2.0, marker="o", ls="-."),
    "libgdn cuda_fused": dict(color="C2", lw=1.2, marker=".", ls=":"),
    "libgdn cuda_staged": dict(color="C8", lw=1.2, marker=".", ls=":"),
    "FLA chunk_gated_delta_rule": dict(color="C1", lw=1.8, marker="^"),
    "FLA fused_recurrent_gated_delta_rule": dict(color="C3", lw=1.8, marker="v"),
    "transformers Qwen3NextGatedDeltaNet": dict(color="C4", lw=1.8, marker="D"),
    "fla chain (state copied back)": dict(color="C1", lw=1.8, marker="^"),
    "fla chain (buffers swapped)": dict(color="C3", lw=1.8, marker="v"),
    "fla chain (no final state)": dict(color="C6", lw=1.6, marker="<", ls="-."),
    "ggml chain": dict(color="C5", lw=1.8, marker="^"),
    "ggml chain, no write-back": dict(color="C6", lw=1.6, marker="v"),
    "libgdn staged": dict(color="C0", lw=2.2, marker="o"),
}
KERNEL_COLORS = {"packed_decode_avx2": "C0", "packed_avx2": "C2", "portable": "C8", "ref": "C7", "staged": "C0",
                 "cuda_fused": "C2", "cuda_staged": "C1", "avx512": "C4"}
SPARE = ["C4", "C5", "C6", "C9", "C7", "C3"]


def style(label, base=None):
    if label in STYLES:
        return dict(STYLES[label])
    if base in KERNEL_COLORS:
        return dict(color=KERNEL_COLORS[base], lw=1.8, marker="o")
    i = sum(map(ord, label)) % len(SPARE)
    return dict(color=SPARE[i], lw=1.6, marker="o")


def us_label(v, _pos=None):
    if v >= 1e6:
        return f"{v / 1e6:g} s"
    if v >= 1e3:
        return f"{v / 1e3:g} ms"
    return f"{v:g} µs"


def pct_label(v, _pos=None):
    return f"{100 * v:g}%"


def log_y(ax, fmt):
    """a log y axis labelled at decades, or at 1-2-5 (finer) steps where the data span less"""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    span = math.log10(hi / lo) if lo > 0 and hi > lo else 9
    subs = (1.0,) if span > 3.2 else (1.0, 3.0) if span > 1.8 else (1.0, 2.0, 5.0) if span > 0.7 else \
        (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(fmt))
    ax.yaxis.set_minor_locator(ticker.LogLocator(base=10, subs="auto", numticks=30))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def x_ticks(ax, xs):
    ax.set_xscale("log")
    xs = sorted(set(xs))
    ax.set_xticks(xs, labels=[f"{x:g}" for x in xs])
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    if len(xs) == 1:
        ax.set_xlim(xs[0] / 2, xs[0] * 2)


def plot_series(ax, pts, st, label, lines=True):
    pts = sorted(p for p in pts if positive(p[1]))
    if not pts:
        return False
    kw = dict(st)
    if not lines:
        kw["ls"] = "none"
    kw.setdefault("ms", 5)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **kw)
    return True


class Panel:
    """one group of points (a column of the figure): its series, the reference lines of its time axis, its title.
    series: [(label, style, [(x, time_us, second)])], second the fraction of the floor (or a ratio: see draw);
    stars: points drawn as stars, not joined (a prefill beside decode and verify windows); width: the column's
    relative width."""

    def __init__(self, title="", width=1.0):
        self.title, self.width, self.series, self.refs, self.stars = title, width, [], [], []

    def add(self, label, st, pts):
        pts = [p for p in pts if positive(p[1])]
        if pts:
            self.series.append((label, st, pts))

    def ref(self, label, pts, **kw):
        pts = [p for p in pts if positive(p[1])]
        if pts:
            self.refs.append((label, pts, kw))

    def star(self, label, st, pts):
        pts = [p for p in pts if positive(p[1])]
        if pts:
            self.stars.append((label, st, pts))

    def xs(self):
        return [p[0] for _, _, pts in self.series + self.stars for p in pts] + \
               [p[0] for _, pts, _ in self.refs for p in pts]

    def points(self):
        return sum(len(pts) for _, _, pts in self.series + self.stars)


def save(fig, path):
    """a PNG with no version stamp, reduced to a 256-colour palette (a third of the size) where Pillow is there"""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    try:
        from PIL import Image
        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
        img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    except ImportError:
        with open(path, "wb") as f:
            f.write(buf.getvalue())
    return os.path.getsize(path)


def draw(path, title, note, panels, xlabel, second="floor", second_label=None, star_label=None):
    """time (top) and the fraction of the floor (second="floor") or a ratio (second="ratio") below it against x, a
    column per panel; a single panel puts the two side by side. Writes path; returns its size in bytes."""
    panels = [p for p in panels if p.points()]
    if not panels:
        raise Skip("no points to draw")
    if len({p[0] for pn in panels for _, _, pts in pn.series + pn.stars for p in pts}) < 2:
        raise Skip("its points all lie at one x")
    n = len(panels)
    if n == 1:
        width = 11.0
        fig, axes = plt.subplots(1, 2, figsize=(width, 4.9), layout="constrained")
        pairs = [(axes[0], axes[1])]
    else:
        ratios = [p.width for p in panels]
        width = max(11.0, 5.4 * sum(ratios))
        fig, axes = plt.subplots(2, n, figsize=(width, 7.8), layout="constrained", squeeze=False,
                                 gridspec_kw=dict(width_ratios=ratios))
        pairs = [(axes[0][i], axes[1][i]) for i in range(n)]
    handles = {}
    for i, (pn, (at, a2)) in enumerate(zip(panels, pairs)):
        for label, pts, kw in pn.refs:
            pts = sorted(pts)
            kw = dict(dict(color="k", lw=1.0, ls=":"), **kw)
            at.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **kw)
        for label, st, pts in pn.series:
            plot_series(at, [(x, t) for x, t, _ in pts], st, label)
            plot_series(a2, [(x, s) for x, _, s in pts if s is not None], st, label)
        for label, st, pts in pn.stars:
            kw = dict(ls="none", marker="*", ms=12, color=st["color"], mec="k", mew=0.4)
            at.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **kw)
            s2 = [(x, s) for x, _, s in pts if positive(s)]
            if s2:
                a2.plot([p[0] for p in s2], [p[1] for p in s2], **kw)
        for a in (at, a2):
            x_ticks(a, pn.xs())
            a.grid(True, which="major", alpha=0.3)
            a.set_xlabel(xlabel)
            for h, lab in zip(*a.get_legend_handles_labels()):
                if pn.stars and any(lab == s[0] for s in pn.stars) and any(lab == s[0] for s in pn.series):
                    continue  # a star of an implementation that has a line: the line's entry stands for it
                handles.setdefault(lab, h)
        a2.axhline(1.0, color="k", lw=0.8)
        log_y(at, us_label)
        if second == "floor":
            log_y(a2, pct_label)
        else:
            log_y(a2, lambda v, _p: f"{v:g}x")
        if i == 0 or n == 1:
            at.set_ylabel("time per call")
            a2.set_ylabel(second_label or ("fraction of the floor (floor / time)" if second == "floor" else second))
        if pn.title:
            at.set_title(pn.title, fontsize=10)
            if n == 1:
                a2.set_title(pn.title, fontsize=10)
    if star_label and any(pn.stars for pn in panels):
        handles[star_label] = Line2D([], [], ls="none", marker="*", ms=12, color="0.6", mec="k", mew=0.4)
    cols = int(width * 12.8)
    text = "\n".join(textwrap.fill(part, cols) for part in title.split("\n") + ([note] if note else []))
    fig.suptitle(text, fontsize=10)
    fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center",
               ncol=min(4 if width < 14 else 6, max(1, len(handles))), fontsize=8.5, frameon=False)
    size = save(fig, path)
    plt.close(fig)
    return size


# ---------------------------------------------------------------- the recurrence on the GPU (bench/gpu_compare.py)

GPU_IMPLS = [("libgdn routed, VK", lambda r: r["impl"].startswith("routed=") and r["layout"] == "vk"),
             ("libgdn routed, KV", lambda r: r["impl"].startswith("routed=") and r["layout"] == "kv"),
             ("FLA chunk_gated_delta_rule", lambda r: r["impl"] == "fla_chunk"),
             ("FLA fused_recurrent_gated_delta_rule", lambda r: r["impl"] == "fla_fused_recurrent")]


def gpu_frac(r):
    """floor / time, the floor max(flops / fp32 peak, bytes / copy bandwidth): the larger of the two fractions"""
    a, b = r.get("fp32_peak_fraction"), r.get("copy_bw_fraction")
    return max(a, b) if positive(a) and positive(b) else None


def plots_delta_gpu(stem, doc, out):
    meta = doc.get("meta") or {}
    rows = having(doc["results"], ["kind", "B", "T", "impl", "layout", "median_us"], stem)
    dev = meta.get("device", "GPU")
    when = f", {meta['date'][:10]}" if meta.get("date") else ""
    note = ("floor = max(flops / fp32 peak, bytes / copy bandwidth), both measured in the run"
            + (f" ({meta['fp32_peak_tflops']:.1f} TFLOP/s, {meta['copy_bandwidth_tbps']:.2f} TB/s)"
               if positive(meta.get("fp32_peak_tflops")) and positive(meta.get("copy_bandwidth_tbps")) else "")
            + f"; CUDA-graph medians, inputs rotated over > 4x L2. {stem}.json{when}")
    made = []

    def one(kind, axis, fixed, name, what, xlabel):
        here = [r for r in rows if r["kind"] == kind and r[fixed[0]] == fixed[1]]
        if not here:
            raise Skip(f"no {kind} rows at {fixed[0]}={fixed[1]}")
        pn = Panel()
        for label, pick in GPU_IMPLS:
            pn.add(label, style(label), [(r[axis], r["median_us"], gpu_frac(r)) for r in here if pick(r)])
        floors = {}
        for r in here:
            f = gpu_frac(r)
            if f:
                floors.setdefault(r[axis], r["median_us"] * f)
        pn.ref("floor (same for every implementation)", list(floors.items()), color="k", ls=":", lw=1.2)
        if positive(meta.get("call_floor_us")):
            xs = sorted({r[axis] for r in here})
            pn.ref("one trivial kernel per call", [(x, meta["call_floor_us"]) for x in xs], color="0.55", ls="--",
                   lw=0.9)
        title = (f"gdn_delta on {dev}, {what}: Hk 16, Hv 32, Dk = Dv 128, bf16 q/k/v/y, f32 state; libgdn's "
                 f"routed call in each state layout, FLA {meta.get('fla') or ''} beside it (in its KV layout)")
        size = draw(os.path.join(out, name), title, note, [pn], xlabel)
        made.append((name, size, f"{stem}.json: the recurrence on {dev}, {what}: time and fraction of the floor of "
                                 f"libgdn's routed call (VK and KV state) against {axis}, FLA's chunked and "
                                 f"fused-recurrent kernels beside it"))

    guard(made, f"{stem}_T.png", lambda: one("prefill", "T", ("B", 1), f"{stem}_T.png", "prefill B = 1",
                                             "T (tokens)"))
    guard(made, f"{stem}_B.png", lambda: one("decode", "B", ("T", 1), f"{stem}_B.png", "decode T = 1",
                                             "B (sequences)"))
    return made


# ---------------------------------------------------------------- the recurrence on the CPU (gdn bench --json)

def plots_delta_cpu(stem, rows, out):
    rows = having(rows, ["mode", "kernel", "B", "T", "ms_median", "floor_ms"], stem)
    for r in rows:
        r.setdefault("layout", "vk")  # lines written before gdn bench had --layout timed VK
    layouts = sorted({r["layout"] for r in rows}, key=lambda x: (x != "vk", x))
    r0 = rows[0] if rows else {}
    dev = r0.get("device", "CPU")
    thr = f", {r0['threads']} threads" if r0.get("threads") else ""
    peaks = []
    for lay in layouts:
        q = next(r for r in rows if r["layout"] == lay)
        if positive(q.get("peak_gflops")) and positive(q.get("peak_gbps")):
            peaks.append(f"{lay.upper()} lines {q['peak_gflops']:.0f} GFLOP/s, {q['peak_gbps']:.1f} GB/s")
    note = ("floor = max(flops / FMA peak, bytes / copy bandwidth), measured in each run"
            + (f" ({'; '.join(peaks)})" if peaks else "") + f"; VK solid, KV dashed. {stem}.json")
    made = []

    def one(mode, axis, fixed, name, what, xlabel):
        here = [r for r in rows if r["mode"] == mode and r[fixed[0]] == fixed[1]]
        if not here:
            raise Skip(f"no {mode} lines at {fixed[0]}={fixed[1]}")
        pn = Panel()
        kernels = []
        for r in here:
            if r["kernel"] not in kernels:
                kernels.append(r["kernel"])
        for lay in layouts:
            for k in kernels:
                pts = [(r[axis], r["ms_median"] * 1e3, r["floor_ms"] / r["ms_median"]) for r in here
                       if r["kernel"] == k and r["layout"] == lay and positive(r["ms_median"])]
                st = style(k, k)
                if lay != "vk":
                    st.update(ls="--", lw=1.3, marker="s")
                pn.add(f"{k}, {lay.upper()}", st, pts)
            floors = {}
            for r in here:
                if r["layout"] == lay:
                    floors.setdefault(r[axis], r["floor_ms"] * 1e3)
            pn.ref(f"floor, {lay.upper()} run", list(floors.items()), color="k", lw=1.0,
                   ls=":" if lay == "vk" else (0, (1, 4)))
        title = (f"gdn_delta on {dev}{thr}, {what}: Hk 16, Hv 32, Dk = Dv 128, f32; every CPU kernel timed, "
                 "each state layout")
        size = draw(os.path.join(out, name), title, note, [pn], xlabel)
        made.append((name, size, f"{stem}.json: the recurrence on the CPU ({dev}{thr}), {what}: time and fraction "
                                 f"of the floor of each kernel, VK and KV state, against {axis}"))

    guard(made, f"{stem}_T.png", lambda: one("prefill", "T", ("B", 1), f"{stem}_T.png", "prefill B = 1",
                                             "T (tokens)"))
    guard(made, f"{stem}_B.png", lambda: one("decode", "B", ("T", 1), f"{stem}_B.png", "decode T = 1",
                                             "B (sequences)"))
    return made


# ---------------------------------------------------------------- the layer step (gdn layer --json)

def layer_label(r):
    return f"{r['kernel']} ({r['backend']})"


def layer_style(r):
    st = style(r["kernel"], r["kernel"])
    if r.get("commit") == 0:
        st.update(ls="-.", marker="s")
    return st


def plots_layer(stem, rows, out):
    rows = having([r for r in rows if r.get("op") == "layer"],
                  ["kernel", "backend", "Hv", "B", "n", "commit", "us", "floor_us"], stem)
    made = []
    hvs = sorted({r["Hv"] for r in rows}, key=lambda h: -sum(r["Hv"] == h for r in rows))
    backends = sorted({r["backend"] for r in rows})
    shape = "Hk 16, D 128" if all(r.get("Hk") == 16 and r.get("D") == 128 for r in rows) else "see the file"
    note = ("floor: decode and verify windows = the bytes the call must move (pools read, and written when it "
            "commits; inputs; y) at the copy bandwidth; prefill = gdn_delta alone on the same inputs; measured in "
            f"the run. {stem}.json")
    for i, hv in enumerate(hvs):
        tag = "" if i == 0 else f"_hv{hv}"
        here = [r for r in rows if r["Hv"] == hv]
        what = f"Hv {hv}, {shape}, bf16 activations, f32 state; backends: {', '.join(backends)}"

        def by_b(here=here, tag=tag, what=what, hv=hv):
            name = f"{stem}{tag}_B.png"
            dec = [r for r in here if r["n"] == 1 and r["commit"] in (-1, 1)]
            pn = Panel()
            for r0 in first_of(dec, layer_label):
                pts = [(r["B"], r["us"], r["floor_us"] / r["us"]) for r in dec if layer_label(r) == layer_label(r0)]
                pn.add(layer_label(r0), layer_style(r0), pts)
            floors = {}
            for r in dec:
                floors.setdefault((r["backend"], r["B"]), r["floor_us"])
            for be in backends:
                pn.ref(f"copy floor ({be})", [(b, f) for (e, b), f in floors.items() if e == be], color="k",
                       ls=":" if be == "cuda" else (0, (1, 4)))
            size = draw(os.path.join(out, name), f"gdn_layer decode (n = 1, committing) against B: {what}", note,
                        [pn], "B (sequences, one token each)")
            made.append((name, size, f"{stem}.json: the layer step decode (n = 1, Hv {hv}; backends "
                                     f"{', '.join(backends)}): time and fraction of the copy floor of each layer "
                                     "kernel against B"))

        def by_t(here=here, tag=tag, what=what, hv=hv):
            name = f"{stem}{tag}_T.png"
            panels = []
            win = [r for r in here if r.get("floor") != "delta"]
            for B in sorted({r["B"] for r in win}):
                at = [r for r in win if r["B"] == B]
                if len({r["n"] for r in at}) < 2:
                    continue  # one window length (decode only): in the plot against B
                pn = Panel(f"decode and verify windows, B = {B}")
                for r0 in first_of(at, lambda r: (layer_label(r), r["commit"] == 0)):
                    same = [r for r in at if layer_label(r) == layer_label(r0) and (r["commit"] == 0) ==
                            (r0["commit"] == 0)]
                    lab = layer_label(r0) + (", commit 0" if r0["commit"] == 0 else ", commit all")
                    pn.add(lab, layer_style(r0), [(r["n"], r["us"], r["floor_us"] / r["us"]) for r in same])
                panels.append(pn)
            pre = [r for r in here if r.get("floor") == "delta"]
            if pre:
                Bs = sorted({r["B"] for r in pre})
                pn = Panel("prefill, fresh state" + (f", B = {Bs[0]}" if len(Bs) == 1 else ""), width=0.5)
                for r0 in first_of(pre, layer_label):
                    pn.star(layer_label(r0) + ", prefill", layer_style(r0),
                            [(r["n"], r["us"], r["floor_us"] / r["us"]) for r in pre
                             if layer_label(r) == layer_label(r0)])
                panels.append(pn)
            size = draw(os.path.join(out, name), f"gdn_layer against the window length n (T = B n): {what}",
                        note, panels, "n (tokens per sequence)",
                        star_label="prefill (floor: gdn_delta alone)")
            made.append((name, size, f"{stem}.json: the layer step (Hv {hv}; backends {', '.join(backends)}) "
                                     "against the window length n: decode and verify windows committing all or "
                                     "nothing (commit 0), a panel per B, and the prefill; time and fraction of the "
                                     "floor of each layer kernel"))

        guard(made, f"{stem}{tag}_B.png", by_b)
        guard(made, f"{stem}{tag}_T.png", by_t)
    return made


def first_of(rows, key):
    """one row per distinct key, in the order of the file"""
    seen, out = set(), []
    for r in rows:
        k = key(r)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


# ---------------------------------------------------------------- the CPU layer step against ggml (bench/ggml_layer.sh)

GGML_SIDES = {"ggml": "ggml chain", "ggml_nowb": "ggml chain, no write-back", "libgdn": "libgdn staged"}


def plots_layer_ggml(stem, rows, out):
    checks = [r for r in rows if r.get("op") == "layer_ggml_check"]
    rows = having([r for r in rows if r.get("op") == "layer_ggml"], ["side", "threads", "n", "us"], stem)
    made = []
    name = f"{stem}_T.png"

    def one():
        runs = sorted({r.get("run", 1) for r in rows})
        libgdn = {}
        for r in rows:
            if r["side"] == "libgdn":
                libgdn[(r.get("run", 1), r["threads"], r["n"], bool(r.get("cold", 0)))] = r["us"]
        def ratio(r, run, th):
            """time over libgdn's at the same point and run; None for libgdn itself (1 by definition)"""
            key = (run, th, r["n"], bool(r.get("cold", 0)))
            return None if r["side"] == "libgdn" or key not in libgdn else r["us"] / libgdn[key]

        panels = []
        for th in sorted({r["threads"] for r in rows}, reverse=True):
            pn = Panel(f"{th} thread{'s' if th != 1 else ''}")
            for side in first_of([r for r in rows if r["threads"] == th], lambda r: r["side"]):
                side = side["side"]
                label = GGML_SIDES.get(side, side)
                for run in runs:
                    # decode: the cold figure (states rotated over sets) in the line, the hot one as a hollow mark
                    sel = [r for r in rows if r["threads"] == th and r["side"] == side and r.get("run", 1) == run]
                    cold = [r for r in sel if r["n"] > 1 or r.get("cold", 0)]
                    st = style(label)
                    if run != runs[0]:
                        st.update(ls="--", lw=1.0, alpha=0.8)
                    pts = [(r["n"], r["us"], ratio(r, run, th)) for r in cold]
                    pn.add(label + (f", run {run}" if len(runs) > 1 else ""), st, pts)
                    hot = [r for r in sel if r["n"] == 1 and not r.get("cold", 0)]
                    if hot:
                        hs = dict(st, mfc="none", ms=8)
                        hs.pop("lw", None)
                        hs["ls"] = "none"
                        pn.add("_hot", hs, [(r["n"], r["us"], ratio(r, run, th)) for r in hot])
            panels.append(pn)
        agree = ""
        ys = [c["y_rel_l2"] for c in checks if positive(c.get("y_rel_l2"))]
        ss = [c["state_rel_l2"] for c in checks if positive(c.get("state_rel_l2"))]
        if ys:
            agree = f"; libgdn against ggml, largest relative L2: y {max(ys):.1e}" + (
                f", state {max(ss):.1e}" if ss else "")
        r0 = rows[0]
        note = (f"n = 1: cold decode (states rotated over {max(r.get('sets', 1) for r in rows)} sets) on the line, "
                "hot (one state) as a hollow mark; best of 3 block medians"
                + ("; runs 1 and 2 (dashed) at different machine loads" if len(runs) > 1 else "") + agree
                + f". ggml {r0.get('ggml', '?')}, libgdn {r0.get('libgdn', '?')}. {stem}.json")
        title = (f"The CPU layer step, libgdn's gdn_layer against ggml's op chain: B = 1, Hk 16, Hv 32, D 128, f32 "
                 f"activations; {r0.get('machine', 'CPU')}")
        size = draw(os.path.join(out, name), title, note, panels, "n (tokens)", second="ratio",
                    second_label="time / libgdn's time (above 1: libgdn faster)")
        made.append((name, size, f"{stem}.json: the CPU layer step against ggml's op chain (with and without its "
                                 "state write-back), time and the ratio to libgdn against n, a panel per thread "
                                 "count (this file records no floor)"))

    guard(made, name, one)
    return made


# ---------------------------------------------------------------- the layer step against its peers (layer_peers.py)

PEER_LABELS = {"libgdn routed": "libgdn routed", "libgdn routed k=0": "libgdn routed k=0",
               "libgdn cuda_fused": "libgdn cuda_fused", "libgdn cuda_staged": "libgdn cuda_staged",
               "transformers": "transformers Qwen3NextGatedDeltaNet", "fla_chain": "fla chain (state copied back)",
               "fla_chain_swap": "fla chain (buffers swapped)", "fla_chain_verify": "fla chain (no final state)"}
PEER_ORDER = ["libgdn routed", "libgdn routed k=0", "libgdn cuda_fused", "libgdn cuda_staged", "transformers",
              "fla_chain", "fla_chain_swap", "fla_chain_verify"]


def peer_frac(p, r):
    """floor / time: the state+history floor (read only for a call that writes no pool)"""
    if positive(r.get("ratio_to_state_hist_floor")):
        return 1.0 / r["ratio_to_state_hist_floor"]
    reads_only = r["impl"].endswith("k=0") or r["impl"] == "fla_chain_verify"
    f = p.get("state_hist_read_floor_us" if reads_only else "state_hist_floor_us")
    return f / r["median_us"] if positive(f) else None


def plots_layer_peers(stem, doc, out):
    meta = doc.get("meta") or {}
    points = having(doc["points"], ["kind", "B", "n", "rows"], stem)
    made = []
    errors = sum(1 for p in points for r in p["rows"] if isinstance(r, dict) and r.get("error"))
    if errors:
        print(f"  {stem}: {errors} implementation rows with an error (not timed) left out")
    dev = meta.get("device", "GPU")
    shape = (f"Hk {meta.get('Hk', '?')}, Hv {meta.get('Hv', '?')}, D {meta.get('D', '?')}, "
             f"{meta.get('dtype', '?')} activations, f32 state, libgdn state {str(meta.get('layout', '?')).upper()}")
    bw = f" ({meta['copy_bandwidth_tbps']:.2f} TB/s)" if positive(meta.get("copy_bandwidth_tbps")) else ""
    note = (f"floor: the state and history pools read and written (read only: k=0, no final state) at the copy "
            f"bandwidth measured in the run{bw}; CUDA-graph medians. transformers {meta.get('transformers', '?')}, "
            f"fla {str(meta.get('fla') or '?').split(' (')[0].replace('fla ', '')}. {stem}.json"
            + (f", {meta['date'][:10]}" if meta.get("date") else ""))

    def rows_of(p):
        return [r for r in p["rows"] if isinstance(r, dict) and positive(r.get("median_us")) and r.get("impl")]

    def impls_in(ps):
        names = {r["impl"] for p in ps for r in rows_of(p)}
        return [i for i in PEER_ORDER if i in names] + sorted(names - set(PEER_ORDER))

    def by_b():
        dec = [p for p in points if p["kind"] == "decode" and p["n"] == 1]
        pn = Panel()
        for impl in impls_in(dec):
            lab = PEER_LABELS.get(impl, impl)
            pn.add(lab, style(lab), [(p["B"], r["median_us"], peer_frac(p, r)) for p in dec for r in rows_of(p)
                                     if r["impl"] == impl])
        pn.ref("state+history floor", [(p["B"], p.get("state_hist_floor_us")) for p in dec], color="k", ls=":")
        routed = {p["B"]: r.get("kernel_run") for p in dec for r in rows_of(p) if r["impl"] == "libgdn routed"}
        picks = ", ".join(f"B={b}: {k}" for b, k in sorted(routed.items()) if k)
        size = draw(os.path.join(out, f"{stem}_B.png"), f"gdn_layer decode against its peers on {dev}, n = 1: "
                    f"{shape}" + (f"\nlibgdn routed ran {picks}" if picks else ""), note, [pn],
                    "B (sequences, one token each)")
        made.append((f"{stem}_B.png", size, f"{stem}.json: the layer step decode on {dev} against B: libgdn "
                                            "(routed and each CUDA layer kernel), transformers' module and fla's "
                                            "kernels chained as fla's layer does, time and fraction of the "
                                            "state+history floor"))

    def by_t():
        win = [p for p in points if p["kind"] in ("decode", "verify")]
        pre = [p for p in points if p["kind"] == "prefill"]
        panels = []
        for B in sorted({p["B"] for p in win if p["kind"] == "verify"}):
            ps = sorted([p for p in win if p["B"] == B], key=lambda p: p["n"])
            pn = Panel(f"decode (n = 1) and verify windows, B = {B}")
            for impl in impls_in(ps):
                if impl in ("libgdn cuda_fused k=0", "libgdn cuda_staged k=0"):
                    continue  # the routed k=0 line stands for them
                lab = PEER_LABELS.get(impl, impl)
                pn.add(lab, style(lab), [(p["n"], r["median_us"], peer_frac(p, r)) for p in ps for r in rows_of(p)
                                         if r["impl"] == impl])
            pn.ref("state+history floor (commit)", [(p["n"], p.get("state_hist_floor_us")) for p in ps],
                   color="k", ls=":")
            pn.ref("read-only floor (k=0, no final state)", [(p["n"], p.get("state_hist_read_floor_us"))
                                                             for p in ps if p["kind"] == "verify"],
                   color="0.5", ls=":")
            panels.append(pn)
        if not panels:
            raise Skip("no verify points")
        if pre:
            Bs = sorted({p["B"] for p in pre})
            pn = Panel("prefill, fresh state" + (f", B = {Bs[0]}" if len(Bs) == 1 else ""), width=0.5)
            for impl in impls_in(pre):
                lab = PEER_LABELS.get(impl, impl)
                pn.star(lab, style(lab), [(p["n"], r["median_us"], peer_frac(p, r)) for p in pre
                                          for r in rows_of(p) if r["impl"] == impl])
            pn.ref("state+history floor (commit)", [(p["n"], p.get("state_hist_floor_us")) for p in pre],
                   color="k", ls=":", marker="_", ms=14)
            panels.append(pn)
        size = draw(os.path.join(out, f"{stem}_T.png"), f"gdn_layer against its peers on {dev}, against the window "
                    f"length n: {shape}", note, panels, "n (tokens per sequence)", star_label="prefill")
        made.append((f"{stem}_T.png", size, f"{stem}.json: the layer step on {dev} against the window length n, a "
                                            "panel per B: libgdn committing all and nothing (k=0), transformers, "
                                            "the fla chain in its three forms; the prefill beside them where the "
                                            "file has one; time and fraction of the state+history floor"))

    guard(made, f"{stem}_B.png", by_b)
    guard(made, f"{stem}_T.png", by_t)
    return made


# ---------------------------------------------------------------- driver

SKIPPED = []


def guard(made, name, fn):
    """draw one plot; a Skip or a missing field skips it with a message, the others go on"""
    try:
        fn()
    except Skip as exc:
        SKIPPED.append((name, str(exc)))
        print(f"  skip {name}: {exc}")
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError, StopIteration, IndexError) as exc:
        why = f"lacks the field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        SKIPPED.append((name, why))
        print(f"  skip {name}: {why}")
        plt.close("all")


# ---------------------------------------------------------------- the chunked prefill (bench/chunked_h200.py)

CHUNKED_IMPLS = [("libgdn cuda_chunked", "libgdn_chunked"), ("FLA chunk_gated_delta_rule", "fla_chunk"),
                 ("libgdn exact recurrence (routed)", "libgdn_exact")]


def plots_chunked(stem, doc, out):
    rows = having(doc["rows"], ["lengths", "us", "flop"], stem)
    rows = [r for r in rows if len(r["lengths"]) == 1]
    if not rows:
        raise Skip("no B = 1 rows")
    peak, dev = doc["peak_tflops"], doc.get("device", "GPU")
    pn = Panel()
    for label, key in CHUNKED_IMPLS:
        pts = [(r["lengths"][0], r["us"][key], r["flop"] / (r["us"][key] * 1e-6) / 1e12 / peak if key != "libgdn_exact"
                else None) for r in rows if positive(r["us"].get(key))]
        pn.add(label, style(label), pts)
    title = (f"Chunked prefill on {dev}, B = 1: Hk 16, Hv 32, Dk = Dv 128, bf16 q/k/v, f32 log-decay gate and state; "
             f"libgdn's cuda_chunked beside FLA's chunked kernel and libgdn's exact recurrence")
    note = (f"below: the chunked products' FLOPs over time, as a fraction of a bf16 matmul's rate measured in the run "
            f"({peak:.0f} TFLOP/s; the exact recurrence has no such count); CUDA-graph medians. {stem}.json")
    name = f"{stem}_T.png"
    size = draw(os.path.join(out, name), title, note, [pn], "T (tokens)",
                second_label="fraction of the bf16 matmul rate")
    return [(name, size, f"{stem}.json: the chunked prefill on {dev} against T, beside FLA's chunked kernel and the "
                         f"exact recurrence: time and fraction of the tensor-core rate")]


PLOTTERS = {"chunked": plots_chunked, "delta_gpu": plots_delta_gpu, "delta_cpu": plots_delta_cpu, "layer": plots_layer,
            "layer_ggml": plots_layer_ggml, "layer_peers": plots_layer_peers}


def write_readme(out, made):
    lines = ["# Plots", "",
             "Drawn from the results files in [`bench/results/`](../../bench/results/) by "
             "[`bench/plots.py`](../../bench/plots.py); regenerate all of them (after any results file changes) with",
             "", "    python3 bench/plots.py          # needs matplotlib: pip install matplotlib", "",
             "Each plot: time per call (top or left) and the fraction of the floor, floor / time (bottom or right; "
             "100% = at the floor), on log scales; each results file's floor is the one it measures in its own run "
             "([PERFORMANCE.md](../PERFORMANCE.md), \"How it is measured\"). The recurrence is `gdn_delta`, the "
             "layer step `gdn_layer`.", ""]
    for name, _size, what in made:
        lines.append(f"- [`{name}`]({name}): {what}.")
    if SKIPPED:
        lines += ["", "Not drawn in the last run, and why:", ""]
        lines += [f"- `{name}`: {why}." for name, why in SKIPPED]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    global plt, ticker, Line2D
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=RESULTS, help="folder of *.json results (default bench/results)")
    ap.add_argument("--out", default=OUT, help="folder for the PNGs and README.md (default docs/plots)")
    opt = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker as ticker
        from matplotlib.lines import Line2D
    except ImportError:
        sys.exit("bench/plots.py needs matplotlib: pip install matplotlib (or apt-get install python3-matplotlib)")
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10})
    files = sorted(glob.glob(os.path.join(opt.results, "*.json")))
    if not files:
        sys.exit(f"no *.json in {opt.results}")
    os.makedirs(opt.out, exist_ok=True)
    made = []
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        print(f"{os.path.relpath(path)}:")
        try:
            form, data = read_json(path)
        except (OSError, UnicodeDecodeError) as exc:
            SKIPPED.append((stem + ".json", f"unreadable: {exc}"))
            print(f"  skip: unreadable: {exc}")
            continue
        kind = classify(form, data)
        if kind is None:
            SKIPPED.append((stem + ".json", "not a results file this script knows"))
            print("  skip: not a results file this script knows")
            continue
        try:
            got = PLOTTERS[kind](stem, data, opt.out)
        except Skip as exc:
            SKIPPED.append((stem + ".json", str(exc)))
            print(f"  skip {stem}.json: {exc}")
            continue
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration) as exc:
            why = f"lacks the field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
            SKIPPED.append((stem + ".json", why))
            print(f"  skip {stem}.json: {why}")
            plt.close("all")
            continue
        for name, size, _ in got:
            print(f"  wrote {os.path.relpath(os.path.join(opt.out, name))} ({size // 1024} KB)")
        made += got
    write_readme(opt.out, made)
    print(f"{len(made)} plots, {len(SKIPPED)} skipped; {os.path.relpath(os.path.join(opt.out, 'README.md'))}")
    written = {n for n, _, _ in made}
    stale = sorted(os.path.basename(p) for p in glob.glob(os.path.join(opt.out, "*.png"))
                   if os.path.basename(p) not in written)
    if stale:
        print("not written in this run (stale?): " + ", ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
