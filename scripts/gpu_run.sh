#!/usr/bin/env bash
# The one script for the GPU machine: builds libgdn for sm_90 (the CMake build in build/pic: libgdn.a, libgdn.so and
# test_gdn; cmake from the system or from a wheel in .whl/, see cmake/find_cmake.sh), runs the
# CUDA tests (every CUDA kernel bitwise against the CPU ref), the tests under compute-sanitizer (memcheck,
# racecheck, synccheck), and the side-by-side benchmark with flash-linear-attention. Logs and JSON go under $OUT;
# a short table is printed last.
#
#   scripts/gpu_run.sh [all|test|sanitize|bench|quick|ours|window|profile|peers]   (default all; quick = tests + a
#                                   short benchmark; ours = quick without FLA; window = tests + short windows T <= 16
#                                   with the window, packed and rowsplit kernels, without FLA; peers = the benchmarks
#                                   beside FlashInfer and fla in one process, from the build already there: decode
#                                   and verify, the chunked prefill and its accuracy, the layer step, JSON under $OUT)
#
# The peers mode finds FlashInfer and fla where bench/peer_wheels.sh installed them (/tmp/peers).
# FLA travels as wheels in .whl/ (ignored; fetched with pip download, see docs/kernels/README.md).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gdn_gpu_out}
mkdir -p "$OUT"
MODE=${1:-all}
J=$(nproc)
export GDN_THREADS=$J PYTHONUNBUFFERED=1
if [[ -d /usr/local/cuda/lib64 ]]; then CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}; else CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}; fi
status=0

{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv
    nvcc --version | tail -2
    uname -r
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# ---- build: CMake, CUDA on, the testing build (test-only modes; libgdn.so exports what python/libgdn calls) ----
t0=$(date +%s)
# shellcheck source=cmake/find_cmake.sh
. cmake/find_cmake.sh
if ! { "$CMAKE" -S . -B build/pic -DGDN_CUDA=ON -DGDN_TESTING=ON -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
           -DCUDAToolkit_ROOT="$CUDA_HOME" &&
       "$CMAKE" --build build/pic -j "$J" --target libgdn_static libgdn_shared test_gdn; } > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    exit 1
fi
TEST_BIN=build/pic/test_gdn # the CUDA tests are those named cuda_ (test_cuda.c, test_cuda_streams.c, routing's)
echo "build: $(( $(date +%s) - t0 )) s"
python3 - $(find build/pic/src -name "*.ptxas.log") > "$OUT/ptxas.txt" <<'PY'
import re, sys
for f in sys.argv[1:]:
    name = None
    for line in open(f):
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m: name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m: frame = m.groups()
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            print("%-72s regs %4s  stack %3s  spill st %3s ld %3s" % (name[:72], m.group(1), *frame))
PY
echo "ptxas: $(grep -c regs "$OUT/ptxas.txt") kernels, $(awk '$5 != 0 || $8 != 0' "$OUT/ptxas.txt" | wc -l) with spills or stack"

# ---- tests ----
if [[ $MODE == all || $MODE == test || $MODE == quick || $MODE == ours || $MODE == window ]]; then
    t0=$(date +%s)
    ./$TEST_BIN cuda_ > "$OUT/test.log" 2>&1 || status=1
    echo "test: $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/test.log")"
    grep -E "cuda:|FAIL|mismatch" "$OUT/test.log" | head -20
fi

# ---- compute-sanitizer: small cases ----
if [[ $MODE == all || $MODE == sanitize ]]; then
    for tool in memcheck racecheck synccheck; do
        t0=$(date +%s)
        GDN_TEST_CUDA_CASES=${SAN_CASES:-12} GDN_TEST_CUDA_MAXCOST=2e6 timeout "${SAN_TIMEOUT:-150}" \
            compute-sanitizer --tool "$tool" --error-exitcode 3 ./$TEST_BIN cuda_kernels > "$OUT/sanitize_$tool.log" 2>&1
        rc=$?
        [[ $rc == 0 ]] || status=1
        echo "compute-sanitizer $tool: rc $rc, $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|passed' "$OUT/sanitize_$tool.log" | tr '\n' ' ')"
    done
fi

