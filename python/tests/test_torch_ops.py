"""torch.ops.libgdn.delta and .layer: torch.library's opcheck, torch.compile(fullgraph=True) on CPU (the same bits as
eager), and on CUDA (skipped without a CUDA device and a CUDA build): CUDA against CPU bit for bit, torch's current
stream, and CUDA-graph capture and replay."""
import pytest
import torch
import torch.nn.functional as F

import libgdn
from test_layer import inputs as layer_inputs

CUDA = torch.cuda.is_available() and libgdn.cuda_devices() > 0
cuda_only = pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of libgdn")

B, T, H, HV, K, V = 2, 6, 2, 4, 16, 16


def delta_inputs(device="cpu", dtype=torch.float32, B=B, T=T):
    g = torch.Generator().manual_seed(3)
    x = dict(q=torch.randn(B, T, H, K, generator=g).to(dtype),
             k=F.normalize(torch.randn(B, T, H, K, generator=g), dim=-1).to(dtype),
             v=torch.randn(B, T, HV, V, generator=g).to(dtype), gate=torch.rand(B, T, HV, generator=g) * 0.3 + 0.7,
             beta=torch.rand(B, T, HV, generator=g), state=torch.randn(B, HV, V, K, generator=g) * 0.1)
    return {n: v.to(device) for n, v in x.items()}


def delta_in_place(q, k, v, gate, beta, state):
    return libgdn.delta(q, k, v, gate, beta, state_in=state, state_out=state)


def test_opcheck():
    x = delta_inputs()
    for state_out in (None, x["state"].clone()):
        args = (x["q"], x["k"], x["v"], x["gate"], x["beta"], None, None, None, x["state"], state_out,
                torch.empty_like(x["v"]), None, None, None, 0, 0, 0, 0.25, None, 0)
        torch.library.opcheck(torch.ops.libgdn.delta.default, args)
    lx, w, pools = layer_inputs()
    cu = torch.tensor([0, 5, 8], dtype=torch.int32)
    largs = (lx["qkv"], lx["z"], lx["alpha"], lx["beta"], w["conv_w"], None, w["dt_bias"], None, w["A_log"], w["gamma"],
             pools["state"].clone(), pools["hist"].clone(), None, None, torch.empty_like(lx["z"]), cu, None, None,
             None, None, 0.0, 0.0, 0.0, 0, 1, None, 0)
    torch.library.opcheck(torch.ops.libgdn.layer.default, largs)


# ---- every optional output under torch.compile(fullgraph=True) (CPU) and CUDA graphs (CUDA) ----
# A case: make(device) -> (fn, args); fn(*args) returns its outputs and may write args in place. Compiled and
# captured, it must give eager's bits: outputs and every argument after the call.

def delta_case(combo):
    """libgdn.delta with state_in and state_out each absent, separate or the same (in place); dense, or the batch
    form over a pool (pool_*), in place or read-only."""
    def make(device):
        x = delta_inputs(device)
        qkvgb = [x[n] for n in ("q", "k", "v", "gate", "beta")]
        if combo.startswith("pool"):
            qkvgb = [t.reshape(1, B * T, *t.shape[2:]) for t in qkvgb]
            pool = (torch.randn(5, HV, V, K, generator=torch.Generator().manual_seed(6)) * 0.1).to(device)
            kw = dict(cu_seqlens=torch.tensor([0, 4, 12]), state_slot=torch.tensor([3, 0], dtype=torch.int32))
            if combo == "pool_in":
                return (lambda *a: libgdn.delta(*a[:5], state_in=a[5], **kw)), qkvgb + [pool]
            return (lambda *a: libgdn.delta(*a[:5], state_in=a[5], state_out=a[5], **kw)), qkvgb + [pool]
        s_in, s_out = x["state"], torch.full_like(x["state"], 7.0)

        def fn(q, k, v, g, b, s_in, s_out):
            kw = dict(state_in=s_in if combo in ("in", "in_out", "in_place") else None,
                      state_out={"out": s_out, "in_out": s_out, "in_place": s_in}.get(combo))
            return libgdn.delta(q, k, v, g, b, **kw) * 2
        return fn, qkvgb + [s_in, s_out]
    return make


LAYER_D = dict(Hk=1, Hv=2, D=16)  # Dv % 16 == 0: planes


