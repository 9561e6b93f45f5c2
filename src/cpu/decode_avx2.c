/* The AVX2 + FMA kernel `packed_decode_avx2`: one or two tokens (T <= 2: decode) over a state in the VK layout
 * [B,Hv,Dv,Dk] with Dk = 128, one sweep over the state. Compiled with -mavx2 -mfma (this file only); routed only
 * where the CPU has both.
 *
 * A value column j of the state is Dk = 128 contiguous keys. The contract's tree lane l owns keys 4l .. 4l+3, so
 * the column is read as 4 groups of 32 keys (lanes 8n .. 8n+7 of group n), each group as 4 vectors R_0 .. R_3 of 8
 * keys. A 4 x 4 transpose inside each 128-bit half turns them into E_0 .. E_3 with
 *
 *     E_e = key 4l + e of lanes l = 8n + (0, 2, 4, 6 | 1, 3, 5, 7)   (low half | high half)
 *
 * so every vector lane is one tree lane and the contract's steps are plain vector operations (the token's k, q
 * and vector-gate rows are transposed the same way):
 *
 *     P   = fma(E_3, K_3, fma(E_2, K_2, fma(E_1, K_1, fma(E_0, K_0, 0))))     kv partials, ascending keys
 *     kv  = ((P0 + P1) + (P2 + P3)) + ...                                   the butterfly, by halves (below)
 *     E_e = fma(g, E_e, K_e * d)                                            (vector gate: G_e)
 *     y   = the same tree over fma chains of E_e and Q_e, times scale
 *
 * Columns are independent: a batch of DEC_BATCH columns is read once, goes through all T tokens (per token the
 * kv of every column of the batch, then every update, so that the columns' chains overlap) and is written once.
 * Work items are (b, h); the token rows of an item are prepared once. */
#include <immintrin.h>
#include <string.h>

#include "gdn_internal.h"

#define DEC_DK 128
#define DEC_GROUPS 4 /* DEC_DK / 32 keys */
#define DEC_TMAX 2
#define DEC_BATCH 8 /* columns stepped together */

/* The 4 x 4 transpose inside each 128-bit half of r[0..3]: out e, half h, element i = r[i], half h, element e.
 * Its own inverse. */
static inline __attribute__((always_inline)) void dec_tr4(__m256 *o, __m256 r0, __m256 r1, __m256 r2, __m256 r3) {
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    o[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    o[1] = _mm256_shuffle_ps(t0, t2, 0xee);
    o[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    o[3] = _mm256_shuffle_ps(t1, t3, 0xee);
}

/* The subtree of one group's 8 lane partials p = (p0 p2 p4 p6 | p1 p3 p5 p7): levels m = 1 (the halves), m = 2
 * and m = 4: ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). */
static inline __attribute__((always_inline)) float dec_group_tree(__m256 p) {
    const __m128 x = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1)); /* p0+p1 p2+p3 p4+p5 p6+p7 */
    const __m128 y = _mm_add_ps(x, _mm_shuffle_ps(x, x, 0xb1));                         /* pairs of pairs in 0, 2 */
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_movehl_ps(y, y)));
}

/* Levels m = 8, 16 over the 4 groups. */
static inline __attribute__((always_inline)) float dec_tree(const __m256 *p) {
    return (dec_group_tree(p[0]) + dec_group_tree(p[1])) + (dec_group_tree(p[2]) + dec_group_tree(p[3]));
}

/* One token's rows, transposed like the state: w[n * 4 + e] for group n (k: the update's k; kk: the key of the kv
 * dot, g_i k_i rounded with the vector gate; q; g: the vector gate). */
typedef struct dec_token {
    __m256 k[16], kk[16], q[16], g[16];
    float gate, beta; /* scalar gate (not the vector gate), beta */
    int live;
} dec_token;

/* Loads a row of 128 f32 and transposes it group by group into w. */
static inline __attribute__((always_inline)) void dec_row(__m256 *w, const float *row) {
#pragma GCC unroll 4
    for (int n = 0; n < DEC_GROUPS; ++n)
        dec_tr4(w + 4 * n, _mm256_loadu_ps(row + 32 * n), _mm256_loadu_ps(row + 32 * n + 8),
                _mm256_loadu_ps(row + 32 * n + 16), _mm256_loadu_ps(row + 32 * n + 24));
}

typedef struct dec_job {
    const gdn__problem *p;
} dec_job;

