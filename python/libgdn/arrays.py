"""What libgdn needs of an array, and the checks that come before a call: numpy arrays (host) and torch tensors
(CPU or CUDA) alike, read without a copy. Every failure names the tensor, what was expected and what came:
TypeError for a wrong kind or dtype, ValueError for a wrong shape, layout, device or alignment.

The checks read only shapes, dtypes, devices and strides, so they also run on torch's fake tensors (torch.compile's
tracing); the data pointer and its alignment are read at call time (pointer()).
"""
import sys

ACTIVATIONS = ("float32", "float16", "bfloat16")  # gdn_dtype: GDN_F32, GDN_F16, GDN_BF16
DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "bool": 1, "int32": 4}


def is_torch(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def is_numpy(x):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def dtype_name(x):
    """'float32', 'bfloat16', 'uint8', ... for a torch tensor or a numpy array (ml_dtypes' bfloat16 included)."""
    return str(x.dtype).replace("torch.", "") if is_torch(x) else x.dtype.name


def device_name(x):
    return str(x.device) if is_torch(x) else "cpu"


def is_cuda(x):
    return is_torch(x) and x.is_cuda


def check_kind(name, x):
    if not (is_torch(x) or is_numpy(x)):
        raise TypeError("%s: expected a numpy array or a torch tensor, got %s" % (name, type(x).__name__))


def check_dtype(name, x, allowed, why=""):
    got = dtype_name(x)
    if got not in allowed:
        raise TypeError("%s: expected dtype %s%s, got %s" % (name, " or ".join(allowed), why, got))
    if is_numpy(x) and not x.dtype.isnative:
        raise TypeError("%s: expected the machine's byte order, got dtype %s" % (name, x.dtype.str))


def check_contiguous(name, x):
    ok = x.is_contiguous() if is_torch(x) else x.flags.c_contiguous
    if not ok:
        strides = tuple(x.stride()) if is_torch(x) else tuple(s // x.itemsize for s in x.strides)
        raise ValueError("%s: expected a contiguous (row-major) array, got strides %s (in elements) for shape %s"
                         % (name, strides, tuple(x.shape)))


def check_device(name, x, device, whose):
    got = device_name(x)
    if got != device:
        raise ValueError("%s: expected device %s (%s), got %s" % (name, device, whose, got))


class Shapes:
    """Named sizes bound by the first tensor that has them, checked against every later one."""

    def __init__(self):
        self.value, self.source = {}, {}

    def bind(self, dim, value, source):
        self.value[dim], self.source[dim] = value, source

    def check(self, name, x, spec):
        """spec: a tuple of dimension names (str) or fixed sizes (int); binds the names not yet bound."""
        shape = tuple(int(s) for s in x.shape)
        ok = len(shape) == len(spec) and all(
            not isinstance(d, str) and s == d or isinstance(d, str) and self.value.get(d, s) == s
            for s, d in zip(shape, spec))
        if not ok:
            want = ", ".join(str(d) for d in spec)
            vals = ", ".join(str(self.value.get(d, "*")) if isinstance(d, str) else str(d) for d in spec)
            known = sorted({self.source[d] for d in spec if isinstance(d, str) and d in self.source})
            whence = " (%s)" % "; ".join(known) if known else ""
            raise ValueError("%s: expected shape [%s] = [%s]%s, got %s" % (name, want, vals, whence, list(shape)))
        for s, d in zip(shape, spec):
            if isinstance(d, str) and d not in self.value:
                self.bind(d, s, "%s from %s" % (d, name))


def pointer(name, x):
    """The array's data address, checked to be aligned to its element size."""
    addr = x.data_ptr() if is_torch(x) else x.__array_interface__["data"][0]
    size = ITEMSIZE.get(dtype_name(x), 1)
    if addr % size:
        raise ValueError("%s: expected data aligned to %d bytes (%s), got address %#x"
                         % (name, size, dtype_name(x), addr))
    return addr


def host_ints(name, values, length=None, whose="", dtype="int32"):
    """A per-sequence host array (cu_seqlens, slots, commits: int32; fresh flags: uint8) from a list, a numpy array or
    a torch tensor (a CUDA one is copied to the host: a synchronization), as a contiguous numpy array; values must
    fit the dtype, and there must be `length` of them when it is given."""
    import numpy as np
    if is_torch(values):
        values = values.detach().cpu().numpy()
    wide = np.asarray(values)
    if wide.dtype.kind not in "iub":
        raise TypeError("%s: expected integers, got dtype %s" % (name, wide.dtype.name))
    wide = wide.astype(np.int64).reshape(-1)
    info = np.iinfo(dtype)
    if wide.size and (wide.min() < info.min or wide.max() > info.max):
        raise ValueError("%s: expected values within %s, got %d .. %d" % (name, dtype, wide.min(), wide.max()))
    check_length(name, wide.size, length, whose)
    return np.ascontiguousarray(wide.astype(dtype))


def check_length(name, n, length, whose=""):
    if length is not None and n != length:
        raise ValueError("%s: expected %d entries%s, got %d" % (name, length, " (%s)" % whose if whose else "", n))
