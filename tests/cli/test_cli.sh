#!/usr/bin/env bash
# The CLI against hostile arguments: every number is parsed strictly (junk, overflow, out of range: a clear error
# on stderr and exit 2, nothing run), an unknown command, option or value and a missing value are named on stderr
# (exit 2), every command's --help goes to stdout with exit 0, an unallocatable window is reported as out of memory
# (exit 1, no "differs from ref"), --json lines are JSON, bench's progress never shows between its table's lines
# (none off a terminal; on one, erased before each row), and the run and layer tables have their legends under
# them. Usage: test_cli.sh path/to/gdn
set -u
GDN=${1:?usage: test_cli.sh path/to/gdn}
pass=0 fail=0
BENCH_LIMIT=400 # s: a quick bench fills pools of 4x the last-level cache per shape (minutes under a sanitizer)
expect() { # expect RC DESCRIPTION -- ARGS...: runs gdn ARGS with a limit of $LIMIT s (60), checks its exit status
    local want=$1 what=$2
    shift 3
    local out err rc
    out=$(mktemp) err=$(mktemp)
    timeout "${LIMIT:-60}" "$GDN" "$@" >"$out" 2>"$err"
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
check "$([[ $LAST_ERR == *"--T needs a value"* ]]; echo $?)" "run --T: the missing value is named"
for r in 0 4294967297 -3 1e2 7x ""; do
    expect 2 "bad --reps" -- bench --reps "$r"
    check "$([[ $LAST_ERR == *"--reps takes "*"'$r'"* ]]; echo $?)" "bench --reps '$r': the value is named"
done
expect 2 "bad --dtype" -- bench --dtype f64
check "$([[ $LAST_ERR == *"--dtype takes "*"'f64'"* ]]; echo $?)" "bench --dtype f64: the value is named"
expect 2 "bad --layout" -- bench --layout qq
check "$([[ $LAST_ERR == *"--layout takes "*"'qq'"* ]]; echo $?)" "bench --layout qq: the value is named"
expect 2 "unknown kernel" -- bench --kernel nosuch
check "$([[ $LAST_ERR == *nosuch* ]]; echo $?)" "bench --kernel nosuch: the kernel is named"
for o in --kernel --reps --dtype --layout; do
    expect 2 "$o without a value" -- bench $o
    check "$([[ $LAST_ERR == *"$o needs a value"* ]]; echo $?)" "bench $o: the missing value is named"
done
expect 2 "unknown command" -- frobnicate
check "$([[ $LAST_ERR == *"unknown command 'frobnicate'"* && $LAST_ERR == *usage* && -z $LAST_OUT ]]; echo $?)" \
    "gdn frobnicate: the command is named, then the usage, on stderr"
expect 2 "no command" --
check "$([[ $LAST_ERR == *"no command"* && $LAST_ERR == *usage* ]]; echo $?)" "gdn: says that no command was given"
for h in --help -h help; do
    expect 0 "help" -- $h
    check "$([[ -n $LAST_OUT && -z $LAST_ERR ]]; echo $?)" "gdn $h prints usage to stdout only"
done
# every command: its own help (stdout, exit 0); an unknown option named (stderr, exit 2, nothing on stdout)
for c in run layer bench check list; do
    for h in --help -h; do
        expect 0 "$c $h" -- $c $h
        check "$([[ $LAST_OUT == "usage: gdn $c"* && $(wc -l <<< "$LAST_OUT") -ge 2 && -z $LAST_ERR ]]; echo $?)" \
            "gdn $c $h prints its own help to stdout only"
    done
    expect 2 "unknown $c option" -- $c --frobnicate
    check "$([[ $LAST_ERR == *"gdn $c: unknown option '--frobnicate'"* && -z $LAST_OUT ]]; echo $?)" \
        "gdn $c --frobnicate: the option is named on stderr"
done
for c in check list; do
    expect 2 "$c with an argument" -- $c extra
    check "$([[ $LAST_ERR == *"'extra'"* && -z $LAST_OUT ]]; echo $?)" "gdn $c extra: the argument is named"
done
for v in 17 0 8192 x; do
    expect 2 "bad --hv" -- layer --hv "$v"
    check "$([[ $LAST_ERR == *"--hv takes "*"'$v'"* ]]; echo $?)" "layer --hv '$v': the value is named"
done
expect 2 "--hv without a value" -- layer --hv
check "$([[ $LAST_ERR == *"--hv needs a value"* ]]; echo $?)" "layer --hv: the missing value is named"
# an unallocatable window: out of memory, reported as such
expect 1 "unallocatable T" -- run --T 1073741824
check "$([[ $LAST_ERR == *"out of memory"* && $LAST_OUT != *differs* && $LAST_ERR != *differs* ]]; echo $?)" \
    "an unallocatable T reports out of memory only"
# --json: every line parses as JSON (python3, when present); a short run of the quick sweep on one kernel
if command -v python3 >/dev/null; then
    LIMIT=$BENCH_LIMIT expect 0 "bench --json" -- bench --json --quick --reps 1 --kernel ref
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
check "$([[ $LAST_ERR != *"checking"* && $LAST_ERR != *"timing"* && $LAST_ERR != *"filling"* ]]; echo $?)" \
    "bench off a terminal: no progress lines on stderr"
# on a terminal (script(1) gives it one, stdout and stderr both on it): what the terminal shows, each line's text
# after its last erase (CR, ESC [K), holds no progress line, and every table row is whole
if command -v script >/dev/null && command -v python3 >/dev/null; then
    log=$(mktemp)
    timeout $BENCH_LIMIT script -qfec "$(printf '%q ' "$GDN" bench --quick --reps 1 --kernel ref)" /dev/null > "$log" 2>&1
    check $? "bench on a terminal: exit 0"
    python3 - "$log" <<'PY'
import re, sys
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r\n", "\n")
shown = [re.split(r"\r(?:\x1b\[K)?", line)[-1] for line in raw.split("\n")]  # what each line shows at the end
row = re.compile(r"(prefill|decode) +\d+ +\d+  ref +cpu +\d+\.\d+ .* (yes|-) +\d+$")
rows = [line for line in shown if row.match(line)]
sys.exit(0 if len(rows) == 5 and not any("[bench]" in line for line in shown) else 1)
PY
    check $? "bench on a terminal: its progress is erased before each table row (5 whole rows, no [bench] line)"
    rm -f "$log"
fi
# run's and layer's tables: their legends under them, each column explained once
expect 0 "run --T 1" -- run --T 1
legend_ok=$(printf '%s' "$LAST_OUT" | python3 -c '
import sys
out = sys.stdin.read()
def under(word, header):  # explained once, below the table header
    return out.count(word) == 1 and out.index(word) > out.index(header)
h1, h2 = "dtype kernel", "kernel       back"
ok = under("vs ref: ", h1) and under("rel L2 y, S: ", h1) and under("commit: ", h2) and under("floor: copy", h2)
parts = out.split("==ref: ")  # one per table, under it: the recurrence, then the layer step
ok = ok and len(parts) == 3 and h1 in parts[0] and h2 in parts[1] and h2 not in parts[0]
print(int(ok))' 2>/dev/null)
check "$([[ $legend_ok == 1 ]]; echo $?)" "gdn run: each table's legend under it (commit, floor, ==ref explained once)"
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
