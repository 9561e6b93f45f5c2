/* cuda_decode: a few tokens (T <= 4) for many sequences, streamed through shared memory.
 *
 * Work item = (sequence b, value head h, 32 value columns j0 .. j0+31): its state piece (Dk x 32 floats) and its
 * tokens' q, k, v (32 columns), gate and beta. A persistent grid of blocks of 4 warps walks the items; each block
 * keeps STAGES items in flight through a ring of shared-memory stages filled with cp.async, so the state streams
 * from memory while earlier items are computed, and writes each item's new state straight from registers with
 * streaming stores.
 *
 * Computing an item: warp w takes the columns j0 + 8w .. j0 + 8w + 7; lane l is the contract's lane l and holds
 * S[l*C .. l*C + C-1][j] of its 8 columns (C = Dk/32), so each token is gdn_warp_token_step: the contract's
 * fmaf partials and the shuffle butterfly, bit for bit ref's.
 *
 * Stage layout: the state as it lies in memory (VK: 32 columns of Dk keys, contiguous; KV: Dk rows of 32 columns,
 * the 16-byte pieces of row i XOR-swizzled by (i / C) mod 8 so the 8 lanes of a load phase hit different banks),
 * then q and k rows [T][Dk], v [T][32] (input dtype), the vector gate rows [T][Dk], and the scalars: raw gate and
 * beta per token, A_log and dt_bias of the head. */
#include "gdn_cuda.cuh"

#define GDN_DEC_WARPS 4
#define GDN_DEC_COLS 32 /* columns per item: 4 warps x 8 */
#define GDN_DEC_NCOL 8
#define GDN_DEC_STAGES 3 /* default ring depth; 2 .. 4 on request (bench variants) */
#define GDN_DEC_TMAX 4

struct gdn_dec_smem {
    int st, q, k, v, gv, sc; /* byte offsets within a stage */
    int stage;               /* bytes per stage */
};

static __host__ __device__ __forceinline__ int gdn_dec_al16(int x) { return (x + 15) & ~15; }

static __host__ __device__ __forceinline__ gdn_dec_smem gdn_dec_layout(int Dk, int T, int ds, bool vec) {
    gdn_dec_smem m;
    int o = 0;
    m.st = o; o = gdn_dec_al16(o + Dk * GDN_DEC_COLS * 4);
    m.q = o; o = gdn_dec_al16(o + T * Dk * ds);
    m.k = o; o = gdn_dec_al16(o + T * Dk * ds);
    m.v = o; o = gdn_dec_al16(o + T * GDN_DEC_COLS * ds);
    m.gv = o; o = gdn_dec_al16(o + (vec ? T * Dk * 4 : 0));
    m.sc = o; o = gdn_dec_al16(o + (2 * T + 2) * 4);
    m.stage = o;
    return m;
}

__device__ __forceinline__ void gdn_dec_cp4(unsigned char *dst, const void *src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
}

/* Element e of a shared-memory row of dtype DT, as f32 (exact). */
template <int DT>
__device__ __forceinline__ float gdn_dec_ld(const unsigned char *row, int e) {
    if (DT == GDN_F32) return ((const float *)row)[e];
    const uint16_t x = ((const uint16_t *)row)[e];
    return DT == GDN_BF16 ? gdn__bf16_to_f32(x) : gdn__f16_to_f32(x);
}

