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
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
gpu_build gdn test_gdn libgdn_shared || exit 1
status=0
if [[ $MODE == all || $MODE == test ]]; then
    GDN_TEST_VERBOSE=1 ./build/pic/test_gdn chunked_ > "$OUT/chunked_test.log" 2>&1 || status=1
    grep -E "worst|FAIL|fail|passed" "$OUT/chunked_test.log" | tail -12
    ./build/pic/test_gdn batch_gpu 2>&1 | tail -1 || status=1
fi
if [[ $MODE == all || $MODE == bench ]]; then
    gpu_wheels
    export GDN_LIBRARY=$PWD/build/pic/libgdn.so
    python3 bench/chunked_h200.py --out "$OUT/chunked_h200.json" 2>&1 | tee "$OUT/chunked_h200.txt" || status=1
    python3 bench/chunk_accuracy.py --T 64 512 2048 8192 --out "$OUT/chunk_accuracy_h200.json" 2>&1 |
        tee "$OUT/chunk_accuracy_h200.txt" | grep -E "chunk|bf16" || status=1
fi
exit $status
