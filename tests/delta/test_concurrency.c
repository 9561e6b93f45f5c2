/* Concurrency: many application threads calling gdn_delta at once on the CPU backend, each with its own
 * buffers and its own shape, dtype, options, kernel and thread count, get the same bits as the same calls made
 * one after another. Calls that share read-only inputs do too. (The pool serves one caller at a time; a caller
 * that finds it busy runs on its own thread, so this also exercises that path.) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "harness.h"

enum { N_CALLERS = 8, REPEATS = 3 };

/* One caller's call: its options and owned inputs, the serial result, and what its thread saw. */
typedef struct caller {
    gdn_delta_args a;
    const char *kernel;
    int threads;
    size_t y_bytes, s_bytes;
    void *q, *k, *v;
    float *gate, *beta, *A_log, *dt_bias, *state;
    uint8_t *mask, *y_serial;
    float *s_serial;
    int mismatches, failures; /* written by the caller's thread, read after join */
} caller;

static void caller_init(caller *c, int id) {
    /* shape and options differ per caller */
    static const int64_t dk[N_CALLERS] = {128, 64, 40, 128, 256, 32, 96, 128};
    static const int64_t dv[N_CALLERS] = {64, 24, 16, 128, 32, 8, 40, 72};
    static const char *const kernel[N_CALLERS] = {NULL, "ref", "portable", "packed_avx2", NULL, "portable", NULL, "ref"};
    harness_rng r = {1000 + (uint64_t)id};
    memset(c, 0, sizeof *c);
    const int64_t B = 1 + id % 3, T = 8 + 5 * id, Hk = 1 + id % 2, Hv = Hk * (1 + id % 3), Dk = dk[id], Dv = dv[id];
    const gdn_dtype dt = (gdn_dtype)(id % 3);
    const size_t es = dt == GDN_F32 ? 4 : 2;
    const int64_t n_qk = B * T * Hk * Dk, n_v = B * T * Hv * Dv, n_bt = B * T * Hv, n_s = B * Hv * Dk * Dv;
    const gdn_gate_kind gk = (gdn_gate_kind)(id % 4);
    c->q = malloc((size_t)n_qk * es), c->k = malloc((size_t)n_qk * es), c->v = malloc((size_t)n_v * es);
    c->gate = malloc(sizeof(float) * (size_t)(n_bt * Dk));
    c->beta = malloc(sizeof(float) * (size_t)n_bt);
    c->A_log = malloc(sizeof(float) * (size_t)Hv), c->dt_bias = malloc(sizeof(float) * (size_t)Hv);
    c->state = malloc(sizeof(float) * (size_t)n_s);
    c->mask = malloc((size_t)(B * T));
    /* inputs: bf16/f16 take the top bits of an f32 draw (any pattern is a valid input) */
    for (int64_t e = 0; e < n_qk; ++e) {
        const float x = 0.3f * rng_normal(&r), y = 0.3f * rng_normal(&r);
        if (es == 4) ((float *)c->q)[e] = x, ((float *)c->k)[e] = y;
        else ((uint16_t *)c->q)[e] = (uint16_t)(rng_u64(&r) & 0x3bff), ((uint16_t *)c->k)[e] = (uint16_t)(rng_u64(&r) & 0x3bff);
    }
    for (int64_t e = 0; e < n_v; ++e) {
        if (es == 4) ((float *)c->v)[e] = rng_normal(&r);
        else ((uint16_t *)c->v)[e] = (uint16_t)(rng_u64(&r) & 0xbbff);
    }
    for (int64_t e = 0; e < n_bt * Dk; ++e) c->gate[e] = gk == GDN_GATE_DECAY || gk == GDN_GATE_VECTOR ? 0.9f + 0.1f * rng_uniform(&r) : -0.1f * rng_uniform(&r);
    for (int64_t e = 0; e < n_bt; ++e) c->beta[e] = rng_uniform(&r);
    for (int64_t e = 0; e < Hv; ++e) c->A_log[e] = rng_normal(&r), c->dt_bias[e] = rng_normal(&r);
    for (int64_t e = 0; e < n_s; ++e) c->state[e] = 0.3f * rng_normal(&r);
    for (int64_t e = 0; e < B * T; ++e) c->mask[e] = rng_uniform(&r) < 0.9f;
    c->a = (gdn_delta_args){.B = B, .T = T, .Hk = Hk, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = dt, .q = c->q, .k = c->k,
                            .v = c->v, .gate_kind = gk, .gate = c->gate, .A_log = c->A_log, .dt_bias = c->dt_bias,
                            .beta_kind = (gdn_beta_kind)(id % 2), .beta = c->beta, .mask = id % 2 ? c->mask : NULL,
                            .state_layout = (gdn_state_layout)(id / 2 % 2), .state_in = c->state, .scale = 0.125f};
    c->kernel = kernel[id];
    c->threads = id % 3; /* 0: the whole pool */
    c->y_bytes = (size_t)n_v * es, c->s_bytes = sizeof(float) * (size_t)n_s;
    c->y_serial = malloc(c->y_bytes), c->s_serial = malloc(c->s_bytes);
}

static void caller_free(caller *c) {
    free(c->q), free(c->k), free(c->v), free(c->gate), free(c->beta), free(c->A_log), free(c->dt_bias);
    free(c->state), free(c->mask), free(c->y_serial), free(c->s_serial);
}

/* 1 if `kernel` (NULL: the router) can run the caller's arguments on this machine. */
static int kernel_ok(const caller *c, const char *kernel) {
    if (!kernel) return 1;
    gdn_delta_args probe = c->a;
    probe.y = c->y_serial, probe.state_out = c->s_serial;
    for (int k = 0; k < gdn_kernel_count(); ++k)
        if (strcmp(gdn_kernel_name(k), kernel) == 0) return gdn_kernel_eligible(k, &probe);
    return 0;
}

