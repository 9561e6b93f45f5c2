"""gdn_delta and gdn_layer as PyTorch custom ops, torch.ops.libgdn.delta and torch.ops.libgdn.layer
(torch.library.custom_op), with fake implementations (y is allocated like v / z) and their mutated arguments
declared (delta: state_out; layer: state, hist_in, hist_out), so that torch.compile(fullgraph=True) traces through
them and CUDA graphs capture them. A CUDA call runs on the tensors' device, on torch's current stream (the capture
stream while capturing), and allocates nothing but y. The per-sequence arrays (cu_seqlens, slots, commits, fresh
flags, checkpoints) are host memory: CPU int32 (fresh: uint8) tensors, read when the op runs (a captured graph
keeps the values it was captured with). The one exception: delta's state_slot as a CUDA int32 tensor, with dense
[B, T] windows of at most 8 tokens (vLLM's ssm_state_indices in a decode graph), which the kernel reads when it runs,
so that a replay uses the slots written before it (gdn.h: state_slot_device).

delta() and layer() here take what calls.delta / calls.layer take, and numpy arrays go to those.
"""
import contextlib
from typing import Optional

import torch

from . import calls
from .arrays import is_cuda

Tensor = torch.Tensor


@contextlib.contextmanager
def _stream_of(x):
    """The CUDA stream to run on (torch's current one on x's device, made the current device), or None (CPU)."""
    if x.is_cuda:
        with torch.cuda.device(x.device):
            yield torch.cuda.current_stream().cuda_stream
    else:
        yield None


def host_tensor(name, values, dtype=torch.int32):
    """A per-sequence array as a contiguous CPU tensor of dtype (a CUDA tensor is copied: a synchronization)."""
    if isinstance(values, torch.Tensor):
        if values.dtype.is_floating_point or values.dtype.is_complex:
            raise TypeError("%s: expected integers, got dtype %s" % (name, str(values.dtype).replace("torch.", "")))
        return values.detach().to(device="cpu", dtype=dtype).contiguous().reshape(-1)
    return torch.tensor(list(values), dtype=dtype)


def _check_host(named):
    for name, x in named.items():
        if x is not None and is_cuda(x):
            raise ValueError("%s: expected a host (CPU) tensor, got %s" % (name, x.device))


# ---- gdn_delta ----

@torch.library.custom_op("libgdn::delta", mutates_args=("state_out",))
def delta_op(q: Tensor, k: Tensor, v: Tensor, gate: Tensor, beta: Tensor, A_log: Optional[Tensor],
             dt_bias: Optional[Tensor], mask: Optional[Tensor], state_in: Optional[Tensor], state_out: Optional[Tensor],
             cu_seqlens: Optional[Tensor], state_slot: Optional[Tensor], state_slot_device: Optional[Tensor],
             gate_kind: int, beta_kind: int, state_layout: int, scale: float, kernel: Optional[str],
             threads: int) -> Tensor:
    """gdn_delta: returns y [like v]; writes state_out (may be state_in: in place). See libgdn.delta."""
    _check_host(dict(cu_seqlens=cu_seqlens, state_slot=state_slot))
    if state_slot_device is not None:
        _check_device_slots(state_slot_device, q, cu_seqlens if cu_seqlens is not None else state_slot)
    n_slots = state_slot if state_slot is not None else state_slot_device
    sizes = calls.check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out,
                              None if cu_seqlens is None else cu_seqlens.shape[0],
                              None if n_slots is None else n_slots.shape[0], gate_kind, state_layout)
    y = torch.empty_like(v)
    with _stream_of(q) as stream:
        calls.call_delta(sizes, q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens,
                         state_slot, gate_kind, beta_kind, state_layout, scale, kernel, threads, stream,
                         state_slot_device)
    return y


@delta_op.register_fake
def _delta_fake(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, cu_seqlens, state_slot,
                state_slot_device, gate_kind, beta_kind, state_layout, scale, kernel, threads):
    return torch.empty_like(v)


def _check_device_slots(slot, q, host_batch):
    """Slots on the device (gdn.h's state_slot_device): a contiguous 1-D int32 tensor on q's CUDA device, with the
    dense [B, T] form (no cu_seqlens or host state_slot beside it)."""
    if host_batch is not None:
        raise ValueError("state_slot: slots on the device take the dense [B, T] form, not cu_seqlens")
    if not q.is_cuda or slot.device != q.device:
        raise ValueError("state_slot: a CUDA tensor of slots needs q, k, v on its device (%s), got %s"
                         % (slot.device, q.device))
    if slot.dtype != torch.int32 or slot.dim() != 1 or not slot.is_contiguous():
        raise TypeError("state_slot: expected a contiguous 1-D int32 tensor on the device, got %s %s"
                        % (str(slot.dtype).replace("torch.", ""), list(slot.shape)))


