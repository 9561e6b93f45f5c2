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

/* ---- the slow paths: binary64 evaluations rounded once to float (the functions' definition before they were
 * correctly rounded; the functions below give these bits on every input, docs/CONTRACT.md section 3). Out of line
 * on the GPU: a kernel carries their registers only where one runs. ---- */

#if defined(__CUDACC__)
#define GDN_HD_COLD static __host__ __device__ __noinline__
#else
#define GDN_HD_COLD static __attribute__((noinline, cold, unused))
#endif

GDN_HD_COLD float gdn__expf_slow(float x) { return (float)gdn__exp_d((double)x); }
GDN_HD_COLD float gdn__log1pf_slow(float x) { return (float)gdn__log1p_d((double)x); }
GDN_HD float gdn__softplusf_slow(float x) { return x > 20.0f ? x : gdn__log1pf_slow(gdn__expf_slow(x)); }
GDN_HD_COLD float gdn__sigmoidf_slow(float x) { return (float)(1.0 / (1.0 + gdn__exp_d(-(double)x))); }
/* -inf gives the limit -0 (the quotient would be -inf / inf = NaN) */
GDN_HD_COLD float gdn__siluf_slow(float x) {
    if (gdn__f32_bits(x) == 0xff800000u) return gdn__bits_f32(0x80000000u);
    return (float)((double)x / (1.0 + gdn__exp_d(-(double)x)));
}
GDN_HD_COLD float gdn__rsqrtf_slow(float x) {
    double d = (double)x;
    return (float)(1.0 / (d >= 0.0 ? sqrt(d) : (d - d) / (d - d)));
}

/* ---- the fast paths: short binary64 evaluations with fma (one rounding each: fma() in C, __fma_rn in CUDA), no
 * division, no table; each result y is within a stated relative error eps of the exact value, and is rounded to
 * float only where no midpoint between two floats lies within eps + eps_slow of it (eps_slow: the slow path's
 * error), else the slow path decides. So a fast result is the correctly rounded one, and the slow path's too: every
 * function gives the slow path's bits on every input (dev/math_exhaustive.cu checks all 2^32). ---- */

/* Whether y (|y| in the float normal range) rounds to float as every value within k of its ulps does: the 29 bits of
 * y below a float's last bit are farther than k from the midpoint pattern 2^28. (A value within eps |y| of y is
 * within eps 2^53 ulps of y.) */
GDN_HD int gdn__round_safe(double y, uint32_t k) {
    const uint32_t low = (uint32_t)gdn__f64_bits(y) & 0x1fffffffu;
    return low - (0x10000000u - k) > 2u * k;
}

/* e^x for -104 <= x < 89.5, relative error < 2^-49: x = k ln2/4 + r, |r| <= ln2/8 (k = rint(4x/ln2) from the
 * low bits of x 4/ln2 + 1.5 2^52; k ln2/4 = k L4_hi exactly, L4_hi having 43 bits), e^r by a degree-7 polynomial
 * (2^-50.3, dev/math_coeffs.py, Estrin: 3 dependent fmas), times 2^(k mod 4 / 4) (a double) 2^(k div 4). */
GDN_HD double gdn__exp_fast_d(double x) {
    const double shifter = 0x1.8p52, t = fma(x, 0x1.71547652b82fep+2, shifter), kd = t - shifter;
    double r = fma(kd, -0x1.62e42fefa38p-3, x);
    r = fma(kd, -0x1.ef35793c7673p-47, r);
    const double r2 = r * r, r4 = r2 * r2;
    const double a0 = fma(0x1.fffffffffffffp-1, r, 0x1.ffffffffffffap-1);
    const double a1 = fma(0x1.5555555557e5cp-3, r, 0x1.0000000005c50p-1);
    const double a2 = fma(0x1.111110a654945p-7, r, 0x1.555554652b8efp-5);
    const double a3 = fma(0x1.a03038b1c9eccp-13, r, 0x1.6c2fbf82246b9p-10);
    const double p = fma(fma(a3, r2, a2), r4, fma(a1, r2, a0));
    const uint32_t k = (uint32_t)gdn__f64_bits(t); /* k mod 2^32 */
    const double c01 = k & 1u ? 0x1.306fe0a31b715p+0 : 1.0;                 /* 2^(1/4), 1 */
    const double c23 = k & 1u ? 0x1.ae89f995ad3adp+0 : 0x1.6a09e667f3bcdp+0; /* 2^(3/4), 2^(1/2) */
    const double c = k & 2u ? c23 : c01;                                      /* 2^((k mod 4)/4) */
    /* 2^(k div 4) into c's exponent: (k >> 2) << 20 is (k div 4) 2^20 mod 2^32, k negative too */
    return p * gdn__bits_f64(gdn__f64_bits(c) + ((uint64_t)((k >> 2) << 20) << 32));
}

