"""libgdn.delta (gdn_delta) on numpy arrays and CPU torch tensors: every CPU kernel bitwise against kernel="ref",
the batch form against dense calls, the state layouts, the dtypes, and the float64 reference."""
import numpy as np
import pytest
import torch

import libgdn
from reference import delta_rule, rel

B, T, HK, HV, DK, DV = 2, 9, 2, 4, 16, 8
CPU_KERNELS = [name for name, backend, _ in libgdn.kernels() if backend == "cpu"]


def inputs(seed=0, B=B, T=T, dtype=torch.float32, vector=False, DK=DK, DV=DV):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)
    u = lambda lo, hi, *s: torch.rand(*s, generator=g) * (hi - lo) + lo
    k = torch.nn.functional.normalize(r(B, T, HK, DK), dim=-1)
    return dict(q=r(B, T, HK, DK).to(dtype), k=k.to(dtype), v=r(B, T, HV, DV).to(dtype),
                gate=u(0.7, 1.0, B, T, HV, DK) if vector else u(0.7, 1.0, B, T, HV), beta=u(0.1, 0.9, B, T, HV),
                state=r(B, HV, DV, DK) * 0.1)


def run(x, kernel=None, layout="vk", **kw):
    state = x["state"] if layout == "vk" else x["state"].transpose(-1, -2).contiguous()
    out = state.clone()
    y = libgdn.delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], state_in=state, state_out=out, kernel=kernel,
                     state_layout=layout, **kw)
    return y, out


def run_or_skip(x, kernel, **kw):
    """run(), skipping where the kernel cannot take the call here (this machine's ISA; packed_decode: Dk = 128)."""
    try:
        return run(x, kernel, **kw)
    except ValueError as e:
        if "cannot run these arguments" not in str(e):
            raise
        pytest.skip("%s: not eligible here" % kernel)


@pytest.mark.parametrize("kernel", CPU_KERNELS + [None])
@pytest.mark.parametrize("T,D", [(1, 16), (9, 16), (1, 128), (2, 128)])
def test_every_cpu_kernel_gives_refs_bits(kernel, T, D):
    x = inputs(T=T, DK=D, DV=D)
    y0, s0 = run(x, "ref")
    y, s = run_or_skip(x, kernel)
    assert torch.equal(y, y0) and torch.equal(s, s0)


def test_float64_reference():
    x = inputs()
    y, s = run(x, "ref", layout="kv")
    yr, sr = delta_rule(x["q"], x["k"], x["v"], x["gate"], x["beta"], DK ** -0.5, x["state"].transpose(-1, -2))
    assert rel(y, yr) < 1e-5 and rel(s, sr) < 1e-5


def test_vector_and_raw_gates_against_float64():
    x = inputs(vector=True)
    y, s = run(x, "ref", layout="kv", gate_kind="vector")
    yr, sr = delta_rule(x["q"], x["k"], x["v"], x["gate"], x["beta"], DK ** -0.5, x["state"].transpose(-1, -2),
                        vector_gate=True)
    assert rel(y, yr) < 1e-5 and rel(s, sr) < 1e-5
    x = inputs()
    a, A_log, dt_bias = x["gate"] * 4 - 2, torch.linspace(-1, 1, HV), torch.linspace(0.5, 1.5, HV)
    y, _ = run(dict(x, gate=a), "ref", gate_kind="raw", A_log=A_log, dt_bias=dt_bias, beta_kind="logit")
    decay = torch.exp(-torch.exp(A_log.double()) * torch.nn.functional.softplus(a.double() + dt_bias.double()))
    yr, _ = delta_rule(x["q"], x["k"], x["v"], decay, torch.sigmoid(x["beta"].double()), DK ** -0.5,
                       x["state"].transpose(-1, -2))
    assert rel(y, yr) < 1e-5


