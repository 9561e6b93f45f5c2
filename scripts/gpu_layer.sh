#!/usr/bin/env bash
# The layer step on the GPU machine: builds (build/pic, as scripts/gpu_run.sh), runs the layer suites (every CUDA
# layer kernel bitwise against the CPU) and `gdn layer` (Hv 32, and a quick Hv 48), with the fused kernel's
# duration under ncu when ncu is there. Results under $OUT: layer_test.log, layer_h200.txt, layer_h200.json.
#
#   scripts/gpu_layer.sh [test|bench|all]   (default all)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gdn_gpu_out}
mkdir -p "$OUT"
MODE=${1:-all}
export GDN_THREADS=$(nproc)
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
gpu_build gdn test_gdn || exit 1
status=0
if [[ $MODE == all || $MODE == test ]]; then
    GDN_TEST_VERBOSE=1 ./build/pic/test_gdn layer_ > "$OUT/layer_test.log" 2>&1 || status=1
    grep -v "equal$" "$OUT/layer_test.log" | tail -15
fi
if [[ $MODE == all || $MODE == bench ]]; then
    ./build/pic/gdn layer | tee "$OUT/layer_h200.txt" | grep -v "^staged" || status=1
    { ./build/pic/gdn layer --json; ./build/pic/gdn layer --json --quick --hv 48; } > "$OUT/layer_h200.json" || status=1
    if [[ -x $CUDA_HOME/bin/ncu ]]; then
        "$CUDA_HOME/bin/ncu" --kernel-name regex:gdn_layer_fused --launch-skip 3 --launch-count 1 --cache-control none \
            --clock-control none --section SpeedOfLight ./build/pic/gdn layer --quick 2>&1 |
            grep -E "Duration|Elapsed Cycles|SM Frequency" | tee "$OUT/layer_ncu.txt"
    fi
fi
exit $status
