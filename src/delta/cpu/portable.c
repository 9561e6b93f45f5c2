/* The portable kernel `portable`: the blocked kernel of blocked.h in C with GCC/Clang vector extensions, for
 * machines without AVX2 (and for GDN_PACKED=0). A vector is 8 floats, 8 value columns; a block is 2 of them
 * (16 columns, as packed_avx2). + - * on vectors are the IEEE operations lane by lane, and fma is fmaf lane by
 * lane, which the compiler turns into one vector fma where the target has it.
 *
 * On x86-64 with GCC the passes are built twice (target_clones): for FMA machines (AVX + FMA3: 256-bit vectors,
 * fmaf one vfmadd per vector) and for the baseline (SSE2, fmaf a libm call per lane). The router takes `portable`
 * only where fmaf is a vector instruction (gdn__portable_fast): elsewhere it is no faster than `ref`. */
#include <math.h>
#include <string.h>

#include "gdn_internal.h"

/* Vectors pass between inlined functions only, so -Wpsabi (a 32-byte vector argument without AVX has another ABI)
 * does not apply: off here for the warning, and with -Wno-psabi (Makefile) for GCC's note. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float portable_vec __attribute__((vector_size(32)));

/* a * b + c rounded once, per lane */
static inline __attribute__((always_inline)) portable_vec portable_fma(portable_vec a, portable_vec b, portable_vec c) {
    for (int i = 0; i < 8; ++i) c[i] = fmaf(a[i], b[i], c[i]);
    return c;
}

static inline __attribute__((always_inline)) portable_vec portable_load(const float *p) {
    portable_vec r;
    memcpy(&r, p, sizeof r);
    return r;
}

/* (a loop, not an initializer list {x, ..., x}: GCC makes the loop one vbroadcastss, the list a chain of inserts) */
static inline __attribute__((always_inline)) portable_vec portable_bcast(float x) {
    portable_vec r = {0}; /* (every lane is written below; the initializer is dead, and keeps -O1 warnings away) */
    for (int i = 0; i < 8; ++i) r[i] = x;
    return r;
}

static inline __attribute__((always_inline)) void portable_store(float *p, portable_vec x) { memcpy(p, &x, sizeof x); }

static void portable_cvt_in16(float *dst, const uint16_t *src, int64_t n, int bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? gdn__bf16_to_f32(src[i]) : gdn__f16_to_f32(src[i]);
}

static void portable_cvt_out16(uint16_t *dst, const float *src, int64_t n, int bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? gdn__f32_to_bf16(src[i]) : gdn__f32_to_f16(src[i]);
}

/* The 8 lanes of x and y (lanes 8 .. 15 are y's) named in the list. */
#if defined(__clang__)
#define portable_pick(x, y, ...) __builtin_shufflevector((x), (y), __VA_ARGS__)
#else
typedef int32_t portable_idx __attribute__((vector_size(32)));
#define portable_pick(x, y, ...) __builtin_shuffle((x), (y), (portable_idx){__VA_ARGS__})
#endif

/* dst[r * ds + c] = src[c * ss + r], r, c < 8: the rows interleaved by pairs, quads and halves (as packed_avx2) */
static inline __attribute__((always_inline)) void portable_transpose8(float *dst, int64_t ds, const float *src, int64_t ss) {
    portable_vec r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = portable_load(src + i * ss);
    for (int i = 0; i < 8; i += 2) {
        t[i] = portable_pick(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = portable_pick(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; ++j) {
            u[i + 2 * j] = portable_pick(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * j + 1] = portable_pick(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int k = 0; k < 4; ++k) {
        portable_store(dst + k * ds, portable_pick(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11));
        portable_store(dst + (k + 4) * ds, portable_pick(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15));
    }
}

#define BLK_VEC portable_vec
#define BLK_VW 8
#define BLK_NV 2
#define blk_vzero() ((portable_vec){0})
#define blk_vload(p) portable_load(p)
#define blk_vstore(p, x) portable_store((p), (x))
#define blk_vbcast(x) portable_bcast(x)
#define blk_vfma(a, b, c) portable_fma((a), (b), (c))
#define blk_vmul(a, b) ((a) * (b))
#define blk_vsub(a, b) ((a) - (b))
#define blk_vadd(a, b) ((a) + (b))
#define blk_prefetch(p) __builtin_prefetch(p)
#define blk_stream(dst, src, bytes) memcpy((dst), (src), (bytes))
#define blk_stream_fence() ((void)0)
#define blk_transpose8(dst, ds, src, ss) portable_transpose8((dst), (ds), (src), (ss))
#define blk_cvt_in16(dst, src, n, bf16) portable_cvt_in16((dst), (src), (n), (bf16))
#define blk_cvt_out16(dst, src, n, bf16) portable_cvt_out16((dst), (src), (n), (bf16))
#define blk_vloadu(p) portable_load(p)
#define blk_vstream(p, x) portable_store((p), (x))
#define blk_vstoreu(p, x) portable_store((p), (x))
#define BLK_STATIC_TREES
/* the loops over a row's 2 vectors unrolled before the vectorizer sees the lane loops: the partials stay in
 * registers (without it GCC keeps them in memory, 2.2x slower) */
#define BLK_UNROLL _Pragma("GCC unroll 2")
/* (not under ThreadSanitizer: gcc's TSan runtime is not up when the clones' resolver runs, before main) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define PORTABLE_CLONES 1
#define BLK_CLONES __attribute__((target_clones("fma", "default")))
#endif
#include "delta/cpu/blocked.h"

/* fmaf is a vector instruction in the passes this machine runs: the FMA clone on x86-64 (GCC), or a target
 * whose fmaf is one instruction (GCC's __FP_FAST_FMAF; Clang defines none: AArch64 always, x86 built with -mfma). */
int gdn__portable_fast(void) {
#if defined(PORTABLE_CLONES)
    return gdn__cpu_has_fma();
#elif defined(__FP_FAST_FMAF) || defined(__FMA__) || defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

/* Dk up to 512 (a block of columns' state on the stack); any machine. */
int gdn__delta_portable_eligible(const gdn__problem *p) { return p->a.Dk <= BLK_MAX_DK; }

/* portable beats ref where its fmaf is a vector fma, on calls big enough (gdn__cpu_call_is_big). Without a vector fma
 * (x86 without FMA3) both spend their time in libm's fmaf (T=64, Hv=32, Dk=Dv=128, libm's software fmaf: ref 1242
 * ms, portable 1310 ms). */
int gdn__delta_portable_routed(const gdn__problem *p) {
    return gdn__delta_portable_eligible(p) && gdn__portable_fast() && gdn__cpu_call_is_big(p);
}

const gdn__variant gdn__delta_portable_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
int64_t gdn__delta_portable_workspace(const gdn__problem *p) { return blk_workspace(p); }

gdn_status gdn__delta_portable(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    return blk_run(p);
}
