#!/usr/bin/env python3
"""The chunked contract's accuracy (issue 21): libgdn's exact recurrence, its cuda_chunked, and flash-linear-attention's
chunked and fused-recurrent kernels against a float64 reference, on the same inputs, with ordinary and hostile gates.

Shapes: B = 1, Hk = 16, Hv = 32, Dk = Dv = 128 (--small: Hk 2, Hv 4, D 32), bf16 q, k, v, f32 log-decay gate and
direct beta (FLA's convention), f32 initial state (KV), scale 1/sqrt(Dk); T in --T (default 64 512 2048). Gates:
    ordinary   g = log(0.9 + 0.1 u)            (decays 0.9 .. 1)
    zero       ordinary, with every 97th token's gate exactly -inf (decay exactly 0: the state is forgotten)
    huge       g = -50 u                       (decays down to e^-50)
The reference is the recurrence in float64 on the same (rounded) inputs, token by token:
    S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q * scale
Errors: max |x - ref| / max |ref| over y and the final state (and the relative L2 norm of the difference), and whether
the output is finite; beside them the error of the reference's y rounded to bf16 (the outputs' own rounding, a floor
for every kernel). FLA and FlashInfer (flashinfer.gdn_prefill.chunk_gated_delta_rule) are optional (their kernels
need CUDA; --peers DIR: bench/peer_wheels.sh's install folder); without a GPU (--device cpu) libgdn's CPU kernels run
against the reference.

    PYTHONPATH=/tmp/site python3 bench/chunk_accuracy.py --out results.json     # the GPU machine, fla installed
    python3 bench/chunk_accuracy.py --device cpu --small --T 64 256             # anywhere
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from libgdn import capi as gdn  # noqa: E402


def inputs(T, Hk, Hv, D, gate, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(1, T, Hk, D, generator=gen), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(1, T, Hk, D, generator=gen), dim=-1).to(torch.bfloat16)
    v = torch.randn(1, T, Hv, D, generator=gen).to(torch.bfloat16)
    u = torch.rand(1, T, Hv, generator=gen)
    g = torch.log(0.9 + 0.1 * u) if gate != "huge" else -50.0 * u
    if gate == "zero":
        g[:, ::97] = -math.inf
    beta = torch.sigmoid(torch.randn(1, T, Hv, generator=gen))
    h0 = 0.1 * torch.randn(1, Hv, D, D, generator=gen)  # [B, Hv, Dk, Dv]: FLA's and libgdn's KV
    return {n: x.to(device) for n, x in dict(q=q, k=k, v=v, g=g.float(), beta=beta.float(), h0=h0.float()).items()}


def reference(s, Hk, Hv, D, scale):
    """The recurrence in float64: (y [1, T, Hv, D], final state [1, Hv, Dk, Dv])."""
    q, k, v = (s[n].double().cpu() for n in ("q", "k", "v"))
    g, beta, S = s["g"].double().cpu(), s["beta"].double().cpu(), s["h0"].double().cpu()[0].clone()
    T, group = q.shape[1], Hv // Hk
    y = torch.empty(1, T, Hv, D, dtype=torch.float64)
    kk, qq = k[0].repeat_interleave(group, dim=1), q[0].repeat_interleave(group, dim=1)  # [T, Hv, D]
    for t in range(T):
        S = S * torch.exp(g[0, t])[:, None, None]
        kv = torch.einsum("hij,hi->hj", S, kk[t])
        S = S + kk[t][:, :, None] * (beta[0, t][:, None] * (v[0, t] - kv))[:, None, :]
        y[0, t] = torch.einsum("hij,hi->hj", S, qq[t]) * scale
    return y, S[None]


def libgdn(lib, s, Hk, Hv, D, scale, cuda, kernel=None):
    T = s["q"].shape[1]
    y = torch.empty_like(s["v"])
    st = torch.empty_like(s["h0"])
    a = gdn.args(B=1, T=T, Hk=Hk, Hv=Hv, Dk=D, Dv=D, dtype=gdn.BF16, q=s["q"].data_ptr(), k=s["k"].data_ptr(),
                 v=s["v"].data_ptr(), y=y.data_ptr(), gate_kind=gdn.GATE_LOG_DECAY, gate=s["g"].data_ptr(),
                 beta_kind=gdn.BETA_DIRECT, beta=s["beta"].data_ptr(), state_layout=gdn.STATE_KV,
                 state_in=s["h0"].data_ptr(), state_out=st.data_ptr(), scale=scale,
                 backend=gdn.BACKEND_CUDA if cuda else gdn.BACKEND_CPU)
    if kernel:
        a.kernel = kernel.encode()
    gdn.delta(lib, a)
    if cuda:
        torch.cuda.synchronize()
    return y, st


def fla_fns():
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    except Exception as exc:  # no fla, or no GPU for its kernels
        print("flash-linear-attention not available (%s): libgdn only" % exc)
        return {}
    def call(fn):
        def run(s, scale):
            o, ht = fn(s["q"], s["k"], s["v"], g=s["g"], beta=s["beta"].to(torch.bfloat16), scale=scale,
                       initial_state=s["h0"], output_final_state=True)
            torch.cuda.synchronize()
            return o, ht
        return run
    return {"fla_chunk": call(chunk_gated_delta_rule), "fla_fused_recurrent": call(fused_recurrent_gated_delta_rule)}


def flashinfer_fn():
    """FlashInfer's Hopper prefill (flashinfer.gdn_prefill.chunk_gated_delta_rule): packed [T, H, D] tensors with
    cu_seqlens, the gate as alpha = exp(g), f32 beta, states [N, Hv, V, K] (ours transposed)."""
    try:
        from flashinfer.gdn_prefill import chunk_gated_delta_rule
    except Exception as exc:  # noqa: BLE001
        print("FlashInfer not available (%s)" % exc)
        return {}

    def run(s, scale):
        T = s["q"].shape[1]
        cu = torch.tensor([0, T], dtype=torch.int64, device=s["q"].device)
        o, ht = chunk_gated_delta_rule(s["q"][0], s["k"][0], s["v"][0], g=torch.exp(s["g"][0]), beta=s["beta"][0],
                                       scale=scale, initial_state=s["h0"].transpose(-1, -2).contiguous(),
                                       output_final_state=True, cu_seqlens=cu)
        torch.cuda.synchronize()
        return o[None], ht.transpose(-1, -2)
    return {"flashinfer_chunk": run}


def error(x, ref):
    x = x.double().cpu()
    finite = bool(torch.isfinite(x).all())
    return (((x - ref).abs().max() / ref.abs().max()).item() if finite else math.inf), finite


def rel_l2(x, ref):
    x = x.double().cpu()
    return ((x - ref).norm() / ref.norm()).item() if bool(torch.isfinite(x).all()) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true", help="Hk 2, Hv 4, D 32")
    ap.add_argument("--T", type=int, nargs="+", default=[64, 512, 2048])
    ap.add_argument("--lib", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--peers", default="/tmp/peers", help="where bench/peer_wheels.sh installed the peers")
    opt = ap.parse_args()
    if os.path.isdir(opt.peers):
        import site
        site.addsitedir(opt.peers)  # its .pth file finds cutlass
    Hk, Hv, D = (2, 4, 32) if opt.small else (16, 32, 128)
    scale, cuda = D ** -0.5, opt.device == "cuda"
    lib = gdn.load(opt.lib)
    impls = {"libgdn": lambda s, sc: libgdn(lib, s, Hk, Hv, D, sc, cuda)}
    if cuda:
        impls["libgdn_chunked"] = lambda s, sc: libgdn(lib, s, Hk, Hv, D, sc, cuda, "cuda_chunked")
        impls.update(fla_fns())
        impls.update(flashinfer_fn())
    rows = []
    print("%-8s %6s  %-20s %12s %12s  %s" % ("gate", "T", "implementation", "y err", "state err", "finite"))
    for gate in ("ordinary", "zero", "huge"):
        for T in opt.T:
            s = inputs(T, Hk, Hv, D, gate, opt.device, seed=T)
            y_ref, s_ref = reference(s, Hk, Hv, D, scale)
            floor, _ = error(y_ref.to(torch.bfloat16), y_ref)  # y's own rounding to bf16: no kernel does better
            rows.append(dict(gate=gate, T=T, impl="(y rounded to bf16)", y_err=floor, state_err=None, finite=True))
            print("%-8s %6d  %-20s %12.3e %12s" % (gate, T, "(y rounded to bf16)", floor, "-"))
            for name, fn in impls.items():
                try:
                    y, st = fn(s, scale)
                except Exception as exc:
                    print("%-8s %6d  %-20s failed: %r" % (gate, T, name, exc))
                    continue
                ey, fy = error(y, y_ref)
                es, fs = error(st, s_ref)
                ly, ls = rel_l2(y, y_ref), rel_l2(st, s_ref)
                rows.append(dict(gate=gate, T=T, impl=name, y_err=ey if fy else None, state_err=es if fs else None,
                                 y_rel_l2=ly, state_rel_l2=ls, finite=fy and fs))
                print("%-8s %6d  %-20s %12.3e %12.3e  %s   rel L2 y %s state %s" % (
                    gate, T, name, ey, es, fy and fs, "%.2e" % ly if ly is not None else "-",
                    "%.2e" % ls if ls is not None else "-"))
    if opt.out:
        with open(opt.out, "w") as f:
            json.dump(dict(shape=dict(B=1, Hk=Hk, Hv=Hv, D=D), device=opt.device, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
