#!/bin/sh
# ctest exports_only_gdn: every symbol that libgdn.so defines in its dynamic table is public (gdn_ followed by a
# letter or digit: none of the private gdn__), and gdn_delta is one of them.   usage: check_exports.sh NM LIB
nm=$1
lib=$2
syms=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 {print $3}') || exit 1
count=$(printf '%s\n' "$syms" | grep -c .)
bad=$(printf '%s\n' "$syms" | grep -v '^gdn_[a-zA-Z0-9]')
if [ -n "$bad" ]; then
    echo "$lib exports symbols it must not:"
    printf '%s\n' "$bad"
    exit 1
fi
if ! printf '%s\n' "$syms" | grep -qx gdn_delta; then
    echo "$lib does not export gdn_delta"
    exit 1
fi
echo "$lib: $count symbols exported, all gdn_"
printf '%s\n' "$syms" | tr '\n' ' '
echo