# ---- profile: ncu on the kernels of gpu_compare.py --profile, per-instruction stall samples ----
# profile_kernel NAME REGEX METRICS: the second launch of the kernels matching REGEX; $OUT/NAME_source.csv (per-SASS
# samples) and $OUT/NAME_details.txt (the details page and the raw metrics matching METRICS)
profile_kernel() {
    ncu --clock-control none --kernel-name "regex:$2" --launch-skip 1 --launch-count 1 --set full \
        --import-source no -o "/tmp/gdn_$1" python3 bench/gpu_compare.py --out /dev/null --profile > /dev/null 2>&1
    ncu -i "/tmp/gdn_$1.ncu-rep" --page source --csv --print-source sass > "$OUT/$1_source.csv" 2>&1
    { ncu -i "/tmp/gdn_$1.ncu-rep" --page details; ncu -i "/tmp/gdn_$1.ncu-rep" --page raw | grep -E "$3"; } \
        > "$OUT/$1_details.txt" 2>&1
}
if [[ $MODE == profile ]]; then
    # PROFILE=packed|rowsplit|decode|all (default all): which kernels to profile
    t0=$(date +%s)
    if [[ ${PROFILE:-all} == all || ${PROFILE:-all} == packed ]]; then
        # packed v0 (L=4), T=2048, KV
        profile_kernel packed gdn_delta_packed "stall|inst_executed|issue_active|l1tex__data_pipe_lsu_wavefronts_mem_shared|smsp__inst_executed_pipe"
    fi
    if [[ ${PROFILE:-all} == all || ${PROFILE:-all} == rowsplit ]]; then
        # rowsplit W=4, T=2048, KV
        profile_kernel rowsplit gdn_delta_rowsplit "stall|inst_executed|issue_active"
        cuobjdump -sass build/pic/CMakeFiles/gdn_objects.dir/src/delta/cuda/rowsplit.cu.o | awk '/Function : .*rowsplit.*ILi4ELi4ELb0E/{p=1; print; next} /Function :/{p=0} p' \
            > "$OUT/rowsplit_w4.sass" 2>&1
    fi
    if [[ ${PROFILE:-all} == all || ${PROFILE:-all} == decode ]]; then
        # the streamed decode at B=256, T=1, VK
        profile_kernel decode gdn_delta_decode "stall|inst_executed|issue_active|dram__|lts__t_sectors"
    fi
    echo "profile: $(( $(date +%s) - t0 )) s"
    grep -hE "gdn_delta|Duration|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per|DRAM Throughput|Warp Cycles Per Issued" \
        "$OUT"/*_details.txt | head -60
fi

# ---- the peers in one process (the build above, or the one a previous call left) ----
if [[ $MODE == peers ]]; then
    for b in "decode_peers.py --out $OUT/decode_peers.json" \
             "chunked_h200.py --reps ${CHUNKED_REPS:-9} --out $OUT/chunked.json" \
             "chunk_accuracy.py --out $OUT/chunk_accuracy.json" \
             "layer_peers.py --quick --bf16-pool --out $OUT/layer_peers.json"; do
        t0=$(date +%s)
        name=${b%%.py*}
        # shellcheck disable=SC2086
        python3 bench/$b > "$OUT/$name.log" 2>&1 || status=1
        echo "== $name: $(( $(date +%s) - t0 )) s"
        grep -vE "^\s*$" "$OUT/$name.log" | tail -${PEERS_TAIL:-30}
    done
fi

# ---- benchmark ----
if [[ $MODE == all || $MODE == bench || $MODE == quick || $MODE == ours || $MODE == window ]]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site
    fi
    t0=$(date +%s)
    quick=""
    [[ $MODE == quick ]] && quick="--quick"
    [[ $MODE == ours ]] && quick="--quick --ours-only"
    [[ $MODE == window ]] && quick="--window --ours-only"
    python3 bench/gpu_compare.py --out "$OUT/h200.json" $quick > "$OUT/bench.log" 2>&1 || status=1
    echo "bench: $(( $(date +%s) - t0 )) s"
    sed -n '/^shape /,$p' "$OUT/bench.log"
    grep -E "Error|Traceback|failed" "$OUT/bench.log" | head -5
fi
exit $status
