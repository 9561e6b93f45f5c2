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
 * which is the recurrence of gdn.h token by token (decay, delta, write), regrouped. Two kernels:
 *   gdn_chunk_prep  one block per (chunk, head), all chunks at once: the segment sums, K K^T and Q K^T, the
 *                   unit-lower solve of A (binary32, one column per thread); A and P = d (q k^T) as bf16 hi + lo
 *                   planes, and the gate vectors, into a workspace.
 *   gdn_chunk_scan  one block per (sequence, head, 32 value columns), the chunks in order: K S0 and Q S0, U = A X,
 *                   P U and K^T diag(e) U on the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate); the
 *                   state stays in f32 registers and enters the products as bf16 hi + lo (16 bits), as X and U do.
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
constexpr int SCAN_THREADS = 256; /* 8 warps */
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

/* An input A fragment as hi (and lo for f16). */
template <int DT>
__device__ __forceinline__ void frag_a_in(uint32_t (&hi)[4], uint32_t (&lo)[4], const uint16_t *m, int m0, int k0,
                                          int g, int t) {
    uint32_t raw[4];
    frag_a(raw, m, LDK, m0, k0, g, t);
#pragma unroll
    for (int i = 0; i < 4; ++i) in_pair<DT>(raw[i], hi[i], lo[i]);
}
template <int DT>
__device__ __forceinline__ void frag_b_in(uint32_t (&hi)[2], uint32_t (&lo)[2], const uint16_t *m, int n0, int k0,
                                          int g, int t) {
    uint32_t raw[2];
    frag_b(raw, m, LDK, n0, k0, g, t);
#pragma unroll
    for (int i = 0; i < 2; ++i) in_pair<DT>(raw[i], hi[i], lo[i]);
}

/* acc[nt] += X[m0 .. m0+15] Y[n0 + 8 nt .. +7]^T over Dk, X and Y input tiles [row][LDK]; tiles nt >= live
 * skipped. Exact products for bf16; hi hi + hi lo + lo hi for f16. */
