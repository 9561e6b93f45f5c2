/* The layer step on the CPU: ref against the float64 oracle; every CPU layer kernel against ref bit for bit; the
 * fused op against its stages computed here and gdn_delta; commit after k against a k-token window; verify; split
 * windows; slot placement, batch composition and thread counts; fresh sequences; A against A_log; bad inputs. The
 * tests run through both_maps run under each head mapping (grouped, tiled); a tiled call equals a grouped call on
 * head-permuted inputs. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdn_testing.h"
#include "harness.h"
#include "layer_case.h"

/* The head mapping of the cases cfg_of makes: the tests run through both_maps run once under each. */
static gdn_head_map cur_head_map = GDN_HEADS_GROUPED;

static void both_maps(void (*body)(void)) {
    for (int m = GDN_HEADS_GROUPED; m <= GDN_HEADS_TILED; ++m) {
        cur_head_map = (gdn_head_map)m;
        body();
    }
    cur_head_map = GDN_HEADS_GROUPED;
}

static lcase_cfg cfg_of(int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, gdn_dtype dt, int64_t B, const int32_t *len,
                        uint64_t seed) {
    lcase_cfg g;
    memset(&g, 0, sizeof g);
    g.Hk = Hk, g.Hv = Hv, g.Dk = Dk, g.Dv = Dv, g.dtype = dt, g.B = B, g.seed = seed, g.head_map = cur_head_map;
    for (int64_t b = 0; b < B; ++b) g.len[b] = len[b];
    return g;
}

/* The shapes most tests run: small heads, odd sizes, the model's head size. */
static const struct { int64_t Hk, Hv, Dk, Dv; } shapes[] = {{1, 1, 32, 32}, {2, 4, 16, 8}, {1, 3, 40, 24},
                                                             {2, 6, 64, 32}, {1, 2, 128, 128}};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

static double max_abs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void layer_ref_matches_the_oracle_body(void);
TEST(layer_ref_matches_the_oracle) { both_maps(layer_ref_matches_the_oracle_body); }
static void layer_ref_matches_the_oracle_body(void) {
    const int32_t len[3] = {5, 1, 9};
    for (int s = 0; s < SHAPES; ++s)
        for (int bias = 0; bias < 2; ++bias) {
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, GDN_F32, 3, len, 10 + s);
            g.bias = bias, g.out_gate = bias ? GDN_OUT_GATE_SIGMOID : GDN_OUT_GATE_SILU, g.layout = (gdn_state_layout)bias;
            lcase c;
            lrun r;
            if (!lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
            c.commit[1] = 0, c.commit[2] = 4, c.fresh[0] = 1;
            c.ck[0] = (gdn_layer_checkpoint){0, 2, 0}, c.ck[1] = (gdn_layer_checkpoint){2, 7, 4}; /* past its commit */
            c.ck[2] = (gdn_layer_checkpoint){1, 1, 5}, c.n_ck = 3;
            double *y = malloc(c.n_y * sizeof *y), *st = malloc(c.n_state * sizeof *st), *hi = malloc(c.n_hist * sizeof *hi);
            gdn_layer_args a = lcase_args(&c, &r);
            CHECK(gdn__oracle_layer(&a, y, st, hi) == GDN_OK);
            CHECK(lcase_run(&c, &r, "ref", 0) == GDN_OK, "%s", gdn_last_error());
            const double ym = max_abs(y, c.n_y), sm = max_abs(st, c.n_state);
            double ey = 0, es = 0, eh = 0;
            for (size_t i = 0; i < c.n_y; ++i) ey = fmax(ey, fabs((double)((float *)r.y)[i] - y[i]));
            for (size_t i = 0; i < c.n_state; ++i) es = fmax(es, fabs((double)r.state[i] - st[i]));
            for (size_t i = 0; i < c.n_hist; ++i) eh = fmax(eh, fabs((double)((float *)r.hist_out)[i] - hi[i]));
            CHECK(ey <= 2e-5 * ym && es <= 2e-5 * sm && eh == 0.0, "shape %d bias %d: y %.3g of %.3g, state %.3g of %.3g, "
                  "history %.3g", s, bias, ey, ym, es, sm, eh);
            free(y), free(st), free(hi);
            lrun_free(&r);
            lcase_free(&c);
        }
}

/* kernel = "fastest" on the CPU, which has no chunked prefill: the routed call's bits and kernel. */
TEST(layer_fastest_on_the_cpu_is_the_routed_call) {
    const int32_t len[2] = {200, 3};
    const lcase_cfg g = cfg_of(2, 4, 128, 32, GDN_BF16, 2, len, 31);
    lcase c;
    lrun routed, fastest;
    if (!lcase_init(&c, &g) || !lrun_init(&routed, &c, 0) || !lrun_init(&fastest, &c, 0)) { CHECK(0, "allocation"); return; }
    CHECK(lcase_run(&c, &routed, NULL, 0) == GDN_OK, "%s", gdn_last_error());
    CHECK(lcase_run(&c, &fastest, "fastest", 0) == GDN_OK, "%s", gdn_last_error());
    CHECK(lrun_equal(&c, &routed, &fastest), "fastest differs from the routed call on the CPU");
    gdn_layer_args a = lcase_args(&c, &fastest);
    const char *name = NULL, *plain = NULL;
    CHECK(gdn_layer_route(&a, &plain) == GDN_OK);
    a.kernel = "fastest";
    CHECK(gdn_layer_route(&a, &name) == GDN_OK && name && plain && strcmp(name, plain) == 0, "fastest routes to %s",
          name ? name : "(null)");
    lrun_free(&routed), lrun_free(&fastest);
    lcase_free(&c);
}

/* The CPU kernels keep their workspaces between calls (src/cpu/workspace.c): a call into a kept buffer (last
 * written by a larger call of another shape), a call after gdn_cpu_release(), and a fresh run give the same bits. */
