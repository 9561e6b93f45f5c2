/* The layer step on the GPU. Without a device (or a CUDA build): GDN_ERR_NO_DEVICE and nothing written. With one:
 * every CUDA layer kernel where eligible, and the router's choice, against the CPU's `staged` (itself ref's bits,
 * test_layer.c) on the same inputs: memcmp of y (and its planes in half the cases), the state pool and the history
 * pool, y poisoned first, over the model's heads (Hk 16, Hv 32 and 48, D 128), windows 1 to 2048, batches up to
 * 256 with mixed lengths, commits, verifies, skipped and fresh sequences, checkpoints, f32 and bf16, in-place and
 * separate histories, odd shapes.
 * With kernel = "fastest" (layer_cuda_chunked_when_asked): long windows on the chunked prefill, within tolerance
 * of the float64 layer oracle, bitwise run to run; short windows and the histories the exact path's bits.
 * GDN_TEST_VERBOSE prints a line per case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "harness.h"
#include "layer_case.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

TEST(layer_cuda_without_device_writes_nothing) {
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) SKIP("a CUDA device is present (CUDA_VISIBLE_DEVICES= hides it)");
    const int32_t len[1] = {2};
    lcase_cfg g;
    memset(&g, 0, sizeof g);
    g.Hk = 1, g.Hv = 1, g.Dk = 32, g.Dv = 32, g.B = 1, g.len[0] = len[0], g.seed = 1;
    lcase c;
    lrun r;
    if (!lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
    gdn_layer_args a = lcase_args(&c, &r);
    a.backend = GDN_BACKEND_CUDA;
    CHECK(gdn_layer(&a) == GDN_ERR_NO_DEVICE);
    CHECK(memcmp(r.state, c.state, c.n_state * 4) == 0 && memcmp(r.hist_in, c.hist, c.n_hist * c.ds) == 0);
    lrun_free(&r);
    lcase_free(&c);
}

#ifdef GDN_HAVE_CUDA

static void *to_device(const void *src, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (src) cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* Runs `kernel` (NULL: routed) on the GPU over copies of the case, the results back into r (host). */
static gdn_status run_cuda(const lcase *c, lrun *r, int separate, const char *kernel, const char **routed) {
    const lcase_cfg *g = &c->cfg;
    lcase dc = *c;
    dc.qkv = to_device(c->qkv, (size_t)(c->T * c->C) * c->ds);
    dc.z = to_device(c->z, c->n_y * c->ds);
    dc.alpha = to_device(c->alpha, (size_t)(c->T * g->Hv) * c->ds);
    dc.beta = to_device(c->beta, (size_t)(c->T * g->Hv) * c->ds);
    dc.conv_w = to_device(c->conv_w, (size_t)(c->C * 4) * 4);
    dc.conv_bias = to_device(c->conv_bias, (size_t)c->C * 4);
    dc.dt_bias = to_device(c->dt_bias, (size_t)g->Hv * 4);
    dc.A = to_device(c->A, (size_t)g->Hv * 4);
    dc.A_log = to_device(c->A_log, (size_t)g->Hv * 4);
    dc.gamma = to_device(c->gamma, (size_t)g->Dv * 4);
    lrun dr;
    dr.y = to_device(NULL, c->n_y * c->ds);
    dr.state = to_device(c->state, c->n_state * 4);
    dr.hist_in = to_device(c->hist, c->n_hist * c->ds);
    dr.hist_out = separate ? to_device(c->hist, c->n_hist * c->ds) : dr.hist_in;
    dr.planes = c->n_planes ? to_device(NULL, c->n_planes * 4) : NULL;
    gdn_status s = GDN_ERR_OUT_OF_MEMORY;
    if (dc.qkv && dc.z && dc.alpha && dc.beta && dc.conv_w && dc.conv_bias && dc.dt_bias && dc.A && dc.A_log &&
        dc.gamma && dr.y && dr.state && dr.hist_in && dr.hist_out && (!c->n_planes || dr.planes)) {
        cudaMemset(dr.y, 0xFF, c->n_y * c->ds);
        if (dr.planes) cudaMemset(dr.planes, 0xFF, c->n_planes * 4);
        gdn_layer_args a = lcase_args(&dc, &dr);
        a.backend = GDN_BACKEND_CUDA;
        a.kernel = kernel;
        if (routed) gdn_layer_route(&a, routed);
        s = gdn_layer(&a);
        if (s == GDN_OK && cudaDeviceSynchronize() != cudaSuccess) s = GDN_ERR_DEVICE;
        cudaMemcpy(r->y, dr.y, c->n_y * c->ds, cudaMemcpyDeviceToHost);
        cudaMemcpy(r->state, dr.state, c->n_state * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(r->hist_out, dr.hist_out, c->n_hist * c->ds, cudaMemcpyDeviceToHost);
        if (separate) cudaMemcpy(r->hist_in, dr.hist_in, c->n_hist * c->ds, cudaMemcpyDeviceToHost);
        if (dr.planes) cudaMemcpy(r->planes, dr.planes, c->n_planes * 4, cudaMemcpyDeviceToHost);
    }
    void *bufs[] = {(void *)dc.qkv, (void *)dc.z, (void *)dc.alpha, (void *)dc.beta, dc.conv_w, dc.conv_bias,
                    dc.dt_bias, dc.A, dc.A_log, dc.gamma, dr.y, dr.state, dr.hist_in, dr.planes};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) cudaFree(bufs[i]);
    if (separate) cudaFree(dr.hist_out);
    return s;
}

