"""libgdn.GatedDeltaNetLayer in place of transformers' Qwen3NextGatedDeltaNet: its parameter names, its forward
against the float64 reference, prefill-then-decode against one prefill bit for bit, verify and commit through the
cache, torch.compile, and (where transformers imports) a copy of transformers' module against the module."""
import importlib.util
import types

import pytest
import torch

import libgdn
from reference import layer_step, rel

CONFIG = types.SimpleNamespace(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
                               linear_key_head_dim=16, linear_value_head_dim=8, linear_conv_kernel_dim=4,
                               rms_norm_eps=1e-6, hidden_act="silu", num_hidden_layers=2,
                               layer_types=["linear_attention", "full_attention"])
HK, HV, DK, DV = 2, 4, 16, 8
NAMES = {"in_proj_qkvz.weight", "in_proj_ba.weight", "conv1d.weight", "dt_bias", "A_log", "norm.weight",
         "out_proj.weight"}  # Qwen3NextGatedDeltaNet's state dict


def module(seed=0):
    torch.manual_seed(seed)
    m = libgdn.GatedDeltaNetLayer.from_config(CONFIG, layer_idx=0)
    with torch.no_grad():
        m.dt_bias.uniform_(0.5, 1.5)
        m.norm.weight.uniform_(0.5, 1.5)
    return m


def exact_module():
    """A module whose projections are exact in f32 whatever torch's GEMM blocking (weights k/64, |k| <= 8, inputs
    in {-1, 0, 1}, out_proj the identity: Hv Dv = hidden): so that the layer's bits are all that can differ."""
    m = module()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for lin in (m.in_proj_qkvz, m.in_proj_ba):
            lin.weight.copy_(torch.randint(-8, 9, lin.weight.shape, generator=g) / 64)
        m.out_proj.weight.copy_(torch.eye(CONFIG.hidden_size))
    return m


def exact_inputs(*shape):
    return torch.randint(-1, 2, shape, generator=torch.Generator().manual_seed(2)).float()


def cache(slots=4):
    return libgdn.GatedDeltaNetCache.from_config(CONFIG, slots)


def test_parameter_names_are_transformers():
    assert set(module().state_dict()) == NAMES
    assert list(cache().states) == [0]


def reference_forward(m, h):
    """The module's math in float64 for one sequence h [T, hidden] from zero state and history."""
    with torch.no_grad():
        W = {n: p.double() for n, p in m.state_dict().items()}
        T, r = h.shape[0], HV // HK
        qkvz = (h.double() @ W["in_proj_qkvz.weight"].T).reshape(T, HK, 2 * DK + 2 * r * DV)
        q, k, v, z = torch.split(qkvz, [DK, DK, r * DV, r * DV], dim=-1)
        qkv = torch.cat([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], dim=-1)
        b, a = torch.split((h.double() @ W["in_proj_ba.weight"].T).reshape(T, HK, 2 * r), [r, r], dim=-1)
        y, _, _ = layer_step(qkv, z.reshape(T, HV, DV), a.reshape(T, HV), b.reshape(T, HV),
                             W["conv1d.weight"].reshape(-1, 4), W["dt_bias"], W["A_log"], W["norm.weight"],
                             torch.zeros(HV, DK, DV), torch.zeros(qkv.shape[1], 3), HK, DK)
        return y.reshape(T, HV * DV) @ W["out_proj.weight"].T


def test_forward_against_float64():
    m = module()
    h = torch.randn(2, 7, CONFIG.hidden_size)
    with torch.no_grad():
        out = m(h)
    assert out.shape == h.shape
    for b in range(2):
        assert rel(out[b], reference_forward(m, h[b])) < 1e-5


def test_prefill_then_decode_equals_one_prefill():
    m, h = exact_module(), exact_inputs(2, 9, CONFIG.hidden_size)
    with torch.no_grad():
        c = cache()
        c.set_batch(slot=[3, 1], fresh=[1, 1])
        one = m(h, cache=c)
        c2 = cache()
        c2.set_batch(slot=[3, 1], fresh=[1, 1])
        parts = [m(h[:, :6], cache=c2)]
        c2.set_batch(slot=[3, 1])
        parts += [m(h[:, t:t + 1], cache=c2) for t in range(6, 9)]
    assert torch.equal(torch.cat(parts, dim=1), one)
    assert torch.equal(c2.states[0], c.states[0]) and torch.equal(c2.histories[0], c.histories[0])
    with torch.no_grad():
        assert torch.equal(m(h), one)  # no cache: each sequence from zeros


