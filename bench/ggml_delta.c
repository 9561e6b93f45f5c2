/* The recurrence alone on the CPU: libgdn's gdn_delta against ggml's GGML_OP_GATED_DELTA_NET
 * (ggml_gated_delta_net), in one process, on the same inputs.
 *
 * Shapes: Hk = 16, Hv = 32, Dk = Dv = D = 128, f32 activations, f32 state in ggml's layout ([B, Hv, Dv, Dk], libgdn's
 * GDN_STATE_VK). Points: prefill B = 1 at T = 64 and 2048; decode T = 1 at B = 1 (cold and hot), 64 and 256 (cold).
 *
 * The ggml graph, per call (q, k l2-normalized on the host, g = log decay, beta in (0, 1)):
 *     r     = gated_delta_net(q [D, Hk, T, B], k, v [D, Hv, T, B], g [1, Hv, T, B], beta, state [D, D, Hv, B], 1)
 *     state <- r's state part                                      ggml_view_4d + ggml_cpy
 * computed with ggml_graph_compute on a persistent ggml threadpool. "ggml, no write-back" is the same graph without
 * the ggml_cpy (the new state stays in the op's output tensor). The op's scale is 1/sqrt(D).
 *
 * Heads: ggml's op maps value head p to key head p % Hk (tiled); libgdn maps h to h / (Hv/Hk) (grouped). An engine
 * relabels the value heads when it converts the weights, so the ggml side receives the same arrays with the value
 * heads permuted (h = hk R + r  ->  p = r Hk + hk) in every per-value-head input (v, g, beta, the state); its outputs
 * are read through the same permutation for the comparison. The relabeling is setup, outside the timing.
 *
 * libgdn gets gdn_delta (routed, CPU, GDN_GATE_LOG_DECAY, GDN_BETA_DIRECT, scale 1/sqrt(D), GDN_STATE_VK, the state
 * in place: state_in = state_out), args.threads = the ggml thread count.
 *
 * Check: before timing, each point runs both sides once from the same state; relative L2 of y and of the final
 * state (libgdn's as the reference); exit 1 when either is above 1e-4.
 * Timing: 3 rounds of (ggml block, ggml no-write-back block, libgdn block), ggml's threads paused while libgdn runs;
 * the best block median of each. Decode rotates over `sets` states (cold: at least --cold-mib MiB of state in all,
 * as memory allows) or uses one (hot); the inputs are shared. GFLOP/s counts 7 Dk Dv T Hv B flops per call; GB/s
 * (decode) counts the state read and written once plus q, k, v, g, beta and y, the same bytes for both sides.
 *
 *   ggml_delta [--json] [--quick] [--commit HASH] [--threads N] [--cold-mib N]    (--threads: default the libgdn pool) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gdn.h"

#define BENCH_NAME "ggml_delta"
#include "ggml_common.h"

enum { HK = 16, HV = 32, D = 128, R = HV / HK };
#define TOL 1e-4

/* rows of D unit vectors (q and k as an engine's l2_norm leaves them) */
static float *fill_unit_rows(size_t rows) {
    float *x = fill_normal(rows * D, 0, 1);
    for (size_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < D; ++i) ss += (double)x[r * D + i] * x[r * D + i];
        const float inv = (float)(1.0 / sqrt(ss + 1e-12));
        for (int i = 0; i < D; ++i) x[r * D + i] *= inv;
    }
    return x;
}

/* libgdn's value head h as ggml's head: h = hk R + r  ->  r Hk + hk */
static int perm(int h) { return (h % R) * HK + h / R; }

/* rows of [HV][blk] per-value-head blocks: dst = src with the value heads permuted */
static void permute_heads(float *dst, const float *src, size_t rows, size_t blk) {
    for (size_t t = 0; t < rows; ++t)
        for (int h = 0; h < HV; ++h)
            memcpy(dst + (t * HV + (size_t)perm(h)) * blk, src + (t * HV + (size_t)h) * blk, blk * sizeof(float));
}

