/* cuda_chunked: the chunked (WY) prefill on the tensor cores, under the second contract (docs/CONTRACT.md,
 * "The chunked contract"): deterministic, batch- and split-invariant, checked against float64, not bitwise to ref.
 *
 * Per sequence, value head h, chunk of C = 64 tokens (local i, j; n live), state S0 [Dk, Dv] at the chunk's start:
 *     l_i   = log g_i in binary64 (masked or absent tokens: 0, beta 0); a -inf starts a segment
 *     r_i   = sum of l over the token's segment up to i (binary64)
 *     d_ij  = exp(r_i - r_j) when i, j share a segment (j <= i), else 0;  G_i = d_i,start;  e_j = d_{n-1}j
 *     L     = strictly lower, L_ij = beta_i d_ij (k_i . k_j);  A = (I + L)^-1 diag(beta)
 *     U     = A (V - diag(G) K S0)                                   [C, Dv]  (the chunk's delta values)
 *     y_i   = scale (G_i q_i S0 + sum_{j<=i} d_ij (q_i . k_j) u_j)
 *     S     = G_{n-1} S0 + K^T diag(e) U
 * which is the recurrence of gdn.h token by token (decay, delta, write), regrouped. Two kernels a launch:
 *   gdn_chunk_prep  one block per (chunk, head), all chunks at once: the segment sums, K K^T and Q K^T, the
 *                   unit-lower solve of A by 16 x 16 blocks (the diagonal ones by binary32 substitution, the rest
 *                   on the tensor cores); A and P = d (q k^T) as bf16 hi + lo planes (their blocks on and left of
 *                   the diagonal), and the gate vectors, into a workspace.
 *   gdn_chunk_scan  one block per (sequence, head, 32 value columns), the chunks in order: K S0 and Q S0, U = A X,
 *                   P U and K^T diag(e) U on the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate); the
 *                   state stays in f32 registers and enters the products as bf16 hi + lo (16 bits), as X and U do.
 *                   16 warps and two stages (one block an SM) where the grid fits the SMs; beyond, 8 warps (each a
 *                   row and a state warp) and one stage refilled piece by piece, two blocks an SM: the same products
 *                   in the same order, so the same bits.
 * bf16 inputs enter the products exactly; f16 ones as bf16 hi + lo. Dk = 128, Dv a multiple of 32. */
#include <math.h>

#include <type_traits>

#include "core/checked.h"
#include "cuda/gdn_cuda.cuh"

namespace {

constexpr int CH = 64;            /* tokens per chunk */
constexpr int DK = 128;           /* key dimension */
constexpr int NS = 32;            /* value columns per scan block */
constexpr int LDK = DK + 8;       /* u16 row stride of the q and k tiles (conflict-free fragment loads) */
constexpr int LDC = CH + 8;       /* u16 row stride of the 64-wide tiles */
constexpr int LDV = NS + 8;       /* u16 row stride of the v slice */
constexpr int PREP_THREADS = 128; /* 4 warps: a 16-row strip of K K^T each */
constexpr int LP_PLANE = CH * CH / 2 + 4; /* floats of one parity plane of L (4 more: the planes' banks differ) */
static_assert(sizeof(float) * 2 * LP_PLANE <= sizeof(uint16_t) * CH * (DK + 8), "L fits in the q tile");
constexpr int SCAN_THREADS = 512; /* 16 warps */
constexpr int SEQS = 128;         /* sequences per launch (their table travels in the parameters) */

/* A chunk's gate vectors as the scan reads them (binary64 segment sums, G, e, segment numbers). */
struct chunk_gates {
    double r[CH];
    float G[CH], e[CH];
    int seg[CH];
};
constexpr size_t PLANE = CH * CH * 2;                          /* one bf16 [C, C] plane */
constexpr size_t WS_BYTES = 4 * PLANE + sizeof(chunk_gates);   /* per (chunk, head): A hi, lo; P hi, lo; gates */
static_assert(WS_BYTES % 16 == 0, "16-byte pieces");

/* The sequences of one launch: sequence b is tokens t0[b] .. t0[b] + len[b] - 1 of the packed tensors, its
 * chunks chunk0[b] .. chunk0[b + 1] - 1 of the workspace, its state entry slot[b] of the pools. */
struct chunk_seqs {
    int n;
    int32_t chunk0[SEQS + 1], len[SEQS], slot[SEQS];
    int64_t t0[SEQS];
};

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronously; bytes = 0 fills zeros (src must still be a valid address). */
__device__ __forceinline__ void cp16(void *dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ uint16_t bf16_rn(float x) {
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(x));
    return h;
}
__device__ __forceinline__ uint16_t f16_rn(float x) {
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(x));
    return h;
}
__device__ __forceinline__ float f16_f32(uint16_t h) {
    float x;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(x) : "h"(h));
    return x;
}
__device__ __forceinline__ float bf16_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

template <int DT>
__device__ __forceinline__ float in_f32(uint16_t h) { return DT == GDN_BF16 ? bf16_f32(h) : f16_f32(h); }

/* x = hi + lo to 16 bits: hi = bf16(x), lo = bf16(x - hi). */
__device__ __forceinline__ void split(float x, uint16_t &hi, uint16_t &lo) {
    hi = bf16_rn(x);
    lo = bf16_rn(__fsub_rn(x, bf16_f32(hi)));
}

__device__ __forceinline__ uint32_t pack(uint16_t lo_half, uint16_t hi_half) {
    return (uint32_t)lo_half | ((uint32_t)hi_half << 16);
}

/* A pair x0, x1 as packed bf16 hi + lo (x0 in the low halves): split() of each, two at a time. */
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(x1), "f"(x0));
    const float h0 = __uint_as_float(hi << 16), h1 = __uint_as_float(hi & 0xffff0000u);
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(__fsub_rn(x1, h1)), "f"(__fsub_rn(x0, h0)));
}

/* A pair of input elements (dtype DT) as the bf16 operand pair: exact for bf16 (lo unused), hi + lo for f16. */
template <int DT>
__device__ __forceinline__ void in_pair(uint32_t raw, uint32_t &hi, uint32_t &lo) {
    if (DT == GDN_BF16) {
        hi = raw, lo = 0;
        return;
    }
    split2(f16_f32((uint16_t)raw), f16_f32((uint16_t)(raw >> 16)), hi, lo);
}

/* D += A B, m16n8k16, bf16 operands, f32 accumulators. */
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t ld32(const uint16_t *p) { return *(const uint32_t *)p; }

