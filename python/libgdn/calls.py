"""gdn_delta and gdn_layer on arrays: the checks (kind, dtype, device, contiguity, shape; arrays.py), then the call
on the arrays' own memory. libgdn.delta and libgdn.layer for numpy arrays, and the bodies of the torch custom ops
(torch_ops.py). check_delta / check_layer read only shapes, dtypes and devices (they also run on fake tensors);
call_delta / call_layer check what needs the data (the host arrays' values, T against cu_seqlens, writeable
outputs, the kernel, threads and the floats as C's fields take them). The shapes and the math: docs/API.md; the C
library checks the rest (the order of cu_seqlens, slots against the pools, overlaps) and its refusals raise
ValueError with gdn_last_error(), which names the field.
"""
import math

from . import capi
from .arrays import (ACTIVATIONS, DTYPE_CODE, INT32, Shapes, check_contiguous, check_device, check_dtype,
                     check_float, check_int, check_kind, check_length, check_writable, device_name, dtype_name,
                     host_ints, is_cuda, pointer)

GATE_KINDS = {"decay": capi.GATE_DECAY, "log_decay": capi.GATE_LOG_DECAY, "vector": capi.GATE_VECTOR,
              "raw": capi.GATE_RAW}
BETA_KINDS = {"direct": capi.BETA_DIRECT, "logit": capi.BETA_LOGIT}
STATE_LAYOUTS = {"vk": capi.STATE_VK, "kv": capi.STATE_KV}
OUT_GATES = {"silu": capi.OUT_GATE_SILU, "sigmoid": capi.OUT_GATE_SIGMOID}


