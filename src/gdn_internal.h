/* Private to libgdn: the validated problem every kernel receives, the kernel table, and the helpers that
 * read inputs the contract's way. Compiles as C and as CUDA (the .cu launchers include it). */
#ifndef GDN_INTERNAL_H
#define GDN_INTERNAL_H

#include "gdn.h"
#include "common/gdn_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A validated call: the public arguments plus derived sizes. Kernels trust every field. */
typedef struct gdn__problem {
    gdn_delta_args a;
    int64_t group;        /* Hv / Hk: value heads per key head */
    int64_t dk_lane;      /* ceil(Dk / 32): key elements per lane of the contract's tree */
    int64_t dv_lane;      /* ceil(Dv / 32) */
    size_t dtype_size;    /* bytes per element of q, k, v, y */
    int threads;          /* CPU threads to use (>= 1) */
} gdn__problem;

typedef gdn_status (*gdn__kernel_fn)(const gdn__problem *p);
typedef int (*gdn__eligible_fn)(const gdn__problem *p);

/* One entry of the routing table: the first entry (of the call's backend) that the router may take wins. A kernel
 * named in the call runs wherever it is eligible. */
typedef struct gdn__kernel {
    const char *name;
    gdn_backend backend;
    int packed;               /* 1: skipped by the router when GDN_PACKED=0 */
    gdn__eligible_fn eligible; /* it can run these arguments on this hardware */
    gdn__eligible_fn routed;   /* the router takes it (implies eligible); NULL: wherever eligible */
    gdn__kernel_fn run;
} gdn__kernel;

/* The routing table in order (src/core/route.c). */
extern const gdn__kernel gdn__kernels[];
extern const int gdn__kernel_total;

/* Validation and routing (src/core/api.c, src/core/route.c). */
gdn_status gdn__validate(const gdn_delta_args *args, gdn__problem *p);
const gdn__kernel *gdn__route(const gdn__problem *p);
int gdn__packed_enabled(void); /* GDN_PACKED, read once: 0 disables every packed kernel */

/* ---- kernels ---- */
gdn_status gdn__delta_ref(const gdn__problem *p);           /* src/delta/ref.c: the contract, scalar */
gdn_status gdn__delta_portable(const gdn__problem *p);      /* src/delta/cpu/portable.c: blocked, any ISA */
gdn_status gdn__delta_packed_avx2(const gdn__problem *p);   /* src/delta/cpu/packed_avx2.c: AVX2 + FMA */
gdn_status gdn__delta_decode_avx2(const gdn__problem *p);   /* src/delta/cpu/packed_decode_avx2.c: AVX2 + FMA, Dk = 128, T <= 2 */
int gdn__decode_avx2_eligible(const gdn__problem *p);
int gdn__cpu_has_avx2_fma(void);                            /* src/cpu/features.c */
int gdn__cpu_has_fma(void);                                 /* src/cpu/features.c: FMA3 (x86) */
int gdn__cpu_has_avx512(void);                              /* src/cpu/features.c: AVX-512 F, BW, VL, DQ and FMA3 */
gdn_status gdn__delta_packed_avx512(const gdn__problem *p); /* src/delta/cpu/packed_avx512.c: AVX-512 */
int gdn__packed_avx512_eligible(const gdn__problem *p);
gdn_status gdn__delta_decode_avx512(const gdn__problem *p); /* src/delta/cpu/packed_decode_avx512.c: AVX-512, Dk = 128, T <= 2 */
int gdn__decode_avx512_eligible(const gdn__problem *p);
int gdn__portable_fast(void);                               /* portable's fmaf is a vector instruction here */

/* CUDA kernels (the .cu files under src; src/cuda/absent.c when built without nvcc). Eligibility includes
 * "a device is present". */
int gdn__cuda_devices(void);
int gdn__cuda_generic_eligible(const gdn__problem *p);
int gdn__cuda_packed_eligible(const gdn__problem *p);
int gdn__cuda_decode_eligible(const gdn__problem *p);
int gdn__cuda_decode_routed(const gdn__problem *p); /* eligible, where it beats rowsplit */
int gdn__cuda_rowsplit_eligible(const gdn__problem *p);
int gdn__cuda_window_eligible(const gdn__problem *p);
int gdn__cuda_window_routed(const gdn__problem *p); /* eligible, and few enough sequences to gain */
gdn_status gdn__delta_cuda_generic(const gdn__problem *p);
gdn_status gdn__delta_cuda_packed(const gdn__problem *p);
gdn_status gdn__delta_cuda_decode(const gdn__problem *p);
gdn_status gdn__delta_cuda_rowsplit(const gdn__problem *p);
gdn_status gdn__delta_cuda_window(const gdn__problem *p);
/* Variants for benchmarks and tests: packed by variant id (0 = the routed one; 6, 8: the state through a
 * shared-memory tile), cuda_window (0 only), decode with 4 or 8 columns per
 * warp or 32 (the streamed kernel; 102 .. 104: with a ring of 2 .. 4 stages; 232: on 8 blocks; 332 / 432: block-synchronous / warp-specialized forced; 532: warp-specialized on 8 blocks with pseudo-random pauses), rowsplit by warps per block (4, 8, 16; 0 = the routed one); gdn__cuda_run_variant validates `args` and runs
 * `kernel` ("cuda_packed", "cuda_decode", "cuda_rowsplit", "cuda_window", "cuda_generic") with that variant. */