/* Fragments (lane = 4 g + t). A: rows m0 + g, m0 + g + 8, columns k0 + 2t (+1), k0 + 2t + 8 (+1) of a row-major
 * tile; B: column n0 + g, rows k0 + 2t (+1), k0 + 2t + 8 (+1) of a tile stored [n][k]. */
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const uint16_t *m, int ld, int m0, int k0, int g, int t) {
    a[0] = ld32(m + (m0 + g) * ld + k0 + 2 * t);
    a[1] = ld32(m + (m0 + g + 8) * ld + k0 + 2 * t);
    a[2] = ld32(m + (m0 + g) * ld + k0 + 2 * t + 8);
    a[3] = ld32(m + (m0 + g + 8) * ld + k0 + 2 * t + 8);
}
__device__ __forceinline__ void frag_b(uint32_t (&b)[2], const uint16_t *m, int ld, int n0, int k0, int g, int t) {
    b[0] = ld32(m + (n0 + g) * ld + k0 + 2 * t);
    b[1] = ld32(m + (n0 + g) * ld + k0 + 2 * t + 8);
}

/* The same fragments by ldmatrix, for the scan (16-byte aligned rows; lane / 8 names the 8 x 8 matrix whose row
 * it addresses). The prep kernel keeps the 32-bit loads above: at its occupancy they measured faster. */
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const uint16_t *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}
/* each matrix transposed: lane 4 g + t gets elements (2t, g), (2t + 1, g) of each */
__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], const uint16_t *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}
/* an 8 x 8 matrix of b16 in the fragment layout (lane 4 g + t: row g, elements 2 t, 2 t + 1), transposed */
__device__ __forceinline__ uint32_t movt(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ void ldsm_a(uint32_t (&a)[4], const uint16_t *m, int ld, int m0, int k0, int lane) {
    ldsm4(a, m + (m0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ld + k0 + 8 * (lane >> 4));
}
/* B fragments of the same column n0 of two tiles x and y ([n][k], stride ld): b[0..1] of x, b[2..3] of y */
__device__ __forceinline__ void ldsm_b2(uint32_t (&b)[4], const uint16_t *x, const uint16_t *y, int n0, int ld, int k0,
                                        int lane) {
    const int m = lane >> 3;
    ldsm4(b, (m < 2 ? x : y) + (n0 + (lane & 7)) * ld + k0 + 8 * (m & 1));
}

/* Input fragments (A or B, raw pairs of the input dtype) as hi (and lo for f16). */
template <int DT, int N>
__device__ __forceinline__ void in_frag(uint32_t (&hi)[N], uint32_t (&lo)[N], const uint32_t (&raw)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) in_pair<DT>(raw[i], hi[i], lo[i]);
}

/* acc[nt] += X[m0 .. m0+15] Y[n0 + 8 nt .. +7]^T over Dk, X and Y input tiles [row][LDK]; tiles nt >= live
 * skipped. Exact products for bf16; hi hi + hi lo + lo hi for f16. */
template <int DT, int NT>
__device__ __forceinline__ void gram(float (&acc)[NT][4], const uint16_t *x, int m0, const uint16_t *y, int n0,
                                     int live, int g, int t) {
#pragma unroll
    for (int ks = 0; ks < DK / 16; ++ks) {
        uint32_t raw[4], ah[4], al[4];
        frag_a(raw, x, LDK, m0, 16 * ks, g, t);
        in_frag<DT>(ah, al, raw);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if (nt >= live) continue;
            uint32_t rb[2], bh[2], bl[2];
            frag_b(rb, y, LDK, n0 + 8 * nt, 16 * ks, g, t);
            in_frag<DT>(bh, bl, rb);
            mma(acc[nt], ah, bh[0], bh[1]);
            if (DT == GDN_F16) {
                mma(acc[nt], ah, bl[0], bl[1]);
                mma(acc[nt], al, bh[0], bh[1]);
            }
        }
    }
}

/* log g in binary64: the log-decay gate as given; the raw gate -exp(A_log) softplus(x + dt_bias) (threshold 20). */
__device__ __forceinline__ double log_decay(const gdn_dev_args &a, float x, int64_t h) {
    if (a.gate_kind == GDN_GATE_LOG_DECAY) return (double)x;
    const double z = (double)x + (double)a.dt_bias[h];
    return -exp((double)a.A_log[h]) * (z > 20.0 ? z : log1p(exp(z)));
}