def enum(name, table, value):
    """The C code of an enum argument given by name ('kv') or by its code (capi.STATE_KV)."""
    if isinstance(value, str) and value in table:
        return table[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in table.values():
        return value
    raise ValueError("%s: expected one of %s, got %r" % (name, ", ".join(repr(k) for k in table), value))


def _inputs(named, first):
    """Kind, contiguity and device of each given array, against `first`'s device."""
    device = device_name(named[first])
    for name, x in named.items():
        if x is None:
            continue
        check_kind(name, x)
        check_device(name, x, device, first + "'s")
        check_contiguous(name, x)


def _f32(named):
    for name, x in named.items():
        if x is not None:
            check_dtype(name, x, ("float32",))


def _same_dtype(named, first):
    want = dtype_name(named[first])
    for name, x in named.items():
        if x is not None and name != first:
            check_dtype(name, x, (want,), " (%s's)" % first)


_KERNELS = {}  # "delta" / "layer": {kernel name: runs on CUDA}


def check_kernel(kernel, layer, device):
    """kernel: None, "fastest", or a kernel of the table (delta: "name" or "name:variant", the variant checked by C)
    of the tensors' device (check_scalars has checked its type)."""
    if kernel is None:
        return None
    if not _KERNELS:
        lib = capi.lib()
        _KERNELS["delta"] = {n: b == capi.BACKEND_CUDA for n, b, _ in capi.kernels(lib)}
        _KERNELS["layer"] = {n: n.startswith("cuda") for n in capi.layer_kernels(lib)}  # its CUDA kernels: cuda_*
    if kernel == "fastest":
        return kernel
    table, lister = (_KERNELS["layer"], "libgdn.layer_kernels()") if layer else (_KERNELS["delta"], "libgdn.kernels()")
    base = kernel if layer else kernel.split(":", 1)[0]
    if base not in table:
        raise ValueError("kernel: no kernel %r (%s lists them; or \"fastest\", or None: routed)" % (kernel, lister))
    if table[base] and not device.startswith("cuda"):
        raise ValueError("kernel: %r is a CUDA kernel, and the tensors are not on a CUDA device (they are on %s)"
                         % (kernel, device))
    if not table[base] and device.startswith("cuda"):
        raise ValueError("kernel: %r is a CPU kernel, and the tensors are on %s (%s lists the CUDA ones)"
                         % (kernel, device, lister))
    return kernel


def check_scalars(kernel, threads):
    """kernel's type (None or a str) and threads as C's int (0: all); plain Python, for the torch wrappers too."""
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError("kernel: expected a kernel's name (str) or None, got %s" % type(kernel).__name__)
    check_int("threads", threads, 0, INT32[1])
    return kernel


def check_tokens(cu, T, whose):
    """The batch form's tokens: cu_seqlens[B] must be T (C reads T = cu_seqlens[B] tokens of every [T, ...] tensor;
    its order, 0 then increasing, C checks)."""
    if int(cu[-1]) != T:
        raise ValueError("cu_seqlens: expected its last entry cu_seqlens[B] = T = %d (the tokens of %s), got %d"
                         % (T, whose, int(cu[-1])))


def check_call(kernel, threads, layer, device, outputs):
    """What a call needs beyond the tensors' shapes: the kernel's name, threads as C's int, writeable outputs."""
    check_scalars(kernel, threads)
    check_kernel(kernel, layer, device)
    for name, x in outputs.items():
        if x is not None:
            check_writable(name, x)


# ---- gdn_delta ----

def check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, n_seqlens, n_slots, gate_kind,
                state_layout, y=None):
    """The sizes of a gdn_delta call, {B, T, Hk, Hv, Dk, Dv, slots}, after every check that needs no data.
    n_seqlens / n_slots: the entries of cu_seqlens / state_slot, or None without them; y: the output [like v], or
    None before it is allocated.

    Shapes (lead = [B, T] dense; [T] or [1, T] with cu_seqlens, B = its entries - 1):
        q, k [lead, Hk, Dk]; v [lead, Hv, Dv]; gate [lead, Hv] ([lead, Hv, Dk] for the vector gate); beta [lead, Hv];
        mask [lead]; A_log, dt_bias [Hv] (raw gate only); state_in, state_out [B, Hv, Dv, Dk] (vk) or
        [B, Hv, Dk, Dv] (kv), with state_slot pools [slots, ...]."""
    named = dict(q=q, k=k, v=v, gate=gate, beta=beta, A_log=A_log, dt_bias=dt_bias, mask=mask, state_in=state_in,
                 state_out=state_out, y=y)
    _inputs(named, "q")
    check_dtype("q", q, ACTIVATIONS)
    _same_dtype(dict(q=q, k=k, v=v, y=y), "q")
    _f32(dict(gate=gate, beta=beta, A_log=A_log, dt_bias=dt_bias, state_in=state_in, state_out=state_out))
    if mask is not None:
        check_dtype("mask", mask, ("uint8", "bool"))
    sh = Shapes()
    if n_seqlens is None:
        lead = ("B", "T")
    else:
        if n_seqlens < 2:
            raise ValueError("cu_seqlens: expected B + 1 >= 2 entries, got %d" % n_seqlens)
        sh.bind("B", n_seqlens - 1, "B from cu_seqlens")
        lead = ("T",) if len(q.shape) == 3 else (1, "T")
    sh.check("q", q, lead + ("Hk", "Dk"))
    sh.check("k", k, lead + ("Hk", "Dk"))
    sh.check("v", v, lead + ("Hv", "Dv"))
    if y is not None:
        sh.check("y", y, lead + ("Hv", "Dv"))
    if sh.value["Hv"] % sh.value["Hk"]:
        raise ValueError("v: expected Hv a multiple of Hk = %d (from q), got Hv = %d"
                         % (sh.value["Hk"], sh.value["Hv"]))
    sh.check("gate", gate, lead + (("Hv", "Dk") if gate_kind == capi.GATE_VECTOR else ("Hv",)))
    sh.check("beta", beta, lead + ("Hv",))
    if mask is not None:
        sh.check("mask", mask, lead)
    for name, x in (("A_log", A_log), ("dt_bias", dt_bias)):
        if gate_kind == capi.GATE_RAW:
            if x is None:
                raise ValueError("%s: expected a [Hv] float32 tensor with gate_kind='raw', got None" % name)
            sh.check(name, x, ("Hv",))
        elif x is not None:
            raise ValueError("%s: read with gate_kind='raw' only, got a tensor with another gate" % name)
    rows = "B"
    if n_slots is not None:
        check_length("state_slot", n_slots, sh.value["B"], "B")
        if state_in is None and state_out is None:
            raise ValueError("state_slot: names slots of the pools state_in / state_out, got neither")
        rows = "slots"
    tail = ("Hv", "Dv", "Dk") if state_layout == capi.STATE_VK else ("Hv", "Dk", "Dv")
    for name, x in (("state_in", state_in), ("state_out", state_out)):
        if x is not None:
            sh.check(name, x, (rows,) + tail)
    sizes = {d: sh.value[d] for d in ("B", "T", "Hk", "Hv", "Dk", "Dv")}
    sizes["slots"] = sh.value["slots"] if n_slots is not None else 0
    return sizes