/* One (b, h) over its T tokens. */
static void dec_item(void *ctx, int64_t item, int worker) {
    (void)worker;
    const gdn__problem *p = ((const dec_job *)ctx)->p;
    const gdn_delta_args *a = &p->a;
    const int64_t b = item / a->Hv, h = item % a->Hv, hk = h / p->group, Dv = a->Dv, T = a->T;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    _Alignas(32) dec_token tok[DEC_TMAX];
    _Alignas(32) float row[DEC_DK];
    /* the tokens' rows: k, q (and the vector gate, g k) as f32, transposed */
    for (int64_t t = 0; t < T; ++t) {
        dec_token *tk = &tok[t];
        tk->live = gdn__token_live(a, b, t);
        if (!tk->live) continue;
        const int64_t qk = ((b * T + t) * a->Hk + hk) * DEC_DK;
        gdn__load_row(row, a->k, a->dtype, qk, DEC_DK);
        dec_row(tk->k, row);
        if (vgate) {
            const float *g = a->gate + ((b * T + t) * a->Hv + h) * DEC_DK;
            for (int i = 0; i < DEC_DK; ++i) row[i] = g[i] * row[i];
            dec_row(tk->kk, row);
            dec_row(tk->g, g);
            tk->gate = 0.0f; /* unused */
        } else {
            memcpy(tk->kk, tk->k, sizeof tk->k);
            tk->gate = gdn__scalar_gate(a, b, t, h);
        }
        gdn__load_row(row, a->q, a->dtype, qk, DEC_DK);
        dec_row(tk->q, row);
        tk->beta = gdn__beta(a, b, t, h);
    }
    const __m256 zero = _mm256_setzero_ps();
    const float *sin = a->state_in ? a->state_in + (b * a->Hv + h) * Dv * DEC_DK : NULL;
    float *sout = a->state_out ? a->state_out + (b * a->Hv + h) * Dv * DEC_DK : NULL;
    /* DEC_BATCH columns at a time, their states transposed in s[c][n * 4 + e]: each token's kv of every column of
     * the batch first, then the updates, so the columns' dependency chains overlap */
    _Alignas(32) __m256 s[DEC_BATCH][16];
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
                for (int i = 0; i < 16; ++i) s[c][i] = zero;
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
                __m256 pk[DEC_GROUPS];
#pragma GCC unroll 4
                for (int n = 0; n < DEC_GROUPS; ++n) {
                    __m256 acc = _mm256_fmadd_ps(s[c][4 * n], tk->kk[4 * n], zero);
#pragma GCC unroll 4
                    for (int e = 1; e < 4; ++e) acc = _mm256_fmadd_ps(s[c][4 * n + e], tk->kk[4 * n + e], acc);
                    pk[n] = acc;
                }
                const float kv = dec_tree(pk), vj = gdn__load(a->v, a->dtype, y0 + c);
                d[c] = vgate ? (vj - kv) * tk->beta : (vj - tk->gate * kv) * tk->beta;
            }
            /* S = fma(g, S, k d) (vector gate: g_i); y = tree(S . q) * scale */
            const __m256 gv = _mm256_set1_ps(tk->gate);
            for (int c = 0; c < nc; ++c) {
                const __m256 dv = _mm256_set1_ps(d[c]);
                __m256 po[DEC_GROUPS];
#pragma GCC unroll 4
                for (int n = 0; n < DEC_GROUPS; ++n) {
                    __m256 acc = zero;
#pragma GCC unroll 4
                    for (int e = 0; e < 4; ++e) {
                        const int i = 4 * n + e;
                        s[c][i] = _mm256_fmadd_ps(vgate ? tk->g[i] : gv, s[c][i], _mm256_mul_ps(tk->k[i], dv));
                        acc = _mm256_fmadd_ps(s[c][i], tk->q[i], acc);
                    }
                    po[n] = acc;
                }
                gdn__store(a->y, a->dtype, y0 + c, dec_tree(po) * a->scale);
            }
        }
        for (int c = 0; c < nc && sout; ++c)
#pragma GCC unroll 4
            for (int n = 0; n < DEC_GROUPS; ++n) {
                __m256 o[4];
                dec_tr4(o, s[c][4 * n], s[c][4 * n + 1], s[c][4 * n + 2], s[c][4 * n + 3]);
                for (int e = 0; e < 4; ++e) _mm256_storeu_ps(sout + (j0 + c) * DEC_DK + 32 * n + 8 * e, o[e]);
            }
    }
}

/* VK layout, Dk = 128, T <= 2, and the CPU has AVX2 and FMA. */
int gdn__decode_avx2_eligible(const gdn__problem *p) {
    return p->a.state_layout == GDN_STATE_VK && p->a.Dk == DEC_DK && p->a.T <= DEC_TMAX && gdn__cpu_has_avx2_fma();
}

gdn_status gdn__delta_decode_avx2(const gdn__problem *p) {
    if (!gdn__decode_avx2_eligible(p)) return GDN_ERR_INELIGIBLE;
    dec_job job = {p};
    gdn__parallel_for(p->a.B * p->a.Hv, p->threads, dec_item, &job);
    return GDN_OK;
}
