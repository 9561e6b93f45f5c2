/* The harness: registry, checks, RNG, main. */
#define _GNU_SOURCE
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"

#define HARNESS_MAX_TESTS 512

typedef struct test_entry { const char *name; harness_fn fn; } test_entry;
static test_entry tests[HARNESS_MAX_TESTS];
static int n_tests, checks_in_test, failures_in_test;
static char skip_reason[256]; /* the running test's SKIP reason; "" while it has not skipped */
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

void harness_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
    if (!skip_reason[0]) snprintf(skip_reason, sizeof skip_reason, "(no reason given)");
}

static int registered(const char *name) {
    for (int i = 0; i < n_tests; ++i)
        if (strcmp(tests[i].name, name) == 0) return 1;
    return 0;
}

/* argv[1] selects the test of that name, or else every test whose name contains it */
static const char *filter;
static int exact;
static int selected(const char *name) {
    return !filter || (exact ? strcmp(name, filter) == 0 : strstr(name, filter) != NULL);
}

uint64_t rng_u64(harness_rng *r) { return gdn__splitmix64(&r->s); }

float rng_uniform(harness_rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float rng_normal(harness_rng *r) {
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) / 9007199254740993.0, u2 = (double)(rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int main(int argc, char **argv) {
    /* enough pool threads for the 1/2/3-thread invariance tests on any machine; read once by the library */
    setenv("GDN_THREADS", "4", 0);
    harness_verbose = getenv("GDN_TEST_VERBOSE") != NULL;
    filter = argc > 1 ? argv[1] : NULL;
    exact = filter && registered(filter);
    for (int i = 0; filter && !exact && harness_source_tests[i]; ++i)
        exact = strcmp(harness_source_tests[i], filter) == 0;
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_tests; ++i) {
        if (!selected(tests[i].name)) continue;
        checks_in_test = failures_in_test = 0;
        skip_reason[0] = 0;
        tests[i].fn();
        if (failures_in_test == 0 && skip_reason[0]) {
            printf("skip %s: %s", tests[i].name, skip_reason);
            if (checks_in_test > 0) printf(" (%d checks before)", checks_in_test);
            printf("\n");
            skipped++;
        } else {
            const int ok = failures_in_test == 0 && checks_in_test > 0;
            if (!ok && checks_in_test == 0) fprintf(stderr, "  FAIL %s: made no check\n", tests[i].name);
            printf("%-4s %s (%d checks)\n", ok ? "ok" : "FAIL", tests[i].name, checks_in_test);
            ok ? passed++ : failed++;
        }
        fflush(stdout);
    }
    /* the tests of the sources that this build did not compile in */
    for (int i = 0; harness_source_tests[i]; ++i) {
        const char *name = harness_source_tests[i];
        if (!selected(name) || registered(name)) continue;
        printf("skip %s: %s\n", name, harness_absent_reason);
        skipped++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (passed + failed + skipped == 0) fprintf(stderr, "no test named *%s*\n", filter ? filter : "");
    return failed > 0 || passed + skipped == 0 ? 1 : passed > 0 ? 0 : harness_skip_code;
}
