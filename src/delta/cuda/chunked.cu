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
 *                   unit-lower solve of A (binary32, one column per lane pair); A and P = d (q k^T) as bf16 hi + lo
 *                   planes, and the gate vectors, into a workspace.
 *   gdn_chunk_scan  one block per (sequence, head, 32 value columns), the chunks in order: K S0 and Q S0, U = A X,
 *                   P U and K^T diag(e) U on the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate); the
 *                   state stays in f32 registers and enters the products as bf16 hi + lo (16 bits), as X and U do
 *                   (the variants *_shi: K S0 and Q S0 take its hi alone). gdn_chunk_scan_wg is the same scan by
 *                   warpgroup MMA (bf16, sm_90a), with the same bits.
 * bf16 inputs enter the products exactly; f16 ones as bf16 hi + lo. Dk = 128, Dv a multiple of 32. */
#include <math.h>

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

/* A pair of input elements (dtype DT) as the bf16 operand pair: exact for bf16 (lo unused), hi + lo for f16. */
template <int DT>
__device__ __forceinline__ void in_pair(uint32_t raw, uint32_t &hi, uint32_t &lo) {
    if (DT == GDN_BF16) {
        hi = raw, lo = 0;
        return;
    }
    uint16_t h0, l0, h1, l1;
    split(f16_f32((uint16_t)raw), h0, l0);
    split(f16_f32((uint16_t)(raw >> 16)), h1, l1);
    hi = pack(h0, h1), lo = pack(l0, l1);
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

/* The decay d_ij of a chunk's gates (0 across a segment start). */
__device__ __forceinline__ float decay(const chunk_gates &gs, int i, int j) {
    return gs.seg[i] == gs.seg[j] ? expf((float)(gs.r[i] - gs.r[j])) : 0.0f;
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
     * its rows 2 k + p of column m as float4 runs */
    float *lp = (float *)qs;
    auto at = [](int i, int j) { return (i & 1) * LP_PLANE + j * (CH / 2) + (i >> 1); };
    __shared__ double lg[CH];
    __shared__ float beta[CH];
    __shared__ __align__(16) chunk_gates gs;
    const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int b = seq_of(sq, c);
    const int64_t tc = sq.t0[b] + (int64_t)(c - sq.chunk0[b]) * CH;
    const int n = min(CH, (int)(sq.t0[b] + sq.len[b] - tc));
    const int64_t hk = h / a.group;
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
    {
        uint16_t *phi = (uint16_t *)(out + 2 * PLANE), *plo = (uint16_t *)(out + 3 * PLANE);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            if (nt >= 2 * w + 2) continue;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int i = 16 * w + g + 8 * half, j = 8 * nt + 2 * t;
                uint16_t hi[2], lo[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float d = j + e <= i ? decay(gs, i, j + e) : 0.0f;
                    if (j + e < i) lp[at(i, j + e)] = d; /* for L, below: this thread's own element */
                    split(j + e <= i ? __fmul_rn(d, acc[nt][2 * half + e]) : 0.0f, hi[e], lo[e]);
                }
                *(uint32_t *)&phi[i * CH + j] = pack(hi[0], hi[1]);
                *(uint32_t *)&plo[i * CH + j] = pack(lo[0], lo[1]);
            }
        }
    }
    float kk[8][4] = {}; /* L = beta_i d_ij (k_i . k_j), j < i */
    gram<DT, 8>(kk, ks, 16 * w, ks, 0, 2 * w + 2, g, t);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        if (nt >= 2 * w + 2) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = 16 * w + g + (e >> 1) * 8, j = 8 * nt + 2 * t + (e & 1);
            if (j < i) lp[at(i, j)] = __fmul_rn(__fmul_rn(beta[i], lp[at(i, j)]), kk[nt][e]);
        }
    }
    __syncthreads();
    { /* column j of T = (I + L)^-1 by right-looking forward substitution, its rows split by parity between lanes
       * l and l + 16 of warp j / 16; then A = T diag(beta). x[m] = 0 for m < j: the warp skips those steps. */
        const int lane = tid & 31, j = 16 * w + (lane & 15), p = lane >> 4;
        const float *lrow = lp + p * LP_PLANE; /* lrow[m C/2 + k] = L[2 k + p][m] */
        float x[CH / 2]; /* rows 2 k + p */
#pragma unroll
        for (int k = 0; k < CH / 2; ++k) x[k] = 2 * k + p == j ? 1.0f : 0.0f;
#pragma unroll
        for (int m = 0; m < CH; ++m) {
            if (m < 16 * w) continue;
            const float xm = __shfl_sync(GDN_FULL_MASK, x[m >> 1], (lane & 15) | ((m & 1) << 4));
#pragma unroll
            for (int k4 = (m / 2) & ~3; k4 < CH / 2; k4 += 4) {
                const float4 l4 = *(const float4 *)&lrow[m * (CH / 2) + k4];
                const float lv[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    if (2 * (k4 + u) + p > m) x[k4 + u] = __fmaf_rn(-lv[u], xm, x[k4 + u]);
            }
        }
        uint16_t *hi = (uint16_t *)out, *lo = (uint16_t *)(out + PLANE);
        const float bj = beta[j];
#pragma unroll
        for (int k = 0; k < CH / 2; ++k) {
            uint16_t vh, vl;
            split(__fmul_rn(x[k], bj), vh, vl);
            hi[(2 * k + p) * CH + j] = vh, lo[(2 * k + p) * CH + j] = vl;
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
struct scan_smem {
    scan_stage st[2];
    uint16_t shi[NS * LDK], slo[NS * LDK]; /* S0 as [value column][key row] */
    uint16_t xhi[NS * LDC], xlo[NS * LDC]; /* X = V - diag(G) K S0, [column][token] */
    uint16_t uhi[NS * LDC], ulo[NS * LDC]; /* U */
    uint16_t ehi[NS * LDC], elo[NS * LDC]; /* diag(e) U */
};

/* Issues the loads of one chunk's inputs (tokens tc .., n live) into a stage; hk = h / group. Thread tid copies
 * fixed pieces: its rows of q and k (load_rows), piece tid % 4 of v's row tid / 4, piece tid % 8 of row tid / 8
 * of each workspace plane, and piece tid of the gates. */
__device__ __forceinline__ void load_stage(scan_stage &st, const gdn_dev_args &a, const uint8_t *wsc, int64_t h,
                                           int64_t hk, int64_t s, int64_t tc, int n, int tid) {
    static_assert(SCAN_THREADS == CH * (CH / 8) && SCAN_THREADS >= CH * (NS / 8) &&
                      SCAN_THREADS >= (int)(sizeof(chunk_gates) / 16),
                  "one piece of each plane a thread");
    static_assert(offsetof(scan_stage, alo) == offsetof(scan_stage, ahi) + sizeof(scan_stage::ahi) &&
                      offsetof(scan_stage, phi) == offsetof(scan_stage, alo) + sizeof(scan_stage::ahi) &&
                      offsetof(scan_stage, plo) == offsetof(scan_stage, phi) + sizeof(scan_stage::ahi),
                  "the four planes in a row");
    load_rows<SCAN_THREADS>(st.q, a.q, a.Hk, hk, tc, n, tid);
    load_rows<SCAN_THREADS>(st.k, a.k, a.Hk, hk, tc, n, tid);
    if (tid < CH * (NS / 8)) {
        const int r = tid / (NS / 8), piece = tid % (NS / 8);
        const uint16_t *src = (const uint16_t *)a.v + ((tc + (r < n ? r : n - 1)) * a.Hv + h) * a.Dv + NS * s + piece * 8;
        cp16(st.v + r * LDV + piece * 8, src, r < n ? 16 : 0);
    }
    {
        const int r = tid / (CH / 8), piece = tid % (CH / 8);
        const uint8_t *src = wsc + r * (CH * 2) + piece * 16;
        uint16_t *dst = st.ahi + r * LDC + piece * 8;
#pragma unroll
        for (int plane = 0; plane < 4; ++plane) cp16(dst + plane * (CH * LDC), src + plane * PLANE, 16);
    }
    if (tid < (int)(sizeof(chunk_gates) / 16)) cp16((uint8_t *)&st.gt + 16 * tid, wsc + 4 * PLANE + 16 * tid, 16);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* A pair x0, x1 as packed bf16 hi + lo (x0 in the low halves): split() of each, two at a time. */
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(x1), "f"(x0));
    const float h0 = __uint_as_float(hi << 16), h1 = __uint_as_float(hi & 0xffff0000u);
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(__fsub_rn(x1, h1)), "f"(__fsub_rn(x0, h0)));
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

/* The scan's warps. Row warps w < 8 hold a [16, 16] tile of the [C, 32] products (two 8-column tiles): rows 16 mt ..,
 * columns 16 ch .., with (mt, ch) = (w, 0) for w < 4 and (7 - w, 1) for w >= 4, so that the two row warps of a
 * scheduler (w % 4) hold row blocks j and 3 - j and the lower-triangular products give each scheduler 5 k blocks.
 * State warps w >= 8 hold the state's key rows 16 (w - 8) .. + 15, all 32 columns (four tiles). A fragment of the
 * input rows or of a plane is loaded once for two (row warps) or four (state warps) tiles. */

/* K S0 and Q S0 for a row warp's tiles (rows m0 .., columns n0 .. + 15): input rows times the state's planes. */
/* SLO = 0: the state by its hi plane alone (the variants "*_shi"; dev/chunk_split_numerics.py). */
template <int DT, int SLO>
__device__ __forceinline__ void times_state(float (&ks0)[2][4], float (&qs0)[2][4], const scan_stage &st,
                                            const scan_smem &sm, int m0, int n0, int lane) {
#pragma unroll
    for (int kb = 0; kb < DK / 16; ++kb) {
        /* b: SLO, tile nt's hi (b[nt][0, 1]) and lo (2, 3); else both tiles' hi in b[0] (tile nt at 2 nt) */
        uint32_t b[2][4], rk[4], kh[4], kl[4], rq[4], qh[4], ql[4];
        if (SLO)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) ldsm_b2(b[nt], sm.shi, sm.slo, n0 + 8 * nt, LDK, 16 * kb, lane);
        else
            ldsm_b2(b[0], sm.shi, sm.shi + 8 * LDK, n0, LDK, 16 * kb, lane);
        auto frag = [&](int nt, int half, int i) { return SLO ? b[nt][2 * half + i] : b[0][2 * nt + i]; };
        ldsm_a(rk, st.k, LDK, m0, 16 * kb, lane);
        ldsm_a(rq, st.q, LDK, m0, 16 * kb, lane);
        in_frag<DT>(kh, kl, rk);
        in_frag<DT>(qh, ql, rq);
#pragma unroll
        for (int half = 0; half < 1 + SLO; ++half) /* the state's hi, then lo */
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                mma(ks0[nt], kh, frag(nt, half, 0), frag(nt, half, 1));
                mma(qs0[nt], qh, frag(nt, half, 0), frag(nt, half, 1));
            }
        if (DT == GDN_F16)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                mma(ks0[nt], kl, frag(nt, 0, 0), frag(nt, 0, 1));
                mma(qs0[nt], ql, frag(nt, 0, 0), frag(nt, 0, 1));
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
 * chunk at token tc with n live, columns col0 + 8 nt + 2 t (+ 1) of head h), rounded to the dtype; masked tokens 0. */
template <int DT, int NT>
__device__ __forceinline__ void put_y(const gdn_dev_args &a, const float *G, int64_t tc, int n, int64_t h, int64_t col0,
                                      int r0, int t, const float *qs, const float *pu) {
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
                const float v = __fmul_rn(a.scale, __fadd_rn(__fmul_rn(G[r], qs[i]), pu[i]));
                o[e] = DT == GDN_BF16 ? bf16_rn(live ? v : 0.0f) : f16_rn(live ? v : 0.0f);
            }
            *(uint32_t *)(yrow + 8 * nt) = pack(o[0], o[1]);
        }
    }
}