TEST(layer_cpu_kept_workspaces_change_nothing) {
    const int32_t big[2] = {400, 9}, small[2] = {37, 2};
    lcase_cfg g = cfg_of(2, 4, 64, 32, GDN_BF16, 2, small, 51), h = cfg_of(2, 4, 128, 64, GDN_F32, 2, big, 52);
    lcase c, d;
    lrun first, again, released, other;
    if (!lcase_init(&c, &g) || !lcase_init(&d, &h) || !lrun_init(&first, &c, 0) || !lrun_init(&again, &c, 0) ||
        !lrun_init(&released, &c, 0) || !lrun_init(&other, &d, 0)) {
        CHECK(0, "allocation");
        return;
    }
    gdn_cpu_release();
    CHECK(lcase_run(&c, &first, NULL, 0) == GDN_OK, "%s", gdn_last_error()); /* fresh buffers */
    CHECK(lcase_run(&d, &other, NULL, 0) == GDN_OK, "%s", gdn_last_error()); /* a larger call fills them */
    CHECK(lcase_run(&c, &again, NULL, 0) == GDN_OK, "%s", gdn_last_error()); /* into what it left */
    gdn_cpu_release();
    CHECK(lcase_run(&c, &released, NULL, 0) == GDN_OK, "%s", gdn_last_error());
    CHECK(lrun_equal(&c, &first, &again), "a call into kept workspaces differs");
    CHECK(lrun_equal(&c, &first, &released), "a call after gdn_cpu_release differs");
    gdn_cpu_release();
    gdn_cpu_release(); /* nothing kept: a no-op */
    lrun_free(&first), lrun_free(&again), lrun_free(&released), lrun_free(&other);
    lcase_free(&c), lcase_free(&d);
}

/* Every CPU layer kernel, every dtype, thread counts 1 and all: ref's bits. */
static void layer_cpu_kernels_equal_ref_body(void);
TEST(layer_cpu_kernels_equal_ref) { both_maps(layer_cpu_kernels_equal_ref_body); }
static void layer_cpu_kernels_equal_ref_body(void) {
    /* batch 0: a partial commit, a fresh, a verify and a skipped sequence; batch 1: runs of like windows (decode
     * steps, committing verify windows, verifies), which the staged path runs as one call each, between others */
    const int32_t len[2][8] = {{3, 1, 17, 2}, {1, 1, 1, 3, 3, 17, 2, 2}};
    for (int s = 0; s < SHAPES; ++s)
        for (int dt = 0; dt < 6; ++dt) {
            const int batch = dt / 3;
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, (gdn_dtype)(dt % 3),
                                 batch ? 8 : 4, len[batch], 20 + s + 10 * batch);
            g.layout = (gdn_state_layout)(s & 1), g.bias = dt & 1, g.A_log = s & 1, g.planes = shapes[s].Dv % 16 == 0;
            lcase c;
            lrun want;
            if (!lcase_init(&c, &g) || !lrun_init(&want, &c, 0)) { CHECK(0, "allocation"); return; }
            if (batch == 0) c.commit[0] = 2, c.commit[2] = 0, c.slot[3] = -1, c.fresh[1] = 1;
            else c.commit[5] = 9, c.commit[6] = c.commit[7] = 0, c.slot[1] = 9, c.slot[4] = 10;
            CHECK(lcase_run(&c, &want, "ref", 0) == GDN_OK, "%s", gdn_last_error());
            for (int k = 0; k < gdn_layer_kernel_count(); ++k) {
                const char *name = gdn_layer_kernel_name(k);
                if (strncmp(name, "cuda", 4) == 0) continue;
                for (int threads = 0; threads < 2; ++threads) {
                    lrun got;
                    if (!lrun_init(&got, &c, 0)) { CHECK(0, "allocation"); break; }
                    CHECK(lcase_run(&c, &got, name, threads) == GDN_OK, "%s", gdn_last_error());
                    CHECK(lrun_equal(&c, &want, &got), "%s, shape %d, dtype %d, threads %d", name, s, dt, threads);
                    lrun_free(&got);
                }
            }
            lrun_free(&want);
            lcase_free(&c);
        }
}

/* ---- the stages computed here, from the contract's text, and the recurrence by gdn_delta ---- */

static float tree_sq(const float *x, int64_t n) {
    const int64_t c = (n + 31) / 32;
    float p[32];
    for (int64_t l = 0; l < 32; ++l) {
        p[l] = 0.0f;
        for (int64_t e = l * c; e < (l + 1) * c && e < n; ++e) p[l] = fmaf(x[e], x[e], p[l]);
    }
    for (int m = 1; m < 32; m <<= 1)
        for (int l = 0; l < 32; l += 2 * m) p[l] = p[l] + p[l + m];
    return p[0];
}