/* The sequence of chunk c: the last b with chunk0[b] <= c. */
__device__ __forceinline__ int seq_of(const chunk_seqs &sq, int c) {
    int lo = 0, hi = sq.n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (sq.chunk0[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The input rows tc .. tc + n - 1 of one head of q or k ([T, H, Dk]) into a [C][LDK] tile, zeros past n: thread
 * tid copies piece tid % 16 of rows tid / 16 + (THREADS / 16) i. */
template <int THREADS>
__device__ __forceinline__ void load_rows(uint16_t *tile, const void *x, int64_t H, int64_t head, int64_t tc, int n,
                                          int tid) {
    constexpr int PIECES = DK / 8;
    static_assert(THREADS % PIECES == 0 && CH % (THREADS / PIECES) == 0, "whole rows a pass");
    const int piece = tid % PIECES;
    const uint16_t *src = (const uint16_t *)x + (tc * H + head) * DK + piece * 8;
    const int stride = (int)(H * DK); /* elements from one token's row to the next (H <= 65535: 63 strides fit) */
#pragma unroll
    for (int i = 0; i < CH / (THREADS / PIECES); ++i) {
        const int r = tid / PIECES + i * (THREADS / PIECES);
        cp16(tile + r * LDK + piece * 8, src + (r < n ? r : n - 1) * stride, r < n ? 16 : 0);
    }
}

/* (segment starts, sum of log g since the last start) over a run of tokens; a start (log g = -inf) counts 0. */
struct seg_sum {
    int starts;
    double sum;
};
__device__ __forceinline__ seg_sum seg_token(double l) { return l == -INFINITY ? seg_sum{1, 0.0} : seg_sum{0, l}; }
/* x then y */
__device__ __forceinline__ seg_sum seg_then(seg_sum x, seg_sum y) {
    return seg_sum{x.starts + y.starts, y.starts > 0 ? y.sum : x.sum + y.sum};
}

/* gs.r, gs.seg of the chunk's 64 log-decays: a fixed tree (lane pairs, then the warp's inclusive scan). Warp 0. */
__device__ __forceinline__ void segment_sums(const double *lg, chunk_gates &gs, int lane) {
    const seg_sum e0 = seg_token(lg[2 * lane]), e1 = seg_token(lg[2 * lane + 1]);
    seg_sum run = seg_then(e0, e1);
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const seg_sum up = {__shfl_up_sync(GDN_FULL_MASK, run.starts, d), __shfl_up_sync(GDN_FULL_MASK, run.sum, d)};
        if (lane >= d) run = seg_then(up, run);
    }
    seg_sum before = {__shfl_up_sync(GDN_FULL_MASK, run.starts, 1), __shfl_up_sync(GDN_FULL_MASK, run.sum, 1)};
    if (lane == 0) before = seg_sum{0, 0.0};
    const seg_sum r0 = seg_then(before, e0), r1 = seg_then(r0, e1);
    gs.r[2 * lane] = r0.sum, gs.seg[2 * lane] = r0.starts;
    gs.r[2 * lane + 1] = r1.sum, gs.seg[2 * lane + 1] = r1.starts;
}

template <int DT>
__global__ void __launch_bounds__(PREP_THREADS) gdn_chunk_prep(gdn_dev_args a, chunk_seqs sq, uint8_t *ws) {
    gdn_grid_dependency_wait();
    __shared__ __align__(16) uint16_t ks[CH * LDK], qs[CH * LDK];
    /* after Q K^T: L by parity of row, lp[at(i, j)] = L_ij (first the decay d_ij), so that a lane of the solve reads
     * its rows 2 k + p of column m as float4 runs; bits 2 .. 4 of the row half swizzled by the column, so that the
     * four lanes of a fragment row hit four banks (dev/chunk_prep_banks.py) */
    float *lp = (float *)qs;
    auto at = [](int i, int j) { return (i & 1) * LP_PLANE + j * (CH / 2) + ((i >> 1) ^ (4 * (j & 7))); };
    __shared__ double lg[CH];
    __shared__ float beta[CH];
    __shared__ __align__(16) chunk_gates gs;
    const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int b = seq_of(sq, c);
    const int64_t tc = sq.t0[b] + (int64_t)(c - sq.chunk0[b]) * CH;
    const int n = min(CH, (int)(sq.t0[b] + sq.len[b] - tc));
    const int64_t hk = gdn__key_head(h, a.Hk, a.group, a.tiled);
    load_rows<PREP_THREADS>(ks, a.k, a.Hk, hk, tc, n, tid);
    load_rows<PREP_THREADS>(qs, a.q, a.Hk, hk, tc, n, tid);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    if (tid < CH) {
        double l = 0.0;
        float be = 0.0f;
        const int64_t tok = tc + tid;
        if (tid < n && (!a.mask || a.mask[tok])) {
            l = log_decay(a, a.gate[tok * a.Hv + h], h);
            const float x = a.beta[tok * a.Hv + h];
            be = a.beta_kind == GDN_BETA_LOGIT ? (float)(1.0 / (1.0 + exp(-(double)x))) : x;
        }
        lg[tid] = l, beta[tid] = be;
    }
    __syncthreads();
    if (w == 0) /* the segment sums: a scan of (segment starts, sum since the last) pairs, lane l tokens 2l, 2l+1 */
        segment_sums(lg, gs, tid);
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    if (tid < CH) {
        gs.G[tid] = gs.seg[tid] == 0 ? (float)exp(gs.r[tid]) : 0.0f;
        gs.e[tid] = tid < n && gs.seg[tid] == gs.seg[n - 1] ? (float)exp(gs.r[n - 1] - gs.r[tid]) : 0.0f;
    }
    uint8_t *out = ws + ((int64_t)c * a.Hv + h) * WS_BYTES;
    /* warp w's strip of rows 16 w .. 16 w + 15, its tiles left of the diagonal and on it */
    float acc[8][4] = {}; /* P = d (q k^T), j <= i, straight to its planes */
    gram<DT, 8>(acc, qs, 16 * w, ks, 0, 2 * w + 2, g, t);
    __syncthreads(); /* the q tile is read: lp takes its place */
    /* this thread's rows i0, i0 + 8 of the [C, C] products: their gates */
    const int i0 = 16 * w + g;
    const double ri[2] = {gs.r[i0], gs.r[i0 + 8]};
    const int si[2] = {gs.seg[i0], gs.seg[i0 + 8]};
    {
        uint16_t *phi = (uint16_t *)(out + 2 * PLANE), *plo = (uint16_t *)(out + 3 * PLANE);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            if (nt >= 2 * w + 2) continue;
            const int j = 8 * nt + 2 * t;
            const double2 rj = *(const double2 *)&gs.r[j];
            const int2 sj = *(const int2 *)&gs.seg[j];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int i = i0 + 8 * half;
                float pv[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    /* d_ij = exp(r_i - r_j) within a segment, else 0; evaluated for every element, kept for j <= i */
                    const float ex = expf((float)(ri[half] - (e ? rj.y : rj.x)));
                    const float d = j + e <= i && si[half] == (e ? sj.y : sj.x) ? ex : 0.0f;
                    if (j + e < i) lp[at(i, j + e)] = d; /* for L, below: this thread's own element */
                    pv[e] = j + e <= i ? __fmul_rn(d, acc[nt][2 * half + e]) : 0.0f;
                }
                uint32_t hi, lo;
                split2(pv[0], pv[1], hi, lo);
                *(uint32_t *)&phi[i * CH + j] = hi;
                *(uint32_t *)&plo[i * CH + j] = lo;
            }
        }
    }
    float kk[8][4] = {}; /* then L = beta_i d_ij (k_i . k_j), j < i: kept here for the solve's block products, and
                          * the diagonal blocks also in lp for their substitution */
    gram<DT, 8>(kk, ks, 16 * w, ks, 0, 2 * w + 2, g, t);
    const float bi[2] = {beta[i0], beta[i0 + 8]};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        if (nt >= 2 * w + 2) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = i0 + (e >> 1) * 8, j = 8 * nt + 2 * t + (e & 1);
            float &l = lp[at(i, j)];
            kk[nt][e] = j < i ? __fmul_rn(__fmul_rn(bi[e >> 1], l), kk[nt][e]) : 0.0f;
            if (nt >= 2 * w && j < i) l = kk[nt][e];
        }
    }
    __syncthreads(); /* lp's diagonal blocks are L; the k tile is free */
    /* T = (I + L)^-1 by 16 x 16 blocks, then A = T diag(beta) into the workspace (the blocks right of the diagonal
     * are not written: the scan reads none). T_ww = I + N_w by substitution, warp w; then one block diagonal a round,
     * warp i forming T_ij (j = i - round) on the tensor cores, the identity's terms in the f32 accumulator and only
     * the corrections split hi + lo (dev/chunk_solve_numerics.py, "blocked 16, tc+I"):
     *     s = L_ij + sum_{k=j}^{i-1} L_ik M_kj  (M_jj = N_j, M_kj = T_kj),   T_ij = -s - N_i s
     * M as bf16 hi + lo planes [column][row] (stride LDT) in the k tile's place. */
    constexpr int LDT = CH + 4;
    static_assert(2 * CH * LDT <= CH * LDK, "T's planes fit in the k tile");
    uint16_t *const thi = ks, *const tlo = ks + CH * LDT;
    uint16_t *const ahi = (uint16_t *)out, *const alo = (uint16_t *)(out + PLANE);
    const int lane = tid & 31;
    { /* column j of T_ww, its rows split by parity between lanes l and l + 16: right-looking forward substitution */
        const int jl = lane & 15, p = lane >> 4, j = 16 * w + jl;
        const float *lcol = lp + p * LP_PLANE + 16 * w * (CH / 2); /* column 16 w + m at lcol + m C/2 */
        float x[8];                                     /* T[16 w + 2 k + p][j] */
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = 2 * k + p == jl ? 1.0f : 0.0f;
#pragma unroll
        for (int m = 0; m < 16; ++m) {
            const float xm = __shfl_sync(GDN_FULL_MASK, x[m >> 1], jl | ((m & 1) << 4));
#pragma unroll
            for (int k4 = (m / 2) & ~3; k4 < 8; k4 += 4) {
                /* L[16 w + 2 (k4 + u) + p][16 w + m], u < 4: at(), whose swizzle keeps the run */
                const float4 l4 = *(const float4 *)&lcol[m * (CH / 2) + ((8 * w + k4) ^ (4 * (m & 7)))];
                const float lv[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    if (2 * (k4 + u) + p > m) x[k4 + u] = __fmaf_rn(-lv[u], xm, x[k4 + u]);
            }
        }
        const float bj = beta[j];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int r = 16 * w + 2 * k + p;
            uint16_t vh, vl;
            split(__fmul_rn(x[k], bj), vh, vl);
            ahi[r * CH + j] = vh, alo[r * CH + j] = vl;
            split(2 * k + p == jl ? 0.0f : x[k], vh, vl);
            thi[j * LDT + r] = vh, tlo[j * LDT + r] = vl;
        }
    }