template <int DT, int SLO>
__global__ void __launch_bounds__(SCAN_THREADS, 1) gdn_chunk_scan(gdn_dev_args a, chunk_seqs sq, const uint8_t *ws) {
    gdn_grid_dependency_wait();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    scan_smem &sm = *(scan_smem *)smem_raw;
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = tid & 3;
    const bool row_warp = w < 8;
    /* a row warp's tiles: rows r0, r0 + 8; columns n0 + 8 nt + 2 t (+ 1) */
    const int mt = w < 4 ? w : 7 - w, r0 = 16 * mt + g, n0 = 16 * ((w >> 2) & 1);
    const int key0 = 16 * (w & 7) + g; /* a state warp's: key rows key0 (+ 8), columns 8 nt + 2 t (+ 1) */
    const int64_t len = sq.len[b], t0 = sq.t0[b], slot = sq.slot[b];
    const int chunks = sq.chunk0[b + 1] - sq.chunk0[b];
    const int64_t state = (slot * a.Hv + h) * a.Dk * a.Dv, hk = h / a.group;
    auto state_at = [&](int nt, int e) { /* the state entry of a state warp's element e of tile nt */
        const int64_t i = key0 + (e >> 1) * 8, j = NS * s + 8 * nt + 2 * t + (e & 1);
        return state + (a.layout == GDN_STATE_VK ? j * a.Dk + i : i * a.Dv + j);
    };
    float S[4][4]; /* a state warp's state in f32 */
    if (!row_warp)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) S[nt][e] = a.state_in ? a.state_in[state_at(nt, e)] : 0.0f;
    auto put_state = [&]() { /* a state warp's tiles into the state's [column][LDK] planes, transposed */
        const int m = lane >> 3;
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) { /* matrix 2 (nt - 2 pair) + q: keys key0 - g + 8 q .., columns 8 nt .. */
            uint32_t hi[4], lo[4];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                split2(S[2 * pair + i][0], S[2 * pair + i][1], hi[2 * i], lo[2 * i]);
                split2(S[2 * pair + i][2], S[2 * pair + i][3], hi[2 * i + 1], lo[2 * i + 1]);
            }
            const int off = (8 * (2 * pair + (m >> 1)) + (lane & 7)) * LDK + key0 - g + 8 * (m & 1);
            stsm4t(sm.shi + off, hi);
            if (SLO) stsm4t(sm.slo + off, lo);
        }
    };
    if (!row_warp) put_state();
    const uint8_t *wsb = ws + (int64_t)sq.chunk0[b] * a.Hv * WS_BYTES;
    load_stage(sm.st[0], a, wsb + (int64_t)h * WS_BYTES, h, hk, s, t0, (int)min((int64_t)CH, len), tid);
    for (int lc = 0; lc < chunks; ++lc) {
        const scan_stage &st = sm.st[lc & 1];
        const int64_t tc = t0 + (int64_t)lc * CH;
        const int n = (int)min((int64_t)CH, t0 + len - tc);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads(); /* the stage, and the state's planes, are in */
        if (lc + 1 < chunks)
            load_stage(sm.st[(lc + 1) & 1], a, wsb + ((int64_t)(lc + 1) * a.Hv + h) * WS_BYTES, h, hk, s, tc + CH,
                       (int)min((int64_t)CH, t0 + len - tc - CH), tid);
        float qs0[2][4] = {}; /* a row warp's Q S0, for y */
        if (row_warp) { /* X = V - diag(G) K S0, and Q S0 */
            float ks0[2][4] = {};
            times_state<DT, SLO>(ks0, qs0, st, sm, 16 * mt, n0, lane);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                float x[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = r0 + (e >> 1) * 8, col = n0 + 8 * nt + 2 * t + (e & 1);
                    x[e] = __fsub_rn(in_f32<DT>(st.v[r * LDV + col]), __fmul_rn(st.gt.G[r], ks0[nt][e]));
                }
                put_cols(sm.xhi, sm.xlo, 16 * mt, n0 + 8 * nt, x, lane);
            }
        }
        __syncthreads(); /* X */
        if (row_warp) { /* U = A X; and diag(e) U */
            float u[2][4] = {};
            lower(u, st.ahi, st.alo, sm.xhi, sm.xlo, mt, n0, lane);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                float eu[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) eu[e] = __fmul_rn(st.gt.e[r0 + (e >> 1) * 8], u[nt][e]);
                put_cols(sm.uhi, sm.ulo, 16 * mt, n0 + 8 * nt, u[nt], lane);
                put_cols(sm.ehi, sm.elo, 16 * mt, n0 + 8 * nt, eu, lane);
            }
        }
        __syncthreads(); /* U */
        if (row_warp) { /* y = scale (diag(G) Q S0 + P U) */
            float pu[2][4] = {};
            lower(pu, st.phi, st.plo, sm.uhi, sm.ulo, mt, n0, lane);
            put_y<DT, 2>(a, st.gt.G, tc, n, h, NS * s + n0, r0, t, &qs0[0][0], &pu[0][0]);
        } else { /* S = G_{n-1} S0 + K^T diag(e) U */
            float ku[4][4] = {};
#pragma unroll
            for (int kb = 0; kb < CH / 16; ++kb) {
                uint32_t raw[4], kh[4], kl[4]; /* K^T (row = key, column = token): the k tile's 8 x 8 blocks transposed */
                ldsm4t(raw, st.k + (16 * kb + (lane & 7) + 8 * (lane >> 4)) * LDK + key0 - g + 8 * ((lane >> 3) & 1));
                in_frag<DT>(kh, kl, raw);
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    uint32_t be[4]; /* diag(e) U's hi (0, 1) and lo (2, 3) */
                    ldsm_b2(be, sm.ehi, sm.elo, 8 * nt, LDC, 16 * kb, lane);
                    mma(ku[nt], kh, be[0], be[1]);
                    mma(ku[nt], kh, be[2], be[3]);
                    if (DT == GDN_F16) mma(ku[nt], kl, be[0], be[1]);
                }
            }
            const float Gn = st.gt.G[n - 1];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) S[nt][e] = __fadd_rn(__fmul_rn(Gn, S[nt][e]), ku[nt][e]);
            put_state(); /* the planes' readers (K S0, Q S0) are behind the barriers above */
        }
    }
    if (a.state_out && !row_warp)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) a.state_out[state_at(nt, e)] = S[nt][e];
}

