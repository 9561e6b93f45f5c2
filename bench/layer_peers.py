#!/usr/bin/env python3
"""libgdn's fused layer step (gdn_layer) against the peers' unfused pipelines, on one GPU, in one process.

    python3 bench/layer_peers.py --out results.json [--quick] [--hv 32|48]      # CUDA (fla on PYTHONPATH)
        [--kinds decode,verify,prefill] [--layout vk|kv] [--no-f64] [--no-fla]
    python3 bench/layer_peers.py --device cpu --dry [--dtype f32] [--out dry.json]   # CPU wiring check, tiny shape

The same weights and inputs go to three implementations of one GDN layer step after the input projections (conv +
SiLU, q/k L2 norms, gates, the recurrence on each sequence's state, the gated RMSNorm), bf16 activations, f32
state, one slot (state and conv history) per sequence:

1. libgdn: gdn_layer routed, and each CUDA layer kernel by name (cuda_fused where eligible, cuda_staged); state
   pool [B, Hv, Dv, Dk] (GDN_STATE_VK, --layout kv for the other), history pool [B, C, 3] bf16, in place. Every
   point is run committing the whole window; verify points (n > 1) also with commit = 0 (nothing written).
2. transformers: Qwen3NextGatedDeltaNet.forward itself, its input projections replaced by modules that return the
   given projection outputs and its output projection by the identity, with a cache (a prefill: a fresh one; a
   decode or verify window: one holding the point's initial state and conv history). So its stages are those the
   installed version picks (printed: fla's chunk/fused_recurrent where fla imports, causal-conv1d where installed,
   else the torch fallbacks), with its own reordering of the projections, its cache writes and its norm. It has no
   verify mode: an n-token window with a cache runs the forward's cached multi-token path (transformers 5: the conv
   over the cached 4 columns + n, chunk_gated_delta_rule from the cached state, both caches overwritten).
3. fla chained by hand, as fla's own GatedDeltaNet layer chains its kernels: ShortConvolution (conv + SiLU over
   the mixed qkv, its cache [B, C, 4] updated in place for one token, a new final state for more),
   fused_recurrent_gated_delta_rule for decode and verify windows (fla's layer uses it up to 64 tokens) and
   chunk_gated_delta_rule for the prefill, with use_qk_l2norm_in_kernel, the gate (A_log, dt_bias) and the beta
   sigmoid in the kernel and state_v_first as fla's layer passes them, the per-sequence state as initial_state
   (fla 0.6.0's gated delta rule has no state indices), FusedRMSNormGated(silu). Three forms: `fla_chain` writes the
   final state and conv cache back into the pools (copy_, what libgdn's in-place pools give an engine),
   `fla_chain_swap` leaves them in fla's output tensors (an engine that swaps buffers), and at verify points
   `fla_chain_verify` asks for no final state (fla's nearest to commit = 0).

Timing (CUDA): bench/gpu_compare.py's time_calls: the median over replays of a CUDA graph of many calls, rotating
over enough input sets (each with its own pools or cache) that they do not sit in L2; the copy bandwidth is measured
in the same run (gpu_compare.copy_bandwidth_tbps), and each point reports its state+history traffic floor (pools
read and, committing, written) at that bandwidth. Under a graph no Python runs, so the peers' figures are their
kernels' (and launch gaps'), not their Python.

Agreement, per point and implementation, of one call from the same initial pools: max abs and normwise relative
difference (||a - b|| / ||b||) of y and of the final state against libgdn (routed, committing), the conv history
against libgdn's (equal: it is a copy of inputs), and of y and the state against a float64 torch reference of the
layer on the CPU (--no-f64 skips it).

--device cpu --dry: a tiny shape (Hk 2, Hv 4 or 6, D 32) through libgdn's CPU kernels, transformers' torch
fallbacks (fla hidden from transformers: its kernels need a GPU) and the fla chain on torch stand-ins with fla's
calling conventions (FlaStandIn), with wall-clock timing, to check the wiring, shapes and layouts; fla's own API is
import- and signature-checked if it imports. --dtype f32 tightens the check (every difference at f32 rounding).
"""
import argparse
import inspect
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
from libgdn import capi as gdn  # noqa: E402
import hf_qwen3next  # noqa: E402

EPS = 1e-6  # the module's rms_norm_eps; also the l2norm's (fla and transformers add 1e-6 under the root)


# ---------------------------------------------------------------- the float64 reference (CPU)

def ref64(torch, qkv, z, a, b, S0, H3, w, Hk, Hv, D):
    """One layer step in float64 on the CPU: qkv [B, n, C], z [B, n, Hv, D], a/b [B, n, Hv], S0 [B, Hv, Dk, Dv]
    (KV), H3 [B, C, 3] (oldest first). Returns y [B*n, Hv*D], the state (KV) and the history [B, C, 3]."""
    f = lambda t: t.detach().to("cpu", torch.float64)
    qkv, z, a, b, S, H3 = f(qkv), f(z), f(a), f(b), f(S0).clone(), f(H3)
    cw, dt, A_log, gamma = (f(w[k]) for k in ("conv_w", "dt_bias", "A_log", "gamma"))
    B, n, C = qkv.shape
    x = torch.cat([H3, qkv.transpose(1, 2)], dim=2)  # [B, C, 3 + n]
    conv = sum(cw[None, :, j, None] * x[:, :, j:j + n] for j in range(4))
    conv = conv * torch.sigmoid(conv)
    conv = conv.transpose(1, 2)  # [B, n, C]
    KD = Hk * D
    q = conv[..., :KD].reshape(B, n, Hk, D)
    k = conv[..., KD:2 * KD].reshape(B, n, Hk, D)
    v = conv[..., 2 * KD:].reshape(B, n, Hv, D)
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + EPS) * D ** -0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + EPS)
    r = Hv // Hk
    q, k = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)
    g = torch.exp(-torch.exp(A_log) * torch.nn.functional.softplus(a + dt))  # [B, n, Hv]
    beta = torch.sigmoid(b)
    o = torch.empty(B, n, Hv, D, dtype=torch.float64)
    for t in range(n):
        S = S * g[:, t, :, None, None]
        kt = k[:, t]
        kv = torch.einsum("bhi,bhij->bhj", kt, S)
        d = (v[:, t] - kv) * beta[:, t, :, None]
        S = S + kt[..., :, None] * d[..., None, :]
        o[:, t] = torch.einsum("bhi,bhij->bhj", q[:, t], S)
    y = o * torch.rsqrt((o * o).mean(-1, keepdim=True) + EPS) * gamma * (z * torch.sigmoid(z))
    return y.reshape(B * n, Hv * D), S, x[:, :, -3:]


