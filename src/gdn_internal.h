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
    int tiled;            /* a.head_map == GDN_HEADS_TILED: value head h reads key head h % Hk, else h / group */
    int64_t dk_lane;      /* ceil(Dk / 32): key elements per lane of the contract's tree */
    int64_t dv_lane;      /* ceil(Dv / 32) */
    size_t dtype_size;    /* bytes per element of q, k, v, y */
    int threads;          /* CPU worker ids the call may use (>= 1): the pool's, or the runner's */
    void *ws;             /* the run's host workspace, 64-byte aligned, ws_bytes long (at least what the kernel's */
    int64_t ws_bytes;     /* `workspace` asked for): kernels allocate nothing */
    void *dev_ws;         /* cuda_chunked's device workspace when the caller has one of dev_ws_bytes (NULL: it */
    int64_t dev_ws_bytes; /* allocates its own before its first launch) */
} gdn__problem;

/* A named variant of a kernel: the options a test or benchmark forces ("cuda_decode:stream_sync"). Each kernel
 * reads the fields it has; 0 means the kernel's own choice. */
typedef struct gdn__variant {
    const char *name;
    int lanes;  /* lanes per value column (cuda_packed) */
    int cols;   /* value columns per lane (cuda_packed) or per warp (cuda_decode's warp kernel; 32: streamed) */
    int warps;  /* warps per block */
    int stages; /* depth of a shared-memory ring (cuda_decode's streamed kernel) */
    int blocks; /* a cap on the grid (0: none) */
    int mode;   /* kernel-specific (cuda_decode: GDN__DECODE_*) */
    int tile;   /* 1: the state through a shared-memory tile (cuda_packed) */
} gdn__variant;

/* One kernel of the table. */
typedef struct gdn__kernel {
    const char *name;
    gdn_backend backend;
    int packed;                                   /* 1: skipped by the router when GDN_PACKED=0 */
    gdn_contract contract;                        /* the router takes only GDN_CONTRACT_EXACT kernels */
    int (*eligible)(const gdn__problem *p);       /* it can run these arguments on this hardware */
    int (*routed)(const gdn__problem *p);         /* the router takes it (implies eligible) */
    int64_t (*workspace)(const gdn__problem *p);  /* bytes of host workspace run takes in p->ws; -1: too many */
    gdn_status (*run)(const gdn__problem *p, const gdn__variant *v);
    const gdn__variant *variants;                 /* {NULL}-terminated */
} gdn__kernel;

/* Every kernel's entry points, from the list; a CPU kernel's workspace size too (a CUDA kernel takes no host
 * workspace: gdn__no_workspace). */
#include "delta/kernels.h"
#define GDN__DECLARE_WS_CPU(name) int64_t gdn__delta_##name##_workspace(const gdn__problem *p);
#define GDN__DECLARE_WS_CUDA(name)
#define GDN__DECLARE(name, backend, packed, contract)                                \
    int gdn__delta_##name##_eligible(const gdn__problem *p);                 \
    int gdn__delta_##name##_routed(const gdn__problem *p);                   \
    gdn_status gdn__delta_##name(const gdn__problem *p, const gdn__variant *v); \
    extern const gdn__variant gdn__delta_##name##_variants[];                \
    GDN__DECLARE_WS_##backend(name)
GDN_DELTA_KERNELS(GDN__DECLARE)
#undef GDN__DECLARE
int64_t gdn__no_workspace(const gdn__problem *p);

/* The routing table in the list's order (src/core/route.c). */
extern const gdn__kernel gdn__kernels[];
extern const int gdn__kernel_total;

/* Validation (src/delta/args.c) and routing (src/core/route.c). gdn__validate checks everything but that no two
 * sequences of a batch-form call write one slot (gdn__delta_prepare's caller has that checked in the workspace). */
gdn_status gdn__validate(const gdn_delta_args *args, gdn__problem *p);

/* gdn_delta in two steps, for a caller that makes several calls and must have every allocation behind it before the
 * first writes (the layer step): gdn__delta_prepare validates args and picks the kernels as gdn_delta does, and says
 * how much host workspace the call takes, and device workspace (cuda_chunked's); gdn__delta_execute checks the slots
 * written once in the host workspace (GDN_ERR_OVERLAP, nothing written), then runs the call there, allocating nothing
 * on the host, nor on the device when given dev_ws of dev_bytes (NULL: cuda_chunked allocates its own before its
 * first launch). gdn_delta is the two with a host workspace of ws_bytes between them. */
typedef struct gdn__delta_call {
    gdn__problem p;
    const gdn__kernel *kn;       /* the dense form's kernel; the batch form's for the longest window */
    const gdn__variant *variant; /* the named variant, or NULL */
    int chunked;                 /* the batch form as one cuda_chunked batch */
    int64_t ws_bytes;            /* the host workspace execute takes (0: none) */
    int64_t dev_bytes;           /* the device workspace (0: none) */
} gdn__delta_call;
gdn_status gdn__delta_prepare(const gdn_delta_args *args, gdn__delta_call *c);
gdn_status gdn__delta_execute(gdn__delta_call *c, void *ws, void *dev_ws); /* ws: 64-byte aligned, ws_bytes long */
/* Shared by the ops' validations (src/core/checks.c): the layout and backend enums and the reserved words; threads
 * >= 0 and Hv % Hk; a CPU runner (NULL is valid). */
