"""libgdn over torch.distributed (python/libgdn/distributed.py) on the CPU: gloo process groups of 1, 2 and 4
processes (torch.multiprocessing, one thread each, as torchrun starts them), each rank building the same inputs from
a seed and comparing with the single-rank run it computes itself. Skipped without torch.distributed or gloo.

- tensor parallel (heads sharded): every GDN head's y and the rank's pools are the single-rank run's bits, given the
  same layer inputs (the contract) and through the module's own column-parallel projections (torch's matrix
  products, whose column slices this build computes with the whole product's bits: checked, else skipped); the
  output after the all_reduce within 1e-5 (f32) of one rank's; prefill, decode and a commit window over two slots.
- context parallel prefill: outputs and final state against the single-rank call and the float64 oracle within
  docs/CONTRACT.md section 9's bound, bitwise run to run and on every rank, the single-rank call's bits at world 1
  and 2 (rank 1 starts from rank 0's final state: a split call), the bytes each rank receives equal to the formula
  of docs/DISTRIBUTED.md; gdn_delta (both layouts, Dv < Dk, a mask, an initial state), the layer step (a fresh
  prompt and a continued one) and the layer forward; refusals raised on every rank, none left in a collective.
- transformers' Qwen3-Next model (tiny config) with its GDN layers sharded over 2 ranks: 128 greedy tokens equal to
  one rank's (python/qwen3next_model.py); skipped without transformers.
- the torchrun example (python/examples/distributed_gdn.py) at --nproc_per_node 2; NCCL at world size 1 on a GPU
  (skipped without one).
"""
import os
import subprocess
import sys
import tempfile

import pytest
import torch

dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available in this torch build", allow_module_level=True)

import libgdn  # noqa: E402
from libgdn import distributed as D  # noqa: E402
from reference import delta_rule, layer_step, rel  # noqa: E402

PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CP_BOUND = 1e-5  # docs/CONTRACT.md section 9: max |x - x64| / max |x64| of y and the final state (f32)


def spawn(world, fn, *args, backend="gloo"):
    """fn(rank, world, *args) in `world` processes of one process group; their results in rank order."""
    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.spawn(_worker, (world, backend, tmp, fn, args), nprocs=world)
        return [torch.load(os.path.join(tmp, "%d.pt" % r), weights_only=False) for r in range(world)]


def _worker(rank, world, backend, tmp, fn, args):
    os.environ["GDN_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method="file://" + os.path.join(tmp, "store"), rank=rank,
                            world_size=world)
    try:
        out = fn(rank, world, *args)
    finally:
        dist.destroy_process_group()
    torch.save(out, os.path.join(tmp, "%d.pt" % rank))


def _cases(rank, world):
    """Every case of this file on one process group (a process's start, torch's imports, is most of a case's
    time): {"tp": ..., "cp delta": {name: ...}, "cp layer": {name: ...}, and at world 2 "refusals", "model"}."""
    out = {"tp": _tp_layer_case(rank, world),
           "cp delta": {name: _cp_delta_case(rank, world, name) for name in DELTA_CASES},
           "cp layer": {name: _cp_layer_case(rank, world, name) for name in LAYER_CASES}}
    if world == 2:
        out["refusals"] = _cp_refusal_case(rank, world)
        out["model"] = _tp_model_case(rank, world)
    return out


_RUNS = {}


def ranks(world):
    """_cases' results of each rank at this world size (spawned once for the module's tests)."""
    if world not in _RUNS:
        if PYTHON not in sys.path:
            sys.path.append(PYTHON)  # qwen3next_model, for the spawned processes too
        _RUNS[world] = spawn(world, _cases)
    return _RUNS[world]


def gdn_layer(hidden, Hk, Hv, Dk, Dv, dtype=torch.float32, device="cpu", seed=0):
    """A GatedDeltaNetLayer with random weights (the same on every rank)."""
    torch.manual_seed(seed)
    m = libgdn.GatedDeltaNetLayer(hidden, Hk, Hv, Dk, Dv, dtype=dtype, device=device)
    with torch.no_grad():
        m.dt_bias.uniform_(0.5, 1.5)
        m.norm.weight.uniform_(0.5, 1.5)
    return m


# ---- tensor parallel ----