# ---------------------------------------------------------------- the implementations
# Each has setup(sets) -> one callable per input set (its own pools or cache per set), reset(i, set) (the set's
# initial state and history into its pools), result(i) -> (y [T, Hv*Dv], final state KV [B, Hv, Dk, Dv], history
# [B, C, 3]) as f32 copies (the timing that follows keeps updating the pools in place), release().

def _copy(t):
    """A float32 copy that no later call can change (.float() of an f32 tensor is the tensor itself)."""
    f = t.float()
    return f.clone() if f.data_ptr() == t.data_ptr() else f


def layer_struct(e, s, state, hist, y, B, n, commit, fresh, kernel, state_dtype=None):
    """The LayerArgs of one gdn_layer call on set s's tensors (contiguous, on e's device): B windows of n tokens on
    slots 0 .. B - 1 of the pools; returns (args, keep), keep holding the host arrays while args is used."""
    import ctypes
    ints = lambda t, xs: (t * len(xs))(*xs)
    keep = dict(cu=ints(ctypes.c_int32, [i * n for i in range(B + 1)]), slot=ints(ctypes.c_int32, list(range(B))),
                commit=ints(ctypes.c_int32, commit), fresh=ints(ctypes.c_uint8, fresh),
                kernel=kernel.encode() if kernel else None)
    addr = ctypes.addressof
    args = gdn.layer_args(B=B, Hk=e.Hk, Hv=e.Hv, Dk=e.D, Dv=e.D, cu_seqlens=addr(keep["cu"]),
                          dtype=gdn.BF16 if e.act == e.torch.bfloat16 else gdn.F32,
                          qkv=s["qkv"].data_ptr(), z=s["z"].data_ptr(), alpha=s["a"].data_ptr(), beta=s["b"].data_ptr(),
                          y=y.data_ptr(), conv_w=e.w["conv_w"].data_ptr(), dt_bias=e.w["dt_bias"].data_ptr(),
                          A_log=e.w["A_log"].data_ptr(), gamma=e.w["gamma"].data_ptr(), eps_l2=EPS, eps_rms=EPS,
                          slots=B, state_layout=e.layout, state=state.data_ptr(), hist_in=hist.data_ptr(),
                          hist_out=hist.data_ptr(), slot=addr(keep["slot"]), commit=addr(keep["commit"]),
                          fresh=addr(keep["fresh"]), backend=gdn.BACKEND_CUDA if e.cuda else gdn.BACKEND_CPU,
                          kernel=keep["kernel"])
    if state_dtype is not None:
        args.state_dtype = state_dtype
    return args, keep


class Libgdn:
    """gdn_layer on per-set pools; kernel None = routed; commit "all" or 0."""

    def __init__(self, env, kernel, commit, bf16_pool=False):
        self.env, self.kernel, self.commit, self.bf16_pool = env, kernel, commit, bf16_pool
        self.name = "libgdn " + (kernel or "routed") + (" k=0" if commit == 0 else "") + (" bf16 pool" if bf16_pool
                                                                                           else "")

    def setup(self, sets):
        e, torch = self.env, self.env.torch
        p, B, n = e.point, e.point["B"], e.point["n"]
        T = B * n
        vk = e.layout == gdn.STATE_VK
        self.pools, self.keep = [], []
        for s in sets:
            state = torch.empty(B, e.Hv, e.D, e.D, dtype=torch.bfloat16 if self.bf16_pool else torch.float32,
                                device=e.dev)
            hist = torch.empty(B, e.C, 3, dtype=e.act, device=e.dev)
            y = torch.empty(T, e.Hv, e.D, dtype=e.act, device=e.dev)
            args, keep = layer_struct(e, s, state, hist, y, B, n, [n if self.commit == "all" else 0] * B,
                                      [1] * B if p["kind"] == "prefill" else [0] * B, self.kernel,
                                      gdn.BF16 if self.bf16_pool else None)
            self.pools.append((state, hist, y))
            self.keep.append((args, keep))
        self.routed = gdn.layer_route(e.lib, self.keep[0][0])
        vk_of = (lambda S: S.transpose(-1, -2)) if vk else (lambda S: S)
        self.to_kv = vk_of

        def make(i):
            args = self.keep[i][0]
            if e.cuda:
                def fn():
                    args.stream = torch.cuda.current_stream().cuda_stream
                    gdn.layer_call(e.lib, args)
            else:
                def fn():
                    gdn.layer_call(e.lib, args)
            return fn
        return [make(i) for i in range(len(sets))]

    def reset(self, i, s):
        state, hist, _ = self.pools[i]
        state.copy_(self.to_kv(s["S0"]))  # the transpose is its own inverse
        hist.copy_(s["H0"][..., 1:])

    def result(self, i):
        state, hist, y = self.pools[i]
        return _copy(y.view(y.shape[0], -1)), _copy(self.to_kv(state)), hist.clone()

    def release(self):
        self.pools = self.keep = None