typedef struct layer_cuda_case {
    int64_t Hk, Hv, D;
    gdn_dtype dtype;
    int B, n;           /* n > 0: every window n tokens; n < 0: mixed lengths 1 .. -n */
    int mixed;          /* 1: commits, verifies, skipped and fresh sequences, permuted slots; 2: permuted slots; 3: and
                         * every sequence verifies */
    gdn_state_layout layout;
} layer_cuda_case;

TEST(layer_cuda_kernels_equal_cpu) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    static const layer_cuda_case cases[] = {
        {16, 32, 128, GDN_BF16, 1, 1, 0, GDN_STATE_VK},    {16, 32, 128, GDN_F32, 1, 2, 1, GDN_STATE_VK},
        {16, 48, 128, GDN_BF16, 1, 4, 1, GDN_STATE_VK},    {16, 32, 128, GDN_BF16, 1, 7, 1, GDN_STATE_KV},
        {16, 48, 128, GDN_F32, 2, 16, 1, GDN_STATE_VK},    {16, 32, 128, GDN_BF16, 1, 2048, 0, GDN_STATE_VK},
        {16, 32, 128, GDN_BF16, 8, 1, 1, GDN_STATE_VK},    {16, 32, 128, GDN_BF16, 64, -8, 1, GDN_STATE_VK},
        {16, 48, 128, GDN_BF16, 256, 1, 1, GDN_STATE_VK},  {16, 32, 128, GDN_F32, 256, -4, 1, GDN_STATE_KV},
        {16, 32, 128, GDN_BF16, 3, -70, 1, GDN_STATE_VK},  {4, 8, 64, GDN_F16, 5, -9, 1, GDN_STATE_KV},
        {2, 6, 32, GDN_F32, 7, -5, 1, GDN_STATE_VK},       {3, 3, 40, GDN_BF16, 4, -6, 1, GDN_STATE_VK},
        {1, 2, 96, GDN_F32, 3, -3, 1, GDN_STATE_KV},       {2, 4, 64, GDN_BF16, 300, 1, 1, GDN_STATE_VK},
        /* the cluster shapes of cuda_fused: group 1 (8 column blocks), 4 (2), 5 and 8 (1) */
        {4, 4, 128, GDN_BF16, 3, -8, 1, GDN_STATE_VK},     {2, 8, 128, GDN_F32, 2, -8, 1, GDN_STATE_KV},
        {1, 5, 128, GDN_F16, 2, -5, 1, GDN_STATE_VK},      {1, 8, 128, GDN_BF16, 3, 8, 1, GDN_STATE_VK},
        /* uniform batches (permuted slots; 3: all verify): the recurrence in one batch-form call */
        {2, 4, 64, GDN_F16, 5, 7, 3, GDN_STATE_VK},        {16, 32, 128, GDN_BF16, 8, 1, 2, GDN_STATE_VK},
        {16, 48, 128, GDN_F32, 64, 4, 3, GDN_STATE_KV},    {16, 32, 128, GDN_BF16, 16, 2, 2, GDN_STATE_VK},
        {16, 32, 128, GDN_BF16, 300, 1, 2, GDN_STATE_VK}};
    const int verbose = getenv("GDN_TEST_VERBOSE") != NULL;
    /* every case grouped, then tiled where Hk < Hv (value head h reads q/k head h % Hk) */
    for (size_t cm = 0; cm < 2 * (sizeof cases / sizeof cases[0]); ++cm) {
        const size_t ci = cm % (sizeof cases / sizeof cases[0]);
        const layer_cuda_case *k = &cases[ci];
        const int tiled = cm >= sizeof cases / sizeof cases[0];
        if (tiled && k->Hk == k->Hv) continue;
        lcase_cfg g;
        memset(&g, 0, sizeof g);
        g.head_map = tiled ? GDN_HEADS_TILED : GDN_HEADS_GROUPED;
        g.Hk = k->Hk, g.Hv = k->Hv, g.Dk = k->D, g.Dv = k->D, g.dtype = k->dtype, g.B = k->B, g.layout = k->layout;
        g.seed = 100 + ci, g.bias = (int)(ci & 1), g.A_log = (int)(ci % 3 == 0), g.out_gate = (gdn_out_gate)(ci % 5 == 4);
        g.planes = ci % 2 == 0 && k->D % 16 == 0;
        harness_rng rng = {ci + 1};
        for (int b = 0; b < k->B; ++b) g.len[b] = k->n > 0 ? k->n : 1 + (int32_t)(rng_u64(&rng) % (uint64_t)-k->n);
        g.slots = k->B + 5;
        lcase c;
        if (!lcase_init(&c, &g)) { CHECK(0, "allocation"); return; }
        if (k->mixed >= 2)
            for (int b = 0; b < k->B; ++b) c.slot[b] = (int32_t)(g.slots - 1 - b), c.commit[b] = k->mixed == 3 ? 0 : g.len[b];
        if (k->mixed == 1)
            for (int b = 0; b < k->B; ++b) {
                c.slot[b] = (int32_t)(g.slots - 1 - b); /* distinct, reversed */
                const uint64_t r = rng_u64(&rng) % 8;
                c.commit[b] = r == 0 ? 0 : r == 1 ? (int32_t)(1 + rng_u64(&rng) % (uint64_t)g.len[b]) : g.len[b];
                if (r == 2 && k->B > 1) c.slot[b] = -1;
                c.fresh[b] = r == 3;
            }
        /* checkpoints (cuda_staged), of the first sequence with a slot, into free slots: the mixed cases use the top
         * B slots (0 .. 4 free), the others slots 1 .. B (the top 3 free) */
        const int32_t free0 = k->mixed ? 0 : (int32_t)g.slots - 3;
        if (ci % 3 == 2)
            for (int b = 0; b < k->B && c.n_ck == 0; ++b)
                if (c.slot[b] >= 0) {
                    c.ck[0] = (gdn_layer_checkpoint){b, 1, free0};
                    c.ck[1] = (gdn_layer_checkpoint){b, g.len[b], free0 + 1};
                    c.ck[2] = (gdn_layer_checkpoint){b, (g.len[b] + 1) / 2, free0 + 2};
                    c.n_ck = 3;
                }
        const int separate = (int)(ci % 4 == 1);
        lrun want;
        if (!lrun_init(&want, &c, separate)) { CHECK(0, "allocation"); return; }
        CHECK(lcase_run(&c, &want, "staged", 0) == GDN_OK, "%s", gdn_last_error());
        for (int kn = -1; kn < gdn_layer_kernel_count(); ++kn) {
            const char *name = kn < 0 ? NULL : gdn_layer_kernel_name(kn);
            if (name && strncmp(name, "cuda", 4) != 0) continue;
            lrun got;
            if (!lrun_init(&got, &c, separate)) { CHECK(0, "allocation"); break; }
            const char *routed = "?";
            const gdn_status s = run_cuda(&c, &got, separate, name, kn < 0 ? &routed : NULL);
            if (s == GDN_ERR_INELIGIBLE) {
                lrun_free(&got);
                continue;
            }
            CHECK(s == GDN_OK, "case %zu%s %s: %s", ci, tiled ? " tiled" : "", name ? name : "routed", gdn_last_error());
            const int same = lrun_equal(&c, &want, &got);
            CHECK(same, "case %zu (Hk %lld Hv %lld D %lld B %d n %d%s) %s: differs from the CPU", ci, (long long)k->Hk,
                  (long long)k->Hv, (long long)k->D, k->B, k->n, tiled ? " tiled" : "", name ? name : routed);
            if (separate)
                CHECK(memcmp(got.hist_in, c.hist, c.n_hist * c.ds) == 0, "case %zu: hist_in was written", ci);
            if (verbose)
                printf("  case %zu%s %s%s: %s\n", ci, tiled ? " tiled" : "", name ? name : "routed to ", name ? "" : routed,
                       same ? "equal" : "DIFFERS");
            lrun_free(&got);
        }
        lrun_free(&want);
        lcase_free(&c);
    }
}

