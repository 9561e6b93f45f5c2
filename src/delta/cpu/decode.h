/* The CPU decode kernel, written once over a small vector vocabulary and included by each ISA's file
 * (packed_decode_avx2.c: __m256; packed_decode_avx512.c: __m512): one or two tokens (T <= 2: decode) with Dk = 128,
 * over a state in the VK layout [B,Hv,Dv,Dk] (one sweep over the state, below) or the KV layout [B,Hv,Dk,Dv] (two
 * sweeps over blocks of 16 columns, further down).
 *
 * A value column j of the state is Dk = 128 contiguous keys. The contract's tree lane l owns keys 4l .. 4l+3, so
 * the column is read as DEC_GROUPS groups of 4 * DEC_VW keys (lanes DEC_VW n .. DEC_VW n + DEC_VW - 1 of group n),
 * each group as 4 vectors R_0 .. R_3 of DEC_VW keys. A 4 x 4 transpose inside each 128-bit chunk (dec_tr4) turns
 * them into E_0 .. E_3, E_e holding key 4l + e of DEC_VW lanes l in an order the including file's dec_group_tree
 * knows, so every vector lane is one tree lane and the contract's steps are plain vector operations (the token's
 * k, q and vector-gate rows are transposed the same way):
 *
 *     P   = fma(E_3, K_3, fma(E_2, K_2, fma(E_1, K_1, fma(E_0, K_0, 0))))     kv partials, ascending keys
 *     kv  = the butterfly: dec_group_tree per group, then pairwise over the groups (dec_tree)
 *     E_e = fma(g, E_e, K_e * d)                                            (vector gate: G_e)
 *     y   = the same tree over fma chains of E_e and Q_e, times scale
 *
 * Columns are independent: a batch of DEC_BATCH columns is read once, goes through all T tokens (per token the
 * kv of every column of the batch, then every update, so that the columns' chains overlap) and is written once.
 * Work items are (b, h); the token rows of an item are prepared once.
 *
 * The including file defines, before including this header:
 *     DEC_VEC                       vector type of DEC_VW floats (8 or 16: KV_W = 16 columns is KV_NV vectors)
 *     dec_vzero() dec_vload(p) dec_vstore(p, x) (aligned) dec_vloadu(p) dec_vstoreu(p, x) (unaligned)
 *     dec_vbcast(x) dec_vbcastp(p) (*p in every lane) dec_vfma(a, b, c) = a*b+c rounded once,
 *     dec_vmul(a, b) dec_vsub(a, b) dec_vadd(a, b)      each one IEEE operation per lane
 *     dec_vunpacklo(a, b) dec_vunpackhi(a, b) dec_vshuffle(a, b, imm)   per 128-bit chunk, as unpcklps / unpckhps /
 *                                   shufps do
 *     float dec_group_tree(DEC_VEC p)  levels m = 1 .. DEC_VW / 2 of the tree over one group's DEC_VW lane partials
 *                                   (as dec_tr4 lays them out), in the contract's order
 * and gets dec_args_fit(p) (the layout, Dk and T it can run) and dec_run(p) (runs them). */
#ifndef GDN_CPU_DELTA_DECODE_H
#define GDN_CPU_DELTA_DECODE_H

#include <string.h>

#include "gdn_internal.h"

#define DEC_DK 128
#define DEC_GROUPS (DEC_DK / (4 * DEC_VW)) /* groups of 4 * DEC_VW keys: 32 lanes of 4 keys in all */
#define DEC_NW (DEC_DK / DEC_VW)            /* vectors per row of 128 */
#define DEC_ALIGN (4 * DEC_VW)              /* bytes per vector */
#define DEC_TMAX 2
#define DEC_BATCH 8 /* columns stepped together */

/* The 4 x 4 transpose inside each 128-bit chunk of r[0..3]: out e, chunk c, element i = r[i], chunk c, element e.
 * Its own inverse. */
static inline __attribute__((always_inline)) void dec_tr4(DEC_VEC *o, DEC_VEC r0, DEC_VEC r1, DEC_VEC r2, DEC_VEC r3) {
    const DEC_VEC t0 = dec_vunpacklo(r0, r1), t1 = dec_vunpackhi(r0, r1);
    const DEC_VEC t2 = dec_vunpacklo(r2, r3), t3 = dec_vunpackhi(r2, r3);
    o[0] = dec_vshuffle(t0, t2, 0x44);
    o[1] = dec_vshuffle(t0, t2, 0xee);
    o[2] = dec_vshuffle(t1, t3, 0x44);
    o[3] = dec_vshuffle(t1, t3, 0xee);
}

