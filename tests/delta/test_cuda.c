/* The CUDA backend. Without a device (or without a CUDA build): every CUDA call returns GDN_ERR_NO_DEVICE and
 * writes nothing. With a device: every CUDA kernel (each packed variant, both decode widths, each rowsplit width,
 * the router's choice) against the CPU `ref` on the same inputs, memcmp of y and of the final state, outputs
 * poisoned (0xFF bytes, a NaN in every dtype) before each run, over a seeded sample of shapes, dtypes, gates,
 * betas, masks, layouts and state modes. GDN_TEST_CUDA_CASES=n changes the number of sampled cases,
 * GDN_TEST_CUDA_MAXCOST=x the largest B*T*Hv*Dk*Dv of a case (3e8; small for the compute-sanitizer runs).
 * Without changing the sample: GDN_TEST_CUDA_SHARD=i/n runs the cases whose index (in sample order) is i mod n,
 * GDN_TEST_CUDA_COST=lo:hi those with lo < B*T*Hv*Dk*Dv <= hi (scripts/gpu_reliability.sh covers the whole
 * sample under compute-sanitizer that way), GDN_TEST_CUDA_DEADLINE=t (seconds since the epoch) starts no case
 * after t; GDN_TEST_VERBOSE prints a line per case run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdn_testing.h"
#include "harness.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- a host problem: inputs filled from a seed ---- */

typedef struct cuda_case {
    int64_t B, T, Hk, Hv, Dk, Dv;
    gdn_dtype dtype;
    gdn_gate_kind gate;
    gdn_beta_kind beta;
    gdn_state_layout layout;
    int mask;       /* 1: some tokens masked off */
    int state_mode; /* 0: state_in NULL; 1: separate in/out; 2: in place; 3: state_out NULL */
    int misalign;   /* 1: q, k, v, y one element past a 16-byte boundary */
} cuda_case;

typedef struct host_problem {
    cuda_case c;
    gdn_head_map head_map; /* from the seed: tiled for every other case with Hk < Hv */
    size_t n_qk, n_v, n_gate, n_bt, n_state, ds;
    void *q, *k, *v;
    float *gate, *beta, *A_log, *dt_bias, *state_in;
    uint8_t *mask;
} host_problem;

static void fill_elems(void *dst, gdn_dtype dt, size_t n, harness_rng *r, float sd) {
    for (size_t i = 0; i < n; ++i) {
        const float x = rng_normal(r) * sd;
        if (dt == GDN_F16) ((uint16_t *)dst)[i] = gdn__f32_to_f16(x);
        else if (dt == GDN_BF16) ((uint16_t *)dst)[i] = gdn__f32_to_bf16(x);
        else ((float *)dst)[i] = x;
    }
}

/* The case's head mapping, from its seed: tiled for about half the cases with Hk < Hv. */
static gdn_head_map map_of(const cuda_case *c, uint64_t seed) {
    return c->Hk < c->Hv && (seed >> 17) % 2 ? GDN_HEADS_TILED : GDN_HEADS_GROUPED;
}