template <int DT, int NT>
__device__ __forceinline__ void gram(float (&acc)[NT][4], const uint16_t *x, int m0, const uint16_t *y, int n0,
                                     int live, int g, int t) {
#pragma unroll
    for (int ks = 0; ks < DK / 16; ++ks) {
        uint32_t ah[4], al[4];
        frag_a_in<DT>(ah, al, x, m0, 16 * ks, g, t);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if (nt >= live) continue;
            uint32_t bh[2], bl[2];
            frag_b_in<DT>(bh, bl, y, n0 + 8 * nt, 16 * ks, g, t);
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

/* The input rows tc .. tc + n - 1 of one head of q or k ([T, H, Dk]) into a [C][LDK] tile, zeros past n. */
__device__ __forceinline__ void load_rows(uint16_t *tile, const void *x, int64_t H, int64_t head, int64_t tc, int n,
                                          int tid, int threads) {
    for (int i = tid; i < CH * (DK / 8); i += threads) {
        const int r = i / (DK / 8), piece = i % (DK / 8);
        const uint16_t *src = (const uint16_t *)x + ((tc + (r < n ? r : n - 1)) * H + head) * DK + piece * 8;
        cp16(tile + r * LDK + piece * 8, src, r < n ? 16 : 0);
    }
}

/* The decay d_ij of a chunk's gates (0 across a segment start). */
__device__ __forceinline__ float decay(const chunk_gates &gs, int i, int j) {
    return gs.seg[i] == gs.seg[j] ? expf((float)(gs.r[i] - gs.r[j])) : 0.0f;
}

template <int DT>
__global__ void __launch_bounds__(PREP_THREADS) gdn_chunk_prep(gdn_dev_args a, chunk_seqs sq, uint8_t *ws) {
    __shared__ __align__(16) uint16_t ks[CH * LDK], qs[CH * LDK];
    float *lt = (float *)qs; /* after the products: L transposed, lt[j C + i] = L_ij */
    static_assert(sizeof(float) * CH * CH <= sizeof(uint16_t) * CH * LDK, "lt fits in the q tile");
    __shared__ double lg[CH];
    __shared__ float beta[CH];
    __shared__ __align__(16) chunk_gates gs;
    const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int b = seq_of(sq, c);
    const int64_t tc = sq.t0[b] + (int64_t)(c - sq.chunk0[b]) * CH;
    const int n = min(CH, (int)(sq.t0[b] + sq.len[b] - tc));
    load_rows(ks, a.k, a.Hk, h / a.group, tc, n, tid, PREP_THREADS);
    load_rows(qs, a.q, a.Hk, h / a.group, tc, n, tid, PREP_THREADS);
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
    if (tid == 0) { /* the segment sums, in token order */
        double r = 0.0;
        int seg = 0;
        for (int i = 0; i < CH; ++i) {
            if (lg[i] == -INFINITY) ++seg, r = 0.0;
            else r += lg[i];
            gs.r[i] = r, gs.seg[i] = seg;
        }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    if (tid < CH) {
        gs.G[tid] = gs.seg[tid] == 0 ? (float)exp(gs.r[tid]) : 0.0f;
        gs.e[tid] = tid < n && gs.seg[tid] == gs.seg[n - 1] ? (float)exp(gs.r[n - 1] - gs.r[tid]) : 0.0f;
    }
    uint8_t *out = ws + ((int64_t)c * a.Hv + h) * WS_BYTES;
    /* warp w's strip of rows 16 w .. 16 w + 15, its tiles left of the diagonal and on it */
    { /* P = d (q k^T), j <= i, straight to its planes */
        float acc[8][4] = {};
        gram<DT, 8>(acc, qs, 16 * w, ks, 0, 2 * w + 2, g, t);
        uint16_t *phi = (uint16_t *)(out + 2 * PLANE), *plo = (uint16_t *)(out + 3 * PLANE);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            if (nt >= 2 * w + 2) continue;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int i = 16 * w + g + 8 * half, j = 8 * nt + 2 * t;
                uint16_t hi[2], lo[2];
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    split(j + e <= i ? __fmul_rn(decay(gs, i, j + e), acc[nt][2 * half + e]) : 0.0f, hi[e], lo[e]);
                *(uint32_t *)&phi[i * CH + j] = pack(hi[0], hi[1]);
                *(uint32_t *)&plo[i * CH + j] = pack(lo[0], lo[1]);
            }
        }
    }
    float kk[8][4] = {}; /* L = beta_i d_ij (k_i . k_j), j < i */
    gram<DT, 8>(kk, ks, 16 * w, ks, 0, 2 * w + 2, g, t);
    __syncthreads(); /* the q tile is read: lt takes its place */
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        if (nt >= 2 * w + 2) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = 16 * w + g + (e >> 1) * 8, j = 8 * nt + 2 * t + (e & 1);
            lt[j * CH + i] = j < i ? __fmul_rn(__fmul_rn(beta[i], decay(gs, i, j)), kk[nt][e]) : 0.0f;
        }
    }
    __syncthreads();
    if (tid < CH) { /* column j = tid of (I + L)^-1 by forward substitution, right-looking; then A = T diag(beta) */
        float x[CH];
#pragma unroll
        for (int i = 0; i < CH; ++i) x[i] = i == tid ? 1.0f : 0.0f;
#pragma unroll
        for (int m = 0; m < CH; ++m)
#pragma unroll
            for (int i = m + 1; i < CH; ++i) x[i] = __fmaf_rn(-lt[m * CH + i], x[m], x[i]);
        uint16_t *hi = (uint16_t *)out, *lo = (uint16_t *)(out + PLANE);
        const float bj = beta[tid];
#pragma unroll
        for (int i = 0; i < CH; ++i) {
            uint16_t vh, vl;
            split(__fmul_rn(x[i], bj), vh, vl);
            hi[i * CH + tid] = vh, lo[i * CH + tid] = vl;
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

/* Issues the loads of one chunk's inputs (tokens tc .., n live) into a stage. */
__device__ __forceinline__ void load_stage(scan_stage &st, const gdn_dev_args &a, const uint8_t *wsc, int64_t h,
                                           int64_t s, int64_t tc, int n, int tid) {
    const int64_t hk = h / a.group;
    load_rows(st.q, a.q, a.Hk, hk, tc, n, tid, SCAN_THREADS);
    load_rows(st.k, a.k, a.Hk, hk, tc, n, tid, SCAN_THREADS);
    for (int i = tid; i < CH * (NS / 8); i += SCAN_THREADS) {
        const int r = i / (NS / 8), piece = i % (NS / 8);
        const uint16_t *src = (const uint16_t *)a.v + ((tc + (r < n ? r : n - 1)) * a.Hv + h) * a.Dv + NS * s + piece * 8;
        cp16(st.v + r * LDV + piece * 8, src, r < n ? 16 : 0);
    }
    for (int i = tid; i < 4 * CH * (CH / 8); i += SCAN_THREADS) {
        const int plane = i / (CH * (CH / 8)), r = (i / (CH / 8)) % CH, piece = i % (CH / 8);
        uint16_t *dst = plane == 0 ? st.ahi : plane == 1 ? st.alo : plane == 2 ? st.phi : st.plo;
        cp16(dst + r * LDC + piece * 8, wsc + plane * PLANE + r * (CH * 2) + piece * 16, 16);
    }
    for (int i = tid; i < (int)(sizeof(chunk_gates) / 16); i += SCAN_THREADS)
        cp16((uint8_t *)&st.gt + 16 * i, wsc + 4 * PLANE + 16 * i, 16);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Writes a C fragment's 2 x 2 values at rows r, r + 8, columns c, c + 1 into a [column][LDC] pair of planes. */
__device__ __forceinline__ void put_cols(uint16_t *hi, uint16_t *lo, int r, int c, const float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int row = r + (e >> 1) * 8, col = c + (e & 1);
        split(v[e], hi[col * LDC + row], lo[col * LDC + row]);
    }
}

/* The [C, 32] products of the scan: warp w computes rows 16 M0 .., 16 M1 .. (M1 = 3 - M0; M0 = 0 for warps 0-3,
 * 1 for 4-7) of value columns 8 (w & 3) .. + 7, so that the lower-triangular products give every warp 5 k blocks. */
template <int DT, int M0>
__device__ __forceinline__ void times_state2(float (&ks0)[2][4], float (&qs0)[2][4], const scan_stage &st,
                                             const scan_smem &sm, int n0, int g, int t) {
    constexpr int M[2] = {M0, 3 - M0};
#pragma unroll
    for (int kb = 0; kb < DK / 16; ++kb) {
        uint32_t bh[2], bl[2];
        frag_b(bh, sm.shi, LDK, n0, 16 * kb, g, t);
        frag_b(bl, sm.slo, LDK, n0, 16 * kb, g, t);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            uint32_t kh[4], kl[4], qh[4], ql[4];
            frag_a_in<DT>(kh, kl, st.k, 16 * M[i], 16 * kb, g, t);
            frag_a_in<DT>(qh, ql, st.q, 16 * M[i], 16 * kb, g, t);
            mma(ks0[i], kh, bh[0], bh[1]);
            mma(ks0[i], kh, bl[0], bl[1]);
            mma(qs0[i], qh, bh[0], bh[1]);
            mma(qs0[i], qh, bl[0], bl[1]);
            if (DT == GDN_F16) {
                mma(ks0[i], kl, bh[0], bh[1]);
                mma(qs0[i], ql, bh[0], bh[1]);
            }
        }
    }
}

/* acc[i] += (Ahi + Alo)[rows of M[i]][0 .. 16 (M[i] + 1)) (Bhi + Blo)[.., columns n0 ..]: a lower-triangular [C, C]
 * pair of planes [row][LDC] times a [C, 32] pair stored [n][LDC]. */
template <int M0>
__device__ __forceinline__ void lower2(float (&acc)[2][4], const uint16_t *ahi, const uint16_t *alo, const uint16_t *bhi,
                                       const uint16_t *blo, int n0, int g, int t) {
    constexpr int M[2] = {M0, 3 - M0};
#pragma unroll
    for (int kb = 0; kb <= 3 - M0; ++kb) {
        uint32_t bh[2], bl[2];
        frag_b(bh, bhi, LDC, n0, 16 * kb, g, t);
        frag_b(bl, blo, LDC, n0, 16 * kb, g, t);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            if (kb > M[i]) continue;
            uint32_t ah[4], al[4];
            frag_a(ah, ahi, LDC, 16 * M[i], 16 * kb, g, t);
            frag_a(al, alo, LDC, 16 * M[i], 16 * kb, g, t);
            mma(acc[i], ah, bh[0], bh[1]);
            mma(acc[i], ah, bl[0], bl[1]);
            mma(acc[i], al, bh[0], bh[1]);
        }
    }
}

