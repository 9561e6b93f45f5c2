"""libgdn across ranks through torch.distributed (gloo on CPU, NCCL on CUDA): tensor parallel and context parallel.

Tensor parallel (heads sharded, as vLLM shards Qwen3-Next's GDN layer): rank r of `world` holds key heads
[r Hk/world, (r+1) Hk/world) and their value heads [r Hv/world, (r+1) Hv/world) (Hv/Hk of them per key head), the
conv channels of those q, k and v heads, and only those heads of the state and history pools. The input projections
are column-parallel (the rank's rows of in_proj_qkvz and in_proj_ba: transformers groups them per key head), the
output projection row-parallel (the rank's columns of out_proj), its partial sums added by one all_reduce. Every
head's arithmetic is its own, so each head's y (before out_proj) and pools are the single-rank run's bits.

    shard_layer(layer, rank, world)          a GatedDeltaNetLayer of the rank's heads (shard_state_dict's weights)
    TensorParallelGatedDeltaNet(layer)       forward = the rank's heads, out_proj, all_reduce
    tensor_parallel_cache(config, slots)     a GatedDeltaNetCache of the rank's heads
    use_libgdn_tensor_parallel(model)        use_libgdn with every GDN layer sharded over the group

Context parallel prefill: one sequence split into contiguous segments, segment r on rank r (segment_bounds). A
segment maps the state arriving at its first token to the state after its last as S_out = M S_in + L (per value
head, S [Dk, Dv] key-major; M = A_n ... A_1 with A_t = g_t (I - beta_t k_t k_t^T), or (I - beta_t k_t k_t^T)
diag(g_t) for the vector gate; L = S_out from S_in = 0). Each rank runs its segment with libgdn from S = 0 (rank 0:
from the prompt's initial state) for L, and from S = the identity's columns with v = 0 for M (in float32, libgdn's
exact recurrence: S_out = M S_in there); the ranks all_gather (M, L); rank r composes in float64, in rank order,
S_in(r) = M_{r-1} (... (M_1 L_0 + L_1) ...) + L_{r-1}, rounds it once to float32 and runs its segment again from it
with libgdn for its y and, on the last rank, the final state, which is broadcast. Rank 0 runs once (its first run is
its answer), the last rank only the second run, the others three. The layer step exchanges the last three conv
inputs of each segment first (the next segment's conv history). Deterministic for a given world size and split; one
or two ranks give the single-rank call's bits (rank 1 starts from rank 0's final state), more are within 1e-5 of the
float64 oracle: docs/CONTRACT.md section 9. docs/DISTRIBUTED.md: the wiring, the measurements and the scaling.

    context_parallel_delta(q, k, v, gate, beta, ...)      gdn_delta over a split sequence
    context_parallel_step(layer, qkv, z, alpha, beta)     the layer step (GatedDeltaNetLayer.step) over a split prompt
    context_parallel_forward(layer, hidden_states)        project, the step, out_proj

stats (a dict, or None) receives, per collective, the bytes this rank received from the others.
"""
import types

import torch
import torch.distributed as dist
from torch import nn

from . import calls, capi
from .qwen3_next import GatedDeltaNetCache, GatedDeltaNetLayer, TransformersGatedDeltaNet
from .torch_ops import delta


def _rank_world(group):
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed: expected an initialized process group (dist.init_process_group), "
                           "got none")
    return dist.get_rank(group), dist.get_world_size(group)


# ---- tensor parallel ----

