/* Large work. Always: sizes whose byte counts overflow are rejected with GDN_ERR_BAD_SIZE, and a shape of more
 * than 2^31 elements is accepted by validation and routing (checked through gdn_route, which never touches
 * memory, with pointers 2^40 bytes apart). With GDN_TEST_LARGE=1 (minutes, ~10 GB):
 *   - a million tokens in one window, compared bit for bit with `ref` over the whole window;
 *   - y of more than 2^31 elements (bf16, 2.3e9 elements, every index past int32 in the last sequences),
 *     sequences past 2^31 compared bit for bit with `ref` run on those sequences alone;
 *   - a state pool of 100,000 slots updated in place by one decode step, sampled slots compared with `ref`.
 * Each prints its time and the process's peak RSS (docs/RELIABILITY.md records them). Without the variable the
 * same three tests run on small instances. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include "gdn.h"
#include "harness.h"

/* ---- always: validation at and past the limits ---- */

/* Pointers never dereferenced (gdn_route and rejected calls touch no memory): slot i is at i * 2^40. */
static void *far_ptr(int slot) { return (void *)((uintptr_t)slot << 40); }

static gdn_delta_args far_args(int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    return (gdn_delta_args){.B = B, .T = T, .Hk = Hk, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = GDN_BF16,
                            .q = far_ptr(1), .k = far_ptr(2), .v = far_ptr(3), .y = far_ptr(4),
                            .gate = far_ptr(5), .beta = far_ptr(6), .A_log = far_ptr(7), .dt_bias = far_ptr(8),
                            .state_in = far_ptr(9), .state_out = far_ptr(10), .scale = 1.0f};
}

TEST(large_validation_accepts_past_int32) {
    /* y has 34 * 2^15 * 16 * 128 = 2.28e9 elements (4.6 GB of bf16), q and k 2^23 elements */
    gdn_delta_args a = far_args(34, 1 << 15, 1, 16, 8, 128);
    const char *kernel = NULL;
    CHECK(gdn_route(&a, &kernel) == GDN_OK && kernel != NULL);
    /* a million tokens; a pool of 100,000 states */
    a = far_args(1, 1000000, 1, 2, 32, 16);
    CHECK(gdn_route(&a, &kernel) == GDN_OK);
    a = far_args(100000, 1, 1, 2, 64, 64);
    CHECK(gdn_route(&a, &kernel) == GDN_OK);
    /* tensors of 2^39 bytes each still fit the address space the pointers above leave them */
    a = far_args(1 << 20, 1 << 10, 1, 1, 256, 256);
    CHECK(gdn_route(&a, &kernel) == GDN_OK);
}

TEST(large_size_overflow_rejected) {
    const int64_t big = (int64_t)1 << 40;
    const struct { int64_t B, T, Hk, Hv, Dk, Dv; } shapes[] = {
        {big, big, 1, 1, 1, 1},                              /* B T overflows */
        {1, big, 1, 1, big, 1},                              /* q: T Dk */
        {1, 1, 1, big, 1, big},                              /* v: Hv Dv */
        {1, 1, 1, (int64_t)1 << 62, 1, 1},                   /* Hv alone: A_log's 4 Hv bytes (was signed overflow) */
        {INT64_MAX, 1, 1, 1, 1, 1},
        {1, 1, 1, 1, INT64_MAX, INT64_MAX},
        {(int64_t)1 << 20, 1, 1, 1, (int64_t)1 << 21, (int64_t)1 << 20}, /* state: 2^61 elements, 2^63 bytes */
        {(int64_t)1 << 20, 1, 1, 1, (int64_t)1 << 22, (int64_t)1 << 20}, /* state: 2^62 elements, 2^64 bytes */
        {3, 1, 1, 1, (int64_t)1 << 31, (int64_t)1 << 31},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        gdn_delta_args a = far_args(shapes[i].B, shapes[i].T, shapes[i].Hk, shapes[i].Hv, shapes[i].Dk, shapes[i].Dv);
        const char *kernel = NULL;
        CHECK(gdn_route(&a, &kernel) == GDN_ERR_BAD_SIZE, "shape %zu", i);
        CHECK(gdn_delta(&a) == GDN_ERR_BAD_SIZE, "shape %zu", i);
    }
}

