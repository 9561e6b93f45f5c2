#!/usr/bin/env bash
# Where cuda_chunked's two kernels spend their instructions, on the GPU machine: one ncu pass over a B = 1 call at
# T = NCU_T (default 2048) with source counters (per-SASS-instruction executions and stall samples), then the
# per-instruction table of each kernel as CSV. Under $OUT: chunk.ncu-rep, details.txt, prep_sass.csv, scan_sass.csv.
#   GPU machine: dev/gpu_chunked_profile.sh   (carry .whl)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export OUT=${OUT:-/tmp/gdn_gpu_out} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
gpu_build libgdn_shared || exit 1
gpu_wheels
LIB=$PWD/build/pic/libgdn.so
ncu --clock-control none --kernel-name regex:gdn_chunk --launch-count 2 --import-source no \
    --section InstructionStats --section SourceCounters --section WarpStateStats -o "$OUT/chunk" -f \
    python3 dev/chunked_ab.py --once "${NCU_T:-2048}" new="$LIB" > "$OUT/ncu_run.log" 2>&1 || { tail -20 "$OUT/ncu_run.log"; exit 1; }
ncu -i "$OUT/chunk.ncu-rep" --page details > "$OUT/details.txt" 2>&1
for k in prep scan; do
    ncu -i "$OUT/chunk.ncu-rep" --kernel-name "regex:gdn_chunk_$k" --page source --csv --print-source sass \
        > "$OUT/${k}_sass.csv" 2>&1 || echo "the source page of $k: $(head -3 "$OUT/${k}_sass.csv")"
    echo "$k: $(wc -l < "$OUT/${k}_sass.csv") lines"
done
grep -E "gdn_chunk|Duration|Executed Instructions |Issued Instructions |Avg. Executed Instructions Per Scheduler" \
    "$OUT/details.txt" | head -20
