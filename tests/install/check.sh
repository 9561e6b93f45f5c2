#!/bin/sh
# ctest install_consumer: installs the build into a fresh prefix and builds tests/install/consumer.c against it
#   - through pkg-config, shared (-lgdn: libgdn.so, found through an rpath) and --static (libgdn.a with
#     Libs.private), and
#   - through find_package(libgdn) in the sub-project tests/install/CMakeLists.txt (libgdn::gdn, libgdn::gdn_static);
# then runs the four programs and checks what each links: libgdn.so.SOVERSION, or no libgdn at all.
#
#   usage: check.sh CMAKE BUILD_DIR WORK_DIR CC GENERATOR VERSION SOVERSION
set -eu
cmake=$1 build=$2 work=$3 cc=$4 generator=$5 version=$6 soversion=$7
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

step() { echo "-- $*"; }
fail() { echo "install test: $*" >&2; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | tr '\n' ' '; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "install failed"; }
for f in include/gdn.h lib/libgdn.a lib/libgdn.so "lib/libgdn.so.$soversion" lib/pkgconfig/gdn.pc \
         lib/cmake/libgdn/libgdnConfig.cmake lib/cmake/libgdn/libgdnConfigVersion.cmake lib/cmake/libgdn/libgdnTargets.cmake; do
    [ -e "$prefix/$f" ] || fail "$f not installed"
done
soname=$(readelf -d "$prefix/lib/libgdn.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libgdn.so.$soversion" ] || fail "soname '$soname', expected libgdn.so.$soversion"
echo "   installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"
echo "   soname $soname"

command -v pkg-config > /dev/null || fail "pkg-config not found"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pcversion=$(pkg-config --modversion gdn)
[ "$pcversion" = "$version" ] || fail "gdn.pc version '$pcversion', expected $version"
cflags=$(pkg-config --cflags gdn)
libs=$(pkg-config --libs gdn)
# --static: the Libs.private too; -lgdn becomes -l:libgdn.a, as -lgdn alone would take libgdn.so beside it
static_libs=$(pkg-config --libs --static gdn | sed 's/\(^\| \)-lgdn\( \|$\)/\1-l:libgdn.a\2/')
step "pkg-config shared: $cc $cflags consumer.c $libs"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic $cflags "$here/consumer.c" -o "$work/consumer_pc_shared" $libs \
    -Wl,-rpath,"$prefix/lib"
step "pkg-config --static: $cc $cflags consumer.c $static_libs"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic $cflags "$here/consumer.c" -o "$work/consumer_pc_static" $static_libs

step "find_package(libgdn $version): the sub-project tests/install"
if ! "$cmake" -S "$here" -B "$work/consumer" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_PREFIX_PATH="$prefix" -DGDN_EXPECT_VERSION="$version" > "$work/consumer_configure.log" 2>&1 ||
   ! "$cmake" --build "$work/consumer" > "$work/consumer_build.log" 2>&1; then
    cat "$work/consumer_configure.log" "$work/consumer_build.log" 2> /dev/null
    fail "the find_package consumer did not build"
fi
grep 'libgdn .* from' "$work/consumer_configure.log" | sed 's/^/   /'

for kind in pc_shared pc_static cmake_shared cmake_static; do
    exe=$work/consumer_$kind
    [ -x "$exe" ] || exe=$work/consumer/consumer_$kind
    deps=$(needed "$exe")
    case $kind in
    *shared) case " $deps" in *" libgdn.so.$soversion "*) ;; *) fail "$kind does not link libgdn.so.$soversion: $deps" ;; esac ;;
    *static) case " $deps" in *libgdn*) fail "$kind links a shared libgdn: $deps" ;; esac ;;
    esac
    step "run $kind (needs: $deps)"
    "$exe" || fail "$kind failed"
done
echo "install test: 4 consumers built and run"