#pragma unroll
    for (int d = 1; d < CH / 16; ++d) {
        __syncthreads(); /* the blocks of the diagonals before */
        const int i = w, j = w - d;
        if (j < 0) continue;
        float s[2][4] = {}; /* s, columns 16 j + 8 nt + 2 t (+ 1) of rows 16 i + g (+ 8) */
#pragma unroll
        for (int kb = 0; kb < CH / 16 - 1; ++kb) {
            if (kb != j) continue;
#pragma unroll
            for (int e = 0; e < 4; ++e) s[0][e] = kk[2 * kb][e], s[1][e] = kk[2 * kb + 1][e];
        }
#pragma unroll
        for (int kb = 0; kb < CH / 16 - 1; ++kb) {
            if (kb < j || kb >= i) continue;
            uint32_t ah[4], al[4]; /* L_i,kb: the C fragments of tiles 2 kb, 2 kb + 1 are its A fragment */
#pragma unroll
            for (int f = 0; f < 4; ++f) {
                const float *c = &kk[2 * kb + (f >> 1)][2 * (f & 1)];
                split2(c[0], c[1], ah[f], al[f]);
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t bh[2], bl[2];
                frag_b(bh, thi, LDT, 16 * j + 8 * nt, 16 * kb, g, t);
                frag_b(bl, tlo, LDT, 16 * j + 8 * nt, 16 * kb, g, t);
                mma(s[nt], ah, bh[0], bh[1]);
                mma(s[nt], ah, bl[0], bl[1]);
                mma(s[nt], al, bh[0], bh[1]);
            }
        }
        uint32_t nh[4], nl[4]; /* -N_i, A fragments read across the [column][row] planes */
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            const int r = 16 * i + g + 8 * (f & 1), c = 16 * i + 2 * t + 8 * (f >> 1);
            nh[f] = pack(thi[c * LDT + r], thi[(c + 1) * LDT + r]) ^ 0x80008000u;
            nl[f] = pack(tlo[c * LDT + r], tlo[(c + 1) * LDT + r]) ^ 0x80008000u;
        }
        float tt[2][4]; /* T_ij = -s + (-N_i) s; s enters as the B operand, its 8 x 8 pieces transposed */
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
            uint32_t sh[2], sl[2];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                split2(s[nt][2 * half], s[nt][2 * half + 1], sh[half], sl[half]);
                sh[half] = movt(sh[half]), sl[half] = movt(sl[half]);
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) tt[nt][e] = -s[nt][e];
            mma(tt[nt], nh, sh[0], sh[1]);
            mma(tt[nt], nh, sl[0], sl[1]);
            mma(tt[nt], nl, sh[0], sh[1]);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
            const int col = 16 * j + 8 * nt + 2 * t;
            const float bc[2] = {beta[col], beta[col + 1]};
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = 16 * i + g + 8 * half;
                const float *tv = &tt[nt][2 * half];
                uint32_t h, l;
                split2(__fmul_rn(tv[0], bc[0]), __fmul_rn(tv[1], bc[1]), h, l);
                *(uint32_t *)&ahi[row * CH + col] = h;
                *(uint32_t *)&alo[row * CH + col] = l;
                if (i == CH / 16 - 1) continue; /* no later round reads the last block row */
                uint32_t th, tl;
                split2(tv[0], tv[1], th, tl);
                /* transposed: this lane now holds rows 16 i + 8 half + 2 t (+ 1) of column 16 j + 8 nt + g */
                const int at_t = (16 * j + 8 * nt + g) * LDT + 16 * i + 8 * half + 2 * t;
                *(uint32_t *)&thi[at_t] = movt(th);
                *(uint32_t *)&tlo[at_t] = movt(tl);
            }
        }
    }
    __syncthreads(); /* G and e */
    const uint4 *src = (const uint4 *)&gs;
    uint4 *dst = (uint4 *)(out + 4 * PLANE);
    for (int i = tid; i < (int)(sizeof(chunk_gates) / 16); i += PREP_THREADS) dst[i] = src[i];
}