/* The levels above the groups' subtrees (dec_group_tree, from the including file), pairwise over the groups. */
static inline __attribute__((always_inline)) float dec_tree(const DEC_VEC *p) {
#if DEC_GROUPS == 4
    return (dec_group_tree(p[0]) + dec_group_tree(p[1])) + (dec_group_tree(p[2]) + dec_group_tree(p[3]));
#elif DEC_GROUPS == 2
    return dec_group_tree(p[0]) + dec_group_tree(p[1]);
#else
#error "decode.h: DEC_VW is 8 or 16"
#endif
}

/* One (b, h)'s token rows as f32, for both layouts: k (update), kk (the kv key: k, or g_i k_i rounded with the
 * vector gate), q, the vector gate row g (NULL otherwise), scalar gate and beta. */
typedef struct dec_rows {
    _Alignas(DEC_ALIGN) float k[DEC_DK];
    _Alignas(DEC_ALIGN) float kk[DEC_DK];
    _Alignas(DEC_ALIGN) float q[DEC_DK];
    const float *g;
    float gate, beta;
    int live;
} dec_rows;

/* The token rows of (b, h). */
static void dec_token_rows(const gdn__problem *p, int64_t b, int64_t h, dec_rows *tok) {
    const gdn_delta_args *a = &p->a;
    const int64_t hk = gdn__key_head(h, a->Hk, p->group, p->tiled);
    for (int64_t t = 0; t < a->T; ++t) {
        dec_rows *tk = &tok[t];
        tk->live = gdn__token_live(a, b, t);
        if (!tk->live) continue;
        const int64_t qk = ((b * a->T + t) * a->Hk + hk) * DEC_DK;
        gdn__load_row(tk->k, a->k, a->dtype, qk, DEC_DK);
        gdn__load_row(tk->q, a->q, a->dtype, qk, DEC_DK);
        if (a->gate_kind == GDN_GATE_VECTOR) {
            tk->g = a->gate + ((b * a->T + t) * a->Hv + h) * DEC_DK;
            for (int i = 0; i < DEC_DK; ++i) tk->kk[i] = tk->g[i] * tk->k[i];
            tk->gate = 0.0f; /* unused */
        } else {
            memcpy(tk->kk, tk->k, sizeof tk->kk);
            tk->g = NULL;
            tk->gate = gdn__scalar_gate(a, b, t, h);
        }
        tk->beta = gdn__beta(a, b, t, h);
    }
}

/* One token's rows, transposed like the state: w[n * 4 + e] for group n (k: the update's k; kk: the key of the kv
 * dot, g_i k_i rounded with the vector gate; q; g: the vector gate). */
typedef struct dec_token {
    DEC_VEC k[DEC_NW], kk[DEC_NW], q[DEC_NW], g[DEC_NW];
    float gate, beta; /* scalar gate (not the vector gate), beta */
    int live;
} dec_token;

/* Loads a row of 128 f32 and transposes it group by group into w. */
static inline __attribute__((always_inline)) void dec_row(DEC_VEC *w, const float *row) {
#pragma GCC unroll 4
    for (int n = 0; n < DEC_GROUPS; ++n)
        dec_tr4(w + 4 * n, dec_vloadu(row + 4 * DEC_VW * n), dec_vloadu(row + 4 * DEC_VW * n + DEC_VW),
                dec_vloadu(row + 4 * DEC_VW * n + 2 * DEC_VW), dec_vloadu(row + 4 * DEC_VW * n + 3 * DEC_VW));
}

typedef struct dec_job {
    const gdn__problem *p;
} dec_job;

