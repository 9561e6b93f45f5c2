"""What libgdn needs of an array, and the checks that come before a call: numpy arrays (host) and torch tensors
(CPU or CUDA) alike, read without a copy. Every failure names the tensor, what was expected and what came:
TypeError for a wrong kind or dtype, ValueError for a wrong shape, layout, device or alignment.

The checks read only shapes, dtypes, devices and strides, so they also run on torch's fake tensors (torch.compile's
tracing); the data pointer and its alignment are read at call time (pointer()).
"""
import operator
import struct
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


def check_writable(name, x):
    """An output's memory can be written: a numpy array's writeable flag; a CPU tensor over memory torch did not
    allocate (from_numpy, frombuffer, DLPack: a storage that cannot resize) must lie in writeable pages (from_numpy
    of a read-only numpy array only warns; torch keeps no flag)."""
    if is_numpy(x):
        if not x.flags.writeable:
            raise ValueError("%s: expected a writeable array (it is written), got a read-only one (writeable=False)"
                             % name)
    elif not x.is_cuda and x.numel() and not x.untyped_storage().resizable():
        if not _writeable_pages(x.data_ptr(), x.numel() * x.element_size()):
            raise ValueError("%s: expected writeable memory (it is written), got a tensor over read-only memory "
                             "(from_numpy or frombuffer of a read-only buffer?)" % name)


def _writeable_pages(addr, size):
    """Whether [addr, addr + size) lies in writeable mappings (Linux's /proc/self/maps; elsewhere: assumed so)."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return True
    end = addr + size
    for line in maps:  # sorted by address, disjoint
        span, perms = line.split()[:2]
        lo, hi = (int(v, 16) for v in span.split("-"))
        if hi <= addr:
            continue
        if lo > addr or "w" not in perms:  # a gap, or read-only
            return False
        addr = hi
        if addr >= end:
            return True
    return False


def check_int(name, x, lo, hi):
    """A scalar integer argument (not a bool, not a float) within lo .. hi, as C's int field takes it."""
    if isinstance(x, bool) or isinstance(x, float):
        raise TypeError("%s: expected an integer, got %r" % (name, x))
    try:
        x = operator.index(x)
    except TypeError:
        raise TypeError("%s: expected an integer, got %s" % (name, type(x).__name__)) from None
    if not lo <= x <= hi:
        raise ValueError("%s: expected an integer in %d .. %d, got %d" % (name, lo, hi, x))
    return x


def check_float(name, x):
    """A scalar float argument as C's float field takes it: rounded to float32, refused where it overflows."""
    if isinstance(x, (str, bytes)):
        raise TypeError("%s: expected a float, got %s" % (name, type(x).__name__))
    try:
        return struct.unpack("=f", struct.pack("=f", float(x)))[0]
    except (TypeError, ValueError):
        raise TypeError("%s: expected a float, got %s" % (name, type(x).__name__)) from None
    except OverflowError:
        raise ValueError("%s: expected a value within float32's range, got %r" % (name, x)) from None


def pointer(name, x):
    """The array's data address, checked to be aligned to its element size."""
    addr = x.data_ptr() if is_torch(x) else x.__array_interface__["data"][0]
    size = ITEMSIZE.get(dtype_name(x), 1)
    if addr % size:
        raise ValueError("%s: expected data aligned to %d bytes (%s), got address %#x"
                         % (name, size, dtype_name(x), addr))
    return addr


INT32 = (-2 ** 31, 2 ** 31 - 1)
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")  # host arrays, read by value


def check_host(name, x, flags=False, rows=None):
    """A per-sequence host array given as a numpy array or a tensor (fake ones too): an integer dtype (bool for
    flags), 1-D, or [n, rows]. The values are read by host_ints at call time."""
    got = dtype_name(x)
    if got not in INTEGERS and not (flags and got == "bool"):
        raise TypeError("%s: expected integers%s, got dtype %s" % (name, " or bool" if flags else "", got))
    shape = list(x.shape)
    if rows is None and len(shape) != 1 or rows is not None and (len(shape) != 2 or shape[1] != rows):
        raise ValueError("%s: expected %s, got shape %s" % (name, "a 1-D array" if rows is None else
                                                              "an [n, %d] array" % rows, shape))


def list_ints(name, values, flags=False, rows=None):
    """The integers of a list (of rows-tuples when rows is given), flattened, each checked as C will see it:
    integers (not floats; bools only for flags) within int32, flags 0 or 1. Plain Python: torch.compile traces it."""
    items = list(values)
    if rows is not None:
        flat = []
        for r, row in enumerate(items):
            try:
                flat += list(row) if len(row) == rows else [None] * (rows + 1)
            except TypeError:
                flat += [None] * (rows + 1)
            if len(flat) != rows * (r + 1):
                raise ValueError("%s[%d]: expected %d integers (seq, after, slot), got %r" % (name, r, rows, row))
        items = flat
    out = []
    for i, x in enumerate(items):
        if isinstance(x, (list, tuple)) or len(getattr(x, "shape", ())):
            raise ValueError("%s: expected a flat list of integers (a 1-D array), got a nested sequence" % name)
        if isinstance(x, bool) or type(x).__name__ in ("bool", "bool_"):  # numpy 2 and 1 name np.bool_ so
            if not flags:
                raise TypeError("%s: expected integers, got a bool (%r)" % (name, x))
            x = int(x)
        try:
            out.append(operator.index(x))
        except TypeError:
            raise TypeError("%s: expected integers, got %s %r" % (name, type(x).__name__, x)) from None
    check_range(name, min(out, default=0), max(out, default=0), flags)
    return out


def check_range(name, lo, hi, flags=False):
    """lo .. hi (the least and greatest value) within what C reads: int32, or a flag's 0 / 1."""
    lim = (0, 1) if flags else INT32
    if lo < lim[0] or hi > lim[1]:
        want = "0 or 1 (uint8 flags)" if flags else "values within int32 (%d .. %d)" % lim
        raise ValueError("%s: expected %s, got %d .. %d" % (name, want, lo, hi))


def host_ints(name, values, length=None, whose="", flags=False, rows=None):
    """A per-sequence host array as the contiguous numpy array C reads: int32, or uint8 0 / 1 for flags (fresh);
    [n, rows] with rows (checkpoints). From a list (of rows-tuples), a numpy array or a tensor (a CUDA one is
    copied to the host: a synchronization), read by value whatever its integer dtype, strides or byte order; the
    values must fit int32 (flags: 0 or 1), and there must be `length` entries when it is given."""
    import numpy as np
    dtype = np.uint8 if flags else np.int32
    if is_torch(values) or is_numpy(values):
        check_host(name, values, flags, rows)
        a = values.detach().cpu().numpy() if is_torch(values) else values
        if a.size and (flags or a.dtype != dtype):  # every int32 value fits int32
            check_range(name, int(a.min()), int(a.max()), flags)
        out = np.ascontiguousarray(a, dtype=dtype)
    else:
        out = np.array(list_ints(name, values, flags, rows), dtype=dtype)
        out = out.reshape(-1, rows) if rows is not None else out
    check_length(name, out.shape[0], length, whose)
    return out


def check_length(name, n, length, whose=""):
    if length is not None and n != length:
        raise ValueError("%s: expected %d entries%s, got %d" % (name, length, " (%s)" % whose if whose else "", n))