/* ---- The warpgroup scan (bf16 on sm_90a): the same products, the same sums ----
 * wgmma m64n32k16 reads both operands from shared memory once per warpgroup; its f32 sums over a k step equal a
 * chain of mma.sync m16n8k16 over the same k steps bit for bit (dev/wgmma_probe.cu), so this scan returns the mma
 * scan's bits. Operand tiles are unswizzled core matrices (8 rows of 8 bf16, 128 contiguous bytes), row-major by
 * block, those of the stage 144 bytes apart, the planes the scan writes 128; descriptors: K-major LBO = the next
 * core matrix along k, SBO = the next along m / n; K^T from the [token][key] tile with A transposed: LBO = the next
 * along k (8 tokens), SBO = the next along m (8 keys). Warpgroups:
 *   WG0  K S0 -> X = V - diag(G) K S0 (planes), then U = A X -> U and diag(e) U (planes)
 *   WG1  Q S0 (registers), then y = scale (diag(G) Q S0 + P U)
 *   WG2, WG3  the state's keys 0 .. 63 and 64 .. 127 in f32 registers: S = G_{n-1} S0 + K^T diag(e) U, its planes;
 *             and the copies of the next chunk's stage. */
constexpr int WG_THREADS = 512;
constexpr int PAD = 72; /* elements from one core matrix of a stage tile to the next: 128 bytes and 16 of padding */

