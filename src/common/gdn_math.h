/* The contract's scalar functions: transcendentals and dtype conversions.
 *
 * One definition for the C kernels and the CUDA kernels: every function is static inline, uses only
 * IEEE-754 basic operations (+ - * / sqrt, fma) and bit manipulation, so host and device compute the same
 * bits. Build with -ffp-contract=off (C) and --fmad=false (nvcc). The transcendentals evaluate in double and
 * round once to float: error <= 0.5 ulp + 2^-40 relative, i.e. correctly rounded but for rare near-ties.
 */
#ifndef GDN_MATH_H
#define GDN_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gdn.h"

#if defined(__CUDACC__)
#define GDN_HD static __host__ __device__ __forceinline__
#else
#define GDN_HD static inline
#endif

GDN_HD uint32_t gdn__f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
GDN_HD float gdn__bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
GDN_HD uint64_t gdn__f64_bits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
GDN_HD double gdn__bits_f64(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* ---- dtype conversions: half and bfloat16 to f32 exactly, f32 to them round-to-nearest-even ---- */

GDN_HD float gdn__bf16_to_f32(uint16_t h) { return gdn__bits_f32((uint32_t)h << 16); }

GDN_HD uint16_t gdn__f32_to_bf16(float x) {
    uint32_t u = gdn__f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays a quiet NaN */
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);                               /* ties to even */
    return (uint16_t)((u + rounding) >> 16);
}

GDN_HD float gdn__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return gdn__bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp != 0) return gdn__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float mag = (float)man * 5.9604644775390625e-08f;
    return gdn__bits_f32(sign | gdn__f32_bits(mag));
}

GDN_HD uint16_t gdn__f32_to_f16(float x) {
    uint32_t u = gdn__f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a >= 0x38800000u) {                                  /* normal half: 2^-14 <= |x| */
        uint32_t rounding = 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((a - 0x38000000u + rounding) >> 13));
    }
    /* subnormal half or zero: |x| * 2^24 rounded to an integer, ties to even (exact product) */
    float scaled = gdn__bits_f32(a) * 16777216.0f;
    float big = 8388608.0f; /* 2^23: adding and subtracting it rounds to an integer with ties to even */
    float r = (scaled + big) - big;
    return (uint16_t)(sign | (uint16_t)r);
}

/* ---- transcendentals ---- */

/* c[0] + c[1] x + ... + c[13] x^13 by Estrin's scheme: pairs c[2i] + c[2i+1] x, then pairs of those with x^2, x^4,
 * x^8. Eight dependent operations instead of Horner's 26, which is what a gate costs before a short GPU window's
 * first token (the inputs and the state arrive together, then the warp waits on this chain). */
GDN_HD double gdn__poly13_d(const double c[14], double x) {
    const double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
    double a[7];
    for (int i = 0; i < 7; ++i) a[i] = c[2 * i] + c[2 * i + 1] * x;
    const double b0 = a[0] + a[1] * x2, b1 = a[2] + a[3] * x2, b2 = a[4] + a[5] * x2;
    return (b0 + b1 * x4) + (b2 + a[6] * x4) * x8;
}

/* e^x in double for any double x: x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor series to degree 13
 * (truncation < 2^-60), scaled by 2^n in two steps so that the double never leaves the normal range early. */
GDN_HD double gdn__exp_d(double x) {
    if (x != x) return x;
    if (x > 709.0) return gdn__bits_f64(0x7ff0000000000000ull); /* +inf in the float range that follows */
    if (x < -745.0) return 0.0;
    const double log2e = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52: x + shifter rounds x to an integer */
    double n = (x * log2e + shifter) - shifter;
    double r = (x - n * ln2_hi) - n * ln2_lo;
    const double inv_fact[14] = {1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0,
                                 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0, 1.0 / 479001600.0,
                                 1.0 / 6227020800.0};
    const double p = gdn__poly13_d(inv_fact, r);
    int64_t ni = (int64_t)n;
    int64_t half = ni / 2;
    double s1 = gdn__bits_f64((uint64_t)(half + 1023) << 52), s2 = gdn__bits_f64((uint64_t)(ni - half + 1023) << 52);
    return (p * s1) * s2;
}