def layer_case(hist_out, planes):
    """libgdn.layer with the history in place or to hist_out, with planes or without."""
    def make(device):
        Hk, Hv, D = LAYER_D["Hk"], LAYER_D["Hv"], LAYER_D["D"]
        C, n = 2 * Hk * D + Hv * D, 4
        g = torch.Generator().manual_seed(4)
        u = lambda lo, hi, *s: (torch.rand(*s, generator=g) * (hi - lo) + lo).to(device)
        args = [u(-1, 1, n, C), u(-1, 1, n, Hv, D), u(-2, 2, n, Hv), u(-2, 2, n, Hv), u(-0.5, 0.5, C, 4),
                u(0.5, 1.5, Hv), u(0.5, 1.5, D), u(-1, 2, Hv), u(-0.3, 0.3, 3, Hv, D, D), u(-1, 1, 3, C, 3),
                torch.full((3, C, 3), 5.0, device=device), torch.full((49 * n * Hv * D // 16,), 5.0, device=device)]

        def fn(qkv, z, alpha, beta, conv_w, dt_bias, gamma, A_log, state, hist, h_out, p):
            return libgdn.layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist, A_log=A_log,
                                hist_out=h_out if hist_out else None, planes=p if planes else None,
                                cu_seqlens=[0, 3, 4], slot=[2, 0], fresh=[0, 1], state_layout="kv")
        return fn, args
    return make


def fla_case(name, **kw):
    """fla's names with initial_state absent or given, output_final_state, vLLM's in-place pool."""
    def make(device):
        x = delta_inputs(device)
        q, k, v, beta = x["q"], x["k"], x["v"], x["beta"]
        g = torch.log(x["gate"])
        h0 = x["state"].transpose(-1, -2).contiguous()  # fla's [N, HV, K, V]
        fn_ = getattr(libgdn, name)
        opts = dict(kw)
        if opts.pop("initial_state", False):
            if "ssm_state_indices" in opts:
                q, k, v, g, beta = (t.reshape(1, B * T, *t.shape[2:]) for t in (q, k, v, g, beta))
                h0 = (torch.randn(5, HV, K, V, generator=torch.Generator().manual_seed(6)) * 0.1).to(device)
                # host arrays on the host: a CUDA graph cannot capture their copy
                opts.update(cu_seqlens=torch.tensor([0, 4, 12]), ssm_state_indices=torch.tensor([3, -1]))

            def fn(q, k, v, g, beta, h0):
                return fn_(q, k, v, g, beta=beta, initial_state=h0, **opts)
        else:
            def fn(q, k, v, g, beta, h0):
                return fn_(q, k, v, g, beta=beta, **opts)
        return fn, [q, k, v, g, beta, h0]
    return make


FLA = "fused_recurrent_gated_delta_rule"
CASES = {"delta " + c: delta_case(c) for c in ("none", "in", "out", "in_out", "in_place", "pool_in", "pool_in_place")}
CASES.update({"layer hist_out=%s planes=%s" % (h, p): layer_case(h, p) for h in (False, True) for p in (False, True)})
for name in (FLA, "chunk_gated_delta_rule"):
    for init in (False, True):
        for out in (False, True):
            CASES["%s initial_state=%s output_final_state=%s" % (name[:5], init, out)] = fla_case(
                name, initial_state=init, output_final_state=out)
CASES["fused inplace_final_state"] = fla_case(FLA, initial_state=True, inplace_final_state=True)
CASES["fused ssm_state_indices"] = fla_case(FLA, initial_state=True, ssm_state_indices=True)
CASES["fused ssm_state_indices not in place"] = fla_case(FLA, initial_state=True, ssm_state_indices=True,
                                                         inplace_final_state=False)


def flat(out):
    """A call's outputs as a list of tensors (fla returns (o, final_state or None))."""
    return [t for t in (out if isinstance(out, tuple) else (out,)) if t is not None]


def eager(make, device):
    fn, args = make(device)
    return [t.clone() for t in flat(fn(*args))] + args


def equal(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("case", list(CASES))
def test_compile_every_optional_output_cpu(case):
    fn, args = CASES[case]("cpu")
    got = [t.clone() for t in flat(torch.compile(fn, fullgraph=True)(*args))] + args
    assert equal(got, eager(CASES[case], "cpu"))


@cuda_only
@pytest.mark.parametrize("case", list(CASES))
def test_cuda_graph_every_optional_output(case):
    ref = eager(CASES[case], "cuda")
    fn, args = CASES[case]("cuda")
    start = [t.clone() for t in args]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture
        fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flat(fn(*args))
    for t, s in zip(args, start):
        t.copy_(s)
    graph.replay()
    torch.cuda.synchronize()
    assert equal(out + args, ref)


@cuda_only
@pytest.mark.parametrize("case", list(CASES))
def test_compile_every_optional_output_cuda_reduce_overhead(case):
    fn, args = CASES[case]("cuda")
    got = [t.clone() for t in flat(torch.compile(fn, fullgraph=True, mode="reduce-overhead")(*args))] + args
    assert equal(got, eager(CASES[case], "cuda"))


def layer_in_place(qkv, z, alpha, beta, conv_w, dt_bias, gamma, A_log, state, hist):
    y = libgdn.layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist, A_log=A_log, cu_seqlens=[0, 5, 8],
                     slot=[2, 0], commit=[5, 2], fresh=[1, 0], checkpoints=[(0, 3, 1)], state_layout="kv")
    return y + 1


def test_compile_layer_cpu():
    x, w, pools = layer_inputs()
    args = [x["qkv"], x["z"], x["alpha"], x["beta"], w["conv_w"], w["dt_bias"], w["gamma"], w["A_log"]]
    pe, pc = [p.clone() for p in pools.values()], [p.clone() for p in pools.values()]
    y_eager = layer_in_place(*args, *pe)
    y_comp = torch.compile(layer_in_place, fullgraph=True)(*args, *pc)
    assert torch.equal(y_comp, y_eager) and all(torch.equal(a, b) for a, b in zip(pc, pe))


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T", [1, 7, 64])
def test_cuda_delta_equals_cpu_ref(dtype, T):
    x = delta_inputs(dtype=dtype, T=T)
    s_cpu = x["state"].clone()
    y_cpu = libgdn.delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], state_in=s_cpu, state_out=s_cpu, kernel="ref")
    c = {n: v.cuda() for n, v in x.items()}
    for kernel in [None] + [n for n, b, _ in libgdn.kernels() if b == "cuda" and libgdn.kernel_contract(n) == "exact"]:
        s = c["state"].clone()
        try:
            y = libgdn.delta(c["q"], c["k"], c["v"], c["gate"], c["beta"], state_in=s, state_out=s, kernel=kernel)
        except ValueError as e:
            assert "cannot run these arguments" in str(e)
            continue
        torch.cuda.synchronize()
        assert torch.equal(y.cpu(), y_cpu) and torch.equal(s.cpu(), s_cpu), kernel


