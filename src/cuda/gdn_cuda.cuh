/* Device-side building blocks shared by the CUDA kernels: input loads per dtype, the contract's gate, beta and
 * butterfly, and the launch plumbing. Every float operation is an explicit IEEE intrinsic (__fmaf_rn,
 * __fmul_rn, __fadd_rn, __fsub_rn), so the order is the contract's whatever the compiler flags. */
#ifndef GDN_CUDA_CUH
#define GDN_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <type_traits>

#include "core/env.h"
#include "gdn_internal.h"

#define GDN_FULL_MASK 0xffffffffu

/* The problem as the kernels read it: plain values and device pointers. */
struct gdn_dev_args {
    int64_t B, T, Hk, Hv, Dk, Dv, group;
    int tiled; /* the head map: value head h reads key head gdn__key_head(h, Hk, group, tiled) */
    int dk_lane; /* ceil(Dk / 32) */
    int dtype, gate_kind, beta_kind, layout;
    const void *q, *k, *v;
    void *y;
    const float *gate, *A_log, *dt_bias, *beta;
    const uint8_t *mask;
    const float *state_in;
    float *state_out;
    float scale;
    const int32_t *slot_dev; /* state_slot_device: sequence b's slot, read after the dependency wait; NULL: entry b */
    int64_t slots;
};

static inline gdn_dev_args gdn_dev_args_of(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    gdn_dev_args d;
    d.B = a->B; d.T = a->T; d.Hk = a->Hk; d.Hv = a->Hv; d.Dk = a->Dk; d.Dv = a->Dv; d.group = p->group; d.tiled = p->tiled;
    d.dk_lane = (int)p->dk_lane;
    d.dtype = (int)a->dtype; d.gate_kind = (int)a->gate_kind; d.beta_kind = (int)a->beta_kind;
    d.layout = (int)a->state_layout;
    d.q = a->q; d.k = a->k; d.v = a->v; d.y = a->y;
    d.gate = a->gate; d.A_log = a->A_log; d.dt_bias = a->dt_bias; d.beta = a->beta; d.mask = a->mask;
    d.state_in = a->state_in; d.state_out = a->state_out; d.scale = a->scale;
    d.slot_dev = a->state_slot_device; d.slots = a->slots;
    return d;
}

/* Element idx of a q/k/v tensor of dtype DT, exactly as f32. */
template <int DT>
__device__ __forceinline__ float gdn_ld(const void *base, int64_t idx) {
    if (DT == GDN_F16) return gdn__f16_to_f32(__ldg((const unsigned short *)base + idx));
    if (DT == GDN_BF16) return gdn__bf16_to_f32(__ldg((const unsigned short *)base + idx));
    return __ldg((const float *)base + idx);
}

/* Stores x into y[idx], rounded to the dtype DT (nearest even). */
template <int DT>
__device__ __forceinline__ void gdn_st_dt(void *base, int64_t idx, float x) {
    if (DT == GDN_F16) ((uint16_t *)base)[idx] = gdn__f32_to_f16(x);
    else if (DT == GDN_BF16) ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x);
    else ((float *)base)[idx] = x;
}

/* The same with the dtype known at run time. */
__device__ __forceinline__ void gdn_st(void *base, int dtype, int64_t idx, float x) {
    if (dtype == GDN_F16) gdn_st_dt<GDN_F16>(base, idx, x);
    else if (dtype == GDN_BF16) gdn_st_dt<GDN_BF16>(base, idx, x);
    else gdn_st_dt<GDN_F32>(base, idx, x);
}

/* The scalar decay of a raw gate value x of head h (not for the vector gate). */
__device__ __forceinline__ float gdn_gate_of(const gdn_dev_args &a, float x, int64_t h) {
    if (a.gate_kind == GDN_GATE_LOG_DECAY) return gdn_expf(x);
    if (a.gate_kind == GDN_GATE_RAW) return gdn_raw_gate(x, a.A_log[h], a.dt_bias[h]);
    return x;
}

/* A head's A_log and dt_bias (GDN_GATE_RAW; zeros for the other kinds), for a kernel that loads them beside the raw
 * gate values before the state, so that the gate's math waits for one memory round trip, not two (cuda_window). */
struct gdn_head_gate {
    float A_log, dt_bias;
};

