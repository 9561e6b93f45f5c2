/* The portable kernel `portable`: the blocked kernel of blocked.h in plain C11, for machines without
 * AVX2. A "vector" is a struct of 8 floats (8 value columns per block); every operation is the scalar IEEE
 * operation per element, fma through fmaf. */
#include <math.h>
#include <string.h>

#include "gdn_internal.h"

typedef struct portable_vec {
    float x[8];
} portable_vec;

static inline portable_vec portable_zero(void) {
    portable_vec r;
    for (int i = 0; i < 8; ++i) r.x[i] = 0.0f;
    return r;
}

static inline portable_vec portable_load(const float *p) {
    portable_vec r;
    for (int i = 0; i < 8; ++i) r.x[i] = p[i];
    return r;
}

static inline void portable_store(float *p, portable_vec x) {
    for (int i = 0; i < 8; ++i) p[i] = x.x[i];
}

static inline portable_vec portable_bcast(float x) {
    portable_vec r;
    for (int i = 0; i < 8; ++i) r.x[i] = x;
    return r;
}

static inline portable_vec portable_fma(portable_vec a, portable_vec b, portable_vec c) {
    for (int i = 0; i < 8; ++i) c.x[i] = fmaf(a.x[i], b.x[i], c.x[i]);
    return c;
}

static inline portable_vec portable_mul(portable_vec a, portable_vec b) {
    for (int i = 0; i < 8; ++i) a.x[i] = a.x[i] * b.x[i];
    return a;
}

static inline portable_vec portable_sub(portable_vec a, portable_vec b) {
    for (int i = 0; i < 8; ++i) a.x[i] = a.x[i] - b.x[i];
    return a;
}

static inline portable_vec portable_add(portable_vec a, portable_vec b) {
    for (int i = 0; i < 8; ++i) a.x[i] = a.x[i] + b.x[i];
    return a;
}

static void portable_cvt_in16(float *dst, const uint16_t *src, int64_t n, int bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? gdn__bf16_to_f32(src[i]) : gdn__f16_to_f32(src[i]);
}

static void portable_cvt_out16(uint16_t *dst, const float *src, int64_t n, int bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? gdn__f32_to_bf16(src[i]) : gdn__f32_to_f16(src[i]);
}

static void portable_transpose8(float *dst, int64_t ds, const float *src, int64_t ss) {
    for (int64_t r = 0; r < 8; ++r)
        for (int64_t c = 0; c < 8; ++c) dst[r * ds + c] = src[c * ss + r];
}

#define BLK_VEC portable_vec
#define BLK_VW 8
#define BLK_NV 1
#define blk_vzero() portable_zero()
#define blk_vload(p) portable_load(p)
#define blk_vstore(p, x) portable_store((p), (x))
#define blk_vbcast(x) portable_bcast(x)
#define blk_vfma(a, b, c) portable_fma((a), (b), (c))
#define blk_vmul(a, b) portable_mul((a), (b))
#define blk_vsub(a, b) portable_sub((a), (b))
#define blk_vadd(a, b) portable_add((a), (b))
#define blk_prefetch(p) ((void)(p))
#define blk_stream(dst, src, bytes) memcpy((dst), (src), (bytes))
#define blk_stream_fence() ((void)0)
#define blk_transpose8(dst, ds, src, ss) portable_transpose8((dst), (ds), (src), (ss))
#define blk_cvt_in16(dst, src, n, bf16) portable_cvt_in16((dst), (src), (n), (bf16))
#define blk_cvt_out16(dst, src, n, bf16) portable_cvt_out16((dst), (src), (n), (bf16))
#define blk_vloadu(p) portable_load(p)
#define blk_vstream(p, x) portable_store((p), (x))
#define blk_vstoreu(p, x) portable_store((p), (x))
#include "delta/cpu/blocked.h"

/* Dk up to 512 (a block of columns' state on the stack); any machine. */
int gdn__delta_portable_eligible(const gdn__problem *p) { return p->a.Dk <= BLK_MAX_DK; }
int gdn__delta_portable_routed(const gdn__problem *p) { return gdn__delta_portable_eligible(p); }
const gdn__variant gdn__delta_portable_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

gdn_status gdn__delta_portable(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    return blk_run(p);
}