struct wg_stage {
    uint16_t q[PAD * (CH / 8) * (DK / 8)], k[PAD * (CH / 8) * (DK / 8)]; /* [token][key], padded, 16 along keys */
    uint16_t v[CH * LDV];                                        /* [token][column], row-major */
    uint16_t ahi[PAD * (CH / 8) * (CH / 8)], alo[PAD * (CH / 8) * (CH / 8)]; /* [i][j], padded, 8 along j */
    uint16_t phi[PAD * (CH / 8) * (CH / 8)], plo[PAD * (CH / 8) * (CH / 8)];
    chunk_gates gt;
};
struct wg_smem {
    wg_stage st[2];
    uint16_t shi[NS * DK], slo[NS * DK];                         /* S0 as [column][key], 16 along keys */
    uint16_t xhi[NS * CH], xlo[NS * CH], uhi[NS * CH], ulo[NS * CH], ehi[NS * CH], elo[NS * CH]; /* [column][token] */
};
static_assert(sizeof(wg_stage) % 128 == 0 && sizeof(chunk_gates) % 128 == 0 && (CH * LDV * 2) % 128 == 0,
              "every tile 128-byte aligned");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Element offset of (r, c) in a tile of core matrices with cb of them along c. */
__device__ __forceinline__ int core(int r, int c, int cb) { return ((r >> 3) * cb + (c >> 3)) * 64 + (r & 7) * 8 + (c & 7); }
/* The same in a stage tile, whose core matrices lie 144 bytes apart: the 16-byte pieces of a row (one 128-byte run
 * of global memory, 8 lanes of a copy) land in 8 different bank groups. */
__device__ __forceinline__ int core_p(int r, int c, int cb) { return ((r >> 3) * cb + (c >> 3)) * PAD + (r & 7) * 8 + (c & 7); }

/* The descriptor of an unswizzled operand at p (byte strides lbo, sbo). Shared addresses lie below 2^18, so the
 * start field (address / 16, 14 bits) of p + e elements (e a multiple of 8) is that of p plus e / 8: the k steps
 * below add to one descriptor a tile. */
