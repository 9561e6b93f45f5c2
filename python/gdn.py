"""The ctypes layer under its old name, for scripts that `import gdn` from python/: everything of libgdn.capi
(python/libgdn/capi.py: the structs, load(), args(), delta(), run_variant(), route(), layer_args(), layer_call(),
layer_route(), layer_kernels()), and layer(lib, ...), the old array-level layer call, as libgdn.layer.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from libgdn.capi import *  # noqa: E402,F401,F403
from libgdn.capi import STATE_VK  # noqa: E402


def layer(lib, qkv, z, alpha, beta, conv_w, dt_bias, gamma, state, hist_in, *, Hk, Hv, Dk, Dv,
          state_layout=STATE_VK, hist_out=None, **kw):
    """libgdn.layer on arrays of the right element counts in any shape (viewed here as [T, C], [T, Hv, Dv], [T, Hv],
    [C, 4], [slots, Hv, ...], [slots, C, 3]); `lib` is unused (the package loads its own library)."""
    import libgdn
    C = 2 * Hk * Dk + Hv * Dv
    head = (Dv, Dk) if state_layout == STATE_VK else (Dk, Dv)
    hist_out = None if hist_out is None else hist_out.reshape(-1, C, 3)
    return libgdn.layer(qkv.reshape(-1, C), z.reshape(-1, Hv, Dv), alpha.reshape(-1, Hv), beta.reshape(-1, Hv),
                        conv_w.reshape(C, 4), dt_bias, gamma, state.reshape((-1, Hv) + head), hist_in.reshape(-1, C, 3),
                        state_layout=state_layout, hist_out=hist_out, **kw)