@cuda_only
def test_cuda_layer_equals_cpu_ref():
    x, w, pools = layer_inputs(dtype=torch.bfloat16)
    from test_layer import run
    ref = run(x, w, pools, "ref")
    xc, wc = {n: v.cuda() for n, v in x.items()}, {n: v.cuda() for n, v in w.items()}
    for kernel in [None, "cuda_staged"]:
        got = run(xc, wc, {n: v.cuda() for n, v in pools.items()}, kernel)
        assert all(torch.equal(g.cpu(), r) for g, r in zip(got, ref)), kernel


@cuda_only
def test_cuda_fused_layer_equals_cpu_ref():
    """Dk = Dv = 128 windows of 3 and 1 tokens, no checkpoints: the router's cuda_fused, and cuda_staged, against
    the CPU ref bit for bit (y and both pools)."""
    Hk, Hv, D, slots = 2, 4, 128, 3
    C = 2 * Hk * D + Hv * D
    g = torch.Generator().manual_seed(5)
    u = lambda lo, hi, *s: (torch.rand(*s, generator=g) * (hi - lo) + lo)
    x = [u(-1, 1, 4, C), u(-1, 1, 4, Hv, D), u(-2, 2, 4, Hv), u(-2, 2, 4, Hv), u(-0.5, 0.5, C, 4), u(0.5, 1.5, Hv),
         u(0.5, 1.5, D)]
    pools = [u(-0.3, 0.3, slots, Hv, D, D), u(-1, 1, slots, C, 3)]
    A_log = u(-1, 2, Hv)
    kw = dict(cu_seqlens=[0, 3, 4], slot=[2, 0], fresh=[0, 1], A_log=A_log)

    def run(device, kernel):
        p = [t.clone().to(device) for t in pools]
        y = libgdn.layer(*[t.to(device) for t in x], *p, kernel=kernel, **dict(kw, A_log=A_log.to(device)))
        return [t.cpu() for t in [y] + p]

    ref = run("cpu", "ref")
    for kernel in [None, "cuda_fused", "cuda_staged"]:
        assert all(torch.equal(a, b) for a, b in zip(run("cuda", kernel), ref)), kernel


