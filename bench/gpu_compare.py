#!/usr/bin/env python3
"""libgdn's CUDA kernels side by side with flash-linear-attention (FLA) on one GPU, in one process.

Shapes: B=1, Hk=16, Hv=32, Dk=Dv=128, bf16 q/k/v/y, f32 gates/betas/state (log-decay gate, direct beta: FLA's
convention). Prefill sweep T in {1, 7, 64, 257, 2048, 8192} at B=1; decode sweep T=1, B in {1, 8, 64, 256}.
Every timing is the median over replays of a CUDA graph of many calls (time per call), inputs rotated over
enough sets that they do not sit in L2. The device-to-device copy bandwidth (bytes read + written) and the
fp32 peak (SMs x 128 lanes x 2 flop x max SM clock) are measured / read in the same run.

    python3 bench/gpu_compare.py --out results.json [--quick]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from libgdn import capi as gdn  # noqa: E402  (the C API through ctypes: raw pointers, forced variants)

HK, HV, D = 16, 32, 128
L2_BYTES = 60 << 20


def fp32_peak_tflops():
    props = torch.cuda.get_device_properties(0)
    mhz = None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        mhz = float(out)
    except Exception:
        mhz = 1980.0
    return props.multi_processor_count * 128 * 2 * mhz * 1e6 / 1e12, mhz, props.multi_processor_count


def copy_bandwidth_tbps():
    n = 2 << 30
    src = torch.empty(n // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    times = []
    for _ in range(12):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        dst.copy_(src)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e-3)
    t = statistics.median(times[2:])
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / t / 1e12


def time_calls(fns, min_calls=24, replays=9):
    """Median seconds per call of fns (called in rotation), via a CUDA graph; falls back to a plain loop."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    calls = max(min_calls, len(fns))
    calls = ((calls + len(fns) - 1) // len(fns)) * len(fns)
    mode = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            with torch.cuda.graph(g, stream=stream):
                for i in range(calls):
                    fns[i % len(fns)]()
        torch.cuda.synchronize()
        run = g.replay
    except Exception as exc:  # FLA paths that cannot be captured
        mode = "loop (%s)" % type(exc).__name__
        torch.cuda.synchronize()

        def run():
            for i in range(calls):
                fns[i % len(fns)]()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e-3 / calls)
    return statistics.median(times), min(times), max(times), mode


def make_set(B, T, gen):
    """One input set: FLA's tensors and ours (the same values)."""
    q = F.normalize(torch.randn(B, T, HK, D, device="cuda", generator=gen), dim=-1).to(torch.bfloat16)
    k = F.normalize(torch.randn(B, T, HK, D, device="cuda", generator=gen), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, HV, D, device="cuda", generator=gen).to(torch.bfloat16)
    g = torch.log(0.9 + 0.1 * torch.rand(B, T, HV, device="cuda", generator=gen)).float()
    beta = torch.sigmoid(torch.randn(B, T, HV, device="cuda", generator=gen)).to(torch.bfloat16).float()
    h0_kv = (0.1 * torch.randn(B, HV, D, D, device="cuda", generator=gen)).float()  # [B, HV, K, V]
    return dict(q=q, k=k, v=v, g=g, beta=beta, h0_kv=h0_kv, h0_vk=h0_kv.transpose(-1, -2).contiguous())


def our_args(s, B, T, layout, y, st_out, kernel=None):
    h0 = s["h0_kv"] if layout == gdn.STATE_KV else s["h0_vk"]
    return gdn.args(B=B, T=T, Hk=HK, Hv=HV, Dk=D, Dv=D, dtype=gdn.BF16, q=s["q"].data_ptr(), k=s["k"].data_ptr(),
                    v=s["v"].data_ptr(), y=y.data_ptr(), gate_kind=gdn.GATE_LOG_DECAY, gate=s["g"].data_ptr(),
                    beta_kind=gdn.BETA_DIRECT, beta=s["beta"].data_ptr(), state_layout=layout,
                    state_in=h0.data_ptr(), state_out=st_out.data_ptr(), scale=D ** -0.5,
                    backend=gdn.BACKEND_CUDA, kernel=kernel)


