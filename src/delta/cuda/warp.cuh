/* The warp kernel of cuda_generic (generic.cu) and cuda_decode (decode.cu): one warp per (sequence b, value head h, NCOL value columns j0 .. j0+NCOL-1).
 *
 * Lane l is the contract's lane l: it keeps S[l*c .. l*c+c-1][j] (c = ceil(Dk/32), clipped to Dk) of each of
 * its NCOL columns in registers for the whole window. Per token:
 *     kv_j  = warp tree of the lane partials fmaf(S[i][j], k_i)          (vector gate: g_i k_i rounded first)
 *     d_j   = (v_j - g kv_j) beta                                       (vector gate: (v_j - kv_j) beta)
 *     S[i][j] = fmaf(g, S[i][j], k_i d_j)                              (vector gate: g_i)
 *     y_j   = warp tree of fmaf(S[i][j], q_i), times scale
 * The warp tree is the contract's butterfly (shuffle xor 1, 2, 4, 8, 16), so y and S equal ref's bit for bit.
 * Gates, betas and mask bits of 32 tokens are computed at once, one token per lane, then broadcast.
 *
 * cuda_generic: NCOL = 1, any Dk <= 1024 (CM = a power of two >= c), any Dv, scalar loads.
 * cuda_decode (one VK token over few items, or where the streamed kernel of decode_stream.cu does not apply):
 *               NCOL = 8 (4 for Dk = 256; 2 for one VK token over few items at Dk = 128; 1 or 4 on request), Dk = 32 CM exactly, Dv % 8 == 0, 16-byte aligned tensors: the state moves in
 *               16-byte coalesced loads (VK: a column's Dk keys; KV: NCOL adjacent columns of a key row), all of
 *               a warp's loads in flight before the first use. For T = 1 or a few tokens and many sequences. */
#ifndef GDN_DELTA_CUDA_WARP_CUH
#define GDN_DELTA_CUDA_WARP_CUH

#include "cuda/gdn_cuda.cuh"

#define GDN_WARP_BLOCK 128

/* One token's inputs as lane l sees them: its chunk of k, q (and the vector gate's row), and v of the NCOL
 * columns. */
template <int CM, int NCOL, bool VEC>
struct gdn_warp_token {
    float k[CM], q[CM], gv[VEC ? CM : 1], v[NCOL];
};

/* n = CM contiguous elements from idx of a q/k tensor of dtype DT, 16-byte vector loads where EXACT makes the
 * alignment known (idx a multiple of CM, tensors 16-byte aligned). */
template <int DT, int CM, bool EXACT>
__device__ __forceinline__ void gdn_ld_chunk(float *out, const void *base, int64_t idx, const bool *ok) {
    if (EXACT && DT == GDN_F32 && CM % 4 == 0) {
        const float4 *p = (const float4 *)((const float *)base + idx);
#pragma unroll
        for (int i = 0; i < CM / 4; ++i) {
            const float4 f = __ldg(p + i);
            out[4 * i] = f.x; out[4 * i + 1] = f.y; out[4 * i + 2] = f.z; out[4 * i + 3] = f.w;
        }
    } else if (EXACT && DT != GDN_F32 && CM % 4 == 0) {
        const uint2 *p = (const uint2 *)((const uint16_t *)base + idx);
#pragma unroll
        for (int i = 0; i < CM / 4; ++i) {
            const uint2 u = __ldg(p + i);
            const uint16_t h[4] = {(uint16_t)(u.x & 0xffffu), (uint16_t)(u.x >> 16), (uint16_t)(u.y & 0xffffu),
                                   (uint16_t)(u.y >> 16)};
#pragma unroll
            for (int e = 0; e < 4; ++e)
                out[4 * i + e] = DT == GDN_BF16 ? gdn__bf16_to_f32(h[e]) : gdn__f16_to_f32(h[e]);
        }
    } else {
#pragma unroll
        for (int e = 0; e < CM; ++e) out[e] = ok[e] ? gdn_ld<DT>(base, idx + e) : 0.0f;
    }
}

