"""gdn_delta and gdn_layer as PyTorch custom ops, torch.ops.libgdn.delta and torch.ops.libgdn.layer
(torch.library.custom_op), with fake implementations and their mutated arguments declared (delta: state_out, y;
layer: state, hist_in, hist_out, planes, y), so that torch.compile(fullgraph=True) traces through them and CUDA
graphs capture them. The ops write y into a tensor they are given and return nothing: an op whose every mutated
argument may be None (delta without state_out) would not compile. A CUDA call runs on the tensors' device, on
torch's current stream (the capture stream while capturing), and allocates nothing. The per-sequence arrays
(cu_seqlens, slots, commits, fresh flags, checkpoints) are host memory: CPU tensors of an integer dtype (fresh: also
bool), read by value when the op runs (each value must fit int32; fresh 0 or 1), whatever their strides; a captured
graph keeps the values it was captured with. The one exception: delta's state_slot as a CUDA int32 tensor, with
dense [B, T] windows of at most 8 tokens (vLLM's ssm_state_indices in a decode graph), which the kernel reads when
it runs, so that a replay uses the slots written before it (gdn.h: state_slot_device; one out of range is skipped).
Every check runs inside the op, which is what torch.compile and CUDA graphs call.

delta() and layer() here take what calls.delta / calls.layer take, and numpy arrays go to those.
"""
import contextlib
from typing import Optional

import torch

from . import calls
from .arrays import check_host, check_kind, host_ints, is_numpy, list_ints

Tensor = torch.Tensor


@contextlib.contextmanager
def _stream_of(x):
    """The CUDA stream to run on (torch's current one on x's device, made the current device), or None (CPU)."""
    if x.is_cuda:
        with torch.cuda.device(x.device):
            yield torch.cuda.current_stream().cuda_stream
    else:
        yield None


def host_tensor(name, values, flags=False, rows=None):
    """A per-sequence array as a CPU tensor for the ops: a tensor's dtype and shape checked (its values are read when
    the op runs; a CUDA tensor is copied: a synchronization), a list's values checked now (int32; flags: 0 / 1)."""
    if isinstance(values, torch.Tensor):
        check_host(name, values, flags, rows)
        return values.detach().cpu()
    if is_numpy(values):
        return torch.from_numpy(host_ints(name, values, flags=flags, rows=rows))
    out = torch.tensor(list_ints(name, values, flags, rows), dtype=torch.uint8 if flags else torch.int32)
    return out.reshape(-1, rows) if rows is not None else out


def _host(named, fake=False):
    """In the op: each per-sequence tensor on the host, of an integer dtype and shape (check_host); then, unless fake,
    its values as the contiguous int32 / uint8 numpy array C reads (host_ints)."""
    out = []
    for name, (x, flags, rows) in named.items():
        if x is None:
            out.append(None)
            continue
        if x.device.type != "cpu":
            raise ValueError("%s: expected a host (CPU) tensor, got %s" % (name, x.device))
        check_host(name, x, flags, rows)
        out.append(x if fake else host_ints(name, x, flags=flags, rows=rows))
    return out


# ---- gdn_delta ----

@torch.library.custom_op("libgdn::delta", mutates_args=("state_out", "y"))
def delta_op(q: Tensor, k: Tensor, v: Tensor, gate: Tensor, beta: Tensor, A_log: Optional[Tensor],
             dt_bias: Optional[Tensor], mask: Optional[Tensor], state_in: Optional[Tensor], state_out: Optional[Tensor],
             y: Tensor, cu_seqlens: Optional[Tensor], state_slot: Optional[Tensor],
             state_slot_device: Optional[Tensor], gate_kind: int, beta_kind: int, state_layout: int, scale: float,
             kernel: Optional[str], threads: int) -> None:
    """gdn_delta: writes y [like v] and state_out (may be state_in: in place). See libgdn.delta."""
    sizes, cu, slot = _delta_checks(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens,
                                    state_slot, state_slot_device, gate_kind, state_layout)
    with _stream_of(q) as stream:
        calls.call_delta(sizes, q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu, slot,
                         gate_kind, beta_kind, state_layout, scale, kernel, threads, stream, state_slot_device)


@delta_op.register_fake
def _delta_fake(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens, state_slot,
                state_slot_device, gate_kind, beta_kind, state_layout, scale, kernel, threads):
    _delta_checks(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens, state_slot,
                  state_slot_device, gate_kind, state_layout, fake=True)


def _delta_checks(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens, state_slot,
                  state_slot_device, gate_kind, state_layout, fake=False):
    """The op's checks of its tensors (the fake one's: all but the host arrays' values): (sizes, cu, slot)."""
    cu, slot = _host(dict(cu_seqlens=(cu_seqlens, False, None), state_slot=(state_slot, False, None)), fake)
    if state_slot_device is not None:
        _check_device_slots(state_slot_device, q, cu_seqlens if cu_seqlens is not None else state_slot)
    n_slots = slot if slot is not None else state_slot_device
    sizes = calls.check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out,
                              None if cu is None else cu.shape[0], None if n_slots is None else n_slots.shape[0],
                              gate_kind, state_layout, y)
    return sizes, cu, slot


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
    calls.check_scalars(kernel, threads)
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
    check_kind("v", v)  # the op checks the rest, y's shape and dtype against v's too
    y = torch.empty_like(v)
    delta_op(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu, slot, dev_slot, gk, bk, sl,
             calls.default_scale(scale, q.shape[-1]), kernel, threads)
    return y