__device__ __forceinline__ gdn_head_gate gdn_head_gate_of(const gdn_dev_args &a, int64_t h) {
    gdn_head_gate hg = {0.0f, 0.0f};
    if (a.gate_kind == GDN_GATE_RAW) {
        hg.A_log = __ldg(a.A_log + h);
        hg.dt_bias = __ldg(a.dt_bias + h);
    }
    return hg;
}

/* gdn_gate_of with the head's parameters already loaded */
__device__ __forceinline__ float gdn_gate_loaded(const gdn_dev_args &a, float x, gdn_head_gate hg) {
    if (a.gate_kind == GDN_GATE_LOG_DECAY) return gdn_expf(x);
    if (a.gate_kind == GDN_GATE_RAW) return gdn_raw_gate(x, hg.A_log, hg.dt_bias);
    return x;
}

__device__ __forceinline__ float gdn_beta_of(const gdn_dev_args &a, float x) {
    return a.beta_kind == GDN_BETA_LOGIT ? gdn_sigmoidf(x) : x;
}

/* The butterfly levels m = FROM, 2 FROM, ..., WIDTH / 2 across groups of WIDTH lanes (the warp by default):
 * p <- p + p(lane xor m). Summed with the lane's own value first; IEEE addition commutes, so every lane holds the
 * contract's lane-0 value of its group. */
template <int FROM, int WIDTH = 32>
__device__ __forceinline__ float gdn_warp_tree(float p) {
#pragma unroll
    for (int m = FROM; m < WIDTH; m <<= 1) p = __fadd_rn(p, __shfl_xor_sync(GDN_FULL_MASK, p, m));
    return p;
}

/* The butterfly levels m = 1 .. N/2 inside one thread over N consecutive lane partials: x[i] <- x[i] + x[i+m]
 * for i a multiple of 2m; the result is x[0]. */
template <int N>
__device__ __forceinline__ float gdn_reg_tree(float *x) {
#pragma unroll
    for (int m = 1; m < N; m <<= 1)
#pragma unroll
        for (int i = 0; i < N; i += 2 * m) x[i] = __fadd_rn(x[i], x[i + m]);
    return x[0];
}

/* The butterfly for NCOL columns at once (independent shuffles in flight). */
template <int NCOL>
__device__ __forceinline__ void gdn_warp_tree_n(float *p) {
#pragma unroll
    for (int m = 1; m < 32; m <<= 1)
#pragma unroll
        for (int n = 0; n < NCOL; ++n) p[n] = __fadd_rn(p[n], __shfl_xor_sync(GDN_FULL_MASK, p[n], m));
}

/* One live token for the NCOL columns of a warp whose lane l is the contract's lane l: s[n][e] = S[l*c + e][j0 + n]
 * for the lane's keys e with ok[e] (k, q, gv: the same keys of this token; v: the NCOL columns' values). Per column:
 *     kv = warp tree of fmaf(S[i][j], k_i) from +0          (vector gate: g_i k_i rounded first)
 *     d  = (v - g kv) beta                                 (vector gate: (v - kv) beta)
 *     S[i][j] = fmaf(g, S[i][j], k_i d)                    (vector gate: g_i)
 *     o  = warp tree of fmaf(S[i][j], q_i) from +0
 * Returns o of column `lane` on lanes below NCOL (unscaled). */
template <int CM, int NCOL, bool VEC>
__device__ __forceinline__ float gdn_warp_token_step(float (&s)[NCOL][CM], const float *k, const float *q,
                                                     const float *gv, const float *v, float g, float beta,
                                                     const bool *ok, int lane) {
    float p[NCOL];
#pragma unroll
    for (int n = 0; n < NCOL; ++n) {
        p[n] = 0.0f;
#pragma unroll
        for (int e = 0; e < CM; ++e)
            if (ok[e]) p[n] = __fmaf_rn(s[n][e], VEC ? __fmul_rn(gv[e], k[e]) : k[e], p[n]);
    }
    gdn_warp_tree_n<NCOL>(p);
#pragma unroll
    for (int n = 0; n < NCOL; ++n) {
        const float delta = VEC ? __fmul_rn(__fsub_rn(v[n], p[n]), beta) : __fmul_rn(__fsub_rn(v[n], __fmul_rn(g, p[n])), beta);
        float o = 0.0f;
#pragma unroll
        for (int e = 0; e < CM; ++e)
            if (ok[e]) {
                s[n][e] = __fmaf_rn(VEC ? gv[e] : g, s[n][e], __fmul_rn(k[e], delta));
                o = __fmaf_rn(s[n][e], q[e], o);
            }
        p[n] = o;
    }
    gdn_warp_tree_n<NCOL>(p);
    float mine = 0.0f;
#pragma unroll
    for (int n = 0; n < NCOL; ++n)
        if (lane == n) mine = p[n];
    return mine;
}