template <int DT>
__global__ void __launch_bounds__(SCAN_THREADS, 1) gdn_chunk_scan(gdn_dev_args a, chunk_seqs sq, const uint8_t *ws) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    scan_smem &sm = *(scan_smem *)smem_raw;
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int m0 = w < 4 ? 0 : 1, n0 = 8 * (w & 3); /* the [C, 32] products' rows 16 m0 .., 16 (3 - m0) ..; columns */
    const int64_t len = sq.len[b], t0 = sq.t0[b], slot = sq.slot[b];
    const int chunks = sq.chunk0[b + 1] - sq.chunk0[b];
    const int64_t state = (slot * a.Hv + h) * a.Dk * a.Dv;
    /* S: warp w holds key rows 16 w + g (+ 8), columns 8 nt + 2 t (+ 1) of the block's 32, in f32 */
    float S[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t i = 16 * w + g + (e >> 1) * 8, j = NS * s + 8 * nt + 2 * t + (e & 1);
            S[nt][e] = a.state_in ? a.state_in[state + (a.layout == GDN_STATE_VK ? j * a.Dk + i : i * a.Dv + j)] : 0.0f;
        }
    auto put_state = [&]() {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = 16 * w + g + (e >> 1) * 8, j = 8 * nt + 2 * t + (e & 1);
                split(S[nt][e], sm.shi[j * LDK + i], sm.slo[j * LDK + i]);
            }
    };
    put_state();
    const uint8_t *wsb = ws + (int64_t)sq.chunk0[b] * a.Hv * WS_BYTES;
    load_stage(sm.st[0], a, wsb + (int64_t)h * WS_BYTES, h, s, t0, (int)min((int64_t)CH, len), tid);
    for (int lc = 0; lc < chunks; ++lc) {
        const scan_stage &st = sm.st[lc & 1];
        const int64_t tc = t0 + (int64_t)lc * CH;
        const int n = (int)min((int64_t)CH, t0 + len - tc);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads(); /* the stage, and the state's planes, are in */
        if (lc + 1 < chunks)
            load_stage(sm.st[(lc + 1) & 1], a, wsb + ((int64_t)(lc + 1) * a.Hv + h) * WS_BYTES, h, s, tc + CH,
                       (int)min((int64_t)CH, t0 + len - tc - CH), tid);
        /* X = V - diag(G) K S0, and Q S0 */
        float ks0[2][4] = {}, qs0[2][4] = {};
        if (m0 == 0) times_state2<DT, 0>(ks0, qs0, st, sm, n0, g, t);
        else times_state2<DT, 1>(ks0, qs0, st, sm, n0, g, t);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r0 = 16 * (i ? 3 - m0 : m0) + g;
            float x[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = r0 + (e >> 1) * 8, col = n0 + 2 * t + (e & 1);
                x[e] = __fsub_rn(in_f32<DT>(st.v[r * LDV + col]), __fmul_rn(st.gt.G[r], ks0[i][e]));
            }
            put_cols(sm.xhi, sm.xlo, r0, n0 + 2 * t, x);
        }
        __syncthreads(); /* X */
        { /* U = A X; and diag(e) U */
            float u[2][4] = {};
            if (m0 == 0) lower2<0>(u, st.ahi, st.alo, sm.xhi, sm.xlo, n0, g, t);
            else lower2<1>(u, st.ahi, st.alo, sm.xhi, sm.xlo, n0, g, t);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int r0 = 16 * (i ? 3 - m0 : m0) + g;
                float eu[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) eu[e] = __fmul_rn(st.gt.e[r0 + (e >> 1) * 8], u[i][e]);
                put_cols(sm.uhi, sm.ulo, r0, n0 + 2 * t, u[i]);
                put_cols(sm.ehi, sm.elo, r0, n0 + 2 * t, eu);
            }
        }
        __syncthreads(); /* U */
        { /* y = scale (diag(G) Q S0 + P U) */
            float pu[2][4] = {};
            if (m0 == 0) lower2<0>(pu, st.phi, st.plo, sm.uhi, sm.ulo, n0, g, t);
            else lower2<1>(pu, st.phi, st.plo, sm.uhi, sm.ulo, n0, g, t);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int r = 16 * (i ? 3 - m0 : m0) + g + 8 * half, col = n0 + 2 * t;
                    if (r >= n) continue;
                    const int64_t tok = tc + r;
                    const int live = !a.mask || a.mask[tok];
                    uint16_t o[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float v = __fmul_rn(a.scale, __fadd_rn(__fmul_rn(st.gt.G[r], qs0[i][2 * half + e]),
                                                                     pu[i][2 * half + e]));
                        o[e] = DT == GDN_BF16 ? bf16_rn(live ? v : 0.0f) : f16_rn(live ? v : 0.0f);
                    }
                    *(uint32_t *)((uint16_t *)a.y + (tok * a.Hv + h) * a.Dv + NS * s + col) = pack(o[0], o[1]);
                }
        }
        { /* S = G_{n-1} S0 + K^T diag(e) U: warp w's key rows 16 w .., all 32 columns */
            float ku[4][4] = {};
#pragma unroll
            for (int kb = 0; kb < CH / 16; ++kb) {
                uint32_t ah[4], al[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) { /* K^T: row = key index, column = token */
                    const int key = 16 * w + g + (q & 1) * 8, tok = 16 * kb + 2 * t + (q >> 1) * 8;
                    in_pair<DT>(pack(st.k[tok * LDK + key], st.k[(tok + 1) * LDK + key]), ah[q], al[q]);
                }
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    uint32_t bh[2], bl[2];
                    frag_b(bh, sm.ehi, LDC, 8 * nt, 16 * kb, g, t);
                    frag_b(bl, sm.elo, LDC, 8 * nt, 16 * kb, g, t);
                    mma(ku[nt], ah, bh[0], bh[1]);
                    mma(ku[nt], ah, bl[0], bl[1]);
                    if (DT == GDN_F16) mma(ku[nt], al, bh[0], bh[1]);
                }
            }
            const float Gn = st.gt.G[n - 1];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) S[nt][e] = __fadd_rn(__fmul_rn(Gn, S[nt][e]), ku[nt][e]);
            put_state(); /* the planes' readers (X, Q S0) are behind the barrier above */
        }
    }
    if (a.state_out)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int64_t i = 16 * w + g + (e >> 1) * 8, j = NS * s + 8 * nt + 2 * t + (e & 1);
                a.state_out[state + (a.layout == GDN_STATE_VK ? j * a.Dk + i : i * a.Dv + j)] = S[nt][e];
            }
}

