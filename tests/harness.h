/* The test harness: tests register themselves with TEST(name); CHECK counts a failure without stopping
 * the test; main() runs every test (or those whose name contains argv[1]) and prints "N passed, N failed".
 * A test passes when it made at least one check and none failed (a test that checks nothing fails). */
#ifndef GDN_TEST_HARNESS_H
#define GDN_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>

typedef void (*harness_fn)(void);
void harness_register(const char *name, harness_fn fn);
void harness_check(int ok, const char *file, int line, const char *expr);
extern int harness_verbose;

#define TEST(name)                                                                                   \
    static void test_##name(void);                                                                   \
    __attribute__((constructor)) static void register_##name(void) { harness_register(#name, test_##name); } \
    static void test_##name(void)

/* CHECK(cond) or CHECK(cond, "printf format", args...) — the message is printed on failure. */
#define CHECK(cond, ...)                                                                             \
    do {                                                                                             \
        int check_ok_ = !!(cond);                                                                    \
        harness_check(check_ok_, __FILE__, __LINE__, #cond);                                         \
        if (!check_ok_) { __VA_OPT__(fprintf(stderr, "    " __VA_ARGS__); fprintf(stderr, "\n");) }  \
    } while (0)

/* Deterministic RNG (splitmix64): uniform in [0, 1) and standard normal. */
typedef struct harness_rng { uint64_t s; } harness_rng;
uint64_t rng_u64(harness_rng *r);
float rng_uniform(harness_rng *r);
float rng_normal(harness_rng *r);

#endif