/* One (b, h) over its T tokens. */
static void dec_item(void *ctx, int64_t item, int worker) {
    (void)worker;
    const gdn__problem *p = ((const dec_job *)ctx)->p;
    const gdn_delta_args *a = &p->a;
    const int64_t b = item / a->Hv, h = item % a->Hv, Dv = a->Dv, T = a->T;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    _Alignas(DEC_ALIGN) dec_token tok[DEC_TMAX];
    dec_rows rows[DEC_TMAX];
    /* the tokens' rows, transposed */
    dec_token_rows(p, b, h, rows);
    for (int64_t t = 0; t < T; ++t) {
        dec_token *tk = &tok[t];
        const dec_rows *r = &rows[t];
        tk->live = r->live;
        if (!tk->live) continue;
        dec_row(tk->k, r->k);
        dec_row(tk->kk, r->kk);
        dec_row(tk->q, r->q);
        if (vgate) dec_row(tk->g, r->g);
        tk->gate = r->gate;
        tk->beta = r->beta;
    }
    const DEC_VEC zero = dec_vzero();
    const float *sin = a->state_in ? a->state_in + (b * a->Hv + h) * Dv * DEC_DK : NULL;
    float *sout = a->state_out ? a->state_out + (b * a->Hv + h) * Dv * DEC_DK : NULL;
    /* DEC_BATCH columns at a time, their states transposed in s[c][n * 4 + e]: each token's kv of every column of
     * the batch first, then the updates, so the columns' dependency chains overlap */
    _Alignas(DEC_ALIGN) DEC_VEC s[DEC_BATCH][DEC_NW];
    for (int64_t j0 = 0; j0 < Dv; j0 += DEC_BATCH) {
        const int nc = Dv - j0 < DEC_BATCH ? (int)(Dv - j0) : DEC_BATCH;
        /* the batch after the next one, ahead of its reads */
        if (sin && j0 + 2 * DEC_BATCH < Dv)
            for (int64_t x = 0; x < DEC_BATCH * DEC_DK && j0 + 2 * DEC_BATCH + x / DEC_DK < Dv; x += 16)
                _mm_prefetch((const char *)(sin + (j0 + 2 * DEC_BATCH) * DEC_DK + x), _MM_HINT_T0);
        for (int c = 0; c < nc; ++c) {
            if (sin)
                dec_row(s[c], sin + (j0 + c) * DEC_DK);
            else
                for (int i = 0; i < DEC_NW; ++i) s[c][i] = zero;
        }
        for (int64_t t = 0; t < T; ++t) {
            const dec_token *tk = &tok[t];
            const int64_t y0 = ((b * T + t) * a->Hv + h) * Dv + j0;
            if (!tk->live) {
                for (int c = 0; c < nc; ++c) gdn__store(a->y, a->dtype, y0 + c, 0.0f);
                continue;
            }
            /* kv = tree(S . k) (vector gate: . g k); d = (v - g kv) beta (vector gate: (v - kv) beta) */
            float d[DEC_BATCH];
            for (int c = 0; c < nc; ++c) {
                DEC_VEC pk[DEC_GROUPS];
#pragma GCC unroll 4
                for (int n = 0; n < DEC_GROUPS; ++n) {
                    DEC_VEC acc = dec_vfma(s[c][4 * n], tk->kk[4 * n], zero);
#pragma GCC unroll 4
                    for (int e = 1; e < 4; ++e) acc = dec_vfma(s[c][4 * n + e], tk->kk[4 * n + e], acc);
                    pk[n] = acc;
                }
                const float kv = dec_tree(pk), vj = gdn__load(a->v, a->dtype, y0 + c);
                d[c] = vgate ? (vj - kv) * tk->beta : (vj - tk->gate * kv) * tk->beta;
            }
            /* S = fma(g, S, k d) (vector gate: g_i); y = tree(S . q) * scale */
            const DEC_VEC gv = dec_vbcast(tk->gate);
            for (int c = 0; c < nc; ++c) {
                const DEC_VEC dv = dec_vbcast(d[c]);
                DEC_VEC po[DEC_GROUPS];
#pragma GCC unroll 4
                for (int n = 0; n < DEC_GROUPS; ++n) {
                    DEC_VEC acc = zero;
#pragma GCC unroll 4
                    for (int e = 0; e < 4; ++e) {
                        const int i = 4 * n + e;
                        s[c][i] = dec_vfma(vgate ? tk->g[i] : gv, s[c][i], dec_vmul(tk->k[i], dv));
                        acc = dec_vfma(s[c][i], tk->q[i], acc);
                    }
                    po[n] = acc;
                }
                gdn__store(a->y, a->dtype, y0 + c, dec_tree(po) * a->scale);
            }
        }
        for (int c = 0; c < nc && sout; ++c)
#pragma GCC unroll 4
            for (int n = 0; n < DEC_GROUPS; ++n) {
                DEC_VEC o[4];
                dec_tr4(o, s[c][4 * n], s[c][4 * n + 1], s[c][4 * n + 2], s[c][4 * n + 3]);
                for (int e = 0; e < 4; ++e) dec_vstoreu(sout + (j0 + c) * DEC_DK + 4 * DEC_VW * n + DEC_VW * e, o[e]);
            }
    }
}

