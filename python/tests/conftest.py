"""The package under test: the installed libgdn (pip install .), else the checkout's python/libgdn with
build/pic/libgdn.so (make shared). Fixtures and the float64 references the tests compare against."""
import os
import sys

try:
    import libgdn  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import libgdn  # noqa: F401


def pytest_report_header(config):
    from libgdn import capi
    return "libgdn: package %s, library %s, CUDA devices %d" % (
        os.path.dirname(libgdn.__file__), capi.lib().path, libgdn.cuda_devices())
