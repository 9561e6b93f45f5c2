/* The layer step on the CPU as its stages (`staged`; `ref` is the same stages with the recurrence's ref):
 *
 *   1. prologue, an item per (sequence, head of q, k or v): per token, the conv and SiLU of the head's channels,
 *      the L2 norm of q and k heads; the v items also the gate and beta of their head. Into f32 buffers:
 *      q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv].
 *   2. the recurrence (gdn__layer_recurrence: gdn_delta per sequence, or per run of like windows, on the slots'
 *      states), the readout o into [T, Hv, Dv] f32.
 *   3. epilogue, an item per (token, value head): the gated RMSNorm of o into y (zeros for a skipped sequence),
 *      and y's planes when asked for.
 *   4. the histories of the checkpoints, then of the committing sequences, an item per (sequence or checkpoint,
 *      HIST_CH channels): each channel's last three inputs.
 * Every stage reads what the earlier ones wrote, so the pools are written only by stages 2 and 4, after every
 * allocation has succeeded. The stages work on contiguous f32 rows through a table (rows.h: scalar here, AVX2 in
 * rows_avx2.c, AVX-512 in rows_avx512.c; the widest the CPU has), each worker in its own scratch. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "gdn_internal.h"
#include "gdn_testing.h"
#include "layer/cpu/rows.h"
#include "layer/layer.h"

enum { HIST_CH = 256 }; /* channels per history item */

typedef struct stages {
    const gdn__layer_problem *p;
    const gdn__layer_rows *rows;
    gdn__problem pool;        /* carries the threads and the runner for gdn__parallel_for */
    float *q, *k, *v, *g, *beta, *o; /* the stages' buffers (gdn__layer_buffers) */
    int32_t *seq_of;          /* [T]: the sequence of each token */
    float *scratch;           /* [threads][per_worker] */
    int64_t per_worker;
    int checkpoint_phase;     /* history_item: 1 while it writes the checkpoints' histories */
} stages;

/* ---- the scalar rows, for CPUs without AVX2 + FMA ---- */

static void load_scalar(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n) {
    gdn__load_row(dst, base, dtype, idx, n);
}

static void store_scalar(void *base, gdn_dtype dtype, int64_t idx, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) gdn__store(base, dtype, idx + i, src[i]);
}

static void conv_silu_scalar(float *y, const float *const x[4], const float *w, const float *bias, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float wi[4] = {w[i], w[n + i], w[2 * n + i], w[3 * n + i]};
        y[i] = gdn__conv_silu(x[0][i], x[1][i], x[2][i], x[3][i], wi, bias ? bias[i] : 0.0f);
    }
}

static void silu_scalar(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gdn_siluf(x[i]);
}

static void sigmoid_scalar(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gdn_sigmoidf(x[i]);
}

static const gdn__layer_rows rows_scalar = {load_scalar, store_scalar, conv_silu_scalar, silu_scalar, sigmoid_scalar,
                                            gdn__tree_dot};

/* Table 0 the scalar rows, 1 AVX2 + FMA, 2 AVX-512; NULL where this CPU has not the ISA. */
static const gdn__layer_rows *rows_table(int table) {
    switch (table) {
    case 0: return &rows_scalar;
    case 1: return gdn__cpu_has_avx2_fma() ? &gdn__layer_rows_avx2 : NULL;
    case 2: return gdn__cpu_has_avx512() ? &gdn__layer_rows_avx512 : NULL;
    default: return NULL;
    }
}

static const gdn__layer_rows *rows_here(void) {
    const gdn__layer_rows *wide = rows_table(2) ? rows_table(2) : rows_table(1);
    return wide ? wide : &rows_scalar;
}

int gdn__layer_gate_rows(int table, float *y, const float *x, int64_t n, int sigmoid) {
    const gdn__layer_rows *r = rows_table(table);
    if (r) (sigmoid ? r->sigmoid : r->silu)(y, x, n);
    return r != NULL;
}

