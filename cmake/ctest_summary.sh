#!/bin/sh
# After ctest (make test / make sanitize): each suite's "N passed, N failed, K skipped" line from the harness (or
# "N passed, N failed" from a script), and their sum, read from ctest's log of the run. A skipped test is one that
# could not run here (no CUDA device, or not compiled into this build); it is never counted as passed.
#   usage: ctest_summary.sh BUILD_DIR
log=$1/Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
awk '
/^[0-9]+\/[0-9]+ Testing: / { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); next }
/^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$/ && name != "" {
    line[name] = $0; p += $1; f += $3; s += $5; n++
    if ($1 + $3 == 0 && $5 > 0) ns++
    next
}
END {
    if (n == 0) exit
    printf "harness, per ctest test:\n"
    for (k in line) printf "  %-56s %s\n", k, line[k] | "sort"
    close("sort")
    printf "harness: %d passed, %d failed, %d skipped (%d ctest tests, %d of them skipped)\n", p, f, s, n, ns
}' "$log"