/* ln(1 + x) for a float x, -1 < x < inf, |x| >= 2^-25: relative error < 2^-49. u = 1 + x (exact but for x >= 2^53)
 * = 2^k m, m in [sqrt(1/2), sqrt(2)) (bit manipulation), f = m - 1 (exact; f = x where k = 0), ln m = 2 atanh(s) =
 * 2s + s^3 P(s^2) with s = f / (2 + f) = f q: q from a degree-7 polynomial in f (2^-27.3) and one Newton step
 * (relative error of s: the square, 2^-54.6, plus roundings), P of degree 6 on s^2 <= 0.0295 (2^-51.5 absolute). */
GDN_HD double gdn__log1p_fast_d(double x) {
    const double u = 1.0 + x;
    const uint64_t ub = gdn__f64_bits(u);
    const uint32_t hu = (uint32_t)(ub >> 32) + (0x3ff00000u - 0x3fe6a09eu);
    const int k = (int)(hu >> 20) - 1023;
    const double m = gdn__bits_f64(((uint64_t)((hu & 0x000fffffu) + 0x3fe6a09eu) << 32) | (ub & 0xffffffffull));
    const double f = m - 1.0, f2 = f * f, f4 = f2 * f2;
    const double q0 = fma(fma(fma(-0x1.abdf73dcdeda0p-9, f, 0x1.09d89ae38b203p-7), f2,
                              fma(-0x1.01fc4e9b64b59p-6, f, 0x1.ffc5ed3008bfep-6)), f4,
                          fma(fma(-0x1.fff3a8e9fd692p-5, f, 0x1.00001c02e87a4p-3), f2,
                              fma(-0x1.000004b0e807ap-2, f, 0x1.fffffff5d37e1p-2)));
    const double e = fma(-(2.0 + f), q0, 1.0), s0 = f * q0, s = fma(s0, e, s0); /* s0 (1 + e) = f / (2 + f) (1 - e^2) */
    const double z = s * s, z2 = z * z, z4 = z2 * z2;
    const double P = fma(fma(0x1.2b584aae78c14p-3, z2, fma(0x1.39fe606542dbap-3, z, 0x1.7462b4ab2ef6cp-3)), z4,
                         fma(fma(0x1.c71c62e5800a1p-3, z, 0x1.2492492df148dp-2), z2,
                             fma(0x1.99999999952e2p-2, z, 0x1.5555555555558p-1)));
    const double kd = (double)k;
    const double lo = fma(kd, 0x1.abc9e3b39803fp-56, fma(kd, 0x1.62e42fefa39efp-1, 2.0 * s)); /* k ln2 + 2s */
    return fma(s * z, P, lo);
}

/* 1 / (1 + t) for t = e^-|x|, |x| <= 87.4 (*t_out = t): relative error < 2^-48.5 (t's and 1 + t's, then a
 * degree-7 polynomial in t (2^-19.3) refined to the third order: q (1 + e + e^2), e = 1 - (1 + t) q). */
GDN_HD double gdn__sigmoid_abs_fast_d(double ax, double *t_out) {
    const double t = gdn__exp_fast_d(-ax), t2 = t * t, t4 = t2 * t2;
    const double q0 = fma(fma(fma(-0x1.93248e9a13a02p-5, t, 0x1.f7edb24098883p-3), t2,
                              fma(-0x1.21c2467ebe1b1p-1, t, 0x1.ac56d783b4da2p-1)), t4,
                          fma(fma(-0x1.ed4c7b7e0883bp-1, t, 0x1.fdd57b575a51cp-1), t2,
                              fma(-0x1.ffe69b52848b8p-1, t, 0x1.ffffcd9b6e2ccp-1)));
    const double e = fma(-(1.0 + t), q0, 1.0);
    *t_out = t;
    return fma(q0, fma(e, e, e), q0);
}