__device__ __forceinline__ uint64_t wg_desc(const uint16_t *p, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}
/* a K-major operand: rows of tile (cb core matrices along k) from row 0, k step kb */
__device__ __forceinline__ uint64_t wg_kmajor(const uint16_t *tile, int cb, int kb) {
    return wg_desc(tile, 128, 128 * cb) + (uint64_t)(core(0, 16 * kb, cb) >> 3);
}
/* the same of a padded stage tile */
__device__ __forceinline__ uint64_t wg_kmajor_p(const uint16_t *tile, int cb, int kb) {
    return wg_desc(tile, 2 * PAD, 2 * PAD * cb) + (uint64_t)(core_p(0, 16 * kb, cb) >> 3);
}
/* d += A B, one k step; A transposed when TA */
template <int TA>
__device__ __forceinline__ void wgmma(float (&d)[16], uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1, %18, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15])
                 : "l"(da), "l"(db), "n"(TA));
}
/* The accumulator's registers pinned at this point: its zeros are set before the fence, its sums read after the
 * wait. Else ptxas injects warpgroup.arrive (C7519) and, in the role branches, serializes every wgmma (C7520):
 * the test wgmma_not_serialized reads its report. */
__device__ __forceinline__ void wg_hold(float (&d)[16]) {
    asm volatile("" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 :: "memory");
}
__device__ __forceinline__ void wg_begin(float (&d)[16]) {
    wg_hold(d);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_end(float (&d)[16]) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    wg_hold(d);
}
/* shared-memory writes of this thread (stores, stmatrix, cp.async) visible to the next wgmma reads */
__device__ __forceinline__ void to_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* acc (a warpgroup's [64, 32]: warp wi's rows 16 wi + g (+ 8), tile nt = i / 4, columns 8 nt + 2 t (+ 1)) +=
 * (Ahi + Alo) (Bhi + Blo) over 64 k: each k block hi hi, hi lo, lo hi (as lower()). */
__device__ __forceinline__ void wg_pair(float (&acc)[16], const uint16_t *ahi, const uint16_t *alo, const uint16_t *bhi,
                                        const uint16_t *blo) {
    wg_begin(acc);
#pragma unroll
    for (int kb = 0; kb < CH / 16; ++kb) {
        wgmma<0>(acc, wg_kmajor_p(ahi, CH / 8, kb), wg_kmajor(bhi, CH / 8, kb));
        wgmma<0>(acc, wg_kmajor_p(ahi, CH / 8, kb), wg_kmajor(blo, CH / 8, kb));
        wgmma<0>(acc, wg_kmajor_p(alo, CH / 8, kb), wg_kmajor(bhi, CH / 8, kb));
    }
    wg_end(acc);
}
/* acc += X S0 for an input tile x ([token][key]): each k block the state's hi, then (SLO) lo (as times_state()) */
template <int SLO>
__device__ __forceinline__ void wg_times_state(float (&acc)[16], const uint16_t *x, const wg_smem &sm) {
    wg_begin(acc);
#pragma unroll
    for (int kb = 0; kb < DK / 16; ++kb) {
        wgmma<0>(acc, wg_kmajor_p(x, DK / 8, kb), wg_kmajor(sm.shi, DK / 8, kb));
        if (SLO) wgmma<0>(acc, wg_kmajor_p(x, DK / 8, kb), wg_kmajor(sm.slo, DK / 8, kb));
    }
    wg_end(acc);
}

/* A C fragment v (rows m0 .. m0 + 15, columns c0 .. c0 + 7) into a pair of [column][m] core tiles (cb core
 * matrices along m), transposed: hi and lo in one stmatrix. */
__device__ __forceinline__ void put_core(uint16_t *hi, uint16_t *lo, int cb, int m0, int c0, const float *v, int lane) {
    uint32_t r[4];
    split2(v[0], v[1], r[0], r[2]);
    split2(v[2], v[3], r[1], r[3]);
    const int m = lane >> 3;
    stsm4t((m < 2 ? hi : lo) + core(c0 + (lane & 7), m0 + 8 * (m & 1), cb), r);
}
/* the same, hi only: matrices 0 and 1 (rows m0 .., m0 + 8 ..) by lanes 0 .. 15 */
__device__ __forceinline__ void put_core_hi(uint16_t *hi, int cb, int m0, int c0, const float *v, int lane) {
    uint32_t r0, r1;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r0) : "f"(v[1]), "f"(v[0]));
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r1) : "f"(v[3]), "f"(v[2]));
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};\n" ::"r"(
                     smem_addr(hi + core(c0 + (lane & 7), m0 + 8 * ((lane >> 3) & 1), cb))),
                 "r"(r0), "r"(r1)
                 : "memory");
}

/* load_stage() for the core-matrix stage, issued by the 256 threads of WG2 and WG3 (l = tid - 256), which idle
 * while K S0 and U = A X run, so that the proxy fences of WG0 and WG1 find none of these copies in flight. Eight
 * lanes copy one 128-byte run of a row (coalesced), into 8 bank groups of the padded tile: piece p of q and k is
 * row p / 16, columns 8 (p % 16); of a plane row p / 8, columns 8 (p % 8); v's piece l is row l / 4, columns
 * 8 (l % 4); the gates' piece l. */
