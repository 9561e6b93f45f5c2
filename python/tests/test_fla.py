"""flash-linear-attention's signatures (libgdn.fused_recurrent_gated_delta_rule, libgdn.chunk_gated_delta_rule) and
vLLM's pools, against the float64 reference: fla's arguments, its layouts and flags, and what is refused."""
import pytest
import torch
import torch.nn.functional as F

import libgdn
from libgdn import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from reference import delta_rule, rel

B, T, H, HV, K, V = 2, 12, 2, 4, 16, 32


def inputs(seed=0, B=B, T=T, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)
    return dict(q=r(B, T, H, K).to(dtype), k=F.normalize(r(B, T, H, K), dim=-1).to(dtype), v=r(B, T, HV, V).to(dtype),
                g=F.logsigmoid(torch.rand(B, T, HV, generator=g) + 2), beta=torch.rand(B, T, HV, generator=g),
                h0=r(B, HV, K, V) * 0.1)


def reference(x, scale=K ** -0.5, l2=False):
    q, k = x["q"], x["k"]
    if l2:
        q, k = (x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6) for x in (q.double(), k.double()))
    return delta_rule(q, k, x["v"], torch.exp(x["g"].double()), x["beta"], scale, x["h0"])


@pytest.mark.parametrize("fn", [fused_recurrent_gated_delta_rule, chunk_gated_delta_rule])
def test_against_float64(fn):
    x = inputs()
    o, ht = fn(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"], initial_state=x["h0"], output_final_state=True)
    yr, sr = reference(x)
    assert o.shape == (B, T, HV, V) and ht.shape == (B, HV, K, V) and ht.dtype == torch.float32
    assert rel(o, yr) < 1e-5 and rel(ht, sr) < 1e-5


def test_chunk_is_the_same_recurrence_bit_for_bit():
    x = inputs()
    a = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                               output_final_state=True)
    b = fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], beta=x["beta"], initial_state=x["h0"],
                                         output_final_state=True, kernel="ref")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_no_final_state_unless_asked_and_the_initial_state_is_kept():
    x = inputs()
    h0 = x["h0"].clone()
    o, ht = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=h0)
    assert ht is None and torch.equal(h0, x["h0"])


def test_state_v_first_and_scale():
    x = inputs()
    o, ht = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], scale=0.5, output_final_state=True,
                                   initial_state=x["h0"].transpose(-1, -2).contiguous(), state_v_first=True)
    yr, sr = reference(x, scale=0.5)
    assert ht.shape == (B, HV, V, K) and rel(o, yr) < 1e-5 and rel(ht.transpose(-1, -2), sr) < 1e-5


def test_varlen_equals_separate_sequences():
    x = inputs()
    packed = {n: x[n].reshape(1, B * T, *x[n].shape[2:]) for n in ("q", "k", "v", "g", "beta")}
    cu = torch.tensor([0, T, 2 * T], dtype=torch.long)
    o, ht = chunk_gated_delta_rule(packed["q"], packed["k"], packed["v"], packed["g"], packed["beta"],
                                   initial_state=x["h0"], output_final_state=True, cu_seqlens=cu)
    o2, ht2 = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                     output_final_state=True)
    assert o.shape == (1, B * T, HV, V) and torch.equal(o[0], o2.reshape(B * T, HV, V)) and torch.equal(ht, ht2)
    o3, _ = chunk_gated_delta_rule(packed["q"], packed["k"], packed["v"], packed["g"], packed["beta"],
                                   initial_state=x["h0"], cu_seqlens=cu, cu_seqlens_cpu=cu.clone())
    assert torch.equal(o3, o)


def test_qk_l2norm_in_kernel():
    x = inputs()
    x["q"], x["k"] = x["q"] * 3, x["k"] * 0.2
    o, ht = fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], beta=x["beta"], initial_state=x["h0"],
                                             output_final_state=True, use_qk_l2norm_in_kernel=True)
    yr, sr = reference(x, l2=True)
    assert rel(o, yr) < 1e-5 and rel(ht, sr) < 1e-5


def test_bf16_inputs():
    x = inputs(dtype=torch.bfloat16)
    o, ht = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"].bfloat16(), x["beta"].bfloat16(),
                                   initial_state=x["h0"], output_final_state=True)
    assert o.dtype == torch.bfloat16
    x["g"], x["beta"] = x["g"].bfloat16().float(), x["beta"].bfloat16().float()
    yr, sr = reference(x)
    assert rel(o, yr) < 1e-2 and rel(ht, sr) < 1e-3