/* sigmoid(x) for -87.4 <= x <= 87.4: 1 / (1 + t) or, for x < 0, t / (1 + t); relative error < 2^-48 */
GDN_HD double gdn__sigmoid_fast_d(double x) {
    double t;
    const double q = gdn__sigmoid_abs_fast_d(x < 0.0 ? -x : x, &t);
    return x < 0.0 ? t * q : q;
}

/* silu(x) for -87.4 <= x <= 87.4: x / (1 + t) or, for x < 0, (x t) / (1 + t); relative error < 2^-48 */
GDN_HD double gdn__silu_fast_d(double x) {
    double t;
    const double q = gdn__sigmoid_abs_fast_d(x < 0.0 ? -x : x, &t);
    return x < 0.0 ? (x * t) * q : x * q;
}

/* 1 / sqrt(x) for a float x, positive, normal, finite (bits b). x = 2^E w, w in [1, 2): y0 = 2^-floor(E/2)
 * (E odd ? sqrt(1/2) : 1) S(w), S of degree 7 (2^-21.5), then one step of third order, y0 (1 + e/2 + 3e^2/8),
 * e = 1 - x y0^2: relative error < 2^-51. */
GDN_HD double gdn__rsqrt_fast_d(uint32_t b) {
    const double x = (double)gdn__bits_f32(b);
    const uint32_t eb = b >> 23; /* E = eb - 127; floor(E / 2) = (eb + 1) / 2 - 64 */
    const double w = gdn__bits_f64(((uint64_t)(b & 0x007fffffu) << 29) | 0x3ff0000000000000ull);
    const double w2 = w * w, w4 = w2 * w2;
    const double S = fma(fma(fma(-0x1.92b714407b394p-7, w, 0x1.30cd5be973520p-3), w2,
                             fma(-0x1.91d85d3ab8ffcp-1, w, 0x1.2de90160928b1p+1)), w4,
                         fma(fma(-0x1.1bf49755ebbdep+2, w, 0x1.5a05a56339edbp+2), w2,
                             fma(-0x1.147c93d063850p+2, w, 0x1.51e9ffe7b35b3p+1)));
    const double c = eb & 1u ? 1.0 : 0x1.6a09e667f3bcdp-1; /* E odd: sqrt(1/2) */
    const double y0 = S * gdn__bits_f64(gdn__f64_bits(c) + ((uint64_t)((64u - ((eb + 1u) >> 1)) << 20) << 32));
    const double e = fma(-x, y0 * y0, 1.0);
    return fma(y0 * e, fma(e, 0.375, 0.5), y0);
}

/* The fast paths' error bounds eps + eps_slow, in ulps of y (2^53 (eps + eps_slow)), with a margin: exp 2^-49 +
 * 2^-50, log1p 2^-49 + 2^-50, sigmoid and SiLU 2^-47.5 + 2^-51, rsqrt 2^-51 + 2^-51. The fast path falls back on
 * about 2 k / 2^29 of inputs. */
enum { GDN__K_EXP = 48, GDN__K_LOG1P = 48, GDN__K_SIGMOID = 96, GDN__K_RSQRT = 16 };

/* The fast paths with their fallbacks. */

/* Below -87.33 e^x is subnormal as a float, rounded to a multiple of 2^-149: y + 2^-126 has that ulp, and its
 * rounding test is y's (one ulp more for the addition's rounding). */
GDN_HD float gdn__expf_fast(float x) {
    if (x >= -104.0f && x <= 89.0f) {
        const double y = gdn__exp_fast_d((double)x);
        if (gdn__round_safe(x < -87.33f ? y + 0x1p-126 : y, GDN__K_EXP + 1)) return (float)y;
    } else if (x < -104.0f) {
        return 0.0f;
    }
    return gdn__expf_slow(x);
}