int gdn__layer_conv_rows(int table, float *y, const float *const x[4], const float *w, const float *bias, int64_t n) {
    const gdn__layer_rows *r = rows_table(table);
    if (r) r->conv_silu(y, x, w, bias, n);
    return r != NULL;
}

/* ---- the stages ---- */

/* Item (b, head of the 2 Hk + Hv): q heads, then k heads, then v heads. The head's D channels from c0: the weights
 * as rows w [4][D]; the inputs of the last four tokens in a ring of rows x [4][D], token t in row (t + 3) % 4 and the
 * history's three (oldest first) in rows 0-2 before the first token, so token t's taps are rows t, .., t + 3 mod 4. */
static void prologue_item(void *ctx, int64_t item, int worker) {
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const gdn__layer_rows *rows = st->rows;
    const int64_t heads = 2 * a->Hk + a->Hv, b = item / heads, head = item % heads, slot = gdn__seq_slot(p, b);
    if (slot < 0) return;
    const int64_t s0 = gdn__seq_start(p, b), n = gdn__seq_len(p, b);
    const int qk = head < 2 * a->Hk, is_k = head >= a->Hk;
    const int64_t hk = head % a->Hk, h = head - 2 * a->Hk, D = qk ? a->Dk : a->Dv;
    const int64_t c0 = qk ? (is_k ? a->Hk * a->Dk : 0) + hk * a->Dk : 2 * a->Hk * a->Dk + h * a->Dv;
    float *w = st->scratch + worker * st->per_worker, *x = w + 4 * D, *hist = x + 4 * D;
    for (int64_t i = 0; i < D; ++i)
        for (int j = 0; j < 4; ++j) w[j * D + i] = a->conv_w[(c0 + i) * 4 + j];
    if (gdn__seq_fresh(p, b)) {
        memset(x, 0, (size_t)(3 * D) * sizeof(float));
    } else {
        rows->load(hist, a->hist_in, a->dtype, (slot * p->C + c0) * 3, 3 * D); /* [D][3] */
        for (int64_t i = 0; i < D; ++i)
            for (int j = 0; j < 3; ++j) x[j * D + i] = hist[i * 3 + j];
    }
    const float *bias = a->conv_bias ? a->conv_bias + c0 : NULL;
    const float inv = gdn_rsqrtf((float)a->Dk);
    const float A = qk ? 0.0f : a->A ? a->A[h] : gdn__layer_A(a->A_log[h]);
    for (int64_t t = 0; t < n; ++t) {
        rows->load(x + ((t + 3) & 3) * D, a->qkv, a->dtype, (s0 + t) * p->C + c0, D);
        const float *const taps[4] = {x + (t & 3) * D, x + ((t + 1) & 3) * D, x + ((t + 2) & 3) * D, x + ((t + 3) & 3) * D};
        if (qk) {
            float *y = (is_k ? st->k : st->q) + ((s0 + t) * a->Hk + hk) * D;
            rows->conv_silu(y, taps, w, bias, D);
            const float f = gdn__l2_factor(rows->dot(y, y, D), D, p->eps_l2);
            for (int64_t i = 0; i < D; ++i) y[i] = (f * y[i]) * inv;
        } else {
            const int64_t row = (s0 + t) * a->Hv + h;
            rows->conv_silu(st->v + row * D, taps, w, bias, D);
            st->g[row] = gdn__layer_gate(gdn__load(a->alpha, a->dtype, row), a->dt_bias[h], A);
            st->beta[row] = gdn_sigmoidf(gdn__load(a->beta, a->dtype, row));
        }
    }
}

