#!/usr/bin/env python3
"""Decode and verify windows beside FlashInfer and flash-linear-attention (fla), on one GPU, in one process.

The serving shape of Qwen3-Next's GDN decode: Hk 16, Hv 32, D 128, bf16 q/k/v/y (q and k already normalized), an f32
state pool [slots, Hv, V, K] updated in place at the slots of `initial_state_indices`, the raw gate (a, A_log,
dt_bias: g = exp(-exp(A_log) softplus(a + dt_bias))) and beta logits (beta = sigmoid(b)) inside the kernel. Points:
decode (T = 1) at B = 1 and 256, verify windows of n = 7 at B = 1 and 64 (states written at the window's end).

Each row is the median over replays of a CUDA graph of many calls (time per call), inputs and slots rotated over
sets that together exceed L2 several times. Rows:
  flashinfer        gdn_decode.gated_delta_rule_decode_pretranspose (T = 1) / gated_delta_rule_mtp (T > 1) over the
                    pool, disable_state_update=False (bf16 a and b, as it requires)
  flashinfer_bf16   the same with a bf16 pool (a different state contract: the state rounded to bf16 every step)
  fla               fla 0.6.0's fused_recurrent_gated_delta_rule: dense [B, Hv, V, K] states in and out (0.6.0 has no
                    state indices), the gate and sigmoid in its kernel
  libgdn_fla        libgdn's fla-compatible name with vLLM's pool convention (ssm_state_indices, in place), f32 a and b
  libgdn_fla_bf16ab the same with bf16 a and b (the package widens them to f32 first: one more kernel)
  libgdn_fla_bf16pool  libgdn_fla on a bf16 pool, taken as it is (the state widened once at the start of the call and
                    rounded once where stored; its floor is the bf16 pool's bytes), beside flashinfer_bf16
  libgdn_vllm       decode as vLLM calls it: packed [1, B] tokens with cu_seqlens and ssm_state_indices on the GPU
  libgdn_dense      gdn_delta's dense call through the C API on the same slot (B = 1 only)
The copy bandwidth (bytes read + written) and a trivial kernel's cost per call are measured beside them; `floor` is
the pool's read + write at the copy bandwidth. libgdn's outputs and states are checked against FlashInfer's
(tolerance: different arithmetic) and between libgdn's rows (bitwise).

    python3 bench/decode_peers.py --out results.json     (FlashInfer and fla imported where installed: --peers DIR,
                                                           bench/peer_wheels.sh's /tmp/peers by default)
"""
import argparse
import json
import os
import site
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import gpu_compare as G  # noqa: E402  (time_calls, copy_bandwidth_tbps: the bench's one timing)
from libgdn import capi as gdn  # noqa: E402
import libgdn.fla as lfla  # noqa: E402

HK, HV, D = 16, 32, 128
POINTS = (("decode", 1, 1), ("decode", 256, 1), ("verify", 1, 7), ("verify", 64, 7))