def head_ranges(num_k_heads, num_v_heads, rank, world):
    """(key heads, value heads) of rank `rank` of `world`, as ranges: whole key heads, each with its
    num_v_heads / num_k_heads value heads."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError("rank: expected 0 <= rank < world = %d, got %d" % (world, rank))
    if num_k_heads % world or num_v_heads % num_k_heads:
        raise ValueError("world: expected a divisor of num_k_heads = %d (each rank holds whole key heads and their "
                         "value heads; num_v_heads = %d a multiple of num_k_heads), got %d"
                         % (num_k_heads, num_v_heads, world))
    hk, hv = num_k_heads // world, num_v_heads // world
    return range(rank * hk, (rank + 1) * hk), range(rank * hv, (rank + 1) * hv)


def conv_channels(num_k_heads, num_v_heads, head_k_dim, head_v_dim, rank, world):
    """The rank's channels of the C = 2 Hk Dk + Hv Dv conv channels (q, k of its key heads, v of its value heads),
    in the order of its own layer's: a LongTensor of C / world indices (the rank's rows of a history pool [C, 3])."""
    ks, vs = head_ranges(num_k_heads, num_v_heads, rank, world)
    key_dim, Dk, Dv = num_k_heads * head_k_dim, head_k_dim, head_v_dim
    q = torch.arange(ks.start * Dk, ks.stop * Dk)
    return torch.cat([q, key_dim + q, 2 * key_dim + torch.arange(vs.start * Dv, vs.stop * Dv)])


def shard_state_dict(state, num_k_heads, num_v_heads, head_k_dim, head_v_dim, rank, world):
    """The rank's part of a GatedDeltaNetLayer's (or transformers' Qwen3NextGatedDeltaNet's) state dict: rows of
    in_proj_qkvz [Hk (2 Dk + 2 r Dv), hidden] and in_proj_ba [Hk 2 r, hidden] (grouped per key head, r = Hv/Hk),
    conv1d channels (q, k of the rank's key heads, v of its value heads), dt_bias and A_log of its value heads,
    out_proj's columns of its value heads; norm.weight [Dv] whole."""
    ks, vs = head_ranges(num_k_heads, num_v_heads, rank, world)
    Dk, Dv, r = head_k_dim, head_v_dim, num_v_heads // num_k_heads
    conv = conv_channels(num_k_heads, num_v_heads, head_k_dim, head_v_dim, rank, world)
    group = 2 * Dk + 2 * r * Dv
    take = {"in_proj_qkvz.weight": lambda w: w[ks.start * group:ks.stop * group],
            "in_proj_ba.weight": lambda w: w[ks.start * 2 * r:ks.stop * 2 * r],
            "conv1d.weight": lambda w: w[conv.to(w.device)],
            "dt_bias": lambda w: w[vs.start:vs.stop], "A_log": lambda w: w[vs.start:vs.stop],
            "norm.weight": lambda w: w,
            "out_proj.weight": lambda w: w[:, vs.start * Dv:vs.stop * Dv]}
    out = {}
    for name, w in state.items():
        if name not in take:
            raise ValueError("state: expected the GDN layer's parameters (%s), got %r" % (", ".join(take), name))
        out[name] = take[name](w).clone().contiguous()
    return out


def shard_layer(layer, rank, world):
    """A GatedDeltaNetLayer of rank's heads (head_ranges) with their weights, from a whole GatedDeltaNetLayer or
    transformers' Qwen3NextGatedDeltaNet: num_k_heads / world key heads, num_v_heads / world value heads, the same
    hidden size, head sizes, layer_idx, dtype and device."""
    if not isinstance(layer, GatedDeltaNetLayer):
        layer = GatedDeltaNetLayer.from_module(layer)
    head_ranges(layer.num_k_heads, layer.num_v_heads, rank, world)
    w = layer.in_proj_qkvz.weight
    out = GatedDeltaNetLayer(layer.hidden_size, layer.num_k_heads // world, layer.num_v_heads // world,
                             layer.head_k_dim, layer.head_v_dim, layer.norm.variance_epsilon, layer.layer_idx,
                             dtype=w.dtype, device=w.device)
    out.load_state_dict(shard_state_dict(layer.state_dict(), layer.num_k_heads, layer.num_v_heads, layer.head_k_dim,
                                         layer.head_v_dim, rank, world))
    return out


class TensorParallelGatedDeltaNet(nn.Module):
    """A GDN layer over the ranks of `group`: .gdn is the rank's GatedDeltaNetLayer (shard_layer of the whole
    `layer`), forward(hidden_states, cache, cu_seqlens) its forward (the rank's heads, its out_proj columns) then a
    sum all_reduce over the group; cache: a GatedDeltaNetCache of the rank's heads (tensor_parallel_cache). Every
    rank passes the same hidden_states and gets the same output."""

    def __init__(self, layer, group=None):
        super().__init__()
        rank, world = _rank_world(group)
        self.gdn, self.group = shard_layer(layer, rank, world), group

    def forward(self, hidden_states, cache=None, attention_mask=None, cu_seqlens=None, **kwargs):
        out = self.gdn(hidden_states, cache, attention_mask, cu_seqlens, **kwargs)
        dist.all_reduce(out, group=self.group)
        return out


def tensor_parallel_cache(config, slots, group=None, dtype=torch.float32, device="cpu", state_layout="kv",
                          kernel=None):
    """GatedDeltaNetCache.from_config for the rank's heads: state pools [slots, Hv/world, ...] and history pools
    [slots, C/world, 3] (the rank's q, k, v channels)."""
    _, world = _rank_world(group)
    Hk, Hv = config.linear_num_key_heads, config.linear_num_value_heads
    head_ranges(Hk, Hv, 0, world)
    local = types.SimpleNamespace(
        layer_types=getattr(config, "layer_types", None), num_hidden_layers=config.num_hidden_layers,
        linear_num_key_heads=Hk // world, linear_num_value_heads=Hv // world,
        linear_key_head_dim=config.linear_key_head_dim, linear_value_head_dim=config.linear_value_head_dim)
    return GatedDeltaNetCache.from_config(local, slots, dtype, device, state_layout, kernel)


class TensorParallelTransformersGatedDeltaNet(TransformersGatedDeltaNet):
    """TransformersGatedDeltaNet over the rank's heads (gdn: shard_layer's), its output summed over the group."""

    def __init__(self, gdn, pools, group=None):
        super().__init__(gdn, pools)
        self.group = group

    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        out = super().forward(hidden_states, cache, attention_mask, **kwargs)
        dist.all_reduce(out, group=self.group)
        return out


def use_libgdn_tensor_parallel(model, slots=1, group=None, state_layout="kv", kernel=None):
    """use_libgdn over the ranks of `group`: every Qwen3NextGatedDeltaNet of the model becomes a
    TensorParallelTransformersGatedDeltaNet of the rank's heads, over one tensor_parallel_cache, which is returned.
    Every rank holds the same model (the other layers are left whole) and runs the same forwards. In place."""
    rank, world = _rank_world(group)
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child).__name__ == "Qwen3NextGatedDeltaNet"]
    if not found:
        raise ValueError("model: expected Qwen3NextGatedDeltaNet modules, found none")
    first = found[0][2].in_proj_qkvz.weight
    pools = tensor_parallel_cache(model.config, slots, group, first.dtype, first.device, state_layout, kernel)
    for parent, name, child in found:
        setattr(parent, name, TensorParallelTransformersGatedDeltaNet(shard_layer(child, rank, world), pools, group))
    return pools


