export OUT PYTHONUNBUFFERED=1
( cd .gpu_tree_b && make -j8 BUILD=build/pic PIC=1 build/pic/libgdn.so > /tmp/build_b.log 2>&1 ) &
. scripts/gpu_common.sh
gpu_build gdn test_gdn libgdn_shared || exit 1
wait
gpu_wheels
N=$PWD/build/pic/libgdn.so; B6=$PWD/.gpu_tree_b/build/pic/libgdn.so
python3 dev/chunked_ab.py cur=$N prep6=$B6 --reps 9 2>&1 | tail -11
ncu --clock-control none --kernel-name regex:gdn_chunk --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats python3 dev/chunked_ab.py --once 2048 --batch 16 cur=$N > $OUT/ncu_batch.txt 2>&1
grep -E "gdn_chunk|Duration|Issued Ipc|No Eligible|Registers Per|Achieved Occ|Compute \(SM\) Th|Memory Th" $OUT/ncu_batch.txt | head -40