constexpr int WG_LOADERS = 256;
__device__ __forceinline__ void wg_load_stage(wg_stage &st, const gdn_dev_args &a, const uint8_t *wsc, int64_t h,
                                              int64_t hk, int64_t s, int64_t tc, int n, int l) {
    static_assert(WG_LOADERS == CH * (NS / 8) && (CH * DK / 8) % WG_LOADERS == 0 && (CH * CH / 8) % WG_LOADERS == 0 &&
                      WG_LOADERS >= (int)(sizeof(chunk_gates) / 16),
                  "whole pieces a thread");
    const int64_t stride = a.Hk * DK, row0 = (tc * a.Hk + hk) * DK;
#pragma unroll
    for (int i = 0; i < CH * DK / 8 / WG_LOADERS; ++i) {
        const int p = l + WG_LOADERS * i, r = p >> 4, c = 8 * (p & 15);
        const int64_t off = row0 + (r < n ? r : n - 1) * stride + c;
        cp16(st.q + core_p(r, c, DK / 8), (const uint16_t *)a.q + off, r < n ? 16 : 0);
        cp16(st.k + core_p(r, c, DK / 8), (const uint16_t *)a.k + off, r < n ? 16 : 0);
    }
    {
        const int r = l / (NS / 8), piece = l % (NS / 8);
        const uint16_t *src = (const uint16_t *)a.v + ((tc + (r < n ? r : n - 1)) * a.Hv + h) * a.Dv + NS * s + piece * 8;
        cp16(st.v + r * LDV + piece * 8, src, r < n ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < CH * CH / 8 / WG_LOADERS; ++i) {
        const int p = l + WG_LOADERS * i, r = p >> 3, c = 8 * (p & 7);
        cp16(st.ahi + core_p(r, c, CH / 8), wsc + 0 * PLANE + r * (CH * 2) + c * 2, 16);
        cp16(st.alo + core_p(r, c, CH / 8), wsc + 1 * PLANE + r * (CH * 2) + c * 2, 16);
        if (c < 16 * ((r >> 4) + 1)) { /* P's 16 x 16 blocks right of the diagonal: never written, zeros (below) */
            cp16(st.phi + core_p(r, c, CH / 8), wsc + 2 * PLANE + r * (CH * 2) + c * 2, 16);
            cp16(st.plo + core_p(r, c, CH / 8), wsc + 3 * PLANE + r * (CH * 2) + c * 2, 16);
        }
    }
    if (l < (int)(sizeof(chunk_gates) / 16)) cp16((uint8_t *)&st.gt + 16 * l, wsc + 4 * PLANE + 16 * l, 16);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Named barrier 1: WG0's own (X, written and read by it). */
__device__ __forceinline__ void wg0_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }
#endif

template <int SLO>
__global__ void __launch_bounds__(WG_THREADS, 1) gdn_chunk_scan_wg(gdn_dev_args a, chunk_seqs sq, const uint8_t *ws) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    gdn_grid_dependency_wait();
    extern __shared__ __align__(128) uint8_t wg_smem_raw[];
    wg_smem &sm = *(wg_smem *)wg_smem_raw;
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, wi = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
    const int r0 = 16 * wi + g; /* a thread's accumulator rows r0, r0 + 8 (of its warpgroup's 64) */
    const int key0 = 64 * (wg - 2) + r0; /* WG2, WG3: the state's key rows key0 (+ 8), columns 8 nt + 2 t (+ 1) */
    const int64_t len = sq.len[b], t0 = sq.t0[b], slot = sq.slot[b];
    const int chunks = sq.chunk0[b + 1] - sq.chunk0[b];
    const int64_t state = (slot * a.Hv + h) * a.Dk * a.Dv, hk = h / a.group;
    auto state_at = [&](int i) { /* the state entry of accumulator element i */
        const int64_t key = key0 + ((i >> 1) & 1) * 8, j = NS * s + 8 * (i >> 2) + 2 * t + (i & 1);
        return state + (a.layout == GDN_STATE_VK ? j * a.Dk + key : key * a.Dv + j);
    };
    float S[16]; /* WG2, WG3: the state in f32 */
    auto put_state = [&]() {
#pragma unroll
        for (int nt = 0; nt < NS / 8; ++nt) {
            if (SLO) put_core(sm.shi, sm.slo, DK / 8, key0 - g, 8 * nt, &S[4 * nt], lane);
            else put_core_hi(sm.shi, DK / 8, key0 - g, 8 * nt, &S[4 * nt], lane);
        }
        to_async_proxy();
    };
    if (wg >= 2) {
#pragma unroll
        for (int i = 0; i < 16; ++i) S[i] = a.state_in ? a.state_in[state_at(i)] : 0.0f;
        put_state();
    } else { /* zeros in P's blocks right of the diagonal (the prep writes none there; wgmma reads all of P) */
        for (int p = tid; p < 2 * CH * CH / 8; p += 256) {
            const int r = (p >> 3) & (CH - 1), c = 8 * (p & 7);
            if (c < 16 * ((r >> 4) + 1)) continue;
            wg_stage &z = sm.st[p / (CH * CH / 8)];
            *(uint4 *)(z.phi + core_p(r, c, CH / 8)) = make_uint4(0u, 0u, 0u, 0u);
            *(uint4 *)(z.plo + core_p(r, c, CH / 8)) = make_uint4(0u, 0u, 0u, 0u);
        }
    }
    const uint8_t *wsb = ws + (int64_t)sq.chunk0[b] * a.Hv * WS_BYTES;
    if (wg >= 2) wg_load_stage(sm.st[0], a, wsb + (int64_t)h * WS_BYTES, h, hk, s, t0, (int)min((int64_t)CH, len), tid - 256);
    for (int lc = 0; lc < chunks; ++lc) {
        const wg_stage &st = sm.st[lc & 1];
        const int64_t tc = t0 + (int64_t)lc * CH;
        const int n = (int)min((int64_t)CH, t0 + len - tc);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        to_async_proxy();
        __syncthreads(); /* the stage, and the state's planes, are in */
        if (lc + 1 < chunks && wg >= 2)
            wg_load_stage(sm.st[(lc + 1) & 1], a, wsb + ((int64_t)(lc + 1) * a.Hv + h) * WS_BYTES, h, hk, s, tc + CH,
                          (int)min((int64_t)CH, t0 + len - tc - CH), tid - 256);
        float qs0[16] = {}; /* WG1's Q S0, for y */
        if (wg == 0) { /* X = V - diag(G) K S0 */
            float ks0[16] = {};
            wg_times_state<SLO>(ks0, st.k, sm);
#pragma unroll
            for (int nt = 0; nt < NS / 8; ++nt) {
                float x[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = r0 + (e >> 1) * 8, col = 8 * nt + 2 * t + (e & 1);
                    x[e] = __fsub_rn(bf16_f32(st.v[r * LDV + col]), __fmul_rn(st.gt.G[r], ks0[4 * nt + e]));
                }
                put_core(sm.xhi, sm.xlo, CH / 8, 16 * wi, 8 * nt, x, lane);
            }
            to_async_proxy();
            wg0_sync(); /* X */
            /* U = A X; and diag(e) U */
            float u[16] = {};
            wg_pair(u, st.ahi, st.alo, sm.xhi, sm.xlo);
#pragma unroll
            for (int nt = 0; nt < NS / 8; ++nt) {
                float eu[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) eu[e] = __fmul_rn(st.gt.e[r0 + (e >> 1) * 8], u[4 * nt + e]);
                put_core(sm.uhi, sm.ulo, CH / 8, 16 * wi, 8 * nt, &u[4 * nt], lane);
                put_core(sm.ehi, sm.elo, CH / 8, 16 * wi, 8 * nt, eu, lane);
            }
            to_async_proxy();
        } else if (wg == 1) {
            wg_times_state<SLO>(qs0, st.q, sm);
        }
        __syncthreads(); /* U */
        if (wg == 1) { /* y = scale (diag(G) Q S0 + P U) */
            float pu[16] = {};
            wg_pair(pu, st.phi, st.plo, sm.uhi, sm.ulo);
            put_y<GDN_BF16, NS / 8>(a, st.gt.G, tc, n, h, NS * s, r0, t, qs0, pu);
        } else if (wg >= 2) { /* S = G_{n-1} S0 + K^T diag(e) U */
            float ku[16] = {};
            wg_begin(ku);
#pragma unroll
            for (int kb = 0; kb < CH / 16; ++kb) {
                const uint64_t kt = wg_desc(st.k + core_p(0, 64 * (wg - 2), DK / 8), 2 * PAD * (DK / 8), 2 * PAD) +
                                    (uint64_t)(core_p(16 * kb, 0, DK / 8) >> 3);
                wgmma<1>(ku, kt, wg_kmajor(sm.ehi, CH / 8, kb));
                wgmma<1>(ku, kt, wg_kmajor(sm.elo, CH / 8, kb));
            }
            wg_end(ku);
            const float Gn = st.gt.G[n - 1];
#pragma unroll
            for (int i = 0; i < 16; ++i) S[i] = __fadd_rn(__fmul_rn(Gn, S[i]), ku[i]);
            put_state(); /* the planes' readers (K S0, Q S0) are behind the barriers above */
        }
    }
    if (a.state_out && wg >= 2)
#pragma unroll
        for (int i = 0; i < 16; ++i) a.state_out[state_at(i)] = S[i];
#else
    (void)a, (void)sq, (void)ws;
    __trap(); /* launched only where the sm_90a code is in the build (chunked_wgmma()) */
#endif
}