template <int DT, bool VEC, int C, bool KV>
__global__ void __launch_bounds__(GDN_DEC_WARPS * 32, C <= 4 ? 4 : 1) gdn_delta_decode_kernel(gdn_dev_args a, int64_t items, int stages) {
    constexpr int NT = GDN_DEC_WARPS * 32, DK = 32 * C, DS = DT == GDN_F32 ? 4 : 2;
    extern __shared__ __align__(16) unsigned char sm[];
    const int T = (int)a.T, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const gdn_dec_smem m = gdn_dec_layout(DK, T, DS, VEC);
    const int64_t col_items = a.Dv / GDN_DEC_COLS;

    /* copies of item `it` into stage `sg` (this thread's share; committed by the caller) */
    auto issue = [&](int64_t it, int sg) {
        unsigned char *st = sm + sg * m.stage;
        const int64_t bh = it / col_items, j0 = it % col_items * GDN_DEC_COLS, b = bh / a.Hv, h = bh % a.Hv;
        const int64_t hk = h / a.group;
        if (a.state_in) {
            /* 16-byte pieces: VK piece p = column p / (DK/4), keys 4 (p mod DK/4) ..; KV piece p = row p / 8,
             * columns 4 (p mod 8) .., stored at piece (p mod 8) xor ((row / C) mod 8) of the row */
            const float *src = a.state_in + bh * DK * a.Dv;
            for (int p = threadIdx.x; p < DK * GDN_DEC_COLS / 4; p += NT) {
                if (KV) {
                    const int i = p >> 3, c = p & 7;
                    gdn_cp16(st + m.st + i * 128 + ((c ^ ((i / C) & 7)) << 4), src + i * a.Dv + j0 + 4 * c);
                } else {
                    gdn_cp16(st + m.st + p * 16, src + j0 * DK + 4 * p);
                }
            }
        }
        /* q, k rows of the key head and v of the 32 columns, per token; the vector gate rows */
        constexpr int QP = DK * DS / 16, VP = GDN_DEC_COLS * DS / 16;
        for (int p = threadIdx.x; p < T * (2 * QP + VP); p += NT) {
            const int t = p / (2 * QP + VP), r = p % (2 * QP + VP);
            const int64_t bt = b * a.T + t;
            if (r < 2 * QP) {
                const int w = r / QP, c = r % QP;
                const unsigned char *src = (const unsigned char *)(w ? a.k : a.q) + ((bt * a.Hk + hk) * DK) * DS + c * 16;
                gdn_cp16(st + (w ? m.k : m.q) + t * DK * DS + c * 16, src);
            } else {
                const int c = r - 2 * QP;
                gdn_cp16(st + m.v + t * GDN_DEC_COLS * DS + c * 16,
                             (const unsigned char *)a.v + ((bt * a.Hv + h) * a.Dv + j0) * DS + c * 16);
            }
        }
        if (VEC)
            for (int p = threadIdx.x; p < T * DK / 4; p += NT) {
                const int t = p / (DK / 4), c = p % (DK / 4);
                gdn_cp16(st + m.gv + t * DK * 4 + c * 16, a.gate + ((b * a.T + t) * a.Hv + h) * DK + 4 * c);
            }
        /* scalars: thread t < T the raw gate and beta of token t; threads T, T+1 the head's A_log, dt_bias */
        const int x = threadIdx.x;
        if (x < T) {
            const int64_t gi = (b * a.T + x) * a.Hv + h;
            if (!VEC) gdn_dec_cp4(st + m.sc + 8 * x, a.gate + gi);
            gdn_dec_cp4(st + m.sc + 8 * x + 4, a.beta + gi);
        } else if (x < T + 2 && a.gate_kind == GDN_GATE_RAW) {
            gdn_dec_cp4(st + m.sc + 8 * T + 4 * (x - T), (x == T ? a.A_log : a.dt_bias) + h);
        }
    };

    /* item `it` from stage `sg`: the state into registers, the tokens, the new state out */
    auto compute = [&](int64_t it, int sg) {
        const unsigned char *st = sm + sg * m.stage;
        const int64_t bh = it / col_items, j0 = it % col_items * GDN_DEC_COLS, b = bh / a.Hv, h = bh % a.Hv;
        const int jw = GDN_DEC_NCOL * warp; /* the warp's first column within the item */
        float s[GDN_DEC_NCOL][C];
        bool ok[C];
#pragma unroll
        for (int e = 0; e < C; ++e) ok[e] = true;
        if (!a.state_in) {
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n)
#pragma unroll
                for (int e = 0; e < C; ++e) s[n][e] = 0.0f;
        } else if (KV) {
            /* row lane*C + e: pieces 2w and 2w + 1 of the row (the warp's 8 columns), unswizzled by lane mod 8 */
#pragma unroll
            for (int e = 0; e < C; ++e) {
                const unsigned char *row = st + m.st + (lane * C + e) * 128;
                const float4 lo = *(const float4 *)(row + (((2 * warp) ^ (lane & 7)) << 4));
                const float4 hi = *(const float4 *)(row + (((2 * warp + 1) ^ (lane & 7)) << 4));
                s[0][e] = lo.x; s[1][e] = lo.y; s[2][e] = lo.z; s[3][e] = lo.w;
                s[4][e] = hi.x; s[5][e] = hi.y; s[6][e] = hi.z; s[7][e] = hi.w;
            }
        } else {
            /* column jw + n: keys lane*C .. lane*C + C-1, contiguous */
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n) {
                const float *col = (const float *)(st + m.st) + (jw + n) * DK + lane * C;
                if (C % 4 == 0) {
#pragma unroll
                    for (int e = 0; e < C; e += 4) {
                        const float4 f = *(const float4 *)(col + e);
                        s[n][e] = f.x; s[n][e + 1] = f.y; s[n][e + 2] = f.z; s[n][e + 3] = f.w;
                    }
                } else {
#pragma unroll
                    for (int e = 0; e < C; ++e) s[n][e] = col[e];
                }
            }
        }
        const float *sc = (const float *)(st + m.sc);
        for (int t = 0; t < T; ++t) {
            const int64_t bt = b * a.T + t;
            float y = 0.0f;
            if (a.mask == NULL || a.mask[bt] != 0) {
                float k[C], q[C], gv[VEC ? C : 1], v[GDN_DEC_NCOL];
#pragma unroll
                for (int e = 0; e < C; ++e) {
                    k[e] = gdn_dec_ld<DT>(st + m.k + t * DK * DS, lane * C + e);
                    q[e] = gdn_dec_ld<DT>(st + m.q + t * DK * DS, lane * C + e);
                    if (VEC) gv[e] = ((const float *)(st + m.gv + t * DK * 4))[lane * C + e];
                }
#pragma unroll
                for (int n = 0; n < GDN_DEC_NCOL; ++n) v[n] = gdn_dec_ld<DT>(st + m.v + t * GDN_DEC_COLS * DS, jw + n);
                const float x = sc[2 * t];
                const float g = VEC ? 0.0f
                              : a.gate_kind == GDN_GATE_LOG_DECAY ? gdn_expf(x)
                              : a.gate_kind == GDN_GATE_RAW      ? gdn_raw_gate(x, sc[2 * T], sc[2 * T + 1])
                                                                 : x;
                const float beta = gdn_beta_of(a, sc[2 * t + 1]);
                y = __fmul_rn(gdn_warp_token_step<C, GDN_DEC_NCOL, VEC>(s, k, q, gv, v, g, beta, ok, lane), a.scale);
            }
            if (lane < GDN_DEC_NCOL) gdn_st(a.y, a.dtype, (bt * a.Hv + h) * a.Dv + j0 + jw + lane, y);
        }
        if (!a.state_out) return;
        if (KV) {
            /* back into the stage where they came from; the block writes the rows out after a barrier */
#pragma unroll
            for (int e = 0; e < C; ++e) {
                unsigned char *row = sm + sg * m.stage + m.st + (lane * C + e) * 128;
                *(float4 *)(row + (((2 * warp) ^ (lane & 7)) << 4)) = make_float4(s[0][e], s[1][e], s[2][e], s[3][e]);
                *(float4 *)(row + (((2 * warp + 1) ^ (lane & 7)) << 4)) = make_float4(s[4][e], s[5][e], s[6][e], s[7][e]);
            }
            return;
        }
        /* VK: column j0 + jw + n, keys lane*C .. lane*C + C-1, straight from registers */
        float *out = a.state_out + bh * DK * a.Dv;
