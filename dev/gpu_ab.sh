#!/usr/bin/env bash
# A/B of two builds on the GPU machine, in one process per comparison: builds the library of an older tree (OLD_TREE,
# a `git archive` of the commit to compare with, carried beside this one) and of this tree, runs the CUDA tests on this
# tree (scripts/gpu_run.sh test), then each comparison command with $OLD set to the older tree's libgdn.so. Output and
# JSON under $OUT (each command's stdout in $OUT/ab_<n>.txt).
#
#   here:        rm -rf .gpu_tree_a && mkdir .gpu_tree_a && git archive REV | tar -x -C .gpu_tree_a
#   GPU machine: dev/gpu_ab.sh ../.gpu_tree_a 'python3 dev/gpu_gate.py old=$OLD' \
#                    'python3 dev/gpu_decode_ab.py old=$OLD old:0 new:0 B=8,64,256 T=1,7 layout=kv'
#
# (the device call carries both trees; this tree must be the one the command runs in)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export OUT=${OUT:-/tmp/gdn_gpu_out}
mkdir -p "$OUT"
[[ $# -ge 1 && -f $1/Makefile ]] || { echo "usage: dev/gpu_ab.sh OLD_TREE 'command' ..." >&2; exit 2; }
OLD_TREE=$(cd "$1" && pwd)
shift
J=$(nproc)
( cd "$OLD_TREE" && make -j$((J / 2)) BUILD=build/pic PIC=1 build/pic/libgdn.so > "$OUT/build_old.log" 2>&1 ) &
old_build=$!
OUT=$OUT scripts/gpu_run.sh test
status=$?
wait $old_build || { echo "the older tree did not build:"; tail -20 "$OUT/build_old.log"; exit 1; }
export OLD=$OLD_TREE/build/pic/libgdn.so
n=0
for cmd in "$@"; do
    n=$((n + 1))
    echo "== $cmd"
    bash -c "$cmd" 2>&1 | tee "$OUT/ab_$n.txt" || status=1
done
exit $status
