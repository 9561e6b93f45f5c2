/* The CPU layer stages' rows (rows.h) with AVX-512: SiLU and sigmoid run gdn__exp_d's steps on 8 doubles, each lane
 * the scalar function's IEEE operations in its order (separate multiplies and adds: -ffp-contract=off), so every
 * lane has the scalar bits, as rows_avx2.c's 4-double form does; the conversions and the dot are the AVX2 table's.
 * Compiled with the AVX-512 flags (this file only); used only where the CPU has them. */
#include <immintrin.h>

#include "layer/cpu/rows.h"

/* gdn__exp_d on 8 doubles: x = n ln2 + r, e^r by gdn__poly13_d's Estrin scheme, times 2^half 2^(n - half) with
 * half = n / 2 toward zero; then the scalar's early returns blended in (NaN: x; x > 709: +inf; x < -745: 0), over
 * lanes whose n was out of range (their value is discarded). */
static inline __m512d exp8(__m512d x) {
    const __m512d shifter = _mm512_set1_pd(6755399441055744.0);
    const __m512d n = _mm512_sub_pd(_mm512_add_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)), shifter), shifter);
    const __m512d r = _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(n, _mm512_set1_pd(6.93147180369123816490e-01))),
                                    _mm512_mul_pd(n, _mm512_set1_pd(1.90821492927058770002e-10)));
    static const double c[14] = {1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0,
                                 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0, 1.0 / 479001600.0,
                                 1.0 / 6227020800.0};
    const __m512d r2 = _mm512_mul_pd(r, r), r4 = _mm512_mul_pd(r2, r2), r8 = _mm512_mul_pd(r4, r4);
    __m512d a[7];
    for (int i = 0; i < 7; ++i) a[i] = _mm512_add_pd(_mm512_set1_pd(c[2 * i]), _mm512_mul_pd(_mm512_set1_pd(c[2 * i + 1]), r));
    const __m512d b0 = _mm512_add_pd(a[0], _mm512_mul_pd(a[1], r2)), b1 = _mm512_add_pd(a[2], _mm512_mul_pd(a[3], r2));
    const __m512d b2 = _mm512_add_pd(a[4], _mm512_mul_pd(a[5], r2));
    const __m512d p = _mm512_add_pd(_mm512_add_pd(b0, _mm512_mul_pd(b1, r4)),
                                    _mm512_mul_pd(_mm512_add_pd(b2, _mm512_mul_pd(a[6], r4)), r8));
    const __m256i ni = _mm512_cvtpd_epi32(n); /* n is an integer: exact */
    const __m256i half = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1);
    const __m512i bias = _mm512_set1_epi64(1023);
    const __m512d s1 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(half), bias), 52));
    const __m512d s2 = _mm512_castsi512_pd(
        _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm256_sub_epi32(ni, half)), bias), 52));
    __m512d e = _mm512_mul_pd(_mm512_mul_pd(p, s1), s2);
    e = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, _mm512_set1_pd(709.0), _CMP_GT_OQ), e, _mm512_set1_pd(INFINITY));
    e = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, _mm512_set1_pd(-745.0), _CMP_LT_OQ), e, _mm512_setzero_pd());
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), e, x);
}

/* gdn_siluf of 8 floats: x / (1 + e^-x) in double, rounded once; -inf gives -0. */
static inline __m256 silu8(__m256 xf) {
    const __m512d x = _mm512_cvtps_pd(xf);
    const __m512d e = exp8(_mm512_xor_pd(x, _mm512_set1_pd(-0.0)));
    const __m256 y = _mm512_cvtpd_ps(_mm512_div_pd(x, _mm512_add_pd(_mm512_set1_pd(1.0), e)));
    const __m256i minus_inf = _mm256_cmpeq_epi32(_mm256_castps_si256(xf), _mm256_set1_epi32((int)0xff800000u));
    return _mm256_blendv_ps(y, _mm256_set1_ps(-0.0f), _mm256_castsi256_ps(minus_inf));
}

/* gdn_sigmoidf of 8 floats: 1 / (1 + e^-x) in double, rounded once; NaN gives x's NaN, as the scalar compiles
 * (rows_avx2.c's sigmoid4 says why). */
static inline __m256 sigmoid8(__m256 xf) {
    const __m512d x = _mm512_cvtps_pd(xf);
    const __m512d e = exp8(_mm512_xor_pd(x, _mm512_set1_pd(-0.0)));
    const __m512d y = _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_add_pd(_mm512_set1_pd(1.0), e));
    return _mm512_cvtpd_ps(_mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), y, x));
}

static void silu_avx512(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    for (; i < n; ++i) y[i] = gdn_siluf(x[i]);
}

static void sigmoid_avx512(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    for (; i < n; ++i) y[i] = gdn_sigmoidf(x[i]);
}

/* 8 channels at a time: s = fma(x3, w3, fma(x2, w2, fma(x1, w1, fma(x0, w0, +0)))) + bias, then SiLU. */
static void conv_silu_avx512(float *y, const float *const x[4], const float *w, const float *bias, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) s = _mm256_fmadd_ps(_mm256_loadu_ps(x[j] + i), _mm256_loadu_ps(w + j * n + i), s);
        _mm256_storeu_ps(y + i, silu8(_mm256_add_ps(s, bias ? _mm256_loadu_ps(bias + i) : _mm256_setzero_ps())));
    }
    for (; i < n; ++i) {
        const float wi[4] = {w[i], w[n + i], w[2 * n + i], w[3 * n + i]};
        y[i] = gdn__conv_silu(x[0][i], x[1][i], x[2][i], x[3][i], wi, bias ? bias[i] : 0.0f);
    }
}

const gdn__layer_rows gdn__layer_rows_avx512 = {gdn__layer_load_avx2, gdn__layer_store_avx2, conv_silu_avx512,
                                                silu_avx512, sigmoid_avx512, gdn__layer_dot_fma};
