"""Hostile arguments on every Python entry point (issue 37's attacks, rebuilt; docs/RELIABILITY.md, "Python entry
points"): libgdn.layer and libgdn.delta on numpy arrays ("numpy") and on tensors ("torch"), the custom ops
torch.ops.libgdn.layer / .delta called directly ("op"), GatedDeltaNetLayer.forward and fla's names. Each attack gets
a TypeError or ValueError naming the argument, and the pools, the outputs and y (the op's, poisoned) keep every
byte. The ops read their host tensors by value: an int64, strided or int32-flag tensor gives the int32 call's bits."""
import warnings

import numpy as np
import pytest
import torch

import libgdn

HK, HV, DK, DV = 1, 2, 16, 16  # Dv % 16 == 0: planes
C = 2 * HK * DK + HV * DV
T, SLOTS = 3, 4
BIG = 2 ** 32 + 3  # read as 3 where it wraps to int32
LAYER_POS = ("qkv", "z", "alpha", "beta", "conv_w", "dt_bias", "gamma")


def layer_inputs(seed=0):
    """A layer call's tensors (numpy f32; T tokens) and pools of SLOTS slots, random (a write shows)."""
    rng = np.random.default_rng(seed)
    u = lambda lo, hi, *s: rng.uniform(lo, hi, s).astype(np.float32)
    x = dict(qkv=u(-1, 1, T, C), z=u(-1, 1, T, HV, DV), alpha=u(-2, 2, T, HV), beta=u(-2, 2, T, HV),
             conv_w=u(-0.5, 0.5, C, 4), dt_bias=u(0.5, 1.5, HV), gamma=u(0.5, 1.5, DV), A_log=u(-1, 2, HV))
    return x, dict(state=u(-0.3, 0.3, SLOTS, HV, DK, DV), hist_in=u(-1, 1, SLOTS, C, 3))


def as_op_host(v):
    """A host argument as the op takes it: a tensor (a list becomes torch.tensor's int64 or float)."""
    if v is None or isinstance(v, torch.Tensor):
        return v
    return torch.from_numpy(v) if isinstance(v, np.ndarray) else torch.tensor(v)


def layer_call(path, x, pools, **kw):
    """libgdn.layer (path "numpy" or "torch") or torch.ops.libgdn.layer ("op") over the pools, in place; y."""
    if path == "numpy":
        return libgdn.layer(*(x[n] for n in LAYER_POS), pools["state"], pools["hist_in"], A_log=x["A_log"],
                            state_layout="kv", **kw)
    t = {n: torch.from_numpy(v) for n, v in x.items()}
    if path == "torch":
        return libgdn.layer(*(t[n] for n in LAYER_POS), pools["state"], pools["hist_in"], A_log=t["A_log"],
                            state_layout="kv", **kw)
    host = {n: as_op_host(kw.pop(n, None)) for n in ("cu_seqlens", "slot", "commit", "fresh", "checkpoints")}
    if host["cu_seqlens"] is None:
        host["cu_seqlens"] = torch.tensor([0, T], dtype=torch.int32)
    y = pools.pop("y")
    torch.ops.libgdn.layer(t["qkv"], t["z"], t["alpha"], t["beta"], t["conv_w"], None, t["dt_bias"], None,
                           t["A_log"], t["gamma"], pools["state"], pools["hist_in"], kw.pop("hist_out", None),
                           kw.pop("planes", None), y, host["cu_seqlens"], host["slot"], host["commit"], host["fresh"],
                           host["checkpoints"], kw.pop("eps_l2", 0.0), kw.pop("eps_rms", 0.0), kw.pop("scale", 0.0),
                           0, 1, kw.pop("kernel", None), kw.pop("threads", 0))
    assert not kw, kw
    pools["y"] = y
    return y


def path_pools(path, pools):
    """The pools as the path takes them (torch: tensors of their own; op: also a poisoned y)."""
    if path == "numpy":
        return {n: v.copy() for n, v in pools.items()}
    out = {n: torch.tensor(v) for n, v in pools.items()}
    if path == "op":
        out["y"] = torch.full((T, HV, DV), float("nan"))
    return out


def data(x):
    return (x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)).tobytes()