/* The planes of row (t, h) from y as stored, read back into the scratch row yv [Dv]. */
static void planes_row(const stages *st, int64_t t, int64_t h, float *yv) {
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const int64_t N = a->Hv * a->Dv, n0 = h * a->Dv;
    st->rows->load(yv, a->y, a->dtype, t * N + n0, a->Dv);
    for (int pl = 0; pl < 3; ++pl) {
        float *dst = a->planes + (pl * p->T + t) * N + n0;
        for (int64_t j = 0; j < a->Dv; ++j) dst[j] = gdn__plane(yv[j], n0 + j, pl);
    }
    float *sums = a->planes + 3 * p->T * N + t * (N / 16) + n0 / 16;
    for (int64_t g = 0; g < a->Dv / 16; ++g) sums[g] = gdn__sum16(yv + 16 * g);
}

/* Item (t, h): y[t, h, :] from o, the gate of z in the scratch row gz [Dv]; then its planes. */
static void epilogue_item(void *ctx, int64_t item, int worker) {
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const int64_t t = item / a->Hv, b = st->seq_of[t], row = item * a->Dv;
    float *gz = st->scratch + worker * st->per_worker;
    if (gdn__seq_slot(p, b) < 0) {
        memset(gz, 0, (size_t)a->Dv * sizeof(float));
    } else {
        const float *o = st->o + row;
        const float rs = gdn__rms_factor(st->rows->dot(o, o, a->Dv), a->Dv, p->eps_rms);
        st->rows->load(gz, a->z, a->dtype, row, a->Dv);
        (a->out_gate == GDN_OUT_GATE_SIGMOID ? st->rows->sigmoid : st->rows->silu)(gz, gz, a->Dv);
        for (int64_t j = 0; j < a->Dv; ++j) gz[j] = gdn__gated_out(rs, o[j], a->gamma[j], gz[j]);
    }
    st->rows->store(a->y, a->dtype, row, gz, a->Dv);
    if (a->planes) planes_row(st, t, item % a->Hv, gz);
}

/* Item (job, block of HIST_CH channels from c0): the history of each channel after the first k tokens of a
 * sequence, into a slot: job j is sequence j's commit (k = its commit count, its own slot), or in the checkpoint
 * phase checkpoint j (k = after, the checkpoint's slot). [m][3] in the scratch row out: value i is input k - 3 + i,
 * or the old history's k + i before the window (a block's old values are read before it is written, so hist_out
 * may be hist_in; the checkpoints run first, so that they read no history a commit has written). */
static void history_item(void *ctx, int64_t item, int worker) {
    const stages *st = ctx;
    const gdn__layer_problem *p = st->p;
    const gdn_layer_args *a = &p->a;
    const int64_t blocks = (p->C + HIST_CH - 1) / HIST_CH, j = item / blocks, c0 = item % blocks * HIST_CH;
    const gdn_layer_checkpoint *ck = st->checkpoint_phase ? &a->checkpoints[j] : NULL;
    const int64_t b = ck ? ck->seq : j, slot = gdn__seq_slot(p, b), k = ck ? ck->after : gdn__seq_commit(p, b);
    const int64_t into = ck ? ck->slot : slot, m = p->C - c0 < HIST_CH ? p->C - c0 : HIST_CH;
    if (slot < 0 || k == 0) return;
    float *out = st->scratch + worker * st->per_worker, *old = out + 3 * HIST_CH, *x = old + 3 * HIST_CH;
    if (k < 3) {
        if (gdn__seq_fresh(p, b)) memset(old, 0, (size_t)(3 * m) * sizeof(float));
        else st->rows->load(old, a->hist_in, a->dtype, (slot * p->C + c0) * 3, 3 * m);
    }
    for (int64_t i = 0; i < 3; ++i) {
        if (k - 3 + i >= 0) {
            st->rows->load(x, a->qkv, a->dtype, (gdn__seq_start(p, b) + k - 3 + i) * p->C + c0, m);
            for (int64_t c = 0; c < m; ++c) out[c * 3 + i] = x[c];
        } else {
            for (int64_t c = 0; c < m; ++c) out[c * 3 + i] = old[c * 3 + k + i];
        }
    }
    st->rows->store(a->hist_out, a->dtype, (into * p->C + c0) * 3, out, 3 * m);
}