def _tp_layer_case(rank, world, device="cpu"):
    """Per dtype: the rank's heads against the whole layer's, over a prefill (varlen, two slots), three decode steps
    and a window with commit [2, 1]."""
    Hk, Hv, Dk, Dv = 4, 8, 16, 16
    ks, vs = D.head_ranges(Hk, Hv, rank, world)
    ch = D.conv_channels(Hk, Hv, Dk, Dv, rank, world).to(device)
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        full = gdn_layer(64, Hk, Hv, Dk, Dv, dtype, device)
        tp = D.TensorParallelGatedDeltaNet(full)
        seen = []
        tp.gdn.out_proj.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
        pools = {name: libgdn.GatedDeltaNetCache(2, Hk // w, Hv // w, Dk, Dv, dtype=dtype, device=device)
                 for name, w in (("full", 1), ("contract", world), ("module", world))}
        g = torch.Generator().manual_seed(1)
        steps = [(torch.randn(1, 17, 64, generator=g), [0, 11, 17], dict(fresh=[1, 1]))]
        steps += [(torch.randn(2, 1, 64, generator=g), None, {}) for _ in range(3)]
        steps += [(torch.randn(2, 3, 64, generator=g), None, dict(commit=[2, 1]))]
        r = dict(proj=True, y_contract=True, y_module=True, y_all_heads=True, pools=True, out_rel=0.0)
        for h, cu, batch in steps:
            h = h.to(device=device, dtype=dtype)
            B, T = h.shape[:2]
            cu = cu or [T * b for b in range(B + 1)]
            for p in pools.values():
                p.set_batch(slot=[0, 1], **batch)
            with torch.no_grad():
                qkv, z, a, b = full.project(h)
                y = full.step(qkv, z, a, b, pools["full"], cu)
                ref = full.out_proj(y.reshape(B, T, -1))
                mine = tp.gdn.project(h)
                r["proj"] &= all(torch.equal(x, w) for x, w in zip(mine, (qkv[:, ch], z[:, vs.start:vs.stop],
                                                                          a[:, vs.start:vs.stop],
                                                                          b[:, vs.start:vs.stop])))
                yc = tp.gdn.step(qkv[:, ch].contiguous(), z[:, vs.start:vs.stop].contiguous(),
                                 a[:, vs.start:vs.stop].contiguous(), b[:, vs.start:vs.stop].contiguous(),
                                 pools["contract"], cu)
                o = tp(h, pools["module"], cu_seqlens=cu if B == 1 else None)
            ym = seen.pop().reshape(B * T, Hv // world, Dv)
            r["y_contract"] &= torch.equal(yc, y[:, vs.start:vs.stop])
            r["y_module"] &= torch.equal(ym, y[:, vs.start:vs.stop])
            heads = [torch.empty_like(ym) for _ in range(world)]
            dist.all_gather(heads, ym.contiguous())
            r["y_all_heads"] &= torch.equal(torch.cat(heads, dim=1), y)
            for name in ("contract", "module"):
                r["pools"] &= torch.equal(pools[name].states[0], pools["full"].states[0][:, vs.start:vs.stop])
                r["pools"] &= torch.equal(pools[name].histories[0], pools["full"].histories[0][:, ch])
            r["out_rel"] = max(r["out_rel"], rel(o, ref))
        out[str(dtype).replace("torch.", "")] = r
    return out


@pytest.mark.parametrize("world", [1, 2, 4])
def test_tensor_parallel_heads_bitwise(world):
    for rank, res in enumerate(ranks(world)):
        for dtype, r in res["tp"].items():
            where = "world %d rank %d %s" % (world, rank, dtype)
            assert r["y_contract"] and r["pools"], where + ": %s" % r
            if not r["proj"]:
                pytest.skip("torch's column-sliced input projection gave other bits than the whole one on this "
                            "build (outside libgdn's contract, which is for the same layer inputs)")
            assert r["y_module"] and r["y_all_heads"], where + ": %s" % r
            bound = 1e-5 if dtype == "float32" else 2e-2  # bf16: the partial sums rounded to bf16, added in bf16
            assert r["out_rel"] <= bound if world > 1 else r["out_rel"] == 0, where + ": %s" % r


def test_tensor_parallel_refuses_a_world_that_does_not_divide_the_key_heads():
    with pytest.raises(ValueError, match="world: expected a divisor of num_k_heads = 2"):
        D.head_ranges(2, 4, 0, 4)
    with pytest.raises(ValueError, match="rank: expected 0 <= rank < world = 2, got 2"):
        D.head_ranges(4, 8, 2, 2)
    with pytest.raises(ValueError, match="state: expected the GDN layer's parameters"):
        D.shard_state_dict({"conv1d.bias": torch.zeros(3)}, 4, 8, 16, 16, 0, 2)
    with pytest.raises(RuntimeError, match="expected an initialized process group"):
        D.TensorParallelGatedDeltaNet(gdn_layer(64, 4, 8, 16, 16))


# ---- context parallel ----

def _unit(x):
    return (x.double() / x.double().norm(dim=-1, keepdim=True)).float()


def delta_inputs(T, Hk, Hv, Dk, Dv, layout, gate_kind, mask, initial, seed=3):
    """The whole sequence's inputs of a gdn_delta case ([1, T, ...]) and its float64 oracle (y, state in the
    layout)."""
    g = torch.Generator().manual_seed(seed)
    q, k = _unit(torch.randn(1, T, Hk, Dk, generator=g)), _unit(torch.randn(1, T, Hk, Dk, generator=g))
    v = torch.randn(1, T, Hv, Dv, generator=g)
    beta = torch.randn(1, T, Hv, generator=g)
    kw = dict(gate_kind=gate_kind, beta_kind="logit", state_layout=layout)
    if gate_kind == "raw":
        gate = torch.randn(1, T, Hv, generator=g)
        kw.update(A_log=torch.rand(Hv, generator=g).mul(2).sub(3), dt_bias=torch.rand(Hv, generator=g))
        decay = torch.exp(-torch.exp(kw["A_log"].double()) * torch.nn.functional.softplus(
            gate.double() + kw["dt_bias"].double()))
    else:
        gate = torch.rand(1, T, Hv, generator=g) * 0.2 + 0.8
        decay = gate.double()
    b64 = torch.sigmoid(beta.double())
    m = None
    if mask:
        m = (torch.rand(1, T, generator=g) > 0.2).to(torch.uint8)
        decay, b64 = decay.clone(), b64.clone()
        decay[m == 0], b64[m == 0] = 1, 0
    tail = (Hv, Dk, Dv) if layout == "kv" else (Hv, Dv, Dk)
    S0 = torch.randn((1,) + tail, generator=g) * 0.3 if initial else None
    kv = (lambda s: s) if layout == "kv" else (lambda s: s.transpose(-1, -2))
    y64, S64 = delta_rule(q, k, v, decay, b64, Dk ** -0.5, None if S0 is None else kv(S0))
    if m is not None:
        y64[m == 0] = 0
    return dict(q=q, k=k, v=v, gate=gate, beta=beta, mask=m, S0=S0, kw=kw), (y64, kv(S64))


DELTA_CASES = {  # T, Hk, Hv, Dk, Dv, layout, gate kind, mask, initial state
    "kv raw initial state": (67, 2, 4, 16, 16, "kv", "raw", False, True),
    "vk decay mask Dv < Dk": (50, 1, 2, 16, 8, "vk", "decay", True, False),
}


def _cp_delta_case(rank, world, name):
    T, Hk, Hv, Dk, Dv = DELTA_CASES[name][:5]
    x, oracle = delta_inputs(*DELTA_CASES[name])
    b = D.segment_bounds(T, world)
    seg = lambda t: None if t is None else t[:, b[rank]:b[rank + 1]].contiguous()
    single_S = torch.empty(oracle[1].shape)
    single = (libgdn.delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], mask=x["mask"], state_in=x["S0"],
                           state_out=single_S, **x["kw"]), single_S)
    runs, stats = [], {}
    for i in range(2):
        runs.append(D.context_parallel_delta(
            seg(x["q"]), seg(x["k"]), seg(x["v"]), seg(x["gate"]), seg(x["beta"]), mask=seg(x["mask"]),
            state_in=x["S0"] if rank == 0 else None, stats=stats if i == 0 else None, **x["kw"]))
    e = x["q"].element_size()
    formula = {"sizes": (world - 1) * 7 * 8, "status": 2 * (world - 1) * 8,
               "transitions": (world - 1) * Hv * Dk * (Dk + Dv) * 4,
               "final state": Hv * Dk * Dv * 4 * (rank < world - 1),
               "outputs": (world - 1) * (b[1] - b[0]) * Hv * Dv * e}
    return dict(cp=runs[0], again=runs[1], single=single, oracle=oracle, stats=stats,
                formula={k: v for k, v in formula.items() if world > 1 or k == "sizes"})


