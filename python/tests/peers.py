"""The peers' gated delta rules on the inputs libgdn gets, for tolerance tests (test_peers.py) and docs/PEERS.md.

    python python/tests/peers.py                  # the table of docs/PEERS.md (markdown), on this machine's peers
    python python/tests/peers.py --device cuda    # libgdn, transformers' fallbacks and fla's kernels on CUDA

Peers, each imported at call time (a missing one is reported, not an error):
- mlx-lm's reference recurrence, `gated_delta_ops` (decay gate [B, T, Hv] or a vector gate [B, T, Hv, Dk], a mask
  [B, T]) and `gated_delta_update` (the raw gate a, A_log, dt_bias and the beta logit b; on CPU it runs
  gated_delta_ops), from mlx_lm/models/gated_delta.py, on mlx's CPU device. Its state is [B, Hv, Dv, Dk] (libgdn's
  "vk") and it applies no readout scale: its callers fold it into q, so it is given q * scale (a power of two here,
  exact, for Dk = 16 and 64; one f32 rounding for Dk = 128).
- transformers' torch fallbacks of its Qwen3-Next model file, `torch_recurrent_gated_delta_rule` and
  `torch_chunk_gated_delta_rule` (unwrapped from its hub-kernel decorators: python/hf_qwen3next.py), with the gate in
  log space (g = log decay), use_qk_l2norm_in_kernel=False, state [B, Hv, Dk, Dv] ("kv"). Scalar gates, no masks
  (the module zeroes padded tokens' inputs instead).
- flash-linear-attention's chunk_gated_delta_rule and fused_recurrent_gated_delta_rule (--device cuda only: Triton
  kernels), the log-space gate (gk for the vector gate, fused_recurrent only), no mask, state [B, Hv, Dk, Dv].
- libgdn.delta, the matching gate kind (decay, vector, log_decay, raw; beta direct or logit).
- The float64 reference (reference.py, from docs/CONTRACT.md) on the same inputs: q, k, v as rounded to the
  activation dtype, the gates and betas as f32, everything then in binary64.

Errors are normwise: max |x - ref| / max |ref| over y (real tokens only: a masked token's y is libgdn's +0 and mlx's
read of the state) and over the final state.
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.append(HERE)
from reference import delta_rule, rel  # noqa: E402


def _hf():
    """transformers' two fallbacks, or the reason they are absent."""
    sys.path.append(os.path.join(HERE, ".."))  # python/hf_qwen3next.py, after every installed package
    try:
        import hf_qwen3next
        _, m, _ = hf_qwen3next.modeling()
    except Exception as e:  # noqa: BLE001 (an absent or incompatible transformers: the reason is reported)
        return None, "transformers: %s: %s" % (type(e).__name__, e)
    fallbacks, _ = hf_qwen3next.torch_fallbacks(m)
    import transformers
    return fallbacks, "transformers %s" % transformers.__version__


def _mlx():
    """(mlx.core, mlx_lm.models.gated_delta), or (None, the reason)."""
    try:
        import mlx.core as mx
        import mlx_lm.models.gated_delta as gd
        mx.set_default_device(mx.cpu)
        import importlib.metadata as md
        return (mx, gd), "mlx %s, mlx-lm %s" % (md.version("mlx"), md.version("mlx-lm"))
    except Exception as e:  # noqa: BLE001
        return None, "mlx-lm: %s: %s" % (type(e).__name__, e)


HF, HF_WHY = None, None
MLX, MLX_WHY = None, None


def hf():
    global HF, HF_WHY
    if HF_WHY is None:
        HF, HF_WHY = _hf()
    return HF


def mlx():
    global MLX, MLX_WHY
    if MLX_WHY is None:
        MLX, MLX_WHY = _mlx()
    return MLX


# ---- inputs ----