/* Lets a scan kernel launch with the opt-in shared memory (once per instantiation). */
template <int DT, int WG, int SLO, typename Kernel>
gdn_status allow(Kernel kernel) {
    static int done = 0;
    return gdn_cuda_allow_smem(kernel, &done);
}

/* The warpgroup scan can run: this file was built with sm_90a code (CMakeLists.txt) and the current device is
 * compute capability 9.0 (read once per device). */
int wgmma_ready(void) {
#ifdef GDN_CHUNKED_WGMMA
    static int known[64]; /* 0 unknown, 1 yes, 2 no */
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    const int cached = dev >= 0 && dev < 64;
    int v = cached ? __atomic_load_n(&known[dev], __ATOMIC_RELAXED) : 0;
    if (v == 0) {
        v = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                    major == 9 && minor == 0
                ? 1
                : 2;
        if (cached) __atomic_store_n(&known[dev], v, __ATOMIC_RELAXED);
    }
    return v == 1;
#else
    return 0;
#endif
}

/* One launch pair over the sequences of sq (their chunks in ws) with scan WG (the warpgroup scan, bf16) and SLO (the
 * state's lo plane in K S0 and Q S0). */
template <int DT, int WG, int SLO>
gdn_status launch(const gdn__problem *p, const chunk_seqs &sq, uint8_t *ws) {
    const gdn_dev_args d = gdn_dev_args_of(p);
    cudaStream_t stream = (cudaStream_t)p->a.stream;
    auto scan = [&]() {
        if constexpr (WG) return gdn_chunk_scan_wg<SLO>;
        else return gdn_chunk_scan<DT, SLO>;
    }();
    if (allow<DT, WG, SLO>(scan) != GDN_OK) return GDN_ERR_DEVICE;
    /* both by programmatic dependent launch: each waits for the kernel before it, first thing */
    if (gdn_launch_pdl(gdn_chunk_prep<DT>, dim3((unsigned)sq.chunk0[sq.n], (unsigned)p->a.Hv), PREP_THREADS, 0, stream,
                       d, sq, ws) != GDN_OK)
        return GDN_ERR_DEVICE;
    const dim3 grid((unsigned)(p->a.Dv / NS), (unsigned)p->a.Hv, (unsigned)sq.n);
    return gdn_launch_pdl(scan, grid, WG ? WG_THREADS : SCAN_THREADS, WG ? (int)sizeof(wg_smem) : (int)sizeof(scan_smem),
                          stream, d, sq, (const uint8_t *)ws);
}

