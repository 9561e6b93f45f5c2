"""What a wrong argument raises: TypeError or ValueError naming the tensor, what was expected and what came; the
library's own refusals (ValueError with gdn_last_error(), naming the field); nothing written on an error."""
import numpy as np
import pytest
import torch

import libgdn

B, T, HK, HV, DK, DV = 1, 3, 1, 2, 16, 8
C = 2 * HK * DK + HV * DV


def delta_args(**over):
    a = dict(q=torch.randn(B, T, HK, DK), k=torch.randn(B, T, HK, DK), v=torch.randn(B, T, HV, DV),
             gate=torch.rand(B, T, HV), beta=torch.rand(B, T, HV))
    a.update(over)
    return a


def call_delta(**over):
    a = delta_args(**over)
    return libgdn.delta(a.pop("q"), a.pop("k"), a.pop("v"), a.pop("gate"), a.pop("beta"), **a)


@pytest.mark.parametrize("over, exc, words", [
    (dict(q=torch.randn(B, T, HK, DK).tolist()), TypeError, ["q:", "numpy array or a torch tensor", "list"]),
    (dict(k=torch.randn(B, T, HK, DK + 1)), ValueError, ["k:", "[B, T, Hk, Dk] = [1, 3, 1, 16]", "[1, 3, 1, 17]"]),
    (dict(v=torch.randn(B, T + 1, HV, DV)), ValueError, ["v:", "[B, T, Hv, Dv] = [1, 3, *, *]", "[1, 4, 2, 8]"]),
    (dict(v=torch.randn(B, T, 3, DV), gate=torch.rand(B, T, 3), beta=torch.rand(B, T, 3), q=torch.randn(B, T, 2, DK),
          k=torch.randn(B, T, 2, DK)), ValueError, ["v:", "multiple of Hk = 2", "Hv = 3"]),
    (dict(gate=torch.rand(B, T, HV, DK)), ValueError, ["gate:", "[B, T, Hv]", "[1, 3, 2, 16]"]),
    (dict(beta=torch.rand(B, T, HV, dtype=torch.float64)), TypeError, ["beta:", "float32", "float64"]),
    (dict(q=torch.randn(B, T, HK, DK, dtype=torch.bfloat16)), TypeError, ["k:", "bfloat16 (q's)", "float32"]),
    (dict(q=torch.randn(B, T, HK, DK, dtype=torch.float64)), TypeError, ["q:", "float32 or float16 or bfloat16"]),
    (dict(v=torch.randn(B, T, DV, HV).transpose(-1, -2)), ValueError, ["v:", "contiguous", "strides"]),
    (dict(mask=torch.ones(B, T, dtype=torch.int64)), TypeError, ["mask:", "uint8 or bool", "int64"]),
    (dict(state_in=torch.zeros(B, HV, DK, DV + 1)), ValueError, ["state_in:", "[B, Hv, Dv, Dk]", "[1, 2, 16, 9]"]),
    (dict(state_out=torch.zeros(B, HV, DV, DK), state_layout="kv", state_slot=[0]), ValueError,
     ["state_out:", "[slots, Hv, Dk, Dv] = [*, 2, 16, 8]", "[1, 2, 8, 16]"]),
    (dict(state_layout="transposed"), ValueError, ["state_layout:", "'vk', 'kv'", "'transposed'"]),
    (dict(gate_kind="raw"), ValueError, ["A_log:", "gate_kind='raw'", "None"]),
    (dict(A_log=torch.zeros(HV)), ValueError, ["A_log:", "raw"]),
    (dict(state_slot=[0]), ValueError, ["state_slot:", "neither"]),
    (dict(state_slot=[0, 1], state_out=torch.zeros(4, HV, DV, DK)), ValueError, ["state_slot:", "expected 1", "got 2"]),
    (dict(cu_seqlens=[0, 2, 3], q=torch.randn(2, T, HK, DK)), ValueError, ["q:", "[1, T, Hk, Dk] = [1, *, *, *]"]),
    (dict(kernel="nope"), ValueError, ["kernel:", "nope", "libgdn.kernels()"]),
])
def test_delta_errors_name_the_tensor(over, exc, words):
    with pytest.raises(exc) as e:
        call_delta(**over)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_the_librarys_refusals_name_the_field():
    a = delta_args()
    pool = torch.zeros(4, HV, DV, DK)
    q, k, v, g, b = (a[n][0] for n in ("q", "k", "v", "gate", "beta"))
    with pytest.raises(ValueError, match=r"cu_seqlens\[2\]"):
        libgdn.delta(q, k, v, g, b, cu_seqlens=[0, 2, 2, 3])
    with pytest.raises(ValueError, match=r"state_slot\[0\] = 4"):
        libgdn.delta(q[:2], k[:2], v[:2], g[:2], b[:2], cu_seqlens=[0, 2], state_slot=[4], state_out=pool)
    with pytest.raises(ValueError, match="overlap|OVERLAP|twice|one slot"):
        libgdn.delta(q, k, v, g, b, cu_seqlens=[0, 1, 3], state_slot=[1, 1], state_out=pool)
    assert (pool == 0).all()