/* n consecutive floats of a shared-memory row (16-byte aligned) into registers, as float4 loads. */
template <int n>
__device__ __forceinline__ void gdn_smem_row(float *dst, const float *row) {
#pragma unroll
    for (int e = 0; e < n; e += 4) {
        const float4 x = *(const float4 *)(row + e);
        dst[e] = x.x; dst[e + 1] = x.y; dst[e + 2] = x.z; dst[e + 3] = x.w;
    }
}

/* Asynchronous copies global -> shared memory (cp.async): 16 bytes, group commit, wait for all. */
__device__ __forceinline__ void gdn_cp16(void *smem_dst, const void *gsrc) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
}
__device__ __forceinline__ void gdn_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void gdn_cp_wait_all(void) { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* f(r, c) for this thread's 16-byte pieces of rows x row_bytes: piece i = r * per_row + c for i = threadIdx.x,
 * threadIdx.x + NT, ..., (r, c) advanced without a division per piece. */
template <int NT, typename F>
__device__ __forceinline__ void gdn_row_pieces(int rows, int row_bytes, F f) {
    const int per_row = row_bytes / 16, step_r = NT / per_row, step_c = NT % per_row;
    int r = threadIdx.x / per_row, c = threadIdx.x % per_row;
    while (r < rows) {
        f(r, c);
        r += step_r;
        c += step_c;
        if (c >= per_row) {
            c -= per_row;
            ++r;
        }
    }
}

/* rows x row_bytes from global rows (row r at src + r * src_stride) into smem rows (row r at dst + r * dst_stride),
 * in 16-byte asynchronous copies. */
template <int NT>
__device__ __forceinline__ void gdn_stage_rows(unsigned char *dst, int dst_stride, const unsigned char *src,
                                               int64_t src_stride, int rows, int row_bytes) {
    gdn_row_pieces<NT>(rows, row_bytes, [&](int r, int c) { gdn_cp16(dst + r * dst_stride + c * 16, src + r * src_stride + c * 16); });
}

/* The way back: smem rows (row r at src + r * src_stride) to global rows (row r at dst + r * dst_stride), in
 * 16-byte stores, consecutive threads on consecutive pieces. */
template <int NT>
__device__ __forceinline__ void gdn_unstage_rows(unsigned char *dst, int64_t dst_stride, const unsigned char *src,
                                                 int src_stride, int rows, int row_bytes) {
    gdn_row_pieces<NT>(rows, row_bytes, [&](int r, int c) {
        *(float4 *)(dst + r * dst_stride + c * 16) = *(const float4 *)(src + r * src_stride + c * 16);
    });
}

/* ---- a warp whose lane l is the contract's lane l (keys l*C .. l*C + C-1 of each of its columns) ---- */

/* Element e of a row of dtype DT, as f32 (exact). */
template <int DT>
__device__ __forceinline__ float gdn_row_ld(const unsigned char *row, int e) {
    if (DT == GDN_F32) return ((const float *)row)[e];
    const uint16_t x = ((const uint16_t *)row)[e];
    return DT == GDN_BF16 ? gdn__bf16_to_f32(x) : gdn__f16_to_f32(x);
}

/* The 32-bit words that hold C elements of dtype DT (at least one). */
static constexpr __host__ __device__ int gdn_words(int dt, int c) { return c * (dt == GDN_F32 ? 4 : 2) < 4 ? 1 : c * (dt == GDN_F32 ? 4 : 2) / 4; }

/* The raw words of elements lane*C .. lane*C + C-1 of a row of dtype DT (16-byte aligned), in one or two vector
 * loads. */
template <int DT, int C>
__device__ __forceinline__ void gdn_lane_load(uint32_t (&w)[gdn_words(DT, C)], const unsigned char *row, int lane) {
    constexpr int BYTES = C * (DT == GDN_F32 ? 4 : 2);
    const unsigned char *p = row + lane * BYTES;
    if constexpr (BYTES % 16 == 0) {
#pragma unroll
        for (int i = 0; i < BYTES / 16; ++i) {
            const uint4 u = ((const uint4 *)p)[i];
            w[4 * i] = u.x; w[4 * i + 1] = u.y; w[4 * i + 2] = u.z; w[4 * i + 3] = u.w;
        }
    } else if constexpr (BYTES == 8) {
        const uint2 u = *(const uint2 *)p;
        w[0] = u.x; w[1] = u.y;
    } else if constexpr (BYTES == 4) {
        w[0] = *(const uint32_t *)p;
    } else {
        w[0] = *(const uint16_t *)p;
    }
}

/* Those words as C f32 values (exact). */
template <int DT, int C>
__device__ __forceinline__ void gdn_lane_unpack(float (&x)[C], const uint32_t (&w)[gdn_words(DT, C)]) {
#pragma unroll
    for (int e = 0; e < C; ++e) {
        if (DT == GDN_F32) {
            x[e] = gdn__bits_f32(w[e]);
        } else {
            const uint16_t h = (uint16_t)(w[e >> 1] >> (16 * (e & 1)));
            x[e] = DT == GDN_BF16 ? gdn__bf16_to_f32(h) : gdn__f16_to_f32(h);
        }
    }
}

/* Elements lane*C .. lane*C + C-1 of a row of dtype DT (16-byte aligned), as f32. */
template <int DT, int C>
__device__ __forceinline__ void gdn_lane_keys(float (&x)[C], const unsigned char *row, int lane) {
    uint32_t w[gdn_words(DT, C)];
    gdn_lane_load<DT, C>(w, row, lane);
    gdn_lane_unpack<DT, C>(x, w);
}

/* A lane's C keys of a VK column from registers to p, in float4 pieces where C allows; STREAM: to global memory
 * with evict-first stores (__stcs), else plain stores (into a shared-memory stage). */
template <bool STREAM, int C>
__device__ __forceinline__ void gdn_lane_put(float *p, const float (&x)[C]) {
    if (C % 4 == 0) {
#pragma unroll
        for (int e = 0; e < C; e += 4) {
            const float4 v = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
            if (STREAM) __stcs((float4 *)(p + e), v);
            else *(float4 *)(p + e) = v;
        }
    } else {
#pragma unroll
        for (int e = 0; e < C; ++e) {
            if (STREAM) __stcs(p + e, x[e]);
            else p[e] = x[e];
        }
    }
}

/* A KV tile of 32 columns in shared memory: byte offset of the 16-byte piece c (columns 4c .. 4c+3) of key row i,
 * swizzled by (i / C) mod 8, so the 8 lanes of a load phase (rows l*C + e) hit different banks. */
template <int C>
__device__ __forceinline__ int gdn_kv_piece(int i, int c) { return i * 128 + ((c ^ ((i / C) & 7)) << 4); }

/* The contract's butterfly over the warp for NC columns' lane partials, run transposed: at level m = 1, 2, .., NC/2
 * a lane keeps half of its columns and gives the other half to lane l xor m, adding the partner's values of the
 * columns it keeps (p_l + p_(l xor m), exactly the butterfly's addition); levels NC .. 16 are the plain butterfly.
 * For 8 columns 9 shuffles instead of 40. Lane l ends with the tree of column gdn_tree_col<NC>(l), as does every
 * lane with the same l mod NC. gdn_tree_col reverses the low log2(NC) bits, so it is its own inverse: lane
 * gdn_tree_col<NC>(n) < NC holds column n. */
template <int NC>
__device__ __forceinline__ int gdn_tree_col(int lane) {
    int c = 0;
#pragma unroll
    for (int i = 0; (1 << i) < NC; ++i) c += (NC / 2 >> i) * ((lane >> i) & 1);
    return c;
}

/* NX such trees at once, level by level (their shuffles in flight together): r[x] = the tree of p[x]. */
template <int NC, int NX>
__device__ __forceinline__ void gdn_tree_transposed(const float (&p)[NX][NC], float (&r)[NX], int lane) {
    bool hi[5]; /* at level m: the lane keeps the upper half of its columns */
#pragma unroll
    for (int m = 1, i = 0; m < 32; m <<= 1, ++i) hi[i] = lane & m;
    float w[NX][NC];
#pragma unroll
    for (int x = 0; x < NX; ++x)
#pragma unroll
        for (int c = 0; c < NC; ++c) w[x][c] = p[x][c];
#pragma unroll
    for (int m = 1, half = NC / 2, i = 0; m < NC; m <<= 1, half >>= 1, ++i) {
        const bool o = hi[i];
#pragma unroll
        for (int x = 0; x < NX; ++x)
#pragma unroll
            for (int c = 0; c < half; ++c) /* w[c]: the column (kept so far) + half o + c */
                w[x][c] = __fadd_rn(o ? w[x][c + half] : w[x][c], __shfl_xor_sync(GDN_FULL_MASK, o ? w[x][c] : w[x][c + half], m));
    }
#pragma unroll
    for (int x = 0; x < NX; ++x) r[x] = w[x][0];
#pragma unroll
    for (int m = NC; m < 32; m <<= 1)
#pragma unroll
        for (int x = 0; x < NX; ++x) r[x] = __fadd_rn(r[x], __shfl_xor_sync(GDN_FULL_MASK, r[x], m));
}

/* A live token's update of a warp's NC columns, lane = the contract's lane with keys lane*C .. lane*C + C-1, after
 * the transposed kv tree left kv of column gdn_tree_col<NC>(lane) in this lane:
 *     d      = (v - g kv) beta of that column (vector gate: (v - kv) beta), then every column's d by shuffle
 *     S[e][n] = fmaf(g, S[e][n], k_e d_n)   (vector gate: gv_e)
 *     o[n]    = the readout's lane partial, S[e][n] q_e accumulated ascending from +0 */
template <int NC, int C, bool VEC>
__device__ __forceinline__ void gdn_update_columns(float (&s)[NC][C], float (&o)[NC], float kv, float v, float g, float beta,
                                                   const float (&k)[C], const float (&q)[C], const float (&gv)[C]) {
    const float d_col = VEC ? __fmul_rn(__fsub_rn(v, kv), beta) : __fmul_rn(__fsub_rn(v, __fmul_rn(g, kv)), beta);
#pragma unroll
    for (int n = 0; n < NC; ++n) {
        const float d = __shfl_sync(GDN_FULL_MASK, d_col, gdn_tree_col<NC>(n));
        o[n] = 0.0f;
#pragma unroll
        for (int e = 0; e < C; ++e) {
            s[n][e] = __fmaf_rn(VEC ? gv[e] : g, s[n][e], __fmul_rn(k[e], d));
            o[n] = __fmaf_rn(s[n][e], q[e], o[n]);
        }
    }
}

/* 16 raw bytes at element i of raw (4 f32 or 8 half/bfloat16 elements) as f32 in f[0 .. 16/sizeof-1]. */
template <int DT>
__device__ __forceinline__ void gdn_unpack16(const unsigned char *raw, int i, float *f) {
    if (DT == GDN_F32) {
        const float4 x = *(const float4 *)(raw + 4 * i);
        f[0] = x.x; f[1] = x.y; f[2] = x.z; f[3] = x.w;
        return;
    }
    const uint4 u = *(const uint4 *)(raw + 2 * i);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const uint16_t lo = (uint16_t)(w[e] & 0xffffu), hi = (uint16_t)(w[e] >> 16);
        f[2 * e] = DT == GDN_BF16 ? gdn__bf16_to_f32(lo) : gdn__f16_to_f32(lo);
        f[2 * e + 1] = DT == GDN_BF16 ? gdn__bf16_to_f32(hi) : gdn__f16_to_f32(hi);
    }
}