/* ln(1 + x) in double for x > -1, to about 1e-16 relative: u = 1 + x = 2^e m, m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(f / (2 + f)) with f = m - 1, plus a first-order correction for the rounding of 1 + x. */
GDN_HD double gdn__log1p_d(double x) {
    if (x != x) return x;
    if (x < -1.0) return (x - x) / (x - x); /* NaN */
    if (x == -1.0) return -gdn__bits_f64(0x7ff0000000000000ull);
    if (x == gdn__bits_f64(0x7ff0000000000000ull)) return x;
    double ax = x < 0 ? -x : x;
    if (ax < 1e-5) return x * (1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25))); /* keeps -0 */
    double u = 1.0 + x;
    double c = (u - 1.0 == x) ? 0.0 : (x - (u - 1.0)) / u; /* ln(1+x) = ln(u) + c to first order */
    uint64_t bits = gdn__f64_bits(u);
    int64_t e = (int64_t)((bits >> 52) & 0x7ff) - 1023;
    double m = gdn__bits_f64((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    if (m > 1.4142135623730951) { m = m * 0.5; e = e + 1; }
    double f = m - 1.0, s = f / (2.0 + f), s2 = s * s;
    const double odd[14] = {1.0,        1.0 / 3.0,  1.0 / 5.0,  1.0 / 7.0,  1.0 / 9.0,  1.0 / 11.0, 1.0 / 13.0,
                            1.0 / 15.0, 1.0 / 17.0, 1.0 / 19.0, 1.0 / 21.0, 1.0 / 23.0, 1.0 / 25.0, 0.0};
    const double series = gdn__poly13_d(odd, s2);
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double de = (double)e;
    return (de * ln2_hi + (2.0 * s * series + (de * ln2_lo + c)));
}

/* e^x, rounded to float. */
GDN_HD float gdn_expf(float x) { return (float)gdn__exp_d((double)x); }

/* ln(1 + x), rounded to float. */
GDN_HD float gdn_log1pf(float x) { return (float)gdn__log1p_d((double)x); }

/* softplus(x) = x for x > 20, else log1p(exp(x)) (exp rounded to float first, as the contract states). */
GDN_HD float gdn_softplusf(float x) { return x > 20.0f ? x : gdn_log1pf(gdn_expf(x)); }

/* 1 / (1 + e^-x), rounded once to float. */
GDN_HD float gdn_sigmoidf(float x) { return (float)(1.0 / (1.0 + gdn__exp_d(-(double)x))); }

/* x / (1 + e^-x), rounded once to float; -inf gives the limit -0 (the quotient would be -inf / inf = NaN). */
GDN_HD float gdn_siluf(float x) {
    if (gdn__f32_bits(x) == 0xff800000u) return gdn__bits_f32(0x80000000u);
    return (float)((double)x / (1.0 + gdn__exp_d(-(double)x)));
}

/* 1 / sqrt(x), rounded once to float. */
GDN_HD float gdn_rsqrtf(float x) {
    double d = (double)x;
    return (float)(1.0 / (d >= 0.0 ? sqrt(d) : (d - d) / (d - d)));
}

/* The decay g of GDN_GATE_RAW: exp(-exp(A_log) * softplus(a + dt_bias)). */
GDN_HD float gdn_raw_gate(float a, float A_log, float dt_bias) {
    return gdn_expf(-(gdn_expf(A_log) * gdn_softplusf(a + dt_bias)));
}

/* ---- tensor elements of a dtype ---- */

/* Element idx of a q/k/v tensor, exactly as f32. */
GDN_HD float gdn__load(const void *base, gdn_dtype dtype, int64_t idx) {
    switch (dtype) {
    case GDN_F16: return gdn__f16_to_f32(((const uint16_t *)base)[idx]);
    case GDN_BF16: return gdn__bf16_to_f32(((const uint16_t *)base)[idx]);
    default: return ((const float *)base)[idx];
    }
}

/* n consecutive elements from idx, as f32. */
GDN_HD void gdn__load_row(float *dst, const void *base, gdn_dtype dtype, int64_t idx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = gdn__load(base, dtype, idx + i);
}

/* Store an f32 into y, rounded to the dtype (nearest even). */
GDN_HD void gdn__store(void *base, gdn_dtype dtype, int64_t idx, float x) {
    switch (dtype) {
    case GDN_F16: ((uint16_t *)base)[idx] = gdn__f32_to_f16(x); break;
    case GDN_BF16: ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x); break;
    default: ((float *)base)[idx] = x; break;
    }
}

#endif