def refused(call, exc, words, *outputs):
    """call() raises exc naming every word, and no byte of the outputs changes."""
    before = [data(o) for o in outputs]
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert [data(o) for o in outputs] == before, "an output was written"


# (name, paths, keyword arguments, exception, words of its message)
LAYER_ATTACKS = [
    ("cu_seqlens short of T", "numpy torch op", dict(cu_seqlens=[0, 2]), ValueError,
     ["cu_seqlens:", "T = 3", "got 2"]),
    ("cu_seqlens past T", "numpy torch op", dict(cu_seqlens=[0, 5]), ValueError, ["cu_seqlens:", "T = 3", "got 5"]),
    ("cu_seqlens not increasing", "numpy torch op", dict(cu_seqlens=[0, 4, 3]), ValueError,
     ["libgdn:", "cu_seqlens[2] = 3 is not above cu_seqlens[1] = 4"]),  # C's check, before any read
    ("cu_seqlens not from 0", "numpy torch op", dict(cu_seqlens=[1, 3]), ValueError, ["cu_seqlens[0] = 1"]),
    ("cu_seqlens 2-D", "numpy torch op", dict(cu_seqlens=np.array([[0], [3]])), ValueError,
     ["cu_seqlens:", "1-D", "[2, 1]"]),
    ("cu_seqlens nested list", "numpy torch", dict(cu_seqlens=[[0, 3]]), ValueError, ["cu_seqlens:", "1-D"]),
    ("slot 2^32 + 3", "numpy torch op", dict(slot=[BIG]), ValueError, ["slot:", "int32", str(BIG)]),
    ("slot 2^32 + 3 int64 tensor", "torch op", dict(slot=torch.tensor([BIG])), ValueError, ["slot:", str(BIG)]),
    ("slot uint64 2^64 - 1", "numpy torch op", dict(slot=np.array([2 ** 64 - 1], dtype=np.uint64)), ValueError,
     ["slot:", str(2 ** 64 - 1)]),
    ("slot a float", "numpy torch", dict(slot=[1.7]), TypeError, ["slot:", "integers", "1.7"]),
    ("slot a float tensor", "torch op", dict(slot=torch.tensor([1.0])), TypeError, ["slot:", "float32"]),
    ("slot a bool", "numpy torch", dict(slot=[True]), TypeError, ["slot:", "bool"]),
    ("commit 2^32", "numpy torch op", dict(commit=[2 ** 32]), ValueError, ["commit:", "int32", str(2 ** 32)]),
    ("commit an integral float", "numpy torch", dict(commit=[2.0]), TypeError, ["commit:", "integers", "2.0"]),
    ("fresh 256", "numpy torch op", dict(fresh=[256]), ValueError, ["fresh:", "0 or 1", "256"]),
    ("fresh 2 int32 tensor", "torch op", dict(fresh=torch.tensor([2], dtype=torch.int32)), ValueError,
     ["fresh:", "0 or 1"]),
    ("checkpoints [3, 2]", "numpy torch op", dict(checkpoints=np.zeros((3, 2), dtype=np.int32)), ValueError,
     ["checkpoints:", "[n, 3]", "[3, 2]"]),
    ("checkpoints after 2^32", "numpy torch op", dict(checkpoints=[(0, 2 ** 32 + 1, 1)]), ValueError,
     ["checkpoints:", "int32"]),
    ("checkpoints a float", "numpy torch", dict(checkpoints=[(0, 1.5, 1)]), TypeError, ["checkpoints:", "1.5"]),
    ("threads 2^32 + 1", "numpy torch op", dict(threads=2 ** 32 + 1), ValueError, ["threads:", str(2 ** 32 + 1)]),
    ("threads -1", "numpy torch op", dict(threads=-1), ValueError, ["threads:", "-1"]),
    ("scale past float32", "numpy torch op", dict(scale=1e39), ValueError, ["scale:", "float32"]),
    ("kernel nosuch", "numpy torch op", dict(kernel="nosuch"), ValueError, ["kernel:", "libgdn.layer_kernels()"]),
    ("kernel cuda_staged on the host", "numpy torch op", dict(kernel="cuda_staged"), ValueError,
     ["kernel:", "not on a CUDA device"]),
    ("kernel not a str", "numpy torch", dict(kernel=7), TypeError, ["kernel:", "int"]),
]