# ---- context parallel ----

def segment_bounds(T, world):
    """Contiguous near-equal segments of T tokens over `world` ranks: [0, ..., T] (world + 1 offsets; rank r takes
    tokens [b[r], b[r+1]), the first T % world segments one token longer)."""
    if world < 1 or T < world:
        raise ValueError("T: expected at least world = %d tokens, got %d" % (world, T))
    return [r * (T // world) + min(r, T % world) for r in range(world + 1)]


class _Comm:
    """The collectives of one context-parallel call over `group`, counting in `stats` (a dict, or None) the bytes
    this rank receives from the others, per collective name."""

    def __init__(self, group, stats, device):
        self.group, self.stats, self.device = group, stats, device
        self.rank, self.world = _rank_world(group)

    def _count(self, name, nbytes):
        if self.stats is not None:
            self.stats[name] = self.stats.get(name, 0) + nbytes

    def all_gather(self, name, x):
        """[world, *x.shape]: every rank's x, in rank order."""
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.world)]
        dist.all_gather(parts, x, group=self.group)
        self._count(name, (self.world - 1) * x.numel() * x.element_size())
        return torch.stack(parts)

    def broadcast(self, name, x, src):
        """x of rank `src` (of the group) on every rank, in place."""
        dist.broadcast(x, src if self.group is None else dist.get_global_rank(self.group, src), group=self.group)
        self._count(name, 0 if self.rank == src else x.numel() * x.element_size())
        return x

    def agree(self, check, n, same):
        """The checks before any run, raised on every rank alike (a rank that raised alone would leave the others
        waiting in a collective): check() raises this rank's refusal of its arguments (TypeError, ValueError) or
        returns n ints [T_r, then what must be the same on every rank, which `same` names]. Raises on every rank
        where one refused (that rank its own error) or those ints differ; returns every rank's T_r."""
        try:
            err, mine = None, [int(x) for x in check()]
        except (TypeError, ValueError) as e:
            err, mine = e, [0] * n
        got = self.all_gather("sizes", torch.tensor([int(err is None)] + mine, dtype=torch.int64,
                                                    device=self.device)).tolist()
        if err is not None:
            raise err
        bad = [r for r, s in enumerate(got) if not s[0]]
        if bad:
            raise ValueError("rank %d refused its arguments (its error names the tensor)" % bad[0])
        for r, s in enumerate(got):
            if s[2:] != got[0][2:]:
                raise ValueError("%s: expected the same on every rank, got %s on rank 0 and %s on rank %d"
                                 % (same, got[0][2:], s[2:], r))
        return [s[1] for s in got]

    def settle(self, fn):
        """fn() on every rank, then whether it raised anywhere (an all_gather of one int), so that no rank is left
        waiting in a collective: the rank whose fn raised re-raises its error, the others raise a RuntimeError
        naming it; else fn's result."""
        try:
            out, err = fn(), None
        except Exception as e:  # noqa: BLE001 (any error: the other ranks must hear of it)
            out, err = None, e
        got = self.all_gather("status", torch.tensor([int(err is None)], dtype=torch.int64, device=self.device))
        if err is not None:
            raise err
        bad = [r for r, ok in enumerate(got.tolist()) if not ok[0]]
        if bad:
            raise RuntimeError("rank %d's segment run raised (its error says why); nothing is returned" % bad[0])
        return out

    def gather_rows(self, x, lengths):
        """The ranks' x [lengths[r], ...] concatenated in rank order (padded to the longest for all_gather)."""
        pad = max(lengths) - x.shape[0]
        if pad:
            x = torch.cat([x, x.new_zeros((pad,) + tuple(x.shape[1:]))])
        parts = self.all_gather("outputs", x)
        return torch.cat([parts[r, :n] for r, n in enumerate(lengths)])