gdn_status gdn__check_layout_backend_reserved(gdn_state_layout layout, gdn_backend backend, const uint64_t *reserved,
                                              int n_reserved);
gdn_status gdn__check_threads_heads(int threads, int64_t Hk, int64_t Hv);
/* state_dtype and head_map: known enums, and those this build runs */
gdn_status gdn__check_state_dtype_head_map(gdn_dtype state_dtype, gdn_head_map head_map);
gdn_status gdn__validate_runner(const gdn_cpu_runner *runner);
/* A tensor pointer and its element's bytes; GDN_ERR_ALIGNMENT naming the first that is not aligned (NULL is). */
typedef struct gdn__aligned {
    const char *name;
    const void *ptr;
    int64_t align;
} gdn__aligned;
gdn_status gdn__check_aligned(const gdn__aligned *list, size_t n);
/* The CPU worker ids a call may use (>= 1): the runner's, else at most `threads` (0: all) of the pool; 1 for CUDA. */
int gdn__call_threads(gdn_backend backend, const gdn_cpu_runner *runner, int threads);
const gdn__kernel *gdn__route(const gdn__problem *p);
/* args->kernel = "fastest": a kernel of the chunked contract where one is eligible and the window has at least
 * GDN_CHUNKED_MIN_T tokens, else gdn__route's choice. A rule per window, so that a sequence's kernel (and bits) never
 * depends on the batch around it. 64, one chunk: on the H200 (bench/results/chunked_crossover_h200.json,
 * docs/PERFORMANCE.md) the exact path is ahead only for a lone window below about 80 tokens (64: 18.2 against 20.2
 * us), while in a batch of windows of 64 the chunked prefill takes a third of its time (16: 99 against 282 us). */
#define GDN_CHUNKED_MIN_T 64
const gdn__kernel *gdn__route_fastest(const gdn__problem *p);
/* The per-sequence arrays of a varlen batch, for gdn_delta and gdn_layer (src/core/sequences.c); each failure names
 * args->FIELD in gdn_last_error. Window b of cu_seqlens: cu_seqlens[0] == 0 (b = 0) and cu_seqlens[b + 1] above
 * cu_seqlens[b]. A slot below `slots` (GDN_ERR_BAD_SIZE otherwise; negative ones pass: skipped). No two of the B
 * sequences naming one slot (negative: none) while one of them writes it: writes[b] > 0 (writes NULL: every one
 * writes); GDN_ERR_OVERLAP with `why` ("one of them commits"), or GDN_ERR_OUT_OF_MEMORY; in `scratch` of
 * gdn__slot_writers_bytes(B) bytes (-1: too many), or NULL: its own allocation. */
gdn_status gdn__check_window(const int32_t *cu_seqlens, int64_t b);
gdn_status gdn__check_slot(const char *field, int64_t b, int64_t slot, int64_t slots);
gdn_status gdn__check_slot_writers(const char *field, const int32_t *slot, const int32_t *writes, int64_t B,
                                   const char *why, void *scratch);