def each_path(attacks):
    """The attacks, one case per path that takes the argument."""
    return [pytest.param(path, kw, exc, words, id="%s-%s" % (name, path))
            for name, paths, kw, exc, words in attacks for path in paths.split()]


@pytest.mark.parametrize("path, kw, exc, words", each_path(LAYER_ATTACKS))
def test_layer_attack(path, kw, exc, words):
    x, pools = layer_inputs()
    p = path_pools(path, pools)
    refused(lambda: layer_call(path, x, p, **kw), exc, words, *p.values())


def test_op_host_tensor_on_another_device():
    x, pools = layer_inputs()
    p = path_pools("op", pools)
    refused(lambda: layer_call("op", x, p, slot=torch.tensor([0], dtype=torch.int32, device="meta")), ValueError,
            ["slot:", "host (CPU) tensor", "meta"], *p.values())


@pytest.mark.parametrize("path", ["numpy", "torch", "op"])
def test_planes_are_an_output_like_the_others(path):
    """planes through every path: the numpy path's bits; a strided, reversed, float64, short or read-only planes
    array is refused, nothing written."""
    x, pools = layer_inputs()
    n = 49 * T * HV * DV // 16
    ref_planes = np.full(n, np.nan, dtype=np.float32)
    ref = path_pools("numpy", pools)
    y_ref = layer_call("numpy", x, ref, planes=ref_planes)
    assert not np.isnan(ref_planes).any()
    conv = (lambda a: a) if path == "numpy" else torch.from_numpy
    p = path_pools(path, pools)
    planes = conv(np.full(n, np.nan, dtype=np.float32))
    y = layer_call(path, x, p, planes=planes)
    assert data(y) == y_ref.tobytes() and data(planes) == ref_planes.tobytes()
    assert data(p["state"]) == ref["state"].tobytes() and data(p["hist_in"]) == ref["hist_in"].tobytes()
    big = np.full(2 * n, np.nan, dtype=np.float32)
    bad = [(conv(big[::2]), ValueError, ["planes:", "contiguous"]),
           (conv(np.zeros(n, dtype=np.float64)), TypeError, ["planes:", "float32", "float64"]),
           (conv(np.zeros(n - 16, dtype=np.float32)), ValueError, ["planes:", "49 T Hv Dv / 16 = %d" % n])]
    if path == "numpy":
        ro = np.zeros(n, dtype=np.float32)
        ro.flags.writeable = False
        bad += [(big[n - 1::-1], ValueError, ["planes:", "contiguous"]), (ro, ValueError, ["planes:", "writeable"])]
    for arg, exc, words in bad:
        p = path_pools(path, pools)
        refused(lambda: layer_call(path, x, p, planes=arg), exc, words, *p.values(), arg)


@pytest.mark.parametrize("which", ["state", "hist_in", "hist_out"])
def test_read_only_numpy_outputs_are_refused(which):
    x, pools = layer_inputs()
    p = path_pools("numpy", pools)
    kw = {}
    if which == "hist_out":
        kw["hist_out"] = np.zeros_like(p["hist_in"])
        kw["hist_out"].flags.writeable = False
        outs = list(p.values()) + [kw["hist_out"]]
    else:
        p[which].flags.writeable = False
        outs = list(p.values())
    refused(lambda: layer_call("numpy", x, p, **kw), ValueError, [which + ":", "writeable", "read-only"], *outs)


def test_a_read_only_input_is_fine():
    """hist_in is only read when hist_out is given: a read-only hist_in then works."""
    x, pools = layer_inputs()
    p = path_pools("numpy", pools)
    p["hist_in"].flags.writeable = False
    hist_out = np.zeros_like(p["hist_in"])
    layer_call("numpy", x, p, hist_out=hist_out)
    assert hist_out.any()


def read_only_pool(tmp_path, values):
    path = tmp_path / "pool.bin"
    values.tofile(path)
    return np.memmap(path, dtype=values.dtype, mode="r", shape=values.shape)


