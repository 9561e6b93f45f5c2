#!/usr/bin/env bash
# The harness's skip reporting (tests/harness.c): with the CUDA devices hidden (CUDA_VISIBLE_DEVICES=; in a build
# without CUDA they are not compiled in), every test of a tests/**/*cuda*.c file but those named *without_device*
# is reported skipped, never passed, and a run of it alone exits the skip code (ctest's SKIP_RETURN_CODE); each
# *without_device* test passes; a run mixing both exits 0 and counts the skips; a filter matching no test fails.
# usage: harness_skip.sh path/to/test_gdn SKIP_CODE TESTS_DIR
set -u
BIN=${1:?usage: harness_skip.sh path/to/test_gdn SKIP_CODE TESTS_DIR} CODE=${2:?} DIR=${3:?}
pass=0 fail=0
check() { # check CONDITION-STATUS DESCRIPTION
    if [[ $1 == 0 ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $2"
        printf '%s\n' "$OUT" | tail -3
    fi
}
run() { # run FILTER: test_gdn FILTER with the devices hidden and the CUDA pointer check on; sets OUT and RC
    OUT=$(CUDA_VISIBLE_DEVICES= GDN_CHECK_POINTERS=1 GDN_TEST_QUICK=1 timeout 120 "$BIN" "$1" 2>&1)
    RC=$?
}
device=() nodevice=()
while read -r name; do
    if [[ $name == *without_device* ]]; then nodevice+=("$name"); else device+=("$name"); fi
done < <(find "$DIR" -name '*cuda*.c' -exec sed -n 's/^[ \t]*TEST(\([A-Za-z0-9_]*\)).*/\1/p' {} + | sort -u)
check "$([[ ${#device[@]} -gt 0 && ${#nodevice[@]} -gt 0 ]]; echo $?)" "tests found in $DIR/**/*cuda*.c"
for t in "${device[@]}"; do
    run "$t"
    check "$([[ $RC == "$CODE" && $OUT == *"skip $t: "* && $OUT == *"0 passed, 0 failed, 1 skipped" ]]; echo $?)" \
        "$t without a device: exit $RC (want $CODE), reported skipped"
done
for t in "${nodevice[@]}"; do
    run "$t"
    check "$([[ $RC == 0 && $OUT == *"ok   $t ("* && $OUT == *"1 passed, 0 failed, 0 skipped" ]]; echo $?)" \
        "$t without a device: exit $RC (want 0), passed"
done
run cuda_ # test_cuda.c's and test_cuda_streams.c's tests: some pass, the device ones skip
n=0
for t in "${device[@]}"; do [[ $t == *cuda_* ]] && n=$((n + 1)); done
check "$([[ $RC == 0 && $OUT == *" passed, 0 failed, $n skipped" && $OUT != *"ok   cuda_kernels"* ]]; echo $?)" \
    "test_gdn cuda_ without a device: exit $RC (want 0), $n skipped"
run no_such_test_anywhere
check "$([[ $RC == 1 ]]; echo $?)" "a filter that matches no test: exit $RC (want 1)"
echo "harness_skip: $pass passed, $fail failed"
[[ $fail == 0 ]]