#if GDN_TESTING
static int all_ff(const void *p, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i)
        if (((const unsigned char *)p)[i] != 0xFF) return 0;
    return 1;
}

/* A CUDA layer call that cannot get its memory (host or device: gdn__alloc_fail_at fails the n-th, for every n the
 * call makes) returns GDN_ERR_OUT_OF_MEMORY with y and the pools as they were; with none failing, the bits of the call
 * (tests/core/test_alloc_failure.c does the same on the CPU). A prefill with a partial commit and two checkpoints
 * (under "fastest" on the chunked prefill), a run of decode steps, a verify; cuda_staged, the router, "fastest". */
TEST(layer_cuda_alloc_failure_writes_nothing) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    lcase_cfg g;
    memset(&g, 0, sizeof g);
    g.Hk = 2, g.Hv = 4, g.Dk = 128, g.Dv = 128, g.dtype = GDN_BF16, g.B = 4, g.slots = 9, g.seed = 77, g.planes = 1;
    g.len[0] = 70, g.len[1] = 1, g.len[2] = 1, g.len[3] = 9;
    lcase c;
    if (!lcase_init(&c, &g)) { CHECK(0, "allocation"); return; }
    c.commit[0] = 40, c.commit[3] = 0;
    c.ck[0] = (gdn_layer_checkpoint){0, 64, 6}, c.ck[1] = (gdn_layer_checkpoint){0, 70, 7}, c.n_ck = 2;
    const char *const kernels[3] = {"cuda_staged", NULL, "fastest"};
    for (int k = 0; k < 3; ++k) {
        lrun want, got;
        if (!lrun_init(&want, &c, 0) || !lrun_init(&got, &c, 0)) { CHECK(0, "allocation"); return; }
        gdn_cpu_release();
        gdn__alloc_fail_at(0);
        CHECK(run_cuda(&c, &want, 0, kernels[k], NULL) == GDN_OK, "%s: %s", kernels[k] ? kernels[k] : "routed",
              gdn_last_error());
        const int64_t count = gdn__alloc_count();
        int bad = 0;
        for (int64_t n = 1; n <= count + 1; ++n) {
            lrun_free(&got);
            if (!lrun_init(&got, &c, 0)) { CHECK(0, "allocation"); return; }
            gdn_cpu_release();
            gdn__alloc_fail_at(n);
            const gdn_status s = run_cuda(&c, &got, 0, kernels[k], NULL);
            gdn__alloc_fail_at(0);
            const int ok = n <= count ? s == GDN_ERR_OUT_OF_MEMORY && all_ff(got.y, c.n_y * c.ds) &&
                                            all_ff(got.planes, c.n_planes * 4) &&
                                            memcmp(got.state, c.state, c.n_state * 4) == 0 &&
                                            memcmp(got.hist_out, c.hist, c.n_hist * c.ds) == 0
                                      : s == GDN_OK && lrun_equal(&c, &want, &got);
            if (!ok && bad++ < 3)
                CHECK(0, "%s: allocation %lld of %lld failing: status %d (%s)", kernels[k] ? kernels[k] : "routed",
                      (long long)n, (long long)count, (int)s, gdn_last_error());
        }
        CHECK(bad == 0 && count >= 1, "%s: %d of %lld runs wrong", kernels[k] ? kernels[k] : "routed", bad,
              (long long)count + 1);
        if (getenv("GDN_TEST_VERBOSE")) printf("  %s: %lld allocations\n", kernels[k] ? kernels[k] : "routed", (long long)count);
        lrun_free(&want), lrun_free(&got);
    }
    lcase_free(&c);
}
#endif

