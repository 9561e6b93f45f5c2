/* The CPU layer stages' operations on contiguous f32 rows (src/layer/cpu/staged.c), one table per ISA: the scalar
 * one in staged.c, the AVX2 + FMA one in rows_avx2.c, the AVX-512 one in rows_avx512.c. Every entry gives the bits
 * of the scalar functions it names. */
#ifndef GDN_LAYER_CPU_ROWS_H
#define GDN_LAYER_CPU_ROWS_H

#include "layer/layer.h"

typedef struct gdn__layer_rows {
    /* dst[i] = gdn__load(base, dtype, idx + i), i < n */
    void (*load)(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n);
    /* gdn__store(base, dtype, idx + i, src[i]), i < n */
    void (*store)(void *base, gdn_dtype dtype, int64_t idx, const float *src, int64_t n);
    /* y[i] = gdn__conv_silu(x[0][i], .., x[3][i], {w[i], w[n + i], w[2n + i], w[3n + i]}, bias ? bias[i] : 0):
     * the taps as 4 rows oldest first, the weights as 4 rows [4][n] */
    void (*conv_silu)(float *y, const float *const x[4], const float *w, const float *bias, int64_t n);
    /* y[i] = gdn_siluf(x[i]), gdn_sigmoidf(x[i]); y may be x */
    void (*silu)(float *y, const float *x, int64_t n);
    void (*sigmoid)(float *y, const float *x, int64_t n);
    /* gdn__tree_dot(x, w, n) */
    float (*dot)(const float *x, const float *w, int64_t n);
} gdn__layer_rows;

extern const gdn__layer_rows gdn__layer_rows_avx2;   /* for CPUs with AVX2 and FMA (gdn__cpu_has_avx2_fma) */
extern const gdn__layer_rows gdn__layer_rows_avx512; /* AVX-512 F, BW, VL, DQ and FMA (gdn__cpu_has_avx512) */

/* The AVX2 table's conversions and dot, which the AVX-512 table shares (rows_avx2.c) */
void gdn__layer_load_avx2(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n);
void gdn__layer_store_avx2(void *base, gdn_dtype dtype, int64_t idx, const float *src, int64_t n);
float gdn__layer_dot_fma(const float *x, const float *w, int64_t n);

#endif