def test_cache_kernel_reaches_the_layer_call():
    """GatedDeltaNetCache(kernel=...) names the layer kernel of every call: "fastest" is the routed call's bits on
    the CPU (no chunked prefill there), and a kernel libgdn does not have is refused."""
    m, h = exact_module(), exact_inputs(2, 9, CONFIG.hidden_size)
    outs = []
    with torch.no_grad():
        for kernel in (None, "fastest"):
            c = libgdn.GatedDeltaNetCache.from_config(CONFIG, 4, kernel=kernel)
            c.set_batch(slot=[3, 1], fresh=[1, 1])
            outs.append((m(h, cache=c), c.states[0].clone()))
        c = libgdn.GatedDeltaNetCache.from_config(CONFIG, 4, kernel="nope")
        with pytest.raises(ValueError, match="nope"):
            m(h, cache=c)
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_speculative_round_verify_then_commit():
    """Verify 4 draft tokens (commit 0: the pools untouched), accept 2: the same as a 2-token step."""
    m, h = exact_module(), exact_inputs(1, 8, CONFIG.hidden_size)
    with torch.no_grad():
        c = cache()
        c.set_batch(slot=[0], fresh=[1])
        m(h[:, :4], cache=c)
        before = (c.states[0].clone(), c.histories[0].clone())
        c.set_batch(slot=[0], commit=[0])
        verify = m(h[:, 4:], cache=c)
        assert torch.equal(c.states[0], before[0]) and torch.equal(c.histories[0], before[1])
        c.set_batch(slot=[0], commit=[2])
        again = m(h[:, 4:], cache=c)
        assert torch.equal(again, verify)
        ref = cache()
        ref.set_batch(slot=[0], fresh=[1])
        m(h[:, :6], cache=ref)
    assert torch.equal(c.states[0], ref.states[0]) and torch.equal(c.histories[0], ref.histories[0])


def test_varlen_cu_seqlens_equals_the_dense_batch():
    m, h = exact_module(), exact_inputs(2, 5, CONFIG.hidden_size)
    with torch.no_grad():
        dense = m(h)
        packed = m(h.reshape(1, 10, -1), cu_seqlens=[0, 5, 10])
    assert torch.equal(packed.reshape(2, 5, -1), dense)


def test_bf16_module():
    m = module().to(torch.bfloat16)
    h = torch.randn(1, 6, CONFIG.hidden_size)
    c = libgdn.GatedDeltaNetCache.from_config(CONFIG, 1, dtype=torch.bfloat16)
    with torch.no_grad():
        out = m(h.bfloat16(), cache=c)
    assert out.dtype == torch.bfloat16 and rel(out[0], reference_forward(m, h.bfloat16().float()[0])) < 3e-2


def test_compile_module():
    m, h = exact_module(), exact_inputs(2, 5, CONFIG.hidden_size)
    c1, c2 = cache(), cache()

    def step(m, h, c):
        c.set_batch(slot=[1, 2], fresh=[1, 1])
        return m(h, cache=c)

    with torch.no_grad():
        eager = step(m, h, c1)
        compiled = torch.compile(step, fullgraph=True)(m, h, c2)
    assert torch.equal(compiled, eager)
    assert torch.equal(c1.states[0], c2.states[0]) and torch.equal(c1.histories[0], c2.histories[0])


def test_errors():
    m = module()
    with pytest.raises(TypeError, match="cache: expected a libgdn.GatedDeltaNetCache"):
        m(torch.randn(1, 2, CONFIG.hidden_size), cache=object())
    with pytest.raises(ValueError, match="attention_mask"):
        m(torch.randn(1, 2, CONFIG.hidden_size), attention_mask=torch.ones(1, 2))


def test_copy_of_transformers_module():
    modeling = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    if importlib.util.find_spec("fla") is not None:  # transformers would hand these CPU tensors to fla's Triton kernels
        pytest.skip("flash-linear-attention is installed: transformers' module runs fla's GPU kernels, not on CPU tensors")
    from transformers import Qwen3NextConfig
    cfg = Qwen3NextConfig(hidden_size=64, linear_num_key_heads=HK, linear_num_value_heads=HV,
                          linear_key_head_dim=DK, linear_value_head_dim=DV, linear_conv_kernel_dim=4,
                          num_hidden_layers=1, layer_types=["linear_attention"], rms_norm_eps=1e-6,
                          hidden_act="silu")
    torch.manual_seed(0)
    theirs = modeling.Qwen3NextGatedDeltaNet(cfg, 0).eval()
    with torch.no_grad():
        theirs.dt_bias.uniform_(0.5, 1.5)
        theirs.norm.weight.uniform_(0.5, 1.5)
    ours = libgdn.GatedDeltaNetLayer.from_module(theirs)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    h = torch.randn(1, 16, 64)
    with torch.no_grad():
        assert rel(ours(h), theirs(h)) < 1e-4