def profile(lib, cases=None):
    """Two plain calls (the second is the one to read) of the kernels worth a look, for ncu; cases: a list
    "B:T:kv|vk:kernel:variant,..." instead of the default ones."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    todo = ((1, 2048, gdn.STATE_KV, "cuda_packed", None), (1, 2048, gdn.STATE_KV, "cuda_rowsplit", "warps4"),
            (1, 7, gdn.STATE_VK, "cuda_rowsplit", "warps4"), (256, 1, gdn.STATE_VK, "cuda_decode", "stream"),
            (1, 1, gdn.STATE_VK, "cuda_decode", "stream"))
    if cases:
        todo = [(int(B), int(T), gdn.STATE_KV if lay == "kv" else gdn.STATE_VK, kern, None if var == "0" else var)
                for B, T, lay, kern, var in (c.split(":") for c in cases.split(","))]
    for B, T, layout, kernel, var in todo:
        s = make_set(B, T, gen)
        y = torch.empty(B, T, HV, D, dtype=torch.bfloat16, device="cuda")
        st = torch.empty(B, HV, D, D, dtype=torch.float32, device="cuda")
        a = our_args(s, B, T, layout, y, st)
        for _ in range(2):
            gdn.run_variant(lib, a, kernel, var)
        torch.cuda.synchronize()
        print("profiled B=%d T=%d %s:%s layout %d" % (B, T, kernel, var, layout))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer variants and shapes")
    ap.add_argument("--profile", action="store_true", help="one plain call of a few kernels (run under ncu)")
    ap.add_argument("--profile-cases", default=None, help="with --profile: B:T:kv|vk:kernel:variant,...")
    ap.add_argument("--ours-only", action="store_true", help="libgdn's kernels only (no FLA)")
    ap.add_argument("--decode-only", action="store_true", help="the decode shapes and T=7 only")
    ap.add_argument("--window", action="store_true", help="short windows: T = 1 .. 16 at B=1 and T=7 at B=8, the window, packed and rowsplit kernels")
    opt = ap.parse_args()

    lib = gdn.load()
    assert lib.gdn_device_count(gdn.BACKEND_CUDA) > 0, "libgdn sees no CUDA device"
    if opt.profile:
        return profile(lib, opt.profile_cases)
    try:
        if opt.ours_only:
            raise ImportError("--ours-only")
        import fla
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        fla_version = getattr(fla, "__version__", "?")
    except Exception as exc:
        print("FLA not importable: %r" % exc)
        chunk_gated_delta_rule = fused_recurrent_gated_delta_rule = None
        fla_version = None

    import triton
    peak, mhz, sms = fp32_peak_tflops()
    bw = copy_bandwidth_tbps()
    tiny = torch.zeros(1, device="cuda")
    call_floor = time_calls([lambda: tiny.add_(1.0)])[0]  # one trivial kernel per call, the same graph timing
    meta = dict(call_floor_us=call_floor * 1e6, device=torch.cuda.get_device_name(0), sms=sms, max_sm_clock_mhz=mhz, fp32_peak_tflops=peak,
                copy_bandwidth_tbps=bw, torch=torch.__version__, triton=triton.__version__, fla=fla_version,
                cuda=torch.version.cuda, date=time.strftime("%Y-%m-%d %H:%M:%S"),
                timing="median of CUDA-graph replays, seconds per call, inputs rotated over sets > 4x L2")
    print("device %s, %d SMs, %.0f MHz max, fp32 peak %.1f TFLOP/s, copy %.2f TB/s, one trivial kernel per call %.2f us" % (
        meta["device"], sms, mhz, peak, bw, call_floor * 1e6))

    shapes = [("prefill", 1, T) for T in (1, 7, 64, 257, 2048, 8192)] + [("decode", B, 1) for B in (1, 8, 64, 256)]
    if opt.quick:
        shapes = [("prefill", 1, T) for T in (7, 2048)] + [("decode", B, 1) for B in (1, 256)]
    if opt.decode_only:
        shapes = [("prefill", 1, 7)] + [("decode", B, 1) for B in (1, 8, 64, 256)]
    if opt.window:
        shapes = [("prefill", 1, T) for T in (1, 2, 4, 7, 8, 16)] + [("prefill", 8, 7)]
    results, checks = [], []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    for kind, B, T in shapes:
        probe = make_set(B, T, gen)
        set_bytes = sum(t.numel() * t.element_size() for t in probe.values()) + B * T * HV * D * 2
        n_sets = max(1, min(16, math.ceil(4 * L2_BYTES / set_bytes)))
        sets = [probe] + [make_set(B, T, gen) for _ in range(n_sets - 1)]
        y = torch.empty(B, T, HV, D, dtype=torch.bfloat16, device="cuda")
        st = torch.empty(B, HV, D, D, dtype=torch.float32, device="cuda")
        state_bytes = 2 * B * HV * D * D * 4
        flops = 7.0 * B * T * HV * D * D
        io_bytes = state_bytes + B * T * (2 * HK * D * 2 + 2 * HV * D * 2 + 2 * HV * 4)

        def record(impl, layout, sec, mode, extra=None):
            r = dict(kind=kind, B=B, T=T, impl=impl, layout=layout, median_us=sec[0] * 1e6, min_us=sec[1] * 1e6,
                     max_us=sec[2] * 1e6, timing=mode, gflops=flops / sec[0] / 1e9,
                     fp32_peak_fraction=flops / sec[0] / 1e12 / peak, state_tbps=state_bytes / sec[0] / 1e12,
                     bytes_tbps=io_bytes / sec[0] / 1e12, copy_bw_fraction=io_bytes / sec[0] / 1e12 / bw)
            if extra:
                r.update(extra)
            results.append(r)
            print("%-8s B=%-4d T=%-5d %-22s %-3s %9.2f us  %6.1f%% fp32  %5.2f TB/s (%4.1f%% copy) [%s]" % (
                kind, B, T, impl, layout, r["median_us"], 100 * r["fp32_peak_fraction"], r["bytes_tbps"],
                100 * r["copy_bw_fraction"], mode), flush=True)

        # ours: routed, then each variant, both layouts (packed v1, v2, v5 and decode/generic beyond a few tokens
        # lost in earlier runs: docs/kernels/)
        variants = [("routed", None, None)]
        variants += [("cuda_rowsplit:warps%d" % w, "cuda_rowsplit", "warps%d" % w) for w in (4, 8, 16)] if T > 1 else []
        variants += [("cuda_packed:l4p1w4", "cuda_packed", "l4p1w4")]
        variants += [("cuda_packed:" + v, "cuda_packed", v) for v in ("l8p2w4", "l4p1w4_tile", "l8p1w8_tile")] if T > 1 else []
        variants += [("cuda_window", "cuda_window", None)] if T <= 8 else []
        decode_variants = ("warp2", "stream") if opt.window else ("warp1", "warp2", "warp4", "warp8", "stream", "stream_stages2",
                                                               "stream_stages4", "stream_sync", "stream_ws")
        variants += [("cuda_decode:" + n, "cuda_decode", n) for n in decode_variants] if T <= 7 else []
        variants += [("cuda_generic", "cuda_generic", None)] if T <= 7 and not opt.window else []
        variants += [("routed_last", None, None)]  # the routed call again, measured last: an order effect shows here
        ours_kv = ours_vk = None
        for layout, lname in ((gdn.STATE_KV, "kv"), (gdn.STATE_VK, "vk")):
            routed_name = gdn.route(lib, our_args(probe, B, T, layout, y, st))
            outs = {}
            for vname, kernel, var in variants:
                arg_list = [our_args(s, B, T, layout, y, st) for s in sets]

                def make_fn(a, kernel=kernel, var=var):
                    def fn():
                        a.stream = torch.cuda.current_stream().cuda_stream
                        if kernel is None:
                            gdn.delta(lib, a)
                        else:
                            gdn.run_variant(lib, a, kernel, var)
                    return fn
                fns = [make_fn(a) for a in arg_list]
                try:
                    fns[0]()
                    torch.cuda.synchronize()
                except RuntimeError as exc:
                    print("  %s: %s" % (vname, exc))
                    continue
                outs[vname] = (y.clone(), st.clone())
                sec = time_calls(fns)
                record("routed=" + routed_name if vname == "routed" else vname, lname, sec[:3], sec[3])
            if kind == "decode" and B >= 64:
                # the state updated in place (state_out = state_in, as an engine's state cache), on copies of the sets'
                # states so that the other kernels and FLA keep their inputs; not part of the bitwise check
                h0_name = "h0_kv" if layout == gdn.STATE_KV else "h0_vk"
                copies = [s[h0_name].clone() for s in sets]
                in_place = []
                for s, c in zip(sets, copies):
                    a = our_args(s, B, T, layout, y, c)
                    a.state_in = c.data_ptr()
                    in_place.append(a)
                fns = [make_fn(a, None, None) for a in in_place]
                sec = time_calls(fns)
                record("routed_in_place", lname, sec[:3], sec[3])
                del copies
            base = outs.get("routed")
            if base is not None:
                same = all(torch.equal(o[0], base[0]) and torch.equal(o[1], base[1]) for o in outs.values())
                checks.append(dict(kind=kind, B=B, T=T, layout=lname, check="all libgdn kernels bitwise equal",
                                   ok=bool(same), kernels=sorted(outs)))
            if layout == gdn.STATE_KV:
                ours_kv = base
            else:
                ours_vk = base

        if ours_kv is not None and ours_vk is not None:
            same = torch.equal(ours_kv[0], ours_vk[0]) and torch.equal(ours_kv[1], ours_vk[1].transpose(-1, -2))
            checks.append(dict(kind=kind, B=B, T=T, check="kv layout == vk layout (bitwise)", ok=bool(same)))

        # FLA on the same inputs (KV state layout)
        for fname, fla_fn in (("fla_chunk", chunk_gated_delta_rule), ("fla_fused_recurrent", fused_recurrent_gated_delta_rule)):
            if fla_fn is None:
                continue

            def make_fla(s, fla_fn=fla_fn):
                beta16 = s["beta"].to(torch.bfloat16)

                def fn():
                    return fla_fn(s["q"], s["k"], s["v"], g=s["g"], beta=beta16, scale=D ** -0.5,
                                  initial_state=s["h0_kv"], output_final_state=True)
                return fn
            try:
                o, ht = make_fla(probe)()
                torch.cuda.synchronize()
            except Exception as exc:
                print("  %s failed: %r" % (fname, exc))
                continue
            sec = time_calls([make_fla(s) for s in sets])
            record(fname, "kv", sec[:3], sec[3])
            if ours_kv is not None:
                yo, so = ours_kv
                rel_y = ((yo.float() - o.float()).norm() / o.float().norm()).item()
                rel_s = ((so - ht.float()).norm() / ht.float().norm()).item()
                checks.append(dict(kind=kind, B=B, T=T, check="libgdn vs %s relative L2" % fname, y_rel=rel_y,
                                   state_rel=rel_s))
                print("  libgdn vs %s: y rel %.2e, state rel %.2e" % (fname, rel_y, rel_s))
        del sets, probe
        torch.cuda.empty_cache()

    with open(opt.out, "w") as f:
        json.dump(dict(meta=meta, results=results, checks=checks), f, indent=1)

    # the short table: routed libgdn (kv and vk) and FLA per shape
    print("\n%-8s %5s %5s | %10s %10s | %10s %10s | %s" % ("shape", "B", "T", "ours kv us", "ours vk us", "fla chunk",
                                                           "fla fused", "best ours: kernel, %fp32 / TB/s state"))
    for kind, B, T in shapes:
        rows = [r for r in results if r["kind"] == kind and r["B"] == B and r["T"] == T]

        def get(pred):
            m = [r for r in rows if pred(r)]
            return min(m, key=lambda r: r["median_us"]) if m else None
        rk = get(lambda r: r["impl"].startswith("routed") and r["layout"] == "kv")
        rv = get(lambda r: r["impl"].startswith("routed") and r["layout"] == "vk")
        fc = get(lambda r: r["impl"] == "fla_chunk")
        ff = get(lambda r: r["impl"] == "fla_fused_recurrent")
        best = get(lambda r: not r["impl"].startswith("fla"))
        fmt = lambda r: "%10.2f" % r["median_us"] if r else "%10s" % "-"
        print("%-8s %5d %5d | %s %s | %s %s | %s %s %.1f%% / %.2f" % (kind, B, T, fmt(rk), fmt(rv), fmt(fc), fmt(ff),
              best["impl"], best["layout"], 100 * best["fp32_peak_fraction"], best["state_tbps"]))
    # the routing evidence: per prefill shape and layout, the best rowsplit width against packed v0
    print("\nrouting: rowsplit (best width) vs packed v0, T > 4")
    for kind, B, T in shapes:
        if T <= 4:
            continue
        for lname in ("kv", "vk"):
            rows = [r for r in results if r["kind"] == kind and r["B"] == B and r["T"] == T and r["layout"] == lname]
            rs = [r for r in rows if r["impl"].startswith("cuda_rowsplit")]
            pk = [r for r in rows if r["impl"] == "cuda_packed/v0"]
            if not rs or not pk:
                continue
            best = min(rs, key=lambda r: r["median_us"])
            print("  %s B=%d T=%d %s: %s %.2f us, packed v0 %.2f us -> %s" % (
                kind, B, T, lname, best["impl"], best["median_us"], pk[0]["median_us"],
                best["impl"] if best["median_us"] < pk[0]["median_us"] else "cuda_packed"))
    bad = [c for c in checks if c.get("ok") is False]
    print("checks: %d, failed: %d" % (len(checks), len(bad)))
    for c in bad:
        print("  FAILED", c)


if __name__ == "__main__":
    main()