@pytest.mark.parametrize("path", ["numpy", "torch"])
def test_a_read_only_memmap_pool_is_refused(tmp_path, path):
    """np.memmap(mode='r'): read-only pages (a write would be a segfault); through torch.from_numpy too, which only
    warns: the tensor's memory is found read-only in the process's mappings."""
    x, pools = layer_inputs()
    p = path_pools(path, pools)
    mm = read_only_pool(tmp_path, pools["state"])
    if path == "torch":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: "The given NumPy array is not writable"
            p["state"] = torch.from_numpy(mm)
    else:
        p["state"] = mm
    refused(lambda: layer_call(path, x, p), ValueError, ["state:", "read-only"], *p.values())


@pytest.mark.parametrize("path", ["numpy", "torch"])
def test_writeable_memory_torch_did_not_allocate_is_fine(tmp_path, path):
    """A from_numpy pool and a writeable memmap pool: the check passes them."""
    x, pools = layer_inputs()
    ref = path_pools("numpy", pools)
    y_ref = layer_call("numpy", x, ref)
    p = path_pools(path, pools)
    mm = np.memmap(tmp_path / "pool.bin", dtype=np.float32, mode="w+", shape=pools["state"].shape)
    mm[:] = pools["state"]
    p["state"] = torch.from_numpy(mm) if path == "torch" else mm
    y = layer_call(path, x, p)
    assert data(y) == y_ref.tobytes() and data(p["state"]) == ref["state"].tobytes()


def two_sequences():
    """Two sequences (2 and 1 tokens) over slots 1 and 2; what each host argument is read as."""
    return dict(cu_seqlens=[0, 2, 3], slot=[1, 2], commit=[1, 1], fresh=[0, 1], checkpoints=[(0, 1, 3)])


@pytest.mark.parametrize("arg, value", [
    ("cu_seqlens", torch.tensor([0, 2, 3])),  # int64
    ("slot", torch.tensor([1, 2])),  # int64: read as [1, 0] where taken as int32
    ("slot", torch.tensor([1, 7, 2, 7], dtype=torch.int32)[::2]),  # a strided view
    ("commit", torch.tensor([1, 1], dtype=torch.int16)),
    ("fresh", torch.tensor([0, 1], dtype=torch.int32)),  # read as bytes 0, 0 where taken as uint8
    ("fresh", torch.tensor([False, True])),
    ("checkpoints", torch.tensor([[0, 1, 3]])),  # int64
    ("checkpoints", torch.tensor([[0, 9], [1, 9], [3, 9]], dtype=torch.int32).t()[:1]),  # strided
])
def test_op_reads_host_tensors_by_value(arg, value):
    x, pools = layer_inputs()
    kw = two_sequences()
    ref = path_pools("op", pools)
    layer_call("op", x, ref, **{n: torch.tensor(v, dtype=torch.uint8 if n == "fresh" else torch.int32)
                                for n, v in kw.items()})
    p = path_pools("op", pools)
    layer_call("op", x, p, **dict(kw, **{arg: value}))
    assert all(data(p[n]) == data(ref[n]) for n in ref)


def test_module_forward_checks_cu_seqlens():
    torch.manual_seed(0)
    cfg = dict(hidden_size=32, num_k_heads=HK, num_v_heads=HV, head_k_dim=DK, head_v_dim=DV)
    m = libgdn.GatedDeltaNetLayer(**cfg)
    cache = libgdn.GatedDeltaNetCache(SLOTS, HK, HV, DK, DV)
    for s in list(cache.states.values()) + list(cache.histories.values()):
        s.uniform_(-1, 1)
    h = torch.randn(1, T, 32)
    pools = list(cache.states.values()) + list(cache.histories.values())
    with torch.no_grad():
        for cu, exc, words in (([0, 2], ValueError, ["cu_seqlens:", "T = 3", "got 2"]),
                               ([0, 1, 7], ValueError, ["cu_seqlens:", "got 7"]),
                               (torch.tensor([[0, 3]]), ValueError, ["cu_seqlens:", "1-D"])):
            refused(lambda: m(h, cache, cu_seqlens=cu), exc, words, *pools)
        cache.set_batch(slot=[BIG])
        refused(lambda: m(h, cache), ValueError, ["slot:", str(BIG)], *pools)
        cache.set_batch(fresh=[256])
        refused(lambda: m(h, cache), ValueError, ["fresh:", "0 or 1"], *pools)


# ---- delta ----

