"""Slots on the device under CUDA graphs (gdn.h: state_slot_device): vLLM's decode step, fla's
fused_recurrent_gated_delta_rule with cu_seqlens and ssm_state_indices on the GPU, captured once and replayed with new
slots written into the index tensor, gives bitwise what the same call with host slots gives; libgdn.delta's dense form
the same. Skipped without a CUDA device."""
import pytest

torch = pytest.importorskip("torch")
import libgdn  # noqa: E402
from libgdn import fla  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or libgdn.cuda_devices() == 0,
                                reason="no CUDA device")

H, HV, D, SLOTS = 2, 4, 128, 11


def inputs(n, gen):
    q = torch.nn.functional.normalize(torch.randn(1, n, H, D, generator=gen), dim=-1).to(torch.bfloat16).cuda()
    k = torch.nn.functional.normalize(torch.randn(1, n, H, D, generator=gen), dim=-1).to(torch.bfloat16).cuda()
    v = torch.randn(1, n, HV, D, generator=gen).to(torch.bfloat16).cuda()
    a = torch.randn(1, n, HV, generator=gen).cuda()
    b = torch.randn(1, n, HV, generator=gen).cuda()
    return q, k, v, a, b


def step(x, pool, idx, cu, A_log, dt_bias):
    q, k, v, a, b = x
    return fla.fused_recurrent_gated_delta_rule(q, k, v, g=a, beta=b, initial_state=pool, inplace_final_state=True,
                                                cu_seqlens=cu, ssm_state_indices=idx, use_gate_in_kernel=True,
                                                A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
                                                state_v_first=True)[0]


@pytest.mark.parametrize("n", [1, 3, 40])
def test_fla_decode_graph_replays_new_slots(n):
    gen = torch.Generator().manual_seed(n)
    x = inputs(n, gen)
    A_log, dt_bias = torch.rand(HV, generator=gen).cuda(), torch.randn(HV, generator=gen).cuda()
    cu = torch.arange(n + 1, dtype=torch.int32, device="cuda")
    pool0 = (0.1 * torch.randn(SLOTS, HV, D, D, generator=gen)).cuda()
    first = torch.randperm(SLOTS, generator=gen)[:n].to(torch.int32) if n <= SLOTS else None
    if first is None:  # more sequences than slots: a pool of its own size
        pool0 = (0.1 * torch.randn(n, HV, D, D, generator=gen)).cuda()
        first = torch.randperm(n, generator=gen).to(torch.int32)
    second = first.flip(0).clone()
    second[0] = -1  # a skipped sequence: y = 0, its slot untouched
    idx = first.cuda()
    pool = pool0.clone()
    step(x, pool, idx, cu, A_log, dt_bias)  # warm-up outside the capture, then the graph
    torch.cuda.synchronize()
    pool.copy_(pool0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = step(x, pool, idx, cu, A_log, dt_bias)
    for slots in (first, second):
        pool.copy_(pool0)
        idx.copy_(slots.cuda())
        graph.replay()
        torch.cuda.synchronize()
        want_pool = pool0.clone()
        want_y = step(x, want_pool, slots, cu.cpu(), A_log, dt_bias)  # host slots and windows
        assert torch.equal(y.view(torch.int16), want_y.view(torch.int16)), "y differs from the host-slot call"
        assert torch.equal(pool.view(torch.int32), want_pool.view(torch.int32)), "the pool differs"


def test_delta_dense_form_device_slots_out_of_range():
    gen = torch.Generator().manual_seed(5)
    q, k, v, a, b = (t.transpose(0, 1) for t in inputs(3, gen))  # [3, 1, ...]
    pool0 = (0.1 * torch.randn(SLOTS, HV, D, D, generator=gen)).cuda()
    pool = pool0.clone()
    slots = torch.tensor([4, SLOTS, 2 ** 40], dtype=torch.int64, device="cuda")  # 2^40: not wrapped, skipped
    y = libgdn.delta(q, k, v, torch.sigmoid(a), torch.sigmoid(b), state_in=pool, state_out=pool, state_slot=slots)
    torch.cuda.synchronize()
    want_pool = pool0.clone()
    want = libgdn.delta(q, k, v, torch.sigmoid(a), torch.sigmoid(b), state_in=want_pool, state_out=want_pool,
                        state_slot=[4, -1, -1])
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))
    assert torch.equal(pool.view(torch.int32), want_pool.view(torch.int32))
    assert not y[1:].any()
