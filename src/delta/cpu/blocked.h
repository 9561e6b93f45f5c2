/* The blocked CPU kernel, written once over a small vector vocabulary and included by each ISA's file
 * (packed_avx2.c: __m256; portable.c: GCC/Clang vectors of 8 floats).
 *
 * Work item = (sequence b, value head h, block of BLK_COLS value columns). The block's state lives in a
 * contiguous aligned buffer S[Dk][BLK_COLS] (L1-resident) for the whole window. Vectors run across value
 * columns: each vector lane is one column j and evaluates exactly the contract's scalar steps for that column,
 * including the 32-lane tree of every dot product (docs/CONTRACT.md):
 *
 *     lane l of the tree owns key rows [l*c, min(l*c + c, Dk)), c = ceil(Dk / 32): its partial accumulates
 *     ascending with fma from +0; partials merge pairwise p[l] + p[l+m], m = 1, 2, 4, 8, 16.
 *
 * The tree is static in groups of 4 lanes: each group is one straight-line subtree (blk_tree4 -> blk_tree2 ->
 * blk_lane inlined, partials in registers) and the 8 groups merge as a binary counter. With BLK_STATIC_TREES
 * defined, Dk = 32, 64, 128, 256 get passes with the rows per lane known at compile time. Each token's
 * update+readout pass is fused with the next live token's kv pass (the window's last token with its own k, the
 * extra kv unused), so every state element is loaded and stored once per token:
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
 *     blk_prefetch(p)               a cache prefetch hint for the line at p (may do nothing)
 *     blk_stream(dst, src, bytes)   memcpy for output rows (may bypass the cache); blk_stream_fence() after them
 *     blk_vloadu(p), blk_vstream(p, x)  unaligned load; aligned store that may bypass the cache
 *     blk_vstoreu(p, x)             unaligned store
 *     blk_transpose8(dst, ds, src, ss)  dst[r * ds + c] = src[c * ss + r] for r, c < 8
 *     blk_cvt_in16(dst, src, n, bf16), blk_cvt_out16(dst, src, n, bf16)  n halves (bf16: bfloat16s) to f32
 *                                   exactly as gdn__f16_to_f32 / gdn__bf16_to_f32, and f32 to them as
 *                                   gdn__f32_to_f16 / gdn__f32_to_bf16 (the same bits)
 */
#ifndef GDN_CPU_DELTA_BLOCKED_H
#define GDN_CPU_DELTA_BLOCKED_H

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "gdn_internal.h"

#define BLK_COLS (BLK_VW * BLK_NV)
#define BLK_MAX_DK 512
#define BLK_INLINE static inline __attribute__((always_inline))
/* Optional, from the including file: BLK_CLONES, attributes of the out-of-line passes (GCC target_clones: one
 * build per target, picked at load time); BLK_UNROLL, a pragma before the loops over a row's BLK_NV vectors. */
#ifndef BLK_CLONES
#define BLK_CLONES
#endif
#ifndef BLK_UNROLL
#define BLK_UNROLL
#endif
#define BLK_NOINLINE static __attribute__((noinline)) BLK_CLONES

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
    BLK_KV = 0,   /* read only: n = tree(S . kn) */
    BLK_FUSED = 1 /* S' = fma(g, S, k d); o = tree(S' . q); n = tree(S' . kn) */
};

/* Row i of the block into the partials r of its tree lane. */
BLK_INLINE void blk_row(const blk_pass *ps, int64_t i, int mode, int vgate, blk_part *r) {
    float *row = ps->S + i * BLK_COLS;
    if (mode == BLK_KV) {
        const BLK_VEC kb = blk_vbcast(ps->kn[i]);
        BLK_UNROLL
        for (int v = 0; v < BLK_NV; ++v) r->n[v] = blk_vfma(blk_vload(row + v * BLK_VW), kb, r->n[v]);
        return;
    }
    const BLK_VEC kb = blk_vbcast(ps->k[i]), qb = blk_vbcast(ps->q[i]);
    const BLK_VEC gb = vgate ? blk_vbcast(ps->gv[i]) : ps->g;
    const BLK_VEC nb = blk_vbcast(ps->kn[i]);
    BLK_UNROLL
    for (int v = 0; v < BLK_NV; ++v) {
        const BLK_VEC s = blk_vfma(gb, blk_vload(row + v * BLK_VW), blk_vmul(kb, ps->d[v]));
        blk_vstore(row + v * BLK_VW, s);
        r->o[v] = blk_vfma(s, qb, r->o[v]);
        r->n[v] = blk_vfma(s, nb, r->n[v]);
    }
}

BLK_INLINE blk_part blk_zero_part(void) {
    blk_part r;
    BLK_UNROLL
    for (int v = 0; v < BLK_NV; ++v) r.o[v] = r.n[v] = blk_vzero();
    return r;
}

/* Tree lane l: rows [l*c, l*c + cnt), ascending fma chains from +0. `full` (Dk == 32 c) makes cnt = c. */
BLK_INLINE blk_part blk_lane(const blk_pass *ps, int64_t l, int mode, int vgate, int64_t c, int full) {
    blk_part r = blk_zero_part();
    const int64_t i0 = l * c;
    int64_t cnt = c;
    if (!full) {
        cnt = ps->Dk - i0;
        cnt = cnt < 0 ? 0 : cnt > c ? c : cnt;
    }
    _Pragma("GCC unroll 8") /* c known (the static trees): the lane's rows straight-line, no loop per lane */
    for (int64_t e = 0; e < cnt; ++e) blk_row(ps, i0 + e, mode, vgate, &r);
    return r;
}

