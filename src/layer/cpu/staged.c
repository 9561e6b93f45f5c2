/* The layer step on the CPU as its stages (`staged`; `ref` is the same stages with the recurrence's ref):
 *
 *   1. prologue, an item per (sequence, head of q, k or v): per token, the conv and SiLU of the head's channels,
 *      the L2 norm of q and k heads; the v items also the gate and beta of their head. Into f32 buffers:
 *      q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv].
 *   2. the recurrence (gdn__layer_recurrence: gdn_delta per sequence on the slot's state), the readout o into
 *      [T, Hv, Dv] f32.
 *   3. epilogue, an item per (token, value head): the gated RMSNorm of o into y (zeros for a skipped sequence).
 *   4. the histories of the committing sequences, an item per sequence: each channel's last three inputs.
 * Every stage reads what the earlier ones wrote, so the pools are written only by stages 2 and 4, after every
 * allocation has succeeded. */
#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"
#include "layer/layer.h"

typedef struct stages {
    const gdn__layer_problem *p;
    gdn__problem pool;        /* carries the threads and the runner for gdn__parallel_for */
    float *q, *k, *v, *g, *beta, *o; /* the stages' buffers (gdn__layer_buffers) */
    int32_t *seq_of;          /* [T]: the sequence of each token */
} stages;

/* Input t (relative to the window; -3 .. -1 are the history) of channel c of sequence b. */
static float tap(const gdn__layer_problem *p, int64_t b, int64_t c, int64_t t) {
    const gdn_layer_args *a = &p->a;
    if (t >= 0) return gdn__load(a->qkv, a->dtype, (gdn__seq_start(p, b) + t) * p->C + c);
    if (gdn__seq_fresh(p, b)) return 0.0f;
    return gdn__load(a->hist_in, a->dtype, (gdn__seq_slot(p, b) * p->C + c) * 3 + 3 + t);
}

static float conv_at(const gdn__layer_problem *p, int64_t b, int64_t c, int64_t t) {
    const float bias = p->a.conv_bias ? p->a.conv_bias[c] : 0.0f;
    return gdn__conv_silu(tap(p, b, c, t - 3), tap(p, b, c, t - 2), tap(p, b, c, t - 1), tap(p, b, c, t),
                          p->a.conv_w + c * 4, bias);
}

/* Item (b, head of the 2 Hk + Hv): q heads, then k heads, then v heads. */
static void prologue_item(void *ctx, int64_t item, int worker) {
    (void)worker;
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const int64_t heads = 2 * a->Hk + a->Hv, b = item / heads, head = item % heads;
    if (gdn__seq_slot(p, b) < 0) return;
    const int64_t s0 = gdn__seq_start(p, b), n = gdn__seq_len(p, b);
    if (head < 2 * a->Hk) {
        const int is_k = head >= a->Hk;
        const int64_t hk = head % a->Hk, c0 = (is_k ? a->Hk * a->Dk : 0) + hk * a->Dk;
        float *dst = is_k ? st->k : st->q;
        const float inv = gdn_rsqrtf((float)a->Dk);
        for (int64_t t = 0; t < n; ++t) {
            float *x = dst + ((s0 + t) * a->Hk + hk) * a->Dk;
            for (int64_t i = 0; i < a->Dk; ++i) x[i] = conv_at(p, b, c0 + i, t);
            const float f = gdn__l2_factor(gdn__tree_dot(x, x, a->Dk), a->Dk, p->eps_l2);
            for (int64_t i = 0; i < a->Dk; ++i) x[i] = (f * x[i]) * inv;
        }
        return;
    }
    const int64_t h = head - 2 * a->Hk, c0 = 2 * a->Hk * a->Dk + h * a->Dv;
    const float A = a->A ? a->A[h] : gdn__layer_A(a->A_log[h]);
    for (int64_t t = 0; t < n; ++t) {
        const int64_t row = (s0 + t) * a->Hv + h;
        float *x = st->v + row * a->Dv;
        for (int64_t j = 0; j < a->Dv; ++j) x[j] = conv_at(p, b, c0 + j, t);
        st->g[row] = gdn__layer_gate(gdn__load(a->alpha, a->dtype, row), a->dt_bias[h], A);
        st->beta[row] = gdn_sigmoidf(gdn__load(a->beta, a->dtype, row));
    }
}

