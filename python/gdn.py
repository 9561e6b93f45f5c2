"""A thin ctypes binding of libgdn for the benchmarks: gdn_delta over raw pointers, kernels and their named variants.

Build the shared library first (`make shared`: build/pic/libgdn.so). Pointers are integers (host addresses, or
device addresses such as torch's tensor.data_ptr()); the stream is an integer cudaStream_t (0: default).
"""
import ctypes
import os

F32, F16, BF16 = 0, 1, 2
GATE_DECAY, GATE_LOG_DECAY, GATE_VECTOR, GATE_RAW = 0, 1, 2, 3
BETA_DIRECT, BETA_LOGIT = 0, 1
STATE_VK, STATE_KV = 0, 1
BACKEND_CPU, BACKEND_CUDA = 0, 1


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