/* 16 raw bytes (4 f32 or 8 half/bfloat16 elements) from raw[i] to f32 at dst[i]. */
template <int DT>
__device__ __forceinline__ void gdn_cvt16(float *dst, const unsigned char *raw, int i) {
    float f[8];
    gdn_unpack16<DT>(raw, i, f);
    *(float4 *)(dst + i) = make_float4(f[0], f[1], f[2], f[3]);
    if (DT != GDN_F32) *(float4 *)(dst + i + 4) = make_float4(f[4], f[5], f[6], f[7]);
}

/* The launchers' dispatch from run-time arguments to kernel instantiations: f(dt, vec) with dt an
 * std::integral_constant<int, DT> for the input dtype and vec an std::bool_constant, true for the vector gate. */
template <typename F>
static inline gdn_status gdn_dispatch_dtype_gate(const gdn__problem *p, F &&f) {
    auto gate = [&](auto dt) { return p->a.gate_kind == GDN_GATE_VECTOR ? f(dt, std::true_type()) : f(dt, std::false_type()); };
    switch (p->a.dtype) {
    case GDN_F16: return gate(std::integral_constant<int, GDN_F16>());
    case GDN_BF16: return gate(std::integral_constant<int, GDN_BF16>());
    default: return gate(std::integral_constant<int, GDN_F32>());
    }
}

