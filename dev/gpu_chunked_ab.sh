#!/usr/bin/env bash
# cuda_chunked of an older tree against this one, on the GPU machine: builds both (the older tree's libgdn.so, this
# tree's test_gdn, gdn and libgdn.so), runs this tree's chunked suite, dev/chunked_ab.py (bitwise equal to the older
# build? and the timing points alternating), ncu on the builds' kernels at T = NCU_T, then bench/chunked_h200.py
# (beside fla) and bench/chunk_accuracy.py, and the chunked suite under compute-sanitizer's memcheck. Under $OUT:
# build.log, chunked_test.log, chunked_ab.json, ncu.txt (at the GPU's own clocks), chunked_h200.{json,txt},
# chunk_accuracy_h200.json.
#
#   here:        rm -rf .gpu_tree_a && mkdir .gpu_tree_a && git archive REV | tar -x -C .gpu_tree_a
#   GPU machine: dev/gpu_chunked_ab.sh .gpu_tree_a [.gpu_tree_b ...]   (carry the trees and .whl; NCU_T default
#                2048, 0: none; MEMCHECK=0, ACCURACY=0 skip those; a further tree is compared too, under its
#                folder's name)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export OUT=${OUT:-/tmp/gdn_gpu_out} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
[[ $# -ge 1 && -f $1/Makefile ]] || { echo "usage: dev/gpu_chunked_ab.sh OLD_TREE [TREE...]" >&2; exit 2; }
NCU_T=${NCU_T:-2048}
J=$(nproc)
builds=() pids=()
for tree in "$@"; do
    dir=$(cd "$tree" && pwd)
    name=old
    [[ ${#builds[@]} -gt 0 ]] && name=$(basename "$dir" | tr -cd 'A-Za-z0-9_')
    ( cd "$dir" && make -j$((J / (1 + $#))) BUILD=build/pic PIC=1 build/pic/libgdn.so > "/tmp/build_$name.log" 2>&1 ) &
    pids+=($!) builds+=("$name=$dir/build/pic/libgdn.so")
done
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
t0=$(date +%s)
gpu_build gdn test_gdn libgdn_shared || exit 1
for pid in "${pids[@]}"; do wait "$pid" || { echo "a tree did not build:"; tail -20 /tmp/build_*.log; exit 1; }; done
echo "builds: $(( $(date +%s) - t0 )) s"
NEW=$PWD/build/pic/libgdn.so
status=0
GDN_TEST_VERBOSE=1 ./build/pic/test_gdn chunked_ > "$OUT/chunked_test.log" 2>&1 || status=1
grep -E "worst|FAIL|fail|passed" "$OUT/chunked_test.log" | tail -12
gpu_wheels
python3 dev/chunked_ab.py "${builds[@]}" new="$NEW" || status=1
if [[ $NCU_T != 0 ]] && command -v ncu > /dev/null; then
    ncu --clock-control none --kernel-name regex:gdn_chunk --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section SchedulerStats --section WarpStateStats \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' python3 dev/chunked_ab.py --once "$NCU_T" "${builds[@]}" \
        new="$NEW" > "$OUT/ncu.txt" 2>&1
    grep -E "gdn_chunk|Duration|Issued Ipc|No Eligible|Warp Cycles Per Issued" "$OUT/ncu.txt" | head -60
fi
if [[ ${MEMCHECK:-1} != 0 ]] && command -v compute-sanitizer > /dev/null; then
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 ./build/pic/test_gdn chunked_ > /tmp/memcheck.log 2>&1
    echo "memcheck of the chunked suite: rc $? ($(grep -c "Invalid\|Error" /tmp/memcheck.log) error lines)"
    tail -3 /tmp/memcheck.log
fi
[[ ${ACCURACY:-1} != 0 ]] &&
    GDN_LIBRARY=$NEW python3 bench/chunk_accuracy.py --T 64 512 2048 8192 --out "$OUT/chunk_accuracy_h200.json" 2>&1 |
    grep -E "chunk|bf16|ordinary|zero|decay" | head -20
GDN_LIBRARY=$NEW python3 bench/chunked_h200.py --out "$OUT/chunked_h200.json" 2>&1 | tee "$OUT/chunked_h200.txt"
exit $status