/* ---- the KV layout [B,Hv,Dk,Dv]: key row i of a head is Dv contiguous columns ----
 *
 * A block of KV_W = 16 columns is one 64-byte piece of each of the 128 key rows; each vector holds DEC_VW adjacent
 * columns (KV_NV vectors per row), so a vector lane is one column and the contract's tree is plain vertical arithmetic: tree lane l is the
 * fma chain over rows 4l .. 4l+3 from +0, and the 32 lane partials merge pairwise (levels 1, 2, 4, 8, 16) as a
 * binary counter over l, all unrolled so the partials stay in registers. Per block and live token u_0 .. u_{n-1}:
 *
 *     kv  = tree(S . kk_0)                                  the first sweep, reads the block (from memory)
 *     d   = (v - g kv) beta           (vector gate: (v - kv) beta)
 *     S'  = fma(g, S, k_i d); y = tree(S' . q) scale; kv = tree(S' . kk_next)   the second sweep (in L1)
 *
 * A block's rows fill only 8 of the 64 sets of L1 (row stride 512 bytes at Dv = 128), so the second sweep mostly
 * reads L2; what decides the speed is keeping DRAM reads in flight. A work item is a run of whole heads, whose
 * state is one stretch of memory: it is prefetched in address order, a head ahead of the block being computed
 * (spread over each block's first sweep). A block past Dv's last multiple of 16 runs on a zero-padded copy. */
#define KV_W 16
#define KV_NV (KV_W / DEC_VW) /* vectors per row of a block */
#define KV_ITEMS_PER_THREAD 8

/* tree(S . w) over a block: src row i at src + i * ss (ss = 0: every row the same zero row). Prefetches the
 * lines pf[0 .. pfn), 64 bytes apart, spread over the sweep. */
static __attribute__((noinline)) void kv_sweep_kv(const float *src, int64_t ss, const float *w, DEC_VEC *out,
                                                 const char *pf, int pfn) {
    DEC_VEC pend[5][KV_NV];
    int top = 0;
#pragma GCC unroll 32
    for (int l = 0; l < 32; ++l) {
        for (int e = 0; e < 4; ++e)
            if (4 * l + e < pfn) _mm_prefetch(pf + 64 * (4 * l + e), _MM_HINT_T0);
        DEC_VEC acc[KV_NV];
        for (int v = 0; v < KV_NV; ++v) acc[v] = dec_vzero();
#pragma GCC unroll 4
        for (int e = 0; e < 4; ++e) {
            const int i = 4 * l + e;
            const DEC_VEC wb = dec_vbcastp(w + i);
            for (int v = 0; v < KV_NV; ++v) acc[v] = dec_vfma(dec_vloadu(src + i * ss + DEC_VW * v), wb, acc[v]);
        }
        for (int x = l; x & 1; x >>= 1) {
            --top;
            for (int v = 0; v < KV_NV; ++v) acc[v] = dec_vadd(pend[top][v], acc[v]);
        }
        for (int v = 0; v < KV_NV; ++v) pend[top][v] = acc[v];
        ++top;
    }
    for (int v = 0; v < KV_NV; ++v) out[v] = pend[0][v];
}

/* S' = fma(g, S, k_i d) (vector gate: g_i) from src into dst (row strides ss, ds; may be the same rows);
 * o = tree(S' . q); with wn: n = tree(S' . wn), the next live token's kv. */
static inline __attribute__((always_inline)) void kv_sweep_update(const float *src, int64_t ss, float *dst, int64_t ds,
                                                                  const dec_rows *tk, const DEC_VEC *d, const float *wn,
                                                                  DEC_VEC *o, DEC_VEC *n, int vgate, int next) {
    DEC_VEC po[5][KV_NV], pn[5][KV_NV];
    const DEC_VEC gv = dec_vbcast(tk->gate);
    int top = 0;
#pragma GCC unroll 32
    for (int l = 0; l < 32; ++l) {
        DEC_VEC ao[KV_NV], an[KV_NV];
        for (int v = 0; v < KV_NV; ++v) ao[v] = an[v] = dec_vzero();
#pragma GCC unroll 4
        for (int e = 0; e < 4; ++e) {
            const int i = 4 * l + e;
            const DEC_VEC kb = dec_vbcastp(tk->k + i), qb = dec_vbcastp(tk->q + i);
            const DEC_VEC gb = vgate ? dec_vbcastp(tk->g + i) : gv;
            for (int v = 0; v < KV_NV; ++v) {
                const DEC_VEC s = dec_vfma(gb, dec_vloadu(src + i * ss + DEC_VW * v), dec_vmul(kb, d[v]));
                dec_vstoreu(dst + i * ds + DEC_VW * v, s);
                ao[v] = dec_vfma(s, qb, ao[v]);
                if (next) an[v] = dec_vfma(s, dec_vbcastp(wn + i), an[v]);
            }
        }
        for (int x = l; x & 1; x >>= 1) {
            --top;
            for (int v = 0; v < KV_NV; ++v) {
                ao[v] = dec_vadd(po[top][v], ao[v]);
                if (next) an[v] = dec_vadd(pn[top][v], an[v]);
            }
        }
        for (int v = 0; v < KV_NV; ++v) {
            po[top][v] = ao[v];
            if (next) pn[top][v] = an[v];
        }
        ++top;
    }
    for (int v = 0; v < KV_NV; ++v) {
        o[v] = po[0][v];
        if (next) n[v] = pn[0][v];
    }
}

