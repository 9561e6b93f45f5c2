#!/bin/sh
# ctest install_consumer: installs the build into a fresh prefix and builds tests/install/consumer.c against it
#   - through pkg-config (PKG_CONFIG_PATH=prefix/lib/pkgconfig): gdn (libgdn.so, found through an rpath, and once
#     without one through LD_LIBRARY_PATH) and gdn-static, with and without --static (libgdn.a with its needs), and
#   - through find_package(libgdn) in the sub-project tests/install/CMakeLists.txt (libgdn::gdn, libgdn::gdn_static);
# then runs the programs and checks what each links (readelf's NEEDED and ldd): libgdn.so.SOVERSION from the
# prefix, or no libgdn at all.
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
[ -e "$prefix/lib/pkgconfig/gdn-static.pc" ] || fail "lib/pkgconfig/gdn-static.pc not installed"
for pc in gdn gdn-static; do
    pcversion=$(pkg-config --modversion $pc)
    [ "$pcversion" = "$version" ] || fail "$pc.pc version '$pcversion', expected $version"
done
cflags=$(pkg-config --cflags gdn)
# pc KIND EXTRA ARGS...: consumer_KIND built with $(pkg-config ARGS) and the link flags EXTRA, as the README says
pc() {
    kind=$1 extra=$2
    shift 2
    libs=$(pkg-config "$@")
    step "pkg-config $*: $cc $cflags consumer.c $libs $extra"
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Werror -pedantic $cflags "$here/consumer.c" -o "$work/consumer_$kind" $libs $extra
}
pc pc_shared "-Wl,-rpath,$prefix/lib" --libs gdn
pc pc_shared_norpath "" --libs gdn
pc pc_static "" --libs gdn-static
pc pc_static_flag "" --static --libs gdn-static

step "find_package(libgdn $version): the sub-project tests/install"
if ! "$cmake" -S "$here" -B "$work/consumer" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_PREFIX_PATH="$prefix" -DGDN_EXPECT_VERSION="$version" > "$work/consumer_configure.log" 2>&1 ||
   ! "$cmake" --build "$work/consumer" > "$work/consumer_build.log" 2>&1; then
    cat "$work/consumer_configure.log" "$work/consumer_build.log" 2> /dev/null
    fail "the find_package consumer did not build"
fi
grep 'libgdn .* from' "$work/consumer_configure.log" | sed 's/^/   /'

# with_path KIND CMD...: CMD, with LD_LIBRARY_PATH=prefix/lib for the consumer linked without an rpath
with_path() {
    case $1 in
    *norpath) shift; LD_LIBRARY_PATH="$prefix/lib" "$@" ;;
    *) shift; "$@" ;;
    esac
}
n=0
for kind in pc_shared pc_shared_norpath pc_static pc_static_flag cmake_shared cmake_static; do
    exe=$work/consumer_$kind
    [ -x "$exe" ] || exe=$work/consumer/consumer_$kind
    deps=$(needed "$exe")
    linked=$(with_path $kind ldd "$exe" | grep libgdn || true)
    case $kind in
    *shared*)
        case " $deps" in *" libgdn.so.$soversion "*) ;; *) fail "$kind does not link libgdn.so.$soversion: $deps" ;; esac
        case $linked in
        *"=> $prefix/lib/libgdn.so.$soversion "*) ;;
        *) fail "$kind: ldd finds libgdn at '$linked'" ;;
        esac ;;
    *static*)
        case " $deps" in *libgdn*) fail "$kind links a shared libgdn: $deps" ;; esac
        [ -z "$linked" ] || fail "$kind: ldd shows a shared libgdn: $linked" ;;
    esac
    step "run $kind (needs: $deps)"
    with_path $kind "$exe" || fail "$kind failed"
    n=$((n + 1))
done
echo "install test: $n consumers built and run"
