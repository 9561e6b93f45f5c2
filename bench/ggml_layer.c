/* The GDN layer step on the CPU: libgdn's gdn_layer against the chain of ggml ops an engine builds for it
 * (llama.cpp's Qwen3-Next / Qwen3.5 linear-attention layer), in one process, on the same inputs.
 *
 * The ggml graph, per call (B = 1, T tokens, C = 2 Hk D + Hv D channels, f32 activations):
 *     x     = concat(conv_state [3, C], transpose(qkv [C, T]), dim 0)             ggml_concat, ggml_transpose
 *     conv  = silu(ssm_conv(x, conv_w [4, C]))                                     ggml_ssm_conv, ggml_silu
 *     conv_state <- x[T .. T+2, :]                                                 ggml_view_3d + ggml_cpy
 *     q, k  = l2_norm(views of conv, eps 1e-6); v = a view of conv                  ggml_l2_norm
 *     g     = softplus(alpha + dt_bias) * A          (A = -exp(A_log), as a GGUF stores ssm_a; the op takes log g)
 *     beta  = sigmoid(beta)
 *     r     = gated_delta_net(q, k, v, g, beta, state, 1)                           (scale 1/sqrt(D) inside the op)
 *     state <- r's state part                                                     ggml_view_1d + ggml_cpy
 *     y     = rms_norm(r's scores, 1e-6) * gamma * silu(z)                          ggml_rms_norm, ggml_mul x2, ggml_silu
 * computed with ggml_graph_compute on a persistent ggml threadpool. "ggml, no write-back" is the same graph
 * without the two ggml_cpy nodes (the new state stays in the op's output tensor).
 *
 * Heads: ggml's op maps value head p to key head p % Hk (tiled); libgdn maps h to h / (Hv/Hk) (grouped). An
 * engine relabels the value heads when it converts the weights (llama.cpp's converter does so for this op), so
 * the ggml side receives the same arrays with the value heads permuted (h = hk R + r  ->  p = r Hk + hk) in
 * every per-value-head input (the v channels of qkv, conv_w and the history; z, alpha, beta, dt_bias, A; the
 * state); the outputs are permuted back for the comparison. The relabeling is setup, outside the timing.
 *
 * libgdn gets gdn_layer (routed, CPU, f32 activations, A given, no conv bias, state GDN_STATE_VK = ggml's layout,
 * histories in place), args.threads = the ggml thread count.
 *
 * Timing: 3 rounds of (ggml block, ggml no-write-back block, libgdn block), ggml's threads paused while libgdn
 * runs; the best block median of each. Decode (n = 1) rotates over `sets` states and histories (cold) or uses one
 * (hot).
 *
 *   ggml_layer [--json] [--quick] [--commit HASH] [--sets N] [--threads N]    (--threads: only that count) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gdn.h"

#define BENCH_NAME "ggml_layer"
#include "ggml_common.h"

enum { HK = 16, HV = 32, D = 128, R = HV / HK, C = 2 * HK * D + HV * D };

/* libgdn's value head h as ggml's head: h = hk R + r  ->  r Hk + hk */
static int perm(int h) { return (h % R) * HK + h / R; }