typedef void (*kv_update_fn)(const float *src, int64_t ss, float *dst, int64_t ds, const dec_rows *tk, const DEC_VEC *d,
                             const float *wn, DEC_VEC *o, DEC_VEC *n);
#define KV_UPDATE_FN(name, vgate, next)                                                                          \
    static __attribute__((noinline)) void name(const float *src, int64_t ss, float *dst, int64_t ds,              \
                                               const dec_rows *tk, const DEC_VEC *d, const float *wn, DEC_VEC *o,   \
                                               DEC_VEC *n) {                                                      \
        kv_sweep_update(src, ss, dst, ds, tk, d, wn, o, n, vgate, next);                                          \
    }
KV_UPDATE_FN(kv_update_s, 0, 0)
KV_UPDATE_FN(kv_update_s_next, 0, 1)
KV_UPDATE_FN(kv_update_v, 1, 0)
KV_UPDATE_FN(kv_update_v_next, 1, 1)

typedef struct kv_job {
    const gdn__problem *p;
    int64_t blocks, heads, items; /* column blocks per head; B * Hv; work items (runs of heads) */
} kv_job;

/* Heads [h0, h1) of the B * Hv heads, block after block. Their state is one stretch of memory, prefetched in
 * address order a head ahead of the block being computed: 128 lines per block (at least a head per head). */
