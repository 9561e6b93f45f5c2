/* The harness: registry, checks, RNG, main. */
#define _GNU_SOURCE
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HARNESS_MAX_TESTS 512

typedef struct test_entry { const char *name; harness_fn fn; } test_entry;
static test_entry tests[HARNESS_MAX_TESTS];
static int n_tests, checks_in_test, failures_in_test;
int harness_verbose;

void harness_register(const char *name, harness_fn fn) {
    if (n_tests < HARNESS_MAX_TESTS) tests[n_tests++] = (test_entry){name, fn};
}

void harness_check(int ok, const char *file, int line, const char *expr) {
    checks_in_test++;
    if (!ok) {
        if (failures_in_test < 10) fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, expr);
        failures_in_test++;
    }
}

uint64_t rng_u64(harness_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float rng_uniform(harness_rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float rng_normal(harness_rng *r) {
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) / 9007199254740993.0, u2 = (double)(rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int main(int argc, char **argv) {
    /* enough pool threads for the 1/2/3-thread invariance tests on any machine; read once by the library */
    setenv("GDN_THREADS", "4", 0);
    harness_verbose = getenv("GDN_TEST_VERBOSE") != NULL;
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; ++i) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        checks_in_test = failures_in_test = 0;
        tests[i].fn();
        const int ok = failures_in_test == 0 && checks_in_test > 0;
        if (!ok && checks_in_test == 0) fprintf(stderr, "  FAIL %s: made no check\n", tests[i].name);
        printf("%-4s %s (%d checks)\n", ok ? "ok" : "FAIL", tests[i].name, checks_in_test);
        fflush(stdout);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