template <int DT, bool VEC, int CM, int NCOL, bool EXACT>
__device__ __forceinline__ void gdn_warp_load_token(gdn_warp_token<CM, NCOL, VEC> &tk, const gdn_dev_args &a,
                                                    int64_t b, int64_t h, int64_t hk, int64_t t, int64_t row0,
                                                    int64_t j0, const bool *ok) {
    const int64_t qk = ((b * a.T + t) * a.Hk + hk) * a.Dk + row0;
    gdn_ld_chunk<DT, CM, EXACT>(tk.k, a.k, qk, ok);
    gdn_ld_chunk<DT, CM, EXACT>(tk.q, a.q, qk, ok);
    if (VEC) {
        const float *gv = a.gate + ((b * a.T + t) * a.Hv + h) * a.Dk + row0;
#pragma unroll
        for (int e = 0; e < CM; ++e) tk.gv[e] = ok[e] ? __ldg(gv + e) : 0.0f;
    }
    const int64_t vrow = ((b * a.T + t) * a.Hv + h) * a.Dv + j0;
#pragma unroll
    for (int n = 0; n < NCOL; ++n) tk.v[n] = j0 + n < a.Dv ? gdn_ld<DT>(a.v, vrow + n) : 0.0f;
}

/* decode for Dk <= 128 (<= 32 state elements per lane): at least 5 blocks of 4 warps per SM (<= 102 registers), for loads
 * in flight */
