#!/usr/bin/env bash
# The CPU recurrence, gdn_delta, against ggml's GGML_OP_GATED_DELTA_NET (bench/ggml_delta.c), in one process on the
# same inputs.
#
#   bash bench/ggml_delta.sh [GGML_DIR] [-- program options: --json --quick --threads N --cold-mib N]
#
# GGML_DIR: a ggml checkout (default third_party/ggml, git-ignored). Nothing is fetched here: clone ggml-org/ggml
# there first. ggml is built in GGML_DIR/build if it has no libraries yet (CPU only, Release, GGML_NATIVE=ON, no
# OpenMP), libgdn's static library in build/cpu if missing; the program is built in build/ggml_delta.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

GGML=third_party/ggml
if [[ $# -gt 0 && $1 != -- ]]; then GGML=$1; shift; fi
[[ ${1:-} == -- ]] && shift
GGML=$(cd "$GGML" 2>/dev/null && pwd) || { echo "ggml_delta.sh: no ggml checkout at $GGML (clone ggml-org/ggml there)" >&2; exit 2; }
grep -q ggml_gated_delta_net "$GGML/include/ggml.h" || { echo "ggml_delta.sh: $GGML has no ggml_gated_delta_net" >&2; exit 2; }

JOBS=${JOBS:-2}
LIBS=("$GGML/build/src/libggml.a" "$GGML/build/src/libggml-cpu.a" "$GGML/build/src/libggml-base.a")
if [[ ! -f ${LIBS[1]} ]]; then
    cmake -S "$GGML" -B "$GGML/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
        -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DBUILD_SHARED_LIBS=OFF \
        -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
    nice -n 10 cmake --build "$GGML/build" -j "$JOBS"
fi
if [[ ! -f build/cpu/libgdn.a ]]; then
    cmake -S . -B build/cpu -G Ninja -DGDN_CUDA=OFF >/dev/null
    nice cmake --build build/cpu -j "$JOBS" --target libgdn_static
fi

mkdir -p build/ggml_delta
# our code: C11, warnings as errors (ggml.h and ggml-cpu.h compile clean under them), no fast-math
nice cc -std=c11 -O2 -march=native -Wall -Wextra -Werror -I include -I "$GGML/include" \
    bench/ggml_delta.c -o build/ggml_delta/ggml_delta \
    build/cpu/libgdn.a "${LIBS[@]}" -lstdc++ -lm -lpthread

COMMIT=$(git -C "$GGML" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
echo "# $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg); libgdn $(git -C "$ROOT" rev-parse --short=7 HEAD)" >&2
exec ./build/ggml_delta/ggml_delta --commit "$COMMIT" "$@"