def _dtype_code(dtype):
    return {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}.get(dtype, -1)


def _incoming(comm, transitions):
    """S_in of this rank [Hv, Dk, Dv] float64 from every rank's [Hv, Dk, Dk + Dv] float32 (M, L) packed: L_0, then
    S = M_j S + L_j for j = 1 .. rank - 1, in this order."""
    Dk = transitions.shape[2]
    S = transitions[0, :, :, Dk:].double()
    for j in range(1, comm.rank):
        S = torch.matmul(transitions[j, :, :, :Dk].double(), S) + transitions[j, :, :, Dk:].double()
    return S


def _transition(run, Hv, Dk, Dv, device):
    """M [Hv, Dk, Dk] float32 of a segment: run(S_in) -> S_out [Hv, Dk, Dv] with v = 0 from S_in = the identity's
    columns c .. c + Dv - 1 (ceil(Dk / Dv) runs), S_out = M S_in."""
    M = torch.empty(Hv, Dk, Dk, dtype=torch.float32, device=device)
    for c in range(0, Dk, Dv):
        w = min(Dv, Dk - c)
        eye = torch.zeros(Hv, Dk, Dv, dtype=torch.float32, device=device)
        eye[:, torch.arange(c, c + w), torch.arange(w)] = 1
        M[:, :, c:c + w] = run(eye)[:, :, :w]
    return M


