# Sourced by scripts/gpu_run.sh and scripts/gpu_reliability.sh: sets CMAKE to a cmake of at least 3.20 (what
# CMakeLists.txt needs): $CMAKE if set, else the system's, else the one of Python's cmake package (pip install
# cmake), else that package installed from a wheel in .whl/ (the GPU machine has no network) into /tmp/gdn_cmake.
gdn_cmake_ok() {
    local v
    v=$("$1" --version 2> /dev/null | sed -n '1s/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [[ -n $v ]] && set -- $v && (($1 > 3 || ($1 == 3 && $2 >= 20)))
}
gdn_find_cmake() {
    local c dir
    for c in "${CMAKE:-}" "$(command -v cmake 2> /dev/null)"; do
        [[ -n $c ]] && gdn_cmake_ok "$c" && { CMAKE=$c; return 0; }
    done
    dir=$(python3 -c 'import cmake; print(cmake.CMAKE_BIN_DIR)' 2> /dev/null)
    [[ -n $dir ]] && gdn_cmake_ok "$dir/cmake" && { CMAKE=$dir/cmake; return 0; }
    if ls .whl/cmake-*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --find-links .whl --target /tmp/gdn_cmake cmake \
            > /dev/null 2>&1
        c=$(find /tmp/gdn_cmake -path '*/bin/cmake' -type f 2> /dev/null | head -1)
        [[ -n $c ]] && gdn_cmake_ok "$c" && { CMAKE=$c; return 0; }
    fi
    echo "no cmake >= 3.20: install one (apt-get install cmake, pip install cmake, or a cmake wheel in .whl/)" >&2
    return 1
}
gdn_find_cmake || exit 1