static int host_init(host_problem *h, const cuda_case *c, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->c = *c;
    h->head_map = map_of(c, seed);
    h->ds = c->dtype == GDN_F32 ? 4 : 2;
    h->n_qk = (size_t)(c->B * c->T * c->Hk * c->Dk);
    h->n_v = (size_t)(c->B * c->T * c->Hv * c->Dv);
    h->n_bt = (size_t)(c->B * c->T * c->Hv);
    h->n_gate = c->gate == GDN_GATE_VECTOR ? h->n_bt * (size_t)c->Dk : h->n_bt;
    h->n_state = (size_t)(c->B * c->Hv * c->Dk * c->Dv);
    h->q = malloc(h->n_qk * h->ds);
    h->k = malloc(h->n_qk * h->ds);
    h->v = malloc(h->n_v * h->ds);
    h->gate = malloc(h->n_gate * 4);
    h->beta = malloc(h->n_bt * 4);
    h->A_log = malloc((size_t)c->Hv * 4);
    h->dt_bias = malloc((size_t)c->Hv * 4);
    h->state_in = malloc(h->n_state * 4);
    h->mask = malloc((size_t)(c->B * c->T));
    if (!h->q || !h->k || !h->v || !h->gate || !h->beta || !h->A_log || !h->dt_bias || !h->state_in || !h->mask) return 0;
    harness_rng r = {seed};
    const float qk_sd = 1.0f / sqrtf((float)c->Dk);
    fill_elems(h->q, c->dtype, h->n_qk, &r, qk_sd);
    fill_elems(h->k, c->dtype, h->n_qk, &r, qk_sd);
    fill_elems(h->v, c->dtype, h->n_v, &r, 1.0f);
    for (size_t i = 0; i < h->n_gate; ++i) {
        const float u = 0.9f + 0.1f * rng_uniform(&r);
        h->gate[i] = c->gate == GDN_GATE_LOG_DECAY ? logf(u) : c->gate == GDN_GATE_RAW ? rng_normal(&r) : u;
    }
    for (size_t i = 0; i < h->n_bt; ++i) h->beta[i] = c->beta == GDN_BETA_LOGIT ? rng_normal(&r) : rng_uniform(&r);
    for (int64_t i = 0; i < c->Hv; ++i) {
        h->A_log[i] = 0.5f * rng_normal(&r);
        h->dt_bias[i] = 0.5f * rng_normal(&r);
    }
    for (size_t i = 0; i < h->n_state; ++i) h->state_in[i] = 0.1f * rng_normal(&r);
    for (int64_t i = 0; i < c->B * c->T; ++i) h->mask[i] = (uint8_t)(i % c->T == 0 || rng_uniform(&r) > 0.2f);
    return 1;
}

static void host_free(host_problem *h) {
    free(h->q); free(h->k); free(h->v); free(h->gate); free(h->beta); free(h->A_log); free(h->dt_bias);
    free(h->state_in); free(h->mask);
}

/* The arguments over the given buffers (host or device); state pointers per state_mode. */
static gdn_delta_args problem_args(const host_problem *h, const void *q, const void *k, const void *v, void *y,
                                   const float *gate, const float *beta, const float *A_log, const float *dt_bias,
                                   const uint8_t *mask, const float *state_in, float *state_out) {
    const cuda_case *c = &h->c;
    gdn_delta_args a = {.B = c->B, .T = c->T, .Hk = c->Hk, .Hv = c->Hv, .Dk = c->Dk, .Dv = c->Dv, .dtype = c->dtype,
                        .q = q, .k = k, .v = v, .y = y, .gate_kind = c->gate, .gate = gate, .A_log = A_log,
                        .dt_bias = dt_bias, .beta_kind = c->beta, .beta = beta, .mask = c->mask ? mask : NULL,
                        .state_layout = c->layout, .scale = 0.088388f, .head_map = h->head_map};
    switch (c->state_mode) {
    case 0: a.state_in = NULL; a.state_out = state_out; break;
    case 1: a.state_in = state_in; a.state_out = state_out; break;
    case 2: a.state_in = state_out; a.state_out = state_out; break;
    default: a.state_in = state_in; a.state_out = NULL; break;
    }
    return a;
}

/* ---- without a device: NO_DEVICE and nothing written ---- */