/* p[l] + p[l+m]: the lower lanes' node on the left. */
BLK_INLINE blk_part blk_add(blk_part x, blk_part y) {
    BLK_UNROLL
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

#undef BLK_LEVEL

typedef blk_part (*blk_pass_fn)(const blk_pass *ps);

/* The pass: the 32 lanes in 8 groups of 4 whose subtree is straight-line code (partials in registers); a
 * group's node merges with its pending left sibling as soon as it completes (a binary counter over the group
 * index), which is the same tree. Groups within the full lanes (rows [0, Dk / c * c)) run with cnt = c. */
BLK_INLINE blk_part blk_pass_groups(const blk_pass *ps, int mode, int vgate, int64_t c, int all_full) {
    const int64_t full_groups = all_full ? 8 : ps->Dk / c / 4;
    blk_part pending[3];
    int top = 0;
    for (int64_t gi = 0; gi < 8; ++gi) {
        blk_part r = gi < full_groups ? blk_tree4(ps, 4 * gi, mode, vgate, c, 1) : blk_tree4(ps, 4 * gi, mode, vgate, c, 0);
        for (int64_t x = gi; x & 1; x >>= 1) r = blk_add(pending[--top], r);
        pending[top++] = r;
    }
    return pending[0];
}

/* The kv pass (read only) of one shape, for a chunk's first live token. */
#define BLK_KV_FN(name, tree)                                                                                \
    BLK_NOINLINE blk_part name(const blk_pass *arg) {                                                        \
        const blk_pass local = *arg, *ps = &local;                                                           \
        return tree;                                                                                         \
    }
/* any Dk: c at run time */
BLK_KV_FN(blk_kv_any, blk_pass_groups(ps, BLK_KV, 0, ps->c, 0))
#ifdef BLK_STATIC_TREES
/* Dk = 32 c for c = 1, 2, 4, 8: c known, every lane full */
BLK_KV_FN(blk_kv_c1, blk_pass_groups(ps, BLK_KV, 0, 1, 1))
BLK_KV_FN(blk_kv_c2, blk_pass_groups(ps, BLK_KV, 0, 2, 1))
BLK_KV_FN(blk_kv_c4, blk_pass_groups(ps, BLK_KV, 0, 4, 1))
BLK_KV_FN(blk_kv_c8, blk_pass_groups(ps, BLK_KV, 0, 8, 1))
#endif

/* The kv pass for this Dk. */
static blk_pass_fn blk_kv_for(int64_t Dk) {
#ifdef BLK_STATIC_TREES
    switch (Dk) {
    case 32: return blk_kv_c1;
    case 64: return blk_kv_c2;
    case 128: return blk_kv_c4;
    case 256: return blk_kv_c8;
    default: break;
    }
#endif
    (void)Dk;
    return blk_kv_any;
}

/* Sizes of one call. A work item is (b, `nkh` consecutive key heads from hk0, group of `nb` column blocks) and
 * covers their hu = nkh * G value heads (G = Hv / Hk), unit u the member u % G of key head hk0 + u / G (value head
 * h0 + blk_rel(u): adjacent heads grouped, a stride of Hk tiled): a token's q and k rows are converted once for hu * nb
 * blocks, and per token the item touches few pages (its q, k, v and y rows are contiguous stretches when its
 * blocks cover Dv). The window runs in chunks of `tc` tokens; the next chunk's rows are prefetched meanwhile. */
typedef struct blk_job {
    const gdn__problem *p;
    int64_t blocks;  /* column blocks per value head */
    int64_t nb;      /* column blocks per value head per item */
    int64_t groups;  /* items per key-head group */
    int64_t nkh, hu; /* key heads per item; value heads per item (nkh * G) */
    int64_t tc;      /* tokens per chunk */
    int64_t hcols;   /* nb * BLK_COLS: a head's columns in the chunk buffers of v and y */
    int adjacent;    /* the item's value heads are adjacent (grouped, or G = 1): blk_rel(u) = u */
    int stream;      /* y is large: written around the caches */
    int direct_qk;   /* q and k are read in place (f32): no q, k chunk rows */
    int direct_v;    /* v is read in place (f32, whole blocks): no v chunk rows */
    int direct_y;    /* y is streamed in place (f32, whole blocks, aligned to a vector, large): no y chunk rows */
    float *ws;       /* per-worker workspace, ws_stride floats each */
    size_t ws_stride;
    /* regions of a worker's workspace, in floats; the state [hu][nb][Dk][BLK_COLS] is at 0 */
    size_t off_q, off_k;   /* [tc + 1][nkh][Dk] (k: one more token, the next chunk's first) */
    size_t off_gv, off_gk; /* vector gate: [tc + 1][hu][Dk] the gate row and g_i k_i */
    size_t off_v, off_y;   /* [tc][hu][hcols] */
    size_t off_gb;         /* [tc][hu][2]: g and beta */
    size_t off_kv;         /* [hu][nb] blk_part: each block's kv carried into the next chunk */
} blk_job;

#define BLK_STATE_FLOATS 65536 /* an item's state: 256 KB (L2; a block pair's 16 KB is what L1 holds) */
#define BLK_CHUNK_FLOATS 8192  /* a chunk's q (or k) rows: 32 KB */
#define BLK_MAX_TC 256
#define BLK_STREAM_BYTES (8.0 * 1024 * 1024) /* y at least this large goes out around the caches */
#define BLK_IL 2               /* blocks stepped in lockstep, token by token */
#define BLK_ITEMS_PER_THREAD 4 /* work items per thread, for balance */
#define BLK_STATE_AHEAD 2      /* blocks of state_in prefetched ahead of the one being read */
#define BLK_THREAD_UPDATES 4096.0 /* least state updates (Dk Dv per token and head) per thread */

static int64_t blk_min(int64_t x, int64_t y) { return x < y ? x : y; }

/* The item's first value head (that of its unit 0) for key heads from hk0, and unit u's value head from it (>= 0). */
static int64_t blk_h0(const gdn__problem *p, int64_t hk0) { return gdn__value_head(hk0, 0, p->a.Hk, p->group, p->tiled); }
static int64_t blk_rel(const blk_job *job, int64_t u) {
    const gdn__problem *p = job->p;
    return job->adjacent ? u : gdn__value_head(u / p->group, u % p->group, p->a.Hk, p->group, p->tiled) - blk_h0(p, 0);
}
static int64_t blk_max(int64_t x, int64_t y) { return x > y ? x : y; }
static size_t blk_round(size_t n) { return (n + 15) / 16 * 16; } /* floats, to 64 bytes */

/* n elements of a q/k/v tensor from idx, as f32. */
static void blk_load_row(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n) {
    if (dtype == GDN_F32) {
        memcpy(dst, (const float *)base + idx, sizeof(float) * (size_t)n);
    } else {
        blk_cvt_in16(dst, (const uint16_t *)base + idx, n, dtype == GDN_BF16);
    }
}

/* Copies an output row: through blk_stream (bypassing the caches) when `stream`, else memcpy. */
static void blk_out(void *dst, const void *src, size_t bytes, int stream) {
    if (stream)
        blk_stream(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* n f32 values into the y tensor from element idx, rounded to its dtype. */
static void blk_store_row(void *base, gdn_dtype dtype, int64_t idx, const float *src, int64_t n, int stream) {
    if (dtype == GDN_F32) {
        blk_out((float *)base + idx, src, sizeof(float) * (size_t)n, stream);
        return;
    }
    _Alignas(64) uint16_t tmp[64];
    for (int64_t i0 = 0; i0 < n; i0 += 64) {
        const int64_t m = blk_min(64, n - i0);
        blk_cvt_out16(tmp, src + i0, m, dtype == GDN_BF16);
        blk_out((uint16_t *)base + idx + i0, tmp, sizeof(uint16_t) * (size_t)m, stream);
    }
}

/* The next chunk's rows, prefetched token by token, spread evenly over the steps of the current chunk. A
 * token's rows are `nseg` segments: segment s of token t is bytes[s] bytes from base[s] + t * stride[s]. */
typedef struct blk_prefetcher {
    const char *base[8];
    int64_t stride[8], bytes[8];
    int nseg;
    int64_t t0, ntok; /* the tokens to prefetch */
    int64_t done;     /* tokens prefetched so far */
} blk_prefetcher;

static void blk_pf_segment(blk_prefetcher *pf, const void *base, int64_t stride, int64_t bytes) {
    pf->base[pf->nseg] = base;
    pf->stride[pf->nseg] = stride;
    pf->bytes[pf->nseg++] = bytes;
}

/* Prefetches the tokens due after `step` of `steps`. Inlined: GCC takes an out-of-line function made only of
 * prefetches for const and drops its calls. */
BLK_INLINE void blk_pf_step(blk_prefetcher *pf, int64_t step, int64_t steps) {
    for (const int64_t due = pf->ntok * (step + 1) / steps; pf->done < due; ++pf->done)
        for (int sg = 0; sg < pf->nseg; ++sg) {
            const uintptr_t p = (uintptr_t)(pf->base[sg] + (pf->t0 + pf->done) * pf->stride[sg]);
            for (uintptr_t line = p & ~(uintptr_t)63; line < p + (uintptr_t)pf->bytes[sg]; line += 64)
                blk_prefetch((const char *)line);
        }
}

/* Prefetches a block's part of state_in (b, h, :, j0 .. j0+BLK_COLS-1): one stretch of columns (VK) or a piece
 * of each key row (KV). */
static void blk_state_prefetch(const gdn_delta_args *a, int64_t b, int64_t h, int64_t j0) {
    const int64_t Dk = a->Dk, Dv = a->Dv, ncols = blk_min(BLK_COLS, Dv - j0);
    const float *base = a->state_in + (b * a->Hv + h) * Dk * Dv;
    if (a->state_layout == GDN_STATE_KV) {
        for (int64_t i = 0; i < Dk; ++i) {
            const uintptr_t p = (uintptr_t)(base + i * Dv + j0);
            for (uintptr_t line = p & ~(uintptr_t)63; line < p + sizeof(float) * (uintptr_t)ncols; line += 64)
                blk_prefetch((const char *)line);
        }
    } else {
        const uintptr_t p = (uintptr_t)(base + j0 * Dk);
        for (uintptr_t line = p & ~(uintptr_t)63; line < p + sizeof(float) * (uintptr_t)(ncols * Dk); line += 64)
            blk_prefetch((const char *)line);
    }
}

/* A block's state Sb[Dk][BLK_COLS] from state_in (b, h, :, j0 .. j0+BLK_COLS-1); zero past Dv, and all zero
 * without state_in. */
BLK_INLINE void blk_state_in(const gdn_delta_args *a, int64_t b, int64_t h, int64_t j0, float *Sb) {
    const int64_t Dk = a->Dk, Dv = a->Dv, ncols = blk_min(BLK_COLS, Dv - j0);
    if (!a->state_in || ncols < BLK_COLS) memset(Sb, 0, sizeof(float) * (size_t)(Dk * BLK_COLS));
    if (!a->state_in) return;
    const float *base = a->state_in + (b * a->Hv + h) * Dk * Dv;
    if (a->state_layout == GDN_STATE_KV && ncols == BLK_COLS) {
        /* [Dk][Dv]: the block is a contiguous piece of each key row, BLK_NV vectors */
        for (int64_t i = 0; i < Dk; ++i)
            for (int v = 0; v < BLK_NV; ++v) blk_vstore(Sb + i * BLK_COLS + v * BLK_VW, blk_vloadu(base + i * Dv + j0 + v * BLK_VW));
    } else if (a->state_layout == GDN_STATE_KV) {
        for (int64_t i = 0; i < Dk; ++i) memcpy(Sb + i * BLK_COLS, base + i * Dv + j0, sizeof(float) * (size_t)ncols);
    } else if (ncols == BLK_COLS && Dk % 8 == 0) {
        /* [Dv][Dk]: each column's keys are contiguous; 8 x 8 tiles transposed */
        for (int64_t jj = 0; jj < BLK_COLS; jj += 8)
            for (int64_t i = 0; i < Dk; i += 8) blk_transpose8(Sb + i * BLK_COLS + jj, BLK_COLS, base + (j0 + jj) * Dk + i, Dk);
    } else {
        for (int64_t jj = 0; jj < ncols; ++jj) {
            const float *col = base + (j0 + jj) * Dk;
            for (int64_t i = 0; i < Dk; ++i) Sb[i * BLK_COLS + jj] = col[i];
        }
    }
}

/* The real columns of a block's state Sb into state_out (b, h, :, j0 ..). */
BLK_INLINE void blk_state_out(const gdn_delta_args *a, int64_t b, int64_t h, int64_t j0, const float *Sb) {
    const int64_t Dk = a->Dk, Dv = a->Dv, ncols = blk_min(BLK_COLS, Dv - j0);
    float *base = a->state_out + (b * a->Hv + h) * Dk * Dv;
    if (a->state_layout == GDN_STATE_KV && ncols == BLK_COLS) {
        for (int64_t i = 0; i < Dk; ++i)
            for (int v = 0; v < BLK_NV; ++v) blk_vstoreu(base + i * Dv + j0 + v * BLK_VW, blk_vload(Sb + i * BLK_COLS + v * BLK_VW));
    } else if (a->state_layout == GDN_STATE_KV) {
        for (int64_t i = 0; i < Dk; ++i) memcpy(base + i * Dv + j0, Sb + i * BLK_COLS, sizeof(float) * (size_t)ncols);
    } else if (ncols == BLK_COLS && Dk % 8 == 0) {
        for (int64_t jj = 0; jj < BLK_COLS; jj += 8)
            for (int64_t i = 0; i < Dk; i += 8) blk_transpose8(base + (j0 + jj) * Dk + i, Dk, Sb + i * BLK_COLS + jj, BLK_COLS);
    } else {
        for (int64_t jj = 0; jj < ncols; ++jj) {
            float *col = base + (j0 + jj) * Dk;
            for (int64_t i = 0; i < Dk; ++i) col[i] = Sb[i * BLK_COLS + jj];
        }
    }
}

/* A chunk's n live tokens: the q and k rows of the item's first key head as f32 (in the input, or converted in
 * the workspace; the next key heads' rows follow them) and the element offset of their v and y rows for the
 * item (value head h0, column c0); and the k row of the next chunk's first live token. */
typedef struct blk_rows {
    const float *q[BLK_MAX_TC], *k[BLK_MAX_TC + 1]; /* k[n]: the next chunk's first live token, if any */
    int64_t vy[BLK_MAX_TC];
} blk_rows;

/* Where one block of an item is: value head hu of the item (0 .. hu-1), column block lb of the item. */
typedef struct blk_unit {
    int64_t hu, lb;
} blk_unit;

/* Blocks un[0 .. m-1] (m <= BLK_IL) of an item through the chunk's n live tokens, in lockstep: each token,
 * every block runs its pass, so a block's delta never waits on the pass just issued. These are steps step0 ..
 * step0 + n - 1 of the chunk's `steps`, over which pf prefetches the next chunk. The pass is inlined (rows per
 * lane c, all lanes full or not, gate kind: compile-time in each instance below); the last token of the window
 * runs it too, with its own k as the next key (that kv is never used). */
BLK_INLINE void blk_steps(const blk_job *job, float *ws, const blk_unit *un, int64_t m, const blk_rows *rows,
                          int64_t n, int carried, int more, blk_prefetcher *pf, int64_t step0, int64_t steps, int64_t c,
                          int full, int vgate) {
    const gdn_delta_args *a = &job->p->a;
    const int64_t Dk = a->Dk, G = job->p->group, H = job->hu, vstride = H * job->hcols;
    const float *gvc = ws + job->off_gv, *gkc = ws + job->off_gk, *vc = ws + job->off_v, *gbc = ws + job->off_gb;
    float *yc = ws + job->off_y;
    blk_part *kv_carry = (blk_part *)(void *)(ws + job->off_kv);
    const BLK_VEC scale = blk_vbcast(a->scale);
    blk_part kv[BLK_IL];
    float *S[BLK_IL];
    int64_t col[BLK_IL];  /* the block's columns in a token's v and y chunk rows */
    int64_t kofs[BLK_IL]; /* its key head's q, k rows in a token's rows (kh * Dk) */
    int64_t vofs[BLK_IL]; /* its v, y elements from a token's vy offset */
    for (int64_t s = 0; s < m; ++s) {
        /* kv of the chunk's first live token: carried from the previous chunk's last pass, or tree(S . k)
         * (vector gate: . g k) */
        const int64_t unit = un[s].hu * job->nb + un[s].lb;
        col[s] = un[s].hu * job->hcols + un[s].lb * BLK_COLS;
        kofs[s] = un[s].hu / G * Dk;
        vofs[s] = blk_rel(job, un[s].hu) * a->Dv + un[s].lb * BLK_COLS;
        S[s] = ws + unit * Dk * BLK_COLS;
        if (carried) {
            kv[s] = kv_carry[unit];
        } else {
            blk_pass P;
            memset(&P, 0, sizeof P);
            P.S = S[s];
            P.Dk = Dk;
            P.c = c;
            P.kn = vgate ? gkc + un[s].hu * Dk : rows->k[0] + un[s].hu / G * Dk;
            kv[s] = blk_kv_for(Dk)(&P);
        }
    }
    for (int64_t u = 0; u < n; ++u) {
        const int64_t u_next = u + 1 == n && !more ? u : u + 1; /* n: the next chunk's */
        blk_pf_step(pf, step0 + u, steps);
        for (int64_t s = 0; s < m; ++s) {
            const int64_t hu = un[s].hu, io = rows->vy[u] + vofs[s];
            const float *gb = gbc + (u * H + hu) * 2;
            blk_pass P;
            P.S = S[s];
            P.Dk = Dk;
            P.c = c;
            P.gv = gvc + (u * H + hu) * Dk;
            P.k = rows->k[u] + kofs[s];
            P.q = rows->q[u] + kofs[s];
            P.kn = vgate ? gkc + (u_next * H + hu) * Dk : rows->k[u_next] + kofs[s];
            P.g = blk_vbcast(gb[0]);
            /* this block's v two tokens ahead */
            if (job->direct_v && u + 2 < n) blk_prefetch((const float *)a->v + rows->vy[u + 2] + vofs[s]);
            /* d = (v - g kv) beta (vector gate: (v - kv) beta) */
            const BLK_VEC beta = blk_vbcast(gb[1]);
            BLK_UNROLL
            for (int v = 0; v < BLK_NV; ++v) {
                const BLK_VEC vv = job->direct_v ? blk_vloadu((const float *)a->v + io + v * BLK_VW)
                                                 : blk_vload(vc + u * vstride + col[s] + v * BLK_VW);
                P.d[v] = blk_vmul(blk_vsub(vv, vgate ? kv[s].n[v] : blk_vmul(P.g, kv[s].n[v])), beta);
            }
            /* update and readout of this token, fused with the kv of the next live token */
            kv[s] = blk_pass_groups(&P, BLK_FUSED, vgate, c, full);
            /* y = tree(S' . q) * scale, into y or the chunk's y rows */
            BLK_UNROLL
            for (int v = 0; v < BLK_NV; ++v) {
                const BLK_VEC y = blk_vmul(kv[s].o[v], scale);
                if (job->direct_y)
                    blk_vstream((float *)a->y + io + v * BLK_VW, y);
                else
                    blk_vstore(yc + u * vstride + col[s] + v * BLK_VW, y);
            }
        }
    }
    for (int64_t s = 0; s < m; ++s) kv_carry[un[s].hu * job->nb + un[s].lb] = kv[s];
}

typedef void (*blk_steps_fn)(const blk_job *job, float *ws, const blk_unit *un, int64_t m, const blk_rows *rows,
                             int64_t n, int carried, int more, blk_prefetcher *pf, int64_t step0, int64_t steps);
#define BLK_STEPS_FN(name, c, full, vgate)                                                                   \
    BLK_NOINLINE void name(const blk_job *job, float *ws, const blk_unit *un, int64_t m, const blk_rows *rows, \
                           int64_t n, int carried, int more, blk_prefetcher *pf, int64_t step0, int64_t steps) {  \
        blk_steps(job, ws, un, m, rows, n, carried, more, pf, step0, steps, c, full, vgate);                 \
    }
/* any Dk: c at run time */
BLK_STEPS_FN(blk_steps_any, job->p->dk_lane, 0, 0)
BLK_STEPS_FN(blk_stepsv_any, job->p->dk_lane, 0, 1)
#ifdef BLK_STATIC_TREES
BLK_STEPS_FN(blk_steps_c1, 1, 1, 0)
BLK_STEPS_FN(blk_stepsv_c1, 1, 1, 1)
BLK_STEPS_FN(blk_steps_c2, 2, 1, 0)
BLK_STEPS_FN(blk_stepsv_c2, 2, 1, 1)
BLK_STEPS_FN(blk_steps_c4, 4, 1, 0)
BLK_STEPS_FN(blk_stepsv_c4, 4, 1, 1)
BLK_STEPS_FN(blk_steps_c8, 8, 1, 0)
BLK_STEPS_FN(blk_stepsv_c8, 8, 1, 1)
#endif

/* The steps for this Dk and gate kind. */
static blk_steps_fn blk_steps_for(int64_t Dk, int vgate) {
#ifdef BLK_STATIC_TREES
    switch (Dk) {
    case 32: return vgate ? blk_stepsv_c1 : blk_steps_c1;
    case 64: return vgate ? blk_stepsv_c2 : blk_steps_c2;
    case 128: return vgate ? blk_stepsv_c4 : blk_steps_c4;
    case 256: return vgate ? blk_stepsv_c8 : blk_steps_c8;
    default: break;
    }
#endif
    (void)Dk;
    return vgate ? blk_stepsv_any : blk_steps_any;
}

/* Blocks x0 .. x1-1 of an item (x = hu * nblk + blk: value head h0 + blk_rel(hu), columns c0 + blk * BLK_COLS) from
 * state_in into the item's state S, each one prefetched BLK_STATE_AHEAD blocks before it is read (*pfx: blocks
 * prefetched so far). */
BLK_NOINLINE void blk_blocks_in(const blk_job *job, int64_t b, int64_t h0, int64_t c0, int64_t nblk, float *S, int64_t x0,
                                int64_t x1, int64_t *pfx) {
    const gdn_delta_args *a = &job->p->a;
    const int64_t total = (job->hu) * nblk, Dk = a->Dk;
    for (int64_t x = x0; x < x1; ++x) {
        for (; a->state_in && *pfx < blk_min(x + BLK_STATE_AHEAD + 1, total); ++*pfx)
            blk_state_prefetch(a, b, h0 + blk_rel(job, *pfx / nblk), c0 + *pfx % nblk * BLK_COLS);
        const int64_t hu = x / nblk, blk = x % nblk;
        blk_state_in(a, b, h0 + blk_rel(job, hu), c0 + blk * BLK_COLS, S + (hu * job->nb + blk) * Dk * BLK_COLS);
    }
}

/* Blocks x0 .. x1-1 of an item out to state_out (if any). */
BLK_NOINLINE void blk_blocks_out(const blk_job *job, int64_t b, int64_t h0, int64_t c0, int64_t nblk, const float *S,
                                 int64_t x0, int64_t x1) {
    const gdn_delta_args *a = &job->p->a;
    for (int64_t x = x0; x < x1 && a->state_out; ++x) {
        const int64_t hu = x / nblk, blk = x % nblk;
        blk_state_out(a, b, h0 + blk_rel(job, hu), c0 + blk * BLK_COLS, S + (hu * job->nb + blk) * a->Dk * BLK_COLS);
    }
}

/* One work item: (b, key heads hk0 .. hk0+nkh-1, a group of column blocks) for their value heads h0 + blk_rel(u),
 * u < hu, over the whole window. */
static void blk_item(void *ctx, int64_t item, int worker) {
    const blk_job *job = ctx;
    const gdn__problem *p = job->p;
    const gdn_delta_args *a = &p->a;
    const int64_t G = p->group, H = job->hu, nkh = job->nkh, grp = item % job->groups, bk = item / job->groups;
    const int64_t b = bk / (a->Hk / nkh), hk0 = bk % (a->Hk / nkh) * nkh;
    const int64_t Dk = a->Dk, Dv = a->Dv, T = a->T, h0 = blk_h0(p, hk0), hcols = job->hcols, vstride = H * hcols;
    const int64_t blk0 = grp * job->nb, nblk = blk_min(job->nb, job->blocks - blk0);
    const int64_t c0 = blk0 * BLK_COLS, gcols = blk_min(nblk * BLK_COLS, Dv - c0);
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    const blk_steps_fn steps_fn = blk_steps_for(Dk, vgate);
    float *ws = job->ws + (size_t)worker * job->ws_stride, *S = ws;
    float *qc = ws + job->off_q, *kc = ws + job->off_k, *gvc = ws + job->off_gv, *gkc = ws + job->off_gk;
    float *vc = ws + job->off_v, *yc = ws + job->off_y, *gbc = ws + job->off_gb;
    int64_t live[BLK_MAX_TC];
    blk_rows rows;
    int carried = 0;    /* the blocks' kv of the next live token was computed by the previous chunk */
    int state_done = 0; /* the blocks' states went out pair by pair */
    /* what a token of the next chunk reads: q, k rows of the key heads; v of the value heads (one stretch when
     * the item covers Dv); their gate rows (vector gate) */
    blk_prefetcher pf;
    memset(&pf, 0, sizeof pf);
    {
        const int64_t ds = (int64_t)p->dtype_size, qk0 = (b * T * a->Hk + hk0) * Dk * ds;
        const int64_t v0 = ((b * T * a->Hv + h0) * Dv + c0) * ds;
        blk_pf_segment(&pf, (const char *)a->q + qk0, a->Hk * Dk * ds, nkh * Dk * ds);
        blk_pf_segment(&pf, (const char *)a->k + qk0, a->Hk * Dk * ds, nkh * Dk * ds);
        if (gcols == Dv && job->adjacent)
            blk_pf_segment(&pf, (const char *)a->v + v0, a->Hv * Dv * ds, H * Dv * ds);
        else
            for (int64_t hu = 0; hu < H && pf.nseg < 7; ++hu)
                blk_pf_segment(&pf, (const char *)a->v + v0 + blk_rel(job, hu) * Dv * ds, a->Hv * Dv * ds, gcols * ds);
        if (vgate && job->adjacent)
            blk_pf_segment(&pf, (const char *)(a->gate + (b * T * a->Hv + h0) * Dk), a->Hv * Dk * 4, H * Dk * 4);
    }

    /* The item's blocks in: all of them now, or (a window of one chunk) each pair just before its steps, and
     * out right after them, so the state streams through while the blocks compute. */
    const int64_t units = H * nblk;
    const int per_pair = T <= job->tc;
    int64_t pfx = 0; /* blocks of state_in prefetched so far */
    if (!per_pair) blk_blocks_in(job, b, h0, c0, nblk, S, 0, units, &pfx);

    for (int64_t t0 = 0; t0 < T; t0 += job->tc) {
        /* the chunk's live tokens: q, k rows as f32; per value head: the gate row and g k (vector gate), v of
         * the item's columns (zero past Dv), g and beta. Masked tokens get y = 0. */
        const int64_t t1 = blk_min(T, t0 + job->tc);
        int64_t n = 0;
        for (int64_t t = t0; t < t1; ++t) {
            if (!gdn__token_live(a, b, t)) {
                for (int64_t hu = 0; hu < H; ++hu)
                    for (int64_t j = 0; j < gcols; ++j)
                        gdn__store(a->y, a->dtype, ((b * T + t) * a->Hv + h0 + blk_rel(job, hu)) * Dv + c0 + j, 0.0f);
                continue;
            }
            const int64_t qk_row = ((b * T + t) * a->Hk + hk0) * Dk;
            rows.q[n] = (const float *)a->q + qk_row;
            rows.k[n] = (const float *)a->k + qk_row;
            rows.vy[n] = ((b * T + t) * a->Hv + h0) * Dv + c0;
            if (!job->direct_qk) {
                blk_load_row(qc + n * nkh * Dk, a->q, a->dtype, qk_row, nkh * Dk);
                blk_load_row(kc + n * nkh * Dk, a->k, a->dtype, qk_row, nkh * Dk);
                rows.q[n] = qc + n * nkh * Dk;
                rows.k[n] = kc + n * nkh * Dk;
            }
            for (int64_t hu = 0; hu < H; ++hu) {
                const int64_t h = h0 + blk_rel(job, hu);
                float *vr = vc + n * vstride + hu * hcols;
                if (!job->direct_v) {
                    blk_load_row(vr, a->v, a->dtype, ((b * T + t) * a->Hv + h) * Dv + c0, gcols);
                    for (int64_t j = gcols; j < nblk * BLK_COLS; ++j) vr[j] = 0.0f;
                }
                if (vgate) {
                    const float *gv = a->gate + ((b * T + t) * a->Hv + h) * Dk, *k = rows.k[n] + hu / G * Dk;
                    float *gvr = gvc + (n * H + hu) * Dk, *gkr = gkc + (n * H + hu) * Dk;
                    for (int64_t i = 0; i < Dk; ++i) {
                        gvr[i] = gv[i];
                        gkr[i] = gv[i] * k[i];
                    }
                }
                gbc[(n * H + hu) * 2] = vgate ? 0.0f : gdn__scalar_gate(a, b, t, h);
                gbc[(n * H + hu) * 2 + 1] = gdn__beta(a, b, t, h);
            }
            live[n++] = t;
        }
        if (n == 0) {
            if (per_pair) blk_blocks_in(job, b, h0, c0, nblk, S, 0, units, &pfx);
            continue;
        }
        /* the next chunk's first live token: its k row (vector gate: g k per value head) ends this chunk's last
         * pass, whose kv the next chunk starts from */
        int64_t tn = t1;
        while (tn < T && !gdn__token_live(a, b, tn)) ++tn;
        const int more = tn < T;
        if (more) {
            const int64_t qk_row = ((b * T + tn) * a->Hk + hk0) * Dk;
            rows.k[n] = (const float *)a->k + qk_row;
            if (!job->direct_qk) {
                blk_load_row(kc + n * nkh * Dk, a->k, a->dtype, qk_row, nkh * Dk);
                rows.k[n] = kc + n * nkh * Dk;
            }
            for (int64_t hu = 0; hu < H && vgate; ++hu) {
                const float *gv = a->gate + ((b * T + tn) * a->Hv + h0 + blk_rel(job, hu)) * Dk, *k = rows.k[n] + hu / G * Dk;
                float *gkr = gkc + (n * H + hu) * Dk;
                for (int64_t i = 0; i < Dk; ++i) gkr[i] = gv[i] * k[i];
            }
        }
        /* the item's hu * nblk blocks, BLK_IL at a time, while the next chunk's rows are prefetched */
        const int64_t ngroups = (units + BLK_IL - 1) / BLK_IL;
        pf.t0 = t1;
        pf.ntok = blk_min(job->tc, T - t1);
        pf.done = 0;
        for (int64_t x = 0; x < units; x += BLK_IL) {
            blk_unit un[BLK_IL];
            const int64_t m = blk_min(BLK_IL, units - x);
            for (int64_t s = 0; s < m; ++s) un[s] = (blk_unit){(x + s) / nblk, (x + s) % nblk};
            if (per_pair) blk_blocks_in(job, b, h0, c0, nblk, S, x, x + m, &pfx);
            steps_fn(job, ws, un, m, &rows, n, carried, more, &pf, x / BLK_IL * n, ngroups * n);
            if (per_pair) blk_blocks_out(job, b, h0, c0, nblk, S, x, x + m);
            state_done |= per_pair;
        }
        carried = more;
        /* the chunk's y rows out, rounded to the dtype */
        for (int64_t u = 0; u < n && !job->direct_y; ++u) {
            const int64_t y_row = ((b * T + live[u]) * a->Hv + h0) * Dv + c0;
            if (gcols == hcols && gcols == Dv && job->adjacent) /* the item's heads: one stretch of y and of the row */
                blk_store_row(a->y, a->dtype, y_row, yc + u * vstride, H * Dv, job->stream);
            else
                for (int64_t hu = 0; hu < H; ++hu)
                    blk_store_row(a->y, a->dtype, y_row + blk_rel(job, hu) * Dv, yc + u * vstride + hu * hcols, gcols, job->stream);
        }
    }
    if (job->stream) blk_stream_fence();

    if (!state_done) blk_blocks_out(job, b, h0, c0, nblk, S, 0, units);
}

/* The call's plan into *job and the threads it runs on; the bytes of its workspace (per worker: an item's state and
 * a chunk's rows), or -1 when they cannot be counted (or Dk is too large). */
static int64_t blk_plan(const gdn__problem *p, blk_job *job_out, int *threads_out) {
    const gdn_delta_args *a = &p->a;
    if (a->Dk > BLK_MAX_DK) return -1;
    const int64_t G = p->group, Dk = a->Dk;
    const int vgate = a->gate_kind == GDN_GATE_VECTOR;
    blk_job job;
    memset(&job, 0, sizeof job);
    job.p = p;
    job.blocks = (a->Dv + BLK_COLS - 1) / BLK_COLS;
    /* At least BLK_ITEMS_PER_THREAD items per thread when possible: with many key heads an item takes the
     * largest divisor nkh of Hk that keeps enough items (and its state within BLK_STATE_FLOATS); with few, the
     * columns split into groups of nb blocks. */
    /* threads: as many as give each at least BLK_THREAD_UPDATES state updates (waking a pool thread costs more
     * than a small call's work) */
    const double updates = (double)a->B * (double)a->T * (double)a->Hv * (double)Dk * (double)a->Dv;
    int threads = p->threads; /* an engine's runner picks its own threads: scratch for all of its worker ids */
    while (!p->a.cpu_runner && threads > 1 && updates < (double)threads * BLK_THREAD_UPDATES) --threads;
    const int64_t want_items = BLK_ITEMS_PER_THREAD * (int64_t)threads, keyheads = a->B * a->Hk;
    job.nkh = 1;
    for (int64_t d = 2; d <= a->Hk; ++d)
        if (a->Hk % d == 0 && keyheads / d >= want_items && d * G * job.blocks * Dk * BLK_COLS <= BLK_STATE_FLOATS)
            job.nkh = d;
    job.hu = job.nkh * G;
    job.nb = blk_max(1, blk_min(job.blocks, BLK_STATE_FLOATS / (job.hu * Dk * BLK_COLS)));
    const int64_t items = keyheads / job.nkh, want = (want_items + items - 1) / items;
    if (want > 1) job.nb = blk_max(1, blk_min(job.nb, (job.blocks + want - 1) / want));
    job.groups = (job.blocks + job.nb - 1) / job.nb;
    job.hcols = job.nb * BLK_COLS;
    job.adjacent = !p->tiled || G == 1;
    job.stream = (double)a->B * (double)a->T * (double)a->Hv * (double)a->Dv * (double)p->dtype_size >= BLK_STREAM_BYTES;
    job.direct_qk = a->dtype == GDN_F32;
    job.direct_v = a->dtype == GDN_F32 && a->Dv % BLK_COLS == 0;
    job.direct_y = job.direct_v && job.stream && (uintptr_t)a->y % (sizeof(float) * BLK_VW) == 0; /* blk_vstream */
    /* tokens per chunk: q, k rows within BLK_CHUNK_FLOATS each, v and y chunk rows (and vector gate rows) too */
    int64_t tc = blk_min(BLK_MAX_TC, blk_min(a->T, BLK_CHUNK_FLOATS / Dk));
    if (!job.direct_qk) tc = blk_min(tc, BLK_CHUNK_FLOATS / (job.nkh * Dk));
    if (!job.direct_v || !job.direct_y) tc = blk_min(tc, BLK_CHUNK_FLOATS / (job.hu * job.hcols));
    if (vgate) tc = blk_min(tc, BLK_CHUNK_FLOATS / (job.hu * Dk));
    job.tc = blk_max(1, tc);

    const size_t state = blk_round((size_t)(job.hu * job.nb * Dk * BLK_COLS));
    const size_t rows = job.direct_qk ? 0 : blk_round((size_t)((job.tc + 1) * job.nkh * Dk));
    const size_t grows = vgate ? blk_round((size_t)((job.tc + 1) * job.hu * Dk)) : 0;
    const size_t vrows = blk_round((size_t)(job.tc * job.hu * job.hcols));
    const size_t vbuf = job.direct_v ? 0 : vrows, ybuf = job.direct_y ? 0 : vrows;
    job.off_q = state;
    job.off_k = job.off_q + rows;
    job.off_gv = job.off_k + rows;
    job.off_gk = job.off_gv + grows;
    job.off_v = job.off_gk + grows;
    job.off_y = job.off_v + vbuf;
    job.off_gb = job.off_y + ybuf;
    job.off_kv = job.off_gb + blk_round((size_t)(job.tc * job.hu * 2));
    job.ws_stride = job.off_kv + (size_t)(job.hu * job.nb) * (sizeof(blk_part) / sizeof(float));
    int64_t ws_bytes = 0;
    if (!gdn__size_mul((int64_t)job.ws_stride, (int64_t)sizeof(float) * threads, &ws_bytes) || !gdn__size_fits(ws_bytes))
        return -1;
    *job_out = job;
    *threads_out = threads;
    return ws_bytes;
}

/* The workspace of the call's plan (blk_plan). */
static int64_t blk_workspace(const gdn__problem *p) {
    blk_job job;
    int threads = 0;
    return blk_plan(p, &job, &threads);
}

/* The kernel, in the call's workspace p->ws. */
static gdn_status blk_run(const gdn__problem *p) {
    blk_job job;
    int threads = 0;
    if (p->a.Dk > BLK_MAX_DK) return GDN_ERR_INELIGIBLE;
    const int64_t ws_bytes = blk_plan(p, &job, &threads);
    if (ws_bytes < 0 || !p->ws || p->ws_bytes < ws_bytes) return GDN_ERR_OUT_OF_MEMORY;
    job.ws = p->ws;
    gdn__parallel_for(p, p->a.B * p->a.Hk / job.nkh * job.groups, threads, blk_item, &job);
    return GDN_OK;
}

#endif
