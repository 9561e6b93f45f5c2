#!/usr/bin/env bash
# Reliability on the GPU machine (docs/RELIABILITY.md, "CUDA backend"). Builds the CUDA tests as scripts/gpu_run.sh
# does (sm_90, CMake, build/pic), runs the CUDA streams test (tests/delta/test_cuda_streams.c) in fresh processes, then
# compute-sanitizer memcheck, racecheck and synccheck over the whole sample of tests/delta/test_cuda.c: the sample is
# cut into cost tiers (B*T*Hv*Dk*Dv, smallest first) and each tier into shards, one process per shard, the three
# tools side by side, every process under one deadline so that the script ends within REL_BUDGET seconds. A tier
# that did not finish is reported with the cases it did get through. Logs under $OUT/rel/, a summary per part in
# $OUT/streams.txt and $OUT/sanitize_<tool>.txt, everything in $OUT/reliability.json; progress on stdout.
#
#   scripts/gpu_reliability.sh [all|streams|sanitize]            (default all; the build always runs)
#
# Environment (defaults): OUT (/tmp/gdn_gpu_out), REL_BUDGET (540 s in all), SAN_TOOLS ("memcheck racecheck
# synccheck"), SAN_SHARDS (4 processes per tool and tier; SAN_SHARDS_<tool> for one tool), SAN_TIERS ("0:2e6
# 2e6:3e7 3e7:3e8", lo:hi cost ranges), SAN_CASES (the sample size, GDN_TEST_CUDA_CASES; 160 as in the plain test).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${OUT:-/tmp/gdn_gpu_out}
LOGS=$OUT/rel
mkdir -p "$LOGS"
MODE=${1:-all}
J=$(nproc)
BUDGET=${REL_BUDGET:-540}
DEADLINE=$((T0 + BUDGET - 20)) # the summary needs a few seconds
TOOLS=${SAN_TOOLS:-memcheck racecheck synccheck}
SHARDS=${SAN_SHARDS:-4}
TIERS=${SAN_TIERS:-0:2e6 2e6:3e7 3e7:3e8}
export GDN_TEST_CUDA_CASES=${SAN_CASES:-160}
if [[ -d /usr/local/cuda/lib64 ]]; then CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}; else CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}; fi
SAN=${SAN_BIN:-$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")}
BIN=build/pic/test_gdn # the filters cuda_streams and cuda_kernels pick test_cuda_streams.c's and test_cuda.c's tests
status=0

say() { echo "[$(($(date +%s) - T0)) s] $*"; }
shards_of() { local v="SAN_SHARDS_$1"; echo "${!v:-$SHARDS}"; }
left() { local l=$((DEADLINE - $(date +%s))); echo $((l > 5 ? l : 5)); }
SOFT_DEADLINE=$((DEADLINE - 40)) # no new case after this (tests/delta/test_cuda.c); the one under way has 40 s

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -1
    "$SAN" --version 2>&1 | head -2
    echo "cores $J, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUT/rel_machine.txt" 2>&1
cat "$OUT/rel_machine.txt"

# ---- build: the library and the test binary as scripts/gpu_run.sh builds them (CMake, build/pic) ----
t=$(date +%s)
# shellcheck source=cmake/find_cmake.sh
. cmake/find_cmake.sh
if ! { "$CMAKE" -S . -B build/pic -DGDN_CUDA=ON -DGDN_TESTING=ON -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
           -DCUDAToolkit_ROOT="$CUDA_HOME" &&
       "$CMAKE" --build build/pic -j "$J" --target test_gdn; } > "$LOGS/build.log" 2>&1; then
    tail -40 "$LOGS/build.log"
    exit 1
fi
BUILD_S=$(($(date +%s) - t))
say "build: $BUILD_S s"

# ---- the streams test: fresh processes (each kernel's first launches in a process race), three thread counts ----
: > "$LOGS/streams_runs.txt"
if [[ $MODE == all || $MODE == streams ]]; then
    for spec in "6 32" "16 16" "3 64"; do
        set -- $spec
        t=$(date +%s)
        log=$LOGS/streams_t$1.log
        GDN_THREADS=$J GDN_TEST_STREAMS_THREADS=$1 GDN_TEST_STREAMS_ITERS=$2 timeout 60 ./"$BIN" cuda_streams > "$log" 2>&1
        rc=$?
        [[ $rc == 0 ]] || status=1
        echo "$1 $2 $rc $(($(date +%s) - t)) $log" >> "$LOGS/streams_runs.txt"
        say "streams, $1 threads x $2 rounds: rc $rc, $(($(date +%s) - t)) s: $(tail -1 "$log")"
        grep -E "cuda streams:|FAIL" "$log" | head -8
    done
fi

# ---- compute-sanitizer: tools side by side, each over the tiers in order, a tier's shards side by side ----
procs=0
for tool in $TOOLS; do procs=$((procs + $(shards_of "$tool"))); done
THREADS_PER=$((J / (procs > 0 ? procs : 1)))
((THREADS_PER < 2)) && THREADS_PER=2

# One shard: the test under the tool, at most until the deadline. Writes <log>, <log>.rc, <log>.s.
shard() {
    local tool=$1 range=$2 s=$3 log=$4 n opts="" t
    n=$(shards_of "$tool")
    [[ $tool == memcheck ]] && opts="--leak-check full"
    t=$(date +%s)
    GDN_THREADS=$THREADS_PER GDN_TEST_VERBOSE=1 GDN_TEST_CUDA_SHARD=$s/$n GDN_TEST_CUDA_COST=$range \
        GDN_TEST_CUDA_DEADLINE=$SOFT_DEADLINE timeout -k 10 "$(left)" "$SAN" --tool "$tool" $opts --error-exitcode 3 ./"$BIN" cuda_kernels > "$log" 2>&1
    echo $? > "$log.rc"
    echo $(($(date +%s) - t)) > "$log.s"
}

# One tool over the tiers; a tier starts only with at least 20 s left.
pipeline() {
    local tool=$1 tier=0 range s pids
    for range in $TIERS; do
        tier=$((tier + 1))
        if (($(left) < 20)); then
            say "$tool tier $tier ($range): not started (deadline)"
            continue
        fi
        pids=()
        for ((s = 0; s < $(shards_of "$tool"); ++s)); do
            shard "$tool" "$range" "$s" "$LOGS/${tool}_t${tier}_s${s}.log" &
            pids+=($!)
        done
        wait "${pids[@]}"
        local cases runs rcs
        cases=$(cat "$LOGS/${tool}_t${tier}"_s*.log | grep -c '^     case ')
        runs=$(cat "$LOGS/${tool}_t${tier}"_s*.log | sed -n 's/^     case [0-9]*: \([0-9]*\) runs.*/\1/p' | awk '{n += $1} END {print n + 0}')
        rcs=$(cat "$LOGS/${tool}_t${tier}"_s*.log.rc | tr '\n' ' ')
        say "$tool tier $tier ($range): $cases cases, $runs kernel runs, rc per shard: $rcs; $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/${tool}_t${tier}"_s*.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
    done
}

if [[ $MODE == all || $MODE == sanitize ]]; then
    say "compute-sanitizer: tools '$TOOLS', tiers '$TIERS', shards per tier: $(for tool in $TOOLS; do echo -n "$tool $(shards_of "$tool") "; done)GDN_THREADS=$THREADS_PER, $(left) s left"
    # the streams test under memcheck too (two threads' worth of rounds)
    (
        t=$(date +%s)
        GDN_THREADS=$THREADS_PER GDN_TEST_STREAMS_THREADS=4 GDN_TEST_STREAMS_ITERS=4 timeout -k 10 "$(left)" \
            "$SAN" --tool memcheck --leak-check full --error-exitcode 3 ./"$BIN" cuda_streams > "$LOGS/memcheck_streams.log" 2>&1
        echo $? > "$LOGS/memcheck_streams.log.rc"
        echo $(($(date +%s) - t)) > "$LOGS/memcheck_streams.log.s"
        say "memcheck over the streams test: rc $(cat "$LOGS/memcheck_streams.log.rc"): $(grep -h 'ERROR SUMMARY' "$LOGS/memcheck_streams.log")"
    ) &
    pids=($!)
    for tool in $TOOLS; do
        pipeline "$tool" &
        pids+=($!)
    done
    wait "${pids[@]}"
fi

# ---- summary ----
SHARD_COUNTS=$(for tool in $TOOLS; do echo -n "$tool=$(shards_of "$tool") "; done)
python3 - "$OUT" "$LOGS" "$BUILD_S" "$TIERS" "$SHARD_COUNTS" "$TOOLS" "$(($(date +%s) - T0))" <<'PY'
import glob, json, os, re, sys

out, logs, build_s, tiers, shards, tools, wall = sys.argv[1:8]
tiers, tools = tiers.split(), tools.split()
shard_count = {k: int(v) for k, v in (x.split("=") for x in shards.split())}
machine = open(os.path.join(out, "rel_machine.txt")).read().strip()

def read(path, default=""):
    try:
        return open(path, errors="replace").read()
    except OSError:
        return default

# sanitizer report lines (any tool; not the summaries)
REPORT = re.compile(r"^========= (?!.*SUMMARY)(Invalid|Error|Race|Barrier|Program hit|Leaked|Uninitialized|Warning|.*[Hh]azard)")

def parse_log(path):
    text = read(path)
    rc = read(path + ".rc", "").strip()
    cases = re.findall(r"^     case (\d+): (\d+) runs: (.*)$", text, re.M)
    errors = [int(x) for x in re.findall(r"ERROR SUMMARY: (\d+) error", text)]
    race = re.findall(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    final = re.search(r"cuda: (\d+) cases, (\d+) kernel runs bitwise equal to ref .*, (\d+) of them for the deadline", text)
    return {
        "log": os.path.relpath(path, out), "rc": int(rc) if rc.lstrip("-").isdigit() else None,
        "seconds": int(read(path + ".s", "0").strip() or 0), "cases": len(cases),
        "kernel_runs": sum(int(r) for _, r, _ in cases),
        "complete": bool(final) and final.group(3) == "0" and rc in ("0", "1", "3"),
        "late": int(final.group(3)) if final else None,
        "error_summary": sum(errors) if errors else None,
        "hazards": [list(map(int, h)) for h in race],
        "report_lines": sum(1 for line in text.splitlines() if REPORT.match(line)),
        "test_failures": len(re.findall(r"^  FAIL ", text, re.M)),
        "last_case": cases[-1][2] if cases else None,
    }

result = {"machine": machine, "build_s": int(build_s), "wall_s": int(wall), "streams": [], "sanitize": {}}
lines = []
for row in read(os.path.join(logs, "streams_runs.txt")).split("\n"):
    if not row.strip():
        continue
    threads, iters, rc, secs, log = row.split()
    text = read(log)
    result["streams"].append({"threads": int(threads), "rounds": int(iters), "rc": int(rc), "seconds": int(secs),
                              "log": os.path.relpath(log, out), "summary": re.findall(r"^     cuda streams: .*$", text, re.M),
                              "failures": re.findall(r"^  FAIL .*$|^    \S.*$", text, re.M)[:20],
                              "tests": re.findall(r"^(ok|FAIL) +(\S+)", text, re.M)})
ms = parse_log(os.path.join(logs, "memcheck_streams.log")) if os.path.exists(os.path.join(logs, "memcheck_streams.log")) else None
result["memcheck_streams"] = ms
with open(os.path.join(out, "streams.txt"), "w") as f:
    for s in result["streams"]:
        f.write("%d threads x %d rounds: rc %d, %d s\n" % (s["threads"], s["rounds"], s["rc"], s["seconds"]))
        for line in s["summary"] + s["failures"]:
            f.write("  " + line.strip() + "\n")
    if ms:
        f.write("under memcheck (4 threads x 4 rounds): rc %s, %d s, ERROR SUMMARY %s, %d report lines, %d test failures\n"
                % (ms["rc"], ms["seconds"], ms["error_summary"], ms["report_lines"], ms["test_failures"]))

for tool in tools:
    t = {"shards_per_tier": shard_count[tool], "tiers": []}
    for i, rng in enumerate(tiers, 1):
        shard_logs = [os.path.join(logs, "%s_t%d_s%d.log" % (tool, i, s)) for s in range(shard_count[tool])]
        started = [p for p in shard_logs if os.path.exists(p)]
        parsed = [parse_log(p) for p in started]
        t["tiers"].append({
            "cost_range": rng, "started": bool(started), "complete": bool(started) and all(p["complete"] for p in parsed),
            "cases": sum(p["cases"] for p in parsed), "kernel_runs": sum(p["kernel_runs"] for p in parsed),
            "errors": sum(p["error_summary"] or 0 for p in parsed),
            "hazards": sum(h[0] for p in parsed for h in p["hazards"]),
            "report_lines": sum(p["report_lines"] for p in parsed),
            "test_failures": sum(p["test_failures"] for p in parsed),
            "max_shard_s": max([p["seconds"] for p in parsed], default=0), "shards": parsed})
    t["cases"] = sum(x["cases"] for x in t["tiers"])
    t["kernel_runs"] = sum(x["kernel_runs"] for x in t["tiers"])
    t["errors"] = sum(x["errors"] for x in t["tiers"])
    t["hazards"] = sum(x["hazards"] for x in t["tiers"])
    t["report_lines"] = sum(x["report_lines"] for x in t["tiers"])
    t["complete_tiers"] = [x["cost_range"] for x in t["tiers"] if x["complete"]]
    result["sanitize"][tool] = t
    with open(os.path.join(out, "sanitize_%s.txt" % tool), "w") as f:
        f.write("compute-sanitizer --tool %s over tests/delta/test_cuda.c's sample (GDN_TEST_CUDA_CASES=%s), %d shards per tier\n"
                % (tool, os.environ.get("GDN_TEST_CUDA_CASES", "160"), shard_count[tool]))
        f.write("%-12s %-9s %6s %8s %7s %8s %9s %9s %6s\n" % ("cost range", "complete", "cases", "k.runs", "errors",
                                                                "hazards", "rep.lines", "failures", "max s"))
        for x in t["tiers"]:
            f.write("%-12s %-9s %6d %8d %7d %8d %9d %9d %6d\n" % (x["cost_range"], "yes" if x["complete"] else
                    ("no" if x["started"] else "not run"), x["cases"], x["kernel_runs"], x["errors"], x["hazards"],
                    x["report_lines"], x["test_failures"], x["max_shard_s"]))
            for p in x["shards"]:
                if not p["complete"]:
                    f.write("    %s: rc %s after %d s, %d cases done (%s left for the deadline), last: %s\n"
                            % (p["log"], p["rc"], p["seconds"], p["cases"], p["late"] if p["late"] is not None else "?",
                               p["last_case"]))
        f.write("total: %d cases, %d kernel runs, %d errors, %d hazards, %d report lines\n"
                % (t["cases"], t["kernel_runs"], t["errors"], t["hazards"], t["report_lines"]))

json.dump(result, open(os.path.join(out, "reliability.json"), "w"), indent=1)
print("---- summary (%d s in all) ----" % int(wall))
print(open(os.path.join(out, "streams.txt")).read().rstrip())
for tool in tools:
    print(open(os.path.join(out, "sanitize_%s.txt" % tool)).read().rstrip())
PY
[[ -s $OUT/reliability.json ]] || status=1
if [[ $MODE != streams ]] && grep -qE '"(errors|hazards|report_lines|test_failures)": [1-9]' "$OUT/reliability.json"; then status=1; fi
exit $status