/* relative L2 of ggml's rows of [HV][blk] (its head order) against libgdn's, and the largest |difference| */
static double rel_l2_heads(const float *g, const float *ref, size_t rows, size_t blk, double *max_abs) {
    double num = 0, den = 0, mx = 0;
    for (size_t t = 0; t < rows; ++t)
        for (int h = 0; h < HV; ++h) {
            const float *a = g + (t * HV + (size_t)perm(h)) * blk, *b = ref + (t * HV + (size_t)h) * blk;
            for (size_t i = 0; i < blk; ++i) {
                const double d = (double)a[i] - (double)b[i];
                num += d * d, den += (double)b[i] * (double)b[i];
                if (fabs(d) > mx) mx = fabs(d);
            }
        }
    if (max_abs) *max_abs = mx;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- one point: the inputs (libgdn's and ggml's), the graphs ---- */

typedef struct shape {
    int B, T, sets, threads;
    size_t nq, nv, ng, nst; /* floats of q (and k), v (and y), g (and beta), one set's state */
    /* libgdn side */
    float *q, *k, *v, *g, *beta, *y, *state; /* state [sets][B, HV, D, D] */
    /* ggml side: v, g, beta and the state with the value heads relabeled (q, k shared); the op's outputs */
    float *g_v, *g_g, *g_beta, *g_state, **r_data;
    struct ggml_context **ctx; /* per set */
    struct ggml_cgraph **gf, **gf_nowb;
    struct ggml_cplan plan;
    uint8_t *work;
    struct ggml_threadpool *tp;
} shape;

static struct ggml_tensor *leaf(struct ggml_context *ctx, void *data, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3) {
    struct ggml_tensor *t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    t->data = data;
    return t;
}

/* The op's graph over set s's state. The context holds no data (no_alloc): the leaves point at our arrays, the op's
 * output at r_data[s]; data pointers are set before any view of a tensor is made (views copy them). */
static void build_graph(shape *sh, int s) {
    const int64_t B = sh->B, T = sh->T;
    const size_t es = sizeof(float);
    struct ggml_init_params ip = {.mem_size = 16 * ggml_tensor_overhead() + 2 * ggml_graph_overhead() + 4096,
                                  .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) {
        fprintf(stderr, "ggml_delta: ggml_init failed\n");
        exit(1);
    }
    struct ggml_tensor *q = leaf(ctx, sh->q, D, HK, T, B), *k = leaf(ctx, sh->k, D, HK, T, B);
    struct ggml_tensor *v = leaf(ctx, sh->g_v, D, HV, T, B);
    struct ggml_tensor *g = leaf(ctx, sh->g_g, 1, HV, T, B), *beta = leaf(ctx, sh->g_beta, 1, HV, T, B);
    struct ggml_tensor *state = leaf(ctx, sh->g_state + (size_t)s * sh->nst, D, D, HV, B);

    struct ggml_tensor *r = ggml_gated_delta_net(ctx, q, k, v, g, beta, state, 1);
    sh->r_data[s] = xmalloc(ggml_nbytes(r));
    memset(sh->r_data[s], 0, ggml_nbytes(r)); /* touched now, not in the first timed call */
    r->data = sh->r_data[s];
    /* [scores | final state]: the state part back into the state */
    struct ggml_tensor *new_state = ggml_view_4d(ctx, r, D, D, HV, B, D * es, D * D * es, D * D * HV * es, sh->nv * es);
    struct ggml_tensor *cpy = ggml_cpy(ctx, new_state, state);

    struct ggml_cgraph *gf = ggml_new_graph(ctx), *gn = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    ggml_build_forward_expand(gf, cpy);
    ggml_build_forward_expand(gn, r);
    sh->ctx[s] = ctx, sh->gf[s] = gf, sh->gf_nowb[s] = gn;
}

static void shape_init(shape *sh, int B, int T, int sets, int threads, struct ggml_threadpool *tp) {
    memset(sh, 0, sizeof *sh);
    sh->B = B, sh->T = T, sh->sets = sets, sh->threads = threads, sh->tp = tp;
    rng = 0x5eedULL + (uint64_t)T * 131u + (uint64_t)B * 7919u;
    const size_t bt = (size_t)B * T;
    sh->nq = bt * HK * D, sh->nv = bt * HV * D, sh->ng = bt * HV, sh->nst = (size_t)B * HV * D * D;
    sh->q = fill_unit_rows(bt * HK), sh->k = fill_unit_rows(bt * HK), sh->v = fill_normal(sh->nv, 0, 1);
    sh->g = fill_uniform(sh->ng, -0.5f, -0.01f); /* log decay: g in (0.61, 0.99) */
    sh->beta = fill_uniform(sh->ng, 0.05f, 0.95f);
    sh->state = fill_uniform(sh->nst * (size_t)sets, -0.1f, 0.1f);
    sh->y = xmalloc(sh->nv * sizeof(float));
    sh->g_v = xmalloc(sh->nv * sizeof(float)), permute_heads(sh->g_v, sh->v, bt, D);
    sh->g_g = xmalloc(sh->ng * sizeof(float)), permute_heads(sh->g_g, sh->g, bt, 1);
    sh->g_beta = xmalloc(sh->ng * sizeof(float)), permute_heads(sh->g_beta, sh->beta, bt, 1);
    sh->g_state = xmalloc(sh->nst * (size_t)sets * sizeof(float));
    permute_heads(sh->g_state, sh->state, (size_t)B * sets, (size_t)D * D);
    sh->r_data = xmalloc((size_t)sets * sizeof *sh->r_data), sh->ctx = xmalloc((size_t)sets * sizeof *sh->ctx);
    sh->gf = xmalloc((size_t)sets * sizeof *sh->gf), sh->gf_nowb = xmalloc((size_t)sets * sizeof *sh->gf_nowb);
    for (int s = 0; s < sets; ++s) build_graph(sh, s);
    sh->plan = ggml_graph_plan(sh->gf[0], threads, tp); /* every set's graph has the same shapes */
    sh->work = xmalloc(sh->plan.work_size + 64);
    sh->plan.work_data = sh->work;
}

static void shape_free(shape *sh) {
    for (int s = 0; s < sh->sets; ++s) ggml_free(sh->ctx[s]), free(sh->r_data[s]);
    free(sh->ctx), free(sh->r_data), free(sh->gf), free(sh->gf_nowb), free(sh->work);
    float *arr[] = {sh->q, sh->k, sh->v, sh->g, sh->beta, sh->y, sh->state, sh->g_v, sh->g_g, sh->g_beta, sh->g_state};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; ++i) free(arr[i]);
    memset(sh, 0, sizeof *sh);
}