def call_delta(sizes, q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu_seqlens, state_slot,
               gate_kind, beta_kind, state_layout, scale, kernel, threads, stream=None, state_slot_device=None):
    """gdn_delta on checked arrays (check_delta's sizes); y [like v] is written. cu_seqlens, state_slot: host_ints'
    arrays or None; state_slot_device: a contiguous int32 CUDA tensor [B] or None."""
    if cu_seqlens is not None:
        check_tokens(cu_seqlens, sizes["T"], "q")
    check_call(kernel, threads, False, device_name(q), dict(state_out=state_out, y=y))
    scale = check_float("scale", scale)
    ptr = lambda name, x: None if x is None else pointer(name, x)
    a = capi.args(B=sizes["B"], T=sizes["T"], Hk=sizes["Hk"], Hv=sizes["Hv"], Dk=sizes["Dk"], Dv=sizes["Dv"],
                  dtype=DTYPE_CODE[dtype_name(q)], q=ptr("q", q), k=ptr("k", k), v=ptr("v", v), y=ptr("y", y),
                  gate_kind=gate_kind, gate=ptr("gate", gate), A_log=ptr("A_log", A_log),
                  dt_bias=ptr("dt_bias", dt_bias), beta_kind=beta_kind, beta=ptr("beta", beta),
                  mask=ptr("mask", mask), state_layout=state_layout, state_in=ptr("state_in", state_in),
                  state_out=ptr("state_out", state_out), scale=scale,
                  backend=capi.BACKEND_CUDA if is_cuda(q) else capi.BACKEND_CPU, stream=stream or None,
                  threads=threads, cu_seqlens=ptr("cu_seqlens", cu_seqlens), state_slot=ptr("state_slot", state_slot),
                  slots=sizes["slots"], state_slot_device=ptr("state_slot", state_slot_device))
    if kernel is not None:
        a.kernel = kernel.encode()
    capi.delta(capi.lib(), a)


def default_scale(scale, Dk):
    """None: 1 / sqrt(Dk), flash-linear-attention's default (C takes its scale literally)."""
    return 1.0 / math.sqrt(Dk) if scale is None else float(scale)


def delta(q, k, v, gate, beta, *, gate_kind="decay", beta_kind="direct", A_log=None, dt_bias=None, mask=None,
          state_in=None, state_out=None, state_layout="vk", scale=None, cu_seqlens=None, state_slot=None,
          kernel=None, threads=0):
    """The gated delta recurrence (gdn_delta) over numpy arrays or torch tensors; returns y [like v].

    Dense: q, k [B, T, Hk, Dk]; v [B, T, Hv, Dv] (Hv a multiple of Hk: value head h reads key head h / (Hv/Hk));
    gate [B, T, Hv] f32: the decay g (gate_kind "decay"), log g ("log_decay"), the raw a with A_log, dt_bias [Hv]
    ("raw": g = exp(-exp(A_log) softplus(a + dt_bias))), or [B, T, Hv, Dk] a decay per key row ("vector");
    beta [B, T, Hv] f32, as is ("direct") or through sigmoid ("logit"); mask [B, T] uint8/bool (0: padding, state
    kept, y = 0); q, k, v of one dtype: float32, float16 or bfloat16 (y too).
    Varlen (cu_seqlens [B + 1]: 0, then increasing, to T): tensors packed token-major, [T, ...] or [1, T, ...];
    cu_seqlens and state_slot are lists, arrays or tensors of integers, read by value on the host (each must fit
    int32). state_out must be writeable.
    State, f32: state_in (None: S = 0) and state_out (None: not written; may be state_in, in place), [B, Hv, Dv, Dk]
    for state_layout "vk" or [B, Hv, Dk, Dv] for "kv" (flash-linear-attention's, transformers'); with state_slot
    [B] (vLLM's ssm_state_indices: sequence b uses slot state_slot[b]; negative: skipped, its y rows 0) they are
    pools [slots, Hv, ...]. scale: the readout's (None: 1/sqrt(Dk)). kernel: a name of libgdn.kernels() to force
    one (kernel="ref": the contract in code). Per token: kv = S k, d = (v - g kv) beta, S = g S + k d, y = scale S q;
    every kernel returns the same bits.
    """
    import numpy as np
    gk, bk, sl = (enum("gate_kind", GATE_KINDS, gate_kind), enum("beta_kind", BETA_KINDS, beta_kind),
                  enum("state_layout", STATE_LAYOUTS, state_layout))
    cu = None if cu_seqlens is None else host_ints("cu_seqlens", cu_seqlens)
    slot = None if state_slot is None else host_ints("state_slot", state_slot)
    sizes = check_delta(q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out,
                        None if cu is None else cu.size, None if slot is None else slot.size, gk, sl)
    y = np.empty_like(v)
    call_delta(sizes, q, k, v, gate, beta, A_log, dt_bias, mask, state_in, state_out, y, cu, slot, gk, bk, sl,
               default_scale(scale, sizes["Dk"]), kernel, threads)
    return y


