"""A torch module that stands in for transformers' Qwen3NextGatedDeltaNet, with its states in libgdn's pools.

GatedDeltaNetLayer has the module's parameters under the module's names (in_proj_qkvz, in_proj_ba, conv1d, dt_bias,
A_log, norm.weight, out_proj), so state dicts load either way; its forward runs the input projections in torch and
everything between them and out_proj (conv, norms, gates, recurrence, gated RMSNorm) as one libgdn.layer call.
GatedDeltaNetCache holds, per GDN layer, the state pool [slots, Hv, Dk, Dv] (float32; transformers' recurrent-state
layout) and the conv-history pool [slots, C, 3] (the activations' dtype; transformers' conv_state[..., 1:]), and
what the next forward does with them: each sequence's slot, fresh flag and commit count.
Inference only: no backward.
"""
import math

import torch
from torch import nn

from .torch_ops import layer


class GatedDeltaNetCache:
    """libgdn's pools for the GDN layers `layers` of a model, `slots` sequences each, and the batch of the next
    forward (set_batch): all of a model step's layers read the same slot, fresh and commit arrays. kernel: the
    layer kernel their calls name (libgdn.layer's; None: routed; "fastest": long prompts on CUDA through the chunked
    prefill, under its contract, docs/CONTRACT.md section 8)."""

    def __init__(self, slots, num_k_heads, num_v_heads, head_k_dim, head_v_dim, layers=(0,), dtype=torch.float32,
                 device="cpu", state_layout="kv", kernel=None):
        C = 2 * num_k_heads * head_k_dim + num_v_heads * head_v_dim
        per_head = (head_k_dim, head_v_dim) if state_layout == "kv" else (head_v_dim, head_k_dim)
        self.state_layout, self.kernel = state_layout, kernel
        self.states = {i: torch.zeros((slots, num_v_heads) + per_head, dtype=torch.float32, device=device)
                       for i in layers}
        self.histories = {i: torch.zeros(slots, C, 3, dtype=dtype, device=device) for i in layers}
        self.set_batch()

    @classmethod
    def from_config(cls, config, slots, dtype=torch.float32, device="cpu", state_layout="kv", kernel=None):
        """Pools for the config's linear-attention layers (config.layer_types), as Qwen3NextConfig names them."""
        types = getattr(config, "layer_types", None) or ["linear_attention"] * config.num_hidden_layers
        layers = [i for i, t in enumerate(types) if t == "linear_attention"]
        return cls(slots, config.linear_num_key_heads, config.linear_num_value_heads, config.linear_key_head_dim,
                   config.linear_value_head_dim, layers, dtype, device, state_layout, kernel)

    def set_batch(self, slot=None, fresh=None, commit=None, checkpoints=None):
        """The next forwards' sequences (libgdn.layer's arrays): slot [B] (None: 0 .. B-1; negative: skipped), fresh
        [B] (nonzero: a new prompt, the slot's contents not read), commit [B] (None: every token; k: keep the state
        after k tokens; 0: verify), checkpoints ((seq, after, slot) triples)."""
        self.slot, self.fresh, self.commit, self.checkpoints = slot, fresh, commit, checkpoints


