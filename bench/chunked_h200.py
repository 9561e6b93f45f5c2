#!/usr/bin/env python3
"""Chunked prefill on the GPU: libgdn's cuda_chunked beside FlashInfer's Hopper prefill
(flashinfer.gdn_prefill.chunk_gated_delta_rule), flash-linear-attention's chunk_gated_delta_rule and libgdn's exact
recurrence, in one process, at B = 1 over T, and on varlen serving batches. Each point also gives every chunked
kernel's o and final state as a relative L2 distance from the exact recurrence's (ref's bits) on the same inputs.

Shape: Hk 16, Hv 32, Dk = Dv 128, bf16 q, k, v, f32 log-decay gate and direct beta (FLA's convention: its beta in
bf16), f32 initial and final state (KV layout), scale 1/sqrt(Dk). Each point: every implementation captured in a CUDA
graph of one call (FLA's and ours alike; plain launches where capture fails), then --reps rounds alternating the
implementations, each round timing --inner replays between CUDA events; the median per call is reported. The
tensor-core rate is a bf16 torch.matmul of 8192^3 timed the same way, in the same run. FLOPs are the chunked
algorithm's products per chunk of 64 and head: 4 C^2 (Dk + Dv) + 6 C Dk Dv.

    python3 bench/chunked_h200.py --out $OUT/chunked_h200.json      (peers: --peers DIR, bench/peer_wheels.sh's
                                                                     /tmp/peers by default)
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from libgdn import capi as gdn  # noqa: E402

HK, HV, D, C = 16, 32, 128, 64


def inputs(lengths, seed=0):
    T = sum(lengths)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(torch.bfloat16)
    v = torch.randn(1, T, HV, D, generator=gen).to(torch.bfloat16)
    g = torch.log(0.9 + 0.1 * torch.rand(1, T, HV, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, HV, generator=gen))
    h0 = 0.1 * torch.randn(len(lengths), HV, D, D, generator=gen)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    s = dict(q=q, k=k, v=v, g=g, beta=beta, h0=h0)
    s = {n: x.cuda() for n, x in s.items()}
    s["cu"], s["lengths"] = cu, lengths
    s["beta16"] = s["beta"].to(torch.bfloat16)
    return s


def libgdn_call(lib, s, kernel):
    """A callable running gdn_delta on s (batch form for several sequences), and its outputs."""
    T, B = s["q"].shape[1], len(s["lengths"])
    y, st = torch.empty_like(s["v"]), torch.empty_like(s["h0"])
    cu = s["cu"].clone()  # host int32, kept alive with the args
    a = gdn.args(B=B if B > 1 else 1, T=0 if B > 1 else T, Hk=HK, Hv=HV, Dk=D, Dv=D, dtype=gdn.BF16,
                 q=s["q"].data_ptr(), k=s["k"].data_ptr(), v=s["v"].data_ptr(), y=y.data_ptr(),
                 gate_kind=gdn.GATE_LOG_DECAY, gate=s["g"].data_ptr(), beta_kind=gdn.BETA_DIRECT,
                 beta=s["beta"].data_ptr(), state_layout=gdn.STATE_KV, state_in=s["h0"].data_ptr(),
                 state_out=st.data_ptr(), scale=D ** -0.5, backend=gdn.BACKEND_CUDA,
                 stream=torch.cuda.current_stream().cuda_stream,
                 cu_seqlens=cu.data_ptr() if B > 1 else None)
    if kernel:
        a.kernel = kernel.encode()

    def run():
        a.stream = torch.cuda.current_stream().cuda_stream
        gdn.delta(lib, a)
    run.keep = (cu, y, st)
    return run, (y, st)


def fla_call(s):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    B = len(s["lengths"])
    cu = s["cu"].to(torch.int64).cuda() if B > 1 else None
    out = {}

    def run():
        out["o"], out["ht"] = chunk_gated_delta_rule(s["q"], s["k"], s["v"], g=s["g"], beta=s["beta16"],
                                                     scale=D ** -0.5, initial_state=s["h0"],
                                                     output_final_state=True, cu_seqlens=cu)
    return run, out


def flashinfer_call(s):
    """FlashInfer's Hopper prefill on s: packed [T, H, D], cu_seqlens (int64, device), alpha = exp(g), f32 beta,
    states [N, Hv, V, K] (ours, KV, transposed once here, outside the timing)."""
    from flashinfer.gdn_prefill import chunk_gated_delta_rule
    cu = s["cu"].to(torch.int64).cuda()
    alpha, h0 = torch.exp(s["g"][0]), s["h0"].transpose(-1, -2).contiguous()
    q, k, v, beta = s["q"][0], s["k"][0], s["v"][0], s["beta"][0]
    o, ht = torch.empty_like(v), torch.empty_like(h0)
    out = {}

    def run():
        chunk_gated_delta_rule(q, k, v, g=alpha, beta=beta, scale=D ** -0.5, initial_state=h0,
                               output_final_state=True, cu_seqlens=cu, output=o, output_state=ht)
        out["o"], out["ht"] = o[None], ht.transpose(-1, -2)
    return run, out


def rel_l2(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


def graphed(fn):
    """fn captured in a CUDA graph (its replay), or fn itself where capture fails; and which."""
    fn()
    torch.cuda.synchronize()
    try:
        g = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
            with torch.cuda.graph(g, stream=stream):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        return g.replay, "graph"
    except Exception as e:  # noqa: BLE001
        print("  (no graph: %s)" % str(e).splitlines()[0][:100])
        torch.cuda.synchronize()
        return fn, "launches"


def time_round(fn, inner):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(inner):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / inner  # us per call


def flops(lengths):
    chunks = sum(math.ceil(n / C) for n in lengths)
    return chunks * HV * (4 * C * C * (D + D) + 6 * C * D * D)


def mm_rate(reps):
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    fn = lambda: torch.matmul(x, y)  # noqa: E731
    fn()
    times = [time_round(fn, 5) for _ in range(reps)]
    return 2 * 8192 ** 3 / (statistics.median(times) * 1e-6) / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--B", type=int, default=1, help="sequences of T tokens at each point (a varlen batch when > 1)")
    ap.add_argument("--no-varlen", action="store_true", help="the points over T only")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--peers", default="/tmp/peers", help="where bench/peer_wheels.sh installed the peers")
    opt = ap.parse_args()
    if os.path.isdir(opt.peers):
        import site
        site.addsitedir(opt.peers)  # its .pth file finds cutlass
    lib = gdn.load(opt.lib)
    peak = mm_rate(opt.reps)
    print("bf16 matmul 8192^3: %.0f TFLOP/s (the tensor-core rate of this run)" % peak)
    points = [("B=%d T=%d" % (opt.B, T), [T] * opt.B) for T in opt.T]
    if not opt.no_varlen:
        points += [("varlen 16 x 2048", [2048] * 16), ("varlen 64 x 512", [512] * 64),
                   ("varlen 4 x 8192 + 64 x 1", [8192] * 4 + [1] * 64),
                   ("varlen mixed", [8192, 4096, 2048, 1024, 1000, 512, 300, 256, 128, 64, 17, 5])]
    rows = []
    print("%-26s %11s %11s %11s %11s %8s %8s %7s  %s" % ("point", "chunked us", "FI us", "fla us", "exact us",
                                                          "FI/ours", "TFLOP/s", "of peak", "o rel L2 vs exact"))
    for name, lengths in points:
        s = inputs(lengths, seed=len(rows))
        calls = {"libgdn_chunked": libgdn_call(lib, s, "cuda_chunked")}
        try:
            calls["fla_chunk"] = fla_call(s)
        except Exception as e:  # noqa: BLE001
            print("  fla: %s" % str(e).splitlines()[0][:120])
        try:
            calls["flashinfer"] = flashinfer_call(s)
        except Exception as e:  # noqa: BLE001
            print("  flashinfer: %s" % str(e).splitlines()[0][:120])
        calls["libgdn_exact"] = libgdn_call(lib, s, None)
        for n, (run, _) in list(calls.items()):  # one plain call each, checked, before any graph
            try:
                run()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print("  %s: %s" % (n, str(e).splitlines()[0][:120]))
                del calls[n]
        ye, se = (x.clone() for x in calls["libgdn_exact"][1])  # the exact recurrence: ref's bits
        acc = {}  # o and final state, rel. L2 against the exact recurrence
        for n, (_, out) in calls.items():
            if n == "libgdn_exact":
                continue
            o, ht = out if isinstance(out, tuple) else (out["o"], out["ht"])
            acc[n] = dict(o_rel_l2=rel_l2(o.float(), ye.float()), state_rel_l2=rel_l2(ht.float(), se))
        if sum(lengths) > 8192:  # the exact recurrence is timed up to 8192 tokens
            del calls["libgdn_exact"]
        impls = {n: graphed(run) for n, (run, _) in calls.items()}
        inner = max(3, min(50, int(2e5 / max(1, sum(lengths)))))
        times = {n: [] for n in impls}
        for _ in range(opt.reps):
            for n, (fn, _) in impls.items():
                times[n].append(time_round(fn, inner))
        med = {n: statistics.median(t) for n, t in times.items()}
        tf = flops(lengths) / (med["libgdn_chunked"] * 1e-6) / 1e12
        row = dict(point=name, lengths=lengths, us=med, how={n: h for n, (_, h) in impls.items()},
                   tflops=tf, peak_tflops=peak, flop=flops(lengths), accuracy=acc)
        rows.append(row)
        opt_us = lambda n: "%.1f" % med[n] if n in med else "-"  # noqa: E731
        fi = med.get("flashinfer")
        print("%-26s %11.1f %11s %11s %11s %8s %8.1f %6.1f%%  %s" % (
            name, med["libgdn_chunked"], opt_us("flashinfer"), opt_us("fla_chunk"), opt_us("libgdn_exact"),
            "%.2f" % (fi / med["libgdn_chunked"]) if fi else "-", tf, 100 * tf / peak,
            " ".join("%s %.1e" % (n.split("_")[0] if n != "libgdn_chunked" else "ours", a["o_rel_l2"])
                     for n, a in acc.items())))
    if opt.out:
        with open(opt.out, "w") as f:
            json.dump(dict(shape=dict(Hk=HK, Hv=HV, D=D, dtype="bf16"), device=torch.cuda.get_device_name(),
                           peak_tflops=peak, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