/* copies `rows` rows of `row_len` per-value-head blocks [rows][HV][blk], value heads permuted */
static void permute_heads(float *dst, const float *src, size_t rows, size_t blk) {
    for (size_t t = 0; t < rows; ++t)
        for (int h = 0; h < HV; ++h)
            memcpy(dst + (t * HV + (size_t)perm(h)) * blk, src + (t * HV + (size_t)h) * blk, blk * sizeof(float));
}
/* rows of C channels (qkv [T, C], hist [C, 3] per slot as [C][w]): the v channels' heads permuted */
static void permute_channels(float *dst, const float *src, size_t rows, size_t w) {
    const size_t qk = 2 * HK * D;
    for (size_t t = 0; t < rows; ++t) {
        const float *s = src + t * C * w;
        float *d = dst + t * C * w;
        memcpy(d, s, qk * w * sizeof(float));
        for (int h = 0; h < HV; ++h)
            memcpy(d + (qk + (size_t)perm(h) * D) * w, s + (qk + (size_t)h * D) * w, D * w * sizeof(float));
    }
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d, den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- one shape: the inputs (libgdn's and ggml's), the pools, the graphs ---- */

typedef struct shape {
    int T, sets, threads;
    /* libgdn side */
    float *qkv, *z, *alpha, *beta, *conv_w, *dt_bias, *A, *gamma, *y;
    float *state, *hist;            /* [sets, HV, D, D], [sets, C, 3] */
    /* ggml side: the same arrays with the value heads relabeled */
    float *g_qkv, *g_z, *g_alpha, *g_beta, *g_conv_w, *g_dt_bias, *g_A;
    float *g_state, *g_hist;
    struct ggml_context **ctx;      /* per set */
    struct ggml_cgraph **gf, **gf_nowb;
    struct ggml_tensor **y_t, **r_t;
    struct ggml_cplan plan;
    uint8_t *work;
    struct ggml_threadpool *tp;
} shape;

static struct ggml_tensor *leaf(struct ggml_context *lctx, void *data, int n, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3) {
    struct ggml_tensor *t = n == 1   ? ggml_new_tensor_1d(lctx, GGML_TYPE_F32, ne0)
                            : n == 2 ? ggml_new_tensor_2d(lctx, GGML_TYPE_F32, ne0, ne1)
                            : n == 3 ? ggml_new_tensor_3d(lctx, GGML_TYPE_F32, ne0, ne1, ne2)
                                     : ggml_new_tensor_4d(lctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    t->data = data;
    return t;
}

/* The layer step's graph over set s's state and history (ggml side arrays). */
static void build_graph(shape *sh, int s) {
    const int64_t T = sh->T;
    /* every tensor's floats: the leaves (allocated, then pointed elsewhere), concat, ssm_conv, silu, the norms, the
     * gates, the op's output, the epilogue */
    const size_t t = (size_t)T, floats = t * C * 4 + 3 * (size_t)C * 4 + 4 * (size_t)C + t * HV * D * 6 +
                                         2 * (size_t)HV * D * D + 2 * t * HK * D + 8 * t * HV + D + 2 * HV;
    const size_t acts = floats * sizeof(float) + 64 * GGML_MEM_ALIGN * 4;
    struct ggml_init_params ip = {.mem_size = acts + 64 * ggml_tensor_overhead() + 2 * ggml_graph_overhead() + (1 << 20),
                                  .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) {
        fprintf(stderr, "ggml_layer: ggml_init failed\n");
        exit(1);
    }
    /* leaves: tensors of this context pointed at the caller's arrays (their own allocation goes unused) */
    struct ggml_tensor *qkv = leaf(ctx, sh->g_qkv, 2, C, T, 1, 1);
    struct ggml_tensor *z = leaf(ctx, sh->g_z, 3, D, HV, T, 1);
    struct ggml_tensor *alpha = leaf(ctx, sh->g_alpha, 2, HV, T, 1, 1);
    struct ggml_tensor *beta = leaf(ctx, sh->g_beta, 2, HV, T, 1, 1);
    struct ggml_tensor *conv_w = leaf(ctx, sh->g_conv_w, 2, 4, C, 1, 1);
    struct ggml_tensor *dt_bias = leaf(ctx, sh->g_dt_bias, 1, HV, 1, 1, 1);
    struct ggml_tensor *A = leaf(ctx, sh->g_A, 1, HV, 1, 1, 1);
    struct ggml_tensor *gamma = leaf(ctx, sh->gamma, 1, D, 1, 1, 1);
    struct ggml_tensor *conv_state = leaf(ctx, sh->g_hist + (size_t)s * C * 3, 3, 3, C, 1, 1);
    struct ggml_tensor *state = leaf(ctx, sh->g_state + (size_t)s * HV * D * D, 4, D, D, HV, 1);

    /* conv */
    struct ggml_tensor *x = ggml_concat(ctx, conv_state, ggml_transpose(ctx, qkv), 0); /* [3 + T, C, 1] */
    struct ggml_tensor *conv = ggml_silu(ctx, ggml_ssm_conv(ctx, x, conv_w));         /* [C, T, 1] */
    struct ggml_tensor *last = ggml_view_3d(ctx, x, 3, C, 1, x->nb[1], x->nb[2], (size_t)T * sizeof(float));
    struct ggml_tensor *cpy_hist = ggml_cpy(ctx, last, conv_state);
    /* q, k, v */
    const size_t es = sizeof(float), nb1 = conv->nb[1];
    struct ggml_tensor *q = ggml_view_4d(ctx, conv, D, HK, T, 1, D * es, nb1, nb1 * (size_t)T, 0);
    struct ggml_tensor *k = ggml_view_4d(ctx, conv, D, HK, T, 1, D * es, nb1, nb1 * (size_t)T, HK * D * es);
    struct ggml_tensor *v = ggml_view_4d(ctx, conv, D, HV, T, 1, D * es, nb1, nb1 * (size_t)T, 2 * HK * D * es);
    q = ggml_l2_norm(ctx, q, 1e-6f);
    k = ggml_l2_norm(ctx, k, 1e-6f);
    /* gates */
    struct ggml_tensor *g = ggml_mul(ctx, ggml_softplus(ctx, ggml_add(ctx, alpha, dt_bias)), A);
    g = ggml_reshape_4d(ctx, g, 1, HV, T, 1);
    struct ggml_tensor *b = ggml_reshape_4d(ctx, ggml_sigmoid(ctx, beta), 1, HV, T, 1);
    /* the recurrence */
    struct ggml_tensor *r = ggml_gated_delta_net(ctx, q, k, v, g, b, state, 1);
    struct ggml_tensor *out = ggml_view_4d(ctx, r, D, HV, T, 1, D * es, D * HV * es, D * HV * es * (size_t)T, 0);
    struct ggml_tensor *new_state = ggml_view_4d(ctx, r, D, D, HV, 1, D * es, D * D * es, D * D * HV * es,
                                                 D * HV * es * (size_t)T);
    struct ggml_tensor *cpy_state = ggml_cpy(ctx, new_state, state);
    /* gated RMSNorm */
    struct ggml_tensor *y = ggml_mul(ctx, ggml_mul(ctx, ggml_rms_norm(ctx, out, 1e-6f), gamma), ggml_silu(ctx, z));

    struct ggml_cgraph *gf = ggml_new_graph(ctx), *gn = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_build_forward_expand(gf, cpy_hist);
    ggml_build_forward_expand(gf, cpy_state);
    ggml_build_forward_expand(gn, y);
    sh->ctx[s] = ctx, sh->gf[s] = gf, sh->gf_nowb[s] = gn, sh->y_t[s] = y, sh->r_t[s] = r;
}

static void shape_init(shape *sh, int T, int sets, int threads, struct ggml_threadpool *tp) {
    memset(sh, 0, sizeof *sh);
    sh->T = T, sh->sets = sets, sh->threads = threads, sh->tp = tp;
    rng = 0x5eedULL + (uint64_t)T * 131u;
    const size_t t = (size_t)T, st = (size_t)HV * D * D, hi = (size_t)C * 3;
    sh->qkv = fill_normal(t * C, 0, 1), sh->z = fill_normal(t * HV * D, 0, 1);
    sh->alpha = fill_normal(t * HV, 0, 1), sh->beta = fill_normal(t * HV, 0, 1);
    sh->conv_w = fill_normal((size_t)C * 4, 0, 0.25f);
    sh->A = fill_uniform(HV, 1, 16); /* A_log = log U(1, 16), as the repo's layer case; A = -exp(A_log) */
    for (int h = 0; h < HV; ++h) sh->A[h] = -expf(logf(sh->A[h]));
    sh->dt_bias = fill_uniform(HV, 0, 1), sh->gamma = fill_normal(D, 1, 0.1f);
    sh->state = fill_uniform(st * (size_t)sets, -0.1f, 0.1f), sh->hist = fill_normal(hi * (size_t)sets, 0, 1);
    sh->y = xmalloc(t * HV * D * sizeof(float));
    /* the ggml side's copies, value heads relabeled */
    sh->g_qkv = xmalloc(t * C * sizeof(float)), permute_channels(sh->g_qkv, sh->qkv, t, 1);
    sh->g_conv_w = xmalloc((size_t)C * 4 * sizeof(float)), permute_channels(sh->g_conv_w, sh->conv_w, 1, 4);
    sh->g_hist = xmalloc(hi * (size_t)sets * sizeof(float)), permute_channels(sh->g_hist, sh->hist, (size_t)sets, 3);
    sh->g_z = xmalloc(t * HV * D * sizeof(float)), permute_heads(sh->g_z, sh->z, t, D);
    sh->g_alpha = xmalloc(t * HV * sizeof(float)), permute_heads(sh->g_alpha, sh->alpha, t, 1);
    sh->g_beta = xmalloc(t * HV * sizeof(float)), permute_heads(sh->g_beta, sh->beta, t, 1);
    sh->g_dt_bias = xmalloc(HV * sizeof(float)), permute_heads(sh->g_dt_bias, sh->dt_bias, 1, 1);
    sh->g_A = xmalloc(HV * sizeof(float)), permute_heads(sh->g_A, sh->A, 1, 1);
    sh->g_state = xmalloc(st * (size_t)sets * sizeof(float)), permute_heads(sh->g_state, sh->state, (size_t)sets, (size_t)D * D);
    sh->ctx = xmalloc((size_t)sets * sizeof *sh->ctx);
    sh->gf = xmalloc((size_t)sets * sizeof *sh->gf), sh->gf_nowb = xmalloc((size_t)sets * sizeof *sh->gf_nowb);
    sh->y_t = xmalloc((size_t)sets * sizeof *sh->y_t), sh->r_t = xmalloc((size_t)sets * sizeof *sh->r_t);
    size_t work = 0;
    for (int s = 0; s < sets; ++s) {
        build_graph(sh, s);
        const struct ggml_cplan p = ggml_graph_plan(sh->gf[s], threads, tp);
        if (p.work_size > work) work = p.work_size;
    }
    sh->plan = ggml_graph_plan(sh->gf[0], threads, tp);
    sh->work = xmalloc(work + 64);
    sh->plan.work_size = work, sh->plan.work_data = sh->work;
}

static void shape_free(shape *sh) {
    for (int s = 0; s < sh->sets; ++s) ggml_free(sh->ctx[s]);
    free(sh->ctx), free(sh->gf), free(sh->gf_nowb), free(sh->y_t), free(sh->r_t), free(sh->work);
    float *arr[] = {sh->qkv, sh->z, sh->alpha, sh->beta, sh->conv_w, sh->dt_bias, sh->A, sh->gamma, sh->y, sh->state,
                    sh->hist, sh->g_qkv, sh->g_z, sh->g_alpha, sh->g_beta, sh->g_conv_w, sh->g_dt_bias, sh->g_A,
                    sh->g_state, sh->g_hist};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; ++i) free(arr[i]);
    memset(sh, 0, sizeof *sh);
}

static gdn_layer_args layer_args(shape *sh, int s, int32_t *cu, int32_t *slot) {
    gdn_layer_args a;
    memset(&a, 0, sizeof a);
    cu[0] = 0, cu[1] = sh->T, slot[0] = s;
    a.B = 1, a.Hk = HK, a.Hv = HV, a.Dk = D, a.Dv = D, a.cu_seqlens = cu, a.dtype = GDN_F32;
    a.qkv = sh->qkv, a.z = sh->z, a.alpha = sh->alpha, a.beta = sh->beta, a.y = sh->y;
    a.conv_w = sh->conv_w, a.conv_bias = NULL, a.dt_bias = sh->dt_bias, a.A = sh->A, a.A_log = NULL, a.gamma = sh->gamma;
    a.eps_l2 = 1e-6f, a.eps_rms = 1e-6f, a.scale = 0.0f, a.out_gate = GDN_OUT_GATE_SILU;
    a.slots = sh->sets, a.state_layout = GDN_STATE_VK, a.state = sh->state, a.hist_in = sh->hist, a.hist_out = sh->hist;
    a.slot = slot, a.backend = GDN_BACKEND_CPU, a.kernel = NULL, a.threads = sh->threads;
    return a;
}

static void ggml_call(shape *sh, int s, int write_back) {
    compute_or_exit(write_back ? sh->gf[s] : sh->gf_nowb[s], &sh->plan);
}

static void gdn_call(shape *sh, int s) {
    int32_t cu[2], slot[1];
    const gdn_layer_args a = layer_args(sh, s, cu, slot);
    const gdn_status st = gdn_layer(&a);
    if (st != GDN_OK) {
        fprintf(stderr, "ggml_layer: gdn_layer: %s (%s)\n", gdn_status_str(st), gdn_last_error());
        exit(1);
    }
}

/* Both sides once on set 0 from the same pools; relative L2 of y, the state and the history (libgdn's as the
 * reference), max |dy|. The pools are restored afterwards. */
typedef struct agreement {
    double y, state, hist, y_max;
} agreement;

static agreement check(shape *sh) {
    const size_t st = (size_t)HV * D * D, hi = (size_t)C * 3, ny = (size_t)sh->T * HV * D;
    float *st0 = xmalloc(st * 4), *gst0 = xmalloc(st * 4), *hi0 = xmalloc(hi * 4), *ghi0 = xmalloc(hi * 4);
    memcpy(st0, sh->state, st * 4), memcpy(gst0, sh->g_state, st * 4);
    memcpy(hi0, sh->hist, hi * 4), memcpy(ghi0, sh->g_hist, hi * 4);
    ggml_call(sh, 0, 1);
    ggml_threadpool_pause(sh->tp);
    gdn_call(sh, 0);
    /* ggml's outputs in libgdn's head order */
    float *gy = xmalloc(ny * 4), *gs = xmalloc(st * 4), *gh = xmalloc(hi * 4);
    const float *yt = sh->y_t[0]->data;
    for (size_t t = 0; t < (size_t)sh->T; ++t)
        for (int h = 0; h < HV; ++h)
            memcpy(gy + (t * HV + (size_t)h) * D, yt + (t * HV + (size_t)perm(h)) * D, D * 4);
    for (int h = 0; h < HV; ++h) memcpy(gs + (size_t)h * D * D, sh->g_state + (size_t)perm(h) * D * D, (size_t)D * D * 4);
    memcpy(gh, sh->g_hist, 2 * HK * D * 3 * 4);
    for (int h = 0; h < HV; ++h)
        memcpy(gh + (2 * HK * D + (size_t)h * D) * 3, sh->g_hist + (2 * HK * D + (size_t)perm(h) * D) * 3, D * 3 * 4);
    agreement a = {rel_l2(gy, sh->y, ny), rel_l2(gs, sh->state, st), rel_l2(gh, sh->hist, hi), 0};
    for (size_t i = 0; i < ny; ++i) {
        const double d = fabs((double)gy[i] - (double)sh->y[i]);
        if (d > a.y_max) a.y_max = d;
    }
    memcpy(sh->state, st0, st * 4), memcpy(sh->g_state, gst0, st * 4);
    memcpy(sh->hist, hi0, hi * 4), memcpy(sh->g_hist, ghi0, hi * 4);
    free(st0), free(gst0), free(hi0), free(ghi0), free(gy), free(gs), free(gh);
    return a;
}

/* one call of a side (ggml_common.h's BENCH_*) on state set `set` */
static void run_side(void *ctx, int side, int set) {
    shape *sh = ctx;
    if (side == BENCH_LIBGDN) gdn_call(sh, set);
    else ggml_call(sh, set, side == BENCH_GGML);
}

int main(int argc, char **argv) {
    int json = 0, quick = 0, sets_cold = 64, only_threads = 0;
    const char *commit = "unknown";
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc) commit = argv[++i];
        else if (strcmp(argv[i], "--sets") == 0 && i + 1 < argc) sets_cold = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) only_threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: ggml_layer [--json] [--quick] [--commit HASH] [--sets N] [--threads N]\n");
            return 2;
        }
    }
    if (sets_cold < 1) sets_cold = 1;
    ggml_cpu_init();
    const int max_threads = gdn_cpu_threads();
    if (!json)
        printf("ggml_layer: the GDN layer step, Hk=%d Hv=%d D=%d, f32 activations, B=1; ggml %s; libgdn pool %d "
               "threads\n\n", HK, HV, D, commit, max_threads);

    /* agreement on a short window, then each shape */
    typedef struct point {
        int T, sets, calls;
    } point;
    const point full[] = {{16, 1, 0}, {1, sets_cold, 200}, {1, 1, 200}, {256, 1, 10}, {2048, 1, 3}};
    const point brief[] = {{16, 1, 0}, {1, sets_cold, 50}, {256, 1, 3}};
    const point *pts = quick ? brief : full;
    const int n_pts = quick ? (int)(sizeof brief / sizeof brief[0]) : (int)(sizeof full / sizeof full[0]);
    const int thread_list[2] = {2, 1};
    if (!json)
        printf("%-7s %5s %5s %4s %-10s %12s %12s %12s   %s\n", "threads", "n", "sets", "cold", "libgdn", "ggml us",
               "ggml-nowb us", "libgdn us", "ggml/libgdn  (best of 3 block medians)");
    for (int ti = 0; ti < 2; ++ti) {
        const int nth = thread_list[ti];
        if (nth > max_threads || (only_threads && nth != only_threads)) continue;
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(nth);
        struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
        if (!tp) {
            fprintf(stderr, "ggml_layer: ggml_threadpool_new failed\n");
            return 1;
        }
        for (int pi = 0; pi < n_pts; ++pi) {
            const point *p = &pts[pi];
            shape sh;
            shape_init(&sh, p->T, p->sets, nth, tp);
            int32_t cu[2], slot[1];
            const gdn_layer_args ra = layer_args(&sh, 0, cu, slot);
            const char *kernel = "?";
            gdn_layer_route(&ra, &kernel);
            const agreement ag = check(&sh);
            if (json)
                printf("{\"op\": \"layer_ggml_check\", \"ggml\": \"%s\", \"libgdn_kernel\": \"%s\", \"threads\": %d, "
                       "\"Hk\": %d, \"Hv\": %d, \"D\": %d, \"B\": 1, \"n\": %d, \"y_rel_l2\": %.3e, \"y_max_abs\": %.3e, "
                       "\"state_rel_l2\": %.3e, \"hist_rel_l2\": %.3e}\n", commit, kernel, nth, HK, HV, D, p->T, ag.y,
                       ag.y_max, ag.state, ag.hist);
            else
                printf("%-7d %5d %5s %4s %-10s check: y rel L2 %.2e (max |dy| %.2e), state %.2e, history %.2e\n", nth,
                       p->T, "-", "-", kernel, ag.y, ag.y_max, ag.state, ag.hist);
            fflush(stdout);
            if (p->calls == 0) {
                shape_free(&sh);
                continue;
            }
            double med[BENCH_SIDES][BENCH_ROUNDS], best[BENCH_SIDES];
            bench_sides(run_side, &sh, sh.tp, p->calls, sh.sets, med, best);
            const int cold = p->sets > 1;
            if (json) {
                for (int side = 0; side < BENCH_SIDES; ++side)
                    printf("{\"op\": \"layer_ggml\", \"side\": \"%s\", \"kernel\": \"%s\", \"ggml\": \"%s\", "
                           "\"threads\": %d, \"Hk\": %d, \"Hv\": %d, \"D\": %d, \"B\": 1, \"n\": %d, \"sets\": %d, "
                           "\"cold\": %d, \"calls\": %d, \"us\": %.3f, \"block_medians_us\": [%.3f, %.3f, %.3f]}\n",
                           bench_side_name[side], side == BENCH_LIBGDN ? kernel : "graph", commit, nth, HK, HV, D,
                           p->T, p->sets, cold, p->calls, best[side], med[side][0], med[side][1], med[side][2]);
            } else {
                printf("%-7d %5d %5d %4s %-10s %12.1f %12.1f %12.1f   %.2fx (no write-back %.2fx)\n", nth, p->T,
                       p->sets, cold ? "yes" : "no", kernel, best[0], best[1], best[2], best[0] / best[2],
                       best[1] / best[2]);
            }
            fflush(stdout);
            shape_free(&sh);
        }
        ggml_threadpool_free(tp);
    }
    return 0;
}