def layer_inputs(T, initial, dtype=torch.float32, seed=5):
    """A GDN layer with slow decays (A = -exp(A_log) in [-0.05, -0.005]: a segment's M far from 0), a prompt's layer
    inputs (qkv, z, alpha, beta) and the slot's contents before it."""
    layer = gdn_layer(64, 2, 4, 16, 16, dtype)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        layer.A_log.copy_(torch.empty(4).uniform_(0.005, 0.05, generator=g).log())
    with torch.no_grad():
        inputs = layer.project((torch.randn(1, T, 64, generator=g)).to(dtype))
    S0 = torch.randn(4, 16, 16, generator=g) * 0.3 if initial else None
    h0 = torch.randn(layer.conv_dim, 3, generator=g).to(dtype) if initial else None
    return layer, inputs, S0, h0


LAYER_CASES = {"fresh prompt": (45, False), "continued prompt": (38, True)}


def _cp_layer_case(rank, world, name):
    T, initial = LAYER_CASES[name]
    layer, (qkv, z, a, b_), S0, h0 = layer_inputs(T, initial)
    C, e = layer.conv_dim, qkv.element_size()
    pools = libgdn.GatedDeltaNetCache(1, 2, 4, 16, 16)
    pools.set_batch(slot=[0], fresh=[0 if initial else 1])
    if initial:
        pools.states[0][0], pools.histories[0][0] = S0, h0
    with torch.no_grad():
        single = (layer.step(qkv, z, a, b_, pools), pools.states[0][0], pools.histories[0][0])
    conv_w = layer.conv1d.weight.detach().reshape(C, 4)
    oracle = layer_step(qkv, z, a, b_, conv_w, layer.dt_bias.detach(), layer.A_log.detach(),
                        layer.norm.weight.detach(), torch.zeros(4, 16, 16) if S0 is None else S0,
                        torch.zeros(C, 3) if h0 is None else h0, 2, 16)
    bd = D.segment_bounds(T, world)
    seg = lambda t: t[bd[rank]:bd[rank + 1]].contiguous()
    runs, stats = [], {}
    with torch.no_grad():
        for i in range(2):
            runs.append(D.context_parallel_step(layer, seg(qkv), seg(z), seg(a), seg(b_),
                                                state=S0 if rank == 0 else None, hist=h0 if rank == 0 else None,
                                                stats=stats if i == 0 else None))
        fwd_stats = {}
        h = torch.randn(1, T, 64, generator=torch.Generator().manual_seed(7))
        fwd = D.context_parallel_forward(layer, h[:, bd[rank]:bd[rank + 1]], stats=fwd_stats)[0]
        fwd_single = layer(h)
    formula = {"sizes": (world - 1) * 6 * 8, "status": 2 * (world - 1) * 8, "conv tails": (world - 1) * 3 * C * e,
               "transitions": (world - 1) * 4 * 16 * 32 * 4, "final state": 4 * 16 * 16 * 4 * (rank < world - 1),
               "final history": 3 * C * e * (rank < world - 1), "outputs": (world - 1) * (bd[1] - bd[0]) * 4 * 16 * e}
    return dict(cp=runs[0], again=runs[1], single=single, oracle=oracle, stats=stats,
                formula={k: v for k, v in formula.items() if world > 1 or k == "sizes"},
                fwd_rel=rel(fwd, fwd_single), fwd_equal=torch.equal(fwd, fwd_single),
                fwd_outputs=fwd_stats.get("outputs", 0), fwd_formula=(world - 1) * (bd[1] - bd[0]) * 64 * e)


