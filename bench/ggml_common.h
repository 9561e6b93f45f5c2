/* What bench/ggml_layer.c and bench/ggml_delta.c share: the clock, allocation that exits on failure, their seeded
 * inputs (one LCG; uniform and normal floats), a checked graph computation and the timing of the three sides.
 * Include after defining BENCH_NAME (the program's name, for its messages). */
#ifndef GDN_BENCH_GGML_COMMON_H
#define GDN_BENCH_GGML_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ggml-cpu.h"

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

/* One computation of a ggml graph; exits with a message when it fails. */
static void compute_or_exit(struct ggml_cgraph *gf, struct ggml_cplan *plan) {
    if (ggml_graph_compute(gf, plan) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, BENCH_NAME ": ggml_graph_compute failed\n");
        exit(1);
    }
}

/* The sides of a comparison: ggml, ggml without its state write-back, libgdn (ggml's threads paused). */
enum { BENCH_GGML, BENCH_GGML_NOWB, BENCH_LIBGDN, BENCH_SIDES };
static const char *const bench_side_name[BENCH_SIDES] = {"ggml", "ggml_nowb", "libgdn"};

/* One block of `calls` calls of run(ctx, side, set), the sets in turn from *cursor, ggml's threadpool tp paused
 * for libgdn's side: the median in microseconds. */
static double bench_block(void (*run)(void *ctx, int side, int set), void *ctx, struct ggml_threadpool *tp, int side,
                          int calls, int sets, int *cursor) {
    if (side == BENCH_LIBGDN) ggml_threadpool_pause(tp);
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

/* The comparison's timing: a warm-up call of each side on the last set, then BENCH_ROUNDS rounds of one block of
 * `calls` calls per side in turn; med[side][round] the block medians, best[side] the least of them (microseconds). */
enum { BENCH_ROUNDS = 3 };
static void bench_sides(void (*run)(void *ctx, int side, int set), void *ctx, struct ggml_threadpool *tp, int calls,
                        int sets, double med[BENCH_SIDES][BENCH_ROUNDS], double best[BENCH_SIDES]) {
    int cursor[BENCH_SIDES] = {0, 0, 0};
    for (int side = 0; side < BENCH_SIDES; ++side) {
        int c = sets - 1;
        (void)bench_block(run, ctx, tp, side, 1, sets, &c);
    }
    for (int r = 0; r < BENCH_ROUNDS; ++r)
        for (int side = 0; side < BENCH_SIDES; ++side)
            med[side][r] = bench_block(run, ctx, tp, side, calls, sets, &cursor[side]);
    for (int side = 0; side < BENCH_SIDES; ++side) {
        best[side] = med[side][0];
        for (int r = 1; r < BENCH_ROUNDS; ++r)
            if (med[side][r] < best[side]) best[side] = med[side][r];
    }
}

#endif