def test_alignment_is_checked():
    buf = np.zeros(B * T * HK * DK * 4 + 4, dtype=np.uint8)
    q = np.frombuffer(buf.data, dtype=np.float32, count=B * T * HK * DK, offset=2).reshape(B, T, HK, DK)
    n = {k: v.numpy() for k, v in delta_args().items()}
    with pytest.raises(ValueError, match=r"q: expected data aligned to 4 bytes \(float32\), got address 0x"):
        libgdn.delta(q, n["k"], n["v"], n["gate"], n["beta"])


def test_byte_order_is_checked():
    n = {k: v.numpy() for k, v in delta_args().items()}
    with pytest.raises(TypeError, match="v: expected the machine's byte order, got dtype >f4"):
        libgdn.delta(n["q"], n["k"], n["v"].astype(">f4"), n["gate"], n["beta"])


def test_devices_are_checked():
    a = delta_args()
    with pytest.raises(ValueError, match=r"k: expected device cpu \(q's\), got meta"):
        call_delta(k=a["k"].to("meta"))


def layer_args(**over):
    a = dict(qkv=torch.randn(T, C), z=torch.randn(T, HV, DV), alpha=torch.randn(T, HV), beta=torch.randn(T, HV),
             conv_w=torch.randn(C, 4), dt_bias=torch.ones(HV), gamma=torch.ones(DV), state=torch.zeros(2, HV, DV, DK),
             hist_in=torch.zeros(2, C, 3), A_log=torch.zeros(HV))
    a.update(over)
    return a


def call_layer(**over):
    a = layer_args(**over)
    pos = [a.pop(n) for n in ("qkv", "z", "alpha", "beta", "conv_w", "dt_bias", "gamma", "state", "hist_in")]
    return libgdn.layer(*pos, **a)


@pytest.mark.parametrize("over, exc, words", [
    (dict(qkv=torch.randn(T, C + 2)), ValueError, ["qkv:", "C = 2 Hk Dk + Hv Dv", "[3, 50]"]),
    (dict(qkv=[[0.0] * C] * T), TypeError, ["qkv:", "numpy array or a torch tensor", "list"]),
    (dict(z=torch.randn(T, HV, DV, dtype=torch.float16)), TypeError, ["z:", "float32 (qkv's)", "float16"]),
    (dict(conv_w=torch.randn(C, 1, 4)), ValueError, ["conv_w:", "[C, 4] = [48, 4]", "[48, 1, 4]"]),
    (dict(conv_w=torch.randn(C, 4, dtype=torch.bfloat16)), TypeError, ["conv_w:", "float32", "bfloat16"]),
    (dict(hist_in=torch.zeros(3, C, 3)), ValueError, ["hist_in:", "[slots, C, 3] = [2, 48, 3]", "[3, 48, 3]"]),
    (dict(alpha=torch.randn(T + 1, HV)), ValueError, ["alpha:", "[T, Hv] = [3, 2]"]),
    (dict(A=torch.zeros(HV)), ValueError, ["A, A_log:", "both"]),
    (dict(A_log=None), ValueError, ["A, A_log:", "neither"]),
    (dict(slot=[0, 1]), ValueError, ["slot:", "expected 1 entries (B, from cu_seqlens)", "got 2"]),
    (dict(checkpoints=[(0, 1)]), ValueError, ["checkpoints[0]:", "3 integers (seq, after, slot)", "(0, 1)"]),
    (dict(out_gate="relu"), ValueError, ["out_gate:", "'silu', 'sigmoid'"]),
    (dict(commit=[4]), ValueError, ["libgdn:", "commit[0]"]),
    (dict(slot=[2]), ValueError, ["libgdn:", "slot[0]"]),
])
def test_layer_errors_name_the_tensor(over, exc, words):
    with pytest.raises(exc) as e:
        call_layer(**over)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_a_failed_layer_call_writes_nothing():
    a = layer_args()
    state, hist = a["state"], a["hist_in"]
    with pytest.raises(ValueError):
        call_layer(state=state, hist_in=hist, commit=[7])
    assert (state == 0).all() and (hist == 0).all()