static void kv_item(void *ctx, int64_t item, int worker) {
    (void)worker;
    const kv_job *job = ctx;
    const gdn__problem *p = job->p;
    const gdn_delta_args *a = &p->a;
    const int64_t Dv = a->Dv, T = a->T, head = DEC_DK * Dv;
    const int64_t bh0 = item * job->heads / job->items, bh1 = (item + 1) * job->heads / job->items;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    static const float zero_row[KV_W] __attribute__((aligned(DEC_ALIGN)));
    _Alignas(DEC_ALIGN) float buf[DEC_DK * KV_W]; /* a tail block, a state between two tokens, the state with no state_out */
    dec_rows tok[DEC_TMAX];
    /* the prefetch stream: [pf, pf_end) of state_in, the first head now */
    const char *pf = a->state_in ? (const char *)(a->state_in + bh0 * head) : NULL;
    const char *pf_end = a->state_in ? (const char *)(a->state_in + bh1 * head) : NULL;
    for (int64_t i = 0; pf && i < head * 4; i += 64) _mm_prefetch(pf + i, _MM_HINT_T0);
    if (pf) pf += head * 4;
    for (int64_t x = bh0 * job->blocks; x < bh1 * job->blocks; ++x) {
        const int64_t bh = x / job->blocks, b = bh / a->Hv, h = bh % a->Hv, j0 = x % job->blocks * KV_W;
        const int nc = Dv - j0 < KV_W ? (int)(Dv - j0) : KV_W;
        const int64_t off = bh * head + j0;
        if (j0 == 0) dec_token_rows(p, b, h, tok);
        /* the block's rows: src (state_in, the zero row, or the padded copy) and the final state's dst */
        const float *src = a->state_in ? a->state_in + off : zero_row;
        int64_t ss = a->state_in ? Dv : 0, ds = a->state_out ? Dv : KV_W;
        float *dst = a->state_out ? a->state_out + off : buf;
        if (nc < KV_W) {
            for (int i = 0; i < DEC_DK; ++i)
                for (int c = 0; c < KV_W; ++c) buf[i * KV_W + c] = a->state_in && c < nc ? src[i * Dv + c] : 0.0f;
            src = dst = buf;
            ss = ds = KV_W;
        }
        const int pfn = pf && pf < pf_end ? (pf_end - pf) / 64 < DEC_DK ? (int)((pf_end - pf) / 64) : DEC_DK : 0;
        int live[DEC_TMAX], n = 0;
        for (int64_t t = 0; t < T; ++t)
            if (tok[t].live)
                live[n++] = (int)t;
            else
                for (int c = 0; c < nc; ++c) gdn__store(a->y, a->dtype, ((b * T + t) * a->Hv + h) * Dv + j0 + c, 0.0f);
        if (n == 0) {
            /* no live token: the state goes out unchanged */
            for (int i = 0; i < DEC_DK && dst != src; ++i)
                for (int v = 0; v < KV_NV; ++v) dec_vstoreu(dst + i * ds + DEC_VW * v, dec_vloadu(src + i * ss + DEC_VW * v));
        } else {
            DEC_VEC kv[KV_NV];
            kv_sweep_kv(src, ss, tok[live[0]].kk, kv, pf, pfn);
            for (int m = 0; m < n; ++m) {
                const dec_rows *tk = &tok[live[m]];
                const int64_t yv = ((b * T + live[m]) * a->Hv + h) * Dv + j0;
                /* d = (v - g kv) beta (vector gate: (v - kv) beta); columns past Dv get v = 0 */
                _Alignas(DEC_ALIGN) float vr[KV_W];
                for (int c = 0; c < KV_W; ++c) vr[c] = c < nc ? gdn__load(a->v, a->dtype, yv + c) : 0.0f;
                const DEC_VEC beta = dec_vbcast(tk->beta), g = dec_vbcast(tk->gate);
                DEC_VEC d[KV_NV], o[KV_NV];
                for (int v = 0; v < KV_NV; ++v) {
                    const DEC_VEC vv = dec_vload(vr + DEC_VW * v);
                    d[v] = dec_vmul(dec_vsub(vv, vgate ? kv[v] : dec_vmul(g, kv[v])), beta);
                }
                /* from the block's src (first token) or buf, into buf or (last token) dst */
                const float *s_in = m == 0 ? src : buf;
                float *s_out = m == n - 1 ? dst : buf;
                const int64_t si = m == 0 ? ss : KV_W, so = m == n - 1 ? ds : KV_W;
                const float *wn = m + 1 < n ? tok[live[m + 1]].kk : NULL;
                const kv_update_fn fn = vgate ? (wn ? kv_update_v_next : kv_update_v) : (wn ? kv_update_s_next : kv_update_s);
                fn(s_in, si, s_out, so, tk, d, wn, o, kv);
                /* y = tree(S' . q) * scale, rounded to the dtype */
                _Alignas(DEC_ALIGN) float yr[KV_W];
                for (int v = 0; v < KV_NV; ++v) dec_vstore(yr + DEC_VW * v, dec_vmul(o[v], dec_vbcast(a->scale)));
                for (int c = 0; c < nc; ++c) gdn__store(a->y, a->dtype, yv + c, yr[c]);
            }
        }
        if (pfn > 0) pf += 64 * pfn;
        /* a tail block's real columns out */
        if (nc < KV_W && a->state_out)
            for (int i = 0; i < DEC_DK; ++i) memcpy(a->state_out + off + i * Dv, buf + i * KV_W, sizeof(float) * (size_t)nc);
    }
}

static void kv_run(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    kv_job job;
    job.p = p;
    job.blocks = (a->Dv + KV_W - 1) / KV_W;
    job.heads = a->B * a->Hv;
    const int64_t want = (int64_t)p->threads * KV_ITEMS_PER_THREAD;
    job.items = job.heads < want ? job.heads : want;
    gdn__parallel_for(p, job.items, p->threads, kv_item, &job);
}

/* VK or KV layout, Dk = 128, T <= 2. */
static inline int dec_args_fit(const gdn__problem *p) {
    return (p->a.state_layout == GDN_STATE_VK || p->a.state_layout == GDN_STATE_KV) && p->a.Dk == DEC_DK &&
           p->a.T <= DEC_TMAX;
}

/* Arguments that fit. */
static gdn_status dec_run(const gdn__problem *p) {
    if (p->a.state_layout == GDN_STATE_KV) {
        kv_run(p);
        return GDN_OK;
    }
    dec_job job = {p};
    gdn__parallel_for(p, p->a.B * p->a.Hv, p->threads, dec_item, &job);
    return GDN_OK;
}

#endif