class _Given:
    """A stand-in for an input projection: returns the tensor it was given (the projections are not timed)."""

    def __new__(cls, torch):
        class Given(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.out = None

            def forward(self, x):
                return self.out
        return Given()


class Transformers:
    """Qwen3NextGatedDeltaNet.forward with the given projection outputs, on a cache per set."""

    name = "transformers"

    def __init__(self, env):
        self.env = env
        torch, mod = env.torch, env.mod
        mod.in_proj_qkvz, mod.in_proj_ba, mod.out_proj = _Given(torch), _Given(torch), torch.nn.Identity()
        params = inspect.signature(type(mod).forward).parameters
        self.needs_position = "cache_position" in params
        try:
            src = inspect.getsource(inspect.unwrap(type(mod).forward))
        except (OSError, TypeError):
            src = ""
        # transformers 5 feeds a multi-token call with a cache through the cached conv state and recurrent state;
        # 4.x ran such a call as a fresh prefill (initial_state None), which no verify comparison can use
        self.multi_token_cached = "update_conv_state" in src

    def new_cache(self):
        e = self.env
        if hasattr(e.m, "Qwen3NextDynamicCache"):  # transformers 4.x
            return e.m.Qwen3NextDynamicCache(e.cfg)
        from transformers import DynamicCache
        return DynamicCache(config=e.cfg)

    @staticmethod
    def cache_tensors(cache):
        """(conv state [B, C, 4], recurrent state [B, Hv, Dk, Dv]) of the cache's one layer."""
        if hasattr(cache, "layers") and hasattr(cache.layers[0], "conv_states"):
            layer = cache.layers[0]
            return layer.conv_states[0], layer.recurrent_states[0]
        return cache.conv_states[0], cache.recurrent_states[0]

    def pack(self, s):
        """The module's projection outputs for set s: qkvz [B, n, Hk, 2 Dk + 2 r Dv] and ba [B, n, Hk, 2 r] grouped
        per key head, as fix_query_key_value_ordering splits them (value head h belongs to key head h // r)."""
        e, torch = self.env, self.env.torch
        B, n, r, D, KD = e.point["B"], e.point["n"], e.Hv // e.Hk, e.D, e.Hk * e.D
        qkv = s["qkv"]
        q = qkv[..., :KD].reshape(B, n, e.Hk, D)
        k = qkv[..., KD:2 * KD].reshape(B, n, e.Hk, D)
        v = qkv[..., 2 * KD:].reshape(B, n, e.Hk, r * D)
        z = s["z"].reshape(B, n, e.Hk, r * D)
        qkvz = torch.cat([q, k, v, z], dim=-1).reshape(B, n, -1).contiguous()
        ba = torch.cat([s["b"].reshape(B, n, e.Hk, r), s["a"].reshape(B, n, e.Hk, r)], dim=-1).reshape(B, n, -1)
        return qkvz, ba.contiguous()

    def forward(self, hidden, proj, cache, n):
        e, mod = self.env, self.env.mod
        mod.in_proj_qkvz.out, mod.in_proj_ba.out = proj
        kw = {}
        if self.needs_position:
            kw["cache_position"] = e.torch.arange(n, device=e.dev)
        return mod(hidden, cache, **kw)

    def setup(self, sets):
        e, torch = self.env, self.env.torch
        B, n, prefill = e.point["B"], e.point["n"], e.point["kind"] == "prefill"
        self.hidden = torch.zeros(B, n, e.cfg.hidden_size, dtype=e.act, device=e.dev)
        self.proj = [self.pack(s) for s in sets]
        self.caches, self.outs = [None] * len(sets), [None] * len(sets)
        if not prefill:  # a cache holding a previous state: the module's own prefill of 4 zero tokens, then overwritten
            warm_hidden = torch.zeros(B, 4, e.cfg.hidden_size, dtype=e.act, device=e.dev)
            zq, zb = self.proj[0]
            warm = (torch.zeros(B, 4, zq.shape[-1], dtype=zq.dtype, device=e.dev),
                    torch.zeros(B, 4, zb.shape[-1], dtype=zb.dtype, device=e.dev))
            for i in range(len(sets)):
                self.caches[i] = self.new_cache()
                self.forward(warm_hidden, warm, self.caches[i], 4)

        def make(i):
            if prefill:
                def fn():
                    self.caches[i] = self.new_cache()
                    self.outs[i] = self.forward(self.hidden, self.proj[i], self.caches[i], n)
            else:
                def fn():
                    self.outs[i] = self.forward(self.hidden, self.proj[i], self.caches[i], n)
            return fn
        return [make(i) for i in range(len(sets))]

    def reset(self, i, s):
        if self.caches[i] is not None:
            conv, rec = self.cache_tensors(self.caches[i])
            conv.copy_(s["H0"])
            rec.copy_(s["S0"])

    def result(self, i):
        conv, rec = self.cache_tensors(self.caches[i])
        y = self.outs[i]
        return _copy(y.reshape(-1, y.shape[-1])), _copy(rec), conv[..., 1:].clone()

    def release(self):
        self.caches = self.outs = self.proj = None


class FlaChain:
    """fla's conv, gated delta rule and gated norm chained by hand; mode "commit" (final states copied into the
    pools), "swap" (left in fla's outputs) or "verify" (no final states asked for)."""

    def __init__(self, env, fla, mode):
        self.env, self.fla, self.mode = env, fla, mode
        self.name = {"commit": "fla_chain", "swap": "fla_chain_swap", "verify": "fla_chain_verify"}[mode]

    def setup(self, sets):
        e, torch, fla = self.env, self.env.torch, self.fla
        B, n, prefill = e.point["B"], e.point["n"], e.point["kind"] == "prefill"
        KD, D, Hv, Hk = e.Hk * e.D, e.D, e.Hv, e.Hk
        conv = fla.ShortConvolution(e.C, 4, bias=False, activation="silu", backend="triton", device=e.dev,
                                    dtype=e.act)
        norm = fla.FusedRMSNormGated(D, eps=EPS, activation="silu", device=e.dev, dtype=e.act)
        with torch.no_grad():
            conv.weight.copy_(e.mod.conv1d.weight)
            norm.weight.copy_(e.mod.norm.weight)
        self.conv, self.norm = conv, norm
        vk = fla.state_v_first
        rule = fla.chunk if prefill else fla.fused_recurrent
        self.rule_name = "chunk_gated_delta_rule" if prefill else "fused_recurrent_gated_delta_rule"
        A_log, dt_bias = e.w["A_log"], e.w["dt_bias"]
        final = self.mode != "verify"
        self.pools, self.outs = [], [None] * len(sets)
        for s in sets:
            shape = (B, Hv, D, D)
            self.pools.append((torch.empty(shape, dtype=torch.float32, device=e.dev),
                               torch.empty(B, e.C, 4, dtype=e.act, device=e.dev)))
        self.to_kv = (lambda S: S.transpose(-1, -2)) if vk else (lambda S: S)

        def make(i):
            s, (state, cache) = sets[i], self.pools[i]

            def fn():
                x, c_out = conv(s["qkv"], cache=None if prefill else cache, output_final_state=final)
                q = x[..., :KD].view(B, n, Hk, D)
                k = x[..., KD:2 * KD].view(B, n, Hk, D)
                v = x[..., 2 * KD:].view(B, n, Hv, D)
                kw = dict(initial_state=None if prefill else state, output_final_state=final,
                          use_qk_l2norm_in_kernel=True)
                if fla.gate_in_kernel:
                    kw.update(g=s["a"], beta=s["b"], use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                              use_beta_sigmoid_in_kernel=True)
                else:  # the gates in torch, as transformers computes them
                    kw.update(g=-A_log.exp() * torch.nn.functional.softplus(s["a"].float() + dt_bias),
                              beta=s["b"].sigmoid())
                if vk:
                    kw["state_v_first"] = True
                o, ht = rule(q, k, v, **kw)
                if self.mode == "commit":
                    state.copy_(ht)
                    if c_out is not cache:
                        cache.copy_(c_out)
                y = norm(o.reshape(-1, D), s["z"].reshape(-1, D))
                self.outs[i] = (y, ht, c_out)
            return fn
        return [make(i) for i in range(len(sets))]

    def reset(self, i, s):
        state, cache = self.pools[i]
        state.copy_(self.to_kv(s["S0"]))
        cache.copy_(s["H0"])

    def result(self, i):
        y, ht, c_out = self.outs[i]
        state = None if ht is None else _copy(self.to_kv(ht))
        hist = None if c_out is None else c_out[..., 1:].clone()
        return _copy(y.reshape(self.env.point["B"] * self.env.point["n"], -1)), state, hist

    def release(self):
        self.pools = self.outs = self.conv = self.norm = None


# ---------------------------------------------------------------- fla: import and API check

class Fla:
    """fla 0.6.0's pieces this script calls, with the keywords checked against their signatures."""

    def __init__(self):
        import fla
        from fla.modules import FusedRMSNormGated, ShortConvolution
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        self.version = getattr(fla, "__version__", "?")
        self.file = fla.__file__
        self.chunk, self.fused_recurrent = chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        self.ShortConvolution, self.FusedRMSNormGated = ShortConvolution, FusedRMSNormGated
        fr = inspect.signature(fused_recurrent_gated_delta_rule).parameters
        ch = inspect.signature(chunk_gated_delta_rule).parameters
        need = ("initial_state", "output_final_state", "use_qk_l2norm_in_kernel")
        missing = [p for p in need if p not in fr or p not in ch]
        if missing:
            raise RuntimeError("fla's gated delta rule lacks %s" % missing)
        # fla 0.6.0: fused_recurrent names the in-kernel gate; chunk takes it through **kwargs (A_log, dt_bias)
        self.gate_in_kernel = all(p in fr for p in ("use_gate_in_kernel", "A_log", "dt_bias",
                                                    "use_beta_sigmoid_in_kernel")) and \
            "use_beta_sigmoid_in_kernel" in ch and "kwargs" in ch
        self.state_v_first = "state_v_first" in fr and "state_v_first" in ch
        self.state_indices = "ssm_state_indices" in fr
        conv_fwd = inspect.signature(ShortConvolution.forward).parameters
        if not all(p in conv_fwd for p in ("cache", "output_final_state")):
            raise RuntimeError("fla's ShortConvolution.forward lacks cache/output_final_state")
        norm_init = inspect.signature(FusedRMSNormGated.__init__).parameters
        if not all(p in norm_init for p in ("eps", "activation")):
            raise RuntimeError("fla's FusedRMSNormGated lacks eps/activation")

    def describe(self):
        return ("fla %s (%s): gate and beta sigmoid in the kernel %s, state_v_first %s, ssm_state_indices %s"
                % (self.version, os.path.dirname(self.file), self.gate_in_kernel, self.state_v_first,
                   self.state_indices))


class FlaStandIn:
    """For --dry on the CPU: torch stand-ins with the calling conventions of fla 0.6.0's pieces that FlaChain uses
    (ShortConvolution's cache [N, D, W] updated in place for one token and a new final state otherwise;
    the gated delta rule with the in-kernel gate and beta sigmoid, GVA and state_v_first; the gated RMSNorm), so
    that the chain's wiring (views, layouts, write-backs) runs somewhere. Written here, not fla's code; it checks
    this script, not fla."""

    version, file = "torch stand-in", __file__
    gate_in_kernel = state_v_first = True
    state_indices = False

    def __init__(self, torch):
        F = torch.nn.functional

        class ShortConvolution(torch.nn.Conv1d):
            def __init__(self, hidden_size, kernel_size, bias=False, activation="silu", backend="triton",
                         device=None, dtype=None):
                super().__init__(hidden_size, hidden_size, kernel_size, groups=hidden_size, bias=bias,
                                 padding=kernel_size - 1, device=device, dtype=dtype)

            def forward(self, x, cache=None, output_final_state=False):
                B, T, D = x.shape
                W = self.kernel_size[0]
                w = self.weight[:, 0, :].float()  # [D, W]
                prev = torch.zeros(B, D, W, dtype=x.dtype) if cache is None else cache
                full = torch.cat([prev[..., 1:], x.transpose(1, 2)], dim=2).float()  # W - 1 + T columns
                y = sum(w[None, :, j, None] * full[:, :, j:j + T] for j in range(W))
                y = F.silu(y).transpose(1, 2).to(x.dtype).contiguous()
                last = torch.cat([prev, x.transpose(1, 2)], dim=2)[..., -W:]
                if T == 1 and cache is not None:  # fla's step: the cache is updated in place
                    cache.copy_(last)
                    return y, cache if output_final_state else None
                return y, last.contiguous() if output_final_state else None

        class FusedRMSNormGated(torch.nn.Module):
            def __init__(self, hidden_size, eps=1e-5, activation="swish", device=None, dtype=None):
                super().__init__()
                self.eps = eps
                self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))

            def forward(self, x, g):
                xf = x.float()
                y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()
                return (y * F.silu(g.float())).to(x.dtype)

        def rule(q, k, v, g, beta, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False,
                 use_gate_in_kernel=False, A_log=None, dt_bias=None, use_beta_sigmoid_in_kernel=False,
                 state_v_first=False, scale=None):
            B, T, H, K = k.shape
            HV, V, odt = v.shape[2], v.shape[3], v.dtype
            q, k, v = (t.float() for t in (q, k, v))
            if use_qk_l2norm_in_kernel:
                q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
                k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
            q = q * (K ** -0.5 if scale is None else scale)
            q, k = q.repeat_interleave(HV // H, dim=2), k.repeat_interleave(HV // H, dim=2)
            g, beta = g.float(), beta.float()
            if use_gate_in_kernel:
                g = -A_log.float().exp() * F.softplus(g + (0 if dt_bias is None else dt_bias.float()))
            if use_beta_sigmoid_in_kernel:
                beta = beta.sigmoid()
            h = torch.zeros(B, HV, K, V) if initial_state is None else initial_state.float()
            if initial_state is not None and state_v_first:
                h = h.transpose(-1, -2)
            o = torch.empty(B, T, HV, V)
            for t in range(T):
                h = h * g[:, t].exp()[..., None, None]
                d = (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], h)) * beta[:, t, :, None]
                h = h + k[:, t, :, :, None] * d[:, :, None, :]
                o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], h)
            ht = None
            if output_final_state:
                ht = (h.transpose(-1, -2) if state_v_first else h).contiguous()
            return o.to(odt), ht

        self.ShortConvolution, self.FusedRMSNormGated = ShortConvolution, FusedRMSNormGated
        self.chunk = self.fused_recurrent = rule

    def describe(self):
        return "fla: the torch stand-in of --dry (FlaStandIn; checks this script's chain, not fla)"