def test_layouts_give_the_same_bits():
    x = inputs()
    y_vk, s_vk = run(x, layout="vk")
    y_kv, s_kv = run(x, layout="kv")
    assert torch.equal(y_vk, y_kv) and torch.equal(s_vk, s_kv.transpose(-1, -2))


def test_numpy_and_torch_give_the_same_bits():
    x = inputs()
    y, s = run(x)
    n = {k: v.numpy() for k, v in x.items()}
    out = n["state"].copy()
    yn = libgdn.delta(n["q"], n["k"], n["v"], n["gate"], n["beta"], state_in=n["state"], state_out=out)
    assert isinstance(yn, np.ndarray) and np.array_equal(yn, y.numpy()) and np.array_equal(out, s.numpy())


def test_in_place_state():
    x = inputs()
    y, s = run(x)
    state = x["state"].clone()
    y2 = libgdn.delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], state_in=state, state_out=state)
    assert torch.equal(y, y2) and torch.equal(state, s)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes_every_cpu_kernel(dtype):
    x = inputs(dtype=dtype)
    y0, s0 = run(x, "ref")
    assert y0.dtype == dtype
    for kernel in CPU_KERNELS:
        try:
            y, s = run(x, kernel)
        except ValueError:
            continue
        assert torch.equal(y, y0) and torch.equal(s, s0), kernel
    yr, _ = delta_rule(x["q"], x["k"], x["v"], x["gate"], x["beta"], DK ** -0.5, x["state"].transpose(-1, -2))
    assert rel(y0, yr) < 1e-2


def test_mask_keeps_the_state_and_writes_zero():
    x = inputs()
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[:, 4] = False
    y, s = run(x, mask=mask)
    assert (y[:, 4] == 0).all()
    keep = torch.arange(T) != 4
    short = {n: (v[:, keep] if n != "state" else v) for n, v in x.items()}
    ys, ss = run(short)
    assert torch.equal(y[:, keep], ys) and torch.equal(s, ss)


def test_batch_form_equals_dense_calls():
    """Three sequences of 1, 4 and 2 tokens packed token-major, on slots 6, skipped and 2 of a pool of 8, in place."""
    lens, slots = [1, 4, 2], [6, -1, 2]
    seqs = [inputs(seed=10 + i, B=1, T=n) for i, n in enumerate(lens)]
    cat = {n: torch.cat([s[n][0] for s in seqs]) for n in ("q", "k", "v", "gate", "beta")}
    pool = torch.randn(8, HV, DV, DK)
    before = pool.clone()
    y = libgdn.delta(cat["q"], cat["k"], cat["v"], cat["gate"], cat["beta"], state_in=pool, state_out=pool,
                     cu_seqlens=[0, 1, 5, 7], state_slot=slots)
    assert y.shape == (7, HV, DV)
    for i, (s, slot) in enumerate(zip(seqs, slots)):
        lo, hi = sum(lens[:i]), sum(lens[:i + 1])
        if slot < 0:
            assert (y[lo:hi] == 0).all()
            continue
        out = torch.empty(1, HV, DV, DK)
        yd = libgdn.delta(s["q"], s["k"], s["v"], s["gate"], s["beta"], state_in=before[slot:slot + 1], state_out=out)
        assert torch.equal(y[lo:hi], yd[0]) and torch.equal(pool[slot], out[0])
    untouched = [i for i in range(8) if i not in slots]
    assert torch.equal(pool[untouched], before[untouched])
    # fla's packed form [1, T, ...] gives the same bits
    pool2 = before.clone()
    y1 = libgdn.delta(cat["q"][None], cat["k"][None], cat["v"][None], cat["gate"][None], cat["beta"][None],
                      state_in=pool2, state_out=pool2, cu_seqlens=torch.tensor([0, 1, 5, 7]),
                      state_slot=torch.tensor(slots))
    assert torch.equal(y1[0], y) and torch.equal(pool2, pool)


def test_scale_default_is_one_over_sqrt_dk():
    x = inputs()
    assert torch.equal(run(x)[0], run(x, scale=DK ** -0.5)[0])