@cuda_only
def test_cuda_fla_varlen_pool_equals_cpu():
    """fla's varlen form on CUDA with vLLM's pool, cu_seqlens and indices on the device (copied to the host)."""
    x = delta_inputs()
    packed = [x[n].reshape(1, B * T, *x[n].shape[2:]) for n in ("q", "k", "v")]
    g, beta = torch.log(x["gate"]).reshape(1, B * T, HV), x["beta"].reshape(1, B * T, HV)
    pool = torch.randn(5, HV, K, V) * 0.1
    outs = []
    for device in ("cpu", "cuda"):
        p = pool.clone().to(device)
        o, _ = libgdn.fused_recurrent_gated_delta_rule(*[t.to(device) for t in packed], g.to(device),
                                                       beta=beta.to(device), initial_state=p,
                                                       cu_seqlens=torch.tensor([0, 4, 12], device=device),
                                                       ssm_state_indices=torch.tensor([3, -1], device=device))
        outs.append((o.cpu(), p.cpu()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@cuda_only
def test_cuda_runs_on_the_current_stream():
    x = {n: v.cuda() for n, v in delta_inputs(T=256).items()}
    s = x["state"].clone()
    y_ref = delta_in_place(x["q"], x["k"], x["v"], x["gate"], x["beta"], s.clone())
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = delta_in_place(x["q"], x["k"], x["v"], x["gate"], x["beta"], s)
        y2 = y * 1  # ordered after the call on the same stream
    stream.synchronize()
    assert torch.equal(y2, y_ref)


@cuda_only
def test_cuda_graph_capture_and_replay():
    x = {n: v.cuda() for n, v in delta_inputs(T=1).items()}
    lx, w, pools = layer_inputs()
    lx, w = {n: v[:1].cuda() for n, v in lx.items()}, {n: v.cuda() for n, v in w.items()}
    state, hist = pools["state"].cuda(), pools["hist"].cuda()
    s = x["state"].clone()

    def step():
        y = delta_in_place(x["q"], x["k"], x["v"], x["gate"], x["beta"], s)
        y2 = libgdn.layer(lx["qkv"], lx["z"], lx["alpha"], lx["beta"], w["conv_w"], w["dt_bias"], w["gamma"], state,
                          hist, A_log=w["A_log"], slot=[1], state_layout="kv")
        return y, y2

    # the eager reference: three steps from the same starting pools
    s0, st0, h0 = s.clone(), state.clone(), hist.clone()
    eager = [tuple(t.clone() for t in step()) for _ in range(3)]
    s_after, st_after, h_after = s.clone(), state.clone(), hist.clone()
    s.copy_(s0), state.copy_(st0), hist.copy_(h0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture
        step()
    torch.cuda.current_stream().wait_stream(side)
    s.copy_(s0), state.copy_(st0), hist.copy_(h0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    s.copy_(s0), state.copy_(st0), hist.copy_(h0)
    for i in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out[0], eager[i][0]) and torch.equal(out[1], eager[i][1])
    assert torch.equal(s, s_after) and torch.equal(state, st_after) and torch.equal(hist, h_after)


@cuda_only
def test_compile_on_cuda_reduce_overhead():
    x = {n: v.cuda() for n, v in delta_inputs(T=1).items()}
    se, sc = x["state"].clone(), x["state"].clone()
    compiled = torch.compile(delta_in_place, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        ye = delta_in_place(x["q"], x["k"], x["v"], x["gate"], x["beta"], se)
        yc = compiled(x["q"], x["k"], x["v"], x["gate"], x["beta"], sc)
        assert torch.equal(yc, ye) and torch.equal(sc, se)


@cuda_only
def test_cuda_errors_name_the_tensor():
    x = delta_inputs()
    with pytest.raises(ValueError, match=r"k: expected device cuda:0 \(q's\), got cpu"):
        libgdn.delta(x["q"].cuda(), x["k"], x["v"].cuda(), x["gate"].cuda(), x["beta"].cuda())