/* launch() for a variant's mode: bit 0 the warpgroup scan (bf16 only), bit 1 the state's hi plane alone. */
template <int DT>
gdn_status launch_mode(const gdn__problem *p, const chunk_seqs &sq, uint8_t *ws, int mode) {
    if constexpr (DT == GDN_BF16) {
        if (mode & 1) return mode & 2 ? launch<DT, 1, 0>(p, sq, ws) : launch<DT, 1, 1>(p, sq, ws);
    }
    return mode & 2 ? launch<DT, 0, 0>(p, sq, ws) : launch<DT, 0, 1>(p, sq, ws);
}

} /* namespace */

extern "C" {

/* bf16 or f16; Dk = 128; Dv a multiple of 32; a log-decay or raw gate; q, k, v 16-byte aligned, y 4-byte; windows
 * below 2^31 tokens; the scan's shared memory available; the head grid within launch limits. */
int gdn__delta_cuda_chunked_eligible(const gdn__problem *p) {
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

/* The scans (mode): "wgmma" the warpgroup scan (bf16 where wgmma_ready()), "mma" the mma.sync scan; both give the
 * same bits. "*_shi": the same with the state's hi plane alone in K S0 and Q S0 (half of those products; other bits,
 * the two still equal to each other). Unnamed: "mma". */
const gdn__variant gdn__delta_cuda_chunked_variants[] = {
    {"wgmma", 0, 0, 0, 0, 0, 1, 0}, {"mma", 0, 0, 0, 0, 0, 0, 0}, {"wgmma_shi", 0, 0, 0, 0, 0, 3, 0},
    {"mma_shi", 0, 0, 0, 0, 0, 2, 0}, {NULL, 0, 0, 0, 0, 0, 0, 0}};

} /* extern "C" */

namespace {

/* The sequences of a call, SEQS per launch pair: the dense form's B windows of T tokens (state entry b), or the
 * batch form's windows and slots (p as validated, before any split); a skipped sequence's y rows are zeroed.
 * mode: the variant's (launch_mode()); take: as gdn__cuda_chunked_sequences's. */
gdn_status sequences(const gdn__problem *p, int mode, const uint8_t *take) {
    const gdn_delta_args *a = &p->a;
    int64_t most = 0; /* the most chunks of one launch: the workspace's size */
    for (int pass = 0; pass < 2; ++pass) {
        uint8_t *ws = NULL;
        if (pass == 1 && most > 0) { /* none when every sequence is skipped: their rows are only zeroed */
            if (cudaMallocAsync((void **)&ws, (size_t)most * (size_t)a->Hv * WS_BYTES, (cudaStream_t)a->stream) !=
                cudaSuccess) {
                (void)cudaGetLastError();
                return GDN_ERR_OUT_OF_MEMORY;
            }
        }
        gdn_status s = GDN_OK;
        chunk_seqs sq;
        sq.n = 0, sq.chunk0[0] = 0;
        auto flush = [&]() { /* pass 0 sizes the workspace, pass 1 launches */
            if (sq.n == 0 || s != GDN_OK) return;
            if (pass == 0) most = sq.chunk0[sq.n] > most ? sq.chunk0[sq.n] : most;
            else s = a->dtype == GDN_BF16 ? launch_mode<GDN_BF16>(p, sq, ws, mode) : launch_mode<GDN_F16>(p, sq, ws, mode);
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
        if (pass == 1) {
            const cudaError_t freed = ws ? cudaFreeAsync(ws, (cudaStream_t)a->stream) : cudaSuccess;
            return s != GDN_OK ? s : freed == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        }
    }
    return GDN_OK;
}

} /* namespace */

extern "C" {

gdn_status gdn__cuda_chunked_sequences(const gdn__problem *p, const gdn__variant *v, const uint8_t *take) {
    if (v && (v->mode & 1) && !(p->a.dtype == GDN_BF16 && wgmma_ready())) return GDN_ERR_INELIGIBLE;
    return sequences(p, v ? v->mode : 0, take); /* unnamed: the mma scan, measured faster (kernels/cuda_chunked.md) */
}

gdn_status gdn__delta_cuda_chunked(const gdn__problem *p, const gdn__variant *v) {
    if (!gdn__delta_cuda_chunked_eligible(p)) return GDN_ERR_INELIGIBLE;
    return gdn__cuda_chunked_sequences(p, v, NULL);
}

} /* extern "C" */