def delta_inputs(seed=0):
    """A varlen call's tensors (one sequence of T tokens, packed [T, ...]) and a pool of SLOTS states."""
    rng = np.random.default_rng(seed)
    u = lambda lo, hi, *s: rng.uniform(lo, hi, s).astype(np.float32)
    x = dict(q=u(-1, 1, T, HK, DK), k=u(-0.3, 0.3, T, HK, DK), v=u(-1, 1, T, HV, DV), gate=u(0.7, 1, T, HV),
             beta=u(0, 1, T, HV))
    return x, u(-0.3, 0.3, SLOTS, HV, DV, DK)


def delta_call(path, x, pool, y=None, **kw):
    """libgdn.delta on the pool in place ("numpy", "torch") or torch.ops.libgdn.delta ("op", writing y)."""
    kw.setdefault("cu_seqlens", [0, T])
    kw.setdefault("state_slot", [1])
    if path == "numpy":
        return libgdn.delta(*x.values(), state_in=pool, state_out=pool, **kw)
    t = [torch.from_numpy(v) for v in x.values()]
    if path == "torch":
        return libgdn.delta(*t, state_in=pool, state_out=pool, **kw)
    torch.ops.libgdn.delta(*t, None, None, None, pool, pool, y, as_op_host(kw.pop("cu_seqlens")),
                           as_op_host(kw.pop("state_slot")), None, 0, 0, 0, kw.pop("scale", 0.25),
                           kw.pop("kernel", None), kw.pop("threads", 0))
    assert not kw, kw
    return y


DELTA_ATTACKS = [
    ("cu_seqlens short of T", "numpy torch op", dict(cu_seqlens=[0, 2]), ValueError,
     ["cu_seqlens:", "T = 3", "got 2"]),
    ("cu_seqlens past T", "numpy torch op", dict(cu_seqlens=[0, 5]), ValueError, ["cu_seqlens:", "got 5"]),
    ("cu_seqlens not increasing", "numpy torch op", dict(cu_seqlens=[0, 4, 3], state_slot=[1, 2]), ValueError,
     ["cu_seqlens[2] = 3 is not above cu_seqlens[1] = 4"]),
    ("cu_seqlens 2-D", "numpy torch op", dict(cu_seqlens=np.array([[0, 3]])), ValueError, ["cu_seqlens:", "1-D"]),
    ("state_slot 2^32 + 3", "numpy torch op", dict(state_slot=[BIG]), ValueError, ["state_slot:", str(BIG)]),
    ("state_slot uint64 2^64 - 1", "numpy torch op", dict(state_slot=np.array([2 ** 64 - 1], dtype=np.uint64)),
     ValueError, ["state_slot:", str(2 ** 64 - 1)]),
    ("state_slot a float", "numpy torch", dict(state_slot=[1.0]), TypeError, ["state_slot:", "integers"]),
    ("state_slot 2-D", "numpy torch op", dict(state_slot=np.array([[1]])), ValueError, ["state_slot:", "1-D"]),
    ("threads 2^32 + 1", "numpy torch op", dict(threads=2 ** 32 + 1), ValueError, ["threads:", str(2 ** 32 + 1)]),
    ("scale past float32", "numpy torch op", dict(scale=-1e39), ValueError, ["scale:", "float32"]),
    ("kernel nosuch", "numpy torch op", dict(kernel="nosuch"), ValueError, ["kernel:", "libgdn.kernels()"]),
    ("kernel cuda_window on the host", "numpy torch op", dict(kernel="cuda_window"), ValueError,
     ["kernel:", "cuda_window", "not on a CUDA device"]),
]


@pytest.mark.parametrize("path, kw, exc, words", each_path(DELTA_ATTACKS))
def test_delta_attack(path, kw, exc, words):
    x, pool = delta_inputs()
    pool = pool if path == "numpy" else torch.from_numpy(pool)
    y = torch.full((T, HV, DV), float("nan"))
    refused(lambda: delta_call(path, x, pool, y, **kw), exc, words, pool, y)


def test_delta_read_only_state_out_is_refused(tmp_path):
    x, pool = delta_inputs()
    ro = pool.copy()
    ro.flags.writeable = False
    refused(lambda: delta_call("numpy", x, ro), ValueError, ["state_out:", "writeable"], ro)
    mm = read_only_pool(tmp_path, pool)
    refused(lambda: libgdn.delta(*x.values(), state_in=pool, state_out=mm, cu_seqlens=[0, T], state_slot=[1]),
            ValueError, ["state_out:", "read-only"], mm, pool)
    y = libgdn.delta(*x.values(), state_in=mm, cu_seqlens=[0, T], state_slot=[1])  # state_in is only read
    assert np.isfinite(y).all()


