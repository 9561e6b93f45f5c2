/* The layer step's contract in code: `ref` (the CPU stages of src/layer/cpu/staged.c over the recurrence's ref)
 * and the float64 oracle. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"
#include "gdn_testing.h"
#include "layer/layer.h"

int gdn__layer_ref_eligible(const gdn__layer_problem *p) { return p->a.backend == GDN_BACKEND_CPU; }
int gdn__layer_ref_routed(const gdn__layer_problem *p) { return p == NULL; } /* only by name */
gdn_status gdn__layer_ref(const gdn__layer_problem *p) { return gdn__layer_cpu_stages(p, "ref"); }

/* ---- the oracle: the same math in double, plain sums, libm ---- */

static double in_d(const gdn_layer_args *a, const void *base, int64_t idx) { return (double)gdn__load(base, a->dtype, idx); }

/* Where key row i, value column j of a head's state lies in the pool (args' layout), from the head's start. */
static int64_t state_at(const gdn_layer_args *a, int64_t i, int64_t j) {
    return a->state_layout == GDN_STATE_VK ? j * a->Dk + i : i * a->Dv + j;
}

/* The state S (double [Dk][Dv], key row, value column) into head h of a slot's state in the pool. */
static void put_state(const gdn_layer_args *a, double *pool, int64_t slot, int64_t h, const double *S) {
    double *dst = pool + (slot * a->Hv + h) * a->Dk * a->Dv;
    for (int64_t i = 0; i < a->Dk; ++i)
        for (int64_t j = 0; j < a->Dv; ++j) dst[state_at(a, i, j)] = S[i * a->Dv + j];
}

/* The conv history (C channels, 3 taps) after m tokens of a window from token s0 with history h0 into a slot. */
static void put_hist(const gdn_layer_args *a, double *hist, int64_t slot, int64_t C, int64_t s0, int64_t m,
                     const double *h0) {
    for (int64_t c = 0; c < C; ++c)
        for (int i = 0; i < 3; ++i) {
            const int64_t tt = m - 3 + i;
            hist[(slot * C + c) * 3 + i] = tt >= 0 ? in_d(a, a->qkv, (s0 + tt) * C + c) : h0[c * 3 + 3 + tt];
        }
}

/* Sequence b's value head h over its window: y rows, the state after k tokens into S_commit and after each of b's
 * checkpoints into the checkpoint's slot of `pool`, from S (double [Dk][Dv], key row, value column; updated); work:
 * 2 Dk + 2 Dv doubles. */
static void oracle_head(const gdn_layer_args *a, int64_t C, int64_t b, int64_t s0, int64_t n, int64_t k,
                        const double *hist, int64_t h, double scale, double eps_l2, double eps_rms, double *S,
                        double *S_commit, double *pool, double *y, double *work) {
    const int64_t Dk = a->Dk, Dv = a->Dv, hk = gdn__key_head(h, a->Hk, a->Hv / a->Hk, a->head_map == GDN_HEADS_TILED);
    double *q = work, *kk = q + Dk, *v = kk + Dk, *o = v + Dv;
    const double A = a->A ? (double)a->A[h] : -exp((double)a->A_log[h]);
    for (int64_t t = 0; t < n; ++t) {
        /* conv of channel c at token t: taps t-3 .. t over history and inputs */
#define TAP(c, tt) ((tt) >= 0 ? in_d(a, a->qkv, (s0 + (tt)) * C + (c)) : hist[(c) * 3 + 3 + (tt)])
#define CONV(c, out)                                                                                          \
        do {                                                                                                  \
            double s_ = a->conv_bias ? (double)a->conv_bias[c] : 0.0;                                         \
            for (int w_ = 0; w_ < 4; ++w_) s_ += TAP(c, t - 3 + w_) * (double)a->conv_w[(c) * 4 + w_];        \
            (out) = s_ / (1.0 + exp(-s_));                                                                    \
        } while (0)
        double sq = 0, sk = 0;
        for (int64_t i = 0; i < Dk; ++i) {
            CONV(hk * Dk + i, q[i]);
            CONV(a->Hk * Dk + hk * Dk + i, kk[i]);
            sq += q[i] * q[i], sk += kk[i] * kk[i];
        }
        for (int64_t i = 0; i < Dk; ++i) q[i] /= sqrt(sq + eps_l2), kk[i] /= sqrt(sk + eps_l2);
        for (int64_t j = 0; j < Dv; ++j) CONV(2 * a->Hk * Dk + h * Dv + j, v[j]);
        const int64_t row = (s0 + t) * a->Hv + h;
        const double x = in_d(a, a->alpha, row) + (double)a->dt_bias[h];
        const double sp = x > 20.0 ? x : log1p(exp(x));
        const double g = exp(sp * A), beta = 1.0 / (1.0 + exp(-in_d(a, a->beta, row)));
        double ss = 0;
        for (int64_t j = 0; j < Dv; ++j) {
            double kv = 0;
            for (int64_t i = 0; i < Dk; ++i) kv += S[i * Dv + j] * kk[i];
            const double d = (v[j] - g * kv) * beta;
            double acc = 0;
            for (int64_t i = 0; i < Dk; ++i) {
                S[i * Dv + j] = g * S[i * Dv + j] + kk[i] * d;
                acc += S[i * Dv + j] * q[i];
            }
            o[j] = acc * scale;
            ss += o[j] * o[j];
        }
        const double rs = 1.0 / sqrt(ss / (double)Dv + eps_rms);
        for (int64_t j = 0; j < Dv; ++j) {
            const double z = in_d(a, a->z, row * Dv + j);
            const double gz = a->out_gate == GDN_OUT_GATE_SIGMOID ? 1.0 / (1.0 + exp(-z)) : z / (1.0 + exp(-z));
            y[row * Dv + j] = rs * o[j] * (double)a->gamma[j] * gz;
        }
        if (t + 1 == k) memcpy(S_commit, S, (size_t)(Dk * Dv) * sizeof *S);
        for (int64_t i = 0; i < a->n_checkpoints; ++i)
            if (a->checkpoints[i].seq == b && a->checkpoints[i].after == t + 1) put_state(a, pool, a->checkpoints[i].slot, h, S);
#undef CONV
#undef TAP
    }
}