gdn_status gdn__layer_cpu_stages(const gdn__layer_problem *p, const char *delta_kernel) {
    const gdn_layer_args *a = &p->a;
    const int64_t T = p->T, qk = T * a->Hk * a->Dk, vv = T * a->Hv * a->Dv, gb = T * a->Hv;
    const int64_t D = a->Dk > a->Dv ? a->Dk : a->Dv, history = 7 * HIST_CH;
    int64_t prologue = 0; /* 11 D floats (checked: D may be near 2^60) */
    if (!gdn__size_mul(11, D, &prologue)) return GDN_ERR_OUT_OF_MEMORY;
    stages st;
    memset(&st, 0, sizeof st);
    st.p = p;
    st.rows = rows_here();
    st.pool.a.cpu_runner = a->cpu_runner;
    st.pool.threads = p->threads;
    st.per_worker = prologue > history ? prologue : history;
    /* the stages' buffers, 2 (qk + vv + gb) floats, kept between calls (src/cpu/workspace.c), and the workers'
     * scratch: sizes that cannot be counted cannot be had */
    int64_t floats = 0, buf_bytes = 0, scratch_bytes = 0;
    if (!gdn__size_add(qk, vv, &floats) || !gdn__size_add(floats, gb, &floats) ||
        !gdn__size_mul(floats, 2 * (int64_t)sizeof(float), &buf_bytes) || !gdn__size_fits(buf_bytes) ||
        !gdn__size_mul(st.per_worker, (int64_t)sizeof(float), &scratch_bytes) ||
        !gdn__size_mul(scratch_bytes, p->threads, &scratch_bytes) ||
        !gdn__size_fits(scratch_bytes))
        return GDN_ERR_OUT_OF_MEMORY;
    size_t kept = 0;
    float *buf = gdn__ws_take((size_t)buf_bytes, &kept);
    st.seq_of = gdn__malloc((size_t)T * sizeof(int32_t));
    st.scratch = gdn__malloc((size_t)scratch_bytes);
    if (!buf || !st.seq_of || !st.scratch) {
        gdn__ws_give(buf, kept);
        free(st.seq_of);
        free(st.scratch);
        return GDN_ERR_OUT_OF_MEMORY;
    }
    st.q = buf, st.k = st.q + qk, st.v = st.k + qk, st.o = st.v + vv, st.g = st.o + vv, st.beta = st.g + gb;
    for (int64_t b = 0; b < a->B; ++b)
        for (int64_t t = gdn__seq_start(p, b); t < a->cu_seqlens[b + 1]; ++t) st.seq_of[t] = (int32_t)b;

    gdn__parallel_for(&st.pool, a->B * (2 * a->Hk + a->Hv), p->threads, prologue_item, &st);
    const gdn__layer_buffers bufs = {st.q, st.k, st.v, st.g, st.beta, st.o, NULL, NULL, NULL, NULL, NULL}; /* no hand-off */
    const gdn_status s = gdn__layer_recurrence(p, &bufs, delta_kernel);
    if (s == GDN_OK) {
        gdn__parallel_for(&st.pool, T * a->Hv, p->threads, epilogue_item, &st);
        const int64_t blocks = (p->C + HIST_CH - 1) / HIST_CH;
        st.checkpoint_phase = 1;
        gdn__parallel_for(&st.pool, a->n_checkpoints * blocks, p->threads, history_item, &st);
        st.checkpoint_phase = 0;
        gdn__parallel_for(&st.pool, a->B * blocks, p->threads, history_item, &st);
    }
    gdn__ws_give(buf, kept);
    free(st.seq_of);
    free(st.scratch);
    return s;
}

int gdn__layer_staged_eligible(const gdn__layer_problem *p) { return p->a.backend == GDN_BACKEND_CPU; }
int gdn__layer_staged_routed(const gdn__layer_problem *p) { return gdn__layer_staged_eligible(p); }
gdn_status gdn__layer_staged(const gdn__layer_problem *p) { return gdn__layer_cpu_stages(p, NULL); }