/* The scan block's shared memory: two stages of a chunk's inputs, then the products' planes. */
struct scan_stage {
    uint16_t q[CH * LDK], k[CH * LDK], v[CH * LDV];
    uint16_t ahi[CH * LDC], alo[CH * LDC], phi[CH * LDC], plo[CH * LDC]; /* A and P, [i][j] */
    chunk_gates gt;
};
struct scan_planes {
    uint16_t shi[NS * LDK], slo[NS * LDK]; /* S0 as [value column][key row] */
    uint16_t xhi[NS * LDC], xlo[NS * LDC]; /* X = V - diag(G) K S0, [column][token] */
    uint16_t uhi[NS * LDC], ulo[NS * LDC]; /* U */
};
/* 16 warps, one block an SM: two stages (the next chunk's loads behind the current one's products) */
struct scan_smem {
    scan_stage st[2];
    scan_planes pl;
    uint16_t ehi[NS * LDC], elo[NS * LDC]; /* diag(e) U */
};
/* 8 warps, two blocks an SM: one stage, refilled piece by piece as the chunk's products leave it; diag(e) U in
 * X's planes */
struct scan_lean {
    scan_stage st;
    scan_planes pl;
};

/* Parts of a stage, by when the scan is done with them: q and v after X, A after U, the rest after the chunk; P is
 * first needed after U. */
enum { LD_QV = 1, LD_A = 2, LD_KG = 4, LD_P = 8, LD_ALL = 15 };

/* Issues the loads of parts of one chunk's inputs (tokens tc .., n live) into a stage; hk: h's key head. Thread tid
 * copies fixed pieces: its rows of q and k (load_rows), pieces tid, tid + THREADS, .. of v's rows (4 a row), of
 * each workspace plane's (8 a row) and of the gates. */
template <int THREADS>
__device__ __forceinline__ void load_stage(scan_stage &st, const gdn_dev_args &a, const uint8_t *wsc, int64_t h,
                                           int64_t hk, int64_t s, int64_t tc, int n, int tid, int parts) {
    static_assert((CH * (CH / 8)) % THREADS == 0, "whole passes over the planes");
    static_assert(offsetof(scan_stage, alo) == offsetof(scan_stage, ahi) + sizeof(scan_stage::ahi) &&
                      offsetof(scan_stage, phi) == offsetof(scan_stage, alo) + sizeof(scan_stage::ahi) &&
                      offsetof(scan_stage, plo) == offsetof(scan_stage, phi) + sizeof(scan_stage::ahi),
                  "the four planes in a row");
    if (parts & LD_QV) {
        load_rows<THREADS>(st.q, a.q, a.Hk, hk, tc, n, tid);
#pragma unroll
        for (int i = tid; i < CH * (NS / 8); i += THREADS) {
            const int r = i / (NS / 8), piece = i % (NS / 8);
            const uint16_t *src =
                (const uint16_t *)a.v + ((tc + (r < n ? r : n - 1)) * a.Hv + h) * a.Dv + NS * s + piece * 8;
            cp16(st.v + r * LDV + piece * 8, src, r < n ? 16 : 0);
        }
    }
    if (parts & LD_KG) load_rows<THREADS>(st.k, a.k, a.Hk, hk, tc, n, tid);
#pragma unroll
    for (int i = tid; i < CH * (CH / 8); i += THREADS) {
        const int r = i / (CH / 8), piece = i % (CH / 8);
        const uint8_t *src = wsc + r * (CH * 2) + piece * 16;
        uint16_t *dst = st.ahi + r * LDC + piece * 8;
#pragma unroll
        for (int plane = 0; plane < 4; ++plane)
            if (parts & (plane < 2 ? LD_A : LD_P)) cp16(dst + plane * (CH * LDC), src + plane * PLANE, 16);
    }
    for (int i = tid; i < (int)(sizeof(chunk_gates) / 16) && (parts & LD_KG); i += THREADS)
        cp16((uint8_t *)&st.gt + 16 * i, wsc + 4 * PLANE + 16 * i, 16);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Stores four 8 x 8 b16 matrices held as C / A fragments (r[i]: lane 4 g + t's elements (g, 2t), (g, 2t + 1) of
 * matrix i), each transposed: lane l names the row (a fragment column) of matrix l / 8 it writes. */
__device__ __forceinline__ void stsm4t(const uint16_t *row, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(row)), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

/* A C fragment v of rows m0 .. m0 + 15, columns c0 .. c0 + 7 into a [column][LDC] pair of planes, transposed. */
__device__ __forceinline__ void put_cols(uint16_t *hi, uint16_t *lo, int m0, int c0, const float (&v)[4], int lane) {
    uint32_t r[4]; /* hi rows m0 .., m0 + 8 ..; lo the same */
    split2(v[0], v[1], r[0], r[2]);
    split2(v[2], v[3], r[1], r[3]);
    const int m = lane >> 3;
    stsm4t((m < 2 ? hi : lo) + (c0 + (lane & 7)) * LDC + m0 + 8 * (m & 1), r);
}

/* The scan's warps (16; with 8, warp w is row warp w and state warp w + 8). Row warps w < 8 hold a [16, 16] tile of
 * the [C, 32] products (two 8-column tiles): rows 16 mt .., columns 16 ch .., with (mt, ch) = (w, 0) for w < 4 and
 * (7 - w, 1) for w >= 4, so that the two row warps of a scheduler (w % 4) hold row blocks j and 3 - j and the
 * lower-triangular products give each scheduler 5 k blocks. State warps w >= 8 hold a [32, 16] block of the state
 * (four tiles): key rows 32 (w % 4) .., columns 16 ((w - 8) / 4) ... A fragment of the input rows or of a plane is
 * loaded once for two tiles. */

/* K S0 and Q S0 for a row warp's tiles (rows m0 .., columns n0 .. + 15): input rows times the state's planes. */
template <int DT>
__device__ __forceinline__ void times_state(float (&ks0)[2][4], float (&qs0)[2][4], const scan_stage &st,
                                            const scan_planes &pl, int m0, int n0, int lane) {
#pragma unroll
    for (int kb = 0; kb < DK / 16; ++kb) {
        uint32_t b[2][4], rk[4], kh[4], kl[4], rq[4], qh[4], ql[4]; /* b: the state's hi (0, 1) and lo (2, 3) */
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) ldsm_b2(b[nt], pl.shi, pl.slo, n0 + 8 * nt, LDK, 16 * kb, lane);
        ldsm_a(rk, st.k, LDK, m0, 16 * kb, lane);
        ldsm_a(rq, st.q, LDK, m0, 16 * kb, lane);
        in_frag<DT>(kh, kl, rk);
        in_frag<DT>(qh, ql, rq);
#pragma unroll
        for (int half = 0; half < 2; ++half) /* the state's hi, then lo */
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                mma(ks0[nt], kh, b[nt][2 * half], b[nt][2 * half + 1]);
                mma(qs0[nt], qh, b[nt][2 * half], b[nt][2 * half + 1]);
            }
        if (DT == GDN_F16)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                mma(ks0[nt], kl, b[nt][0], b[nt][1]);
                mma(qs0[nt], ql, b[nt][0], b[nt][1]);
            }
    }
}