/* Item (t, h): y[t, h, :] from o. */
static void epilogue_item(void *ctx, int64_t item, int worker) {
    (void)worker;
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const int64_t t = item / a->Hv, b = st->seq_of[t], row = item * a->Dv;
    if (gdn__seq_slot(p, b) < 0) {
        for (int64_t j = 0; j < a->Dv; ++j) gdn__store(a->y, a->dtype, row + j, 0.0f);
        return;
    }
    const float *o = st->o + row;
    const float rs = gdn__rms_factor(gdn__tree_dot(o, o, a->Dv), a->Dv, p->eps_rms);
    const int sig = a->out_gate == GDN_OUT_GATE_SIGMOID;
    for (int64_t j = 0; j < a->Dv; ++j)
        gdn__store(a->y, a->dtype, row + j, gdn__gated_out(rs, o[j], a->gamma[j], gdn__load(a->z, a->dtype, row + j), sig));
}

/* Item b: the history of each channel after the sequence's first k tokens (a channel's three values are read before
 * they are written, so hist_out may be hist_in). */
static void history_item(void *ctx, int64_t b, int worker) {
    (void)worker;
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const int64_t slot = gdn__seq_slot(p, b), k = gdn__seq_commit(p, b);
    if (slot < 0 || k == 0) return;
    for (int64_t c = 0; c < p->C; ++c) {
        const float h[3] = {tap(p, b, c, k - 3), tap(p, b, c, k - 2), tap(p, b, c, k - 1)};
        for (int i = 0; i < 3; ++i) gdn__store(p->a.hist_out, p->a.dtype, (slot * p->C + c) * 3 + i, h[i]);
    }
}

gdn_status gdn__layer_cpu_stages(const gdn__layer_problem *p, const char *delta_kernel) {
    const gdn_layer_args *a = &p->a;
    const int64_t T = p->T, qk = T * a->Hk * a->Dk, vv = T * a->Hv * a->Dv, gb = T * a->Hv;
    stages st;
    memset(&st, 0, sizeof st);
    st.p = p;
    st.pool.a.cpu_runner = a->cpu_runner;
    st.pool.threads = p->threads;
    float *buf = malloc((size_t)(2 * qk + 2 * vv + 2 * gb) * sizeof(float));
    st.seq_of = malloc((size_t)T * sizeof(int32_t));
    if (!buf || !st.seq_of) {
        free(buf);
        free(st.seq_of);
        return GDN_ERR_OUT_OF_MEMORY;
    }
    st.q = buf, st.k = st.q + qk, st.v = st.k + qk, st.o = st.v + vv, st.g = st.o + vv, st.beta = st.g + gb;
    for (int64_t b = 0; b < a->B; ++b)
        for (int64_t t = gdn__seq_start(p, b); t < a->cu_seqlens[b + 1]; ++t) st.seq_of[t] = (int32_t)b;

    gdn__parallel_for(&st.pool, a->B * (2 * a->Hk + a->Hv), p->threads, prologue_item, &st);
    const gdn__layer_buffers bufs = {st.q, st.k, st.v, st.g, st.beta, st.o};
    const gdn_status s = gdn__layer_recurrence(p, &bufs, delta_kernel);
    if (s == GDN_OK) {
        gdn__parallel_for(&st.pool, T * a->Hv, p->threads, epilogue_item, &st);
        gdn__parallel_for(&st.pool, a->B, p->threads, history_item, &st);
    }
    free(buf);
    free(st.seq_of);
    return s;
}

int gdn__layer_staged_eligible(const gdn__layer_problem *p) { return p->a.backend == GDN_BACKEND_CPU; }
int gdn__layer_staged_routed(const gdn__layer_problem *p) { return gdn__layer_staged_eligible(p); }
gdn_status gdn__layer_staged(const gdn__layer_problem *p) { return gdn__layer_cpu_stages(p, NULL); }