TEST(cuda_without_device_writes_nothing) {
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) SKIP("a CUDA device is present (CUDA_VISIBLE_DEVICES= hides it)");
    const cuda_case c = {1, 5, 2, 4, 32, 16, GDN_F32, GDN_GATE_DECAY, GDN_BETA_DIRECT, GDN_STATE_VK, 1, 1, 0};
    host_problem h;
    CHECK(host_init(&h, &c, 7));
    float *y = malloc(h.n_v * 4), *st = malloc(h.n_state * 4);
    CHECK(y && st);
    if (!y || !st) return;
    memset(y, 0xab, h.n_v * 4);
    memset(st, 0xcd, h.n_state * 4);
    const char *kernels[] = {NULL, "cuda_generic", "cuda_packed", "cuda_decode", "cuda_rowsplit", "cuda_window",
                             "cuda_rowsplit:warps8"};
    for (int i = 0; i < 7; ++i) {
        gdn_delta_args a = problem_args(&h, h.q, h.k, h.v, y, h.gate, h.beta, h.A_log, h.dt_bias, h.mask, h.state_in, st);
        a.backend = GDN_BACKEND_CUDA;
        a.kernel = kernels[i];
        CHECK(gdn_delta(&a) == GDN_ERR_NO_DEVICE, "kernel %s", kernels[i] ? kernels[i] : "(routed)");
        const char *name = NULL;
        CHECK(gdn_route(&a, &name) == GDN_ERR_NO_DEVICE && name == NULL);
    }
    int clean = 1;
    for (size_t i = 0; i < h.n_v * 4; ++i) clean &= ((unsigned char *)y)[i] == 0xab;
    for (size_t i = 0; i < h.n_state * 4; ++i) clean &= ((unsigned char *)st)[i] == 0xcd;
    CHECK(clean, "a CUDA call without a device wrote into an output");
    for (int i = 0; i < gdn_kernel_count(); ++i)
        if (gdn_kernel_backend(i) == GDN_BACKEND_CUDA) {
            gdn_delta_args a = problem_args(&h, h.q, h.k, h.v, y, h.gate, h.beta, h.A_log, h.dt_bias, h.mask, h.state_in, st);
            a.backend = GDN_BACKEND_CUDA;
            CHECK(gdn_kernel_eligible(i, &a) == 0, "%s eligible without a device", gdn_kernel_name(i));
        }
    free(y);
    free(st);
    host_free(&h);
}

#ifdef GDN_HAVE_CUDA

/* ---- with a device: every CUDA kernel against ref ---- */

static void case_name(const cuda_case *c, gdn_head_map map, char *buf, size_t n) {
    static const char *dt[] = {"f32", "f16", "bf16"}, *gk[] = {"decay", "log", "vector", "raw"};
    snprintf(buf, n, "B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld %s gate=%s beta=%s %s mask=%d state=%d mis=%d%s",
             (long long)c->B, (long long)c->T, (long long)c->Hk, (long long)c->Hv, (long long)c->Dk, (long long)c->Dv,
             dt[c->dtype], gk[c->gate], c->beta == GDN_BETA_LOGIT ? "logit" : "direct",
             c->layout == GDN_STATE_VK ? "vk" : "kv", c->mask, c->state_mode, c->misalign,
             map == GDN_HEADS_TILED ? " tiled" : "");
}

typedef struct dev_problem {
    void *q, *k, *v, *y; /* as passed (maybe misaligned) */
    void *q0, *k0, *v0, *y0; /* as allocated */
    float *gate, *beta, *A_log, *dt_bias, *state_in, *state_out;
    uint8_t *mask;
} dev_problem;

static int dev_alloc(void **p, size_t bytes) { return cudaMalloc(p, bytes > 0 ? bytes : 1) == cudaSuccess; }

static int dev_init(dev_problem *d, const host_problem *h) {
    memset(d, 0, sizeof *d);
    const size_t pad = h->c.misalign ? 16 : 0, off = h->c.misalign ? h->ds : 0;
    int ok = dev_alloc(&d->q0, h->n_qk * h->ds + pad) && dev_alloc(&d->k0, h->n_qk * h->ds + pad) &&
             dev_alloc(&d->v0, h->n_v * h->ds + pad) && dev_alloc(&d->y0, h->n_v * h->ds + pad) &&
             dev_alloc((void **)&d->gate, h->n_gate * 4) && dev_alloc((void **)&d->beta, h->n_bt * 4) &&
             dev_alloc((void **)&d->A_log, (size_t)h->c.Hv * 4) && dev_alloc((void **)&d->dt_bias, (size_t)h->c.Hv * 4) &&
             dev_alloc((void **)&d->state_in, h->n_state * 4) && dev_alloc((void **)&d->state_out, h->n_state * 4) &&
             dev_alloc((void **)&d->mask, (size_t)(h->c.B * h->c.T));
    if (!ok) return 0;
    d->q = (char *)d->q0 + off; d->k = (char *)d->k0 + off; d->v = (char *)d->v0 + off; d->y = (char *)d->y0 + off;
    return cudaMemcpy(d->q, h->q, h->n_qk * h->ds, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->k, h->k, h->n_qk * h->ds, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->v, h->v, h->n_v * h->ds, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->gate, h->gate, h->n_gate * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->beta, h->beta, h->n_bt * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->A_log, h->A_log, (size_t)h->c.Hv * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->dt_bias, h->dt_bias, (size_t)h->c.Hv * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->state_in, h->state_in, h->n_state * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d->mask, h->mask, (size_t)(h->c.B * h->c.T), cudaMemcpyHostToDevice) == cudaSuccess;
}