int64_t gdn__slot_writers_bytes(int64_t B);
int gdn__packed_enabled(void); /* GDN_PACKED, read once (src/core/env.c): 0 disables every packed kernel */
int gdn__check_pointers(void); /* GDN_CHECK_POINTERS, read once: 1 checks that CUDA calls get device memory */
/* An empty detail for a call that succeeds; returns GDN_OK. */
gdn_status gdn__ok(void);
/* The detail of a failure for gdn_last_error (printf format); returns `status`. */
gdn_status gdn__fail(gdn_status status, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int gdn__cpu_has_avx2_fma(void); /* src/cpu/features.c */

/* Every allocation of the library (src/core/alloc.c): malloc, calloc and aligned_alloc (`bytes` rounded up to a
 * multiple of `align`) that return NULL when the allocator does, or when a GDN_TESTING build's test asks for this
 * one to fail; gdn__alloc_refused() is that test's verdict for an allocation made otherwise (a pool thread's start).
 * Free with free(). */
void *gdn__malloc(size_t bytes);
void *gdn__calloc(size_t n, size_t size);
void *gdn__aligned_alloc(size_t align, size_t bytes);
int gdn__alloc_refused(void);

/* A CPU workspace of at least `bytes` bytes, 64-byte aligned, kept from an earlier call where one fits
 * (src/cpu/workspace.c); *got is its size, to hand back with gdn__ws_give (which keeps or frees it). NULL: no
 * memory. Its contents are whatever the last user left. */
void *gdn__ws_take(size_t bytes, size_t *got);
void gdn__ws_give(void *p, size_t bytes);

/* The CPU kernels other than ref are routed from 128 state updates per call (B T Hv Dk Dv): below, their fixed cost
 * (~0.2 us over ref's) is not repaid (T=1, Hv=1, Dk=32, Dv=1: ref 0.56 us, portable 0.67). In double: no overflow. */
static inline int gdn__cpu_call_is_big(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    return (double)a->B * (double)a->T * (double)a->Hv * (double)a->Dk * (double)a->Dv >= 128.0;
}
int gdn__cpu_has_fma(void);      /* src/cpu/features.c: FMA3 (x86) */
int gdn__cpu_has_avx512(void);   /* src/cpu/features.c: AVX-512 F, BW, VL, DQ and FMA3 */
int gdn__portable_fast(void);    /* src/delta/cpu/portable.c: its fmaf is a vector instruction here */

/* The CUDA backend (src/cuda/device.cu; src/cuda/absent.c when built without nvcc). Eligibility includes "a device
 * is present". */
int gdn__cuda_devices(void);
/* GDN_ERR_NOT_DEVICE_MEMORY when a pointer the call uses is not device (or managed) memory of the device */
gdn_status gdn__cuda_check_pointers(const gdn__problem *p);
/* A device workspace of `bytes` bytes (cudaMallocAsync on the stream; GDN_ERR_OUT_OF_MEMORY, *p NULL, when refused or
 * when a GDN_TESTING build's test fails it: gdn__alloc_refused), and its release (NULL: nothing). */
gdn_status gdn__cuda_alloc(void **p, int64_t bytes, void *stream);
gdn_status gdn__cuda_free(void *p, void *stream);
/* bytes from src to dst (device memory), ordered on the stream */
gdn_status gdn__cuda_copy(void *dst, const void *src, size_t bytes, void *stream);
/* Zeros `bytes` bytes of device memory at p, asynchronously on `stream` (a cudaStream_t; NULL: the default);
 * GDN_ERR_DEVICE when the runtime refuses. */
gdn_status gdn__cuda_zero(void *p, size_t bytes, void *stream);
/* The batch form in one launch (src/delta/cuda/decode_stream.cu): p is a dense problem of B <= GDN_DEC_SLOTS
 * sequences of T <= 8 tokens over pools, sequence b's state at entry slot[b] (host, >= 0); GDN_ERR_INELIGIBLE where
 * the streamed decode kernel does not take it (or a vector gate). */
#define GDN_DEC_SLOTS 256
gdn_status gdn__cuda_decode_stream_slots(const gdn__problem *p, const int32_t *slot, int launch); /* 0: judge only */

/* cuda_chunked over the sequences b of a validated call (dense or batch form) with take[b] set (take NULL: every one;
 * the others are left alone), in one launch pair per 128 sequences (src/delta/cuda/chunked.cu); the caller has judged
 * it eligible for each. */
gdn_status gdn__cuda_chunked_sequences(const gdn__problem *p, const uint8_t *take);
/* The device workspace gdn__cuda_chunked_sequences(p, take) takes, in bytes (-1: too many to count). */
int64_t gdn__cuda_chunked_bytes(const gdn__problem *p, const uint8_t *take);


/* ---- the head mapping (gdn_head_map), the one rule every kernel of both ops follows (C and CUDA) ---- */

/* The q/k head that value head h reads, G = Hv / Hk: h / G (GDN_HEADS_GROUPED) or h % Hk (GDN_HEADS_TILED). */
GDN_HD int64_t gdn__key_head(int64_t h, int64_t Hk, int64_t G, int tiled) { return tiled ? h % Hk : h / G; }
/* The same in 32-bit arithmetic, for device index math. */
GDN_HD unsigned gdn__key_head32(unsigned h, unsigned Hk, unsigned G, int tiled) { return tiled ? h % Hk : h / G; }
/* The g-th (0 .. G-1) of the value heads that read key head hk: hk G + g (grouped) or g Hk + hk (tiled). Ascending
 * in g; gdn__key_head(gdn__value_head(hk, g, ...), ...) == hk. */
GDN_HD int64_t gdn__value_head(int64_t hk, int64_t g, int64_t Hk, int64_t G, int tiled) {
    return tiled ? g * Hk + hk : hk * G + g;
}

/* ---- the contract's building blocks, shared by the C kernels ---- */

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

/* Calls fn(ctx, item, worker) for item in [0, n_items): on the call's runner when it has one (worker in
 * [0, p->threads)), else over at most `threads` (<= p->threads) pool threads, the caller's thread taking part
 * (worker in [0, threads)); the worker id names the thread, for per-thread scratch. Items are claimed
 * dynamically; each item must write disjoint memory. If the pool is busy with another caller's job, the items
 * run on the calling thread alone (worker 0). */
void gdn__parallel_for(const gdn__problem *p, int64_t n_items, int threads, gdn_task_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