#pragma unroll
        for (int n = 0; n < GDN_DEC_NCOL; ++n) {
            float *p = out + (j0 + jw + n) * DK + lane * C;
            if (C % 4 == 0) {
#pragma unroll
                for (int e = 0; e < C; e += 4) __stcs((float4 *)(p + e), make_float4(s[n][e], s[n][e + 1], s[n][e + 2], s[n][e + 3]));
            } else {
#pragma unroll
                for (int e = 0; e < C; ++e) __stcs(p + e, s[n][e]);
            }
        }
    };

    /* KV: item `it`'s new state from stage `sg` to state_out, whole 128-byte row pieces */
    auto write_rows = [&](int64_t it, int sg) {
        const unsigned char *st = sm + sg * m.stage + m.st;
        const int64_t bh = it / col_items, j0 = it % col_items * GDN_DEC_COLS;
        float *out = a.state_out + bh * DK * a.Dv + j0;
        for (int p = threadIdx.x; p < DK * 8; p += NT) {
            const int i = p >> 3, c = p & 7;
            __stcs((float4 *)(out + i * a.Dv + 4 * c), *(const float4 *)(st + i * 128 + ((c ^ ((i / C) & 7)) << 4)));
        }
    };

    /* the ring of `stages` (2 .. 4) stages: items blockIdx.x, blockIdx.x + gridDim.x, ...; item n lives in stage
     * n mod stages */
    const int64_t mine = (items - blockIdx.x + gridDim.x - 1) / gridDim.x;
#pragma unroll 1
    for (int n = 0; n < stages - 1; ++n) {
        if (n < mine) issue(blockIdx.x + n * (int64_t)gridDim.x, n);
        gdn_cp_commit();
    }
#pragma unroll 1
    for (int64_t n = 0; n < mine; ++n) {
        const int64_t ahead = n + stages - 1, it = blockIdx.x + n * gridDim.x;
        const int sg = (int)(n % stages);
        if (ahead < mine) issue(blockIdx.x + ahead * gridDim.x, (int)(ahead % stages));
        gdn_cp_commit();
        /* all but the newest stages - 1 groups complete: item n's copies are in */
        if (stages == 2) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        else if (stages == 3) asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        else asm volatile("cp.async.wait_group 3;\n" ::: "memory");
        __syncthreads(); /* item n's copies, from every thread, have landed */
        compute(it, sg);
        __syncthreads(); /* stage sg is free for item n + stages (KV: holds item n's new state) */
        if (KV && a.state_out) {
            write_rows(it, sg);
            __syncthreads();
        }
    }
}

