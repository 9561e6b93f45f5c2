"""The C API of include/gdn.h through ctypes: its enums, its structs field for field, the library's loading, and
thin calls over raw pointers (integers: host addresses, or device addresses such as torch's tensor.data_ptr()).

The checked, array-level calls are libgdn.delta and libgdn.layer; this layer is for benchmarks and tests that set
fields by hand (bench/gpu_compare.py forces kernel variants here). python/tests/test_capi.py checks sizeof and every
offset of the structs against the C compiler's.
"""
import ctypes
import os

F32, F16, BF16 = 0, 1, 2
GATE_DECAY, GATE_LOG_DECAY, GATE_VECTOR, GATE_RAW = 0, 1, 2, 3
BETA_DIRECT, BETA_LOGIT = 0, 1
STATE_VK, STATE_KV = 0, 1
BACKEND_CPU, BACKEND_CUDA = 0, 1
OUT_GATE_SILU, OUT_GATE_SIGMOID = 0, 1

# gdn_status values that mean "these arguments are wrong" (ValueError); the others are RuntimeError
OK = 0
# NULL_POINTER .. INELIGIBLE, ALIGNMENT, NOT_DEVICE_MEMORY, RESERVED
ARGUMENT_ERRORS = {1, 2, 3, 4, 5, 6, 7, 11, 13, 14}


class DeltaArgs(ctypes.Structure):
    """gdn_delta_args of include/gdn.h, field for field."""
    _fields_ = [
        ("B", ctypes.c_int64), ("T", ctypes.c_int64), ("Hk", ctypes.c_int64), ("Hv", ctypes.c_int64),
        ("Dk", ctypes.c_int64), ("Dv", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("gate_kind", ctypes.c_int), ("gate", ctypes.c_void_p), ("A_log", ctypes.c_void_p),
        ("dt_bias", ctypes.c_void_p),
        ("beta_kind", ctypes.c_int), ("beta", ctypes.c_void_p), ("mask", ctypes.c_void_p),
        ("state_layout", ctypes.c_int), ("state_in", ctypes.c_void_p), ("state_out", ctypes.c_void_p),
        ("scale", ctypes.c_float), ("backend", ctypes.c_int), ("stream", ctypes.c_void_p),
        ("kernel", ctypes.c_char_p), ("threads", ctypes.c_int), ("cpu_runner", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p), ("state_slot", ctypes.c_void_p), ("slots", ctypes.c_int64),
        ("state_slot_device", ctypes.c_void_p), ("state_dtype", ctypes.c_int), ("head_map", ctypes.c_int),
        ("reserved", ctypes.c_uint64 * 6),
    ]


class LayerCheckpoint(ctypes.Structure):
    """gdn_layer_checkpoint of include/gdn.h: sequence `seq`'s state and history after `after` tokens to `slot`."""
    _fields_ = [("seq", ctypes.c_int32), ("after", ctypes.c_int32), ("slot", ctypes.c_int32)]


class LayerArgs(ctypes.Structure):
    """gdn_layer_args of include/gdn.h, field for field."""
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
        ("state_dtype", ctypes.c_int), ("head_map", ctypes.c_int),
        ("reserved", ctypes.c_uint64 * 6),
    ]