int scan_smem_ok = 0, scan_smem_ok_f16 = 0;

/* One launch pair over the sequences of sq (their chunks in ws). */
template <int DT>
gdn_status launch(const gdn__problem *p, const chunk_seqs &sq, uint8_t *ws) {
    const gdn_dev_args d = gdn_dev_args_of(p);
    cudaStream_t stream = (cudaStream_t)p->a.stream;
    if (gdn_cuda_allow_smem(gdn_chunk_scan<DT>, DT == GDN_BF16 ? &scan_smem_ok : &scan_smem_ok_f16) != GDN_OK)
        return GDN_ERR_DEVICE;
    gdn_chunk_prep<DT><<<dim3((unsigned)sq.chunk0[sq.n], (unsigned)p->a.Hv), PREP_THREADS, 0, stream>>>(d, sq, ws);
    gdn_chunk_scan<DT><<<dim3((unsigned)(p->a.Dv / NS), (unsigned)p->a.Hv, (unsigned)sq.n), SCAN_THREADS,
                         sizeof(scan_smem), stream>>>(d, sq, ws);
    return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

} /* namespace */

extern "C" {

/* bf16 or f16; Dk = 128; Dv a multiple of 32; a log-decay or raw gate; q, k, v 16-byte aligned, y 4-byte; the
 * scan's shared memory available; the head grid within launch limits. */
int gdn__delta_cuda_chunked_eligible(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    return gdn__cuda_devices() > 0 && (a->dtype == GDN_BF16 || a->dtype == GDN_F16) && a->Dk == DK &&
           a->Dv % NS == 0 && a->Dv / NS <= 65535 && a->Hv <= 65535 &&
           (a->gate_kind == GDN_GATE_LOG_DECAY || a->gate_kind == GDN_GATE_RAW) &&
           (uintptr_t)a->q % 16 == 0 && (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0 &&
           (uintptr_t)a->y % 4 == 0 && gdn_cuda_smem_optin() >= (int)sizeof(scan_smem);
}

/* Never routed: the second contract is the caller's choice ("cuda_chunked", or "fastest" for windows of
 * GDN_CHUNKED_MIN_T tokens or more). */
int gdn__delta_cuda_chunked_routed(const gdn__problem *p) { return p == NULL; }

const gdn__variant gdn__delta_cuda_chunked_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

/* The sequences of a call, SEQS per launch pair: the dense form's B windows of T tokens (state entry b), or the
 * batch form's windows and slots (p as validated, before any split); a skipped sequence's y rows are zeroed. */
gdn_status gdn__cuda_chunked_sequences(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    int64_t most = 0; /* the most chunks of one launch: the workspace's size */
    for (int pass = 0; pass < 2; ++pass) {
        uint8_t *ws = NULL;
        if (pass == 1) {
            if (most == 0) return GDN_OK;
            if (cudaMallocAsync((void **)&ws, (size_t)most * (size_t)a->Hv * WS_BYTES, (cudaStream_t)a->stream) !=
                cudaSuccess) {
                (void)cudaGetLastError();
                return GDN_ERR_OUT_OF_MEMORY;
            }
        }
        gdn_status s = GDN_OK;
        chunk_seqs sq;
        sq.n = 0, sq.chunk0[0] = 0;
        for (int64_t b = 0; b <= a->B && s == GDN_OK; ++b) {
            if (b < a->B) {
                const int64_t t0 = a->cu_seqlens ? a->cu_seqlens[b] : b * a->T;
                const int64_t len = a->cu_seqlens ? a->cu_seqlens[b + 1] - t0 : a->T;
                const int64_t slot = a->state_slot ? a->state_slot[b] : b;
                if (slot < 0) {
                    if (pass == 1)
                        s = gdn__cuda_zero((char *)a->y + t0 * a->Hv * a->Dv * (int64_t)p->dtype_size,
                                           (size_t)(len * a->Hv * a->Dv) * p->dtype_size, a->stream);
                    continue;
                }
                sq.t0[sq.n] = t0, sq.len[sq.n] = (int32_t)len, sq.slot[sq.n] = (int32_t)slot;
                sq.chunk0[sq.n + 1] = sq.chunk0[sq.n] + (int32_t)((len + CH - 1) / CH);
                ++sq.n;
            }
            if (sq.n == SEQS || (b == a->B && sq.n > 0)) {
                if (pass == 0) most = sq.chunk0[sq.n] > most ? sq.chunk0[sq.n] : most;
                else s = a->dtype == GDN_BF16 ? launch<GDN_BF16>(p, sq, ws) : launch<GDN_F16>(p, sq, ws);
                sq.n = 0;
            }
        }
        if (pass == 1) {
            const cudaError_t freed = cudaFreeAsync(ws, (cudaStream_t)a->stream);
            return s != GDN_OK ? s : freed == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        }
    }
    return GDN_OK;
}

gdn_status gdn__delta_cuda_chunked(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_cuda_chunked_eligible(p)) return GDN_ERR_INELIGIBLE;
    return gdn__cuda_chunked_sequences(p);
}

} /* extern "C" */