static gdn_delta_args delta_args(const shape *sh, int s) {
    gdn_delta_args a;
    memset(&a, 0, sizeof a);
    float *st = sh->state + (size_t)s * sh->nst;
    a.B = sh->B, a.T = sh->T, a.Hk = HK, a.Hv = HV, a.Dk = D, a.Dv = D, a.dtype = GDN_F32;
    a.q = sh->q, a.k = sh->k, a.v = sh->v, a.y = sh->y;
    a.gate_kind = GDN_GATE_LOG_DECAY, a.gate = sh->g, a.beta_kind = GDN_BETA_DIRECT, a.beta = sh->beta;
    a.state_layout = GDN_STATE_VK, a.state_in = st, a.state_out = st, a.scale = 1.0f / sqrtf((float)D);
    a.backend = GDN_BACKEND_CPU, a.kernel = NULL, a.threads = sh->threads;
    return a;
}

static void ggml_call(shape *sh, int s, int write_back) {
    compute_or_exit(write_back ? sh->gf[s] : sh->gf_nowb[s], &sh->plan);
}

static void gdn_call(shape *sh, int s) {
    const gdn_delta_args a = delta_args(sh, s);
    const gdn_status st = gdn_delta(&a);
    if (st != GDN_OK) {
        fprintf(stderr, "ggml_delta: gdn_delta: %s (%s)\n", gdn_status_str(st), gdn_last_error());
        exit(1);
    }
}

/* Both sides once on set 0 from the same state (ggml with write-back); relative L2 of y and of the state, libgdn's
 * as the reference, max |dy|. Set 0's states are restored afterwards. */
typedef struct agreement {
    double y, state, y_max;
} agreement;

