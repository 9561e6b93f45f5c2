"""A thin ctypes binding of libgdn: gdn_delta over raw pointers, kernels and their named variants (the benchmarks),
and the layer step gdn_layer (LayerArgs, layer()).

Build the shared library first (`make shared`: build/pic/libgdn.so). Pointers are integers (host addresses, or
device addresses such as torch's tensor.data_ptr()); the stream is an integer cudaStream_t (0: default).
No import beyond ctypes at load time: layer() takes torch tensors or numpy arrays, duck-typed. python/README.md
describes the layer binding and its checks (python/test_gdn_py.py, python/check_transformers.py).
"""
import ctypes
import os

F32, F16, BF16 = 0, 1, 2
GATE_DECAY, GATE_LOG_DECAY, GATE_VECTOR, GATE_RAW = 0, 1, 2, 3
BETA_DIRECT, BETA_LOGIT = 0, 1
STATE_VK, STATE_KV = 0, 1
BACKEND_CPU, BACKEND_CUDA = 0, 1
OUT_GATE_SILU, OUT_GATE_SIGMOID = 0, 1


class DeltaArgs(ctypes.Structure):
    """gdn_delta_args of include/gdn.h, field for field."""
    _fields_ = [
        ("B", ctypes.c_int64), ("T", ctypes.c_int64), ("Hk", ctypes.c_int64), ("Hv", ctypes.c_int64),
        ("Dk", ctypes.c_int64), ("Dv", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("gate_kind", ctypes.c_int), ("gate", ctypes.c_void_p), ("A_log", ctypes.c_void_p), ("dt_bias", ctypes.c_void_p),
        ("beta_kind", ctypes.c_int), ("beta", ctypes.c_void_p), ("mask", ctypes.c_void_p),
        ("state_layout", ctypes.c_int), ("state_in", ctypes.c_void_p), ("state_out", ctypes.c_void_p),
        ("scale", ctypes.c_float), ("backend", ctypes.c_int), ("stream", ctypes.c_void_p),
        ("kernel", ctypes.c_char_p), ("threads", ctypes.c_int), ("cpu_runner", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p), ("state_slot", ctypes.c_void_p), ("slots", ctypes.c_int64),
        ("reserved", ctypes.c_uint64 * 8),
    ]


class LayerCheckpoint(ctypes.Structure):
    """gdn_layer_checkpoint of include/gdn.h: sequence `seq`'s state and history after `after` tokens to `slot`."""
    _fields_ = [("seq", ctypes.c_int32), ("after", ctypes.c_int32), ("slot", ctypes.c_int32)]


class LayerArgs(ctypes.Structure):
    """gdn_layer_args of include/gdn.h, field for field (python/test_gdn_py.py checks sizeof and every offset
    against the C compiler's)."""
    _fields_ = [
        ("B", ctypes.c_int64), ("Hk", ctypes.c_int64), ("Hv", ctypes.c_int64), ("Dk", ctypes.c_int64),
        ("Dv", ctypes.c_int64),
        ("cu_seqlens", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("qkv", ctypes.c_void_p), ("z", ctypes.c_void_p), ("alpha", ctypes.c_void_p), ("beta", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("conv_w", ctypes.c_void_p), ("conv_bias", ctypes.c_void_p),
        ("dt_bias", ctypes.c_void_p), ("A", ctypes.c_void_p), ("A_log", ctypes.c_void_p), ("gamma", ctypes.c_void_p),
        ("eps_l2", ctypes.c_float), ("eps_rms", ctypes.c_float),
        ("scale", ctypes.c_float),
        ("out_gate", ctypes.c_int),
        ("slots", ctypes.c_int64),
        ("state_layout", ctypes.c_int),
        ("state", ctypes.c_void_p),
        ("hist_in", ctypes.c_void_p),
        ("hist_out", ctypes.c_void_p),
        ("slot", ctypes.c_void_p), ("commit", ctypes.c_void_p),
        ("fresh", ctypes.c_void_p),
        ("checkpoints", ctypes.c_void_p),
        ("n_checkpoints", ctypes.c_int64),
        ("backend", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("kernel", ctypes.c_char_p),
        ("threads", ctypes.c_int),
        ("cpu_runner", ctypes.c_void_p),
        ("planes", ctypes.c_void_p),
        ("reserved", ctypes.c_uint64 * 7),
    ]


def load(path=None):
    """Loads libgdn.so (default: build/pic/libgdn.so of this checkout) and declares its entry points."""
    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "pic", "libgdn.so")
    lib = ctypes.CDLL(path)
    lib.gdn_delta.argtypes = [ctypes.POINTER(DeltaArgs)]
    lib.gdn_delta.restype = ctypes.c_int
    lib.gdn_route.argtypes = [ctypes.POINTER(DeltaArgs), ctypes.POINTER(ctypes.c_char_p)]
    lib.gdn_route.restype = ctypes.c_int
    lib.gdn_last_error.restype = ctypes.c_char_p
    lib.gdn_status_str.argtypes = [ctypes.c_int]
    lib.gdn_status_str.restype = ctypes.c_char_p
    lib.gdn_device_count.argtypes = [ctypes.c_int]
    lib.gdn_device_count.restype = ctypes.c_int
    lib.gdn_layer.argtypes = [ctypes.POINTER(LayerArgs)]
    lib.gdn_layer.restype = ctypes.c_int
    lib.gdn_layer_route.argtypes = [ctypes.POINTER(LayerArgs), ctypes.POINTER(ctypes.c_char_p)]
    lib.gdn_layer_route.restype = ctypes.c_int
    lib.gdn_layer_kernel_count.argtypes = []
    lib.gdn_layer_kernel_count.restype = ctypes.c_int
    lib.gdn_layer_kernel_name.argtypes = [ctypes.c_int]
    lib.gdn_layer_kernel_name.restype = ctypes.c_char_p
    return lib


def args(**kw):
    """DeltaArgs from keyword fields; `kernel` may be a str."""
    a = DeltaArgs()
    for name, value in kw.items():
        if name == "kernel" and isinstance(value, str):
            value = value.encode()
        setattr(a, name, value)
    return a


def check(lib, status):
    if status != 0:
        raise RuntimeError("libgdn: %s (%s)" % (lib.gdn_status_str(status).decode(), lib.gdn_last_error().decode()))


def delta(lib, a):
    """gdn_delta(a); raises on a status other than GDN_OK."""
    check(lib, lib.gdn_delta(ctypes.byref(a)))


def run_variant(lib, a, kernel, variant=None):
    """Kernel `kernel` forced, at its named variant (gdn_kernel_variant_name; None: its routed form)."""
    saved = a.kernel
    a.kernel = (kernel if variant is None else "%s:%s" % (kernel, variant)).encode()
    try:
        check(lib, lib.gdn_delta(ctypes.byref(a)))
    finally:
        a.kernel = saved


def route(lib, a):
    name = ctypes.c_char_p()
    check(lib, lib.gdn_route(ctypes.byref(a), ctypes.byref(name)))
    return name.value.decode()


# ---- The layer step: gdn_layer ----

def layer_args(**kw):
    """LayerArgs from keyword fields; `kernel` may be a str."""
    a = LayerArgs()
    for name, value in kw.items():
        if name == "kernel" and isinstance(value, str):
            value = value.encode()
        setattr(a, name, value)
    return a


def layer_call(lib, a):
    """gdn_layer(a); raises on a status other than GDN_OK."""
    check(lib, lib.gdn_layer(ctypes.byref(a)))


def layer_route(lib, a):
    """The layer kernel gdn_layer would run for `a` (gdn_layer_route); raises where gdn_layer would fail."""
    name = ctypes.c_char_p()
    check(lib, lib.gdn_layer_route(ctypes.byref(a), ctypes.byref(name)))
    return name.value.decode()


def layer_kernels(lib):
    """The layer kernels' names, in routing order (gdn_layer_kernel_count / gdn_layer_kernel_name)."""
    return [lib.gdn_layer_kernel_name(i).decode() for i in range(lib.gdn_layer_kernel_count())]


_DTYPES = {"float32": F32, "float16": F16, "bfloat16": BF16}


class _Tensor:
    """What the layer helper needs of a torch tensor or a numpy array: address, dtype code, device, size."""

    def __init__(self, x, name):
        self.x, self.name = x, name
        if hasattr(x, "data_ptr"):  # torch.Tensor
            self.kind = "torch"
            self.ptr, self.numel, self.cuda = x.data_ptr(), x.numel(), bool(x.is_cuda)
            self.device = x.device
            dt = str(x.dtype).replace("torch.", "")
            contiguous = x.is_contiguous()
        elif hasattr(x, "__array_interface__"):  # numpy.ndarray (host memory)
            self.kind = "numpy"
            self.ptr, self.numel, self.cuda, self.device = x.__array_interface__["data"][0], x.size, False, None
            dt = x.dtype.name
            contiguous = x.flags.c_contiguous
        elif isinstance(x, ctypes.Array) and x._type_ is ctypes.c_float:  # a ctypes float array (host, f32)
            self.kind = "ctypes"
            self.ptr, self.numel, self.cuda, self.device = ctypes.addressof(x), len(x), False, None
            dt, contiguous = "float32", True
        else:
            raise TypeError("%s: a torch tensor, a numpy array or a ctypes c_float array, not %s"
                            % (name, type(x).__name__))
        if not contiguous:
            raise ValueError("%s: must be contiguous (row-major)" % name)
        if dt not in _DTYPES:
            raise TypeError("%s: dtype %s: libgdn takes float32, float16, bfloat16" % (name, dt))
        self.dtype = _DTYPES[dt]


def _host_array(ctype, values, name):
    """A ctypes array of `values` (a sequence, numpy array or CPU torch tensor), kept alive by the caller."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    values = [int(v) for v in values]
    return (ctype * max(len(values), 1))(*values)


def layer_struct(lib, qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, *, Hk, Hv, Dk, Dv,
                 cu_seqlens=None, A=None, A_log=None, conv_bias=None, hist_out=None, y=None, planes=None, slot=None,
                 commit=None, fresh=None, checkpoints=(), eps_l2=0.0, eps_rms=0.0, scale=0.0,
                 out_gate=OUT_GATE_SILU, state_layout=STATE_VK, kernel=None, threads=0, stream=None):
    """The LayerArgs of a layer() call, without calling: returns (args, keep, y), where `keep` holds the host
    arrays (cu_seqlens, slot, commit, fresh, checkpoints) and the tensors: keep it alive while `args` is used."""
    C = 2 * Hk * Dk + Hv * Dv
    t = {n: _Tensor(v, n) for n, v in (("qkv", qkv), ("z", z), ("alpha", alpha), ("beta", beta), ("conv_w", conv_w),
                                       ("dt_bias", dt_bias), ("gamma", gamma), ("state", state),
                                       ("hist_in", hist_in))}
    for n, v in (("A", A), ("A_log", A_log), ("conv_bias", conv_bias), ("hist_out", hist_out), ("planes", planes)):
        if v is not None:
            t[n] = _Tensor(v, n)
    if t["qkv"].numel % C:
        raise ValueError("qkv: %d elements, not a multiple of C = 2 Hk Dk + Hv Dv = %d" % (t["qkv"].numel, C))
    if cu_seqlens is None:
        cu_seqlens = [0, t["qkv"].numel // C]
    cu = _host_array(ctypes.c_int32, cu_seqlens, "cu_seqlens")
    B = len(cu) - 1
    if B < 1:
        raise ValueError("cu_seqlens: needs B + 1 >= 2 entries")
    T = cu[B]
    if y is None:
        if t["z"].kind == "torch":
            y = z.new_empty(z.shape)
        elif t["z"].kind == "numpy":
            y = __import__("numpy").empty_like(z)
        else:
            y = (ctypes.c_float * len(z))()
    t["y"] = _Tensor(y, "y")
    state_size = Hv * Dk * Dv
    if state_size < 1 or t["state"].numel % state_size:
        raise ValueError("state: %d elements, not a multiple of Hv Dk Dv = %d" % (t["state"].numel, state_size))
    slots = t["state"].numel // state_size
    sizes = {"qkv": T * C, "z": T * Hv * Dv, "alpha": T * Hv, "beta": T * Hv, "y": T * Hv * Dv, "conv_w": C * 4,
             "conv_bias": C, "dt_bias": Hv, "A": Hv, "A_log": Hv, "gamma": Dv, "hist_in": slots * C * 3,
             "hist_out": slots * C * 3, "planes": T * Hv * Dv // 16 * 49}
    for n, want in sizes.items():
        if n in t and t[n].numel != want:
            raise ValueError("%s: %d elements, want %d (T = %d, slots = %d)" % (n, t[n].numel, want, T, slots))
    act = t["qkv"].dtype
    for n in ("z", "alpha", "beta", "y", "hist_in", "hist_out"):
        if n in t and t[n].dtype != act:
            raise TypeError("%s: dtype differs from qkv's (every activation and the histories share one)" % n)
    for n in ("conv_w", "conv_bias", "dt_bias", "A", "A_log", "gamma", "state", "planes"):
        if n in t and t[n].dtype != F32:
            raise TypeError("%s: must be float32" % n)
    cuda = {v.cuda for v in t.values()}
    if len(cuda) != 1:
        raise ValueError("the tensors must all be host memory or all CUDA memory")
    cuda = cuda.pop()
    if cuda and stream is None and t["qkv"].kind == "torch":
        import torch
        stream = torch.cuda.current_stream(t["qkv"].device).cuda_stream
    keep = {"cu_seqlens": cu, "tensors": t}
    if slot is not None:
        keep["slot"] = _host_array(ctypes.c_int32, slot, "slot")
    if commit is not None:
        keep["commit"] = _host_array(ctypes.c_int32, commit, "commit")
    if fresh is not None:
        keep["fresh"] = _host_array(ctypes.c_uint8, fresh, "fresh")
    for n in ("slot", "commit", "fresh"):
        if n in keep and len(keep[n]) != B:
            raise ValueError("%s: %d entries, want B = %d" % (n, len(keep[n]), B))
    checkpoints = [tuple(c) for c in checkpoints]
    if checkpoints:
        keep["checkpoints"] = (LayerCheckpoint * len(checkpoints))(*[LayerCheckpoint(*c) for c in checkpoints])
    ptr = lambda n: t[n].ptr if n in t else None
    a = layer_args(B=B, Hk=Hk, Hv=Hv, Dk=Dk, Dv=Dv, cu_seqlens=ctypes.addressof(cu), dtype=act,
                   qkv=ptr("qkv"), z=ptr("z"), alpha=ptr("alpha"), beta=ptr("beta"), y=ptr("y"),
                   conv_w=ptr("conv_w"), conv_bias=ptr("conv_bias"), dt_bias=ptr("dt_bias"), A=ptr("A"),
                   A_log=ptr("A_log"), gamma=ptr("gamma"), eps_l2=eps_l2, eps_rms=eps_rms, scale=scale,
                   out_gate=out_gate, slots=slots, state_layout=state_layout, state=ptr("state"),
                   hist_in=ptr("hist_in"), hist_out=ptr("hist_out") if "hist_out" in t else ptr("hist_in"),
                   planes=ptr("planes"),
                   n_checkpoints=len(checkpoints), backend=BACKEND_CUDA if cuda else BACKEND_CPU,
                   stream=stream or None, threads=threads)
    for n in ("slot", "commit", "fresh", "checkpoints"):
        if n in keep:
            setattr(a, n, ctypes.addressof(keep[n]))
    if kernel is not None:
        keep["kernel"] = kernel.encode() if isinstance(kernel, str) else kernel
        a.kernel = keep["kernel"]
    return a, keep, y


def layer(lib, qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, **kw):
    """One gdn_layer call on torch tensors (CPU or CUDA), numpy arrays or ctypes c_float arrays; returns y (allocated like z if not given).

    Shapes (docs/API.md, "The layer step"; any shape with the right element count, contiguous): qkv [T, C] with
    C = 2 Hk Dk + Hv Dv; z, y [T, Hv, Dv]; alpha, beta [T, Hv]; conv_w [C, 4] f32; conv_bias [C] f32 or None;
    dt_bias and exactly one of A / A_log [Hv] f32; gamma [Dv] f32; state [slots, Hv, Dv, Dk] (state_layout=STATE_VK,
    the C default) or [slots, Hv, Dk, Dv] (STATE_KV) f32, updated in place; hist_in [slots, C, 3] (the activations'
    dtype), oldest first; hist_out None: in place; planes None, or
    f32 [49 T Hv Dv / 16] (docs/API.md, "Planes"). Keywords: Hk, Hv, Dk, Dv (required); cu_seqlens (default: one
    sequence of all T tokens), slot, commit, fresh (per-sequence lists or arrays, passed as ctypes host arrays),
    checkpoints ((seq, after, slot) triples), eps_l2, eps_rms, scale, out_gate, state_layout, kernel (a name of
    layer_kernels(lib)), threads, stream (CUDA; default: torch's current stream). The tensors' element counts,
    dtypes and devices are checked here; the rest is gdn_layer's (a RuntimeError with gdn_last_error()). A CUDA
    call runs on the current device (torch.cuda.device(...) picks it) and is asynchronous on the stream."""
    a, keep, y = layer_struct(lib, qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, **kw)
    layer_call(lib, a)
    del keep
    return y