# ---- gdn_layer ----

def check_layer(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out,
                n_seqlens, n_slot, n_commit, n_fresh, checkpoints, state_layout, planes=None, y=None):
    """The sizes of a gdn_layer call, {B, T, C, Hk, Hv, Dk, Dv, slots}, after every check that needs no data.

    Shapes: qkv [T, C] with C = 2 Hk Dk + Hv Dv (q heads, k heads, v heads); z, y [T, Hv, Dv]; alpha, beta [T, Hv];
    conv_w [C, 4], conv_bias [C]; dt_bias, A or A_log [Hv]; gamma [Dv]; state [slots, Hv, Dv, Dk] (vk) or
    [slots, Hv, Dk, Dv] (kv); hist_in, hist_out [slots, C, 3]; slot, commit, fresh [B]; checkpoints [n, 3];
    planes: 49 T Hv Dv / 16 float32 elements, or None. y: None before it is allocated."""
    named = dict(qkv=qkv, z=z, alpha=alpha, beta=beta, conv_w=conv_w, conv_bias=conv_bias, dt_bias=dt_bias, A=A,
                 A_log=A_log, gamma=gamma, state=state, hist_in=hist_in, hist_out=hist_out, planes=planes, y=y)
    _inputs(named, "qkv")
    check_dtype("qkv", qkv, ACTIVATIONS)
    _same_dtype(dict(qkv=qkv, z=z, alpha=alpha, beta=beta, hist_in=hist_in, hist_out=hist_out, y=y), "qkv")
    _f32(dict(conv_w=conv_w, conv_bias=conv_bias, dt_bias=dt_bias, A=A, A_log=A_log, gamma=gamma, state=state,
              planes=planes))
    if (A is None) == (A_log is None):
        raise ValueError("A, A_log: expected exactly one of them, got %s" % ("both" if A is not None else "neither"))
    sh = Shapes()
    sh.check("z", z, ("T", "Hv", "Dv"))
    if y is not None:
        sh.check("y", y, ("T", "Hv", "Dv"))
    dk_at = 3 if state_layout == capi.STATE_VK else 2
    sh.check("state", state, ("slots", "Hv") + (("Dv", "Dk") if dk_at == 3 else ("Dk", "Dv")))
    sh.check("qkv", qkv, ("T", "C"))
    Hv, Dv, Dk, C = sh.value["Hv"], sh.value["Dv"], sh.value["Dk"], sh.value["C"]
    Hk = (C - Hv * Dv) // (2 * Dk)
    if Hk < 1 or 2 * Hk * Dk + Hv * Dv != C or Hv % Hk:
        raise ValueError("qkv: expected [T, C] with C = 2 Hk Dk + Hv Dv, Hv a multiple of Hk (Hv = %d, Dv = %d from "
                         "z, Dk = %d from state), got %s" % (Hv, Dv, Dk, list(qkv.shape)))
    for name, x, spec in (("alpha", alpha, ("T", "Hv")), ("beta", beta, ("T", "Hv")), ("conv_w", conv_w, ("C", 4)),
                          ("conv_bias", conv_bias, ("C",)), ("dt_bias", dt_bias, ("Hv",)), ("A", A, ("Hv",)),
                          ("A_log", A_log, ("Hv",)), ("gamma", gamma, ("Dv",)), ("hist_in", hist_in, ("slots", "C", 3)),
                          ("hist_out", hist_out, ("slots", "C", 3))):
        if x is not None:
            sh.check(name, x, spec)
    if n_seqlens < 2:
        raise ValueError("cu_seqlens: expected B + 1 >= 2 entries, got %d" % n_seqlens)
    B = n_seqlens - 1
    for name, n in (("slot", n_slot), ("commit", n_commit), ("fresh", n_fresh)):
        if n is not None:
            check_length(name, n, B, "B, from cu_seqlens")
    if checkpoints is not None and (len(checkpoints.shape) != 2 or checkpoints.shape[1] != 3):
        raise ValueError("checkpoints: expected [n, 3] (seq, after, slot) rows, got shape %s" % list(checkpoints.shape))
    T = sh.value["T"]
    if planes is not None:
        n = 1
        for d in planes.shape:
            n *= int(d)
        if n != 49 * T * Hv * Dv // 16:
            raise ValueError("planes: expected 49 T Hv Dv / 16 = %d float32 elements (T = %d, Hv = %d, Dv = %d), got "
                             "%d" % (49 * T * Hv * Dv // 16, T, Hv, Dv, n))
    return dict(B=B, T=T, C=C, Hk=Hk, Hv=Hv, Dk=Dk, Dv=Dv, slots=sh.value["slots"])


def call_layer(sizes, qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out,
               y, cu_seqlens, slot, commit, fresh, checkpoints, eps_l2, eps_rms, scale, out_gate, state_layout,
               kernel, threads, stream=None, planes=None):
    """gdn_layer on checked arrays (check_layer's sizes); y [like z] is written, state and the history pools in
    place, and planes (f32, 49 T Hv Dv / 16 elements) when given. cu_seqlens, slot, commit (int32), fresh (uint8),
    checkpoints (int32 [n, 3]): host_ints' arrays."""
    check_tokens(cu_seqlens, sizes["T"], "qkv")
    written = dict(state=state, hist_out=hist_out) if hist_out is not None else dict(state=state, hist_in=hist_in)
    check_call(kernel, threads, True, device_name(qkv), dict(written, planes=planes, y=y))
    eps_l2, eps_rms, scale = (check_float(n, x) for n, x in
                              (("eps_l2", eps_l2), ("eps_rms", eps_rms), ("scale", scale)))
    ptr = lambda name, x: None if x is None else pointer(name, x)
    a = capi.layer_args(B=sizes["B"], Hk=sizes["Hk"], Hv=sizes["Hv"], Dk=sizes["Dk"], Dv=sizes["Dv"],
                        cu_seqlens=ptr("cu_seqlens", cu_seqlens), dtype=DTYPE_CODE[dtype_name(qkv)],
                        qkv=ptr("qkv", qkv), z=ptr("z", z), alpha=ptr("alpha", alpha), beta=ptr("beta", beta),
                        y=ptr("y", y), conv_w=ptr("conv_w", conv_w), conv_bias=ptr("conv_bias", conv_bias),
                        dt_bias=ptr("dt_bias", dt_bias), A=ptr("A", A), A_log=ptr("A_log", A_log),
                        gamma=ptr("gamma", gamma), eps_l2=eps_l2, eps_rms=eps_rms, scale=scale, out_gate=out_gate,
                        slots=sizes["slots"], state_layout=state_layout, state=ptr("state", state),
                        hist_in=ptr("hist_in", hist_in),
                        hist_out=ptr("hist_out", hist_out) if hist_out is not None else ptr("hist_in", hist_in),
                        slot=ptr("slot", slot), commit=ptr("commit", commit), fresh=ptr("fresh", fresh),
                        checkpoints=ptr("checkpoints", checkpoints),
                        n_checkpoints=0 if checkpoints is None else int(checkpoints.shape[0]),
                        backend=capi.BACKEND_CUDA if is_cuda(qkv) else capi.BACKEND_CPU, stream=stream or None,
                        threads=threads, planes=ptr("planes", planes))
    if kernel is not None:
        a.kernel = kernel.encode()
    capi.layer_call(capi.lib(), a)


def layer_host_arrays(T, cu_seqlens, slot, commit, fresh, checkpoints):
    """The per-sequence arguments as host numpy arrays: cu_seqlens (None: one sequence of all T tokens), slot,
    commit (int32), fresh (uint8), checkpoints (int32 [n, 3]; an empty list: None)."""
    cu = host_ints("cu_seqlens", [0, T] if cu_seqlens is None else cu_seqlens)
    arrays = [cu] + [None if x is None else host_ints(n, x) for n, x in (("slot", slot), ("commit", commit))]
    arrays.append(None if fresh is None else host_ints("fresh", fresh, flags=True))
    cp = None if checkpoints is None else host_ints("checkpoints", checkpoints, rows=3)
    return arrays + [cp if cp is not None and cp.shape[0] else None]


def layer(qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, *, A=None, A_log=None, conv_bias=None,
          hist_out=None, cu_seqlens=None, slot=None, commit=None, fresh=None, checkpoints=None, eps_l2=0.0,
          eps_rms=0.0, scale=0.0, out_gate="silu", state_layout="vk", kernel=None, threads=0, planes=None):
    """One GDN layer step after the input projections (gdn_layer) over numpy arrays or torch tensors; returns y.

    qkv [T, C] (C = 2 Hk Dk + Hv Dv: q heads, k heads, v heads, before the conv); z, y [T, Hv, Dv]; alpha, beta
    [T, Hv] raw (g = exp(softplus(alpha + dt_bias) A), A = -exp(A_log); beta = sigmoid(beta)); all of one dtype
    (float32, float16, bfloat16), as are the histories. f32: conv_w [C, 4] (tap 3 on the current token), conv_bias
    [C] or None, dt_bias and exactly one of A / A_log [Hv], gamma [Dv]. Pools: state [slots, Hv, Dv, Dk]
    (state_layout "vk") or [slots, Hv, Dk, Dv] ("kv") f32, in place; hist_in [slots, C, 3] (the last three conv
    inputs, oldest first), in place unless hist_out (disjoint) is given. Per sequence (lists, arrays or tensors of
    integers, read by value on the host; each value must fit int32): cu_seqlens [B + 1] (0, then increasing, to
    T; None: one sequence of T tokens), slot [B] (None: slot b; negative: skipped), commit [B] (None: all tokens;
    k: the pools keep the state after k tokens, 0: verify), fresh [B] (0 or 1, or bool; 1: start from zeros, a new
    prompt); checkpoints: (seq, after, slot) triples or an [n, 3] array, the state and history after `after`
    tokens also written to `slot`. eps_l2, eps_rms: 0 = 1e-6; scale: 0 = 1/sqrt(Dk); out_gate "silu" (Qwen3-Next)
    or "sigmoid"; kernel: a name of libgdn.layer_kernels() ("ref": the contract in code). Every kernel returns the
    same bits. The math: docs/CONTRACT.md, "The layer step". planes: None, or a float32 array of 49 T Hv Dv / 16
    elements that receives y's planes for a packed-weight matvec (docs/API.md, "Planes"; Dv % 16 == 0). Outputs
    (the state pool, the history written, planes) must be writeable.
    """
    import numpy as np
    og, sl = enum("out_gate", OUT_GATES, out_gate), enum("state_layout", STATE_LAYOUTS, state_layout)
    check_kind("qkv", qkv)
    cu, sl_, cm, fr, cp = layer_host_arrays(qkv.shape[0], cu_seqlens, slot, commit, fresh, checkpoints)
    n = lambda x: None if x is None else x.shape[0]
    sizes = check_layer(qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out,
                        cu.shape[0], n(sl_), n(cm), n(fr), cp, sl, planes)
    y = np.empty_like(z)
    call_layer(sizes, qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, state, hist_in, hist_out, y,
               cu, sl_, cm, fr, cp, eps_l2, eps_rms, scale, og, sl, kernel, threads, planes=planes)
    return y