class GatedRMSNorm(nn.Module):
    """The gated RMSNorm's parameters under transformers' names: y = o rsqrt(mean o^2 + eps) weight silu(z)
    (weight itself, not 1 + weight); libgdn.layer applies it."""

    def __init__(self, size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.variance_epsilon = eps


class GatedDeltaNetLayer(nn.Module):
    """transformers' Qwen3NextGatedDeltaNet on libgdn: the same parameters, forward(hidden_states, cache) with the
    states in a GatedDeltaNetCache. Shapes: hidden_states [B, T, hidden] (B sequences of T tokens) or [1, T, hidden]
    with cu_seqlens [B + 1] (varlen, packed); returns [same, hidden]."""

    def __init__(self, hidden_size, num_k_heads, num_v_heads, head_k_dim, head_v_dim, rms_norm_eps=1e-6,
                 layer_idx=0, conv_kernel_size=4, hidden_act="silu", dtype=None, device=None):
        super().__init__()
        if conv_kernel_size != 4 or hidden_act != "silu":
            raise ValueError("libgdn's layer is a width-4 conv with SiLU, got conv_kernel_size = %d, hidden_act = %r"
                             % (conv_kernel_size, hidden_act))
        if num_v_heads % num_k_heads:
            raise ValueError("num_v_heads: expected a multiple of num_k_heads = %d, got %d"
                             % (num_k_heads, num_v_heads))
        f = dict(dtype=dtype, device=device)
        self.hidden_size, self.layer_idx = hidden_size, layer_idx
        self.num_k_heads, self.num_v_heads = num_k_heads, num_v_heads
        self.head_k_dim, self.head_v_dim = head_k_dim, head_v_dim
        self.key_dim, self.value_dim = num_k_heads * head_k_dim, num_v_heads * head_v_dim
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.conv_kernel_size = conv_kernel_size
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel_size, groups=self.conv_dim, bias=False,
                                padding=conv_kernel_size - 1, **f)
        self.in_proj_qkvz = nn.Linear(hidden_size, 2 * self.key_dim + 2 * self.value_dim, bias=False, **f)
        self.in_proj_ba = nn.Linear(hidden_size, 2 * num_v_heads, bias=False, **f)
        self.dt_bias = nn.Parameter(torch.ones(num_v_heads, **f))
        self.A_log = nn.Parameter(torch.empty(num_v_heads, **f).uniform_(0.01, 16).log())
        self.norm = GatedRMSNorm(head_v_dim, rms_norm_eps).to(**{k: v for k, v in f.items() if v is not None})
        self.out_proj = nn.Linear(self.value_dim, hidden_size, bias=False, **f)

    @classmethod
    def from_config(cls, config, layer_idx=0, dtype=None, device=None):
        """From a transformers Qwen3NextConfig (or anything with its attribute names)."""
        return cls(config.hidden_size, config.linear_num_key_heads, config.linear_num_value_heads,
                   config.linear_key_head_dim, config.linear_value_head_dim, config.rms_norm_eps, layer_idx,
                   config.linear_conv_kernel_dim, config.hidden_act, dtype, device)

    @classmethod
    def from_module(cls, module):
        """A copy of a transformers Qwen3NextGatedDeltaNet: its sizes, dtype, device and weights."""
        w = module.in_proj_qkvz.weight
        out = cls(module.hidden_size, module.num_k_heads, module.num_v_heads, module.head_k_dim, module.head_v_dim,
                  module.layer_norm_epsilon, module.layer_idx, module.conv_kernel_size, module.activation,
                  w.dtype, w.device)
        out.load_state_dict(module.state_dict())
        return out

    def forward(self, hidden_states, cache=None, attention_mask=None, cu_seqlens=None, **kwargs):
        """hidden_states [B, T, hidden], or [1, T, hidden] with cu_seqlens; cache: a GatedDeltaNetCache (None: each
        sequence from a zero state, nothing kept), whose slot, fresh and commit arrays the call uses."""
        cache = cache if cache is not None else kwargs.pop("cache_params", None)
        if cache is not None and not isinstance(cache, GatedDeltaNetCache):
            raise TypeError("cache: expected a libgdn.GatedDeltaNetCache, got %s" % type(cache).__name__)
        if attention_mask is not None:
            raise ValueError("attention_mask: libgdn's layer takes varlen batches (cu_seqlens), not padding; "
                             "got a mask")
        B, T, _ = hidden_states.shape
        if cu_seqlens is None:
            cu_seqlens = [T * b for b in range(B + 1)]
        elif B != 1:
            raise ValueError("hidden_states: expected [1, T, hidden] with cu_seqlens, got %s"
                             % list(hidden_states.shape))
        y = self.step(*self.project(hidden_states), cache, cu_seqlens)
        return self.out_proj(y.reshape(B, T, self.value_dim))

    def project(self, hidden_states):
        """The input projections, as libgdn.layer takes them: (qkv [n, C], z [n, Hv, Dv], alpha [n, Hv],
        beta [n, Hv]) for the n = B T tokens of hidden_states [B, T, hidden], contiguous."""
        B, T, _ = hidden_states.shape
        n = B * T
        Hk, Hv, Dk, Dv = self.num_k_heads, self.num_v_heads, self.head_k_dim, self.head_v_dim
        r = Hv // Hk
        # transformers' projections are grouped per key head: [Hk, (q Dk, k Dk, v r Dv, z r Dv)] and [Hk, (b r, a r)]
        qkvz = self.in_proj_qkvz(hidden_states).reshape(n, Hk, 2 * Dk + 2 * r * Dv)
        q, k, v, z = torch.split(qkvz, [Dk, Dk, r * Dv, r * Dv], dim=-1)
        qkv = torch.cat([q.reshape(n, Hk * Dk), k.reshape(n, Hk * Dk), v.reshape(n, Hv * Dv)], dim=-1)  # [n, C]
        b, a = torch.split(self.in_proj_ba(hidden_states).reshape(n, Hk, 2 * r), [r, r], dim=-1)
        return (qkv.contiguous(), z.reshape(n, Hv, Dv).contiguous(), a.reshape(n, Hv).contiguous(),
                b.reshape(n, Hv).contiguous())

    def step(self, qkv, z, alpha, beta, cache=None, cu_seqlens=None):
        """The layer step between the projections (one libgdn.layer call) on project()'s tensors, over the cache's
        pools and batch (None: each sequence from zeros, nothing kept); cu_seqlens None: one sequence. Returns
        y [n, Hv, Dv]."""
        n = qkv.shape[0]
        Hv, Dk, Dv = self.num_v_heads, self.head_k_dim, self.head_v_dim
        cu_seqlens = [0, n] if cu_seqlens is None else cu_seqlens
        if cache is None:
            sequences = len(cu_seqlens) - 1
            layout, slot, fresh, commit, checkpoints, kernel = "kv", None, [1] * sequences, None, None, None
            state = torch.empty(sequences, Hv, Dk, Dv, dtype=torch.float32, device=qkv.device)
            hist = torch.empty(sequences, self.conv_dim, 3, dtype=qkv.dtype, device=qkv.device)
        else:
            layout, slot, fresh, commit, checkpoints, kernel = (cache.state_layout, cache.slot, cache.fresh,
                                                                cache.commit, cache.checkpoints, cache.kernel)
            state, hist = cache.states[self.layer_idx], cache.histories[self.layer_idx]
        return layer(qkv, z, alpha, beta, self.conv1d.weight.detach().reshape(self.conv_dim, 4).float(),
                     self.dt_bias.detach().float(), self.norm.weight.detach().float(), state, hist,
                     A_log=self.A_log.detach().float(), cu_seqlens=cu_seqlens, slot=slot, commit=commit, fresh=fresh,
                     checkpoints=checkpoints, eps_l2=1e-6, eps_rms=self.norm.variance_epsilon,
                     scale=1.0 / math.sqrt(Dk), state_layout=layout, kernel=kernel)