GDN_HD float gdn__log1pf_fast(float x) {
    const float ax = x < 0.0f ? -x : x;
    if (ax < 0x1p-25f) return x;
    if (x > -1.0f && x <= 0x1.fffffep127f) {
        const double y = gdn__log1p_fast_d((double)x);
        if (gdn__round_safe(y, GDN__K_LOG1P)) return (float)y;
    }
    return gdn__log1pf_slow(x);
}

GDN_HD float gdn__softplusf_fast(float x) { return x > 20.0f ? x : gdn__log1pf_fast(gdn__expf_fast(x)); }

GDN_HD float gdn__sigmoidf_fast(float x) {
    if (x > 17.5f) return 1.0f;
    if (x >= -87.0f) {
        const double y = gdn__sigmoid_fast_d((double)x);
        if (gdn__round_safe(y, GDN__K_SIGMOID)) return (float)y;
    } else if (x < -104.0f) {
        return 0.0f;
    }
    return gdn__sigmoidf_slow(x);
}

/* 0 < |x| < 2^-60 takes the slow path (the result may be subnormal) */
GDN_HD float gdn__siluf_fast(float x) {
    if (x > 17.5f) return x;
    const float ax = x < 0.0f ? -x : x;
    if (x >= -87.0f && (ax >= 0x1p-60f || x == 0.0f)) {
        const double y = gdn__silu_fast_d((double)x);
        if (gdn__round_safe(y, GDN__K_SIGMOID)) return (float)y;
    } else if (x < -120.0f) {
        return -0.0f;
    }
    return gdn__siluf_slow(x);
}

/* a subnormal x takes the slow path */
GDN_HD float gdn__rsqrtf_fast(float x) {
    const uint32_t b = gdn__f32_bits(x);
    if (b - 0x00800000u < 0x7f000000u) { /* positive, normal, finite */
        const double y = gdn__rsqrt_fast_d(b);
        if (gdn__round_safe(y, GDN__K_RSQRT)) return (float)y;
    }
    return gdn__rsqrtf_slow(x);
}

/* ---- the functions: the fast paths where fma is one instruction (GPU code; a host compiled for FMA), else the slow
 * paths (fma() would be a library call each, dearer than the division it saves); the same bits either way ---- */

#if defined(__CUDA_ARCH__) || defined(__FMA__)
#define GDN_MATH_FAST 1
#else
#define GDN_MATH_FAST 0
#endif

/* e^x, correctly rounded: +inf above 88.72283935, +0 below -103.97208, e^+-0 = 1, NaN in, NaN out. */
GDN_HD float gdn_expf(float x) { return GDN_MATH_FAST ? gdn__expf_fast(x) : gdn__expf_slow(x); }

/* ln(1 + x), correctly rounded: x itself for |x| < 2^-24 (signed zeros kept), -inf at -1, NaN below -1 and for NaN,
 * +inf at +inf. */
GDN_HD float gdn_log1pf(float x) { return GDN_MATH_FAST ? gdn__log1pf_fast(x) : gdn__log1pf_slow(x); }

/* softplus(x) = x for x > 20, else log1p(exp(x)) with exp rounded to float first: the two correctly rounded
 * functions composed. */
GDN_HD float gdn_softplusf(float x) { return x > 20.0f ? x : gdn_log1pf(gdn_expf(x)); }

/* 1 / (1 + e^-x), the slow path's bits (correctly rounded but where the slow path is not, docs/CONTRACT.md
 * section 3): 1 above 17.33, +0 below -103.97, NaN in, NaN out. */
GDN_HD float gdn_sigmoidf(float x) { return GDN_MATH_FAST ? gdn__sigmoidf_fast(x) : gdn__sigmoidf_slow(x); }

/* x / (1 + e^-x), the slow path's bits (as sigmoid's): x above 17.33, -0 far left and at -inf, NaN in, NaN out. */
GDN_HD float gdn_siluf(float x) { return GDN_MATH_FAST ? gdn__siluf_fast(x) : gdn__siluf_slow(x); }

/* 1 / sqrt(x), correctly rounded: +inf at +0, -inf at -0, NaN below 0 and for NaN, +0 at +inf. */
GDN_HD float gdn_rsqrtf(float x) { return GDN_MATH_FAST ? gdn__rsqrtf_fast(x) : gdn__rsqrtf_slow(x); }

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
