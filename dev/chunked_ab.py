#!/usr/bin/env python3
"""cuda_chunked of two builds in one process: every case's y and final state compared bitwise (torch.equal) with the
first build's, then the timing points alternating the builds (bench/chunked_h200.py's inputs, CUDA-graph replays,
medians). For a change meant to keep the bits (a new schedule of the same products); where the bits differ, the
case prints max |new - old| / max |old| of y and of the state.

    python3 dev/chunked_ab.py old=path/libgdn.so new=path/libgdn.so [--reps N]   (writes $OUT/chunked_ab.json)
    ncu --kernel-name regex:gdn_chunk python3 dev/chunked_ab.py --once 2048 [--batch 16] old=... new=...   (two calls
        a build)

Cases: bf16 and f16, both state layouts, the log-decay and the raw gate, lengths off the chunk size, varlen batches.
Timing points: cuda_chunked at B = 1 and on varlen batches; "fastest" on serving batches (decode steps and verify
windows beside a prompt).
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import chunked_h200 as C  # noqa: E402

gdn = C.gdn


def call(lib, s, dtype, layout, raw, kernel=b"cuda_chunked"):
    """A callable running cuda_chunked (or `kernel`) on s in dtype (bf16 / f16) and state layout, and its outputs."""
    lengths, B = s["lengths"], len(s["lengths"])
    tdt = torch.bfloat16 if dtype == gdn.BF16 else torch.float16
    q, k, v = (s[n].to(tdt) for n in ("q", "k", "v"))
    h0 = s["h0"] if layout == gdn.STATE_KV else s["h0"].transpose(-1, -2).contiguous()
    y, st = torch.empty_like(v), torch.empty_like(h0)
    head = (torch.full((C.HV,), -0.5, device="cuda"), torch.linspace(-1, 1, C.HV, device="cuda"))
    cu = s["cu"].clone()
    a = gdn.args(B=B if B > 1 else 1, T=0 if B > 1 else lengths[0], Hk=C.HK, Hv=C.HV, Dk=C.D, Dv=C.D, dtype=dtype,
                 q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), y=y.data_ptr(), gate_kind=gdn.GATE_LOG_DECAY,
                 gate=s["g"].data_ptr(), beta_kind=gdn.BETA_DIRECT, beta=s["beta"].data_ptr(), state_layout=layout,
                 state_in=h0.data_ptr(), state_out=st.data_ptr(), scale=C.D ** -0.5, backend=gdn.BACKEND_CUDA,
                 cu_seqlens=cu.data_ptr() if B > 1 else None, kernel=kernel)
    if raw:  # the real model's gate on the same values: -exp(A_log) softplus(g + dt_bias)
        a.gate_kind, a.A_log, a.dt_bias = gdn.GATE_RAW, head[0].data_ptr(), head[1].data_ptr()

    def run():
        a.stream = torch.cuda.current_stream().cuda_stream
        gdn.delta(lib, a)
    run.keep = (q, k, v, h0, head, cu, y, st)  # the graph writes y and st: they must outlive it
    return run, (y, st)


def rel(x, ref):
    """max |x - ref| / max |ref| (for builds that differ on purpose: a change of the products)."""
    x, ref = x.double(), ref.double()
    return ((x - ref).abs().max() / ref.abs().max()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="+", help="name=path/to/libgdn.so; the first is the reference")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--once", type=int, default=0, help="only two calls a build at B = 1, T = ONCE (for a profiler)")
    ap.add_argument("--batch", type=int, default=1, help="with --once: a varlen batch of BATCH windows of ONCE tokens")
    opt = ap.parse_args()
    libs = {n: gdn.load(p) for n, p in (b.split("=", 1) for b in opt.builds)}
    if opt.once:
        s = C.inputs([opt.once] * opt.batch)
        for lib in libs.values():
            run = call(lib, s, gdn.BF16, gdn.STATE_KV, False)[0]
            run(), run()
        torch.cuda.synchronize()
        return 0
    first = next(iter(libs))
    cases = [([64], gdn.BF16, gdn.STATE_KV, False), ([100], gdn.BF16, gdn.STATE_KV, False),
             ([2048], gdn.BF16, gdn.STATE_KV, False), ([300], gdn.F16, gdn.STATE_KV, False),
             ([200], gdn.BF16, gdn.STATE_VK, True), ([129], gdn.F16, gdn.STATE_VK, False),
             ([1000, 17, 64, 300], gdn.BF16, gdn.STATE_KV, False), ([513, 5, 128], gdn.F16, gdn.STATE_KV, True)]
    same, out = True, dict(cases=[], points=[])
    for i, (lengths, dt, layout, raw) in enumerate(cases):
        s = C.inputs(lengths, seed=100 + i)
        res = {}
        for n, lib in libs.items():
            run, (y, st) = call(lib, s, dt, layout, raw)
            y.fill_(float("nan")), st.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            res[n] = (y.clone(), st.clone())
        eq = {n: torch.equal(res[n][0], res[first][0]) and torch.equal(res[n][1], res[first][1]) for n in libs}
        same &= all(eq.values())
        diff = {n: [rel(res[n][o], res[first][o]) for o in (0, 1)] for n in libs if not eq[n]}
        out["cases"].append(dict(lengths=lengths, dtype=dt, layout=layout, raw=raw, bitwise=eq, rel_diff=diff))
        print("case %-24s dtype %d layout %d raw %d: %s" % (
            lengths, dt, layout, raw, " ".join("%s %s" % (n, "==" if e else "DIFFERS (y %.1e, state %.1e)" % tuple(
                diff[n])) for n, e in eq.items())))
    points = [[64], [256], [2048], [8192], [2048] * 16, [8192, 4096, 2048, 1024, 1000, 512, 300, 256, 128, 64, 17, 5],
              [128] * 16, [512] * 16, [2048] * 2]
    # serving batches under "fastest": decode steps (and verify windows) beside a prompt
    serving = [[1] * 127 + [2048], [1] * 63 + [4] * 32 + [512]]
    for lengths in points + serving:
        s = C.inputs(lengths, seed=7)
        kernel = b"fastest" if lengths in serving else b"cuda_chunked"
        fns = {n: C.graphed(call(lib, s, gdn.BF16, gdn.STATE_KV, False, kernel)[0])[0] for n, lib in libs.items()}
        inner = max(3, min(50, int(2e5 / sum(lengths))))
        times = {n: [] for n in fns}
        for _ in range(opt.reps):
            for n, fn in fns.items():
                times[n].append(C.time_round(fn, inner))
        med = {n: statistics.median(t) for n, t in times.items()}
        out["points"].append(dict(lengths=lengths, us=med))
        name = "T=%d" % lengths[0] if len(lengths) == 1 else "%s %d seqs, %d tokens" % (
            "fastest" if lengths in serving else "varlen", len(lengths), sum(lengths))
        print("%-28s %s" % (name, "  ".join("%s %.1f us" % (n, t) for n, t in med.items())))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "chunked_ab.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("bitwise: %s" % ("all equal" if same else "DIFFERENCES"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
