/* The blocked CPU kernel, written once over a small vector vocabulary and included by each ISA's file
 * (delta_avx2.c: __m256; delta_portable.c: plain C structs of floats).
 *
 * Work item = (sequence b, value head h, block of BLK_COLS value columns). The block's state lives in a
 * contiguous aligned buffer S[Dk][BLK_COLS] (L1-resident) for the whole window. Vectors run across value
 * columns: each vector lane is one column j and evaluates exactly the contract's scalar steps for that column,
 * including the 32-lane tree of every dot product (docs/CONTRACT.md):
 *
 *     lane l of the tree owns key rows [l*c, min(l*c + c, Dk)), c = ceil(Dk / 32): its partial accumulates
 *     ascending with fma from +0; partials merge pairwise p[l] + p[l+m], m = 1, 2, 4, 8, 16.
 *
 * The tree is static: blk_tree32 -> blk_tree16 -> ... -> blk_lane inline into one straight pass, so partials
 * stay in registers. Each token's update+readout pass is fused with the next live token's kv pass, so every
 * state element is loaded and stored once per token:
 *
 *     S'   = fma(g, S, k_i * d)        (vector gate: g_i)
 *     o   += S' * q_i                  (readout of this token)
 *     kvn += S' * kn_i                 (kv of the next live token: kn = k_next, vector gate: g_next,i * k_next,i)
 *
 * The first live token's kv is a separate read-only pass. Masked tokens write y = 0 and leave S alone, so the
 * next live token's kv is the one computed from the current state.
 *
 * The including file defines, before including this header:
 *     BLK_VEC                       vector type of BLK_VW floats
 *     BLK_VW, BLK_NV                floats per vector, vectors per row of the block (BLK_COLS = BLK_VW * BLK_NV)
 *     blk_vzero() blk_vload(p) blk_vstore(p, x) blk_vbcast(x) blk_vfma(a, b, c) = a*b+c rounded once,
 *     blk_vmul(a, b) blk_vsub(a, b) blk_vadd(a, b)      each one IEEE operation per lane
 */
#ifndef GDN_CPU_DELTA_BLOCKED_H
#define GDN_CPU_DELTA_BLOCKED_H

#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"

#define BLK_COLS (BLK_VW * BLK_NV)
#define BLK_MAX_DK 512
#define BLK_INLINE static inline __attribute__((always_inline))
#define BLK_NOINLINE static __attribute__((noinline))

/* Lane partials of one tree node: o (readout of this token) and n (kv of the next token), per vector. */
typedef struct blk_part {
    BLK_VEC o[BLK_NV], n[BLK_NV];
} blk_part;

/* One pass over the block's Dk rows. */
typedef struct blk_pass {
    float *S;         /* [Dk][BLK_COLS] */
    const float *k;   /* [Dk] this token's k (update) */
    const float *q;   /* [Dk] this token's q (readout) */
    const float *gv;  /* [Dk] this token's vector gate (vector gate only) */
    const float *kn;  /* [Dk] key of the kv being computed: k, or g_i k_i with the vector gate */
    BLK_VEC g;        /* this token's scalar gate */
    BLK_VEC d[BLK_NV]; /* this token's delta */
    int64_t Dk, c;    /* rows; rows per tree lane */
} blk_pass;

enum {
    BLK_KV = 0,     /* read only: n = tree(S . kn) */
    BLK_UPDATE = 1, /* S' = fma(g, S, k d); o = tree(S' . q) */
    BLK_FUSED = 2   /* BLK_UPDATE and n = tree(S' . kn) */
};