def check_cp(world, results, what):
    first = results[0]
    for rank, r in enumerate(results):
        where = "%s, world %d, rank %d" % (what, world, rank)
        for x, x0, again in zip(r["cp"], first["cp"], r["again"]):
            assert torch.equal(x, again), where + ": not bitwise run to run"
            assert torch.equal(x, x0), where + ": not the bits of rank 0"
        assert r["stats"] == r["formula"], where + ": bytes received %s, formula %s" % (r["stats"], r["formula"])
    cp, single, oracle = first["cp"], first["single"], first["oracle"]
    errs = {"y cp/single": rel(cp[0], single[0]), "state cp/single": rel(cp[1], single[1]),
            "y cp/oracle": rel(cp[0], oracle[0]), "state cp/oracle": rel(cp[1], oracle[1]),
            "y single/oracle": rel(single[0], oracle[0]), "state single/oracle": rel(single[1], oracle[1])}
    print("\n%s, world %d: %s" % (what, world, ", ".join("%s %.1e" % kv for kv in errs.items())))
    if world <= 2:  # rank 1 starts from rank 0's final state: a split call (docs/CONTRACT.md sections 4, 7)
        assert all(torch.equal(a, b) for a, b in zip(cp, single)), what + ": not the single-rank bits"
    assert max(errs.values()) <= CP_BOUND, "%s, world %d: %s" % (what, world, errs)
    return errs


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("name", sorted(DELTA_CASES))
def test_context_parallel_delta(world, name):
    check_cp(world, [r["cp delta"][name] for r in ranks(world)], name)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("name", sorted(LAYER_CASES))