def _context_parallel(comm, run, run_zero_v, Hv, Dk, Dv, device):
    """The scheme of the module docstring. run(S_in [Hv, Dk, Dv] f32 or None) -> (y, S_out [Hv, Dk, Dv]) runs the
    rank's segment (None: rank 0's own initial state); run_zero_v(S_in) -> S_out the same with v = 0. Returns
    (y of the rank's segment, the final state [Hv, Dk, Dv] f32 of the whole sequence, on every rank)."""
    r, W = comm.rank, comm.world
    if W == 1:
        return run(None)
    zeros = lambda n: torch.zeros(Hv, Dk, n, dtype=torch.float32, device=device)

    def first():  # -> (y or None, M, L); the last rank's (M, L) are nobody's incoming state, rank 0's M unread
        if r == W - 1:
            return None, zeros(Dk), zeros(Dv)
        y, L = run(None if r == 0 else zeros(Dv))
        return y, _transition(run_zero_v, Hv, Dk, Dv, device) if r > 0 else zeros(Dk), L

    y, M, L = comm.settle(first)
    transitions = comm.all_gather("transitions", torch.cat([M, L], dim=2))
    if r > 0:
        y, L = comm.settle(lambda: run(_incoming(comm, transitions).float()))
    else:
        comm.settle(lambda: None)
    return y, comm.broadcast("final state", L.contiguous(), W - 1)


def _to_kv(S, layout):
    return S if layout == "kv" else S.transpose(-1, -2).contiguous()


def context_parallel_delta(q, k, v, gate, beta, *, group=None, gate_kind="decay", beta_kind="direct", A_log=None,
                           dt_bias=None, mask=None, state_in=None, state_layout="vk", scale=None, kernel=None,
                           gather=True, stats=None):
    """libgdn.delta over one sequence split across the ranks of `group`: this rank's segment q, k [1, T_r, Hk, Dk],
    v [1, T_r, Hv, Dv], gate, beta (and mask) [1, T_r, ...] as libgdn.delta takes them (dense, B = 1); A_log, dt_bias,
    scale, gate and beta kinds the same on every rank. state_in [1, Hv, ...] (state_layout's): the sequence's state
    before its first token, read on rank 0 only (None: zeros). Returns (y, state): y the whole sequence's
    [1, T, Hv, Dv] in rank order (gather=False: this rank's [1, T_r, Hv, Dv]), state [1, Hv, ...] the final state,
    on every rank. The scheme and its contract: the module docstring, docs/CONTRACT.md section 9."""
    comm = _Comm(group, stats, q.device)

    def check():  # libgdn.delta's checks of the segment (and of rank 0's state_in), before any collective
        if not isinstance(q, torch.Tensor) or q.dim() != 4 or q.shape[0] != 1:
            raise ValueError("q: expected a [1, T_r, Hk, Dk] tensor (dense, one sequence), got %s"
                             % (list(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__))
        calls.check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in if comm.rank == 0 else None, None,
                          None, None, calls.enum("gate_kind", calls.GATE_KINDS, gate_kind),
                          calls.enum("state_layout", calls.STATE_LAYOUTS, state_layout))
        return [q.shape[1], q.shape[2], q.shape[3], v.shape[2], v.shape[3], _dtype_code(q.dtype)]

    lengths = comm.agree(check, 6, "[Hk, Dk, Hv, Dv, dtype] of q, v")
    if min(lengths) < 1:
        raise ValueError("q: expected a segment of at least 1 token on every rank, got %s tokens" % lengths)
    Hk, Dk, Hv, Dv = q.shape[2], q.shape[3], v.shape[2], v.shape[3]
    kw = dict(gate_kind=gate_kind, beta_kind=beta_kind, A_log=A_log, dt_bias=dt_bias, mask=mask,
              state_layout=state_layout, scale=scale, kernel=kernel)
    tail = (Hv, Dk, Dv) if state_layout == "kv" else (Hv, Dv, Dk)

    def call(v_, S_in):  # S_in [Hv, Dk, Dv] or None (rank 0: state_in) -> (y, S_out [Hv, Dk, Dv])
        S_in = state_in if S_in is None else _to_kv(S_in, state_layout).reshape((1,) + tail)
        out = torch.empty((1,) + tail, dtype=torch.float32, device=q.device)
        y = delta(q, k, v_, gate, beta, state_in=S_in, state_out=out, **kw)
        return y, _to_kv(out[0], state_layout)

    zero_v = torch.zeros_like(v) if 0 < comm.rank < comm.world - 1 else None
    y, S = _context_parallel(comm, lambda S_in: call(v, S_in), lambda S_in: call(zero_v, S_in)[1], Hv, Dk, Dv,
                             q.device)
    if gather and comm.world > 1:
        y = comm.gather_rows(y[0], lengths)[None]
    return y, _to_kv(S, state_layout)[None]


