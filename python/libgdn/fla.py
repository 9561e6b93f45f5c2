"""flash-linear-attention's gated delta rule entry points (fla 0.6.0's signatures) on libgdn, with vLLM's pool
convention (initial_state a pool, ssm_state_indices naming each sequence's slot, a negative index skipping it).

Both names run libgdn's one exact recurrence (libgdn.delta, torch.ops.libgdn.delta): the same bits whichever
kernel runs, on CPU and CUDA. What fla computes and libgdn cannot is refused, not approximated: gv, per-value beta,
allow_neg_eigval, context parallelism, head_first, vLLM's num_accepted_tokens.
"""
import torch

from .arrays import check_host
from .torch_ops import delta, host_tensor

_IGNORED = ("chunk_size", "chunk_indices")  # fla's chunked-kernel tuning: no meaning for a recurrence


def _l2norm(x):
    """fla's use_qk_l2norm_in_kernel, in float32: x / sqrt(sum x^2 + 1e-6) over the last dimension."""
    x = x.float()
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _gated_delta_rule(q, k, v, g, gk, gv, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                      use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                      state_v_first, cu_seqlens, cu_seqlens_cpu, inplace_final_state, ssm_state_indices,
                      num_accepted_tokens, kernel, kwargs):
    """(o [like v], final_state or None) of fla's gated delta rule through libgdn.delta."""
    if "transpose_state_layout" in kwargs:  # fla's deprecated name of state_v_first
        state_v_first = state_v_first or bool(kwargs.pop("transpose_state_layout"))
    if kwargs.pop("head_first", False):
        raise ValueError("head_first: libgdn takes [B, T, H, ...] inputs (fla 0.6.0 removed head_first)")
    if kwargs.pop("cp_context", None) is not None:
        raise NotImplementedError("cp_context: libgdn has no context parallelism")
    unknown = sorted(set(kwargs) - set(_IGNORED))
    if unknown:
        raise TypeError("unexpected keyword argument(s) %s" % ", ".join(unknown))
    if gv is not None:
        raise NotImplementedError("gv: libgdn has no per-value decay")
    if allow_neg_eigval:
        raise NotImplementedError("allow_neg_eigval: libgdn's beta is sigmoid(beta) or beta, not 2 sigmoid(beta)")
    if num_accepted_tokens is not None:
        raise NotImplementedError("num_accepted_tokens: use libgdn.layer's commit for speculative windows")
    if beta is None:
        raise ValueError("beta: expected a [B, T, HV] tensor, got None")
    if beta.dim() == 4:
        raise NotImplementedError("beta: libgdn takes a beta per head [B, T, HV], got a per-value beta %s"
                                  % list(beta.shape))
    if g is not None and gk is not None:
        raise NotImplementedError("g and gk: libgdn takes one gate, got both")
    B_, T_, HV = v.shape[0], v.shape[1], v.shape[2]
    kw = dict(beta_kind="logit" if use_beta_sigmoid_in_kernel else "direct", kernel=kernel)
    if use_gate_in_kernel:
        if g is None or A_log is None:
            raise ValueError("use_gate_in_kernel: expected the raw g and A_log [HV], got %s"
                             % ("no g" if g is None else "no A_log"))
        kw.update(gate_kind="raw", A_log=A_log.float().contiguous(),
                  dt_bias=(dt_bias.float().contiguous() if dt_bias is not None
                           else torch.zeros(HV, dtype=torch.float32, device=v.device)))
        gate = g.float().contiguous()
    elif gk is not None:  # log decays per key row: libgdn's vector gate takes the decays themselves
        kw.update(gate_kind="vector")
        gate = torch.exp(gk.float()).contiguous()
    elif g is not None:
        kw.update(gate_kind="log_decay")
        gate = g.float().contiguous()
    else:  # no gate: g = 1
        kw.update(gate_kind="decay")
        gate = torch.ones(B_, T_, HV, dtype=torch.float32, device=v.device)
    out_dtype = v.dtype
    if use_qk_l2norm_in_kernel:  # the norm in f32, then the recurrence in f32 (y rounded once, to v's dtype)
        q, k, v = _l2norm(q), _l2norm(k), v.float()
    beta = beta.float().contiguous()
    one_token_each = False  # vLLM's decode: packed [1, N, ...] with N sequences of one token each and slots on the device
    if cu_seqlens is not None:
        if q.shape[0] != 1:
            raise ValueError("q: expected batch size 1 with cu_seqlens (fla's packed varlen form), got %d"
                             % q.shape[0])
        one_token_each = (ssm_state_indices is not None and ssm_state_indices.is_cuda and ssm_state_indices.dim() == 1
                          and cu_seqlens.dim() == 1 and cu_seqlens.shape[0] == q.shape[1] + 1
                          and ssm_state_indices.shape[0] == q.shape[1])
        if one_token_each:  # N + 1 offsets over N tokens: each window is one token, known without reading them
            q, k, v, gate, beta = (x.transpose(0, 1) for x in (q, k, v, gate, beta))
            B_, T_ = q.shape[0], 1
        else:
            kw["cu_seqlens"] = host_tensor("cu_seqlens", cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens)
    layout = "vk" if state_v_first else "kv"
    final_state = None
    if ssm_state_indices is not None:  # vLLM: initial_state is the pool [slots, HV, ...], updated in place
        if initial_state is None:
            raise ValueError("initial_state: expected the state pool with ssm_state_indices, got None")
        if isinstance(ssm_state_indices, torch.Tensor) and ssm_state_indices.dim() == 2:
            raise NotImplementedError("ssm_state_indices: libgdn takes one slot per sequence [N], got shape %s"
                                      % list(ssm_state_indices.shape))
        final_state = initial_state if inplace_final_state is not False else initial_state.clone()
        if isinstance(ssm_state_indices, torch.Tensor):  # on the host, or read by the kernel (delta's choice)
            check_host("ssm_state_indices", ssm_state_indices)
        else:
            ssm_state_indices = host_tensor("ssm_state_indices", ssm_state_indices)
        kw.update(state_in=initial_state, state_out=final_state, state_slot=ssm_state_indices)
    else:
        if initial_state is not None:
            kw["state_in"] = initial_state if initial_state.dtype == torch.float32 else initial_state.float()
            kw["state_in"] = kw["state_in"].contiguous()
        if inplace_final_state:
            final_state = kw["state_out"] = initial_state
        elif output_final_state:
            N = B_ if "cu_seqlens" not in kw else kw["cu_seqlens"].shape[0] - 1
            K, V = q.shape[-1], v.shape[-1]
            shape = (N, HV, V, K) if state_v_first else (N, HV, K, V)
            final_state = kw["state_out"] = torch.empty(shape, dtype=torch.float32, device=v.device)
    o = delta(q, k, v, gate, beta, state_layout=layout, scale=None if scale is None else float(scale), **kw)
    if one_token_each:
        o = o.transpose(0, 1)
    return (o if o.dtype == out_dtype else o.to(out_dtype)), final_state


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False,
                                     use_gate_in_kernel=False, A_log=None, dt_bias=None,
                                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, *, inplace_final_state=None, ssm_state_indices=None,
                                     num_accepted_tokens=None, kernel=None, **kwargs):
    """fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule (fla 0.6.0's signature) on libgdn's recurrence.

    q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H); g [B, T, HV] the log decay (use_gate_in_kernel: the
    raw a, with A_log and dt_bias [HV]: g = -exp(A_log) softplus(a + dt_bias)); gk [B, T, HV, K] log decays per key
    row (exponentiated by torch, in float32, for libgdn's vector gate); beta [B, T, HV] (use_beta_sigmoid_in_kernel:
    logits); scale (None: K^-0.5); initial_state [N, HV, K, V] ([N, HV, V, K] with state_v_first), any float dtype
    (read as float32); output_final_state: also return the final state, float32. cu_seqlens [N + 1] with B = 1
    (read on the host: a CUDA tensor costs a synchronization). use_qk_l2norm_in_kernel: q and k are normalized by
    torch first, in float32, fla's formula x / sqrt(sum x^2 + 1e-6) (torch's arithmetic, outside libgdn's
    contract: torch.compile may fuse it into other bits), and the recurrence runs in float32 (o rounded once, to
    v's dtype). g and beta are read as float32 (a copy when they are not).

    vLLM's pools (keyword-only): ssm_state_indices [N] int, sequence n's state is initial_state[ssm_state_indices[n]]
    of the pool initial_state [slots, HV, K, V] (float32, contiguous), updated in place (inplace_final_state,
    default True with indices) and returned as final_state; a negative index (vLLM's PAD_SLOT_ID = -1) skips the
    sequence: its o rows are 0, no state is read or written. inplace_final_state=True without indices writes the
    final state into initial_state (float32, contiguous). kernel: force a libgdn kernel (libgdn.kernels()).

    Returns (o [B, T, HV, V] in v's dtype, final_state or None). Refused (NotImplementedError): gv, a per-value
    beta, allow_neg_eigval, num_accepted_tokens, 2-D ssm_state_indices.
    """
    return _gated_delta_rule(q, k, v, g, gk, gv, beta, scale, initial_state, output_final_state,
                             use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
                             allow_neg_eigval, state_v_first, cu_seqlens, None, inplace_final_state, ssm_state_indices,
                             num_accepted_tokens, kernel, kwargs)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, *, use_gate_in_kernel=False,
                           A_log=None, dt_bias=None, kernel=None, **kwargs):
    """fla.ops.gated_delta_rule.chunk_gated_delta_rule (fla 0.6.0's signature), running libgdn's exact recurrence.

    Not a chunked algorithm: libgdn runs the recurrence token by token (its CUDA and CPU kernels block the work, not
    the math), so this returns exactly the bits of fused_recurrent_gated_delta_rule on the same inputs, and of
    every libgdn kernel. Arguments as fused_recurrent_gated_delta_rule's (g is fla's log decay;
    use_gate_in_kernel, A_log and dt_bias as fla passes them); cu_seqlens_cpu, when given, is the host copy of
    cu_seqlens that libgdn reads (no synchronization). chunk_size and chunk_indices are accepted and have no effect.
    kernel="cuda_chunked" (or "fastest") runs libgdn's chunked algorithm on CUDA instead: its chunked contract
    (docs/CONTRACT.md §8: deterministic, batch- and split-invariant, within float64 tolerance; not the exact bits).
    Returns (o [B, T, HV, V], final_state [N, HV, K, V] float32 or None).
    """
    return _gated_delta_rule(q, k, v, g, None, None, beta, scale, initial_state, output_final_state,
                             use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
                             allow_neg_eigval, state_v_first, cu_seqlens, cu_seqlens_cpu, None, None, None, kernel,
                             kwargs)
