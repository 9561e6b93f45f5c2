# shellcheck shell=bash
# Sourced by bench/ggml_layer.sh and bench/ggml_delta.sh, from the repository root:
#   ggml_prepare NAME [GGML_DIR] [-- options...]
# finds the ggml checkout (GGML_DIR, default third_party/ggml, git-ignored; nothing is fetched), checks it has
# ggml_gated_delta_net, builds ggml in GGML_DIR/build if it has no libraries yet (CPU only, Release, GGML_NATIVE=ON,
# no OpenMP), brings libgdn's static library in build/cpu up to date, then compiles bench/NAME.c (C11, warnings as
# errors) into build/NAME/NAME. Sets GGML_COMMIT and ARGS (the options after the directory and `--`).
ggml_prepare() {
    local name=$1 ggml=third_party/ggml jobs=${JOBS:-2}
    shift
    if [[ $# -gt 0 && $1 != -- ]]; then ggml=$1; shift; fi
    [[ ${1:-} == -- ]] && shift
    ARGS=("$@")
    ggml=$(cd "$ggml" 2>/dev/null && pwd) || { echo "$name.sh: no ggml checkout at $ggml (clone ggml-org/ggml there)" >&2; exit 2; }
    grep -q ggml_gated_delta_net "$ggml/include/ggml.h" || { echo "$name.sh: $ggml has no ggml_gated_delta_net" >&2; exit 2; }
    local libs=("$ggml/build/src/libggml.a" "$ggml/build/src/libggml-cpu.a" "$ggml/build/src/libggml-base.a")
    local gen=() # Ninja where the machine has it
    command -v ninja > /dev/null && gen=(-G Ninja)
    if [[ ! -f ${libs[1]} ]]; then
        cmake -S "$ggml" -B "$ggml/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
            -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DBUILD_SHARED_LIBS=OFF \
            -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
        nice -n 10 cmake --build "$ggml/build" -j "$jobs"
    fi
    [[ -f build/cpu/CMakeCache.txt ]] || cmake -S . -B build/cpu "${gen[@]}" -DGDN_CUDA=OFF >/dev/null
    nice cmake --build build/cpu -j "$jobs" --target libgdn_static >/dev/null # this checkout's, up to date
    mkdir -p "build/$name"
    # our code: C11, warnings as errors (ggml.h and ggml-cpu.h compile clean under them), no fast-math
    nice cc -std=c11 -O2 -march=native -Wall -Wextra -Werror -I include -I "$ggml/include" \
        "bench/$name.c" -o "build/$name/$name" build/cpu/libgdn.a "${libs[@]}" -lstdc++ -lm -lpthread
    GGML_COMMIT=$(git -C "$ggml" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
    echo "# $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg);" \
        "libgdn $(git rev-parse --short=7 HEAD)" >&2
}