/* Tree lane l: rows [l*c, l*c + cnt), ascending fma chains from +0. `full` (Dk == 32 c) makes cnt = c. */
BLK_INLINE blk_part blk_lane(const blk_pass *ps, int64_t l, int mode, int vgate, int64_t c, int full) {
    blk_part r;
    for (int v = 0; v < BLK_NV; ++v) r.o[v] = r.n[v] = blk_vzero();
    const int64_t i0 = l * c;
    int64_t cnt = c;
    if (!full) {
        cnt = ps->Dk - i0;
        cnt = cnt < 0 ? 0 : cnt > c ? c : cnt;
    }
    for (int64_t e = 0; e < cnt; ++e) {
        const int64_t i = i0 + e;
        float *row = ps->S + i * BLK_COLS;
        if (mode == BLK_KV) {
            const BLK_VEC kb = blk_vbcast(ps->kn[i]);
            for (int v = 0; v < BLK_NV; ++v) r.n[v] = blk_vfma(blk_vload(row + v * BLK_VW), kb, r.n[v]);
        } else {
            const BLK_VEC kb = blk_vbcast(ps->k[i]), qb = blk_vbcast(ps->q[i]);
            const BLK_VEC gb = vgate ? blk_vbcast(ps->gv[i]) : ps->g;
            const BLK_VEC nb = mode == BLK_FUSED ? blk_vbcast(ps->kn[i]) : blk_vzero();
            for (int v = 0; v < BLK_NV; ++v) {
                const BLK_VEC s = blk_vfma(gb, blk_vload(row + v * BLK_VW), blk_vmul(kb, ps->d[v]));
                blk_vstore(row + v * BLK_VW, s);
                r.o[v] = blk_vfma(s, qb, r.o[v]);
                if (mode == BLK_FUSED) r.n[v] = blk_vfma(s, nb, r.n[v]);
            }
        }
    }
    return r;
}

/* p[l] + p[l+m]: the lower lanes' node on the left. */
BLK_INLINE blk_part blk_add(blk_part x, blk_part y) {
    for (int v = 0; v < BLK_NV; ++v) {
        x.o[v] = blk_vadd(x.o[v], y.o[v]);
        x.n[v] = blk_vadd(x.n[v], y.n[v]);
    }
    return x;
}

#define BLK_LEVEL(name, sub, span)                                                                           \
    BLK_INLINE blk_part name(const blk_pass *ps, int64_t l, int mode, int vgate, int64_t c, int full) {      \
        const blk_part x = sub(ps, l, mode, vgate, c, full);                                                 \
        const blk_part y = sub(ps, l + (span), mode, vgate, c, full);                                        \
        return blk_add(x, y);                                                                                \
    }
BLK_LEVEL(blk_tree2, blk_lane, 1)
BLK_LEVEL(blk_tree4, blk_tree2, 2)
BLK_LEVEL(blk_tree8, blk_tree4, 4)
BLK_LEVEL(blk_tree16, blk_tree8, 8)
BLK_LEVEL(blk_tree32, blk_tree16, 16)
#undef BLK_LEVEL

typedef blk_part (*blk_pass_fn)(const blk_pass *ps);

/* The passes, one function per (rows per lane, mode, gate): Dk = 32 c straight-line for c = 1, 2, 4, 8, and
 * one for any Dk. */
#define BLK_PASS_FN(name, mode, vgate, c, full)                                                               \
    BLK_NOINLINE blk_part name(const blk_pass *arg) {                                                        \
        const blk_pass local = *arg, *ps = &local;                                                           \
        return blk_tree32(ps, 0, mode, vgate, c, full);                                                      \
    }
