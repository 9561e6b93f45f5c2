/* The CPU layer stages' rows (rows.h) with AVX2 + FMA. Compiled with -mavx2 -mfma (this file only); used only where
 * the CPU has both. fmaf is one vfmadd here; the conversions are x86_avx2.h's; SiLU and sigmoid run gdn__exp_d's
 * steps on 4 doubles, each lane the scalar function's IEEE operations in its order (separate multiplies and adds:
 * -ffp-contract=off), so every lane has the scalar bits. */
#include <immintrin.h>
#include <string.h>

#include "delta/cpu/x86_avx2.h"
#include "layer/cpu/rows.h"

/* gdn__exp_d on 4 doubles: x = n ln2 + r, e^r by gdn__poly13_d's Estrin scheme, times 2^half 2^(n - half) with
 * half = n / 2 toward zero; then the scalar's early returns blended in (NaN: x; x > 709: +inf; x < -745: 0), over
 * lanes whose n was out of range (their value is discarded). */
static inline __m256d exp4(__m256d x) {
    const __m256d shifter = _mm256_set1_pd(6755399441055744.0);
    const __m256d n = _mm256_sub_pd(_mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)), shifter), shifter);
    const __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(n, _mm256_set1_pd(6.93147180369123816490e-01))),
                                    _mm256_mul_pd(n, _mm256_set1_pd(1.90821492927058770002e-10)));
    static const double c[14] = {1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0,
                                 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0, 1.0 / 479001600.0,
                                 1.0 / 6227020800.0};
    const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
    __m256d a[7];
    for (int i = 0; i < 7; ++i) a[i] = _mm256_add_pd(_mm256_set1_pd(c[2 * i]), _mm256_mul_pd(_mm256_set1_pd(c[2 * i + 1]), r));
    const __m256d b0 = _mm256_add_pd(a[0], _mm256_mul_pd(a[1], r2)), b1 = _mm256_add_pd(a[2], _mm256_mul_pd(a[3], r2));
    const __m256d b2 = _mm256_add_pd(a[4], _mm256_mul_pd(a[5], r2));
    const __m256d p = _mm256_add_pd(_mm256_add_pd(b0, _mm256_mul_pd(b1, r4)),
                                    _mm256_mul_pd(_mm256_add_pd(b2, _mm256_mul_pd(a[6], r4)), r8));
    const __m128i ni = _mm256_cvtpd_epi32(n); /* n is an integer: exact */
    const __m128i half = _mm_srai_epi32(_mm_add_epi32(ni, _mm_srli_epi32(ni, 31)), 1);
    const __m256i bias = _mm256_set1_epi64x(1023);
    const __m256d s1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(half), bias), 52));
    const __m256d s2 = _mm256_castsi256_pd(
        _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm_sub_epi32(ni, half)), bias), 52));
    __m256d e = _mm256_mul_pd(_mm256_mul_pd(p, s1), s2);
    e = _mm256_blendv_pd(e, _mm256_set1_pd(INFINITY), _mm256_cmp_pd(x, _mm256_set1_pd(709.0), _CMP_GT_OQ));
    e = _mm256_blendv_pd(e, _mm256_setzero_pd(), _mm256_cmp_pd(x, _mm256_set1_pd(-745.0), _CMP_LT_OQ));
    return _mm256_blendv_pd(e, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
}

/* gdn_siluf of 4 floats: x / (1 + e^-x) in double, rounded once; -inf gives -0. */
static inline __m128 silu4(__m128 xf) {
    const __m256d x = _mm256_cvtps_pd(xf);
    const __m256d e = exp4(_mm256_xor_pd(x, _mm256_set1_pd(-0.0)));
    const __m128 y = _mm256_cvtpd_ps(_mm256_div_pd(x, _mm256_add_pd(_mm256_set1_pd(1.0), e)));
    const __m128i minus_inf = _mm_cmpeq_epi32(_mm_castps_si128(xf), _mm_set1_epi32((int)0xff800000u));
    return _mm_blendv_ps(y, _mm_set1_ps(-0.0f), _mm_castsi128_ps(minus_inf));
}

/* gdn_sigmoidf of 4 floats: 1 / (1 + e^-x) in double, rounded once; NaN gives x's NaN, as the scalar compiles
 * (GCC folds its 1 + (-x) into 1 - x; NaN bits are outside the contract, docs/CONTRACT.md section 5). */
static inline __m128 sigmoid4(__m128 xf) {
    const __m256d x = _mm256_cvtps_pd(xf);
    const __m256d e = exp4(_mm256_xor_pd(x, _mm256_set1_pd(-0.0)));
    const __m256d y = _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_add_pd(_mm256_set1_pd(1.0), e));
    return _mm256_cvtpd_ps(_mm256_blendv_pd(y, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q)));
}

static void silu_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, silu4(_mm_loadu_ps(x + i)));
    for (; i < n; ++i) y[i] = gdn_siluf(x[i]);
}

static void sigmoid_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, sigmoid4(_mm_loadu_ps(x + i)));
    for (; i < n; ++i) y[i] = gdn_sigmoidf(x[i]);
}

/* 8 channels at a time: s = fma(x3, w3, fma(x2, w2, fma(x1, w1, fma(x0, w0, +0)))) + bias, then SiLU. */
static void conv_silu_avx2(float *y, const float *const x[4], const float *w, const float *bias, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) s = _mm256_fmadd_ps(_mm256_loadu_ps(x[j] + i), _mm256_loadu_ps(w + j * n + i), s);
        s = _mm256_add_ps(s, bias ? _mm256_loadu_ps(bias + i) : _mm256_setzero_ps());
        _mm_storeu_ps(y + i, silu4(_mm256_castps256_ps128(s)));
        _mm_storeu_ps(y + i + 4, silu4(_mm256_extractf128_ps(s, 1)));
    }
    for (; i < n; ++i) {
        const float wi[4] = {w[i], w[n + i], w[2 * n + i], w[3 * n + i]};
        y[i] = gdn__conv_silu(x[0][i], x[1][i], x[2][i], x[3][i], wi, bias ? bias[i] : 0.0f);
    }
}

void gdn__layer_load_avx2(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n) {
    if (dtype == GDN_F32) memcpy(dst, (const float *)base + idx, (size_t)n * sizeof(float));
    else avx2_cvt_in16(dst, (const uint16_t *)base + idx, n, dtype == GDN_BF16);
}

void gdn__layer_store_avx2(void *base, gdn_dtype dtype, int64_t idx, const float *src, int64_t n) {
    if (dtype == GDN_F32) memcpy((float *)base + idx, src, (size_t)n * sizeof(float));
    else avx2_cvt_out16((uint16_t *)base + idx, src, n, dtype == GDN_BF16);
}

/* the tree with hardware fma */
float gdn__layer_dot_fma(const float *x, const float *w, int64_t n) { return gdn__tree_dot(x, w, n); }

const gdn__layer_rows gdn__layer_rows_avx2 = {gdn__layer_load_avx2, gdn__layer_store_avx2, conv_silu_avx2, silu_avx2,
                                              sigmoid_avx2, gdn__layer_dot_fma};
