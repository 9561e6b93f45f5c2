"""libgdn.layer (gdn_layer) on CPU torch tensors and numpy arrays: a varlen batch with slots, a fresh sequence, a
partial commit and a checkpoint, every CPU layer kernel bitwise against kernel="ref"; the layouts; a checkpoint
against a shorter call; split windows against one; the float64 reference."""
import numpy as np
import pytest
import torch

import libgdn
from reference import layer_step, rel

HK, HV, DK, DV = 2, 4, 16, 8  # two value heads a key head; Dk != Dv, so that the layouts differ
C = 2 * HK * DK + HV * DV
SLOTS, LENS = 4, [5, 3]
T = sum(LENS)
CALL = dict(cu_seqlens=[0, LENS[0], T], slot=[2, 0], commit=[5, 2], fresh=[1, 0], checkpoints=[(0, 3, 1)])


def inputs(seed=1, T=T, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    u = lambda lo, hi, *s: torch.rand(*s, generator=g) * (hi - lo) + lo
    x = dict(qkv=u(-1, 1, T, C), z=u(-1, 1, T, HV, DV), alpha=u(-2, 2, T, HV), beta=u(-2, 2, T, HV))
    x = {n: v.to(dtype) for n, v in x.items()}
    w = dict(conv_w=u(-0.5, 0.5, C, 4), dt_bias=u(0.5, 1.5, HV), A_log=u(-1, 2, HV), gamma=u(0.5, 1.5, DV))
    pools = dict(state=u(-0.3, 0.3, SLOTS, HV, DK, DV), hist=u(-1, 1, SLOTS, C, 3).to(dtype))
    return x, w, pools


def run(x, w, pools, kernel=None, layout="kv", **over):
    state = pools["state"].clone() if layout == "kv" else pools["state"].transpose(-1, -2).contiguous()
    hist = pools["hist"].clone()
    y = libgdn.layer(x["qkv"], x["z"], x["alpha"], x["beta"], w["conv_w"], w["dt_bias"], w["gamma"], state, hist,
                     A_log=w["A_log"], kernel=kernel, state_layout=layout, **dict(CALL, **over))
    return y, (state if layout == "kv" else state.transpose(-1, -2)), hist


def same(a, b):
    return all(torch.equal(p, q) for p, q in zip(a, b))


@pytest.mark.parametrize("kernel", [None] + [k for k in libgdn.layer_kernels() if not k.startswith("cuda")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_cpu_layer_kernel_gives_refs_bits(kernel, dtype):
    x, w, pools = inputs(dtype=dtype)
    ref = run(x, w, pools, "ref")
    assert not torch.equal(ref[1], pools["state"]) and not torch.equal(ref[2], pools["hist"])
    assert same(run(x, w, pools, kernel), ref)
    assert same(run(x, w, pools, kernel, threads=1), ref)


def test_layouts_give_the_same_bits():
    x, w, pools = inputs()
    assert same(run(x, w, pools, layout="vk"), run(x, w, pools, layout="kv"))


def test_float64_reference_and_the_pools():
    x, w, pools = inputs()
    y, state, hist = run(x, w, pools, "ref", commit=None, checkpoints=None)
    for b, (lo, hi, slot, fresh) in enumerate([(0, 5, 2, 1), (5, 8, 0, 0)]):
        s0 = torch.zeros(HV, DK, DV) if fresh else pools["state"][slot]
        h0 = torch.zeros(C, 3) if fresh else pools["hist"][slot]
        yr, sr, hr = layer_step(x["qkv"][lo:hi], x["z"][lo:hi], x["alpha"][lo:hi], x["beta"][lo:hi], w["conv_w"],
                                w["dt_bias"], w["A_log"], w["gamma"], s0, h0, HK, DK)
        assert rel(y[lo:hi], yr) < 1e-5 and rel(state[slot], sr) < 1e-5
        assert torch.equal(hist[slot], hr.float())
    for slot in (1, 3):  # named by no sequence
        assert torch.equal(state[slot], pools["state"][slot]) and torch.equal(hist[slot], pools["hist"][slot])


def test_checkpoint_and_commit_are_shorter_calls():
    x, w, pools = inputs()
    y, state, hist = run(x, w, pools)
    x3 = {n: v[:3] for n, v in x.items()}
    _, s3, h3 = run(x3, w, pools, cu_seqlens=[0, 3], slot=[1], commit=None, fresh=[1], checkpoints=None)
    assert torch.equal(state[1], s3[1]) and torch.equal(hist[1], h3[1])  # the checkpoint (0, 3, 1)
    x2 = {n: v[5:7] for n, v in x.items()}
    _, s2, h2 = run(x2, w, pools, cu_seqlens=[0, 2], slot=[0], commit=None, fresh=None, checkpoints=None)
    assert torch.equal(state[0], s2[0]) and torch.equal(hist[0], h2[0])  # sequence 1 commits 2 of its 3 tokens


def test_split_windows_equal_one():
    """A prefill of 5 tokens, then 3 one-token decode steps, against one 8-token call: the same bits."""
    x, w, pools = inputs()
    one = run(x, w, pools, cu_seqlens=[0, T], slot=[3], commit=None, fresh=[1], checkpoints=None)
    state, hist = pools["state"].clone(), pools["hist"].clone()
    ys = []
    for lo, hi, fresh in [(0, 5, 1), (5, 6, 0), (6, 7, 0), (7, 8, 0)]:
        ys.append(libgdn.layer(*(x[n][lo:hi] for n in ("qkv", "z", "alpha", "beta")), w["conv_w"], w["dt_bias"],
                               w["gamma"], state, hist, A_log=w["A_log"], slot=[3], fresh=[fresh],
                               state_layout="kv"))
    assert torch.equal(torch.cat(ys), one[0]) and torch.equal(state, one[1]) and torch.equal(hist, one[2])


def test_numpy_gives_the_same_bits():
    x, w, pools = inputs()
    ref = run(x, w, pools)
    n = {k: v.numpy() for k, v in {**x, **w}.items()}
    state, hist = pools["state"].numpy().copy(), pools["hist"].numpy().copy()
    y = libgdn.layer(n["qkv"], n["z"], n["alpha"], n["beta"], n["conv_w"], n["dt_bias"], n["gamma"], state, hist,
                     A_log=n["A_log"], state_layout="kv", **CALL)
    assert isinstance(y, np.ndarray)
    assert np.array_equal(y, ref[0].numpy()) and np.array_equal(state, ref[1].numpy())
    assert np.array_equal(hist, ref[2].numpy())


def test_A_against_A_log_and_a_separate_hist_out():
    x, w, pools = inputs()
    ref = run(x, w, pools)
    state, hist_out = pools["state"].clone(), pools["hist"].clone()
    A = -torch.exp(w["A_log"])
    y = libgdn.layer(x["qkv"], x["z"], x["alpha"], x["beta"], w["conv_w"], w["dt_bias"], w["gamma"], state,
                     pools["hist"].clone(), A=A, hist_out=hist_out, state_layout="kv", **CALL)
    # A = -exp(A_log) by torch may differ from libgdn's own exp in the last bit: y and state within rounding
    assert rel(y, ref[0]) < 1e-5 and rel(state, ref[1]) < 1e-5 and torch.equal(hist_out, ref[2])
