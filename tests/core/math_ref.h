/* A reference for the contract's transcendentals (src/common/gdn_math.h): each function of a binary32 argument
 * evaluated in double-double arithmetic (a value hi + lo, about 106 bits) with a stated relative error bound, and the
 * correctly rounded binary32 result (round to nearest even of the exact real value) decided from it, or reported
 * undecided where the exact value may lie within that bound of a midpoint between two binary32 values.
 *
 * Used by tests/core/test_math.c (a sample) and dev/math_exhaustive.c / .cu (all 2^32 inputs). Compiles as C and as
 * CUDA device code like gdn_math.h: only + - * / and fma, no contraction (-ffp-contract=off, --fmad=false).
 *
 * Error bounds (u = 2^-53; the double-double operations of Joldes, Muller, Popescu, "Tight and rigorous error bounds
 * for basic building blocks of double-word arithmetic", ACM TOMS 2017: sum 3u^2, product 5u^2, quotient 10u^2):
 *   exp      x = k ln2 + r (ln2 to 160 bits), e^(r/256) - 1 by Taylor to degree 10 (truncation < 2^-120
 *            relative), squared back 8 times as a <- a (2 + a); < 2^-98 relative. GDN_REF_EXP_ERR = 2^-92.
 *   log1p    1 + x exactly, = 2^k m with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m - 1) / (m + 1),
 *            |s| < 0.1716, the series to s^43 (truncation < 2^-110 relative), plus k ln2; |x| < 2^-20: the Taylor
 *            series of log1p to x^7; < 2^-100 relative. GDN_REF_LOG1P_ERR = 2^-92.
 *   sigmoid  1 / (1 + e^-x) (x >= 0) or e^x / (1 + e^x); silu x times it: < 2^-96. GDN_REF_SIG_ERR = 2^-90.
 *   rsqrt    decided exactly: the sign of m^2 x - 1 for the midpoint m, in exact double-double arithmetic.
 * The bounds used to decide are a few bits looser than the analysis; tests/core/test_math.c checks the reference
 * against independent values (mpmath, 200 bits) at hard cases. */
#ifndef GDN_MATH_REF_H
#define GDN_MATH_REF_H

#include "common/gdn_math.h"

typedef struct gdn__dd {
    double hi, lo;
} gdn__dd;

#define GDN_REF_EXP_ERR 0x1p-92
#define GDN_REF_LOG1P_ERR 0x1p-92
#define GDN_REF_SIG_ERR 0x1p-90

GDN_HD gdn__dd gdn__dd_make(double hi, double lo) {
    gdn__dd r;
    r.hi = hi, r.lo = lo;
    return r;
}
GDN_HD gdn__dd gdn__dd_two_sum(double a, double b) {
    const double s = a + b, bb = s - a;
    return gdn__dd_make(s, (a - (s - bb)) + (b - bb));
}
GDN_HD gdn__dd gdn__dd_fast_sum(double a, double b) { /* |a| >= |b| or a = 0 */
    const double s = a + b;
    return gdn__dd_make(s, b - (s - a));
}
GDN_HD gdn__dd gdn__dd_prod(double a, double b) {
    const double p = a * b;
    return gdn__dd_make(p, fma(a, b, -p));
}
GDN_HD gdn__dd gdn__dd_add(gdn__dd x, gdn__dd y) {
    gdn__dd s = gdn__dd_two_sum(x.hi, y.hi);
    const gdn__dd t = gdn__dd_two_sum(x.lo, y.lo);
    s = gdn__dd_fast_sum(s.hi, s.lo + t.hi);
    return gdn__dd_fast_sum(s.hi, s.lo + t.lo);
}
GDN_HD gdn__dd gdn__dd_add_d(gdn__dd x, double y) {
    const gdn__dd s = gdn__dd_two_sum(x.hi, y);
    return gdn__dd_fast_sum(s.hi, s.lo + x.lo);
}
GDN_HD gdn__dd gdn__dd_mul(gdn__dd x, gdn__dd y) {
    gdn__dd p = gdn__dd_prod(x.hi, y.hi);
    const double t = fma(x.lo, y.lo, x.hi * y.lo);
    return gdn__dd_fast_sum(p.hi, p.lo + fma(x.lo, y.hi, t));
}
GDN_HD gdn__dd gdn__dd_mul_d(gdn__dd x, double y) {
    const gdn__dd p = gdn__dd_prod(x.hi, y);
    return gdn__dd_fast_sum(p.hi, fma(x.lo, y, p.lo));
}
GDN_HD gdn__dd gdn__dd_div(gdn__dd x, gdn__dd y) {
    const double q1 = x.hi / y.hi;
    gdn__dd r = gdn__dd_add(x, gdn__dd_mul_d(y, -q1));
    const double q2 = r.hi / y.hi;
    r = gdn__dd_add(r, gdn__dd_mul_d(y, -q2));
    const double q3 = r.hi / y.hi;
    return gdn__dd_add_d(gdn__dd_fast_sum(q1, q2), q3);
}
GDN_HD gdn__dd gdn__dd_scale(gdn__dd x, double p2) { return gdn__dd_make(x.hi * p2, x.lo * p2); } /* p2 = 2^n */
GDN_HD double gdn__ref_pow2(int n) { return gdn__bits_f64((uint64_t)(n + 1023) << 52); }       /* -1022..1023 */