gdn_status gdn__delta_cuda_packed_variant(const gdn__problem *p, int variant);
gdn_status gdn__delta_cuda_rowsplit_variant(const gdn__problem *p, int variant);
gdn_status gdn__delta_cuda_decode_ncol(const gdn__problem *p, int ncol);
/* The streamed decode kernel (src/delta/cuda/decode_stream.cu), which cuda_decode routes to where it applies; stages = the
 * depth of its ring of shared-memory stages (2 .. 4; 0: the default); max_blocks caps its grid (0: no cap); ws (VK):
 * 1 warp-specialized (a filling warp's bulk copies in, bulk stores out), 2 the same with pseudo-random pauses at its
 * mbarrier hand-offs (tests), 0 block-synchronous (cp.async in, stores from registers), -1 chosen by the items per
 * block and the tokens. */
int gdn__cuda_decode_stream_eligible(const gdn__problem *p);
gdn_status gdn__delta_cuda_decode_stream(const gdn__problem *p, int stages, int max_blocks, int ws);
gdn_status gdn__cuda_run_variant(const gdn_delta_args *args, const char *kernel, int variant);

/* float64 oracle (tests only): same shapes, y and state_out as double. state_in is f32 as usual. */
gdn_status gdn__delta_oracle(const gdn__problem *p, double *y, double *state_out);

/* ---- the contract's building blocks, shared by the C kernels ---- */

/* Element idx of a q/k/v tensor, exactly as f32. */
static inline float gdn__load(const void *base, gdn_dtype dtype, int64_t idx) {
    switch (dtype) {
    case GDN_F16: return gdn__f16_to_f32(((const uint16_t *)base)[idx]);
    case GDN_BF16: return gdn__bf16_to_f32(((const uint16_t *)base)[idx]);
    default: return ((const float *)base)[idx];
    }
}

/* n consecutive elements from idx, as f32. */
static inline void gdn__load_row(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = gdn__load(base, dtype, idx + i);
}

/* Store an f32 into y, rounded to the dtype (nearest even). */
static inline void gdn__store(void *base, gdn_dtype dtype, int64_t idx, float x) {
    switch (dtype) {
    case GDN_F16: ((uint16_t *)base)[idx] = gdn__f32_to_f16(x); break;
    case GDN_BF16: ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x); break;
    default: ((float *)base)[idx] = x; break;
    }
}

/* The scalar decay g of token (b, t), value head h (not for GDN_GATE_VECTOR). */
static inline float gdn__scalar_gate(const gdn_delta_args *a, int64_t b, int64_t t, int64_t h) {
    float x = a->gate[(b * a->T + t) * a->Hv + h];
    switch (a->gate_kind) {
    case GDN_GATE_LOG_DECAY: return gdn_expf(x);
    case GDN_GATE_RAW: return gdn_raw_gate(x, a->A_log[h], a->dt_bias[h]);
    default: return x;
    }
}

/* beta of token (b, t), value head h. */
static inline float gdn__beta(const gdn_delta_args *a, int64_t b, int64_t t, int64_t h) {
    float x = a->beta[(b * a->T + t) * a->Hv + h];
    return a->beta_kind == GDN_BETA_LOGIT ? gdn_sigmoidf(x) : x;
}

static inline int gdn__token_live(const gdn_delta_args *a, int64_t b, int64_t t) {
    return a->mask == NULL || a->mask[b * a->T + t] != 0;
}

/* The contract's dot product of two length-n f32 vectors: lane l of 32 accumulates its contiguous chunk
 * [l*c, l*c + c) (c = ceil(n/32), clipped to n) ascending with fmaf from +0, then the butterfly adds lanes
 * l and l^m for m = 1, 2, 4, 8, 16. Lane 0's value is returned (all lanes agree). */
static inline float gdn__tree_dot(const float *x, const float *w, int64_t n) {
    int64_t c = (n + 31) / 32;
    float p[32];
    for (int64_t l = 0; l < 32; ++l) {
        float s = 0.0f;
        int64_t end = (l + 1) * c < n ? (l + 1) * c : n;
        for (int64_t e = l * c; e < end; ++e) s = fmaf(x[e], w[e], s);
        p[l] = s;
    }
    for (int m = 1; m < 32; m <<= 1)
        for (int l = 0; l < 32; l += 2 * m) p[l] = p[l] + p[l + m];
    return p[0];
}

/* Offsets of the state of (b, h), element (i key row, j value column), in either layout. */
static inline int64_t gdn__state_index(const gdn_delta_args *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    int64_t base = (b * a->Hv + h) * a->Dk * a->Dv;
    return a->state_layout == GDN_STATE_VK ? base + j * a->Dk + i : base + i * a->Dv + j;
}

/* ---- CPU thread pool (src/cpu/pool.c) ---- */

/* Calls fn(ctx, item, worker) for item in [0, n_items), spread over at most `threads` pool threads (the
 * caller's thread takes part); worker in [0, threads) names the thread, for per-thread scratch. Items are
 * claimed dynamically; each item must write disjoint memory. If the pool is busy with another caller's job,
 * the items run on the calling thread alone (worker 0). */
typedef void (*gdn__item_fn)(void *ctx, int64_t item, int worker);
void gdn__parallel_for(int64_t n_items, int threads, gdn__item_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