/* The workspace reproducers: huge Dk, Dv that pass validation with no state (f16, one token, one head; q, k,
 * v and y of 2 GiB each, mapped MAP_NORESERVE and never touched). ref's per-worker workspace of Dk Dv floats
 * cannot exist: the answer is GDN_ERR_OUT_OF_MEMORY, at every thread count, and y keeps no resident page (nothing
 * written). Every other CPU kernel is ineligible at these Dk or answers the same. */
static void *reserve(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t resident_pages(void *p, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (bytes + page - 1) / page;
    unsigned char *vec = malloc(n);
    size_t resident = 0;
    if (vec && mincore(p, bytes, vec) == 0)
        for (size_t i = 0; i < n; ++i) resident += vec[i] & 1;
    else
        resident = n; /* cannot tell: count as written */
    free(vec);
    return resident;
}

TEST(large_workspace_overflow_is_out_of_memory) {
    const int64_t shapes[][2] = {{1073676289, 1073807359}, {535706951, 538037398}};
    for (int s = 0; s < 2; ++s) {
        const int64_t Dk = shapes[s][0], Dv = shapes[s][1];
        const size_t qk = (size_t)Dk * 2, vy = (size_t)Dv * 2;
        void *q = reserve(qk), *k = reserve(qk), *v = reserve(vy), *y = reserve(vy);
        CHECK(q && k && v && y, "mapping 2 GiB tensors");
        float gate = 0.5f, beta = 0.5f;
        for (int threads = 0; threads <= 4 && q && k && v && y; ++threads) {
            gdn_delta_args a = {.B = 1, .T = 1, .Hk = 1, .Hv = 1, .Dk = Dk, .Dv = Dv, .dtype = GDN_F16,
                                .q = q, .k = k, .v = v, .y = y, .gate = &gate, .beta = &beta, .scale = 1.0f,
                                .threads = threads};
            const char *kernel = NULL;
            CHECK(gdn_route(&a, &kernel) == GDN_OK, "shape %d validates", s);
            const gdn_status st = gdn_delta(&a);
            CHECK(st == GDN_ERR_OUT_OF_MEMORY, "shape %d threads %d: %s", s, threads, gdn_status_str(st));
            for (int i = 0; i < gdn_kernel_count(); ++i) {
                if (gdn_kernel_backend(i) != GDN_BACKEND_CPU) continue;
                a.kernel = gdn_kernel_name(i);
                const gdn_status sk = gdn_delta(&a);
                CHECK(sk == GDN_ERR_OUT_OF_MEMORY || sk == GDN_ERR_INELIGIBLE, "%s: %s", a.kernel, gdn_status_str(sk));
            }
            CHECK(resident_pages(y, vy) == 0, "shape %d threads %d: y was written", s, threads);
        }
        if (q) munmap(q, qk);
        if (k) munmap(k, qk);
        if (v) munmap(v, vy);
        if (y) munmap(y, vy);
    }
}

/* gdn_route and gdn_delta agree on CUDA launch limits: shapes every CUDA kernel's grid rejects are
 * GDN_ERR_UNSUPPORTED from both (without a device: GDN_ERR_NO_DEVICE from both), and gdn_kernel_eligible says no
 * for every CUDA kernel. Pointers are never dereferenced: a rejected call touches no memory. */
TEST(large_cuda_limits_agree) {
    const struct { int64_t B, Hv, Dk, Dv; } shapes[] = {
        {1, 1, 40, 262148},                    /* Dv past the generic kernel's 65535 column blocks (1 MiB tensors) */
        {((int64_t)1 << 26) + 1, 32, 1, 1},    /* B Hv = 2^31 + 32 */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        gdn_delta_args a = far_args(shapes[i].B, 1, shapes[i].Hv, shapes[i].Hv, shapes[i].Dk, shapes[i].Dv);
        a.backend = GDN_BACKEND_CUDA;
        const char *kernel = NULL;
        const gdn_status want = gdn_device_count(GDN_BACKEND_CUDA) > 0 ? GDN_ERR_UNSUPPORTED : GDN_ERR_NO_DEVICE;
        const gdn_status sr = gdn_route(&a, &kernel);
        CHECK(sr == want, "shape %zu: gdn_route %s", i, gdn_status_str(sr));
        if (sr == want) CHECK(gdn_delta(&a) == want, "shape %zu: gdn_delta", i); /* never launched: rejected first */
        for (int k = 0; k < gdn_kernel_count(); ++k)
            if (gdn_kernel_backend(k) == GDN_BACKEND_CUDA) CHECK(!gdn_kernel_eligible(k, &a), "%s", gdn_kernel_name(k));
        a.backend = GDN_BACKEND_CPU; /* the CPU backend takes both shapes (validation and routing only) */
        CHECK(gdn_route(&a, &kernel) == GDN_OK, "shape %zu on the CPU", i);
    }
}

/* ---- opt-in at full size ---- */

static int large_enabled(void) {
    const char *s = getenv("GDN_TEST_LARGE");
    return s && strcmp(s, "1") == 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_gb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / (1024.0 * 1024.0);
}

/* Cheap deterministic fill: xorshift64, four 16-bit draws per step. */
typedef struct xs { uint64_t s; } xs;
static uint64_t xs_next(xs *r) {
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return r->s;
}

/* bf16 values of either sign in [0.125, 0.5) */
static void fill_bf16(uint16_t *x, size_t n, uint64_t seed) {
    xs r = {seed | 1};
    for (size_t e = 0; e < n; e += 4) {
        const uint64_t w = xs_next(&r);
        for (size_t l = 0; l < 4 && e + l < n; ++l) x[e + l] = (uint16_t)(((w >> (16 * l)) & 0x80ff) | 0x3e00);
    }
}

static void fill_f32(float *x, size_t n, float lo, float hi, uint64_t seed) {
    xs r = {seed | 1};
    for (size_t e = 0; e < n; ++e) x[e] = lo + (hi - lo) * (float)(xs_next(&r) >> 40) * (1.0f / 16777216.0f);
}

/* CPU seconds of the whole process (every thread), user + system. */
static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

/* fast_s / fast_cpu: wall and CPU seconds of the fast call (on a shared machine the CPU time is the steadier) */
static void report(const char *what, double fast_s, double fast_cpu, double ref_s, double updates) {
    printf("     %s: fast %.2f s wall, %.2f s CPU (%.2f G state updates per CPU second), ref check %.2f s, "
           "peak RSS %.2f GB\n", what, fast_s, fast_cpu, updates / fast_cpu * 1e-9, ref_s, peak_rss_gb());
    fflush(stdout);
}

/* Without GDN_TEST_LARGE=1 each of the tests below runs the same code on a small instance. */

/* One window of a million tokens (f32, Hk = 1, Hv = 2, Dk = 32, Dv = 16), every output compared with ref. */
TEST(large_million_tokens) {
    const int64_t T = large_enabled() ? 1000000 : 3000, Hv = 2, Dk = 32, Dv = 16;
    float *q = malloc(sizeof(float) * (size_t)(T * Dk)), *k = malloc(sizeof(float) * (size_t)(T * Dk));
    float *v = malloc(sizeof(float) * (size_t)(T * Hv * Dv)), *y = malloc(sizeof(float) * (size_t)(T * Hv * Dv));
    float *yr = malloc(sizeof(float) * (size_t)(T * Hv * Dv));
    float *gate = malloc(sizeof(float) * (size_t)(T * Hv)), *beta = malloc(sizeof(float) * (size_t)(T * Hv));
    float *s = malloc(sizeof(float) * (size_t)(Hv * Dk * Dv)), *sr = malloc(sizeof(float) * (size_t)(Hv * Dk * Dv));
    CHECK(q && k && v && y && yr && gate && beta && s && sr);
    if (!(q && k && v && y && yr && gate && beta && s && sr)) return;
    fill_f32(q, (size_t)(T * Dk), -0.2f, 0.2f, 1), fill_f32(k, (size_t)(T * Dk), -0.2f, 0.2f, 2);
    fill_f32(v, (size_t)(T * Hv * Dv), -1.0f, 1.0f, 3);
    fill_f32(gate, (size_t)(T * Hv), 0.9f, 1.0f, 4), fill_f32(beta, (size_t)(T * Hv), 0.0f, 1.0f, 5);
    gdn_delta_args a = {.B = 1, .T = T, .Hk = 1, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = GDN_F32, .q = q, .k = k,
                        .v = v, .y = y, .gate = gate, .beta = beta, .state_out = s, .scale = 0.17677669f};
    double t0 = now_s(), c0 = cpu_s();
    CHECK(gdn_delta(&a) == GDN_OK);
    const double fast = now_s() - t0, fast_cpu = cpu_s() - c0;
    a.y = yr, a.state_out = sr, a.kernel = "ref";
    t0 = now_s();
    CHECK(gdn_delta(&a) == GDN_OK);
    const double ref = now_s() - t0;
    CHECK(memcmp(y, yr, sizeof(float) * (size_t)(T * Hv * Dv)) == 0, "y differs from ref");
    CHECK(memcmp(s, sr, sizeof(float) * (size_t)(Hv * Dk * Dv)) == 0, "state differs from ref");
    if (large_enabled()) report("T = 1e6, Hv 2, Dk 32, Dv 16, f32", fast, fast_cpu, ref, (double)T * Hv * Dk * Dv);
    free(q), free(k), free(v), free(y), free(yr), free(gate), free(beta), free(s), free(sr);
}

/* y of 34 * 2^15 * 16 * 128 = 2.28e9 bf16 elements (4.6 GB; v as much): the fast kernel on the whole batch, and
 * ref on single sequences 32 (its first y index is 2^31) and 33 (the last) compared bit for bit. */
TEST(large_past_int32_elements) {
    const int large = large_enabled();
    const int64_t B = large ? 34 : 3, T = large ? 1 << 15 : 64, Hk = 1, Hv = 16, Dk = 8, Dv = 128;
    const size_t n_qk = (size_t)(B * T * Hk * Dk), n_v = (size_t)(B * T * Hv * Dv), n_bt = (size_t)(B * T * Hv);
    const size_t n_s = (size_t)(B * Hv * Dk * Dv), seq_v = (size_t)(T * Hv * Dv), seq_s = (size_t)(Hv * Dk * Dv);
    uint16_t *q = malloc(2 * n_qk), *k = malloc(2 * n_qk), *v = malloc(2 * n_v), *y = malloc(2 * n_v);
    float *gate = malloc(4 * n_bt), *beta = malloc(4 * n_bt), *s_in = malloc(4 * n_s), *s_out = malloc(4 * n_s);
    uint16_t *yr = malloc(2 * seq_v);
    float *sr = malloc(4 * seq_s);
    CHECK(q && k && v && y && gate && beta && s_in && s_out && yr && sr, "allocation");
    if (!(q && k && v && y && gate && beta && s_in && s_out && yr && sr)) return;
    fill_bf16(q, n_qk, 11), fill_bf16(k, n_qk, 12), fill_bf16(v, n_v, 13);
    fill_f32(gate, n_bt, 0.9f, 1.0f, 14), fill_f32(beta, n_bt, 0.0f, 1.0f, 15), fill_f32(s_in, n_s, -0.1f, 0.1f, 16);
    gdn_delta_args a = {.B = B, .T = T, .Hk = Hk, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = GDN_BF16, .q = q, .k = k,
                        .v = v, .y = y, .gate = gate, .beta = beta, .state_in = s_in, .state_out = s_out,
                        .scale = 0.35355339f};
    double t0 = now_s(), c0 = cpu_s();
    CHECK(gdn_delta(&a) == GDN_OK);
    const double fast = now_s() - t0, fast_cpu = cpu_s() - c0;
    t0 = now_s();
    for (int64_t b = B - 2; b < B; ++b) {
        gdn_delta_args r = a;
        r.B = 1, r.kernel = "ref";
        r.q = q + (size_t)b * T * Hk * Dk, r.k = k + (size_t)b * T * Hk * Dk, r.v = v + (size_t)b * seq_v;
        r.gate = gate + (size_t)b * T * Hv, r.beta = beta + (size_t)b * T * Hv, r.state_in = s_in + (size_t)b * seq_s;
        r.y = yr, r.state_out = sr;
        CHECK(gdn_delta(&r) == GDN_OK);
        CHECK(memcmp(yr, y + (size_t)b * seq_v, 2 * seq_v) == 0, "sequence %lld: y differs from ref", (long long)b);
        CHECK(memcmp(sr, s_out + (size_t)b * seq_s, 4 * seq_s) == 0, "sequence %lld: state differs", (long long)b);
    }
    const double ref = now_s() - t0;
    if (large) report("B 34, T 2^15, Hv 16, Dk 8, Dv 128, bf16 (y: 2.28e9 elements)", fast, fast_cpu, ref, (double)n_v * Dk);
    free(q), free(k), free(v), free(y), free(gate), free(beta), free(s_in), free(s_out), free(yr), free(sr);
}

/* A pool of 100,000 states (Hv 2, Dk = Dv = 64, f32: 3.3 GB) advanced one decode token in place; slots 0,
 * 54321 and 99999 compared with ref run on copies of their old state. */
TEST(large_state_pool) {
    const int64_t B = large_enabled() ? 100000 : 500, Hv = 2, Dk = 64, Dv = 64;
    const size_t n_qk = (size_t)(B * Dk), n_v = (size_t)(B * Hv * Dv), n_bt = (size_t)(B * Hv);
    const size_t slot = (size_t)(Hv * Dk * Dv), n_s = (size_t)B * slot;
    float *q = malloc(4 * n_qk), *k = malloc(4 * n_qk), *v = malloc(4 * n_v), *y = malloc(4 * n_v);
    float *gate = malloc(4 * n_bt), *beta = malloc(4 * n_bt), *pool = malloc(4 * n_s);
    float *old = malloc(4 * 3 * slot), *sr = malloc(4 * slot), *yr = malloc(4 * (size_t)(Hv * Dv));
    CHECK(q && k && v && y && gate && beta && pool && old && sr && yr, "allocation");
    if (!(q && k && v && y && gate && beta && pool && old && sr && yr)) return;
    fill_f32(q, n_qk, -0.2f, 0.2f, 21), fill_f32(k, n_qk, -0.2f, 0.2f, 22), fill_f32(v, n_v, -1.0f, 1.0f, 23);
    fill_f32(gate, n_bt, -0.1f, 0.0f, 24), fill_f32(beta, n_bt, -2.0f, 2.0f, 25), fill_f32(pool, n_s, -0.3f, 0.3f, 26);
    const int64_t samples[3] = {0, B * 54321 / 100000, B - 1};
    for (int i = 0; i < 3; ++i) memcpy(old + i * slot, pool + (size_t)samples[i] * slot, 4 * slot);
    gdn_delta_args a = {.B = B, .T = 1, .Hk = 1, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = GDN_F32, .q = q, .k = k,
                        .v = v, .y = y, .gate_kind = GDN_GATE_LOG_DECAY, .gate = gate, .beta_kind = GDN_BETA_LOGIT,
                        .beta = beta, .state_layout = GDN_STATE_KV, .state_in = pool, .state_out = pool,
                        .scale = 0.125f};
    double t0 = now_s(), c0 = cpu_s();
    CHECK(gdn_delta(&a) == GDN_OK);
    const double fast = now_s() - t0, fast_cpu = cpu_s() - c0;
    t0 = now_s();
    for (int i = 0; i < 3; ++i) {
        const size_t b = (size_t)samples[i];
        gdn_delta_args r = a;
        r.B = 1, r.kernel = "ref", r.q = q + b * Dk, r.k = k + b * Dk, r.v = v + b * Hv * Dv, r.y = yr;
        r.gate = gate + b * Hv, r.beta = beta + b * Hv, r.state_in = old + i * slot, r.state_out = sr;
        CHECK(gdn_delta(&r) == GDN_OK);
        CHECK(memcmp(yr, y + b * Hv * Dv, 4 * (size_t)(Hv * Dv)) == 0, "slot %zu: y differs from ref", b);
        CHECK(memcmp(sr, pool + b * slot, 4 * slot) == 0, "slot %zu: state differs from ref", b);
    }
    const double ref = now_s() - t0;
    if (large_enabled()) report("state pool B 100000, T 1, Hv 2, Dk = Dv = 64, in place", fast, fast_cpu, ref, (double)n_s);
    free(q), free(k), free(v), free(y), free(gate), free(beta), free(pool), free(old), free(sr), free(yr);
}