/* Programmatic dependent launch (PDL). A kernel launched with gdn_launch_pdl may be scheduled while the kernel
 * before it on the stream is still running; it must begin with gdn_grid_dependency_wait(), which blocks until that
 * kernel has completed and its memory is visible, and then lets the next kernel be scheduled in turn. The launch
 * latency and L2 prefetches (gdn_prefetch_l2, below) overlap; no input is read early. GDN_CUDA_PDL=0 (read once)
 * launches plainly. */
static inline int gdn_cuda_pdl_enabled(void) {
    static int on = -1; /* -1: not read yet */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        v = gdn__env_bool("GDN_CUDA_PDL", 1);
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

template <typename... Params, typename... Args>
static inline gdn_status gdn_launch_pdl(void (*kernel)(Params...), dim3 grid, unsigned block, int smem_bytes,
                                        void *stream, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = (size_t)smem_bytes;
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = &attr;
    cfg.numAttrs = gdn_cuda_pdl_enabled() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

/* L2 prefetch hints: they return nothing and order nothing, so a kernel may issue them before
 * gdn_grid_dependency_wait(). The lines come into L2 (the point of coherence of every SM) while the kernel before it
 * still runs; a load after the wait returns what that kernel wrote, whether or not the line was prefetched. */
__device__ __forceinline__ void gdn_prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

/* [p, p + bytes): p 16-byte aligned, bytes a multiple of 16 */
__device__ __forceinline__ void gdn_prefetch_l2_bulk(const void *p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes));
}