def test_context_parallel_layer_step(world, name):
    results = [r["cp layer"][name] for r in ranks(world)]
    check_cp(world, results, "layer step, " + name)
    for rank, r in enumerate(results):
        assert torch.equal(r["cp"][2], r["single"][2]), "rank %d: the final history is not the single run's" % rank
        assert r["fwd_equal"] if world == 1 else r["fwd_rel"] <= CP_BOUND, r["fwd_rel"]
        assert r["fwd_outputs"] == r["fwd_formula"]


def _cp_refusal_case(rank, world):
    layer, (qkv, z, a, b), _, _ = layer_inputs(5, False)
    q, q8, v, g = torch.zeros(1, 4, 2, 16), torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 16), torch.ones(1, 4, 2)
    cases = {  # each rank's call; every rank must raise (none may wait in a collective)
        "short": lambda: D.context_parallel_step(layer, *(x[:2] if rank == 0 else x[2:] for x in (qkv, z, a, b))),
        "heads": lambda: D.context_parallel_delta(q8 if rank else q, q8 if rank else q, v, g, g),
        "state_in": lambda: D.context_parallel_delta(q, q, v, g, g, state_in=torch.zeros(1, 2, 16, 8)),
        "kernel": lambda: D.context_parallel_delta(q, q, v, g, g, kernel="nope"),
    }
    got = {}
    with torch.no_grad():
        for name, call in cases.items():
            try:
                call()
                got[name] = "returned"
            except (ValueError, RuntimeError) as err:
                got[name] = "%s: %s" % (type(err).__name__, err)
    return got


def test_context_parallel_refusals():
    """Every rank raises, none is left in a collective: a segment under 3 tokens in the layer step and heads that
    differ between ranks (the same ValueError on every rank, before any run), rank 0's bad state_in (its own
    ValueError; the other ranks hear of it), a kernel libgdn refuses at run time (the ranks that ran it raise its
    error, the others a RuntimeError)."""
    for rank, got in enumerate(r["refusals"] for r in ranks(2)):
        assert "expected a segment of at least 3 tokens on every rank" in got["short"] and "[2, 3]" in got["short"]
        assert "expected the same on every rank, got [2, 16, 2, 16, 0] on rank 0 and [2, 8, 2, 16, 0] on rank 1" \
            in got["heads"], got
        assert ("ValueError: state_in: expected shape" in got["state_in"] if rank == 0 else
                "ValueError: rank 0 refused its arguments" in got["state_in"]), got
        assert ("ValueError" in got["kernel"] and "nope" in got["kernel"] if rank == 0 else
                "RuntimeError: rank 0's segment run raised" in got["kernel"]), got
    with pytest.raises(ValueError, match="T: expected at least world = 4 tokens, got 3"):
        D.segment_bounds(3, 4)
    assert D.segment_bounds(10, 4) == [0, 3, 6, 8, 10]


# ---- transformers' Qwen3-Next model, its GDN layers sharded ----