def inputs(B, T, Hk, Hv, D, dtype=torch.float32, gate="decay", mask=False, hostile=None, seed=0):
    """One case's inputs, as every implementation gets them. q, k: unit rows (L2-normalised in float64, then
    rounded to dtype); v N(0, 1) in dtype; beta in (0, 1) as its logit b (f32) and sigmoid(b) (f32); the gate as
    the raw a ~ N(0, 1) with A_log ~ U(-3, -1), dt_bias ~ U(-1, 1) (f32; the decay
    exp(-exp(A_log) softplus(a + dt_bias)) in (0.46, 0.999), 98% of it in (0.61, 0.99), median 0.92), its decay g
    (f32), log g (f32), or a vector gate [B, T, Hv, D] (f32) in (0.6, 1).
    hostile: log g in [-0.1, 0] with "zero": g = 0 exactly (log g = -inf, a = +inf) at token T/2 - 3 of sequence
    0 only, or "huge": log g = -1e5 (g = 0 in f32: a reset) at token 3 of every 64 (each chunk of transformers').
    mask: sequence 0 real for all its tokens, the others padded (0) on every fourth token and on the last T/4."""
    g = torch.Generator().manual_seed(seed)
    n = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    unit = lambda x: (x / x.norm(dim=-1, keepdim=True)).to(dtype)
    c = dict(q=unit(n(B, T, Hk, D)), k=unit(n(B, T, Hk, D)), v=n(B, T, Hv, D).to(dtype))
    c["b"] = (n(B, T, Hv) * 1.5).float()
    c["beta"] = torch.sigmoid(c["b"])  # torch's f32 sigmoid: the direct beta every peer but the raw ones reads
    if gate == "vector":
        c["g"] = (0.6 + 0.4 * torch.rand(B, T, Hv, D, generator=g, dtype=torch.float64)).float()
    else:
        c["A_log"] = torch.empty(Hv, dtype=torch.float64).uniform_(-3, -1, generator=g).float()
        c["dt_bias"] = torch.empty(Hv, dtype=torch.float64).uniform_(-1, 1, generator=g).float()
        w, dt = torch.exp(c["A_log"].double()), c["dt_bias"].double()
        if hostile is None:
            a = n(B, T, Hv)
        else:  # the raw a of a wanted log g: softplus(a + dt_bias) = -log g / exp(A_log)
            lg = -0.1 * torch.rand(B, T, Hv, generator=g, dtype=torch.float64)
            if hostile == "huge":
                lg[:, 3::64] = -1e5
            sp = -lg / w
            a = sp + torch.log(-torch.expm1(-sp)) - dt
            if hostile == "zero":
                a[0, T // 2 - 3] = math.inf  # softplus(inf) = inf: g = exp(-inf) = 0 exactly
        c["a"] = a.float()
        sp = torch.nn.functional.softplus(c["a"].double() + dt)
        c["lg"] = (-w * sp).float()  # log g in f32 (-inf for the zero gate)
        c["g"] = torch.exp(c["lg"].double()).float()  # exactly 0 where lg = -inf
    if mask:
        m = torch.ones(B, T, dtype=torch.bool)
        m[1:, ::4] = False
        m[1:, T - T // 4:] = False
        c["mask"] = m
    c.update(B=B, T=T, Hk=Hk, Hv=Hv, D=D, dtype=dtype, gate=gate, scale=D ** -0.5)
    return c


def reference(c):
    """float64 (y [B, T, Hv, D], state [B, Hv, Dk, Dv]) from the rounded inputs. A masked token leaves the state
    (g = 1, beta = 0 is exact for that) and its y is not compared."""
    g, beta = c["g"].double(), c["beta"].double()
    if "mask" in c:
        m = c["mask"].double()
        g = torch.where(m.reshape(m.shape + (1,) * (g.dim() - 2)) > 0, g, torch.ones_like(g))
        beta = beta * m[..., None]
    return delta_rule(c["q"], c["k"], c["v"], g, beta, c["scale"], vector_gate=c["gate"] == "vector")


# ---- the implementations: each (y [B, T, Hv, D] in the activation dtype, state [B, Hv, Dk, Dv] f32) ----

DEVICE = "cpu"  # where libgdn, transformers' fallbacks and fla run (main's --device); the reference runs on CPU


def dev(c):
    """The case's tensors on DEVICE."""
    return {k: (x.to(DEVICE) if torch.is_tensor(x) else x) for k, x in c.items()}


def run_libgdn(c, kind):
    """kind: "decay", "log_decay", "vector" or "raw" (with the beta logit)."""
    import libgdn
    c = dev(c)
    B, Hv, D = c["B"], c["Hv"], c["D"]
    state = torch.zeros(B, Hv, D, D, device=DEVICE)
    kw = dict(state_out=state, state_layout="kv", scale=c["scale"])
    if "mask" in c:
        kw["mask"] = c["mask"].to(torch.uint8)
    if kind == "raw":
        y = libgdn.delta(c["q"], c["k"], c["v"], c["a"], c["b"], gate_kind="raw", beta_kind="logit",
                         A_log=c["A_log"], dt_bias=c["dt_bias"], **kw)
    else:
        gate = c["lg"] if kind == "log_decay" else c["g"]
        y = libgdn.delta(c["q"], c["k"], c["v"], gate.contiguous(), c["beta"], gate_kind=kind, **kw)
    return y.cpu(), state.cpu()


def _to_mx(mx, x):
    dt = {torch.float32: mx.float32, torch.bfloat16: mx.bfloat16, torch.bool: mx.bool_}[x.dtype]
    arr = mx.array((x.float() if x.dtype == torch.bfloat16 else x).numpy())
    return arr.astype(dt)


def _from_mx(mx, x, dtype):
    import numpy as np
    return torch.from_numpy(np.array(x.astype(mx.float32))).to(dtype)


def run_mlx(c, which):
    """which: "ops" (gated_delta_ops: the decay or vector gate, the direct beta, the mask) or "update"
    (gated_delta_update: a, b, A_log, dt_bias). State [B, Hv, Dv, Dk] back to "kv"."""
    mx, gd = mlx()
    q = _to_mx(mx, (c["q"].float() * c["scale"]).to(c["dtype"]))
    k, v = _to_mx(mx, c["k"]), _to_mx(mx, c["v"])
    mask = _to_mx(mx, c["mask"]) if "mask" in c else None
    if which == "update":
        y, s = gd.gated_delta_update(q, k, v, _to_mx(mx, c["a"]), _to_mx(mx, c["b"]), _to_mx(mx, c["A_log"]),
                                     _to_mx(mx, c["dt_bias"]), None, mask, use_kernel=False)
    else:
        y, s = gd.gated_delta_ops(q, k, v, _to_mx(mx, c["g"]), _to_mx(mx, c["beta"]), None, mask)
    mx.eval(y, s)
    return _from_mx(mx, y, c["dtype"]), _from_mx(mx, s, torch.float32).transpose(-1, -2).contiguous()


def run_hf(c, which):
    """which: "recurrent" or "chunk" (chunk_size 64)."""
    fn, c = hf()[which], dev(c)
    y, s = fn(c["q"], c["k"], c["v"], g=c["lg"], beta=c["beta"], initial_state=None, output_final_state=True,
              use_qk_l2norm_in_kernel=False)
    return y.cpu(), s.float().cpu()


def _fla():
    """flash-linear-attention's two gated delta rules (CUDA only), or None."""
    global FLA_WHY
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        import importlib.metadata as md
        FLA_WHY = "fla %s" % md.version("fla-core")
    except Exception as e:  # noqa: BLE001
        FLA_WHY = "fla: %s: %s" % (type(e).__name__, e)
        return None
    if DEVICE == "cpu":
        FLA_WHY = "fla: its kernels need a CUDA device (--device cuda)"
        return None
    return {"chunk": chunk_gated_delta_rule, "fused_recurrent": fused_recurrent_gated_delta_rule}


FLA_WHY = None


def run_fla(c, which):
    """fla's chunk_gated_delta_rule or fused_recurrent_gated_delta_rule (log-space gate g, or gk [B, T, Hv, Dk] for
    the vector gate, fused_recurrent only), its state [B, Hv, Dk, Dv]."""
    fn, c = _fla()[which], dev(c)
    gate = dict(gk=torch.log(c["g"])) if c["gate"] == "vector" else dict(g=c["lg"])
    try:
        y, s = fn(c["q"], c["k"], c["v"], beta=c["beta"], scale=c["scale"], initial_state=None,
                  output_final_state=True, **gate)
    except Exception:  # noqa: BLE001 (a build that wants beta in q's dtype: rounded, as bench/gpu_compare.py does)
        y, s = fn(c["q"], c["k"], c["v"], beta=c["beta"].to(c["q"].dtype), scale=c["scale"], initial_state=None,
                  output_final_state=True, **gate)
    torch.cuda.synchronize()
    return y.cpu(), s.float().cpu()


# name: (runner, the package it needs); LIBGDN_KIND: the libgdn gate kind on the same inputs (None: the case's)
IMPLS = {
    "mlx gated_delta_ops": (lambda c: run_mlx(c, "ops"), "mlx"),
    "mlx gated_delta_update": (lambda c: run_mlx(c, "update"), "mlx"),
    "transformers recurrent": (lambda c: run_hf(c, "recurrent"), "hf"),
    "transformers chunk": (lambda c: run_hf(c, "chunk"), "hf"),
    "fla chunk": (lambda c: run_fla(c, "chunk"), "fla"),  # --device cuda only (main)
    "fla fused_recurrent": (lambda c: run_fla(c, "fused_recurrent"), "fla"),
}
LIBGDN_KIND = {"mlx gated_delta_ops": None, "mlx gated_delta_update": "raw", "transformers recurrent": "log_decay",
               "transformers chunk": "log_decay", "fla chunk": "log_decay", "fla fused_recurrent": None}


def libgdn_kind(case, impl):
    k = LIBGDN_KIND[impl]
    if k is None and case["gate"] == "vector":
        return "vector"
    return k or ("log_decay" if impl.startswith("fla") else "decay")


def available(impl):
    need = IMPLS[impl][1]
    if need == "fla":
        return _fla() is not None, FLA_WHY
    ok = (mlx() if need == "mlx" else hf()) is not None
    return ok, (MLX_WHY if need == "mlx" else HF_WHY)


# The cases: (name, inputs(...) kwargs, the peers that take them)
ALL = [name for name, (_, need) in IMPLS.items() if need != "fla"]  # the CPU peers
MLX_OPS = ["mlx gated_delta_ops"]
CASES = [
    ("GQA 2/4, D 64, T 2048, f32", dict(B=2, T=2048, Hk=2, Hv=4, D=64), ALL),
    ("GQA 2/4, D 64, T 512, bf16", dict(B=2, T=512, Hk=2, Hv=4, D=64, dtype=torch.bfloat16), ALL),
    ("Qwen3-Next 16/32, D 128, T 64, f32", dict(B=1, T=64, Hk=16, Hv=32, D=128), ALL),
    ("vector gate, GQA 1/2, D 16, T 256, f32", dict(B=2, T=256, Hk=1, Hv=2, D=16, gate="vector"), MLX_OPS),
    ("vector gate, GQA 1/2, D 16, T 256, bf16", dict(B=2, T=256, Hk=1, Hv=2, D=16, gate="vector",
                                                     dtype=torch.bfloat16), MLX_OPS),
    ("mask, GQA 2/4, D 64, T 256, f32", dict(B=3, T=256, Hk=2, Hv=4, D=64, mask=True), MLX_OPS),
    ("zero gate (seq 0, t 125), D 64, T 256, f32", dict(B=2, T=256, Hk=2, Hv=4, D=64, hostile="zero"), ALL),
    ("huge decay (log g = -1e5 at t = 3 mod 64), D 64, T 256, f32",
     dict(B=2, T=256, Hk=2, Hv=4, D=64, hostile="huge"), ALL),
]


def errors(c, ref, out):
    """(y rel, state rel) against ref; y over real tokens only. NaN where out has a NaN."""
    (yr, sr), (y, s) = ref, out
    y = y.double()
    if "mask" in c:
        keep = c["mask"]
        yr, y = yr[keep], y[keep]
    bad = lambda x: bool(torch.isnan(x).any())
    ey = math.nan if bad(y) else rel(y, yr)
    es = math.nan if bad(s) else rel(s, sr)
    return ey, es


_CACHE = {}


def case_inputs(name):
    """The case's inputs, its float64 reference and libgdn's outputs per gate kind, computed once."""
    if name not in _CACHE:
        kw = next(kw for n, kw, _ in CASES if n == name)
        c = inputs(**kw)
        _CACHE[name] = (c, reference(c), {})
    return _CACHE[name]


def libgdn_out(name, kind):
    c, _, outs = case_inputs(name)
    if kind not in outs:
        outs[kind] = run_libgdn(c, kind)
    return outs[kind]


def compare(name, impl):
    """{impl, libgdn kind, errors of each against float64 and of impl against libgdn, the raw outputs}."""
    c, ref, _ = case_inputs(name)
    kind = libgdn_kind(c, impl)
    ours = libgdn_out(name, kind)
    theirs = IMPLS[impl][0](c)
    y_ours = ours[0].double()
    return dict(case=name, impl=impl, kind=kind, ours=errors(c, ref, ours), theirs=errors(c, ref, theirs),
                between=errors(c, (y_ours, ours[1].double()), theirs), out=theirs, libgdn=ours, inputs=c)


def fmt(x):
    return "NaN" if math.isnan(x) else "%.1e" % x


HEADER = ("| case | peer | libgdn gate | y rel: libgdn / peer | state rel: libgdn / peer | "
          "peer vs libgdn (y / state) |\n|---|---|---|---|---|---|")


def row(r):
    (oy, os_), (py, ps), (by, bs) = r["ours"], r["theirs"], r["between"]
    return "| %s | %s | %s | %s / %s | %s / %s | %s / %s |" % (
        r["case"], r["impl"], r["kind"], fmt(oy), fmt(py), fmt(os_), fmt(ps), fmt(by), fmt(bs))


def main():
    import argparse
    global DEVICE
    ap = argparse.ArgumentParser(description="the peers' table (docs/PEERS.md)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: libgdn, transformers' fallbacks and fla there")
    DEVICE = ap.parse_args().device
    print("libgdn, transformers and fla on %s; float64 reference on cpu\n" % DEVICE)
    print(HEADER)
    for name, _, impls in CASES:
        if DEVICE != "cpu" and "mask" not in name:  # fla: no mask; its vector gate (gk) in fused_recurrent only
            impls = impls + (["fla fused_recurrent"] if "vector" in name else ["fla chunk", "fla fused_recurrent"])
        for impl in impls:
            ok, why = available(impl)
            if not ok:
                print("| %s | %s | absent: %s | | | |" % (name, impl, why))
                continue
            try:
                print(row(compare(name, impl)))
            except Exception as e:  # noqa: BLE001 (the table goes on; the row says what failed)
                print("| %s | %s | failed: %s: %s | | | |" % (name, impl, type(e).__name__, str(e)[:200]))
    print("\n%s; %s; %s; torch %s" % (HF_WHY, MLX_WHY, FLA_WHY or "fla: not run on cpu", torch.__version__))


if __name__ == "__main__":
    try:
        import libgdn  # noqa: F401  (the installed package)
    except ImportError:  # a checkout's python/libgdn, with build/pic/libgdn.so
        sys.path.insert(0, os.path.join(HERE, ".."))
    main()