@pytest.mark.parametrize("value", [torch.tensor([1]), torch.tensor([1, 0], dtype=torch.int32)[:1],
                                   torch.tensor([9, 1], dtype=torch.int32)[1:], torch.tensor([1], dtype=torch.int8)])
def test_delta_op_reads_host_tensors_by_value(value):
    x, pool = delta_inputs()
    outs = []
    for slot in (torch.tensor([1], dtype=torch.int32), value):
        p, y = torch.from_numpy(pool.copy()), torch.full((T, HV, DV), float("nan"))
        delta_call("op", x, p, y, state_slot=slot, cu_seqlens=torch.tensor([0, T]))
        outs.append((data(p), data(y)))
    assert outs[0] == outs[1]


def test_fla_host_arrays():
    """fla's ssm_state_indices and cu_seqlens: int64 tensors (vLLM's), checked by value, not wrapped."""
    x, pool = delta_inputs()
    q, k, v, g, beta = (torch.from_numpy(a)[None] for a in x.values())
    g = torch.log(g)
    pool_kv = torch.from_numpy(pool).transpose(-1, -2).contiguous()
    call = lambda **kw: libgdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=pool_kv, **kw)
    refused(lambda: call(cu_seqlens=torch.tensor([0, T]), ssm_state_indices=torch.tensor([BIG])), ValueError,
            ["state_slot:", str(BIG)], pool_kv)
    refused(lambda: call(cu_seqlens=torch.tensor([0, T]), ssm_state_indices=torch.tensor([1.0])), TypeError,
            ["ssm_state_indices:", "float32"], pool_kv)
    refused(lambda: call(cu_seqlens=torch.tensor([0, T - 1]), ssm_state_indices=torch.tensor([1])), ValueError,
            ["cu_seqlens:", "T = 3"], pool_kv)
    o, _ = call(cu_seqlens=torch.tensor([0, T]), ssm_state_indices=torch.tensor([1]))
    assert torch.isfinite(o).all()


def test_every_cuda_kernel_is_named_cuda():
    """check_kernel tells a CUDA layer kernel by its name (the layer table has no backends): the delta table, which
    has them, keeps the rule."""
    assert all(name.startswith("cuda") == (b == "cuda") for name, b, _ in libgdn.kernels())
    assert [n for n in libgdn.layer_kernels() if n.startswith("cuda")] == ["cuda_fused", "cuda_staged"]


@pytest.mark.skipif(not (torch.cuda.is_available() and libgdn.cuda_devices() > 0),
                    reason="needs a CUDA device and a CUDA build of libgdn")
def test_cuda_host_arrays_and_kernels():
    """On CUDA: the op refuses a host array on the device (it would be read as host memory); a CPU kernel named for
    CUDA tensors is refused, pointing to the table."""
    x, pools = layer_inputs()
    t = {n: torch.from_numpy(v).cuda() for n, v in x.items()}
    state, hist = (torch.from_numpy(pools[n]).cuda() for n in ("state", "hist_in"))
    y = torch.full((T, HV, DV), float("nan"), device="cuda")
    before = [data(a.cpu()) for a in (state, hist, y)]
    with pytest.raises(ValueError, match="cu_seqlens: expected a host \\(CPU\\) tensor, got cuda:0"):
        torch.ops.libgdn.layer(t["qkv"], t["z"], t["alpha"], t["beta"], t["conv_w"], None, t["dt_bias"], None,
                               t["A_log"], t["gamma"], state, hist, None, None, y,
                               torch.tensor([0, T], dtype=torch.int32, device="cuda"), None, None, None, None,
                               0.0, 0.0, 0.0, 0, 1, None, 0)
    with pytest.raises(ValueError, match="kernel: 'ref' is a CPU kernel, and the tensors are on cuda:0"):
        libgdn.layer(*(t[n] for n in LAYER_POS), state, hist, A_log=t["A_log"], kernel="ref")
    assert [data(a.cpu()) for a in (state, hist, y)] == before