gdn_status gdn__oracle_layer(const gdn_layer_args *args, double *y, double *state, double *hist) {
    const gdn_layer_args *a = args;
    gdn_layer_args copy = *args;
    copy.kernel = "ref";
    const char *name;
    const gdn_status s = gdn_layer_route(&copy, &name); /* validates as gdn_layer does */
    if (s != GDN_OK) return s;
    const int64_t Dk = a->Dk, Dv = a->Dv, C = 2 * a->Hk * Dk + a->Hv * Dv, per = a->Hv * Dk * Dv;
    for (int64_t i = 0; i < a->slots * per; ++i) state[i] = a->state[i];
    for (int64_t i = 0; i < a->slots * C * 3; ++i) hist[i] = in_d(a, a->hist_in, i);
    const double scale = a->scale != 0.0f ? a->scale : 1.0 / sqrt((double)Dk);
    const double eps_l2 = a->eps_l2 != 0.0f ? a->eps_l2 : 1e-6f, eps_rms = a->eps_rms != 0.0f ? a->eps_rms : 1e-6f;
    double *S = gdn__malloc((size_t)(Dk * Dv) * sizeof *S), *Sc = gdn__malloc((size_t)(Dk * Dv) * sizeof *Sc);
    double *h0 = gdn__malloc((size_t)(C * 3) * sizeof *h0), *work = gdn__malloc((size_t)(2 * Dk + 2 * Dv) * sizeof *work);
    if (!S || !Sc || !h0 || !work) {
        free(S), free(Sc), free(h0), free(work);
        return GDN_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < a->B; ++b) {
        const int64_t s0 = a->cu_seqlens[b], n = a->cu_seqlens[b + 1] - s0, slot = a->slot ? a->slot[b] : b;
        const int64_t k = a->commit ? a->commit[b] : n;
        if (slot < 0) {
            for (int64_t i = s0 * a->Hv * Dv; i < (s0 + n) * a->Hv * Dv; ++i) y[i] = 0.0;
            continue;
        }
        const int fresh = a->fresh && a->fresh[b];
        for (int64_t i = 0; i < C * 3; ++i) h0[i] = fresh ? 0.0 : hist[slot * C * 3 + i];
        for (int64_t h = 0; h < a->Hv; ++h) {
            const double *own = state + (slot * a->Hv + h) * Dk * Dv;
            for (int64_t i = 0; i < Dk; ++i)
                for (int64_t j = 0; j < Dv; ++j)
                    S[i * Dv + j] = fresh ? 0.0 : own[state_at(a, i, j)];
            oracle_head(a, C, b, s0, n, k, h0, h, scale, eps_l2, eps_rms, S, Sc, state, y, work);
            if (k > 0) put_state(a, state, slot, h, Sc);
        }
        if (k > 0) put_hist(a, hist, slot, C, s0, k, h0);
        for (int64_t i = 0; i < a->n_checkpoints; ++i)
            if (a->checkpoints[i].seq == b) put_hist(a, hist, a->checkpoints[i].slot, C, s0, a->checkpoints[i].after, h0);
    }
    free(S), free(Sc), free(h0), free(work);
    return GDN_OK;
}