/* acc[nt] += (Ahi + Alo)[rows 16 mt ..][0 .. 16 (mt + 1)) (Bhi + Blo)[.., columns n0 + 8 nt ..] for a row warp's two
 * tiles: a lower-triangular [C, C] pair of planes [row][LDC] times a [C, 32] pair stored [n][LDC]; each k block
 * hi hi, hi lo, lo hi. */
__device__ __forceinline__ void lower(float (&acc)[2][4], const uint16_t *ahi, const uint16_t *alo, const uint16_t *bhi,
                                      const uint16_t *blo, int mt, int n0, int lane) {
#pragma unroll
    for (int kb = 0; kb < CH / 16; ++kb) {
        if (kb > mt) break;
        uint32_t b[2][4], ah[4], al[4]; /* b: B's hi (0, 1) and lo (2, 3) */
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) ldsm_b2(b[nt], bhi, blo, n0 + 8 * nt, LDC, 16 * kb, lane);
        ldsm_a(ah, ahi, LDC, 16 * mt, 16 * kb, lane);
        ldsm_a(al, alo, LDC, 16 * mt, 16 * kb, lane);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma(acc[nt], ah, b[nt][0], b[nt][1]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma(acc[nt], ah, b[nt][2], b[nt][3]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma(acc[nt], al, b[nt][0], b[nt][1]);
    }
}

/* y = scale (diag(G) Q S0 + P U) of a thread's C fragments of NT tiles (qs, pu: [NT][4]; rows r0, r0 + 8 of the
 * chunk at token tc with n live, their gates G[0], G[1]; columns col0 + 8 nt + 2 t (+ 1) of head h), rounded to the
 * dtype; masked tokens 0. */
template <int DT, int NT>
__device__ __forceinline__ void put_y(const gdn_dev_args &a, const float (&G)[2], int64_t tc, int n, int64_t h,
                                      int64_t col0, int r0, int t, const float *qs, const float *pu) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int r = r0 + 8 * half;
        if (r >= n) continue;
        const int64_t tok = tc + r;
        const int live = !a.mask || a.mask[tok];
        uint16_t *yrow = (uint16_t *)a.y + (tok * a.Hv + h) * a.Dv + col0 + 2 * t;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            uint16_t o[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int i = 4 * nt + 2 * half + e;
                const float v = __fmul_rn(a.scale, __fadd_rn(__fmul_rn(G[half], qs[i]), pu[i]));
                o[e] = DT == GDN_BF16 ? bf16_rn(live ? v : 0.0f) : f16_rn(live ? v : 0.0f);
            }
            *(uint32_t *)(yrow + 8 * nt) = pack(o[0], o[1]);
        }
    }
}

/* The scan's smem: scan_smem with 16 warps, scan_lean with 8 (each warp then a row warp and a state warp). */
template <int NW>
using scan_smem_of = typename std::conditional<NW == 16, scan_smem, scan_lean>::type;