/* `stages` deep (0: GDN_DEC_STAGES); a persistent grid of as many blocks as fit on the SMs. */
template <int DT, bool VEC, int C, bool KV>
static gdn_status gdn_launch_decode(const gdn__problem *p, int stages) {
    const gdn_dev_args a = gdn_dev_args_of(p);
    if (stages == 0) stages = GDN_DEC_STAGES;
    const int bytes = stages * gdn_dec_layout(32 * C, (int)a.T, DT == GDN_F32 ? 4 : 2, VEC).stage;
    static int smem_ok = 0; /* this instantiation may use the opt-in shared memory */
    if (bytes > 48 * 1024 && gdn_cuda_allow_smem(gdn_delta_decode_kernel<DT, VEC, C, KV>, &smem_ok) != GDN_OK)
        return GDN_ERR_DEVICE;
    /* blocks per SM for this size: cached as (bytes << 32 | blocks) in one word, so a thread never pairs a size
     * with another size's count */
    static uint64_t occupancy = 0;
    const uint64_t cached = __atomic_load_n(&occupancy, __ATOMIC_RELAXED);
    int per_sm = (int)(cached & 0xffffffffu), dev = 0, sms = 0;
    if (cached >> 32 != (uint64_t)bytes) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gdn_delta_decode_kernel<DT, VEC, C, KV>,
                                                          GDN_DEC_WARPS * 32, bytes) != cudaSuccess || per_sm < 1)
            return GDN_ERR_DEVICE;
        __atomic_store_n(&occupancy, (uint64_t)bytes << 32 | (uint64_t)per_sm, __ATOMIC_RELAXED);
    }
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return GDN_ERR_DEVICE;
    const int64_t items = a.B * a.Hv * (a.Dv / GDN_DEC_COLS);
    const int64_t grid = items < (int64_t)sms * per_sm ? items : (int64_t)sms * per_sm;
    gdn_delta_decode_kernel<DT, VEC, C, KV>
        <<<(unsigned)grid, GDN_DEC_WARPS * 32, bytes, (cudaStream_t)p->a.cuda_stream>>>(a, items, stages);
    return gdn_launch_status();
}

template <int DT, bool VEC, bool KV>
static gdn_status gdn_decode_dk(const gdn__problem *p, int stages) {
    switch (p->a.Dk) {
    case 32: return gdn_launch_decode<DT, VEC, 1, KV>(p, stages);
    case 64: return gdn_launch_decode<DT, VEC, 2, KV>(p, stages);
    case 128: return gdn_launch_decode<DT, VEC, 4, KV>(p, stages);
    default: return gdn_launch_decode<DT, VEC, 8, KV>(p, stages);
    }
}

template <int DT, bool VEC>
static gdn_status gdn_decode_layout(const gdn__problem *p, int stages) {
    return p->a.state_layout == GDN_STATE_KV ? gdn_decode_dk<DT, VEC, true>(p, stages) : gdn_decode_dk<DT, VEC, false>(p, stages);
}

template <bool VEC>
static gdn_status gdn_decode_dtype(const gdn__problem *p, int stages) {
    switch (p->a.dtype) {
    case GDN_F16: return gdn_decode_layout<GDN_F16, VEC>(p, stages);
    case GDN_BF16: return gdn_decode_layout<GDN_BF16, VEC>(p, stages);
    default: return gdn_decode_layout<GDN_F32, VEC>(p, stages);
    }
}

extern "C" {

/* T <= 4, Dk in {32, 64, 128, 256}, Dv % 32 == 0 (whole items), every tensor that is copied 16-byte aligned. */
int gdn__cuda_decode_stream_eligible(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 32 || a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_staged_tensors_aligned16(a);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % GDN_DEC_COLS == 0 && a->T <= GDN_DEC_TMAX && aligned &&
           a->B * a->Hv * (a->Dv / GDN_DEC_COLS) <= 0x7fffffffLL;
}

/* stages: the ring's depth, 2 .. 4, or 0 for the default */
gdn_status gdn__delta_cuda_decode_stream(const gdn__problem *p, int stages) {
    if (!gdn__cuda_decode_stream_eligible(p) || stages < 0 || stages == 1 || stages > 4) return GDN_ERR_INELIGIBLE;
    return p->a.gate_kind == GDN_GATE_VECTOR ? gdn_decode_dtype<true>(p, stages) : gdn_decode_dtype<false>(p, stages);
}

} /* extern "C" */