static agreement check(shape *sh) {
    float *st0 = xmalloc(sh->nst * sizeof(float));
    memcpy(st0, sh->state, sh->nst * sizeof(float));
    ggml_call(sh, 0, 1);
    ggml_threadpool_pause(sh->tp);
    gdn_call(sh, 0);
    agreement a;
    const size_t bt = (size_t)sh->B * sh->T;
    a.y = rel_l2_heads(sh->r_data[0], sh->y, bt, D, &a.y_max);
    a.state = rel_l2_heads(sh->g_state, sh->state, (size_t)sh->B, (size_t)D * D, NULL);
    memcpy(sh->state, st0, sh->nst * sizeof(float));
    permute_heads(sh->g_state, st0, (size_t)sh->B, (size_t)D * D);
    free(st0);
    return a;
}

/* one call of a side (ggml_common.h's BENCH_*) on state set `set` */
static void run_side(void *ctx, int side, int set) {
    shape *sh = ctx;
    if (side == BENCH_LIBGDN) gdn_call(sh, set);
    else ggml_call(sh, set, side == BENCH_GGML);
}

/* The machine's copy floor: one thread's memcpy of 256 MiB, read + written bytes per second (best of 5). */
static double copy_floor_gbs(void) {
    const size_t n = (size_t)256 << 20;
    char *a = xmalloc(n), *b = xmalloc(n);
    memset(a, 1, n), memset(b, 2, n);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
        const double t0 = now();
        memcpy(b, a, n);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a), free(b);
    return 2.0 * (double)n / best * 1e-9;
}