template <int DT, int NW>
__global__ void __launch_bounds__(NW * 32, 16 / NW) gdn_chunk_scan(gdn_dev_args a, chunk_seqs sq, const uint8_t *ws) {
    constexpr bool LEAN = NW == 8;
    static_assert(NW == 16 || NW == 8, "16 or 8 warps");
    gdn_grid_dependency_wait();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    scan_smem_of<NW> &sm = *(scan_smem_of<NW> *)smem_raw;
    scan_planes &pl = sm.pl;
    uint16_t *const ehi = LEAN ? pl.xhi : ((scan_smem *)smem_raw)->ehi; /* diag(e) U */
    uint16_t *const elo = LEAN ? pl.xlo : ((scan_smem *)smem_raw)->elo;
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = tid & 3;
    const bool row_warp = LEAN || w < 8, state_warp = LEAN || w >= 8;
    /* a row warp's tiles: rows r0, r0 + 8; columns n0 + 8 nt + 2 t (+ 1) */
    const int mt = (w & 7) < 4 ? (w & 7) : 7 - (w & 7), r0 = 16 * mt + g, n0 = 16 * ((w >> 2) & 1);
    /* a state warp's tiles i = 2 kt + nt: key rows key0 + 16 kt + g (+ 8), columns c0 + 8 nt + 2 t (+ 1) */
    const int key0 = 32 * (w & 3), c0 = 16 * ((w >> 2) & 1);
    const int64_t len = sq.len[b], t0 = sq.t0[b], slot = sq.slot[b];
    const int chunks = sq.chunk0[b + 1] - sq.chunk0[b];
    const int64_t state = (slot * a.Hv + h) * a.Dk * a.Dv, hk = gdn__key_head(h, a.Hk, a.group, a.tiled);
    auto state_at = [&](int tile, int e) { /* the state entry of a state warp's element e of a tile */
        const int64_t i = key0 + 16 * (tile >> 1) + g + (e >> 1) * 8;
        const int64_t j = NS * s + c0 + 8 * (tile & 1) + 2 * t + (e & 1);
        return state + (a.layout == GDN_STATE_VK ? j * a.Dk + i : i * a.Dv + j);
    };
    float S[4][4]; /* a state warp's state in f32 */
    if (state_warp)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) S[i][e] = a.state_in ? a.state_in[state_at(i, e)] : 0.0f;
    auto put_state = [&]() { /* a state warp's tiles into the state's [column][LDK] planes, transposed */
        const int m = lane >> 3;
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) { /* matrix 2 nt + q: keys key0 + 16 kt + 8 q .., columns c0 + 8 nt .. */
            uint32_t hi[4], lo[4];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                split2(S[2 * kt + nt][0], S[2 * kt + nt][1], hi[2 * nt], lo[2 * nt]);
                split2(S[2 * kt + nt][2], S[2 * kt + nt][3], hi[2 * nt + 1], lo[2 * nt + 1]);
            }
            const int off = (c0 + 8 * (m >> 1) + (lane & 7)) * LDK + key0 + 16 * kt + 8 * (m & 1);
            stsm4t(pl.shi + off, hi);
            stsm4t(pl.slo + off, lo);
        }
    };
    if (state_warp) put_state();
    const uint8_t *wsb = ws + (int64_t)sq.chunk0[b] * a.Hv * WS_BYTES;
    auto stage = [&](int lc) -> scan_stage & { /* chunk lc's stage */
        if constexpr (LEAN) return sm.st;
        else return sm.st[lc & 1];
    };
    auto load = [&](int lc, int parts) { /* chunk lc's parts into its stage */
        const int64_t tc = t0 + (int64_t)lc * CH;
        load_stage<NW * 32>(stage(lc), a, wsb + ((int64_t)lc * a.Hv + h) * WS_BYTES, h, hk, s, tc,
                            (int)min((int64_t)CH, t0 + len - tc), tid, parts);
    };
    /* 8 warps: P in a cp.async group of its own, issued at the chunk's start and waited for only before P U */
    if (LEAN) load(0, LD_ALL & ~LD_P);
    load(0, LEAN ? LD_P : LD_ALL);
    for (int lc = 0; lc < chunks; ++lc) {
        const scan_stage &st = stage(lc);
        const int64_t tc = t0 + (int64_t)lc * CH;
        const int n = (int)min((int64_t)CH, t0 + len - tc);
        const bool more = lc + 1 < chunks;
        if (LEAN && lc == 0) asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* all but P */
        else asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads(); /* the stage (8 warps: but P), and the state's planes, are in */
        if (LEAN && lc > 0) load(lc, LD_P); /* the last chunk's readers of P are behind the barrier */
        if (!LEAN && more) load(lc + 1, LD_ALL);
        float qs0[2][4] = {}; /* a row warp's Q S0, for y */
        if (row_warp) { /* X = V - diag(G) K S0, and Q S0 */
            float ks0[2][4] = {};
            times_state<DT>(ks0, qs0, st, pl, 16 * mt, n0, lane);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                float x[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = r0 + (e >> 1) * 8, col = n0 + 8 * nt + 2 * t + (e & 1);
                    x[e] = __fsub_rn(in_f32<DT>(st.v[r * LDV + col]), __fmul_rn(st.gt.G[r], ks0[nt][e]));
                }
                put_cols(pl.xhi, pl.xlo, 16 * mt, n0 + 8 * nt, x, lane);
            }
        }
        __syncthreads(); /* X */
        if (LEAN && more) load(lc + 1, LD_QV);
        float u[2][4] = {}; /* U = A X */
        if (row_warp) lower(u, st.ahi, st.alo, pl.xhi, pl.xlo, mt, n0, lane);
        if (LEAN) {
            __syncthreads(); /* X's and A's readers done: diag(e) U goes into X's planes */
            if (more) load(lc + 1, LD_A);
        }
        if (row_warp) /* U and diag(e) U */
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                float eu[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) eu[e] = __fmul_rn(st.gt.e[r0 + (e >> 1) * 8], u[nt][e]);
                put_cols(pl.uhi, pl.ulo, 16 * mt, n0 + 8 * nt, u[nt], lane);
                put_cols(ehi, elo, 16 * mt, n0 + 8 * nt, eu, lane);
            }
        if (LEAN) { /* P: behind it at most the next chunk's q, v and A */
            if (more) asm volatile("cp.async.wait_group 2;\n" ::: "memory");
            else asm volatile("cp.async.wait_all;\n" ::: "memory");
        }
        __syncthreads(); /* U (and P) */
        const float Gr[2] = {st.gt.G[r0], st.gt.G[r0 + 8]}, Gn = st.gt.G[n - 1];
        auto y_out = [&]() { /* y = scale (diag(G) Q S0 + P U) */
            float pu[2][4] = {};
            lower(pu, st.phi, st.plo, pl.uhi, pl.ulo, mt, n0, lane);
            put_y<DT, 2>(a, Gr, tc, n, h, NS * s + n0, r0, t, &qs0[0][0], &pu[0][0]);
        };
        auto state_step = [&]() { /* S = G_{n-1} S0 + K^T diag(e) U */
            float ku[4][4] = {};
#pragma unroll
            for (int kb = 0; kb < CH / 16; ++kb) {
                uint32_t kh[2][4], kl[2][4], be[2][4]; /* be: diag(e) U's hi (0, 1) and lo (2, 3) */
#pragma unroll
                for (int kt = 0; kt < 2; ++kt) { /* K^T (row = key, column = token): the k tile's blocks transposed */
                    uint32_t raw[4];
                    ldsm4t(raw, st.k + (16 * kb + (lane & 7) + 8 * (lane >> 4)) * LDK + key0 + 16 * kt +
                                    8 * ((lane >> 3) & 1));
                    in_frag<DT>(kh[kt], kl[kt], raw);
                }
#pragma unroll
                for (int nt = 0; nt < 2; ++nt) ldsm_b2(be[nt], ehi, elo, c0 + 8 * nt, LDC, 16 * kb, lane);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    mma(ku[i], kh[i >> 1], be[i & 1][0], be[i & 1][1]);
                    mma(ku[i], kh[i >> 1], be[i & 1][2], be[i & 1][3]);
                    if (DT == GDN_F16) mma(ku[i], kl[i >> 1], be[i & 1][0], be[i & 1][1]);
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) S[i][e] = __fadd_rn(__fmul_rn(Gn, S[i][e]), ku[i][e]);
            put_state(); /* the planes' readers (K S0, Q S0) are behind the barriers above */
        };
        if (LEAN) { /* the state first, so that the next k and gates load while y is formed */
            state_step();
            __syncthreads(); /* the chunk's readers of k and the gates done */
            if (more) load(lc + 1, LD_KG);
            y_out();
        } else {
            if (row_warp) y_out();
            if (state_warp) state_step();
        }
    }
    if (a.state_out && state_warp)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) a.state_out[state_at(i, e)] = S[i][e];
}

/* Lets the scan launch with the opt-in shared memory (once per dtype). */
template <int DT, int NW>
gdn_status allow_scan(void) {
    static int done = 0;
    return gdn_cuda_allow_smem(gdn_chunk_scan<DT, NW>, &done);
}

