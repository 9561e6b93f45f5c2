# shellcheck shell=bash
# Sourced by the scripts/gpu_*.sh that build with CMake or use the wheels in .whl/ (the GPU machine has no network).
#   gpu_build TARGET...   configures build/pic (CUDA sm_90, GDN_TESTING) and builds the targets, the log in
#                         $OUT/build.log; returns 1 (after its tail) when either step fails
#   gpu_shared LOG        `make shared GDN_CUDA=1` (build/pic/libgdn.so, which python/libgdn loads in a checkout),
#                         the log in $OUT/LOG; returns 1 (after its tail) when it fails
#   gpu_wheels            installs .whl/*.whl into /tmp/site (no index, no dependencies) and puts it on PYTHONPATH
# shellcheck source=cmake/find_cmake.sh
. cmake/find_cmake.sh
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

gpu_build() {
    if ! { "$CMAKE" -S . -B build/pic -DGDN_CUDA=ON -DGDN_TESTING=ON -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" &&
           "$CMAKE" --build build/pic -j "$(nproc)" --target "$@"; } > "$OUT/build.log" 2>&1; then
        tail -40 "$OUT/build.log"
        return 1
    fi
}

gpu_shared() {
    if ! make shared GDN_CUDA=1 J="$(nproc)" > "$OUT/$1" 2>&1; then
        tail -30 "$OUT/$1"
        return 1
    fi
}

gpu_wheels() {
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
}