#define BLK_PASSES(suffix, c, full)                                                                          \
    BLK_PASS_FN(blk_kv_##suffix, BLK_KV, 0, c, full)                                                         \
    BLK_PASS_FN(blk_upd_##suffix, BLK_UPDATE, 0, c, full)                                                    \
    BLK_PASS_FN(blk_fus_##suffix, BLK_FUSED, 0, c, full)                                                     \
    BLK_PASS_FN(blk_updv_##suffix, BLK_UPDATE, 1, c, full)                                                   \
    BLK_PASS_FN(blk_fusv_##suffix, BLK_FUSED, 1, c, full)                                                    \
    static const blk_pass_fn blk_fns_##suffix[5] = {blk_kv_##suffix, blk_upd_##suffix, blk_fus_##suffix,      \
                                                    blk_updv_##suffix, blk_fusv_##suffix};
BLK_PASSES(c1, 1, 1)
BLK_PASSES(c2, 2, 1)
BLK_PASSES(c4, 4, 1)
BLK_PASSES(c8, 8, 1)
BLK_PASSES(any, ps->c, 0)
#undef BLK_PASSES
#undef BLK_PASS_FN

/* The five passes for this Dk: kv, update, fused, update (vector gate), fused (vector gate). */
static const blk_pass_fn *blk_passes_for(int64_t Dk) {
    switch (Dk) {
    case 32: return blk_fns_c1;
    case 64: return blk_fns_c2;
    case 128: return blk_fns_c4;
    case 256: return blk_fns_c8;
    default: return blk_fns_any;
    }
}

/* Sizes of one call: items are (b, h, group of `nb` column blocks); the window runs in chunks of `tc` tokens
 * whose q, k (and gate) rows are converted once into a per-worker workspace and reused by every block. */
typedef struct blk_job {
    const gdn__problem *p;
    int64_t blocks; /* column blocks per value head */
    int64_t nb;     /* column blocks per item */
    int64_t groups; /* items per value head */
    int64_t tc;     /* tokens per chunk */
    float *ws;      /* per-worker workspace, ws_stride floats each */
    size_t ws_stride;
    size_t off_q, off_k, off_gv, off_gk, off_v; /* regions of a worker's workspace; the state is at 0 */
} blk_job;

#define BLK_CHUNK_FLOATS 8192  /* tc * Dk: one chunk's q (or k) rows, 32 KB */
#define BLK_GROUP_FLOATS 16384 /* nb * Dk * BLK_COLS: one item's state, 64 KB */
#define BLK_MAX_TC (BLK_CHUNK_FLOATS / 32)
#define BLK_IL 2               /* blocks stepped in lockstep, token by token */

static int64_t blk_min(int64_t x, int64_t y) { return x < y ? x : y; }
static size_t blk_round(size_t n) { return (n + 15) / 16 * 16; } /* floats, to 64 bytes */

/* The item's column blocks lb .. lb+m-1 (m <= BLK_IL; the item's columns start at c0) through one chunk's n
 * live tokens, in lockstep:
 * each token, every block runs its pass; a block's delta never waits on the pass just issued. */
static void blk_chunk_blocks(const blk_job *job, const float *ws, float *S, int64_t b, int64_t h, int64_t c0,
                             int64_t lb, int64_t m, const int64_t *live, const float *gsc, const float *bsc, int64_t n) {
    const gdn_delta_args *a = &job->p->a;
    const int64_t Dk = a->Dk, Dv = a->Dv, vstride = job->nb * BLK_COLS;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    const blk_pass_fn *fns = blk_passes_for(Dk);
    const float *qc = ws + job->off_q, *kc = ws + job->off_k, *gvc = ws + job->off_gv, *gkc = ws + job->off_gk;
    const float *vc = ws + job->off_v, *knc = vgate ? gkc : kc;
    _Alignas(64) float ybuf[BLK_COLS];
    blk_pass ps[BLK_IL];
    blk_part kv[BLK_IL];
    memset(ps, 0, sizeof ps);
    for (int64_t s = 0; s < m; ++s) {
        /* kv of the chunk's first live token: tree(S . k) (vector gate: . g k) */
        ps[s].S = S + (lb + s) * Dk * BLK_COLS;
        ps[s].Dk = Dk;
        ps[s].c = job->p->dk_lane;
        ps[s].kn = knc;
        kv[s] = fns[BLK_KV](&ps[s]);
    }
    for (int64_t u = 0; u < n; ++u) {
        const int64_t y_row = ((b * a->T + live[u]) * a->Hv + h) * Dv;
        const BLK_VEC g = blk_vbcast(gsc[u]), beta = blk_vbcast(bsc[u]), scale = blk_vbcast(a->scale);
        const int last = u + 1 == n;
        for (int64_t s = 0; s < m; ++s) {
            blk_pass *P = &ps[s];
            P->k = kc + u * Dk;
            P->q = qc + u * Dk;
            P->gv = gvc + u * Dk;
            P->kn = knc + (last ? u : u + 1) * Dk;
            P->g = g;
            /* d = (v - g kv) beta (vector gate: (v - kv) beta) */
            for (int v = 0; v < BLK_NV; ++v) {
                const BLK_VEC vv = blk_vload(vc + u * vstride + (lb + s) * BLK_COLS + v * BLK_VW);
                P->d[v] = blk_vmul(blk_vsub(vv, vgate ? kv[s].n[v] : blk_vmul(g, kv[s].n[v])), beta);
            }
            /* update and readout of this token, fused with the kv of the next live token */
            kv[s] = fns[(last ? BLK_UPDATE : BLK_FUSED) + (vgate ? 2 : 0)](P);
            /* y = tree(S' . q) * scale, rounded to the dtype */
            const int64_t j0 = c0 + (lb + s) * BLK_COLS, ncols = blk_min(BLK_COLS, Dv - j0);
            for (int v = 0; v < BLK_NV; ++v) blk_vstore(ybuf + v * BLK_VW, blk_vmul(kv[s].o[v], scale));
            if (a->dtype == GDN_F32)
                memcpy((float *)a->y + y_row + j0, ybuf, sizeof(float) * (size_t)ncols);
            else
                for (int64_t jj = 0; jj < ncols; ++jj) gdn__store(a->y, a->dtype, y_row + j0 + jj, ybuf[jj]);
        }
    }
}

/* One work item: (b, h, a group of column blocks) over the whole window, chunk by chunk. */
static void blk_item(void *ctx, int64_t item, int worker) {
    const blk_job *job = ctx;
    const gdn__problem *p = job->p;
    const gdn_delta_args *a = &p->a;
    const int64_t grp = item % job->groups, bh = item / job->groups, b = bh / a->Hv, h = bh % a->Hv;
    const int64_t hk = h / p->group, Dk = a->Dk, Dv = a->Dv, T = a->T;
    const int64_t blk0 = grp * job->nb, nblk = blk_min(job->nb, job->blocks - blk0);
    const int64_t c0 = blk0 * BLK_COLS, gcols = blk_min(nblk * BLK_COLS, Dv - c0), vstride = job->nb * BLK_COLS;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    float *ws = job->ws + (size_t)worker * job->ws_stride, *S = ws;
    float *qc = ws + job->off_q, *kc = ws + job->off_k, *gvc = ws + job->off_gv, *gkc = ws + job->off_gk;
    float *vc = ws + job->off_v;
    int64_t live[BLK_MAX_TC];
    float gsc[BLK_MAX_TC], bsc[BLK_MAX_TC];

    /* S[blk][i][jj] = state_in(b, h, i, c0 + blk*BLK_COLS + jj); zero past Dv and without state_in */
    for (int64_t blk = 0; blk < nblk; ++blk)
        for (int64_t i = 0; i < Dk; ++i)
            for (int64_t jj = 0; jj < BLK_COLS; ++jj) {
                const int64_t j = c0 + blk * BLK_COLS + jj;
                S[(blk * Dk + i) * BLK_COLS + jj] =
                    a->state_in && j < Dv ? a->state_in[gdn__state_index(a, b, h, i, j)] : 0.0f;
            }

    for (int64_t t0 = 0; t0 < T; t0 += job->tc) {
        /* the chunk's live tokens: q, k rows as f32, g k and the gate row (vector gate), v of the group's
         * columns (zero past Dv), g and beta; masked tokens get y = 0 */
        const int64_t t1 = blk_min(T, t0 + job->tc);
        int64_t n = 0;
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t y_row = ((b * T + t) * a->Hv + h) * Dv + c0;
            if (!gdn__token_live(a, b, t)) {
                for (int64_t j = 0; j < gcols; ++j) gdn__store(a->y, a->dtype, y_row + j, 0.0f);
                continue;
            }
            const int64_t qk_row = ((b * T + t) * a->Hk + hk) * Dk;
            float *q = qc + n * Dk, *k = kc + n * Dk, *vr = vc + n * vstride;
            gdn__load_row(q, a->q, a->dtype, qk_row, Dk);
            gdn__load_row(k, a->k, a->dtype, qk_row, Dk);
            if (vgate) {
                const float *gv = a->gate + ((b * T + t) * a->Hv + h) * Dk;
                for (int64_t i = 0; i < Dk; ++i) {
                    gvc[n * Dk + i] = gv[i];
                    gkc[n * Dk + i] = gv[i] * k[i];
                }
            }
            for (int64_t j = 0; j < nblk * BLK_COLS; ++j) vr[j] = j < gcols ? gdn__load(a->v, a->dtype, y_row + j) : 0.0f;
            gsc[n] = vgate ? 0.0f : gdn__scalar_gate(a, b, t, h);
            bsc[n] = gdn__beta(a, b, t, h);
            live[n++] = t;
        }
        if (n == 0) continue;
        for (int64_t blk = 0; blk < nblk; blk += BLK_IL)
            blk_chunk_blocks(job, ws, S, b, h, c0, blk, blk_min(BLK_IL, nblk - blk), live, gsc, bsc, n);
    }

    if (a->state_out)
        for (int64_t blk = 0; blk < nblk; ++blk)
            for (int64_t i = 0; i < Dk; ++i)
                for (int64_t jj = 0; jj < BLK_COLS && c0 + blk * BLK_COLS + jj < Dv; ++jj)
                    a->state_out[gdn__state_index(a, b, h, i, c0 + blk * BLK_COLS + jj)] =
                        S[(blk * Dk + i) * BLK_COLS + jj];
}

/* The kernel. One workspace per call (per worker: the item's state, the chunk's rows), allocated before
 * anything is written. */
static gdn_status blk_run(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    if (a->Dk > BLK_MAX_DK) return GDN_ERR_INELIGIBLE;
    blk_job job;
    memset(&job, 0, sizeof job);
    job.p = p;
    job.blocks = (a->Dv + BLK_COLS - 1) / BLK_COLS;
    /* blocks per item: the state of an item fits BLK_GROUP_FLOATS; at least 2 items per thread when possible */
    job.nb = blk_min(job.blocks, BLK_GROUP_FLOATS / (a->Dk * BLK_COLS));
    const int64_t heads = a->B * a->Hv, want = (2 * (int64_t)p->threads + heads - 1) / heads;
    if (want > 1) job.nb = blk_min(job.nb, (job.blocks + want - 1) / want);
    if (job.nb < 1) job.nb = 1;
    job.groups = (job.blocks + job.nb - 1) / job.nb;
    job.tc = blk_min(blk_min(BLK_CHUNK_FLOATS / a->Dk, BLK_GROUP_FLOATS / (job.nb * BLK_COLS)), blk_min(a->T, BLK_MAX_TC));
    if (job.tc < 1) job.tc = 1;

    const size_t state = blk_round((size_t)(job.nb * a->Dk * BLK_COLS)), rows = blk_round((size_t)(job.tc * a->Dk));
    const size_t vrows = blk_round((size_t)(job.tc * job.nb * BLK_COLS));
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    job.off_q = state;
    job.off_k = job.off_q + rows;
    job.off_gv = job.off_k + rows;
    job.off_gk = job.off_gv + (vgate ? rows : 0);
    job.off_v = job.off_gk + (vgate ? rows : 0);
    job.ws_stride = job.off_v + vrows;
    job.ws = aligned_alloc(64, sizeof(float) * job.ws_stride * (size_t)p->threads);
    if (!job.ws) return GDN_ERR_OUT_OF_MEMORY;
    gdn__parallel_for(a->B * a->Hv * job.groups, p->threads, blk_item, &job);
    free(job.ws);
    return GDN_OK;
}

#endif
