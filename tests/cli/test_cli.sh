#!/usr/bin/env bash
# The CLI against hostile arguments: every number is parsed strictly (junk, overflow, out of range: a clear error
# on stderr and exit 2, nothing run), --help goes to stdout with exit 0, an unallocatable window is reported as
# out of memory (exit 1, no "differs from ref"), and --json lines are JSON. Usage: test_cli.sh path/to/gdn
set -u
GDN=${1:?usage: test_cli.sh path/to/gdn}
pass=0 fail=0
expect() { # expect RC DESCRIPTION -- ARGS...: runs gdn ARGS with a 60 s limit, checks its exit status
    local want=$1 what=$2
    shift 3
    local out err rc
    out=$(mktemp) err=$(mktemp)
    timeout 60 "$GDN" "$@" >"$out" 2>"$err"
    rc=$?
    if [[ $rc == "$want" ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: gdn $* ($what): exit $rc, want $want"; head -3 "$err"; fi
    LAST_OUT=$(cat "$out") LAST_ERR=$(cat "$err")
    rm -f "$out" "$err"
}
check() { # check CONDITION-STATUS DESCRIPTION
    if [[ $1 == 0 ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi
}

for t in 0 -1 288230376151711744 1152921504606846976 4611686018427387904 9223372036854775807 9223372036854775808 \
    99999999999999999999 "$(printf '9%.0s' $(seq 1 100000))" 1e3 2junk " 5" "5 " "" 0x10 +7 -- 1.5; do
    expect 2 "bad --T" -- run --T "$t"
    check "$([[ -z $LAST_OUT && -n $LAST_ERR ]]; echo $?)" "run --T '${t:0:24}': an error on stderr, nothing on stdout"
done
expect 2 "--T without a value" -- run --T
for r in 0 4294967297 -3 1e2 7x ""; do expect 2 "bad --reps" -- bench --reps "$r"; done
expect 2 "bad --dtype" -- bench --dtype f64
expect 2 "unknown command" -- frobnicate
expect 2 "no command" --
for h in --help -h help; do
    expect 0 "help" -- $h
    check "$([[ -n $LAST_OUT && -z $LAST_ERR ]]; echo $?)" "gdn $h prints usage to stdout only"
done
expect 0 "run --help" -- run --help
expect 0 "bench --help" -- bench --help
expect 0 "layer --help" -- layer --help
check "$([[ -n $LAST_OUT && -z $LAST_ERR ]]; echo $?)" "gdn layer --help prints usage to stdout only"
for v in 17 0 8192 x; do expect 2 "bad --hv" -- layer --hv "$v"; done
expect 2 "unknown layer option" -- layer --frobnicate
# an unallocatable window: out of memory, reported as such
expect 1 "unallocatable T" -- run --T 1073741824
check "$([[ $LAST_ERR == *"out of memory"* && $LAST_OUT != *differs* && $LAST_ERR != *differs* ]]; echo $?)" \
    "an unallocatable T reports out of memory only"
# --json: every line parses as JSON (python3, when present); a short run of the quick sweep on one kernel
if command -v python3 >/dev/null; then
    expect 0 "bench --json" -- bench --json --quick --reps 1 --kernel ref
    printf '%s\n' "$LAST_OUT" | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    if line.strip():
        json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        n += 1
sys.exit(0 if n > 0 else 1)'
    check $? "bench --json lines are strict JSON (no inf, no nan)"
fi
# GDN_SPIN_US: reported as read; with 0 (workers sleep at once) every kernel still gives ref's bits
out=$(GDN_SPIN_US=abc timeout 60 "$GDN" list 2>&1)
check "$([[ $out == *"GDN_SPIN_US='abc' (not understood, ignored): idle CPU workers poll 100 us"* ]]; echo $?)" \
    "gdn list reports GDN_SPIN_US=abc as not understood"
out=$(GDN_SPIN_US=0 timeout 60 "$GDN" list 2>&1)
check "$([[ $out == *"GDN_SPIN_US='0': idle CPU workers poll 0 us"* ]]; echo $?)" "gdn list reports GDN_SPIN_US=0"
GDN_SPIN_US=0 GDN_THREADS=2 timeout 120 "$GDN" check > /dev/null 2>&1
check $? "GDN_SPIN_US=0 GDN_THREADS=2 gdn check: every kernel bitwise equal to ref"
echo "cli: $pass passed, $fail failed"
[[ $fail == 0 ]]