/* L2 prefetches of what a block serving the 32 value columns j0 .. j0+31 of (b, h) reads: the state's 32 columns
 * (of state entry sb: b, or its slot; with slots on the device, the slot as it reads before the dependency wait,
 * through L2 (__ldcg, so that the read after the wait cannot hit a stale L1 line): a hint, right whenever the kernel
 * before wrote no slot, and skipped when out of range; VK: 32 contiguous columns of Dk floats, by thread 0; KV: Dk
 * rows of 128 bytes, a row per thread), and by thread
 * 32 + t, for each token t < T, the k and q rows of key head hk, the 32 values of v, the gate (or the vector gate's
 * row), beta and the mask byte. Blocks of at least 64 threads. */
template <int DT, bool VEC, bool KV, int DK>
__device__ __forceinline__ void gdn_prefetch_columns(const gdn_dev_args &a, int64_t b, int64_t sb, int64_t h, int64_t hk,
                                                     int64_t j0) {
    constexpr int DS = DT == GDN_F32 ? 4 : 2;
    const int x = threadIdx.x;
    if (a.slot_dev && a.state_in) {
        const int32_t slot = __ldcg(a.slot_dev + b);
        sb = slot >= 0 && slot < a.slots ? slot : -1;
    }
    if (a.state_in && sb >= 0) {
        const float *s = a.state_in + (sb * a.Hv + h) * DK * a.Dv;
        if (!KV && x == 0) gdn_prefetch_l2_bulk(s + j0 * DK, 32 * DK * 4);
        if (KV)
            for (int i = x; i < DK; i += blockDim.x) gdn_prefetch_l2(s + i * a.Dv + j0);
    }
    if (x >= 32 && x < 32 + a.T) {
        const int64_t bt = b * a.T + (x - 32), gi = bt * a.Hv + h, qk = (bt * a.Hk + hk) * DK * DS, vj = (gi * a.Dv + j0) * DS;
        gdn_prefetch_l2_bulk((const unsigned char *)a.k + qk, DK * DS);
        gdn_prefetch_l2_bulk((const unsigned char *)a.q + qk, DK * DS);
        gdn_prefetch_l2((const unsigned char *)a.v + vj);
        gdn_prefetch_l2((const unsigned char *)a.v + vj + 32 * DS - 1);
        if (VEC) gdn_prefetch_l2_bulk(a.gate + gi * DK, DK * 4);
        else gdn_prefetch_l2(a.gate + gi);
        gdn_prefetch_l2(a.beta + gi);
        if (a.mask) gdn_prefetch_l2(a.mask + bt);
    }
}

/* Sequence b's state entry with slots on the device (a.slot_dev; after the dependency wait), or b; *skip: a slot
 * outside [0, slots), whose sequence writes y = 0 and no state (its reads take entry 0, which exists). */
