#!/usr/bin/env bash
# The CPU figures on the GPU machine's host (issue 22: an Intel Xeon with AVX-512; 48 KiB L1d and 2 MiB L2 per core,
# as the project's AVX-512 machines), on two pinned cores: builds libgdn for the CPU (build/cpu, no CUDA) and ggml
# (third_party/ggml, carried: nothing is fetched) on cores BUILD_CPUS, then runs `gdn bench` and bench/ggml_delta.sh
# with GDN_THREADS=2 on cores CPUS. Output on stdout.
#
#   scripts/gpu_host_cpu.sh [--quick]     (CPUS default 0,1; BUILD_CPUS default 8-15)
set -uo pipefail
cd "$(dirname "$0")/.."
CPUS=${CPUS:-0,1}
BUILD_CPUS=${BUILD_CPUS:-8-15}
QUICK=${1:-}
# shellcheck source=cmake/find_cmake.sh
. cmake/find_cmake.sh
export PATH="$(dirname "$CMAKE"):$PATH" # bench/ggml_common.sh calls cmake by name
lscpu | grep -E 'Model name|L1d|L2|Flags' | sed 's/  */ /g' | cut -c1-200
grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
taskset -c "$BUILD_CPUS" "$CMAKE" -S . -B build/cpu -DGDN_CUDA=OFF -DGDN_TESTING=ON > /dev/null &&
    taskset -c "$BUILD_CPUS" "$CMAKE" --build build/cpu -j 8 --target gdn libgdn_static > /dev/null || exit 1
# ggml and the side-by-side program (ggml_delta.sh builds what is missing; --help-less: a --quick run builds all)
if [[ -d third_party/ggml ]]; then
    JOBS=8 taskset -c "$BUILD_CPUS" bash bench/ggml_delta.sh third_party/ggml -- --quick --threads 1 > /dev/null 2>&1 ||
        echo "ggml_delta: the build or its quick run failed"
fi
echo "== GDN_THREADS=2 taskset -c $CPUS gdn bench $QUICK (libgdn $(git rev-parse --short=7 HEAD 2>/dev/null))"
GDN_THREADS=2 taskset -c "$CPUS" ./build/cpu/gdn bench $QUICK
if [[ -x build/ggml_delta/ggml_delta ]]; then
    echo "== taskset -c $CPUS ggml_delta --threads 2"
    taskset -c "$CPUS" ./build/ggml_delta/ggml_delta --threads 2 $QUICK
fi