STEPS = 128


def _tp_model_case(rank, world):
    """qwen3next_model's tiny model, its GDN layers over the group: 128 greedy tokens (None without transformers)."""
    try:
        import transformers.models.qwen3_next.modeling_qwen3_next  # noqa: F401
    except ImportError:
        return None
    import qwen3next_model as qm
    cfg = qm.config("tiny", layers=4)
    model = qm.build(cfg)
    pools = D.use_libgdn_tensor_parallel(model, slots=1)
    prompt = torch.randint(0, cfg.vocab_size, (16,), generator=torch.Generator().manual_seed(1))
    local = [m for m in model.modules() if isinstance(m, D.TensorParallelTransformersGatedDeltaNet)]
    tokens, logits = qm.greedy(model, prompt, STEPS, pools)
    return dict(tokens=tokens, logits=logits, layers=len(local), heads=local[0].gdn.num_v_heads,
                state=tuple(pools.states[0].shape))


def test_tensor_parallel_model_greedy_tokens():
    pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next", exc_type=ImportError)
    results = [r["model"] for r in ranks(2)]
    import qwen3next_model as qm
    cfg = qm.config("tiny", layers=4)
    ours, pools, _ = qm.on_libgdn(qm.build(cfg))
    prompt = torch.randint(0, cfg.vocab_size, (16,), generator=torch.Generator().manual_seed(1))
    tokens, logits = qm.greedy(ours, prompt, STEPS, pools)
    for rank, r in enumerate(results):
        assert r["layers"] == 3 and r["heads"] == cfg.linear_num_value_heads // 2
        assert r["state"] == (1, cfg.linear_num_value_heads // 2, cfg.linear_key_head_dim,
                              cfg.linear_value_head_dim)
        assert torch.equal(r["tokens"], results[0]["tokens"]) and torch.equal(r["logits"], results[0]["logits"])
    diff = (results[0]["logits"] - logits).abs().max().item()
    print("\nQwen3-Next tiny, GDN heads over 2 ranks: %d of %d greedy tokens equal to one rank's, max |logit diff| "
          "%.1e (max |logit| %.1f)" % (int((results[0]["tokens"] == tokens).sum()), STEPS, diff,
                                       logits.abs().max().item()))
    assert torch.equal(results[0]["tokens"], tokens)
    assert diff <= 1e-4 * logits.abs().max().item()
    assert len(set(tokens.tolist())) > 8  # the decode is not stuck on one token


# ---- the example, NCCL ----

def test_torchrun_example():
    """The documented command (docs/DISTRIBUTED.md) at --nproc_per_node 2: both modes, its own checks."""
    example = os.path.join(PYTHON, "examples", "distributed_gdn.py")
    env = dict(os.environ, GDN_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(libgdn.__file__))] +
                                          os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          example, "--T", "64"], env=env, capture_output=True, text=True, timeout=300)
    print(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("PASS") == 2, out.stdout


def _nccl_case(rank, world):
    dev = "cuda:%d" % rank
    torch.cuda.set_device(dev)
    tp = _tp_layer_case(rank, world, dev)
    x, _ = delta_inputs(*DELTA_CASES["kv raw initial state"])
    x = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in x.items()}
    x["kw"] = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in x["kw"].items()}
    S = torch.empty_like(x["S0"])
    y = libgdn.delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], state_in=x["S0"], state_out=S, **x["kw"])
    cy, cS = D.context_parallel_delta(x["q"], x["k"], x["v"], x["gate"], x["beta"], state_in=x["S0"], **x["kw"])
    return dict(tp=tp, cp=torch.equal(cy, y) and torch.equal(cS, S))


def test_nccl_world_one():
    """The same code on CUDA tensors over NCCL, one rank: TP heads and CP (world 1) the single-rank bits."""
    if not (torch.cuda.is_available() and dist.is_nccl_available() and libgdn.cuda_devices() > 0):
        pytest.skip("NCCL needs a CUDA device, torch's NCCL and a CUDA build of libgdn")
    r = spawn(1, _nccl_case, backend="nccl")[0]
    for dtype, t in r["tp"].items():
        assert t["y_contract"] and t["pools"] and t["out_rel"] == 0, (dtype, t)
    assert r["cp"]