def library_candidates():
    """Where load() looks, in order: $GDN_LIBRARY; libgdn.so beside this file (the installed package); the source
    tree's build/pic/libgdn.so (`make shared`), for a checkout that imports the package from python/."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.environ.get("GDN_LIBRARY"), os.path.join(here, "libgdn.so"),
             os.path.join(here, "..", "..", "build", "pic", "libgdn.so")]
    return [os.path.normpath(p) for p in paths if p]


def load(path=None):
    """Loads libgdn.so (path, else the first of library_candidates() that exists) and declares its entry points."""
    if path is None:
        found = [p for p in library_candidates() if os.path.exists(p)]
        if not found:
            raise OSError("libgdn.so not found; looked at %s (pip install . builds it into the package; in a "
                          "checkout, `make shared` builds build/pic/libgdn.so)" % ", ".join(library_candidates()))
        path = found[0]
    lib = ctypes.CDLL(path)
    lib.path = path
    sig = {
        "gdn_delta": ([ctypes.POINTER(DeltaArgs)], ctypes.c_int),
        "gdn_route": ([ctypes.POINTER(DeltaArgs), ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int),
        "gdn_layer": ([ctypes.POINTER(LayerArgs)], ctypes.c_int),
        "gdn_layer_route": ([ctypes.POINTER(LayerArgs), ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int),
        "gdn_layer_kernel_count": ([], ctypes.c_int),
        "gdn_layer_kernel_name": ([ctypes.c_int], ctypes.c_char_p),
        "gdn_kernel_count": ([], ctypes.c_int),
        "gdn_kernel_name": ([ctypes.c_int], ctypes.c_char_p),
        "gdn_kernel_backend": ([ctypes.c_int], ctypes.c_int),
        "gdn_kernel_contract": ([ctypes.c_int], ctypes.c_int),
        "gdn_kernel_variant_count": ([ctypes.c_int], ctypes.c_int),
        "gdn_kernel_variant_name": ([ctypes.c_int, ctypes.c_int], ctypes.c_char_p),
        "gdn_status_str": ([ctypes.c_int], ctypes.c_char_p),
        "gdn_last_error": ([], ctypes.c_char_p),
        "gdn_device_count": ([ctypes.c_int], ctypes.c_int),
        "gdn_cpu_threads": ([], ctypes.c_int),
        "gdn_cpu_release": ([], None),
        "gdn_env_report": ([], ctypes.c_char_p),
    }
    for name, (argtypes, restype) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    return lib


_lib = None


def lib():
    """The process's libgdn, loaded on first use (load())."""
    global _lib
    if _lib is None:
        _lib = load()
    return _lib


def check(lib, status):
    """Raises on a status other than GDN_OK: ValueError for bad arguments, RuntimeError otherwise, with
    gdn_status_str and gdn_last_error() (which names the field)."""
    if status != OK:
        exc = ValueError if status in ARGUMENT_ERRORS else RuntimeError
        raise exc("libgdn: %s (%s)" % (lib.gdn_status_str(status).decode(), lib.gdn_last_error().decode()))


def _fill(struct, kw):
    a = struct()
    for name, value in kw.items():
        if name == "kernel" and isinstance(value, str):
            value = value.encode()
        setattr(a, name, value)
    return a


def args(**kw):
    """DeltaArgs from keyword fields; `kernel` may be a str."""
    return _fill(DeltaArgs, kw)


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
    """The kernel gdn_delta would run for `a` (gdn_route); raises where gdn_delta would fail."""
    name = ctypes.c_char_p()
    check(lib, lib.gdn_route(ctypes.byref(a), ctypes.byref(name)))
    return name.value.decode()


def layer_args(**kw):
    """LayerArgs from keyword fields; `kernel` may be a str."""
    return _fill(LayerArgs, kw)


def layer_call(lib, a):
    """gdn_layer(a); raises on a status other than GDN_OK."""
    check(lib, lib.gdn_layer(ctypes.byref(a)))


def layer_route(lib, a):
    """The layer kernel gdn_layer would run for `a` (gdn_layer_route); raises where gdn_layer would fail."""
    name = ctypes.c_char_p()
    check(lib, lib.gdn_layer_route(ctypes.byref(a), ctypes.byref(name)))
    return name.value.decode()


def kernels(lib):
    """gdn_delta's kernels, in routing order: (name, backend, [variant names])."""
    return [(lib.gdn_kernel_name(i).decode(), lib.gdn_kernel_backend(i),
             [lib.gdn_kernel_variant_name(i, v).decode() for v in range(lib.gdn_kernel_variant_count(i))])
            for i in range(lib.gdn_kernel_count())]


def layer_kernels(lib):
    """The layer kernels' names, in routing order (gdn_layer_kernel_count / gdn_layer_kernel_name)."""
    return [lib.gdn_layer_kernel_name(i).decode() for i in range(lib.gdn_layer_kernel_count())]