int main(int argc, char **argv) {
    int json = 0, quick = 0, threads = 0;
    double cold_mib = 256;
    const char *commit = "unknown";
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc) commit = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cold-mib") == 0 && i + 1 < argc) cold_mib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: ggml_delta [--json] [--quick] [--commit HASH] [--threads N] [--cold-mib N]\n");
            return 2;
        }
    }
    ggml_cpu_init();
    const int pool = gdn_cpu_threads();
    if (threads < 1) threads = pool;
    /* memory for the cold pools: libgdn's and ggml's states and the op's outputs, 3 states a set; half of what is
     * available now */
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double avail = pages > 0 && page > 0 ? (double)pages * (double)page : 8e9;
    const double floor_gbs = copy_floor_gbs();
    if (json)
        printf("{\"op\": \"delta_ggml_floor\", \"copy_gbs_1thread\": %.3f, \"threads\": %d, \"libgdn_pool\": %d}\n",
               floor_gbs, threads, pool);
    else
        printf("ggml_delta: the recurrence, Hk=%d Hv=%d D=%d, f32, state VK; ggml %s; %d threads (libgdn pool %d); "
               "memcpy floor %.1f GB/s (1 thread, read + write)\n\n", HK, HV, D, commit, threads, pool, floor_gbs);

    typedef struct point {
        int B, T, cold, calls;
    } point;
    const point full[] = {{1, 64, 0, 20}, {1, 2048, 0, 3}, {1, 1, 1, 200}, {1, 1, 0, 200}, {64, 1, 1, 30}, {256, 1, 1, 10}};
    const point brief[] = {{1, 64, 0, 5}, {1, 1, 1, 50}, {64, 1, 1, 5}};
    const point *pts = quick ? brief : full;
    const int n_pts = quick ? (int)(sizeof brief / sizeof brief[0]) : (int)(sizeof full / sizeof full[0]);

    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
    if (!tp) {
        fprintf(stderr, "ggml_delta: ggml_threadpool_new failed\n");
        return 1;
    }
    if (!json)
        printf("%4s %5s %4s %4s %-22s %10s %10s %10s %11s %9s %9s %9s %9s\n", "B", "T", "sets", "cold", "libgdn kernel",
               "ggml ms", "nowb ms", "libgdn ms", "ggml/libgdn", "ggml GF/s", "ours GF/s", "ggml GB/s", "ours GB/s");
    for (int pi = 0; pi < n_pts; ++pi) {
        const point *p = &pts[pi];
        const double st_bytes = (double)p->B * HV * D * D * sizeof(float);
        int sets = 1;
        if (p->cold) {
            sets = (int)ceil(cold_mib * 1048576.0 / st_bytes);
            const int fit = (int)(avail / 2 / (3 * st_bytes));
            if (sets > fit) sets = fit;
            if (sets < 1) sets = 1;
        }
        shape sh;
        shape_init(&sh, p->B, p->T, sets, threads, tp);
        const gdn_delta_args ra = delta_args(&sh, 0);
        const char *kernel = "?";
        if (gdn_route(&ra, &kernel) != GDN_OK) kernel = "?";
        const agreement ag = check(&sh);
        const int bad = !(ag.y <= TOL && ag.state <= TOL);
        if (bad) {
            fprintf(stderr, "ggml_delta: B=%d T=%d: the sides disagree: y rel L2 %.3e, state rel L2 %.3e (> %.0e)\n",
                    p->B, p->T, ag.y, ag.state, TOL);
            return 1;
        }

        double med[BENCH_SIDES][BENCH_ROUNDS], best[BENCH_SIDES];
        bench_sides(run_side, &sh, sh.tp, p->calls, sh.sets, med, best);
        const double flops = 7.0 * D * D * (double)p->T * HV * p->B;
        const double bytes = 2.0 * st_bytes + 4.0 * (double)(2 * sh.nq + 2 * sh.nv + 2 * sh.ng);
        const int decode = p->T == 1;
        if (json) {
            printf("{\"op\": \"delta_ggml\", \"ggml\": \"%s\", \"libgdn_kernel\": \"%s\", \"threads\": %d, \"Hk\": %d, "
                   "\"Hv\": %d, \"D\": %d, \"B\": %d, \"T\": %d, \"sets\": %d, \"cold\": %d, \"calls\": %d, "
                   "\"y_rel_l2\": %.3e, \"y_max_abs\": %.3e, \"state_rel_l2\": %.3e, \"flops\": %.0f, "
                   "\"bytes\": %.0f", commit, kernel, threads, HK, HV, D, p->B, p->T, sets, p->cold, p->calls, ag.y,
                   ag.y_max, ag.state, flops, bytes);
            for (int side = 0; side < BENCH_SIDES; ++side)
                printf(", \"%s_ms\": %.6f, \"%s_block_medians_ms\": [%.6f, %.6f, %.6f], \"%s_gflops\": %.3f, "
                       "\"%s_gbs\": %.3f", bench_side_name[side], best[side] * 1e-3, bench_side_name[side],
                       med[side][0] * 1e-3, med[side][1] * 1e-3, med[side][2] * 1e-3, bench_side_name[side],
                       flops / best[side] * 1e-3, bench_side_name[side], bytes / best[side] * 1e-3);
            printf(", \"ratio_ggml_libgdn\": %.4f, \"ratio_ggml_nowb_libgdn\": %.4f}\n",
                   best[BENCH_GGML] / best[BENCH_LIBGDN], best[BENCH_GGML_NOWB] / best[BENCH_LIBGDN]);
        } else {
            printf("%4d %5d %4d %4s %-22s check: y rel L2 %.2e (max |dy| %.2e), state %.2e\n", p->B, p->T, sets,
                   p->cold ? "yes" : "no", kernel, ag.y, ag.y_max, ag.state);
            char gb0[16] = "-", gb2[16] = "-";
            if (decode) {
                snprintf(gb0, sizeof gb0, "%.1f", bytes / best[0] * 1e-3);
                snprintf(gb2, sizeof gb2, "%.1f", bytes / best[2] * 1e-3);
            }
            printf("%4d %5d %4d %4s %-22s %10.3f %10.3f %10.3f %10.2fx %9.1f %9.1f %9s %9s   (nowb/libgdn %.2fx)\n",
                   p->B, p->T, sets, p->cold ? "yes" : "no", kernel, best[0] * 1e-3, best[1] * 1e-3, best[2] * 1e-3,
                   best[0] / best[2], flops / best[0] * 1e-3, flops / best[2] * 1e-3, gb0, gb2, best[1] / best[2]);
        }
        fflush(stdout);
        shape_free(&sh);
    }
    ggml_threadpool_free(tp);
    return 0;
}
