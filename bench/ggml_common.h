/* What bench/ggml_layer.c and bench/ggml_delta.c share: the clock, allocation that exits on failure, their seeded
 * inputs (one LCG; uniform and normal floats) and a timed block of calls. Include after defining BENCH_NAME (the program's name, for
 * its messages). */
#ifndef GDN_BENCH_GGML_COMMON_H
#define GDN_BENCH_GGML_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n bytes, 64-byte aligned (rounded up to 64, as aligned_alloc wants); exits with a message when there are none */
static void *xmalloc(size_t n) {
    n = (n + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) {
        fprintf(stderr, BENCH_NAME ": out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static uint64_t rng = 0x5eedULL;
static double next_u(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
static float *fill_uniform(size_t n, float lo, float hi) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * (float)next_u();
    return x;
}
static float *fill_normal(size_t n, float mean, float sd) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i) {
        const double u1 = next_u() + 1e-300, u2 = next_u();
        x[i] = mean + sd * (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return x;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One block of `calls` calls of run(ctx, side, set), the sets in turn from *cursor: the median in microseconds. */
static double bench_block(void (*run)(void *ctx, int side, int set), void *ctx, int side, int calls, int sets,
                          int *cursor) {
    double *t = xmalloc((size_t)calls * sizeof *t);
    for (int i = 0; i < calls; ++i) {
        const int s = (*cursor)++ % sets;
        const double t0 = now();
        run(ctx, side, s);
        t[i] = (now() - t0) * 1e6;
    }
    qsort(t, (size_t)calls, sizeof t[0], cmp_double);
    const double m = t[calls / 2];
    free(t);
    return m;
}

#endif