def delta(q, k, v, gate, beta, *, gate_kind="decay", beta_kind="direct", A_log=None, dt_bias=None, mask=None,
          state_in=None, state_out=None, state_layout="vk", scale=None, cu_seqlens=None, state_slot=None,
          kernel=None, threads=0):
    if not isinstance(q, torch.Tensor):
        return calls.delta(q, k, v, gate, beta, gate_kind=gate_kind, beta_kind=beta_kind, A_log=A_log, dt_bias=dt_bias,
                           mask=mask, state_in=state_in, state_out=state_out, state_layout=state_layout, scale=scale,
                           cu_seqlens=cu_seqlens, state_slot=state_slot, kernel=kernel, threads=threads)
    gk = calls.enum("gate_kind", calls.GATE_KINDS, gate_kind)
    bk = calls.enum("beta_kind", calls.BETA_KINDS, beta_kind)
    sl = calls.enum("state_layout", calls.STATE_LAYOUTS, state_layout)
    cu = None if cu_seqlens is None else host_tensor("cu_seqlens", cu_seqlens)
    slot = dev_slot = None
    if isinstance(state_slot, torch.Tensor) and state_slot.is_cuda and cu is None and q.is_cuda:
        # slots on the device, read by the kernel (CUDA graphs); other integer indices become int32 (small kernels)
        dev_slot = state_slot if state_slot.dtype == torch.int32 else _int32_slots(state_slot)
    elif state_slot is not None:
        slot = host_tensor("state_slot", state_slot)
    n_slots = slot if slot is not None else dev_slot
    sizes = calls.check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out,
                              None if cu is None else cu.shape[0], None if n_slots is None else n_slots.shape[0], gk, sl)
    return delta_op(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, cu, slot, dev_slot, gk, bk, sl,
                    calls.default_scale(scale, sizes["Dk"]), kernel, threads)


def _int32_slots(slot):
    if slot.dtype.is_floating_point or slot.dtype.is_complex or slot.dtype == torch.bool:
        raise TypeError("state_slot: expected integers, got dtype %s" % str(slot.dtype).replace("torch.", ""))
    # an index that int32 cannot hold is out of every pool: -1, skipped like any slot out of range (never wrapped)
    fits = (slot >= 0) & (slot <= torch.iinfo(torch.int32).max)
    return torch.where(fits, slot, -1).to(torch.int32).contiguous()


delta.__doc__ = calls.delta.__doc__


# ---- gdn_layer ----

@torch.library.custom_op("libgdn::layer", mutates_args=("state", "hist_in", "hist_out"))
def layer_op(qkv: Tensor, z: Tensor, alpha: Tensor, beta: Tensor, conv_w: Tensor, conv_bias: Optional[Tensor],
             dt_bias: Tensor, A: Optional[Tensor], A_log: Optional[Tensor], gamma: Tensor, state: Tensor,
             hist_in: Tensor, hist_out: Optional[Tensor], cu_seqlens: Tensor, slot: Optional[Tensor],
             commit: Optional[Tensor], fresh: Optional[Tensor], checkpoints: Optional[Tensor], eps_l2: float,
             eps_rms: float, scale: float, out_gate: int, state_layout: int, kernel: Optional[str],
             threads: int) -> Tensor:
    """gdn_layer: returns y [like z]; updates state and the history (hist_out, or hist_in in place). See
    libgdn.layer."""
    _check_host(dict(cu_seqlens=cu_seqlens, slot=slot, commit=commit, fresh=fresh, checkpoints=checkpoints))
    n = lambda x: None if x is None else x.shape[0]
    sizes = calls.check_layer(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in,
                              hist_out, cu_seqlens.shape[0], n(slot), n(commit), n(fresh), checkpoints, state_layout)
    y = torch.empty_like(z)
    with _stream_of(qkv) as stream:
        calls.call_layer(sizes, qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in,
                         hist_out, y, cu_seqlens, slot, commit, fresh, checkpoints, eps_l2, eps_rms, scale, out_gate,
                         state_layout, kernel, threads, stream)
    return y


@layer_op.register_fake
def _layer_fake(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out,
                cu_seqlens, slot, commit, fresh, checkpoints, eps_l2, eps_rms, scale, out_gate, state_layout, kernel,
                threads):
    return torch.empty_like(z)


def layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, *, A=None, A_log=None, conv_bias=None,
          hist_out=None, cu_seqlens=None, slot=None, commit=None, fresh=None, checkpoints=None, eps_l2=0.0,
          eps_rms=0.0, scale=0.0, out_gate="silu", state_layout="vk", kernel=None, threads=0):
    if not isinstance(qkv, torch.Tensor):
        return calls.layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, A=A, A_log=A_log,
                           conv_bias=conv_bias, hist_out=hist_out, cu_seqlens=cu_seqlens, slot=slot, commit=commit,
                           fresh=fresh, checkpoints=checkpoints, eps_l2=eps_l2, eps_rms=eps_rms, scale=scale,
                           out_gate=out_gate, state_layout=state_layout, kernel=kernel, threads=threads)
    og = calls.enum("out_gate", calls.OUT_GATES, out_gate)
    sl = calls.enum("state_layout", calls.STATE_LAYOUTS, state_layout)
    cu = host_tensor("cu_seqlens", [0, qkv.shape[0]] if cu_seqlens is None else cu_seqlens)
    opt = lambda name, x, dtype=torch.int32: None if x is None else host_tensor(name, x, dtype)
    sl_, cm, fr = opt("slot", slot), opt("commit", commit), opt("fresh", fresh, torch.uint8)
    cp = None
    if checkpoints is not None and len(checkpoints):
        cp = host_tensor("checkpoints", checkpoints if isinstance(checkpoints, torch.Tensor)
                         else [x for row in checkpoints for x in row])
        if cp.shape[0] % 3:
            raise ValueError("checkpoints: expected (seq, after, slot) triples, got %d numbers" % cp.shape[0])
        cp = cp.reshape(-1, 3)
    n = lambda x: None if x is None else x.shape[0]
    calls.check_layer(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out,
                      cu.shape[0], n(sl_), n(cm), n(fr), cp, sl)
    return layer_op(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, cu,
                    sl_, cm, fr, cp, float(eps_l2), float(eps_rms), float(scale), og, sl, kernel, threads)


layer.__doc__ = calls.layer.__doc__