__device__ __forceinline__ int64_t gdn_state_entry(const gdn_dev_args &a, int64_t b, bool *skip) {
    if (!a.slot_dev) {
        *skip = false;
        return b;
    }
    const int32_t slot = __ldg(a.slot_dev + b);
    *skip = slot < 0 || slot >= a.slots;
    return *skip ? 0 : slot;
}

/* The first statement of a kernel launched with gdn_launch_pdl (a no-op under a plain launch), or the first after its
 * L2 prefetches. */
__device__ __forceinline__ void gdn_grid_dependency_wait(void) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* mbarriers in shared memory: a barrier completes a phase when `count` arrivals (and any expected transaction bytes)
 * have come; gdn_mbar_wait(bar, k mod 2) returns once its k-th phase has completed. */
__device__ __forceinline__ unsigned gdn_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void gdn_mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(gdn_smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void gdn_mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(gdn_smem_addr(bar)) : "memory");
}

/* an arrival that also expects `bytes` of transactions (bulk copies completing on bar) in the current phase */
__device__ __forceinline__ void gdn_mbar_expect(uint64_t *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(gdn_smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void gdn_mbar_wait(uint64_t *bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(gdn_smem_addr(bar)), "r"(parity)
                     : "memory");
}

/* A launch limit, as eligibility: a grid of `blocks` blocks (x) fits CUDA's 2^31 - 1. Each kernel's eligibility
 * checks its grid, so that gdn_route and gdn_delta agree on every shape (no kernel fails at launch on size). */
static inline int gdn_grid_fits(int64_t blocks) { return blocks >= 1 && blocks <= 0x7fffffffLL; }

static inline int gdn_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Every tensor the staging kernels copy in 16-byte pieces is 16-byte aligned: q, k, v, the vector gate (when it is
 * the gate kind) and both states (NULL counts as aligned). */
static inline int gdn_staged_tensors_aligned16(const gdn_delta_args *a) {
    return gdn_aligned16(a->q) && gdn_aligned16(a->k) && gdn_aligned16(a->v) &&
           (a->gate_kind != GDN_GATE_VECTOR || gdn_aligned16(a->gate)) && gdn_aligned16(a->state_in) &&
           gdn_aligned16(a->state_out);
}

/* Streaming multiprocessors of the current device, 0 if the query fails; asked once per device (the first 64), as
 * routing and every launcher of a call read it. */
static inline int gdn_cuda_sm_count(void) {
    static int known[64]; /* 0: not asked yet */
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    const int cached = dev >= 0 && dev < 64;
    if (cached && (sms = __atomic_load_n(&known[dev], __ATOMIC_RELAXED)) > 0) return sms;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
    if (cached) __atomic_store_n(&known[dev], sms, __ATOMIC_RELAXED);
    return sms;
}

/* The call's items of 32 value columns (B Hv Dv/32 of them) fit in one wave, one block per SM (B=1 at the model's
 * heads): there the kernels that load the state straight into registers beat the streamed decode. */
static inline int gdn_cuda_items32_in_one_wave(const gdn__problem *p) {
    return p->a.B * p->a.Hv * (p->a.Dv / 32) <= gdn_cuda_sm_count();
}

/* Largest dynamic shared memory a block may use on the current device, read once (48 KB if the query fails). */
static inline int gdn_cuda_smem_optin(void) {
    static int bytes = -1; /* racing first callers store the same answer */
    int b = __atomic_load_n(&bytes, __ATOMIC_RELAXED);
    if (b < 0) {
        int dev = 0, v = 48 * 1024;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            v = 48 * 1024;
        __atomic_store_n(&bytes, v, __ATOMIC_RELAXED);
        b = v;
    }
    return b;
}

/* Lets `kernel` launch with up to the opt-in shared memory per block (needed above 48 KB). Every caller sets the
 * same value, so threads making their first calls at once cannot undo each other; `*done` (one per kernel) skips
 * the call once it has succeeded. */
template <typename Kernel>
static inline gdn_status gdn_cuda_allow_smem(Kernel kernel, int *done) {
    if (__atomic_load_n(done, __ATOMIC_ACQUIRE)) return GDN_OK;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, gdn_cuda_smem_optin()) != cudaSuccess)
        return GDN_ERR_DEVICE;
    __atomic_store_n(done, 1, __ATOMIC_RELEASE);
    return GDN_OK;
}

#endif