static void layer_equals_its_stages_and_gdn_delta_body(void);
TEST(layer_equals_its_stages_and_gdn_delta) { both_maps(layer_equals_its_stages_and_gdn_delta_body); }
static void layer_equals_its_stages_and_gdn_delta_body(void) {
    const int32_t len[1] = {6};
    for (int s = 0; s < SHAPES; ++s)
        for (int dt = 0; dt < 3; dt += 2) {
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, (gdn_dtype)dt, 1, len, 30 + s);
            g.bias = 1;
            lcase c;
            lrun r;
            if (!lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
            CHECK(lcase_run(&c, &r, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            const int64_t T = c.T, Hk = g.Hk, Hv = g.Hv, Dk = g.Dk, Dv = g.Dv, C = c.C, slot = c.slot[0];
            float *x = malloc((size_t)(T * C) * 4), *gate = malloc((size_t)(T * Hv) * 4), *beta = malloc((size_t)(T * Hv) * 4);
            float *o = malloc((size_t)(T * Hv * Dv) * 4), *state = malloc((size_t)(Hv * Dk * Dv) * 4);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t ch = 0; ch < C; ++ch) {
                    float tap[4];
                    for (int w = 0; w < 4; ++w) {
                        const int64_t tt = t - 3 + w;
                        tap[w] = tt >= 0 ? gdn__load(c.qkv, g.dtype, tt * C + ch)
                                         : gdn__load(c.hist, g.dtype, (slot * C + ch) * 3 + 3 + tt);
                    }
                    float acc = 0.0f;
                    for (int w = 0; w < 4; ++w) acc = fmaf(tap[w], c.conv_w[ch * 4 + w], acc);
                    x[t * C + ch] = gdn_siluf(acc + c.conv_bias[ch]);
                }
            for (int64_t t = 0; t < T; ++t)
                for (int64_t hh = 0; hh < 2 * Hk; ++hh) {
                    float *v = x + t * C + hh * Dk;
                    const float f = gdn_rsqrtf(tree_sq(v, Dk) / (float)Dk + 1e-6f / (float)Dk);
                    for (int64_t i = 0; i < Dk; ++i) v[i] = (f * v[i]) * gdn_rsqrtf((float)Dk);
                }
            float *q = malloc((size_t)(T * Hk * Dk) * 4), *k = malloc((size_t)(T * Hk * Dk) * 4), *v = malloc((size_t)(T * Hv * Dv) * 4);
            for (int64_t t = 0; t < T; ++t) {
                memcpy(q + t * Hk * Dk, x + t * C, (size_t)(Hk * Dk) * 4);
                memcpy(k + t * Hk * Dk, x + t * C + Hk * Dk, (size_t)(Hk * Dk) * 4);
                memcpy(v + t * Hv * Dv, x + t * C + 2 * Hk * Dk, (size_t)(Hv * Dv) * 4);
                for (int64_t h = 0; h < Hv; ++h) {
                    const float sp = gdn_softplusf(gdn__load(c.alpha, g.dtype, t * Hv + h) + c.dt_bias[h]);
                    gate[t * Hv + h] = gdn_expf(sp * c.A[h]);
                    beta[t * Hv + h] = gdn_sigmoidf(gdn__load(c.beta, g.dtype, t * Hv + h));
                }
            }
            memcpy(state, c.state + slot * Hv * Dk * Dv, (size_t)(Hv * Dk * Dv) * 4);
            gdn_delta_args d;
            memset(&d, 0, sizeof d);
            d.B = 1, d.T = T, d.Hk = Hk, d.Hv = Hv, d.Dk = Dk, d.Dv = Dv, d.dtype = GDN_F32;
            d.q = q, d.k = k, d.v = v, d.y = o, d.gate = gate, d.beta = beta, d.state_in = state, d.state_out = state;
            d.scale = gdn_rsqrtf((float)Dk), d.head_map = g.head_map;
            CHECK(gdn_delta(&d) == GDN_OK, "%s", gdn_last_error());
            int same = memcmp(state, r.state + slot * Hv * Dk * Dv, (size_t)(Hv * Dk * Dv) * 4) == 0;
            for (int64_t row = 0; row < T * Hv; ++row) {
                const float f = gdn_rsqrtf(tree_sq(o + row * Dv, Dv) / (float)Dv + 1e-6f);
                for (int64_t j = 0; j < Dv; ++j) {
                    float z = gdn__load(c.z, g.dtype, row * Dv + j);
                    float want = ((f * o[row * Dv + j]) * c.gamma[j]) * gdn_siluf(z);
                    uint32_t wb = 0, gb = 0;
                    if (g.dtype == GDN_F32) {
                        memcpy(&wb, &want, 4);
                        memcpy(&gb, (float *)r.y + row * Dv + j, 4);
                    } else {
                        wb = gdn__f32_to_bf16(want);
                        gb = ((uint16_t *)r.y)[row * Dv + j];
                    }
                    same &= wb == gb;
                }
            }
            CHECK(same, "shape %d dtype %d: gdn_layer differs from its stages", s, dt);
            free(x), free(gate), free(beta), free(o), free(state), free(q), free(k), free(v);
            lrun_free(&r);
            lcase_free(&c);
        }
}

/* Commit after k of n == a window of the first k tokens, for the pools; the n outputs == the verify window's;
 * verify leaves the pools as they were. */
static void layer_commit_after_k_is_a_k_token_step_body(void);
TEST(layer_commit_after_k_is_a_k_token_step) { both_maps(layer_commit_after_k_is_a_k_token_step_body); }
static void layer_commit_after_k_is_a_k_token_step_body(void) {
    const int32_t n = 7;
    for (int s = 0; s < SHAPES; ++s) {
        lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, GDN_BF16, 1, &n, 40 + s);
        g.layout = (gdn_state_layout)(s & 1);
        lcase c;
        lrun verify;
        if (!lcase_init(&c, &g) || !lrun_init(&verify, &c, 0)) { CHECK(0, "allocation"); return; }
        c.commit[0] = 0;
        CHECK(lcase_run(&c, &verify, NULL, 0) == GDN_OK, "%s", gdn_last_error());
        CHECK(memcmp(verify.state, c.state, c.n_state * 4) == 0 && memcmp(verify.hist_in, c.hist, c.n_hist * c.ds) == 0,
              "shape %d: verify wrote a pool", s);
        for (int32_t k = 1; k <= n; ++k) {
            lrun fold, part;
            if (!lrun_init(&fold, &c, 0) || !lrun_init(&part, &c, 0)) { CHECK(0, "allocation"); return; }
            c.commit[0] = k;
            CHECK(lcase_run(&c, &fold, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            CHECK(memcmp(fold.y, verify.y, c.n_y * c.ds) == 0, "shape %d k %d: outputs differ from verify's", s, k);
            c.cu[1] = k, c.commit[0] = k; /* the window of the first k tokens */
            CHECK(lcase_run(&c, &part, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            c.cu[1] = n;
            CHECK(memcmp(fold.state, part.state, c.n_state * 4) == 0 && memcmp(fold.hist_out, part.hist_out, c.n_hist * c.ds) == 0,
                  "shape %d: commit after %d differs from a %d-token step", s, k, k);
            lrun_free(&fold), lrun_free(&part);
        }
        lrun_free(&verify);
        lcase_free(&c);
    }
}

/* A window in two calls == one call; the second call may run as single-token decode steps. */
static void layer_split_windows_equal_one_window_body(void);
TEST(layer_split_windows_equal_one_window) { both_maps(layer_split_windows_equal_one_window_body); }
static void layer_split_windows_equal_one_window_body(void) {
    const int32_t n = 9;
    for (int s = 0; s < SHAPES; ++s)
        for (int split = 1; split < n; split += 3) {
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, GDN_F32, 1, &n, 50 + s);
            lcase c;
            lrun one, two;
            if (!lcase_init(&c, &g) || !lrun_init(&one, &c, 0) || !lrun_init(&two, &c, 0)) { CHECK(0, "allocation"); return; }
            CHECK(lcase_run(&c, &one, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            /* the first `split` tokens, then the rest a token at a time, through a shifted view of the case */
            lcase view = c;
            int ok = 1;
            for (int32_t t0 = 0; t0 < n && ok; t0 = t0 == 0 ? split : t0 + 1) {
                const int32_t len = t0 == 0 ? split : 1;
                view.cu[1] = len, view.commit[0] = len;
                view.qkv = (char *)c.qkv + (size_t)t0 * (size_t)c.C * c.ds;
                view.z = (char *)c.z + (size_t)(t0 * g.Hv * g.Dv) * c.ds;
                view.alpha = (char *)c.alpha + (size_t)(t0 * g.Hv) * c.ds;
                view.beta = (char *)c.beta + (size_t)(t0 * g.Hv) * c.ds;
                lrun step = two;
                step.y = (char *)two.y + (size_t)(t0 * g.Hv * g.Dv) * c.ds;
                ok = lcase_run(&view, &step, NULL, 0) == GDN_OK;
            }
            CHECK(ok, "%s", gdn_last_error());
            CHECK(lrun_equal(&c, &one, &two), "shape %d split %d", s, split);
            lrun_free(&one), lrun_free(&two);
            lcase_free(&c);
        }
}

/* A sequence's outputs and pools do not depend on its slot, its place in the batch, the others' lengths or the
 * thread count; a skipped sequence's rows are zero and its slot untouched. Mixed windows, then a uniform batch
 * (every window 3 tokens, every sequence with a slot: the recurrence in one batch-form call). */
static void layer_sequences_are_independent_body(void);
TEST(layer_sequences_are_independent) { both_maps(layer_sequences_are_independent_body); }
static void layer_sequences_are_independent_body(void) {
  for (int uniform = 0; uniform < 2; ++uniform) {
    int32_t len[12] = {4, 1, 1, 7, 2, 1, 16, 3, 1, 5, 1, 2};
    for (int b = 0; uniform && b < 12; ++b) len[b] = 3;
    lcase_cfg g = cfg_of(2, 4, 32, 16, GDN_F32, 12, len, 60 + (uint64_t)uniform);
    g.slots = 40;
    lcase c;
    lrun batch;
    if (!lcase_init(&c, &g) || !lrun_init(&batch, &c, 0)) { CHECK(0, "allocation"); return; }
    for (int b = 0; b < 12; ++b) c.slot[b] = 37 - 3 * b;
    if (!uniform) c.slot[5] = -1;
    CHECK(lcase_run(&c, &batch, NULL, 0) == GDN_OK, "%s", gdn_last_error());
    const size_t per_s = (size_t)(g.Hv * g.Dk * g.Dv), per_h = (size_t)c.C * 3, row = (size_t)(g.Hv * g.Dv);
    for (int b = 0; b < 12; ++b) {
        /* sequence b alone, at slot 0, on one thread */
        lcase one = c;
        one.cfg.B = 1;
        one.cu[0] = 0, one.cu[1] = len[b];
        one.slot[0] = 0, one.commit[0] = len[b];
        one.qkv = (char *)c.qkv + (size_t)c.cu[b] * (size_t)c.C * c.ds;
        one.z = (char *)c.z + (size_t)c.cu[b] * row * c.ds;
        one.alpha = (char *)c.alpha + (size_t)(c.cu[b] * g.Hv) * c.ds;
        one.beta = (char *)c.beta + (size_t)(c.cu[b] * g.Hv) * c.ds;
        lrun r;
        if (!lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); break; }
        const int32_t from = c.slot[b] < 0 ? 0 : c.slot[b];
        memcpy(r.state, c.state + from * per_s, per_s * 4);
        memcpy(r.hist_in, (char *)c.hist + from * per_h * c.ds, per_h * c.ds);
        CHECK(lcase_run(&one, &r, NULL, 1) == GDN_OK, "%s", gdn_last_error());
        const void *yb = (char *)batch.y + (size_t)c.cu[b] * row * c.ds;
        if (c.slot[b] < 0) {
            int zero = 1;
            for (size_t i = 0; i < (size_t)len[b] * row; ++i) zero &= ((float *)yb)[i] == 0.0f;
            CHECK(zero, "a skipped sequence's rows are not zero");
        } else {
            CHECK(memcmp(yb, r.y, (size_t)len[b] * row * c.ds) == 0, "sequence %d: outputs depend on the batch", b);
            CHECK(memcmp(batch.state + c.slot[b] * per_s, r.state, per_s * 4) == 0 &&
                  memcmp((char *)batch.hist_out + c.slot[b] * per_h * c.ds, r.hist_out, per_h * c.ds) == 0,
                  "sequence %d: pools depend on the batch or the slot", b);
        }
        lrun_free(&r);
    }
    /* slots no sequence names, and the skipped one's, are untouched */
    int untouched = 1;
    for (int32_t s = 0; s < 40; ++s) {
        int named = 0;
        for (int b = 0; b < 12; ++b) named |= c.slot[b] == s;
        if (!named)
            untouched &= memcmp(batch.state + s * per_s, c.state + s * per_s, per_s * 4) == 0 &&
                         memcmp((char *)batch.hist_out + s * per_h * c.ds, (char *)c.hist + s * per_h * c.ds, per_h * c.ds) == 0;
    }
    CHECK(untouched, "a slot no sequence names was written");
    lrun_free(&batch);
    lcase_free(&c);
  }
}

/* fresh == a zeroed slot; A == -exp(A_log) given as A_log; hist_out separate == in place, hist_in untouched. */
static void layer_fresh_A_log_and_separate_histories_body(void);
TEST(layer_fresh_A_log_and_separate_histories) { both_maps(layer_fresh_A_log_and_separate_histories_body); }
static void layer_fresh_A_log_and_separate_histories_body(void) {
    const int32_t len[2] = {5, 3};
    lcase_cfg g = cfg_of(2, 4, 32, 32, GDN_F16, 2, len, 70);
    lcase c;
    lrun base, fresh, zeroed, alog, sep;
    if (!lcase_init(&c, &g) || !lrun_init(&base, &c, 0) || !lrun_init(&fresh, &c, 0) || !lrun_init(&zeroed, &c, 0) ||
        !lrun_init(&alog, &c, 0) || !lrun_init(&sep, &c, 1)) { CHECK(0, "allocation"); return; }
    CHECK(lcase_run(&c, &base, NULL, 0) == GDN_OK);
    c.cfg.A_log = 1;
    CHECK(lcase_run(&c, &alog, NULL, 0) == GDN_OK);
    c.cfg.A_log = 0;
    CHECK(lrun_equal(&c, &base, &alog), "A_log differs from A = -exp(A_log)");
    CHECK(lcase_run(&c, &sep, NULL, 0) == GDN_OK);
    CHECK(lrun_equal(&c, &base, &sep) && memcmp(sep.hist_in, c.hist, c.n_hist * c.ds) == 0,
          "separate histories differ from in place, or hist_in was written");
    c.fresh[1] = 1;
    CHECK(lcase_run(&c, &fresh, NULL, 0) == GDN_OK);
    c.fresh[1] = 0;
    const size_t per_s = (size_t)(g.Hv * g.Dk * g.Dv), per_h = (size_t)c.C * 3;
    memset(zeroed.state + c.slot[1] * per_s, 0, per_s * 4);
    memset((char *)zeroed.hist_in + c.slot[1] * per_h * c.ds, 0, per_h * c.ds);
    CHECK(lcase_run(&c, &zeroed, NULL, 0) == GDN_OK);
    CHECK(lrun_equal(&c, &fresh, &zeroed), "fresh differs from a zeroed slot");
    lrun_free(&base), lrun_free(&fresh), lrun_free(&zeroed), lrun_free(&alog), lrun_free(&sep);
    lcase_free(&c);
}

/* A checkpoint after p tokens == the pools of a p-token step, whatever the commit; the outputs and the sequence's
 * own slot are those of the call without checkpoints. */
static void layer_checkpoints_are_prefix_steps_body(void);
TEST(layer_checkpoints_are_prefix_steps) { both_maps(layer_checkpoints_are_prefix_steps_body); }
static void layer_checkpoints_are_prefix_steps_body(void) {
    const int32_t n = 9, afters[3] = {3, 6, 9}, commits[3] = {0, 4, 9};
    for (int s = 0; s < SHAPES; ++s)
        for (int ci = 0; ci < 3; ++ci) {
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, GDN_BF16, 1, &n, 90 + s);
            g.slots = 6, g.layout = (gdn_state_layout)(ci & 1);
            lcase c;
            lrun plain, ck;
            if (!lcase_init(&c, &g) || !lrun_init(&plain, &c, 0) || !lrun_init(&ck, &c, 0)) { CHECK(0, "allocation"); return; }
            c.commit[0] = commits[ci];
            CHECK(lcase_run(&c, &plain, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            for (int i = 0; i < 3; ++i) c.ck[i] = (gdn_layer_checkpoint){0, afters[i], 2 + i};
            c.ck[3] = (gdn_layer_checkpoint){0, 6, 5}; /* two at one position */
            c.n_ck = 4;
            CHECK(lcase_run(&c, &ck, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            const size_t per_s = (size_t)(g.Hv * g.Dk * g.Dv), per_h = (size_t)c.C * 3;
            CHECK(memcmp(plain.y, ck.y, c.n_y * c.ds) == 0 && memcmp(plain.state + per_s, ck.state + per_s, per_s * 4) == 0 &&
                  memcmp((char *)plain.hist_out + per_h * c.ds, (char *)ck.hist_out + per_h * c.ds, per_h * c.ds) == 0,
                  "shape %d commit %d: checkpoints changed the outputs or the sequence's slot", s, commits[ci]);
            c.n_ck = 0;
            for (int i = 0; i < 4; ++i) {
                lrun pre;
                if (!lrun_init(&pre, &c, 0)) { CHECK(0, "allocation"); return; }
                c.cu[1] = c.ck[i].after, c.commit[0] = c.ck[i].after;
                CHECK(lcase_run(&c, &pre, NULL, 0) == GDN_OK, "%s", gdn_last_error());
                c.cu[1] = n, c.commit[0] = commits[ci];
                const size_t at = (size_t)c.ck[i].slot;
                CHECK(memcmp(pre.state + per_s, ck.state + at * per_s, per_s * 4) == 0 &&
                      memcmp((char *)pre.hist_out + per_h * c.ds, (char *)ck.hist_out + at * per_h * c.ds, per_h * c.ds) == 0,
                      "shape %d commit %d: the checkpoint after %d differs from a %d-token step", s, commits[ci],
                      c.ck[i].after, c.ck[i].after);
                lrun_free(&pre);
            }
            lrun_free(&plain), lrun_free(&ck);
            lcase_free(&c);
        }
}

/* Checkpoints cost n log n in their number: one sequence of 2^17 + 1 tokens with a checkpoint after every one of its
 * first 2^17 (validation and the call; quadratic, as the segment walk once was, it took minutes: 20,000 took 2.5 s).
 * The bound is on CPU time: 40 s, some 250 times the call's in a plain build and 17 times in the sanitizer build (0.16 and
 * 2.4 s on the 2-vCPU machine), a third of the quadratic walk's; three of the checkpoints equal prefix steps. */
TEST(layer_checkpoints_scale) {
    enum { N = 1 << 17 };
    const int32_t len = N + 1;
    lcase_cfg g = cfg_of(1, 1, 2, 2, GDN_F32, 1, &len, 97);
    g.slots = N + 2;
    lcase c;
    lrun r;
    gdn_layer_checkpoint *ck = malloc((size_t)N * sizeof *ck);
    if (!ck || !lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
    for (int32_t i = 0; i < N; ++i) ck[i] = (gdn_layer_checkpoint){0, N - i, 2 + i}; /* positions descending */
    gdn_layer_args a = lcase_args(&c, &r);
    a.checkpoints = ck, a.n_checkpoints = N;
    const char *name = NULL;
    const clock_t t0 = clock();
    const gdn_status routed = gdn_layer_route(&a, &name), run = gdn_layer(&a);
    const double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(routed == GDN_OK && run == GDN_OK, "%s", gdn_last_error());
    CHECK(cpu < 40.0, "%d checkpoints: %.1f s of CPU time", N, cpu);
    if (harness_verbose) printf("    %d checkpoints: %.3f s of CPU time\n", N, cpu);
    const size_t per_s = (size_t)(g.Hv * g.Dk * g.Dv), per_h = (size_t)c.C * 3;
    const int32_t at[3] = {1, N / 2 + 1, N};
    for (int i = 0; i < 3; ++i) {
        lrun pre;
        if (!lrun_init(&pre, &c, 0)) { CHECK(0, "allocation"); break; }
        c.cu[1] = at[i], c.commit[0] = at[i];
        CHECK(lcase_run(&c, &pre, NULL, 0) == GDN_OK, "%s", gdn_last_error());
        c.cu[1] = len, c.commit[0] = len;
        const size_t slot = (size_t)(2 + N - at[i]);
        CHECK(memcmp(pre.state + per_s, r.state + slot * per_s, per_s * 4) == 0 &&
              memcmp((char *)pre.hist_out + per_h * c.ds, (char *)r.hist_out + slot * per_h * c.ds, per_h * c.ds) == 0,
              "the checkpoint after %d differs from a %d-token step", at[i], at[i]);
        lrun_free(&pre);
    }
    free(ck);
    lrun_free(&r);
    lcase_free(&c);
}

/* ---- the planes: y as stored, pre-scaled for a matvec with packed codes, and its per-16 sums ---- */

/* The pairwise tree over 16 values, level by level. */
static float pairwise16(const float *x) {
    float a[16];
    memcpy(a, x, sizeof a);
    for (int width = 16; width > 1; width /= 2)
        for (int i = 0; i < width / 2; ++i) a[i] = a[2 * i] + a[2 * i + 1];
    return a[0];
}

/* The planes leave y and the pools as they are; each plane times its code's masked word is code y exactly, so a
 * matvec with codes of 2, 4 and 8 bits packed into 32-bit words (lowest bits first) over the planes gives the
 * bits of the matvec over y; the sums are the pairwise tree of each 16 columns; a skipped sequence's rows are +0. */
static void layer_planes_feed_a_packed_matvec_body(void);
TEST(layer_planes_feed_a_packed_matvec) { both_maps(layer_planes_feed_a_packed_matvec_body); }
static void layer_planes_feed_a_packed_matvec_body(void) {
    const int32_t len[3] = {4, 1, 3};
    for (int s = 0; s < SHAPES; ++s) {
        if (shapes[s].Dv % 16 != 0) continue;
        for (int dt = 0; dt < 3; ++dt) {
            lcase_cfg g = cfg_of(shapes[s].Hk, shapes[s].Hv, shapes[s].Dk, shapes[s].Dv, (gdn_dtype)dt, 3, len, 90 + s);
            g.planes = 1;
            lcase c;
            lrun plain, with;
            if (!lcase_init(&c, &g)) { CHECK(0, "allocation"); return; }
            c.slot[1] = -1, c.commit[2] = 1;
            if (!lrun_init(&plain, &c, 0) || !lrun_init(&with, &c, 0)) { CHECK(0, "allocation"); return; }
            free(plain.planes), plain.planes = NULL;
            gdn_layer_args a = lcase_args(&c, &plain);
            CHECK(gdn_layer(&a) == GDN_OK, "%s", gdn_last_error());
            CHECK(lcase_run(&c, &with, NULL, 0) == GDN_OK, "%s", gdn_last_error());
            CHECK(memcmp(plain.y, with.y, c.n_y * c.ds) == 0 && memcmp(plain.state, with.state, c.n_state * 4) == 0 &&
                  memcmp(plain.hist_out, with.hist_out, c.n_hist * c.ds) == 0, "shape %d dtype %d: planes changed y or a pool", s, dt);
            const int64_t N = g.Hv * g.Dv, T = c.T;
            harness_rng rng = {7 + (uint64_t)s};
            int exact = 1, sums = 1, zeros = 1;
            float *yv = malloc((size_t)N * sizeof *yv);
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t n = 0; n < N; ++n) yv[n] = gdn__load(with.y, g.dtype, t * N + n);
                for (int pl = 0; pl < 3; ++pl) {
                    const int w = 2 << pl, per = 32 / w;
                    const float *plane = with.planes + (pl * T + t) * N;
                    for (int row = 0; row < 3; ++row) { /* one output row of random codes */
                        float ref = 0.0f, got = 0.0f;
                        for (int64_t n0 = 0; n0 < N; n0 += per) {
                            uint32_t word = 0;
                            for (int m = 0; m < per; ++m) {
                                const uint32_t code = (uint32_t)(rng_u64(&rng) >> 40) & ((1u << w) - 1);
                                word |= code << (w * m);
                                ref = fmaf((float)code, yv[n0 + m], ref);
                            }
                            for (int m = 0; m < per; ++m)
                                got = fmaf((float)(word & (((1u << w) - 1) << (w * m))), plane[n0 + m], got);
                        }
                        exact &= memcmp(&ref, &got, 4) == 0;
                    }
                    for (int64_t n = 0; n < N; ++n) exact &= ldexpf(plane[n], w * (int)(n % per)) == yv[n];
                }
                const float *sum = with.planes + 3 * T * N + t * (N / 16);
                for (int64_t q = 0; q < N / 16; ++q) {
                    const float want = pairwise16(yv + 16 * q);
                    sums &= memcmp(&want, &sum[q], 4) == 0;
                }
                if (t >= c.cu[1] && t < c.cu[2]) /* the skipped sequence */
                    for (int pl = 0; pl < 3; ++pl)
                        for (int64_t n = 0; n < N; ++n) zeros &= with.planes[(pl * T + t) * N + n] == 0.0f && !signbit(with.planes[(pl * T + t) * N + n]);
            }
            CHECK(exact && sums && zeros, "shape %d dtype %d: matvec over the planes %s, sums %s, skipped rows %s", s, dt,
                  exact ? "exact" : "differs", sums ? "the tree" : "differ", zeros ? "+0" : "not +0");
            free(yv);
            lrun_free(&plain), lrun_free(&with);
            lcase_free(&c);
        }
    }
    /* Dv not a multiple of 16: refused, nothing written */
    const int32_t one[1] = {2};
    lcase_cfg g = cfg_of(1, 1, 16, 24, GDN_F32, 1, one, 99);
    lcase c;
    lrun r;
    if (!lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
    float planes[2 * 24 * 49 / 16 + 8];
    memset(planes, 0xFF, sizeof planes);
    gdn_layer_args a = lcase_args(&c, &r);
    a.planes = planes;
    const gdn_status st = gdn_layer(&a);
    uint32_t poison = 0xFFFFFFFFu;
    CHECK(st == GDN_ERR_BAD_SIZE && strstr(gdn_last_error(), "args->planes") && memcmp(planes, &poison, 4) == 0 &&
          memcmp(r.state, c.state, c.n_state * 4) == 0, "Dv = 24 with planes: status %d (%s)", (int)st, gdn_last_error());
    lrun_free(&r);
    lcase_free(&c);
}

/* ---- the head mapping: tiled == grouped on head-permuted inputs ---- */

/* Per row r < n of `row` bytes: dst = src, with the Hv blocks of `block` bytes from byte `first` permuted: tiled head
 * h's block at grouped head (h % Hk) G + h / Hk (back: the inverse). */
static void permute_blocks(void *dst, const void *src, int64_t n, size_t row, size_t first, int64_t Hk, int64_t Hv,
                           size_t block, int back) {
    const int64_t G = Hv / Hk;
    for (int64_t r = 0; r < n; ++r) {
        char *d = (char *)dst + (size_t)r * row;
        const char *x = (const char *)src + (size_t)r * row;
        memcpy(d, x, row);
        for (int64_t h = 0; h < Hv; ++h) {
            const int64_t g = h % Hk * G + h / Hk, to = back ? h : g, from = back ? g : h;
            memcpy(d + first + (size_t)to * block, x + first + (size_t)from * block, block);
        }
    }
}

/* The outputs of a grouped run on permuted inputs, back in the tiled order (into `out`, allocated like the run). */
static void unpermute_run(const lcase *c, const lrun *r, lrun *out) {
    const lcase_cfg *g = &c->cfg;
    const size_t ds = c->ds, vch = (size_t)(2 * g->Hk * g->Dk);
    permute_blocks(out->y, r->y, c->T, (size_t)(g->Hv * g->Dv) * ds, 0, g->Hk, g->Hv, (size_t)g->Dv * ds, 1);
    permute_blocks(out->state, r->state, c->slots, (size_t)(g->Hv * g->Dk * g->Dv) * 4, 0, g->Hk, g->Hv,
                   (size_t)(g->Dk * g->Dv) * 4, 1);
    permute_blocks(out->hist_out, r->hist_out, c->slots, (size_t)c->C * 3 * ds, vch * 3 * ds, g->Hk, g->Hv,
                   (size_t)g->Dv * 3 * ds, 1);
}

/* A grouped copy d of the tiled case c: every value-head tensor permuted (v channels of qkv, conv_w, conv_bias and
 * the history; z, alpha, beta, dt_bias, A, A_log, the state pool), the batch's arrays as c's. */
static int permuted_case(lcase *d, const lcase *c) {
    lcase_cfg g = c->cfg;
    g.head_map = GDN_HEADS_GROUPED;
    if (!lcase_init(d, &g)) return 0;
    const int64_t Hk = g.Hk, Hv = g.Hv, Dv = g.Dv;
    const size_t ds = c->ds, vch = (size_t)(2 * Hk * g.Dk);
    permute_blocks(d->qkv, c->qkv, c->T, (size_t)c->C * ds, vch * ds, Hk, Hv, (size_t)Dv * ds, 0);
    permute_blocks(d->z, c->z, c->T, (size_t)(Hv * Dv) * ds, 0, Hk, Hv, (size_t)Dv * ds, 0);
    permute_blocks(d->alpha, c->alpha, c->T, (size_t)Hv * ds, 0, Hk, Hv, ds, 0);
    permute_blocks(d->beta, c->beta, c->T, (size_t)Hv * ds, 0, Hk, Hv, ds, 0);
    permute_blocks(d->conv_w, c->conv_w, 1, (size_t)c->C * 16, vch * 16, Hk, Hv, (size_t)Dv * 16, 0);
    permute_blocks(d->conv_bias, c->conv_bias, 1, (size_t)c->C * 4, vch * 4, Hk, Hv, (size_t)Dv * 4, 0);
    permute_blocks(d->dt_bias, c->dt_bias, 1, (size_t)Hv * 4, 0, Hk, Hv, 4, 0);
    permute_blocks(d->A, c->A, 1, (size_t)Hv * 4, 0, Hk, Hv, 4, 0);
    permute_blocks(d->A_log, c->A_log, 1, (size_t)Hv * 4, 0, Hk, Hv, 4, 0);
    memcpy(d->gamma, c->gamma, (size_t)Dv * 4);
    permute_blocks(d->state, c->state, c->slots, (size_t)(Hv * g.Dk * Dv) * 4, 0, Hk, Hv, (size_t)(g.Dk * Dv) * 4, 0);
    permute_blocks(d->hist, c->hist, c->slots, (size_t)c->C * 3 * ds, vch * 3 * ds, Hk, Hv, (size_t)Dv * 3 * ds, 0);
    memcpy(d->cu, c->cu, sizeof c->cu), memcpy(d->slot, c->slot, sizeof c->slot);
    memcpy(d->commit, c->commit, sizeof c->commit), memcpy(d->fresh, c->fresh, sizeof c->fresh);
    memcpy(d->ck, c->ck, sizeof c->ck), d->n_ck = c->n_ck;
    return 1;
}

/* Every CPU layer kernel: a tiled call (value head h reads q/k head h % Hk, its q/k channels those of that head)
 * equals a grouped call on the permuted case bit for bit (y, the state pool, the histories), over partial commits,
 * fresh, verify and skipped sequences and checkpoints; and differs from the grouped call on the same inputs. */
TEST(layer_tiled_is_grouped_on_permuted_heads) {
    static const struct { int64_t Hk, Hv, Dk, Dv; } maps[] = {{2, 4, 16, 8}, {2, 6, 64, 32}, {3, 12, 32, 16},
                                                              {4, 8, 128, 128}, {16, 32, 16, 8}};
    const int32_t len[5] = {3, 1, 17, 2, 5};
    int compared = 0;
    for (int s = 0; s < 5; ++s)
        for (int dt = 0; dt < 3; ++dt) {
            lcase_cfg g = cfg_of(maps[s].Hk, maps[s].Hv, maps[s].Dk, maps[s].Dv, (gdn_dtype)dt, 5, len, 120 + s);
            g.head_map = GDN_HEADS_TILED, g.layout = (gdn_state_layout)(s & 1), g.bias = 1, g.A_log = dt & 1, g.slots = 12;
            lcase c, d;
            lrun tiled, grouped, back, plain;
            if (!lcase_init(&c, &g)) { CHECK(0, "allocation"); return; }
            c.commit[0] = 2, c.commit[2] = 0, c.slot[3] = -1, c.fresh[1] = 1, c.commit[4] = 3;
            c.ck[0] = (gdn_layer_checkpoint){2, 9, 8}, c.ck[1] = (gdn_layer_checkpoint){4, 4, 9}, c.n_ck = 2;
            if (!permuted_case(&d, &c) || !lrun_init(&back, &c, 0) || !lrun_init(&plain, &c, 0)) { CHECK(0, "allocation"); return; }
            lcase same = c;
            same.cfg.head_map = GDN_HEADS_GROUPED;
            CHECK(lcase_run(&same, &plain, "ref", 0) == GDN_OK, "%s", gdn_last_error());
            for (int k = 0; k < gdn_layer_kernel_count(); ++k) {
                const char *name = gdn_layer_kernel_name(k);
                if (strncmp(name, "cuda", 4) == 0) continue;
                if (!lrun_init(&tiled, &c, 0) || !lrun_init(&grouped, &d, 0)) { CHECK(0, "allocation"); return; }
                CHECK(lcase_run(&c, &tiled, name, k % 2) == GDN_OK, "%s", gdn_last_error());
                CHECK(lcase_run(&d, &grouped, name, k % 2) == GDN_OK, "%s", gdn_last_error());
                unpermute_run(&d, &grouped, &back);
                CHECK(lrun_equal(&c, &tiled, &back), "%s, shape %d, dtype %d: tiled differs from grouped on permuted heads",
                      name, s, dt);
                CHECK(!lrun_equal(&c, &tiled, &plain), "%s, shape %d, dtype %d: tiled equals grouped unpermuted", name, s, dt);
                lrun_free(&tiled), lrun_free(&grouped);
                ++compared;
            }
            lrun_free(&back), lrun_free(&plain);
            lcase_free(&c), lcase_free(&d);
        }
    printf("     %d runs: tiled == grouped on permuted heads\n", compared);
}

/* Sizes whose products or sums leave int64 (C = 2 Hk Dk + Hv Dv at Dk = 2^61, Hv Dv = 2^62, ...): GDN_ERR_BAD_SIZE
 * from gdn_layer_route and gdn_layer, with no signed overflow on the way (make sanitize traps one). The tensors are
 * addresses never touched. */
TEST(layer_validation_sizes_do_not_overflow) {
    static const int64_t P61 = (int64_t)1 << 61, P62 = (int64_t)1 << 62, P31 = (int64_t)1 << 31;
    static const struct { int64_t Hk, Hv, Dk, Dv, slots; } bad[] = {
        {1, 1, P61, P62, 1},           {1, P31, P61, P31, 1},     {1, 1, P62, P62, 1},   {1, 1, INT64_MAX, 1, 1},
        {1, 1, 1, INT64_MAX, 1},       {P61, P62, 2, 1, 1},       {1, 1, P61, 1, 1},     {1, 1, 1, 1, INT64_MAX},
        {1, 1, P61 - 1, P61 + 1, 1},   {INT64_MAX, INT64_MAX, 1, 1, 1}, {1, 2, P62, P61, 3}};
    const int32_t cu[2] = {0, 1};
    char *base = (char *)((uintptr_t)1 << 44); /* 64-byte aligned, far apart, never dereferenced */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        gdn_layer_args a;
        memset(&a, 0, sizeof a);
        a.B = 1, a.Hk = bad[i].Hk, a.Hv = bad[i].Hv, a.Dk = bad[i].Dk, a.Dv = bad[i].Dv, a.slots = bad[i].slots;
        a.cu_seqlens = cu;
        a.dtype = GDN_BF16;
        void *const t[12] = {base, base + ((int64_t)1 << 40), base + ((int64_t)2 << 40), base + ((int64_t)3 << 40),
                             base + ((int64_t)4 << 40), base + ((int64_t)5 << 40), base + ((int64_t)6 << 40),
                             base + ((int64_t)7 << 40), base + ((int64_t)8 << 40), base + ((int64_t)9 << 40),
                             base + ((int64_t)10 << 40), base + ((int64_t)11 << 40)};
        a.qkv = t[0], a.z = t[1], a.alpha = t[2], a.beta = t[3], a.y = t[4], a.conv_w = t[5], a.dt_bias = t[6];
        a.A = t[7], a.gamma = t[8], a.state = t[9], a.hist_in = t[10], a.hist_out = t[10], a.conv_bias = t[11];
        const char *name = NULL;
        const gdn_status routed = gdn_layer_route(&a, &name), run = gdn_layer(&a);
        CHECK(routed == GDN_ERR_BAD_SIZE && run == GDN_ERR_BAD_SIZE, "shape %zu: route %d, layer %d (%s)", i,
              (int)routed, (int)run, gdn_last_error());
    }
}

/* Bad inputs: a status naming the field, and y and the pools untouched. */
TEST(layer_bad_inputs_write_nothing) {
    const int32_t len[3] = {2, 3, 1};
    lcase_cfg g = cfg_of(1, 2, 16, 16, GDN_F32, 3, len, 80);
    lcase c;
    lrun r;
    if (!lcase_init(&c, &g) || !lrun_init(&r, &c, 0)) { CHECK(0, "allocation"); return; }
    float *planes = malloc((c.n_y / 16 * 49 + 1) * sizeof(float));
    if (!planes) { CHECK(0, "allocation"); return; }
    for (int which = 0; which < 21; ++which) {
        lcase bad = c;
        gdn_layer_args a = lcase_args(&bad, &r);
        int32_t slot[3] = {1, 2, 3}, commit[3] = {2, 3, 1}, cu[4] = {0, 2, 5, 6};
        gdn_layer_checkpoint ck[2] = {{1, 2, 4}, {2, 1, 5}};
        a.slot = slot, a.commit = commit, a.cu_seqlens = cu, a.checkpoints = ck, a.n_checkpoints = 2;
        gdn_status want = GDN_ERR_BAD_SIZE;
        const char *field = "";
        switch (which) {
        case 0: slot[1] = (int32_t)c.slots; field = "args->slot[1]"; break;
        case 1: slot[2] = 1; want = GDN_ERR_OVERLAP; field = "slot 1"; break;
        case 2: cu[2] = 2; field = "args->cu_seqlens[2]"; break;
        case 3: commit[1] = 4; field = "args->commit[1]"; break;
        case 4: a.hist_out = (char *)r.hist_in + 4; want = GDN_ERR_OVERLAP; field = "args->hist_out"; break;
        case 5: a.A_log = c.A_log; want = GDN_ERR_BAD_ENUM; field = "args->A"; break;
        case 6: a.reserved[3] = 1; want = GDN_ERR_RESERVED; field = "args->reserved[3]"; break;
        case 7: cu[0] = 1; field = "args->cu_seqlens[0]"; break;
        case 8: a.y = (char *)r.state + 8; want = GDN_ERR_OVERLAP; field = "args->y"; break;
        case 9: a.gamma = NULL; want = GDN_ERR_NULL_POINTER; field = "args->gamma"; break;
        case 10: a.state = (float *)((char *)r.state + 2); want = GDN_ERR_ALIGNMENT; field = "args->state"; break;
        case 11: ck[1].slot = 3; want = GDN_ERR_OVERLAP; field = "args->checkpoints"; break;
        case 12: ck[0].after = 4; field = "args->checkpoints[0].after"; break;
        case 13: ck[1].seq = 3; field = "args->checkpoints[1].seq"; break;
        case 14: ck[1].slot = 4; want = GDN_ERR_OVERLAP; field = "args->checkpoints"; break;
        case 15: a.planes = (float *)r.y + 1; want = GDN_ERR_OVERLAP; field = "args->planes"; break;
        case 16: a.planes = (float *)((char *)planes + 2); want = GDN_ERR_ALIGNMENT; field = "args->planes"; break;
        case 17: a.threads = -1; field = "args->threads = -1"; break;
        case 18: a.threads = INT_MIN; field = "args->threads"; break;
        case 19: /* an empty batch, as a binding passes it (an empty tensor's NULL data): the batch is named, not qkv */
            cu[1] = cu[2] = cu[3] = 0, a.qkv = NULL, a.z = NULL, a.y = NULL;
            field = "the batch is empty";
            break;
        default: a.kernel = "nope"; want = GDN_ERR_UNKNOWN_KERNEL; field = "args->kernel"; break;
        }
        const gdn_status s = gdn_layer(&a);
        CHECK(s == want && strstr(gdn_last_error(), field) != NULL, "case %d: status %d (%s), want %d naming %s", which,
              (int)s, gdn_last_error(), (int)want, field);
        uint32_t poison = 0xFFFFFFFFu;
        int y_poisoned = 1;
        for (size_t i = 0; i < c.n_y; ++i) y_poisoned &= memcmp((float *)r.y + i, &poison, 4) == 0;
        CHECK(y_poisoned && memcmp(r.state, c.state, c.n_state * 4) == 0 && memcmp(r.hist_in, c.hist, c.n_hist * c.ds) == 0,
              "case %d wrote an output", which);
    }
    free(planes);
    lrun_free(&r);
    lcase_free(&c);
}