def make_sets(B, T, n_sets, gen):
    """n_sets input sets of B sequences; set i's sequences use slots i*B .. i*B + B - 1 of one pool."""
    sets = []
    for i in range(n_sets):
        q = F.normalize(torch.randn(B, T, HK, D, device="cuda", generator=gen), dim=-1).to(torch.bfloat16)
        k = F.normalize(torch.randn(B, T, HK, D, device="cuda", generator=gen), dim=-1).to(torch.bfloat16)
        v = torch.randn(B, T, HV, D, device="cuda", generator=gen).to(torch.bfloat16)
        a = torch.randn(B, T, HV, device="cuda", generator=gen).to(torch.bfloat16)
        b = torch.randn(B, T, HV, device="cuda", generator=gen).to(torch.bfloat16)
        idx = torch.arange(i * B, (i + 1) * B, dtype=torch.int32, device="cuda")
        sets.append(dict(q=q, k=k, v=v, a=a, b=b, a32=a.float(), b32=b.float(), idx=idx, idx64=idx.long(), slot0=i * B))
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", default=None, help="comma list of B:T (default: the four serving points)")
    ap.add_argument("--peers", default="/tmp/peers", help="where bench/peer_wheels.sh installed the peers")
    opt = ap.parse_args()
    if os.path.isdir(opt.peers):
        site.addsitedir(opt.peers)  # its .pth file finds cutlass
    points = POINTS if not opt.points else [("decode" if int(t) == 1 else "verify", int(b), int(t))
                                            for b, t in (p.split(":") for p in opt.points.split(","))]
    lib = gdn.load()
    try:
        import flashinfer
        from flashinfer import gdn_decode as fi
        fi_version = flashinfer.__version__
    except Exception as exc:  # noqa: BLE001
        print("FlashInfer not importable: %r" % exc)
        fi, fi_version = None, None
    try:
        import fla
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent
        fla_version = fla.__version__
    except Exception as exc:  # noqa: BLE001
        print("fla not importable: %r" % exc)
        fla_recurrent, fla_version = None, None
    bw = G.copy_bandwidth_tbps()
    tiny = torch.zeros(1, device="cuda")
    call_floor = G.time_calls([lambda: tiny.add_(1.0)])[0]
    meta = dict(device=torch.cuda.get_device_name(0), copy_bandwidth_tbps=bw, call_floor_us=call_floor * 1e6,
                torch=torch.__version__, flashinfer=fi_version, fla=fla_version, date=time.strftime("%Y-%m-%d"),
                timing="median of CUDA-graph replays, us per call, inputs and slots rotated over sets > 4x L2")
    print("device %s, copy %.2f TB/s, trivial kernel %.2f us/call, flashinfer %s, fla %s"
          % (meta["device"], bw, call_floor * 1e6, fi_version, fla_version))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    A_log = torch.log(torch.rand(HV, device="cuda", generator=gen) * 15 + 1).float()
    dt_bias = (0.5 * torch.randn(HV, device="cuda", generator=gen)).float()
    scale = D ** -0.5
    rows, checks = [], []
    for kind, B, T in points:
        state_bytes = B * HV * D * D * 4
        n_sets = max(2, -(-4 * G.L2_BYTES // state_bytes))
        sets = make_sets(B, T, n_sets, gen)
        pool0 = (0.1 * torch.randn(n_sets * B, HV, D, D, device="cuda", generator=gen)).float()
        floor_us = 2 * state_bytes / (bw * 1e12) * 1e6
        y = torch.empty(B, T, HV, D, dtype=torch.bfloat16, device="cuda")
        impls, dense = {}, {}

        def libgdn_fla(s, pool, ab="32"):
            return lfla.fused_recurrent_gated_delta_rule(
                s["q"], s["k"], s["v"], g=s["a" + ab], beta=s["b" + ab], scale=scale, initial_state=pool,
                inplace_final_state=True, ssm_state_indices=s["idx"], use_gate_in_kernel=True, A_log=A_log,
                dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True, state_v_first=True)[0]

        impls["libgdn_fla"] = lambda s, pool: libgdn_fla(s, pool)
        if T == 1:  # vLLM's call: packed [1, B] tokens, cu_seqlens and ssm_state_indices on the device
            cu = torch.arange(B + 1, dtype=torch.int32, device="cuda")

            def libgdn_vllm(s, pool):
                pk = lambda x: x.view(1, B, *x.shape[2:])  # noqa: E731
                return lfla.fused_recurrent_gated_delta_rule(
                    pk(s["q"]), pk(s["k"]), pk(s["v"]), g=pk(s["a32"]), beta=pk(s["b32"]), scale=scale,
                    initial_state=pool, inplace_final_state=True, cu_seqlens=cu, ssm_state_indices=s["idx"],
                    use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
                    state_v_first=True)[0].view(B, 1, HV, D)
            impls["libgdn_vllm"] = libgdn_vllm
        impls["libgdn_fla_bf16ab"] = lambda s, pool: libgdn_fla(s, pool, "")
        impls["libgdn_fla_bf16pool"] = lambda s, pool: libgdn_fla(s, pool)  # run on a bf16 pool below
        if B == 1:
            def libgdn_dense(s, pool):
                st = pool[s["slot0"]]
                a = gdn.args(B=1, T=T, Hk=HK, Hv=HV, Dk=D, Dv=D, dtype=gdn.BF16, q=s["q"].data_ptr(),
                             k=s["k"].data_ptr(), v=s["v"].data_ptr(), y=y.data_ptr(), gate_kind=gdn.GATE_RAW,
                             gate=s["a32"].data_ptr(), A_log=A_log.data_ptr(), dt_bias=dt_bias.data_ptr(),
                             beta_kind=gdn.BETA_LOGIT, beta=s["b32"].data_ptr(), state_layout=gdn.STATE_VK,
                             state_in=st.data_ptr(), state_out=st.data_ptr(), scale=scale, backend=gdn.BACKEND_CUDA)
                a.stream = torch.cuda.current_stream().cuda_stream
                gdn.delta(lib, a)
                return y
            impls["libgdn_dense"] = libgdn_dense
        if fi is not None:
            def flashinfer_call(s, pool):
                if T == 1:
                    return fi.gated_delta_rule_decode_pretranspose(
                        s["q"], s["k"], s["v"], None, A_log, s["a"], dt_bias, s["b"], scale=scale, use_qk_l2norm=False,
                        initial_state=pool, initial_state_indices=s["idx"])[0]
                return fi.gated_delta_rule_mtp(s["q"], s["k"], s["v"], pool, s["idx"], A_log, s["a"], dt_bias, s["b"],
                                               scale=scale, disable_state_update=False, use_qk_l2norm=False)[0]
            impls["flashinfer"] = flashinfer_call
            impls["flashinfer_bf16"] = flashinfer_call  # run on a bf16 pool below
        if fla_recurrent is not None:
            def fla_call(s, pool):
                key = id(s)
                if key not in dense:
                    dense[key] = pool[s["idx64"]].contiguous()
                o, dense["final"] = fla_recurrent(s["q"], s["k"], s["v"], g=s["a32"], beta=s["b32"], scale=scale,
                                                  initial_state=dense[key], output_final_state=True,
                                                  use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                                                  use_beta_sigmoid_in_kernel=True, state_v_first=True)
                return o
            impls["fla"] = fla_call
        outs = {}
        for name, fn in impls.items():
            half = name in ("flashinfer_bf16", "libgdn_fla_bf16pool")
            pool = pool0.to(torch.bfloat16) if half else pool0.clone()
            try:
                # one call on set 0 from the initial pool, for the checks; then the timing on every set
                o = fn(sets[0], pool).float().clone()
                st = dense["final"] if name == "fla" else pool[sets[0]["idx64"]]  # fla: its own final states
                outs[name] = (o, st.float().clone())
                pool.copy_(pool0)
                if name == "libgdn_fla_bf16pool" and "flashinfer_bf16" in outs:  # the same state contract's peer
                    o_fi, st_fi = outs["flashinfer_bf16"]
                    rel = lambda x, r: float((x - r).norm() / r.norm().clamp_min(1e-30))  # noqa: E731
                    checks.append(dict(point=kind, B=B, T=T, against="flashinfer_bf16 (bf16 pools)",
                                       y_rel=rel(o, o_fi), state_rel=rel(outs[name][1], st_fi), bitwise=None))
                med, lo, hi, mode = G.time_calls([lambda s=s: fn(s, pool) for s in sets], min_calls=4 * n_sets)
            except Exception as exc:  # noqa: BLE001
                print("%-18s %s B=%d T=%d: %r" % (name, kind, B, T, exc))
                continue
            fl = floor_us / 2 if half else floor_us  # a bf16 pool's bytes are half
            row = dict(point=kind, B=B, T=T, impl=name, us=med * 1e6, lo_us=lo * 1e6, hi_us=hi * 1e6, mode=mode,
                       floor_us=fl, over_floor=med * 1e6 / fl)
            rows.append(row)
            print("%-6s B=%-3d T=%d %-18s %8.2f us  (%.2f-%.2f)  %.2fx floor %.1f us  %s"
                  % (kind, B, T, name, row["us"], row["lo_us"], row["hi_us"], row["over_floor"], fl, mode))
            del pool
        base = outs.get("libgdn_fla")
        for name, (o, st) in outs.items():
            if base is None or name == "libgdn_fla":
                continue
            ours = name.startswith("libgdn") and not name.endswith("bf16pool")  # bf16 pools: another state contract
            rel = lambda x, r: float((x - r).norm() / r.norm().clamp_min(1e-30))  # noqa: E731
            c = dict(point=kind, B=B, T=T, against=name, y_rel=rel(base[0], o), state_rel=rel(base[1], st),
                     bitwise=bool(torch.equal(base[0], o) and torch.equal(base[1], st)) if ours else None)
            checks.append(c)
            print("   libgdn_fla vs %-16s y rel %.2e  state rel %.2e%s" % (
                name, c["y_rel"], c["state_rel"], "" if not ours else ("  bitwise" if c["bitwise"] else "  DIFFERS")))
        del sets, pool0
        torch.cuda.empty_cache()
    with open(opt.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows, checks=checks), f, indent=1)
    bad = [c for c in checks if c["bitwise"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