# ---------------------------------------------------------------- timing

def cpu_time(fns, calls, replays):
    """Median, min, max seconds per call of fns in rotation, wall clock (the --device cpu mode)."""
    for f in fns:
        f()
    calls = max(calls, len(fns))
    times = []
    for _ in range(replays):
        t0 = time.perf_counter()
        for i in range(calls):
            fns[i % len(fns)]()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times), min(times), max(times), "wall clock"


def cpu_copy_tbps(torch):
    src = torch.empty(64 << 18, dtype=torch.float32).normal_()  # 64 MiB
    dst = torch.empty_like(src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return 2 * src.numel() * 4 / statistics.median(times) / 1e12


# ---------------------------------------------------------------- comparison

def diff(torch, mine, ref):
    """(max abs, normwise relative) of mine against ref, in float64 on ref's device (the float64 reference's: the
    CPU); None where either is missing."""
    if mine is None or ref is None:
        return None, None
    mine = mine.detach().to(ref.device, torch.float64)
    ref = ref.detach().to(torch.float64)
    d = mine - ref
    return d.abs().max().item(), (d.norm() / max(ref.norm().item(), 1e-300)).item()


# ---------------------------------------------------------------- main

class Env:
    pass


def points_for(opt):
    if opt.dry:
        return ([("decode", B, 1) for B in (1, 3)] + [("verify", B, n) for n in (2, 7) for B in (1, 2)]
                + [("prefill", 1, 67)])
    if opt.quick:
        return [("decode", B, 1) for B in (1, 256)] + [("verify", B, 7) for B in (1, 64)] + [("prefill", 1, 2048)]
    return ([("decode", B, 1) for B in (1, 8, 64, 256)] + [("verify", B, n) for n in (2, 4, 7, 8) for B in (1, 64)]
            + [("prefill", 1, 2048)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="JSON results (required on CUDA)")
    ap.add_argument("--quick", action="store_true", help="fewer points and replays (a smoke test)")
    ap.add_argument("--hv", type=int, default=32, choices=(32, 48), help="value heads (Hk = 16)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--dry", action="store_true", help="tiny shape (Hk 2, Hv 4 or 6, D 32); with --device cpu")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f32"),
                    help="activations, histories and the module's weights (f32: a tighter wiring check)")
    ap.add_argument("--layout", default="vk", choices=("vk", "kv"), help="libgdn's state pool layout")
    ap.add_argument("--lib", default=None, help="libgdn.so (default build/pic/libgdn.so)")
    ap.add_argument("--no-f64", action="store_true", help="skip the float64 CPU reference")
    ap.add_argument("--no-fla", action="store_true", help="skip the fla chain (transformers still uses fla if found)")
    ap.add_argument("--kinds", default="decode,verify,prefill", help="which points (a comma list)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16-pool", action="store_true", help="also libgdn routed on a bf16 state pool")
    opt = ap.parse_args()
    if opt.device == "cpu" and not opt.dry:
        ap.error("--device cpu needs --dry (the CPU mode is a wiring check on a tiny shape)")
    if opt.device == "cuda" and not opt.out:
        ap.error("--out is required on CUDA")

    e = Env()
    e.cuda = opt.device == "cuda"
    if not e.cuda:
        # transformers picks fla at import where fla imports; fla's kernels need a GPU, so hide it from
        # transformers here (torch fallbacks), then import it for the API check
        sys.modules["fla"] = None
    import torch
    e.torch = torch
    torch.set_grad_enabled(False)
    transformers, e.m, _ = hf_qwen3next.modeling()
    if not e.cuda:
        del sys.modules["fla"]
    fla = fla_error = None
    if not opt.no_fla:
        try:
            fla = Fla()
        except Exception as exc:  # not installed, or an API this script does not know
            fla_error = "%s: %s" % (type(exc).__name__, exc)
    e.lib = gdn.load(opt.lib)
    e.dev = torch.device(opt.device)
    if e.cuda:
        assert torch.cuda.is_available(), "no CUDA device for torch"
        assert e.lib.gdn_device_count(gdn.BACKEND_CUDA) > 0, "libgdn sees no CUDA device (a CPU-only build?)"
        import gpu_compare
        l2_bytes = gpu_compare.L2_BYTES
        calls, replays = (8, 5) if opt.quick else (24, 9)
        timer = lambda fns: gpu_compare.time_calls(fns, min_calls=calls, replays=replays)
        bw = gpu_compare.copy_bandwidth_tbps()
        import triton
        device_name, triton_version = torch.cuda.get_device_name(0), triton.__version__
    else:
        l2_bytes = 1 << 20
        timer = lambda fns: cpu_time(fns, 4, 3)
        bw = cpu_copy_tbps(torch)
        device_name, triton_version = "cpu", None

    e.Hk, e.Hv, e.D = (2, opt.hv // 8, 32) if opt.dry else (16, opt.hv, 128)
    e.C = 2 * e.Hk * e.D + e.Hv * e.D
    e.layout = gdn.STATE_VK if opt.layout == "vk" else gdn.STATE_KV
    torch.manual_seed(opt.seed)
    # the module in the activations' dtype (as a bf16 checkpoint loads): libgdn and the fla chain get the same
    # (bf16-valued) weights, in f32
    e.act = torch.bfloat16 if opt.dtype == "bf16" else torch.float32
    e.cfg, e.mod = hf_qwen3next.build_module(e.Hk, e.Hv, e.D, dtype=e.act, device=e.dev)
    e.w = hf_qwen3next.weights(e.mod)
    stages = hf_qwen3next.picked(e.m, e.mod)
    kernels_all = gdn.layer_kernels(e.lib)
    ours = [k for k in kernels_all if k.startswith("cuda_") == e.cuda]

    meta = dict(device=device_name, torch=torch.__version__, triton=triton_version,
                transformers=transformers.__version__, transformers_file=e.m.__file__, transformers_stages=stages,
                fla=fla.describe() if fla else None, fla_error=fla_error, Hk=e.Hk, Hv=e.Hv, D=e.D, C=e.C,
                dtype=opt.dtype, layout=opt.layout, copy_bandwidth_tbps=bw, libgdn_layer_kernels=kernels_all,
                date=time.strftime("%Y-%m-%d %H:%M:%S"),
                timing=("median of CUDA-graph replays (bench/gpu_compare.py time_calls), seconds per call, inputs "
                        "and pools rotated over sets > 4x L2" if e.cuda else "wall clock, CPU (dry run)"))
    print("device %s, torch %s, transformers %s, copy %.3f TB/s" % (device_name, torch.__version__,
                                                                    transformers.__version__, bw))
    print("shape Hk %d, Hv %d, Dk = Dv = %d, C = %d, %s activations, f32 state; libgdn state layout %s"
          % (e.Hk, e.Hv, e.D, e.C, opt.dtype, opt.layout))
    print("transformers' forward picked:")
    for k, v in stages.items():
        print("  %-12s %s" % (k, v))
    print(fla.describe() if fla else "fla: not used (%s)" % (fla_error or "--no-fla"))
    if not e.cuda and not opt.no_fla:
        if fla:
            print("  (import and signature check only: fla's kernels need a GPU)")
        fla = FlaStandIn(torch)  # the chain's wiring, on torch stand-ins
        meta["fla_chain"] = fla.describe()
        print(fla.describe())
    print("libgdn layer kernels: %s; timed here: routed, %s" % (", ".join(kernels_all), ", ".join(ours)))
    cached = Transformers(e).multi_token_cached
    meta["transformers_verify"] = (
        "the forward's cached multi-token path (conv over the cached columns + n, the chunked rule from the cached "
        "state; both caches overwritten: a commit of all n, it has no verify mode)" if cached else
        "WARNING: this version's forward runs a multi-token call with a cache as a fresh prefill (the cached state "
        "is not read): its verify rows do not compare")
    print("transformers at verify points: " + meta["transformers_verify"])

    gen = torch.Generator(device=e.dev)
    gen.manual_seed(1234 + opt.seed)
    results = []
    kinds = set(opt.kinds.split(","))
    for kind, B, n in [p for p in points_for(opt) if p[0] in kinds]:
        t_point = time.time()
        e.point = dict(kind=kind, B=B, n=n)
        T = B * n
        prefill = kind == "prefill"
        state_bytes = B * e.Hv * e.D * e.D * 4
        hist_bytes = B * e.C * 3 * 2
        in_bytes = T * (e.C + e.Hv * e.D + 2 * e.Hv) * 2
        set_bytes = state_bytes + hist_bytes + in_bytes + T * e.Hv * e.D * 2
        n_sets = 2 if not e.cuda else max(1, min(128, math.ceil(4 * l2_bytes / set_bytes)))

        def make_set():
            r = lambda *shape: torch.randn(*shape, device=e.dev, generator=gen)
            s = dict(qkv=r(B, n, e.C).to(e.act), z=r(B, n, e.Hv, e.D).to(e.act),
                     a=r(B, n, e.Hv).to(e.act), b=r(B, n, e.Hv).to(e.act))
            if prefill:  # a new prompt: zero state and history (libgdn: fresh)
                s["S0"] = torch.zeros(B, e.Hv, e.D, e.D, device=e.dev)
                s["H0"] = torch.zeros(B, e.C, 4, dtype=e.act, device=e.dev)
            else:
                s["S0"] = 0.1 * r(B, e.Hv, e.D, e.D)  # KV: [B, Hv, Dk, Dv]
                s["H0"] = r(B, e.C, 4).to(e.act)  # the module's 4 columns; libgdn keeps the last 3
            return s
        sets = [make_set() for _ in range(n_sets)]
        floor_commit = 2 * (state_bytes + hist_bytes)
        floor_read = state_bytes + hist_bytes
        pt = dict(kind=kind, B=B, n=n, T=T, sets=n_sets,
                  state_hist_floor_us=floor_commit / (bw * 1e12) * 1e6,
                  state_hist_read_floor_us=floor_read / (bw * 1e12) * 1e6,
                  io_floor_us=(floor_commit + in_bytes + T * e.Hv * e.D * 2) / (bw * 1e12) * 1e6,
                  state_hist_floor_bf16_pool_us=(state_bytes + 2 * hist_bytes) / (bw * 1e12) * 1e6, rows=[])
        print("\n%s B=%d n=%d (T=%d), %d input sets; state+history floor %.2f us (read+write at %.3f TB/s), "
              "%.2f us read only" % (kind, B, n, T, n_sets, pt["state_hist_floor_us"], bw,
                                     pt["state_hist_read_floor_us"]))

        impls = [Libgdn(e, None, "all")] + [Libgdn(e, k, "all") for k in ours]
        if kind == "verify":
            impls += [Libgdn(e, None, 0)] + [Libgdn(e, k, 0) for k in ours]
        if opt.bf16_pool:  # the state pool in bf16 (its floor: half the state's bytes)
            impls.append(Libgdn(e, None, "all", bf16_pool=True))
        impls.append(Transformers(e))
        if fla is not None:
            impls += [FlaChain(e, fla, "commit"), FlaChain(e, fla, "swap")]
            if kind == "verify":
                impls.append(FlaChain(e, fla, "verify"))

        ref = None
        if not opt.no_f64:
            s0 = sets[0]
            ref = ref64(torch, s0["qkv"], s0["z"], s0["a"], s0["b"], s0["S0"], s0["H0"][..., 1:], e.w, e.Hk, e.Hv,
                        e.D)
        base = None
        for impl in impls:
            row = dict(impl=impl.name)
            try:
                fns = impl.setup(sets)
                impl.reset(0, sets[0])
                fns[0]()
                if e.cuda:
                    torch.cuda.synchronize()
                y, S, H = impl.result(0)
            except Exception as exc:
                row["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                print("  %-26s skipped: %s" % (impl.name, row["error"]))
                impl.release()
                pt["rows"].append(row)
                continue
            if isinstance(impl, Libgdn):
                row["kernel_run"] = impl.routed if impl.kernel is None else impl.kernel
            if isinstance(impl, FlaChain):
                row["fla_rule"] = impl.rule_name
            if base is None:
                base = (y, S, H)
            row["y_abs"], row["y_rel"] = diff(torch, y, base[0])
            if isinstance(impl, Libgdn) and impl.commit == 0:
                # verify: y as the committing call's; the pools untouched
                row["y_bitwise_commit_all"] = bool(torch.equal(y, base[0]))
                row["pools_untouched"] = bool(torch.equal(S, sets[0]["S0"].float())
                                              and torch.equal(H, sets[0]["H0"][..., 1:]))
            else:
                row["state_abs"], row["state_rel"] = diff(torch, S, base[1])
                row["hist_equal"] = None if H is None else bool(torch.equal(H.to(base[2].dtype), base[2]))
            if ref is not None:
                row["y_rel_f64"] = diff(torch, y, ref[0])[1]
                if not (isinstance(impl, Libgdn) and impl.commit == 0):
                    row["state_rel_f64"] = diff(torch, S, ref[1])[1]
            for i in range(1, n_sets):
                impl.reset(i, sets[i])
            try:
                sec = timer(fns)
                row.update(median_us=sec[0] * 1e6, min_us=sec[1] * 1e6, max_us=sec[2] * 1e6, timing=sec[3])
            except Exception as exc:
                row["error"] = "timing: %s: %s" % (type(exc).__name__, exc)
            impl.release()
            del fns
            if e.cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            pt["rows"].append(row)
            print_row(pt, row)
        lib_us = next((r.get("median_us") for r in pt["rows"] if r["impl"] == "libgdn routed"), None)
        lib_v_us = next((r.get("median_us") for r in pt["rows"] if r["impl"] == "libgdn routed k=0"), None)
        for r in pt["rows"]:
            if r.get("median_us"):
                # a call that writes no pool (libgdn k=0, fla without final states) against the read-only floor
                reads_only = r["impl"].endswith("k=0") or r["impl"] == "fla_chain_verify"
                r["ratio_to_state_hist_floor"] = r["median_us"] / pt["state_hist_read_floor_us" if reads_only
                                                                     else "state_hist_floor_us"]
            if r.get("median_us") and lib_us:
                r["ratio_to_libgdn"] = r["median_us"] / lib_us
            if r.get("median_us") and lib_v_us:
                r["ratio_to_libgdn_verify"] = r["median_us"] / lib_v_us
        pt["wall_s"] = time.time() - t_point
        print("  (%.1f s)" % pt["wall_s"], flush=True)
        results.append(pt)
        if opt.out:  # after every point, so that a run cut short keeps what it measured
            with open(opt.out, "w") as f:
                json.dump(dict(meta=meta, points=results), f, indent=1)
        del sets
        if e.cuda:
            torch.cuda.empty_cache()

    summary(results, e.cuda)
    if opt.out:
        with open(opt.out, "w") as f:
            json.dump(dict(meta=meta, points=results), f, indent=1)
        print("wrote %s" % opt.out)
    # a sanity bound, not a contract: a layout or wiring error is O(1); bf16 pipelines differ by rounding, ~1e-2
    bound = 5e-2 if opt.dtype == "bf16" else 1e-4
    bad = [(p["kind"], p["B"], p["n"], r["impl"]) for p in results for r in p["rows"]
           if (r.get("y_rel") is not None and r["y_rel"] > bound) or r.get("pools_untouched") is False
           or r.get("y_bitwise_commit_all") is False or r.get("hist_equal") is False]
    print("agreement: %s" % ("every y within %g of libgdn's, histories equal, verify calls left the pools untouched"
                             % bound if not bad else "OUTSIDE for %s" % bad))
    return 1 if bad else 0


def fmt(v, f="%.2e"):
    return "-" if v is None else f % v


def print_row(pt, r):
    extra = ""
    if "pools_untouched" in r:
        extra = "y==commit-all %s, pools untouched %s" % (r["y_bitwise_commit_all"], r["pools_untouched"])
    else:
        extra = "state abs %s rel %s  hist %s" % (fmt(r.get("state_abs")), fmt(r.get("state_rel")),
                                                   {True: "equal", False: "DIFFERS", None: "-"}[r.get("hist_equal")])
    print("  %-26s %10s us  y abs %s rel %s  %s  f64: y %s state %s  [%s]" % (
        r["impl"] + (" (%s)" % r["kernel_run"] if r.get("kernel_run") and r["impl"] == "libgdn routed" else ""),
        fmt(r.get("median_us"), "%.2f"), fmt(r.get("y_abs")), fmt(r.get("y_rel")), extra, fmt(r.get("y_rel_f64")),
        fmt(r.get("state_rel_f64")), r.get("timing", "")), flush=True)


def summary(results, cuda):
    head = "%-8s %4s %2s | %-26s | %10s | %8s | %8s | %8s | %9s %9s | %9s %9s"
    print("\n" + head % ("point", "B", "n", "implementation", "us", "x libgdn", "x k=0", "x floor", "y rel",
                         "state rel", "y f64", "state f64"))
    for p in results:
        for r in p["rows"]:
            if "error" in r:
                print("%-8s %4d %2d | %-26s | %s" % (p["kind"], p["B"], p["n"], r["impl"], r["error"][:80]))
                continue
            print(head % (
                p["kind"], p["B"], p["n"], r["impl"], fmt(r.get("median_us"), "%.2f"),
                fmt(r.get("ratio_to_libgdn"), "%.2f"), fmt(r.get("ratio_to_libgdn_verify"), "%.2f"),
                fmt(r.get("ratio_to_state_hist_floor"), "%.2f"), fmt(r.get("y_rel")), fmt(r.get("state_rel")),
                fmt(r.get("y_rel_f64")), fmt(r.get("state_rel_f64"))))
    print("x libgdn: against libgdn routed committing the window; x k=0: against libgdn routed with commit = 0 "
          "(verify points); x floor: against the state+history traffic (read+write; read only for a call that "
          "writes no pool) at the measured copy bandwidth%s" % ("" if cuda else " (CPU: wall clock, a wiring check "
                                                                               "only)"))


if __name__ == "__main__":
    sys.exit(main())