static void dev_free(dev_problem *d) {
    cudaFree(d->q0); cudaFree(d->k0); cudaFree(d->v0); cudaFree(d->y0); cudaFree(d->gate); cudaFree(d->beta);
    cudaFree(d->A_log); cudaFree(d->dt_bias); cudaFree(d->state_in); cudaFree(d->state_out); cudaFree(d->mask);
}

/* One kernel run on the device; returns 1 when y and the final state equal ref's bytes. */
static int run_and_compare(const host_problem *h, dev_problem *d, const char *kernel, cudaStream_t stream,
                           const void *y_ref, const float *state_ref, void *y_got, float *state_got) {
    const cuda_case *c = &h->c;
    gdn_delta_args a = problem_args(h, d->q, d->k, d->v, d->y, d->gate, d->beta, d->A_log, d->dt_bias, d->mask,
                                    d->state_in, d->state_out);
    a.backend = GDN_BACKEND_CUDA;
    a.stream = stream;
    if (cudaMemset(d->y, 0xff, h->n_v * h->ds) != cudaSuccess || cudaMemset(d->state_out, 0xff, h->n_state * 4) != cudaSuccess)
        return 0;
    if (c->state_mode == 2 && cudaMemcpy(d->state_out, h->state_in, h->n_state * 4, cudaMemcpyHostToDevice) != cudaSuccess)
        return 0;
    a.kernel = kernel; /* NULL: routed; "name" or "name:variant" */
    const gdn_status s = gdn_delta(&a);
    if (s == GDN_ERR_INELIGIBLE) return -1;
    const cudaError_t e = cudaStreamSynchronize(stream);
    char name[256];
    case_name(c, h->head_map, name, sizeof name);
    CHECK(s == GDN_OK && e == cudaSuccess, "%s: status %d, cuda %d: %s", kernel ? kernel : "(routed)", s, e, name);
    if (s != GDN_OK || e != cudaSuccess) return 0;
    if (cudaMemcpy(y_got, d->y, h->n_v * h->ds, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(state_got, d->state_out, h->n_state * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        return 0;
    const int y_ok = memcmp(y_got, y_ref, h->n_v * h->ds) == 0;
    int st_ok = 1;
    if (c->state_mode == 3) { /* state_out NULL: the buffer stays poisoned */
        for (size_t i = 0; i < h->n_state; ++i) st_ok &= ((uint32_t *)state_got)[i] == 0xffffffffu;
    } else {
        st_ok = memcmp(state_got, state_ref, h->n_state * 4) == 0;
    }
    if (!y_ok || !st_ok) {
        size_t first = 0;
        if (!y_ok)
            while (memcmp((char *)y_got + first * h->ds, (const char *)y_ref + first * h->ds, h->ds) == 0) ++first;
        fprintf(stderr, "    %s mismatch (y %s, state %s; first y index %zu): %s\n", kernel ? kernel : "(routed)",
                y_ok ? "ok" : "DIFF", st_ok ? "ok" : "DIFF", first, name);
    }
    CHECK(y_ok && st_ok);
    return y_ok && st_ok;
}

/* ref on the CPU, then every CUDA kernel that takes the case. */
static void check_case(const cuda_case *c, uint64_t seed, cudaStream_t stream, int *runs) {
    host_problem h;
    dev_problem d;
    if (!host_init(&h, c, seed)) { CHECK(0, "host allocation"); host_free(&h); return; }
    void *y_ref = malloc(h.n_v * h.ds), *y_got = malloc(h.n_v * h.ds);
    float *st_ref = malloc(h.n_state * 4), *st_got = malloc(h.n_state * 4);
    CHECK(y_ref && y_got && st_ref && st_got);
    memset(st_ref, 0xff, h.n_state * 4);
    if (c->state_mode == 2) memcpy(st_ref, h.state_in, h.n_state * 4); /* in place: the state starts in the output */
    gdn_delta_args a = problem_args(&h, h.q, h.k, h.v, y_ref, h.gate, h.beta, h.A_log, h.dt_bias, h.mask, h.state_in, st_ref);
    a.kernel = "ref";
    CHECK(gdn_delta(&a) == GDN_OK);
    if (dev_init(&d, &h)) {
        /* the router's choice, then every CUDA kernel of the list as routed and at each of its named variants; a
         * variant not built for the case's shape answers GDN_ERR_INELIGIBLE and is skipped */
        if (run_and_compare(&h, &d, NULL, stream, y_ref, st_ref, y_got, st_got) > 0) ++*runs;
        for (int k = 0; k < gdn_kernel_count(); ++k) { /* the chunked contract has its suite: test_chunked_cuda.c */
            if (gdn_kernel_backend(k) != GDN_BACKEND_CUDA || gdn_kernel_contract(k) != GDN_CONTRACT_EXACT) continue;
            for (int v = -1; v < gdn_kernel_variant_count(k); ++v) {
                char spec[96];
                snprintf(spec, sizeof spec, "%s%s%s", gdn_kernel_name(k), v < 0 ? "" : ":", v < 0 ? "" : gdn_kernel_variant_name(k, v));
                if (run_and_compare(&h, &d, spec, stream, y_ref, st_ref, y_got, st_got) > 0) ++*runs;
            }
        }
    } else {
        CHECK(0, "device allocation or copy failed");
    }
    dev_free(&d);
    free(y_ref); free(y_got); free(st_ref); free(st_got);
    host_free(&h);
}

static int64_t pick(harness_rng *r, const int64_t *v, int n) { return v[rng_u64(r) % (uint64_t)n]; }

/* The part of the sample this process runs (GDN_TEST_CUDA_SHARD, _COST, _DEADLINE). */
typedef struct case_filter {
    int shard, shards, index, skipped, late;
    double lo, hi, deadline;
} case_filter;

static case_filter filter_from_env(void) {
    case_filter f = {0, 1, 0, 0, 0, -1.0, 1e300, 0.0};
    const char *shard = getenv("GDN_TEST_CUDA_SHARD"), *cost = getenv("GDN_TEST_CUDA_COST");
    const char *deadline = getenv("GDN_TEST_CUDA_DEADLINE");
    if (shard && (sscanf(shard, "%d/%d", &f.shard, &f.shards) != 2 || f.shards < 1 || f.shard < 0 || f.shard >= f.shards))
        f.shard = 0, f.shards = 1;
    if (cost && sscanf(cost, "%lf:%lf", &f.lo, &f.hi) != 2) f.lo = -1.0, f.hi = 1e300;
    if (deadline) f.deadline = atof(deadline);
    return f;
}

/* check_case on the sample's next case if the filter takes it. */
static void filtered_case(case_filter *f, const cuda_case *c, uint64_t seed, cudaStream_t stream, int *runs, int *cases) {
    const double cost = (double)c->B * (double)c->T * (double)c->Hv * (double)c->Dk * (double)c->Dv;
    const int index = f->index++;
    if (index % f->shards != f->shard || cost <= f->lo || cost > f->hi) {
        f->skipped++;
        return;
    }
    if (f->deadline > 0.0 && (double)time(NULL) > f->deadline) {
        f->skipped++, f->late++;
        return;
    }
    const int before = *runs;
    check_case(c, seed, stream, runs);
    ++*cases;
    if (harness_verbose) {
        char name[256];
        case_name(c, map_of(c, seed), name, sizeof name);
        printf("     case %d: %d runs: %s\n", index, *runs - before, name);
        fflush(stdout);
    }
}

/* GDN_CHECK_POINTERS=1 (read once; ctest runs this test a second time with it set: cuda_check_pointers_on): host
 * pointers on the CUDA backend are GDN_ERR_NOT_DEVICE_MEMORY and nothing is launched; device pointers run. Without the
 * switch a host pointer is not checked, so only the switch's state is checked then. */
TEST(cuda_check_pointers) {
    const char *e = getenv("GDN_CHECK_POINTERS");
    const int on = e && strcmp(e, "1") == 0;
    CHECK(strstr(gdn_env_report(), on ? "check that every pointer is device memory" : "CUDA pointers not checked") != NULL);
    if (!on) return;
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device (the switch's state checked, not its effect)");
    const cuda_case c = {2, 3, 2, 4, 128, 64, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, 0};
    host_problem h;
    dev_problem d;
    CHECK(host_init(&h, &c, 11));
    CHECK(dev_init(&d, &h));
    void *y = malloc(h.n_v * h.ds);
    float *st = malloc(h.n_state * 4);
    CHECK(y && st);
    if (y && st) {
        gdn_delta_args a = problem_args(&h, h.q, h.k, h.v, y, h.gate, h.beta, h.A_log, h.dt_bias, h.mask, h.state_in, st);
        a.backend = GDN_BACKEND_CUDA;
        const gdn_status s = gdn_delta(&a);
        CHECK(s == GDN_ERR_NOT_DEVICE_MEMORY, "host pointers: %s", gdn_status_str(s));
        gdn_delta_args b = problem_args(&h, d.q, d.k, d.v, d.y, d.gate, d.beta, d.A_log, d.dt_bias, d.mask, d.state_in,
                                        d.state_out);
        b.backend = GDN_BACKEND_CUDA;
        b.q = h.q; /* one host tensor among device ones */
        CHECK(gdn_delta(&b) == GDN_ERR_NOT_DEVICE_MEMORY);
        b.q = d.q;
        CHECK(gdn_delta(&b) == GDN_OK && cudaDeviceSynchronize() == cudaSuccess);
    }
    free(y);
    free(st);
    dev_free(&d);
    host_free(&h);
}

TEST(cuda_kernels_bitwise_vs_ref) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    cudaStream_t stream = NULL;
    CHECK(cudaStreamCreate(&stream) == cudaSuccess);
    const char *env = getenv("GDN_TEST_CUDA_CASES");
    const int n_cases = env ? atoi(env) : 160;
    const char *env_cost = getenv("GDN_TEST_CUDA_MAXCOST");
    const double max_cost = env_cost ? atof(env_cost) : 3e8;
    static const int64_t Dks[] = {32, 64, 128, 256}, Dvs[] = {8, 64, 128}, Bs[] = {1, 3, 64}, Ts[] = {1, 7, 64, 257, 2048};
    static const int64_t heads[][2] = {{1, 1}, {16, 32}, {16, 48}};
    harness_rng r = {20251130};
    int runs = 0, cases = 0;
    case_filter f = filter_from_env();
    /* the model shape first, in every dtype and both layouts */
    for (int dt = 0; dt < 3; ++dt)
        for (int lay = 0; lay < 2; ++lay) {
            const cuda_case c = {1, 257, 16, 32, 128, 128, (gdn_dtype)dt, GDN_GATE_RAW, GDN_BETA_LOGIT,
                                 (gdn_state_layout)lay, lay, 1, 0};
            const uint64_t seed = rng_u64(&r);
            if (257.0 * 32 * 128 * 128 > max_cost) continue;
            filtered_case(&f, &c, seed, stream, &runs, &cases);
        }
    /* a seeded sample of the cross product; big B*T*H*Dk*Dv rare (the CPU ref is the slow side) */
    for (int i = 0; i < n_cases; ++i) {
        cuda_case c;
        double cost;
        do {
            const int hi = (int)(rng_u64(&r) % 3);
            c = (cuda_case){pick(&r, Bs, 3), pick(&r, Ts, 5), heads[hi][0], heads[hi][1], pick(&r, Dks, 4), pick(&r, Dvs, 3),
                            (gdn_dtype)(rng_u64(&r) % 3), (gdn_gate_kind)(rng_u64(&r) % 4),
                            (gdn_beta_kind)(rng_u64(&r) % 2), (gdn_state_layout)(rng_u64(&r) % 2), (int)(rng_u64(&r) % 2),
                            (int)(rng_u64(&r) % 4), rng_uniform(&r) < 0.1f};
            cost = (double)c.B * (double)c.T * (double)c.Hv * (double)c.Dk * (double)c.Dv;
        } while (cost > max_cost || (cost > 4e7 && rng_uniform(&r) < 0.7f));
        const uint64_t seed = rng_u64(&r);
        filtered_case(&f, &c, seed, stream, &runs, &cases);
    }
    /* rowsplit's shapes over several chunks and layouts: Dk in {64, 128, 256}, T across the chunk sizes, every gate
     * kind, dtype and state mode (the other kernels run on them too) */
    static const int64_t rs_dk[] = {64, 128, 256}, rs_t[] = {7, 64, 257, 2048, 130};
    for (int i = 0; i < 15; ++i) {
        const int64_t T = rs_t[i % 5];
        const cuda_case c = {T > 257 ? 1 : 1 + i % 3, T, 2, 4, rs_dk[i % 3], T > 257 ? 32 : 32 + 32 * (i % 2),
                             (gdn_dtype)(i % 3), (gdn_gate_kind)(i % 4), (gdn_beta_kind)((i / 2) % 2),
                             (gdn_state_layout)((i / 3) % 2), (i / 4) % 2, (i + i / 4) % 4, 0};
        const uint64_t seed = rng_u64(&r);
        if ((double)c.B * (double)c.T * (double)c.Hv * (double)c.Dk * (double)c.Dv > max_cost) continue;
        filtered_case(&f, &c, seed, stream, &runs, &cases);
    }
    /* the streamed decode at every T it takes (1 .. 8), with enough items per block (stream_blocks8: 8 blocks) to refill
     * its gate table and wrap its ring; every Dk, gate kind, dtype, layout and state mode, masks */
    static const int64_t sd_dk[] = {32, 64, 128, 256};
    for (int i = 0; i < 16; ++i) {
        const int64_t T = 1 + i % 8;
        const cuda_case c = {3 + 20 * (i % 3), T, 2, 4, sd_dk[i % 4], 32 + 32 * ((i / 4) % 2), (gdn_dtype)(i % 3),
                             (gdn_gate_kind)((i / 2) % 4), (gdn_beta_kind)(i % 2), (gdn_state_layout)((i / 8) % 2),
                             (i / 3) % 2, (i + i / 5) % 4, 0};
        const uint64_t seed = rng_u64(&r);
        filtered_case(&f, &c, seed, stream, &runs, &cases);
    }
    /* cuda_window at every T it takes (1 .. 8) at both of its Dk, masks on (token t's y is stored during token t+2,
     * the last two after the loop: masked tokens at the window's end included), both layouts, every gate kind */
    for (int i = 0; i < 16; ++i) {
        const cuda_case c = {3, 1 + i % 8, 2, 4, i < 8 ? 128 : 64, 32 + 32 * (i % 2), (gdn_dtype)(i % 3),
                             (gdn_gate_kind)(i % 4), (gdn_beta_kind)((i / 4) % 2), (gdn_state_layout)((i / 2) % 2), 1,
                             1 + i % 3, 0};
        const uint64_t seed = rng_u64(&r);
        filtered_case(&f, &c, seed, stream, &runs, &cases);
    }
    /* generic only: Dk not a multiple of 32 (and up to 1024), odd Dv */
    static const int64_t odd_dk[] = {1, 17, 33, 48, 100, 300, 1000}, odd_dv[] = {1, 5, 33, 130};
    for (int i = 0; i < 24; ++i) {
        const cuda_case c = {1 + (int64_t)(rng_u64(&r) % 3), 1 + (int64_t)(rng_u64(&r) % 40), 2, 4,
                             odd_dk[i % 7], odd_dv[rng_u64(&r) % 4], (gdn_dtype)(rng_u64(&r) % 3),
                             (gdn_gate_kind)(rng_u64(&r) % 4), (gdn_beta_kind)(rng_u64(&r) % 2),
                             (gdn_state_layout)(rng_u64(&r) % 2), (int)(rng_u64(&r) % 2), (int)(rng_u64(&r) % 4), 0};
        const uint64_t seed = rng_u64(&r);
        filtered_case(&f, &c, seed, stream, &runs, &cases);
    }
    printf("     cuda: %d cases, %d kernel runs bitwise equal to ref (%d cases of the sample not run here, %d of them "
           "for the deadline)\n", cases, runs, f.skipped, f.late);
    cudaStreamDestroy(stream);
}

#endif
