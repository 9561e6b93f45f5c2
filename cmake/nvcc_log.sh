#!/bin/sh
# The CUDA compiler launcher: runs nvcc's command line ("$@") with its stderr (the -Xptxas -v report) written to
# LOG_ROOT/<source path relative to SRC_ROOT>.ptxas.log, e.g. build/src/delta/cuda/packed.cu.ptxas.log; on a
# failed compile the log is printed.   usage: nvcc_log.sh LOG_ROOT SRC_ROOT nvcc args...
log_root=$1
src_root=$2
shift 2
src=
for arg in "$@"; do
    case $arg in *.cu) src=$arg ;; esac
done
case $src in
"$src_root"/*) rel=${src#"$src_root"/} ;;
*) rel=$(basename "$src") ;;
esac
log=$log_root/$rel.ptxas.log
mkdir -p "$(dirname "$log")"
"$@" 2> "$log"
status=$?
[ $status -eq 0 ] || cat "$log" >&2
exit $status
