#!/usr/bin/env bash
# The chunked prefill (cuda_chunked) on the GPU machine: builds build/pic (as scripts/gpu_run.sh), runs its suite
# (test_chunked_cuda.c: the float64 tolerance, determinism, batch and split invariance, the router) and the CUDA
# suites that loop over every kernel, then bench/chunked_h200.py (beside fla's chunk_gated_delta_rule, with the
# tensor-core rate) and bench/chunk_accuracy.py (the error table beside fla's). Results under $OUT:
# chunked_test.log, chunked_h200.json, chunk_accuracy_h200.json and their printed tables.
#
#   scripts/gpu_chunked.sh [test|bench|all]   (default all)
#
# fla comes from the wheels in .whl/ where the machine has none (installed with --no-index into /tmp/site).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gdn_gpu_out}
mkdir -p "$OUT"
MODE=${1:-all}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source=cmake/find_cmake.sh
. cmake/find_cmake.sh
if ! { "$CMAKE" -S . -B build/pic -DGDN_CUDA=ON -DGDN_TESTING=ON -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" &&
       "$CMAKE" --build build/pic -j "$(nproc)" --target gdn test_gdn libgdn_shared; } > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    exit 1
fi
status=0
if [[ $MODE == all || $MODE == test ]]; then
    GDN_TEST_VERBOSE=1 ./build/pic/test_gdn chunked_ > "$OUT/chunked_test.log" 2>&1 || status=1
    grep -E "worst|FAIL|fail|passed" "$OUT/chunked_test.log" | tail -12
    ./build/pic/test_gdn batch_gpu 2>&1 | tail -1 || status=1
fi
if [[ $MODE == all || $MODE == bench ]]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
        export PYTHONPATH=/tmp/site
    fi
    export GDN_LIBRARY=$PWD/build/pic/libgdn.so
    python3 bench/chunked_h200.py --out "$OUT/chunked_h200.json" 2>&1 | tee "$OUT/chunked_h200.txt" || status=1
    python3 bench/chunk_accuracy.py --T 64 512 2048 8192 --out "$OUT/chunk_accuracy_h200.json" 2>&1 |
        tee "$OUT/chunk_accuracy_h200.txt" | grep -E "chunk|bf16" || status=1
fi
exit $status
