#!/usr/bin/env bash
# The Python package's tests on the GPU machine, CUDA tests included: libgdn.so built with CUDA (`make shared
# GDN_CUDA=1`: build/pic/libgdn.so, which python/libgdn loads in a checkout), pytest from the wheels in .whl/ where
# the machine has none (pytest, pluggy, iniconfig, packaging: pure Python), then python/tests. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
gpu_shared python_build.log || exit 1
gpu_wheels
python3 -m pytest -q -rs -p no:cacheprovider python/tests 2>&1 | tee "$OUT/python_tests.log"
exit "${PIPESTATUS[0]}"