/* max |x - ref| over max |ref| of n values (x as dtype dt: bf16 or f32); -1 when one is not finite. */
static double rel_err(const void *x, gdn_dtype dt, const double *ref, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double v = dt == GDN_BF16 ? (double)gdn__bf16_to_f32(((const uint16_t *)x)[i]) : (double)((const float *)x)[i];
        if (!isfinite(v)) return -1.0;
        e = fmax(e, fabs(v - ref[i])), m = fmax(m, fabs(ref[i]));
    }
    return m > 0.0 ? e / m : e;
}

TEST(layer_cuda_chunked_when_asked) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    /* the model's heads; a 300-token prompt with a checkpoint at 128, a fresh 170-token one, a 5-token step */
    lcase_cfg g;
    memset(&g, 0, sizeof g);
    g.Hk = 16, g.Hv = 32, g.Dk = 128, g.Dv = 128, g.dtype = GDN_BF16, g.B = 3, g.seed = 41, g.A_log = 1;
    g.len[0] = 300, g.len[1] = 170, g.len[2] = 5;
    lcase c;
    if (!lcase_init(&c, &g)) { CHECK(0, "allocation"); return; }
    c.fresh[1] = 1;
    c.ck[0] = (gdn_layer_checkpoint){0, 128, 4};
    c.n_ck = 1;
    lrun host, exact, got, again;
    if (!lrun_init(&host, &c, 0) || !lrun_init(&exact, &c, 0) || !lrun_init(&got, &c, 0) || !lrun_init(&again, &c, 0)) {
        CHECK(0, "allocation");
        return;
    }
    double *y64 = malloc(c.n_y * sizeof(double)), *s64 = malloc(c.n_state * sizeof(double));
    double *h64 = malloc(c.n_hist * sizeof(double));
    CHECK(y64 && s64 && h64);
    gdn_layer_args a = lcase_args(&c, &host);
    CHECK(y64 && s64 && h64 && gdn__oracle_layer(&a, y64, s64, h64) == GDN_OK, "oracle: %s", gdn_last_error());
    const char *routed = NULL;
    CHECK(run_cuda(&c, &exact, 0, NULL, NULL) == GDN_OK, "exact: %s", gdn_last_error());
    CHECK(run_cuda(&c, &got, 0, "fastest", &routed) == GDN_OK, "fastest: %s", gdn_last_error());
    CHECK(run_cuda(&c, &again, 0, "fastest", NULL) == GDN_OK, "fastest again: %s", gdn_last_error());
    CHECK(routed && strcmp(routed, "cuda_staged") == 0, "fastest routes to %s", routed ? routed : "(null)");
    CHECK(lrun_equal(&c, &got, &again), "fastest: two runs differ");
    /* bf16 q, k, v and the chunked arithmetic: within the inputs' rounding of the oracle */
    const double ey = rel_err(got.y, GDN_BF16, y64, c.n_y), es = rel_err(got.state, GDN_F32, s64, c.n_state);
    CHECK(ey >= 0.0 && ey <= 3e-2 && es >= 0.0 && es <= 3e-2, "fastest: y error %.3g, state error %.3g", ey, es);
    /* the 5-token window, the histories: the exact path's bits */
    const size_t row = (size_t)(g.Hv * g.Dv) * c.ds, per = (size_t)(g.Hv * g.Dk * g.Dv);
    CHECK(memcmp((const uint8_t *)got.y + c.cu[2] * row, (const uint8_t *)exact.y + c.cu[2] * row, 5 * row) == 0 &&
              memcmp(got.state + (size_t)c.slot[2] * per, exact.state + (size_t)c.slot[2] * per, per * 4) == 0,
          "fastest: the short window is not the exact path's");
    CHECK(memcmp(got.hist_out, exact.hist_out, c.n_hist * c.ds) == 0, "fastest: the histories differ");
    if (getenv("GDN_TEST_VERBOSE")) printf("  fastest: y error %.3g, state error %.3g of the oracle\n", ey, es);
    free(y64), free(s64), free(h64);
    lrun_free(&host), lrun_free(&exact), lrun_free(&got), lrun_free(&again);
    lcase_free(&c);
}

#endif