def context_parallel_step(layer, qkv, z, alpha, beta, *, group=None, state=None, hist=None, state_layout="kv",
                          kernel=None, gather=True, stats=None):
    """GatedDeltaNetLayer.step over one prompt split across the ranks of `group`: this rank's segment's qkv [T_r, C],
    z [T_r, Hv, Dv], alpha, beta [T_r, Hv] (layer.project's tensors of its tokens; T_r >= 3 when there are several
    ranks), layer the same weights on every rank. state [Hv, ...] (state_layout's) and hist [C, 3]: the sequence's
    state and conv history before the prompt (a cache slot's), read on rank 0 only (None: a fresh prompt, zeros).
    Returns (y, state, hist): y the whole prompt's [T, Hv, Dv] in rank order (gather=False: this rank's
    [T_r, Hv, Dv]); the state [Hv, ...] and history [C, 3] after the prompt, on every rank."""
    comm = _Comm(group, stats, qkv.device)
    Hk, Hv, Dk, Dv, C = layer.num_k_heads, layer.num_v_heads, layer.head_k_dim, layer.head_v_dim, layer.conv_dim
    f32 = dict(dtype=torch.float32, device=qkv.device)
    pools = GatedDeltaNetCache(1, Hk, Hv, Dk, Dv, (layer.layer_idx,), qkv.dtype, qkv.device, "kv", kernel)
    pools.set_batch(slot=[0], fresh=[0])

    def check():  # libgdn.layer's checks of the segment (and of rank 0's state and hist), before any collective
        calls.check_layer(qkv, z, alpha, beta, layer.conv1d.weight.detach().reshape(C, 4).float(), None,
                          layer.dt_bias.detach().float(), None, layer.A_log.detach().float(),
                          layer.norm.weight.detach().float(), pools.states[layer.layer_idx],
                          pools.histories[layer.layer_idx], None, 2, 1, None, 1, None, capi.STATE_KV)
        want = (Hv, Dk, Dv) if state_layout == "kv" else (Hv, Dv, Dk)
        for name, x, shape, dtype in (("state", state, want, torch.float32), ("hist", hist, (C, 3), qkv.dtype)):
            if comm.rank == 0 and x is not None and (tuple(x.shape) != shape or x.dtype != dtype):
                raise ValueError("%s: expected a %s %s tensor (state_layout %r), got %s %s" % (
                    name, list(shape), str(dtype).replace("torch.", ""), state_layout, list(x.shape),
                    str(x.dtype).replace("torch.", "")))
        return [qkv.shape[0], C, Hv, Dv, _dtype_code(qkv.dtype)]

    lengths = comm.agree(check, 5, "[C, Hv, Dv, dtype] of qkv, z")
    if min(lengths) < (3 if comm.world > 1 else 1):
        raise ValueError("qkv: expected a segment of at least %d tokens on every rank (the conv history of the "
                         "next), got %s tokens" % (3 if comm.world > 1 else 1, lengths))
    if comm.rank == 0:
        hist_in = torch.zeros(C, 3, dtype=qkv.dtype, device=qkv.device) if hist is None else hist
        state_kv = torch.zeros(Hv, Dk, Dv, **f32) if state is None else _to_kv(state, state_layout)
    if comm.world > 1:  # segment r - 1's last three conv inputs: segment r's history
        tails = comm.all_gather("conv tails", qkv[-3:])
        if comm.rank > 0:
            hist_in = tails[comm.rank - 1].transpose(0, 1).contiguous()
    last = {}

    def run(qkv_, hist_, S_in):  # -> (y, S_out [Hv, Dk, Dv]); the history after the segment in last["hist"]
        pools.states[layer.layer_idx] = (state_kv if S_in is None else S_in).reshape(1, Hv, Dk, Dv).clone()
        pools.histories[layer.layer_idx] = hist_.reshape(1, C, 3).clone()
        y = layer.step(qkv_, z, alpha, beta, pools)
        last["hist"] = pools.histories[layer.layer_idx][0]
        return y, pools.states[layer.layer_idx][0]

    qkv0 = hist0 = None
    if 0 < comm.rank < comm.world - 1:  # v channels zero: the conv gives v = silu(0) = 0
        qkv0, hist0 = qkv.clone(), hist_in.clone()
        qkv0[:, 2 * Hk * Dk:], hist0[2 * Hk * Dk:] = 0, 0
    y, S = _context_parallel(comm, lambda S_in: run(qkv, hist_in, S_in), lambda S_in: run(qkv0, hist0, S_in)[1],
                             Hv, Dk, Dv, qkv.device)
    if comm.world == 1:
        h = last["hist"]
    else:  # the last rank's second run wrote the final history last
        h = last["hist"] if comm.rank == comm.world - 1 else torch.empty(C, 3, dtype=qkv.dtype, device=qkv.device)
        h = comm.broadcast("final history", h.contiguous(), comm.world - 1)
        if gather:
            y = comm.gather_rows(y, lengths)
    return y, _to_kv(S, state_layout), h