/* ln 2 = LN2_1 + LN2_2 + LN2_3 to about 2^-165 */
#define GDN_REF_LN2_1 0x1.62e42fefa39efp-1
#define GDN_REF_LN2_2 0x1.abc9e3b39803fp-56
#define GDN_REF_LN2_3 0x1.7b57a079a1934p-111

/* k ln2 as a double-double, k an integer of at most 11 bits */
GDN_HD gdn__dd gdn__ref_k_ln2(double k) {
    gdn__dd p = gdn__dd_prod(k, GDN_REF_LN2_1);
    return gdn__dd_add(p, gdn__dd_prod(k, GDN_REF_LN2_2)); /* k LN2_3 < 2^-100 of k ln2: added by the callers */
}

/* e^x for a double x; +inf beyond 709.7, +0 below -744 */
GDN_HD gdn__dd gdn__ref_exp(double x) {
    if (x != x) return gdn__dd_make(x, 0.0);
    if (x > 709.7) return gdn__dd_make(gdn__bits_f64(0x7ff0000000000000ull), 0.0);
    if (x < -744.0) return gdn__dd_make(0.0, 0.0);
    const double k = (x * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
    gdn__dd r = gdn__dd_add(gdn__dd_make(x, 0.0), gdn__dd_scale(gdn__ref_k_ln2(k), -1.0));
    r = gdn__dd_add_d(r, -k * GDN_REF_LN2_3);
    const gdn__dd s = gdn__dd_scale(r, 0x1p-8);
    /* 1/n!, n = 2..10, as double-doubles */
    const double fh[9] = {0x1p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,
                          0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19,
                          0x1.27e4fb7789f5cp-22};
    const double fl[9] = {0.0, 0x1.5555555555555p-57, 0x1.5555555555555p-59, 0x1.1111111111111p-63,
                          -0x1.f49f49f49f49fp-65, 0x1.a01a01a01a01ap-73, 0x1.a01a01a01a01ap-76, -0x1.c154f8ddc6c00p-73,
                          0x1.cbbc05b4fa99ap-76};
    gdn__dd a = gdn__dd_make(fh[8], fl[8]);
    for (int n = 7; n >= 0; --n) a = gdn__dd_add(gdn__dd_make(fh[n], fl[n]), gdn__dd_mul(a, s));
    a = gdn__dd_mul(s, gdn__dd_add_d(gdn__dd_mul(a, s), 1.0)); /* e^s - 1 = s (1 + s/2 + s^2/6 + ...) */
    for (int i = 0; i < 8; ++i) a = gdn__dd_mul(a, gdn__dd_add_d(a, 2.0)); /* e^2s - 1 = a (2 + a) */
    gdn__dd y = gdn__dd_add_d(a, 1.0);
    const int ki = (int)k, half = ki / 2;
    return gdn__dd_scale(gdn__dd_scale(y, gdn__ref_pow2(half)), gdn__ref_pow2(ki - half));
}

/* ln(1 + x) for a binary32 x > -1 (as a double) */
GDN_HD gdn__dd gdn__ref_log1p(double x) {
    const double ax = x < 0 ? -x : x;
    if (ax < 0x1p-20) { /* x - x^2 (1/2 - x (1/3 - ... - x (1/6 - x/7))): truncation < x^7 < 2^-140 relative */
        const double ch[6] = {0x1p-1, 0x1.5555555555555p-2, 0x1p-2, 0x1.999999999999ap-3, 0x1.5555555555555p-3,
                              0x1.2492492492492p-3};
        const double cl[6] = {0.0, 0x1.5555555555555p-56, 0.0, -0x1.999999999999ap-57, 0x1.5555555555555p-57,
                              0x1.2492492492492p-57};
        gdn__dd p = gdn__dd_make(ch[5], cl[5]);
        for (int n = 4; n >= 0; --n) p = gdn__dd_add(gdn__dd_make(ch[n], cl[n]), gdn__dd_mul_d(p, -x));
        return gdn__dd_add_d(gdn__dd_mul(gdn__dd_prod(x, x), gdn__dd_scale(p, -1.0)), x);
    }
    const gdn__dd u = gdn__dd_two_sum(1.0, x); /* exact */
    int k = (int)((gdn__f64_bits(u.hi) >> 52) & 0x7ff) - 1023;
    gdn__dd m = gdn__dd_scale(u, gdn__ref_pow2(-k));
    if (m.hi > 1.4142135623730951) m = gdn__dd_scale(m, 0.5), ++k;
    const gdn__dd f = gdn__dd_add_d(m, -1.0), v = gdn__dd_add_d(m, 1.0);
    const gdn__dd s = gdn__dd_div(f, v), z = gdn__dd_mul(s, s);
    /* 1/(2n+1), n = 1..21 */
    const double oh[21] = {0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4,
                           0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5,
                           0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5, 0x1.47ae147ae147bp-5,
                           0x1.2f684bda12f68p-5, 0x1.1a7b9611a7b96p-5, 0x1.0842108421084p-5, 0x1.f07c1f07c1f08p-6,
                           0x1.d41d41d41d41dp-6, 0x1.bacf914c1bad0p-6, 0x1.a41a41a41a41ap-6, 0x1.8f9c18f9c18fap-6,
                           0x1.7d05f417d05f4p-6};
    const double ol[21] = {0x1.5555555555555p-56, -0x1.999999999999ap-57, 0x1.2492492492492p-57,
                           0x1.c71c71c71c71cp-58, -0x1.745d1745d1746p-59, -0x1.3b13b13b13b14p-58,
                           0x1.1111111111111p-60, 0x1.e1e1e1e1e1e1ep-61, 0x1.af286bca1af28p-59,
                           0x1.8618618618618p-59, 0x1.642c8590b2164p-60, -0x1.eb851eb851eb8p-61,
                           0x1.2f684bda12f68p-59, 0x1.1a7b9611a7b96p-61, 0x1.0842108421084p-60,
                           -0x1.f07c1f07c1f08p-61, 0x1.0750750750750p-60, -0x1.bacf914c1bad0p-60,
                           0x1.0690690690690p-60, -0x1.f3831f3831f38p-61, 0x1.7d05f417d05f4p-62};
    gdn__dd p = gdn__dd_make(oh[20], ol[20]);
    for (int n = 19; n >= 0; --n) p = gdn__dd_add(gdn__dd_make(oh[n], ol[n]), gdn__dd_mul(p, z));
    /* ln m = 2 s (1 + z p) */
    const gdn__dd lnm = gdn__dd_scale(gdn__dd_mul(s, gdn__dd_add_d(gdn__dd_mul(z, p), 1.0)), 2.0);
    if (k == 0) return lnm;
    return gdn__dd_add_d(gdn__dd_add(gdn__ref_k_ln2((double)k), lnm), (double)k * GDN_REF_LN2_3);
}

/* The binary32 nearest to v = hi + lo (|lo| <= ulp(hi)), overflow to inf; *undecided |= the exact value, within
 * rel |v| of v, may lie on the other side of a midpoint (or on it). */
GDN_HD float gdn__ref_round(gdn__dd v, double rel, int *undecided) {
    if (v.hi != v.hi) return (float)v.hi;
    if (v.hi == 0.0) return (float)v.hi;
    const int neg = v.hi < 0;
    gdn__dd a = neg ? gdn__dd_make(-v.hi, -v.lo) : v;
    float r;
    if (a.hi >= 0x1p128) {
        r = gdn__bits_f32(0x7f800000u);
    } else {
        int e = (int)((gdn__f64_bits(a.hi) >> 52) & 0x7ff) - 1023;
        if ((gdn__f64_bits(a.hi) & 0x000fffffffffffffull) == 0 && a.lo < 0) --e; /* just below a power of 2 */
        const int qe = (e < -126 ? -126 : e) - 23;                               /* the float ulp: 2^qe */
        const double inv_q = qe > 0 ? 1.0 / gdn__ref_pow2(qe) : gdn__ref_pow2(-qe);
        const double th = a.hi * inv_q, tl = a.lo * inv_q; /* exact: a power of 2, th < 2^24 */
        double n0 = floor(th), frac = (th - n0) + tl;
        if (frac < 0.0) n0 -= 1.0, frac += 1.0;
        const double d = frac - 0.5;
        if ((d < 0 ? -d : d) <= rel * (th + 1.0)) *undecided = 1;
        const double n = n0 + (d > 0.0 ? 1.0 : 0.0);
        const double q = qe > 0 ? gdn__ref_pow2(qe) : 1.0 / gdn__ref_pow2(-qe);
        r = (float)(n * q); /* exact, or 2^128: inf */
    }
    return neg ? -r : r;
}

/* ---- the correctly rounded functions of a binary32 argument; *undecided as gdn__ref_round's ---- */

GDN_HD float gdn__ref_expf(float x, int *undecided) {
    if (x != x) return x + x;
    if (x < -104.0f) return 0.0f; /* e^x < e^-104 < 2^-150: rounds to +0 */
    if (x > 89.0f) return gdn__bits_f32(0x7f800000u);
    return gdn__ref_round(gdn__ref_exp((double)x), GDN_REF_EXP_ERR, undecided);
}

GDN_HD float gdn__ref_log1pf(float x, int *undecided) {
    if (x != x) return x + x;
    if (x < -1.0f) return gdn__bits_f32(0x7fc00000u);
    if (x == -1.0f) return gdn__bits_f32(0xff800000u);
    if (x == 0.0f || gdn__f32_bits(x) == 0x7f800000u) return x;
    return gdn__ref_round(gdn__ref_log1p((double)x), GDN_REF_LOG1P_ERR, undecided);
}

/* softplus as the contract defines it: x for x > 20, else log1p of the correctly rounded exp */
GDN_HD float gdn__ref_softplusf(float x, int *undecided) {
    if (x > 20.0f) return x;
    return gdn__ref_log1pf(gdn__ref_expf(x, undecided), undecided);
}

/* 1 / (1 + e^-x), as a double-double (x not NaN) */
GDN_HD gdn__dd gdn__ref_sigmoid(double x) {
    if (x >= 0.0) return gdn__dd_div(gdn__dd_make(1.0, 0.0), gdn__dd_add_d(gdn__ref_exp(-x), 1.0));
    const gdn__dd e = gdn__ref_exp(x);
    return gdn__dd_div(e, gdn__dd_add_d(e, 1.0));
}

GDN_HD float gdn__ref_sigmoidf(float x, int *undecided) {
    if (x != x) return x + x;
    return gdn__ref_round(gdn__ref_sigmoid((double)x), GDN_REF_SIG_ERR, undecided);
}

GDN_HD float gdn__ref_siluf(float x, int *undecided) {
    if (x != x) return x + x;
    if (gdn__f32_bits(x) == 0xff800000u) return -0.0f; /* the limit */
    if (gdn__f32_bits(x) == 0x7f800000u || x == 0.0f) return x;
    const double ax = x < 0 ? -(double)x : (double)x;
    float r;
    if (ax < 0x1p-60) {
        /* |x| sigmoid(x) = |x|/2 (1 -+ |x|/2 + ...): |x|/2 is a float or, below 2^-125, may be a midpoint between two
         * (a multiple of 2^-150): then the exact value lies beyond it toward x/2 + x^2/4, up for x > 0, down in
         * magnitude for x < 0 */
        const double y = 0.5 * ax;
        r = (float)y;
        if ((double)r != y) {
            const float above = (double)r > y ? r : gdn__bits_f32(gdn__f32_bits(r) + 1u);
            r = x > 0 ? above : gdn__bits_f32(gdn__f32_bits(above) - 1u);
        }
    } else {
        r = gdn__ref_round(gdn__dd_mul_d(gdn__ref_sigmoid((double)x), ax), GDN_REF_SIG_ERR, undecided);
    }
    return x < 0 ? -r : r;
}

/* 1/sqrt(x), decided exactly: x = 4^j w with w in [1, 4), 1/sqrt(w) in (1/2, 1] where floats are 2^-24 apart;
 * from a double estimate y, step to the float whose neighbouring midpoints m bracket 1/sqrt(w), each side known
 * exactly from the sign of m^2 w - 1 (m has 26 bits, m^2 52, m^2 w 76: exact as a double-double, and not 0) */
GDN_HD double gdn__ref_rsqrt_side(double m, double w) { return gdn__dd_add_d(gdn__dd_prod(m * m, w), -1.0).hi; }

GDN_HD float gdn__ref_rsqrtf(float x) {
    if (x != x) return x + x;
    if (x == 0.0f) return gdn__bits_f32((gdn__f32_bits(x) & 0x80000000u) | 0x7f800000u);
    if (x < 0.0f) return gdn__bits_f32(0x7fc00000u);
    if (gdn__f32_bits(x) == 0x7f800000u) return 0.0f;
    double w = (double)x;
    int j = 0;
    while (w >= 4.0) w *= 0.25, ++j;
    while (w < 1.0) w *= 4.0, --j;
    const double h = 0x1p-25; /* half the spacing */
    double y = (double)(float)(1.0 / sqrt(w));
    for (;;) {
        if (y < 1.0 && gdn__ref_rsqrt_side(y + h, w) < 0.0) y += 2 * h;       /* 1/sqrt(w) above y's upper midpoint */
        else if (y > 0.5 && gdn__ref_rsqrt_side(y - h, w) > 0.0) y -= 2 * h;  /* below its lower midpoint */
        else break;
    }
    return (float)(y * gdn__ref_pow2(-j));
}

/* 1/sqrt(x) for x > 0 as a double-double: the double estimate and one Newton step with an exact residual */
GDN_HD gdn__dd gdn__ref_rsqrt(double x) {
    const double y = 1.0 / sqrt(x);
    const gdn__dd r = gdn__dd_add_d(gdn__dd_mul_d(gdn__dd_prod(y, y), -x), 1.0); /* 1 - x y^2 */
    return gdn__dd_add_d(gdn__dd_prod(y, 0.5 * r.hi), y);
}

/* ---- the functions side by side, for the checks ---- */

enum { GDN_REF_EXPF, GDN_REF_LOG1PF, GDN_REF_SOFTPLUSF, GDN_REF_SIGMOIDF, GDN_REF_SILUF, GDN_REF_RSQRTF, GDN_REF_FNS };

static inline const char *gdn__ref_name(int fn) {
    switch (fn) {
    case GDN_REF_EXPF: return "expf";
    case GDN_REF_LOG1PF: return "log1pf";
    case GDN_REF_SOFTPLUSF: return "softplusf";
    case GDN_REF_SIGMOIDF: return "sigmoidf";
    case GDN_REF_SILUF: return "siluf";
    default: return "rsqrtf";
    }
}

/* function fn of x: gdn_math.h's fast path (GDN_REF_NEW: gdn__*_fast, what gdn_* runs on a GPU), its binary64
 * slow path (GDN_REF_SLOW), or the correctly rounded reference (GDN_REF_CR, *undecided set where it cannot decide) */
enum { GDN_REF_NEW, GDN_REF_SLOW, GDN_REF_CR };
GDN_HD float gdn__ref_call(int fn, int which, float x, int *undecided) {
    if (which == GDN_REF_NEW) switch (fn) {
        case GDN_REF_EXPF: return gdn__expf_fast(x);
        case GDN_REF_LOG1PF: return gdn__log1pf_fast(x);
        case GDN_REF_SOFTPLUSF: return gdn__softplusf_fast(x);
        case GDN_REF_SIGMOIDF: return gdn__sigmoidf_fast(x);
        case GDN_REF_SILUF: return gdn__siluf_fast(x);
        default: return gdn__rsqrtf_fast(x);
        }
    if (which == GDN_REF_SLOW) switch (fn) {
        case GDN_REF_EXPF: return gdn__expf_slow(x);
        case GDN_REF_LOG1PF: return gdn__log1pf_slow(x);
        case GDN_REF_SOFTPLUSF: return gdn__softplusf_slow(x);
        case GDN_REF_SIGMOIDF: return gdn__sigmoidf_slow(x);
        case GDN_REF_SILUF: return gdn__siluf_slow(x);
        default: return gdn__rsqrtf_slow(x);
        }
    switch (fn) {
    case GDN_REF_EXPF: return gdn__ref_expf(x, undecided);
    case GDN_REF_LOG1PF: return gdn__ref_log1pf(x, undecided);
    case GDN_REF_SOFTPLUSF: return gdn__ref_softplusf(x, undecided);
    case GDN_REF_SIGMOIDF: return gdn__ref_sigmoidf(x, undecided);
    case GDN_REF_SILUF: return gdn__ref_siluf(x, undecided);
    default: return gdn__ref_rsqrtf(x);
    }
}

/* One input: GDN_REF_NEW_DIFFERS if the fast path and the slow path differ in any bit (NaNs included: the
 * same code decides them), GDN_REF_SLOW_WRONG if the slow path is not the correctly rounded value (NaN for NaN, the
 * sign of zero included), GDN_REF_UNDECIDED if the reference cannot tell; the three results in out[3]. */
enum { GDN_REF_NEW_DIFFERS = 1, GDN_REF_SLOW_WRONG = 2, GDN_REF_UNDECIDED = 4 };
GDN_HD int gdn__ref_check(int fn, float x, float out[3]) {
    int undecided = 0;
    out[0] = gdn__ref_call(fn, GDN_REF_NEW, x, &undecided);
    out[1] = gdn__ref_call(fn, GDN_REF_SLOW, x, &undecided);
    out[2] = gdn__ref_call(fn, GDN_REF_CR, x, &undecided);
    const uint32_t n = gdn__f32_bits(out[0]), s = gdn__f32_bits(out[1]), r = gdn__f32_bits(out[2]);
    const int s_nan = out[1] != out[1], r_nan = out[2] != out[2];
    int flags = n != s ? GDN_REF_NEW_DIFFERS : 0;
    if (undecided) flags |= GDN_REF_UNDECIDED;
    else if (s_nan != r_nan || (!s_nan && s != r)) flags |= GDN_REF_SLOW_WRONG;
    return flags;
}

/* The binary64 results of fn's fast path and of its slow path (before the rounding to float) against the reference:
 * their relative errors in err[0] and err[1], and in *falls_back whether the fast path's rounding test sends x to the
 * slow path. 0 where the fast path does not evaluate x (out of its range; softplus, a composition). */
GDN_HD int gdn__ref_errors(int fn, float x, double err[2], int *falls_back) {
    const double xd = (double)x, ax = xd < 0 ? -xd : xd;
    double y[2];
    gdn__dd ref;
    uint32_t k;
    switch (fn) {
    case GDN_REF_EXPF:
        if (!(xd >= -104.0 && xd <= 88.72)) return 0;
        y[0] = gdn__exp_fast_d(xd), y[1] = gdn__exp_d(xd), ref = gdn__ref_exp(xd), k = GDN__K_EXP + 1;
        break;
    case GDN_REF_LOG1PF:
        if (!(ax >= 0x1p-25 && xd > -1.0 && xd <= 0x1.fffffep127)) return 0;
        y[0] = gdn__log1p_fast_d(xd), y[1] = gdn__log1p_d(xd), ref = gdn__ref_log1p(xd), k = GDN__K_LOG1P;
        break;
    case GDN_REF_SIGMOIDF:
        if (!(xd >= -87.0 && xd <= 17.5)) return 0;
        y[0] = gdn__sigmoid_fast_d(xd), y[1] = 1.0 / (1.0 + gdn__exp_d(-xd)), ref = gdn__ref_sigmoid(xd);
        k = GDN__K_SIGMOID;
        break;
    case GDN_REF_SILUF:
        if (!(xd >= -87.0 && xd <= 17.5 && ax >= 0x1p-60)) return 0;
        y[0] = gdn__silu_fast_d(xd), y[1] = xd / (1.0 + gdn__exp_d(-xd));
        ref = gdn__dd_mul_d(gdn__ref_sigmoid(xd), xd), k = GDN__K_SIGMOID;
        break;
    case GDN_REF_RSQRTF:
        if (!(gdn__f32_bits(x) - 0x00800000u < 0x7f000000u)) return 0;
        y[0] = gdn__rsqrt_fast_d(gdn__f32_bits(x)), y[1] = 1.0 / sqrt(xd), ref = gdn__ref_rsqrt(xd), k = GDN__K_RSQRT;
        break;
    default: return 0;
    }
    for (int i = 0; i < 2; ++i) {
        const double d = (y[i] - ref.hi) - ref.lo;
        err[i] = (d < 0 ? -d : d) / (ref.hi < 0 ? -ref.hi : ref.hi);
    }
    *falls_back = !gdn__round_safe(fn == GDN_REF_EXPF && xd < -87.33 ? y[0] + 0x1p-126 : y[0], k);
    return 1;
}

#endif