def _int32_slots(slot):
    if slot.dtype.is_floating_point or slot.dtype.is_complex or slot.dtype == torch.bool:
        raise TypeError("state_slot: expected integers, got dtype %s" % str(slot.dtype).replace("torch.", ""))
    # an index that int32 cannot hold is out of every pool: -1, skipped like any slot out of range (never wrapped)
    fits = (slot >= 0) & (slot <= torch.iinfo(torch.int32).max)
    return torch.where(fits, slot, -1).to(torch.int32).contiguous()


delta.__doc__ = calls.delta.__doc__


# ---- gdn_layer ----

@torch.library.custom_op("libgdn::layer", mutates_args=("state", "hist_in", "hist_out", "planes", "y"))
def layer_op(qkv: Tensor, z: Tensor, alpha: Tensor, beta: Tensor, conv_w: Tensor, conv_bias: Optional[Tensor],
             dt_bias: Tensor, A: Optional[Tensor], A_log: Optional[Tensor], gamma: Tensor, state: Tensor,
             hist_in: Tensor, hist_out: Optional[Tensor], planes: Optional[Tensor], y: Tensor, cu_seqlens: Tensor,
             slot: Optional[Tensor], commit: Optional[Tensor], fresh: Optional[Tensor], checkpoints: Optional[Tensor],
             eps_l2: float, eps_rms: float, scale: float, out_gate: int, state_layout: int, kernel: Optional[str],
             threads: int) -> None:
    """gdn_layer: writes y [like z] and planes (when given); updates state and the history (hist_out, or hist_in in
    place). See libgdn.layer."""
    sizes, cu, sl_, cm, fr, cp = _layer_checks(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma,
                                               state, hist_in, hist_out, planes, y, cu_seqlens, slot, commit, fresh,
                                               checkpoints, state_layout)
    with _stream_of(qkv) as stream:
        calls.call_layer(sizes, qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in,
                         hist_out, y, cu, sl_, cm, fr, cp, eps_l2, eps_rms, scale, out_gate, state_layout, kernel,
                         threads, stream, planes)


@layer_op.register_fake
def _layer_fake(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, planes,
                y, cu_seqlens, slot, commit, fresh, checkpoints, eps_l2, eps_rms, scale, out_gate, state_layout, kernel,
                threads):
    _layer_checks(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, planes,
                  y, cu_seqlens, slot, commit, fresh, checkpoints, state_layout, fake=True)


def _layer_checks(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, planes,
                  y, cu_seqlens, slot, commit, fresh, checkpoints, state_layout, fake=False):
    """The op's checks of its tensors (the fake one's: all but the host arrays' values): (sizes, the host arrays)."""
    named = dict(cu_seqlens=(cu_seqlens, False, None), slot=(slot, False, None), commit=(commit, False, None),
                 fresh=(fresh, True, None), checkpoints=(checkpoints, False, 3))
    cu, sl_, cm, fr, cp = _host(named, fake)
    cp = cp if cp is not None and cp.shape[0] else None
    n = lambda x: None if x is None else x.shape[0]
    sizes = calls.check_layer(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in,
                              hist_out, cu.shape[0], n(sl_), n(cm), n(fr), cp, state_layout, planes, y)
    return sizes, cu, sl_, cm, fr, cp


def layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, *, A=None, A_log=None, conv_bias=None,
          hist_out=None, cu_seqlens=None, slot=None, commit=None, fresh=None, checkpoints=None, eps_l2=0.0,
          eps_rms=0.0, scale=0.0, out_gate="silu", state_layout="vk", kernel=None, threads=0, planes=None):
    if not isinstance(qkv, torch.Tensor):
        return calls.layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, A=A, A_log=A_log,
                           conv_bias=conv_bias, hist_out=hist_out, cu_seqlens=cu_seqlens, slot=slot, commit=commit,
                           fresh=fresh, checkpoints=checkpoints, eps_l2=eps_l2, eps_rms=eps_rms, scale=scale,
                           out_gate=out_gate, state_layout=state_layout, kernel=kernel, threads=threads, planes=planes)
    calls.check_scalars(kernel, threads)
    og = calls.enum("out_gate", calls.OUT_GATES, out_gate)
    sl = calls.enum("state_layout", calls.STATE_LAYOUTS, state_layout)
    cu = host_tensor("cu_seqlens", [0, qkv.shape[0]] if cu_seqlens is None else cu_seqlens)
    opt = lambda name, x, flags=False: None if x is None else host_tensor(name, x, flags)
    sl_, cm, fr = opt("slot", slot), opt("commit", commit), opt("fresh", fresh, True)
    cp = None if checkpoints is None else host_tensor("checkpoints", checkpoints, rows=3)
    cp = cp if cp is not None and cp.shape[0] else None
    check_kind("z", z)  # the op checks the rest, y's shape and dtype against z's too
    y = torch.empty_like(z)
    layer_op(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, planes, y, cu,
             sl_, cm, fr, cp, float(eps_l2), float(eps_rms), float(scale), og, sl, kernel, threads)
    return y


layer.__doc__ = calls.layer.__doc__