def test_gate_and_beta_in_kernel():
    x = inputs()
    a, A_log, dt_bias = torch.randn(B, T, HV), torch.linspace(-1, 1, HV), torch.linspace(0, 1, HV)
    beta_logit = torch.randn(B, T, HV)
    o, ht = fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], g=a, beta=beta_logit, initial_state=x["h0"],
                                             output_final_state=True, use_gate_in_kernel=True, A_log=A_log,
                                             dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True)
    g = -torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double())
    yr, sr = delta_rule(x["q"], x["k"], x["v"], torch.exp(g), torch.sigmoid(beta_logit.double()), K ** -0.5, x["h0"])
    assert rel(o, yr) < 1e-5 and rel(ht, sr) < 1e-5
    o2, _ = chunk_gated_delta_rule(x["q"], x["k"], x["v"], a, beta_logit, initial_state=x["h0"],
                                   use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                                   use_beta_sigmoid_in_kernel=True)
    assert torch.equal(o, o2)


def test_gk_vector_gate():
    x = inputs()
    gk = F.logsigmoid(torch.rand(B, T, HV, K) + 2)
    o, ht = fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], gk=gk, beta=x["beta"], initial_state=x["h0"],
                                             output_final_state=True)
    yr, sr = delta_rule(x["q"], x["k"], x["v"], torch.exp(gk.double()), x["beta"], K ** -0.5, x["h0"],
                        vector_gate=True)
    assert rel(o, yr) < 1e-5 and rel(ht, sr) < 1e-5


def test_vllm_pool_with_ssm_state_indices():
    """Three sequences on slots 5, PAD (-1) and 1 of a pool of 6, updated in place; the padded one is skipped."""
    x = inputs(B=3, T=4)
    pool = torch.randn(6, HV, K, V) * 0.1
    before = pool.clone()
    packed = {n: x[n].reshape(1, 12, *x[n].shape[2:]) for n in ("q", "k", "v", "g", "beta")}
    idx = torch.tensor([5, -1, 1], dtype=torch.int32)
    o, ht = fused_recurrent_gated_delta_rule(packed["q"], packed["k"], packed["v"], packed["g"], beta=packed["beta"],
                                             initial_state=pool, cu_seqlens=torch.tensor([0, 4, 8, 12]),
                                             ssm_state_indices=idx)
    assert ht is pool and (o[0, 4:8] == 0).all()
    for b, slot in ((0, 5), (2, 1)):
        yr, sr = delta_rule(x["q"][b:b + 1], x["k"][b:b + 1], x["v"][b:b + 1], torch.exp(x["g"][b:b + 1].double()),
                            x["beta"][b:b + 1], K ** -0.5, before[slot:slot + 1])
        assert rel(o[0, 4 * b:4 * b + 4], yr[0]) < 1e-5 and rel(pool[slot], sr[0]) < 1e-5
    assert torch.equal(pool[[0, 2, 3, 4]], before[[0, 2, 3, 4]])


@pytest.mark.parametrize("kw, exc, words", [
    (dict(gv=torch.zeros(B, T, HV, V)), NotImplementedError, "gv"),
    (dict(allow_neg_eigval=True), NotImplementedError, "allow_neg_eigval"),
    (dict(num_accepted_tokens=torch.ones(B)), NotImplementedError, "num_accepted_tokens"),
    (dict(head_first=True), ValueError, "head_first"),
    (dict(bogus=1), TypeError, "bogus"),
    (dict(beta=torch.rand(B, T, HV, V)), NotImplementedError, "per-value beta"),
    (dict(use_gate_in_kernel=True), ValueError, "A_log"),
])
def test_refusals(kw, exc, words):
    x = inputs()
    args = dict(g=x["g"], beta=x["beta"])
    args.update(kw)
    with pytest.raises(exc, match=words):
        fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], **args)


def test_chunk_size_is_accepted():
    x = inputs()
    a = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], chunk_size=32)
    b = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"])
    assert torch.equal(a[0], b[0])


def test_transpose_state_layout_is_state_v_first():
    x = inputs()
    a = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], output_final_state=True,
                               transpose_state_layout=True)
    assert a[1].shape == (B, HV, V, K)
    assert libgdn.fused_recurrent_gated_delta_rule is fused_recurrent_gated_delta_rule