template <int DT, bool VEC, int CM, int NCOL, bool EXACT>
__global__ void __launch_bounds__(GDN_WARP_BLOCK, NCOL > 1 && CM <= 4 ? 5 : 1) gdn_delta_warp_kernel(gdn_dev_args a) {
    gdn_grid_dependency_wait();
    /* grid: x = b * Hv + h, y = blocks of 4 column groups (32-bit index math) */
    const int lane = threadIdx.x & 31;
    const unsigned bh32 = blockIdx.x, b32 = bh32 / (unsigned)a.Hv, h32 = bh32 - b32 * (unsigned)a.Hv;
    const int64_t bh = bh32, b = b32, h = h32, hk = gdn__key_head32(h32, (unsigned)a.Hk, (unsigned)a.group, a.tiled);
    const int64_t j0 = ((int64_t)blockIdx.y * (GDN_WARP_BLOCK / 32) + threadIdx.x / 32) * NCOL;
    if (j0 >= a.Dv) return; /* whole warps only */
    const int c = EXACT ? CM : a.dk_lane;
    const int64_t row0 = (int64_t)lane * c, sbase = bh * a.Dk * a.Dv;
    bool ok[CM];
#pragma unroll
    for (int e = 0; e < CM; ++e) ok[e] = EXACT || (e < c && row0 + e < a.Dk);
    const bool vk = a.layout == GDN_STATE_VK;

    /* S[row0 + e][j0 + n] -> s[n][e] */
    float s[NCOL][CM];
    if (EXACT && vk && CM % 4 == 0 && a.state_in) {
#pragma unroll
        for (int n = 0; n < NCOL; ++n)
#pragma unroll
            for (int i = 0; i < CM / 4; ++i) {
                const float4 f = __ldcs((const float4 *)(a.state_in + sbase + (j0 + n) * a.Dk + row0) + i);
                s[n][4 * i] = f.x; s[n][4 * i + 1] = f.y; s[n][4 * i + 2] = f.z; s[n][4 * i + 3] = f.w;
            }
    } else if (EXACT && !vk && NCOL % 4 == 0 && a.state_in) {
#pragma unroll
        for (int e = 0; e < CM; ++e)
#pragma unroll
            for (int i = 0; i < NCOL / 4; ++i) {
                const float4 f = __ldcs((const float4 *)(a.state_in + sbase + (row0 + e) * a.Dv + j0) + i);
                s[4 * i][e] = f.x; s[4 * i + 1][e] = f.y; s[4 * i + 2][e] = f.z; s[4 * i + 3][e] = f.w;
            }
    } else {
#pragma unroll
        for (int n = 0; n < NCOL; ++n)
#pragma unroll
            for (int e = 0; e < CM; ++e) {
                const int64_t i = row0 + e, j = j0 + n;
                s[n][e] = a.state_in && ok[e] && j < a.Dv ? a.state_in[sbase + (vk ? j * a.Dk + i : i * a.Dv + j)]
                                                          : 0.0f;
            }
    }

    /* the next token's inputs are loaded a token ahead, except by decode (a few tokens) and big chunks (registers) */
    constexpr bool PREFETCH = NCOL == 1 && CM <= 8;
    gdn_warp_token<CM, NCOL, VEC> cur, nxt;
    gdn_warp_load_token<DT, VEC, CM, NCOL, EXACT>(cur, a, b, h, hk, 0, row0, j0, ok);

    for (int64_t t0 = 0; t0 < a.T; t0 += 32) {
        /* lane tt: gate, beta and mask bit of token t0 + tt */
        const int64_t tl = t0 + lane;
        float g_lane = 0.0f, beta_lane = 0.0f;
        bool live = false;
        if (tl < a.T) {
            const int64_t gi = (b * a.T + tl) * a.Hv + h;
            if (!VEC) g_lane = gdn_gate_of(a, __ldg(a.gate + gi), h);
            beta_lane = gdn_beta_of(a, __ldg(a.beta + gi));
            live = a.mask == NULL || a.mask[b * a.T + tl] != 0;
        }
        const unsigned live_bits = __ballot_sync(GDN_FULL_MASK, live);
        const int n_t = a.T - t0 < 32 ? (int)(a.T - t0) : 32;
        for (int tt = 0; tt < n_t; ++tt) {
            const int64_t t = t0 + tt;
            if (!PREFETCH && tt + t0 > 0) gdn_warp_load_token<DT, VEC, CM, NCOL, EXACT>(cur, a, b, h, hk, t, row0, j0, ok);
            if (PREFETCH && t + 1 < a.T) gdn_warp_load_token<DT, VEC, CM, NCOL, EXACT>(nxt, a, b, h, hk, t + 1, row0, j0, ok);
            const float g = __shfl_sync(GDN_FULL_MASK, g_lane, tt);
            const float beta = __shfl_sync(GDN_FULL_MASK, beta_lane, tt);
            float y_mine = 0.0f;
            if ((live_bits >> tt) & 1u)
                y_mine = __fmul_rn(gdn_warp_token_step<CM, NCOL, VEC>(s, cur.k, cur.q, cur.gv, cur.v, g, beta, ok, lane), a.scale);
            if (lane < NCOL && j0 + lane < a.Dv) gdn_st(a.y, a.dtype, ((b * a.T + t) * a.Hv + h) * a.Dv + j0 + lane, y_mine);
            if (PREFETCH) cur = nxt;
        }
    }

    if (!a.state_out) return;
    if (EXACT && vk && CM % 4 == 0) {
#pragma unroll
        for (int n = 0; n < NCOL; ++n)
#pragma unroll
            for (int i = 0; i < CM / 4; ++i)
                __stcs((float4 *)(a.state_out + sbase + (j0 + n) * a.Dk + row0) + i,
                       make_float4(s[n][4 * i], s[n][4 * i + 1], s[n][4 * i + 2], s[n][4 * i + 3]));
    } else if (EXACT && !vk && NCOL % 4 == 0) {
#pragma unroll
        for (int e = 0; e < CM; ++e)
#pragma unroll
            for (int i = 0; i < NCOL / 4; ++i)
                __stcs((float4 *)(a.state_out + sbase + (row0 + e) * a.Dv + j0) + i,
                       make_float4(s[4 * i][e], s[4 * i + 1][e], s[4 * i + 2][e], s[4 * i + 3][e]));
    } else {
#pragma unroll
        for (int n = 0; n < NCOL; ++n)
#pragma unroll
            for (int e = 0; e < CM; ++e) {
                const int64_t i = row0 + e, j = j0 + n;
                if (ok[e] && j < a.Dv) a.state_out[sbase + (vk ? j * a.Dk + i : i * a.Dv + j)] = s[n][e];
            }
    }
}

template <int DT, bool VEC, int CM, int NCOL, bool EXACT>
static gdn_status gdn_launch_warp(const gdn__problem *p) {
    const gdn_dev_args a = gdn_dev_args_of(p);
    const int64_t groups = (a.Dv + NCOL - 1) / NCOL, col_blocks = (groups + GDN_WARP_BLOCK / 32 - 1) / (GDN_WARP_BLOCK / 32);
    /* fits: gdn_warp_grid_fits, in eligibility */
    const dim3 grid((unsigned)(a.B * a.Hv), (unsigned)col_blocks);
    return gdn_launch_pdl(gdn_delta_warp_kernel<DT, VEC, CM, NCOL, EXACT>, grid, GDN_WARP_BLOCK, 0, p->a.stream, a);
}

/* The grid (B Hv, column blocks) fits CUDA's limits (2^31 - 1, 65535) at one column per warp, the most blocks any
 * instantiation launches. */
static inline int gdn_warp_grid_fits(const gdn__problem *p) {
    const int64_t col_blocks = (p->a.Dv + GDN_WARP_BLOCK / 32 - 1) / (GDN_WARP_BLOCK / 32);
    return gdn_grid_fits(p->a.B * p->a.Hv) && col_blocks <= 65535;
}

#endif