static gdn_status caller_run(const caller *c, void *y, float *s) {
    gdn_delta_args a = c->a;
    a.y = y, a.state_out = s, a.kernel = c->kernel, a.threads = c->threads;
    return gdn_delta(&a);
}

static pthread_barrier_t start_line;

/* A caller's thread: REPEATS calls into fresh outputs, each compared with the serial result. */
static void *caller_main(void *arg) {
    caller *c = arg;
    uint8_t *y = malloc(c->y_bytes);
    float *s = malloc(c->s_bytes);
    pthread_barrier_wait(&start_line);
    for (int rep = 0; rep < REPEATS; ++rep) {
        memset(y, 0xa5 + rep, c->y_bytes);
        memset(s, 0x5a + rep, c->s_bytes);
        if (caller_run(c, y, s) != GDN_OK) {
            c->failures++;
            continue;
        }
        c->mismatches += memcmp(y, c->y_serial, c->y_bytes) != 0 || memcmp(s, c->s_serial, c->s_bytes) != 0;
    }
    free(y), free(s);
    return NULL;
}

/* 8 callers with different shapes, dtypes, gates, masks, layouts, kernels and thread counts, all at once. */
TEST(concurrency_callers_match_serial) {
    caller *cs = calloc(N_CALLERS, sizeof *cs);
    for (int i = 0; i < N_CALLERS; ++i) {
        caller_init(&cs[i], i);
        if (!kernel_ok(&cs[i], cs[i].kernel)) cs[i].kernel = "ref"; /* this machine lacks the ISA */
        memset(cs[i].y_serial, 0x33, cs[i].y_bytes);
        CHECK(caller_run(&cs[i], cs[i].y_serial, cs[i].s_serial) == GDN_OK, "caller %d serial", i);
        /* and the serial result is ref's */
        caller r = cs[i];
        r.kernel = "ref", r.threads = 1;
        uint8_t *y = malloc(r.y_bytes);
        float *s = malloc(r.s_bytes);
        CHECK(caller_run(&r, y, s) == GDN_OK);
        CHECK(memcmp(y, cs[i].y_serial, r.y_bytes) == 0 && memcmp(s, cs[i].s_serial, r.s_bytes) == 0,
              "caller %d (kernel %s): serial result differs from ref", i, cs[i].kernel ? cs[i].kernel : "(router)");
        free(y), free(s);
    }
    for (int round = 0; round < 2; ++round) {
        pthread_t tid[N_CALLERS];
        pthread_barrier_init(&start_line, NULL, N_CALLERS);
        for (int i = 0; i < N_CALLERS; ++i) CHECK(pthread_create(&tid[i], NULL, caller_main, &cs[i]) == 0);
        for (int i = 0; i < N_CALLERS; ++i) pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&start_line);
    }
    for (int i = 0; i < N_CALLERS; ++i) {
        CHECK(cs[i].failures == 0, "caller %d: %d calls failed", i, cs[i].failures);
        CHECK(cs[i].mismatches == 0, "caller %d (kernel %s, threads %d): %d of %d concurrent results differ from serial",
              i, cs[i].kernel ? cs[i].kernel : "(router)", cs[i].threads, cs[i].mismatches, 2 * REPEATS);
        caller_free(&cs[i]);
    }
    free(cs);
}

/* Callers sharing one set of read-only inputs (each its own y and state_out) all get the serial bits. */
typedef struct shared_run {
    const caller *c;
    const char *kernel;
    int threads, mismatches;
} shared_run;

static void *shared_main(void *arg) {
    shared_run *sr = arg;
    caller c = *sr->c;
    c.kernel = sr->kernel, c.threads = sr->threads;
    uint8_t *y = malloc(c.y_bytes);
    float *s = malloc(c.s_bytes);
    pthread_barrier_wait(&start_line);
    for (int rep = 0; rep < REPEATS; ++rep) {
        memset(y, 0xc3, c.y_bytes);
        sr->mismatches += caller_run(&c, y, s) != GDN_OK || memcmp(y, c.y_serial, c.y_bytes) != 0 ||
                          memcmp(s, c.s_serial, c.s_bytes) != 0;
    }
    free(y), free(s);
    return NULL;
}

TEST(concurrency_shared_inputs) {
    static const char *const kernel[N_CALLERS] = {NULL, "ref", "portable", "packed_avx2",
                                                  NULL, "ref", "portable", "packed_avx2"};
    caller c;
    caller_init(&c, 3);
    c.kernel = "ref", c.threads = 1;
    CHECK(caller_run(&c, c.y_serial, c.s_serial) == GDN_OK);
    shared_run runs[N_CALLERS];
    pthread_t tid[N_CALLERS];
    pthread_barrier_init(&start_line, NULL, N_CALLERS);
    for (int i = 0; i < N_CALLERS; ++i) {
        runs[i] = (shared_run){&c, kernel_ok(&c, kernel[i]) ? kernel[i] : "ref", i % 4, 0};
        CHECK(pthread_create(&tid[i], NULL, shared_main, &runs[i]) == 0);
    }
    for (int i = 0; i < N_CALLERS; ++i) pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start_line);
    for (int i = 0; i < N_CALLERS; ++i)
        CHECK(runs[i].mismatches == 0, "shared caller %d (%s): %d results differ", i,
              runs[i].kernel ? runs[i].kernel : "(router)", runs[i].mismatches);
    caller_free(&c);
}