class TransformersGatedDeltaNet(nn.Module):
    """A GatedDeltaNetLayer (.gdn) in a transformers Qwen3-Next decoder layer's place of its linear_attn:
    forward(hidden_states, cache, attention_mask, **kwargs) as Qwen3NextGatedDeltaNet's, its states in the
    GatedDeltaNetCache `pools` (shared by the model's GDN layers: set its batch before each model forward). The
    model's own Cache (transformers') still holds the full-attention layers' keys and values; its linear-attention
    entries hold no states (the decoder layer passes that Cache as `cache`, or in 5.17 as `cache_params`, which
    lands in **kwargs), but from transformers 5.25 each counts its layer's tokens and the model's positions start at
    layer 0's count (Cache.get_seq_length()): each forward advances this layer's by the tokens the pools keep (T, or
    the batch's commit; one count for the batch, the largest). attention_mask: None or all ones (transformers'
    recurrent mask is None for an unpadded batch); padding is refused. trace: None, or a list that each forward
    appends (qkv, z, alpha, beta, y) to (the layer step's inputs and output, on their device)."""

    def __init__(self, gdn, pools):
        super().__init__()
        self.gdn, self.pools, self.trace = gdn, pools, None
        self.layer_idx = gdn.layer_idx

    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        if attention_mask is not None and not bool((attention_mask == 1).all()):
            raise ValueError("attention_mask: libgdn's layer takes varlen batches, not padding; got a padded mask")
        B, T, _ = hidden_states.shape
        args = self.gdn.project(hidden_states)
        y = self.gdn.step(*args, self.pools, [T * b for b in range(B + 1)])
        self._count(cache, T)
        if self.trace is not None:
            self.trace.append(args + (y,))
        return self.gdn.out_proj(y.reshape(B, T, self.gdn.value_dim))

    def _count(self, cache, T):
        """Advance transformers' token count of this layer (LinearAttentionLayer.cumulative_length_linear, 5.25 on;
        transformers' own module advances it in its conv step) by the tokens the pools kept of T each."""
        layers = getattr(cache, "layers", None)
        if layers is None or self.layer_idx >= len(layers):
            return
        count = getattr(layers[self.layer_idx], "cumulative_length_linear", None)
        if count is not None:
            commit = self.pools.commit
            count.add_(T if commit is None else max(int(c) for c in commit))


def use_libgdn(model, slots=1, state_layout="kv", kernel=None):
    """Put libgdn in place of every Qwen3NextGatedDeltaNet of a transformers model (a Qwen3NextForCausalLM or
    anything whose modules hold one as `linear_attn`): each becomes a TransformersGatedDeltaNet with the module's
    weights, dtype and device, all over one GatedDeltaNetCache of `slots` sequences, which is returned. In place.
    kernel="fastest": long prompts on CUDA through the chunked prefill (GatedDeltaNetCache)."""
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child).__name__ == "Qwen3NextGatedDeltaNet"]
    if not found:
        raise ValueError("model: expected Qwen3NextGatedDeltaNet modules, found none")
    first = found[0][2].in_proj_qkvz.weight
    pools = GatedDeltaNetCache.from_config(model.config, slots, dtype=first.dtype, device=first.device,
                                           state_layout=state_layout, kernel=kernel)
    for parent, name, child in found:
        setattr(parent, name, TransformersGatedDeltaNet(GatedDeltaNetLayer.from_module(child), pools))
    return pools
