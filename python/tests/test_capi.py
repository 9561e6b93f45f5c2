"""The C API layer: python/test_gdn_py.py (the structs against the C compiler, raw gdn_layer / gdn_delta calls on
ctypes arrays) on the library the package loaded; the library's lookup."""
import os
import subprocess
import sys

import pytest
import torch

import libgdn
from libgdn import capi

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_struct_layouts_and_raw_calls():
    out = subprocess.run([sys.executable, os.path.join(PYTHON_DIR, "test_gdn_py.py"), capi.lib().path],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith(" passed, 0 failed"), out.stdout + out.stderr


def test_library_lookup():
    here = os.path.dirname(os.path.abspath(libgdn.__file__))
    cands = capi.library_candidates()
    assert os.path.join(here, "libgdn.so") in cands and cands[-1].endswith(os.path.join("build", "pic", "libgdn.so"))
    assert os.path.exists(capi.lib().path)


def test_the_installed_library_is_not_the_testing_build():
    """pip install . ships GDN_TESTING=OFF: no test-only kernel variant (in a CUDA build, cuda_decode's
    stream_ws_pauses); a checkout's build/pic library may be the testing build."""
    if not capi.lib().path.startswith(os.path.dirname(os.path.abspath(libgdn.__file__))):
        pytest.skip("the library is a checkout's (%s), not the package's" % capi.lib().path)
    assert all("pauses" not in v for _, _, variants in libgdn.kernels() for v in variants)


def test_kernel_contracts():
    """Every kernel keeps the exact contract but cuda_chunked (the chunked one); an unknown name is refused."""
    names = [n for n, _, _ in libgdn.kernels()]
    assert "cuda_chunked" in names and "ref" in names
    assert all(libgdn.kernel_contract(n) == ("chunked" if n == "cuda_chunked" else "exact") for n in names)
    with pytest.raises(ValueError, match="no kernel"):
        libgdn.kernel_contract("nope")


def test_cpu_release_changes_no_bits():
    """cpu_release() frees the CPU kernels' kept workspaces: a call before, one after, and one into kept buffers
    give the same bits."""
    Hk, Hv, Dk, Dv, T = 1, 2, 16, 8, 40
    C = 2 * Hk * Dk + Hv * Dv
    g = torch.Generator().manual_seed(3)
    args = (torch.randn(T, C, generator=g), torch.randn(T, Hv, Dv, generator=g), torch.randn(T, Hv, generator=g),
            torch.randn(T, Hv, generator=g), torch.randn(C, 4, generator=g), torch.ones(Hv), torch.ones(Dv))

    def run():
        state, hist = torch.zeros(1, Hv, Dk, Dv), torch.zeros(1, C, 3)
        y = libgdn.layer(*args, state, hist, A_log=torch.zeros(Hv), fresh=[1], state_layout="kv")
        return y, state, hist

    libgdn.cpu_release()
    first = run()
    again = run()
    libgdn.cpu_release()
    released = run()
    for a, b, c in zip(first, again, released):
        assert torch.equal(a, b) and torch.equal(a, c)