/* One launch pair over the sequences of sq (their chunks in ws). */
template <int DT>
gdn_status launch(const gdn__problem *p, const chunk_seqs &sq, uint8_t *ws) {
    const gdn_dev_args d = gdn_dev_args_of(p);
    cudaStream_t stream = (cudaStream_t)p->a.stream;
    const dim3 grid((unsigned)(p->a.Dv / NS), (unsigned)p->a.Hv, (unsigned)sq.n);
    /* more blocks than SMs: the 8-warp scan, two blocks an SM (the same bits) */
    const bool lean = (int64_t)grid.x * grid.y * grid.z > (int64_t)gdn_cuda_sm_count();
    if ((lean ? allow_scan<DT, 8>() : allow_scan<DT, 16>()) != GDN_OK) return GDN_ERR_DEVICE;
    /* both by programmatic dependent launch: each waits for the kernel before it, first thing */
    if (gdn_launch_pdl(gdn_chunk_prep<DT>, dim3((unsigned)sq.chunk0[sq.n], (unsigned)p->a.Hv), PREP_THREADS, 0, stream,
                       d, sq, ws) != GDN_OK)
        return GDN_ERR_DEVICE;
    if (lean)
        return gdn_launch_pdl(gdn_chunk_scan<DT, 8>, grid, 8 * 32, (int)sizeof(scan_lean), stream, d, sq,
                              (const uint8_t *)ws);
    return gdn_launch_pdl(gdn_chunk_scan<DT, 16>, grid, SCAN_THREADS, (int)sizeof(scan_smem), stream, d, sq,
                          (const uint8_t *)ws);
}

} /* namespace */

extern "C" {

/* bf16 or f16; Dk = 128; Dv a multiple of 32; a log-decay or raw gate; q, k, v 16-byte aligned, y 4-byte; windows
 * below 2^31 tokens; the scan's shared memory available; the head grid within launch limits. */
int gdn__delta_cuda_chunked_eligible(const gdn__problem *p) {
    if (p->a.state_slot_device) return 0; /* slots on the device: the window and streamed decode kernels */
    const gdn_delta_args *a = &p->a;
    return gdn__cuda_devices() > 0 && (a->dtype == GDN_BF16 || a->dtype == GDN_F16) && a->Dk == DK &&
           a->Dv % NS == 0 && a->Dv / NS <= 65535 && a->Hv <= 65535 &&
           (a->gate_kind == GDN_GATE_LOG_DECAY || a->gate_kind == GDN_GATE_RAW) &&
           (uintptr_t)a->q % 16 == 0 && (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0 &&
           (uintptr_t)a->y % 4 == 0 && a->T <= INT32_MAX && gdn_cuda_smem_optin() >= (int)sizeof(scan_smem);
}

/* Never routed: the second contract is the caller's choice ("cuda_chunked", or "fastest" for windows of
 * GDN_CHUNKED_MIN_T tokens or more). */
int gdn__delta_cuda_chunked_routed(const gdn__problem *p) { return p == NULL; }

const gdn__variant gdn__delta_cuda_chunked_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

/* The sequences b of a call with take[b] set (take NULL: every one), SEQS per launch pair: the dense form's B windows
 * of T tokens (state entry b), or the batch form's windows and slots (p as validated, before any split). pass 0 only
 * sizes: *most, the most chunks of one launch; pass 1 zeroes a skipped sequence's y rows and launches the others in
 * the workspace ws. */
static gdn_status chunked_walk(const gdn__problem *p, const uint8_t *take, int pass, uint8_t *ws, int64_t *most) {
    const gdn_delta_args *a = &p->a;
    gdn_status s = GDN_OK;
    chunk_seqs sq;
    sq.n = 0, sq.chunk0[0] = 0;
    auto flush = [&]() {
        if (sq.n == 0 || s != GDN_OK) return;
        if (pass == 0) *most = sq.chunk0[sq.n] > *most ? sq.chunk0[sq.n] : *most;
        else s = a->dtype == GDN_BF16 ? launch<GDN_BF16>(p, sq, ws) : launch<GDN_F16>(p, sq, ws);
        sq.n = 0;
    };
    for (int64_t b = 0; b < a->B && s == GDN_OK; ++b) {
        if (take && !take[b]) continue;
        const int64_t t0 = a->cu_seqlens ? a->cu_seqlens[b] : b * a->T;
        const int64_t len = a->cu_seqlens ? a->cu_seqlens[b + 1] - t0 : a->T;
        const int64_t slot = a->state_slot ? a->state_slot[b] : b, chunks = (len + CH - 1) / CH;
        if (slot < 0) {
            if (pass == 1)
                s = gdn__cuda_zero((char *)a->y + t0 * a->Hv * a->Dv * (int64_t)p->dtype_size,
                                   (size_t)(len * a->Hv * a->Dv) * p->dtype_size, a->stream);
            continue;
        }
        if (sq.n == SEQS || sq.chunk0[sq.n] + chunks > INT32_MAX) flush(); /* a launch's chunks index in int */
        sq.t0[sq.n] = t0, sq.len[sq.n] = (int32_t)len, sq.slot[sq.n] = (int32_t)slot;
        sq.chunk0[sq.n + 1] = sq.chunk0[sq.n] + (int32_t)chunks;
        ++sq.n;
    }
    flush();
    return s;
}

int64_t gdn__cuda_chunked_bytes(const gdn__problem *p, const uint8_t *take) {
    int64_t most = 0, bytes = 0;
    (void)chunked_walk(p, take, 0, NULL, &most);
    return gdn__size_mul(most, p->a.Hv, &bytes) && gdn__size_mul(bytes, (int64_t)WS_BYTES, &bytes) ? bytes : -1;
}

/* In the caller's device workspace where it has one large enough (p->dev_ws), else in one of its own, allocated
 * before the first launch (none when every sequence is skipped: their rows are only zeroed). take: gdn_internal.h. */
gdn_status gdn__cuda_chunked_sequences(const gdn__problem *p, const uint8_t *take) {
    const int64_t bytes = gdn__cuda_chunked_bytes(p, take);
    if (bytes < 0) return GDN_ERR_OUT_OF_MEMORY;
    uint8_t *ws = (uint8_t *)p->dev_ws, *own = NULL;
    if (bytes > 0 && (!ws || p->dev_ws_bytes < bytes)) {
        if (gdn__cuda_alloc((void **)&own, bytes, p->a.stream) != GDN_OK) return GDN_ERR_OUT_OF_MEMORY;
        ws = own;
    }
    const gdn_status s = chunked_walk(p, take, 1, ws, NULL);
    const gdn_status freed = own ? gdn__cuda_free(own, p->a.stream) : GDN_OK;
    return s != GDN_OK ? s : freed;
}

gdn_status gdn__delta_cuda_chunked(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_cuda_chunked_eligible(p)) return GDN_ERR_INELIGIBLE;
    return gdn__cuda_chunked_sequences(p, NULL);
}

} /* extern "C" */