def context_parallel_forward(layer, hidden_states, *, group=None, state=None, hist=None, state_layout="kv",
                             kernel=None, gather=True, stats=None):
    """A GatedDeltaNetLayer's forward over one prompt split across the ranks: hidden_states [1, T_r, hidden], this
    rank's segment; layer.project, context_parallel_step (gather=False), layer.out_proj on the rank's tokens, then
    (gather) the outputs all_gathered. Returns (out [1, T, hidden] (gather=False: [1, T_r, hidden]), state, hist)."""
    comm = _Comm(group, stats, hidden_states.device)

    def check():
        if hidden_states.dim() != 3 or hidden_states.shape[0] != 1 or hidden_states.shape[2] != layer.hidden_size:
            raise ValueError("hidden_states: expected [1, T_r, hidden = %d] (one prompt's segment), got %s"
                             % (layer.hidden_size, list(hidden_states.shape)))
        return [hidden_states.shape[1]]

    lengths = comm.agree(check, 1, None)
    y, S, h = context_parallel_step(layer, *layer.project(hidden_states), group=group, state=state, hist=hist,
                                    state_layout=state_layout, kernel=kernel, gather=False, stats=stats)
    out = layer.out_proj(y.reshape(1, -1, layer.value_dim))
    if gather and comm.world > 1:
        out = comm.gather_rows(out[0], lengths)[None]
    return out, S, h
