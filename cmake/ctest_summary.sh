#!/bin/sh
# After ctest (make test / make sanitize): each suite's "N passed, N failed" line from the harness, and their sum,
# read from ctest's log of the run.   usage: ctest_summary.sh BUILD_DIR
log=$1/Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
awk '
/^[0-9]+\/[0-9]+ Testing: / { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); next }
/^[0-9]+ passed, [0-9]+ failed$/ && name != "" {
    line[name] = $0; p += $1; f += $3; if ($1 + $3 == 0) skipped = skipped " " name; n++; next
}
END {
    if (n == 0) exit
    printf "harness, per ctest test:\n"
    for (k in line) printf "  %-56s %s\n", k, line[k] | "sort"
    close("sort")
    if (skipped != "") printf "  (nothing compiled in for:%s)\n", skipped
    printf "harness: %d passed, %d failed (%d ctest tests)\n", p, f, n
}' "$log"
