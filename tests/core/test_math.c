/* The contract's scalar math (src/common/gdn_math.h) against double precision: ulp error over a sweep of the
 * whole float range, the special values, the fast paths against the slow paths bit for bit and both against the
 * correctly rounded reference (math_ref.h) on a sample (dev/math_exhaustive.cu runs all 2^32 inputs), and the
 * f16 / bf16 conversions (exhaustive where 16 bits allow, round-to-nearest-even checked against an independent
 * nearest-value search, ties included). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gdn_testing.h"
#include "gdn_case.h"
#include "harness.h"
#include "math_ref.h"

static uint32_t bits(float x) { return gdn__f32_bits(x); }

/* Error of the float `got` against the exact value `exact`, in units of the float ulp at `exact`. */
static double ulp_error(float got, double exact) {
    if (isnan(exact)) return isnan(got) ? 0.0 : INFINITY;
    const float rounded = (float)exact; /* the correctly rounded result (overflow to inf included) */
    if (isinf(rounded) || isinf(got)) return got == rounded ? 0.0 : INFINITY;
    int e;
    frexp(exact, &e);
    const double ulp = fabs(exact) < 0x1p-126 ? 0x1p-149 : ldexp(1.0, e - 24);
    return fabs((double)got - exact) / ulp;
}

typedef float (*f32_fn)(float);
typedef double (*f64_fn)(double);

static double exact_softplus(double x) { return x > 20.0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double exact_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double exact_silu(double x) { return x / (1.0 + exp(-x)); }
static double exact_rsqrt(double x) { return 1.0 / sqrt(x); }

typedef struct sweep_result {
    double worst;   /* ulp */
    float worst_x;
    long incorrect; /* results that are not the correctly rounded value */
    long points;
} sweep_result;

static void sweep_point(f32_fn f, f64_fn exact, float x, sweep_result *s) {
    if (isnan(x)) return;
    const double want = exact((double)x);
    const float got = f(x);
    const double err = ulp_error(got, want);
    s->points++;
    s->incorrect += !isnan(want) && bits(got) != bits((float)want);
    if (err > s->worst) {
        s->worst = err;
        s->worst_x = x;
    }
}

/* Every float whose bits are a multiple of `stride` (both signs, every exponent, subnormals, infinities), then
 * 2^16 random points of [lo, hi]. */
static sweep_result sweep(f32_fn f, f64_fn exact, uint32_t stride, float lo, float hi) {
    sweep_result s = {0.0, 0.0f, 0, 0};
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += stride) sweep_point(f, exact, gdn__bits_f32((uint32_t)u), &s);
    harness_rng r = {42};
    for (int i = 0; i < 1 << 16; ++i) sweep_point(f, exact, lo + (hi - lo) * rng_uniform(&r), &s);
    return s;
}

static uint32_t sweep_stride(void) { return test_quick() ? 40009u : 4093u; }

static void check_sweep(const char *name, f32_fn f, f64_fn exact, float lo, float hi, double bound) {
    const sweep_result s = sweep(f, exact, sweep_stride(), lo, hi);
    printf("     %-13s max error %.6f ulp (at %.9g), %ld of %ld points not correctly rounded\n", name, s.worst,
           (double)s.worst_x, s.incorrect, s.points);
    CHECK(s.worst <= bound, "%s: %.4f ulp at %.9g", name, s.worst, (double)s.worst_x);
}

/* softplus as the contract composes it: log1p of the float-rounded exp, rounded once */
static double contract_softplus(double x) { return x > 20.0 ? x : log1p((double)gdn_expf((float)x)); }

TEST(math_expf_ulp) { check_sweep("gdn_expf", gdn_expf, exp, -104.0f, 89.0f, 1.0); }
TEST(math_log1pf_ulp) { check_sweep("gdn_log1pf", gdn_log1pf, log1p, -1.0f, 10.0f, 1.0); }
/* softplus rounds exp to float before log1p (docs/CONTRACT.md), two roundings: against the exact softplus the
 * bound is 1.5 ulp, against the contract's composition it is correctly rounded. */
TEST(math_softplusf_ulp) {
    check_sweep("gdn_softplusf", gdn_softplusf, exact_softplus, -30.0f, 30.0f, 1.5);
    check_sweep("  (contract)", gdn_softplusf, contract_softplus, -30.0f, 30.0f, 0.5 + 1e-6);
}
TEST(math_sigmoidf_ulp) { check_sweep("gdn_sigmoidf", gdn_sigmoidf, exact_sigmoid, -30.0f, 30.0f, 1.0); }
TEST(math_siluf_ulp) { check_sweep("gdn_siluf", gdn_siluf, exact_silu, -30.0f, 30.0f, 1.0); }
TEST(math_rsqrtf_ulp) { check_sweep("gdn_rsqrtf", gdn_rsqrtf, exact_rsqrt, 0.0f, 100.0f, 1.0); }

/* got is exactly want: same bits, or both NaN */
static int same(float got, float want) { return isnan(want) ? isnan(got) : bits(got) == bits(want); }

#define SPECIAL(fn, x, want) CHECK(same(fn(x), want), #fn "(%.9g) = %.9g (bits %08x), expected %.9g", (double)(x), \
                                   (double)fn(x), bits(fn(x)), (double)(want))

TEST(math_specials) {
    const float inf = INFINITY, nan_ = NAN, tiny = 0x1p-149f, min_normal = FLT_MIN;
    /* exp: zeros, infinities, NaN, overflow, underflow to subnormals and to zero, subnormal arguments */
    SPECIAL(gdn_expf, 0.0f, 1.0f);
    SPECIAL(gdn_expf, -0.0f, 1.0f);
    SPECIAL(gdn_expf, inf, inf);
    SPECIAL(gdn_expf, -inf, 0.0f);
    SPECIAL(gdn_expf, nan_, nan_);
    SPECIAL(gdn_expf, 89.0f, inf);
    SPECIAL(gdn_expf, 1000.0f, inf);
    SPECIAL(gdn_expf, FLT_MAX, inf);
    SPECIAL(gdn_expf, 88.72283f, (float)exp((double)88.72283f));
    SPECIAL(gdn_expf, -103.0f, tiny);
    SPECIAL(gdn_expf, -104.0f, 0.0f);
    SPECIAL(gdn_expf, -FLT_MAX, 0.0f);
    SPECIAL(gdn_expf, -100.0f, (float)exp(-100.0));
    SPECIAL(gdn_expf, -87.5f, (float)exp(-87.5));
    SPECIAL(gdn_expf, tiny, 1.0f);
    SPECIAL(gdn_expf, -tiny, 1.0f);
    SPECIAL(gdn_expf, 1.0f, 2.71828183f);
    CHECK(gdn_expf(-104.0f) == 0.0f && !signbit(gdn_expf(-104.0f)));
    /* log1p: signed zero kept, -1 is -inf, below -1 NaN, subnormals pass through */
    SPECIAL(gdn_log1pf, 0.0f, 0.0f);
    SPECIAL(gdn_log1pf, -0.0f, -0.0f);
    SPECIAL(gdn_log1pf, -1.0f, -inf);
    SPECIAL(gdn_log1pf, -1.5f, nan_);
    SPECIAL(gdn_log1pf, -inf, nan_);
    SPECIAL(gdn_log1pf, inf, inf);
    SPECIAL(gdn_log1pf, nan_, nan_);
    SPECIAL(gdn_log1pf, tiny, tiny);
    SPECIAL(gdn_log1pf, -tiny, -tiny);
    SPECIAL(gdn_log1pf, min_normal, min_normal);
    SPECIAL(gdn_log1pf, FLT_MAX, (float)log1p((double)FLT_MAX));
    SPECIAL(gdn_log1pf, nextafterf(-1.0f, 0.0f), (float)log1p((double)nextafterf(-1.0f, 0.0f)));
    /* softplus: threshold 20 (identity above), exp rounded to float first, so far left it underflows to 0 */
    SPECIAL(gdn_softplusf, 0.0f, 0.693147181f);
    SPECIAL(gdn_softplusf, -inf, 0.0f);
    SPECIAL(gdn_softplusf, inf, inf);
    SPECIAL(gdn_softplusf, nan_, nan_);
    SPECIAL(gdn_softplusf, 20.0f, 20.0f);
    SPECIAL(gdn_softplusf, nextafterf(20.0f, 30.0f), nextafterf(20.0f, 30.0f));
    SPECIAL(gdn_softplusf, FLT_MAX, FLT_MAX);
    SPECIAL(gdn_softplusf, -200.0f, 0.0f);
    SPECIAL(gdn_softplusf, -100.0f, gdn_expf(-100.0f));
    SPECIAL(gdn_softplusf, tiny, 0.693147181f);
    /* sigmoid */
    SPECIAL(gdn_sigmoidf, 0.0f, 0.5f);
    SPECIAL(gdn_sigmoidf, -0.0f, 0.5f);
    SPECIAL(gdn_sigmoidf, inf, 1.0f);
    SPECIAL(gdn_sigmoidf, -inf, 0.0f);
    SPECIAL(gdn_sigmoidf, nan_, nan_);
    SPECIAL(gdn_sigmoidf, 20.0f, 1.0f);
    SPECIAL(gdn_sigmoidf, -100.0f, (float)exp(-100.0));
    SPECIAL(gdn_sigmoidf, -104.0f, 0.0f);
    SPECIAL(gdn_sigmoidf, FLT_MAX, 1.0f);
    SPECIAL(gdn_sigmoidf, -FLT_MAX, 0.0f);
    /* silu */
    SPECIAL(gdn_siluf, 0.0f, 0.0f);
    SPECIAL(gdn_siluf, -0.0f, -0.0f);
    SPECIAL(gdn_siluf, inf, inf);
    SPECIAL(gdn_siluf, nan_, nan_);
    SPECIAL(gdn_siluf, -1000.0f, -0.0f);
    SPECIAL(gdn_siluf, -FLT_MAX, -0.0f);
    SPECIAL(gdn_siluf, FLT_MAX, FLT_MAX);
    SPECIAL(gdn_siluf, -100.0f, (float)(-100.0 * exp(-100.0)));
    SPECIAL(gdn_siluf, tiny, 0.0f);
    SPECIAL(gdn_siluf, -inf, -0.0f); /* the limit of x sigmoid(x), not -inf / inf */
    /* rsqrt: IEEE rSqrt: +0 -> +inf, -0 -> -inf, negative -> NaN; exact at powers of 4; subnormal arguments */
    SPECIAL(gdn_rsqrtf, 0.0f, inf);
    SPECIAL(gdn_rsqrtf, -0.0f, -inf);
    SPECIAL(gdn_rsqrtf, inf, 0.0f);
    SPECIAL(gdn_rsqrtf, -inf, nan_);
    SPECIAL(gdn_rsqrtf, -1.0f, nan_);
    SPECIAL(gdn_rsqrtf, -tiny, nan_);
    SPECIAL(gdn_rsqrtf, nan_, nan_);
    SPECIAL(gdn_rsqrtf, 4.0f, 0.5f);
    SPECIAL(gdn_rsqrtf, 0.25f, 2.0f);
    SPECIAL(gdn_rsqrtf, 0x1p-126f, 0x1p63f);
    SPECIAL(gdn_rsqrtf, 0x1p-148f, 0x1p74f);
    SPECIAL(gdn_rsqrtf, tiny, (float)(1.0 / sqrt(0x1p-149)));
    SPECIAL(gdn_rsqrtf, FLT_MAX, (float)(1.0 / sqrt((double)FLT_MAX)));
    /* the raw gate: exp(-exp(A_log) softplus(a + dt)) with its pieces rounded to float */
    CHECK(gdn_raw_gate(0.0f, 0.0f, 0.0f) == gdn_expf(-0.693147181f));
    CHECK(gdn_raw_gate(200.0f, 0.0f, 0.0f) == 0.0f && gdn_raw_gate(-200.0f, 0.0f, 0.0f) == 1.0f);
    CHECK(isnan(gdn_raw_gate(nan_, 0.0f, 0.0f)));
}

/* ---- the fast paths, the slow paths and the correctly rounded reference ---- */

/* dev/math_ref_cases.py: function, x, the correctly rounded f(x) (mpmath, 200 bits) */
static const struct { int fn; uint32_t x, y; } ref_cases[] = {
    {GDN_REF_EXPF, 0x33800000, 0x3f800001}, {GDN_REF_EXPF, 0xb3000000, 0x3f800000},
    {GDN_REF_EXPF, 0x34000000, 0x3f800001}, {GDN_REF_EXPF, 0xb3800000, 0x3f7fffff},
    {GDN_REF_EXPF, 0x34400000, 0x3f800002}, {GDN_REF_EXPF, 0xc2aeac50, 0x007fffe6},
    {GDN_REF_EXPF, 0xc2cf0000, 0x00000001}, {GDN_REF_EXPF, 0x0da24260, 0x3f800000},
    {GDN_REF_EXPF, 0xc2261e86, 0x2187c846}, {GDN_REF_EXPF, 0xc295b162, 0x0981bb88},
    {GDN_REF_EXPF, 0x41abc285, 0x4efb89cb}, {GDN_REF_EXPF, 0xc2b3e5c5, 0x0009643a},
    {GDN_REF_EXPF, 0xbf306a8f, 0x3f008408}, {GDN_REF_EXPF, 0xc205df8e, 0x27522c12},
    {GDN_REF_EXPF, 0xc2b97575, 0x0000950f}, {GDN_REF_EXPF, 0xc0c55f41, 0x3b0957a9},
    {GDN_REF_EXPF, 0x8f9f4b6b, 0x3f800000}, {GDN_REF_EXPF, 0x23c9a465, 0x3f800000},
    {GDN_REF_EXPF, 0x92782213, 0x3f800000}, {GDN_REF_EXPF, 0x10c2d45a, 0x3f800000},
    {GDN_REF_LOG1PF, 0x33800000, 0x33800000}, {GDN_REF_LOG1PF, 0x33000000, 0x33000000},
    {GDN_REF_LOG1PF, 0xb3000000, 0xb3000000}, {GDN_REF_LOG1PF, 0x34400000, 0x343fffff},
    {GDN_REF_LOG1PF, 0x35800000, 0x357ffff8}, {GDN_REF_LOG1PF, 0xbe95f5ae, 0xbeb17180},
    {GDN_REF_LOG1PF, 0x3ed41355, 0x3eb171c3}, {GDN_REF_LOG1PF, 0x7149f2ca, 0x428a27b5},
    {GDN_REF_LOG1PF, 0xbf7fffff, 0xc1851592}, {GDN_REF_LOG1PF, 0x000116c2, 0x000116c2},
    {GDN_REF_LOG1PF, 0x49674f9a, 0x415c2f3a}, {GDN_REF_LOG1PF, 0x4919f619, 0x4155abe8},
    {GDN_REF_LOG1PF, 0x490e5548, 0x41546a3e}, {GDN_REF_LOG1PF, 0x4771a51c, 0x413085ca},
    {GDN_REF_LOG1PF, 0x490ef450, 0x41547c15}, {GDN_REF_LOG1PF, 0x4741b45d, 0x412cfc09},
    {GDN_REF_LOG1PF, 0x4857e643, 0x4144e68f}, {GDN_REF_LOG1PF, 0x4907e787, 0x4153acef},
    {GDN_REF_LOG1PF, 0x94af6a31, 0x94af6a31}, {GDN_REF_LOG1PF, 0x1545ec59, 0x1545ec59},
    {GDN_REF_LOG1PF, 0x2be56168, 0x2be56168}, {GDN_REF_LOG1PF, 0x1319967c, 0x1319967c},
    {GDN_REF_SOFTPLUSF, 0x41a00000, 0x41a00000}, {GDN_REF_SOFTPLUSF, 0xc184cccd, 0x3384a13e},
    {GDN_REF_SOFTPLUSF, 0xc2aecccd, 0x00782140}, {GDN_REF_SOFTPLUSF, 0xc2cfcccd, 0x00000001},
    {GDN_REF_SOFTPLUSF, 0x33800000, 0x3f317219}, {GDN_REF_SOFTPLUSF, 0x00000000, 0x3f317218},
    {GDN_REF_SOFTPLUSF, 0xc0f4ff29, 0x39f7fef7}, {GDN_REF_SOFTPLUSF, 0x403756b8, 0x403ae2fe},
    {GDN_REF_SOFTPLUSF, 0xc1d1dc7e, 0x2c8e721a}, {GDN_REF_SOFTPLUSF, 0xc1d36435, 0x2c6b4b95},
    {GDN_REF_SOFTPLUSF, 0xc18d23cb, 0x32bb0cfd}, {GDN_REF_SOFTPLUSF, 0x412d2f19, 0x412d2f2e},
    {GDN_REF_SOFTPLUSF, 0xc08b05d4, 0x3c53458a}, {GDN_REF_SOFTPLUSF, 0xc1326b31, 0x3770e4c4},
    {GDN_REF_SOFTPLUSF, 0xaca82df9, 0x3f317218}, {GDN_REF_SOFTPLUSF, 0x20ca1748, 0x3f317218},
    {GDN_REF_SOFTPLUSF, 0x37b7d234, 0x3f3172d0}, {GDN_REF_SOFTPLUSF, 0x92017425, 0x3f317218},
    {GDN_REF_SIGMOIDF, 0x34c00000, 0x3f000001}, {GDN_REF_SIGMOIDF, 0x35600000, 0x3f000003},
    {GDN_REF_SIGMOIDF, 0x35b00000, 0x3f000005}, {GDN_REF_SIGMOIDF, 0x35f00000, 0x3f000007},
    {GDN_REF_SIGMOIDF, 0xb4400000, 0x3effffff}, {GDN_REF_SIGMOIDF, 0xb4e00000, 0x3efffffd},
    {GDN_REF_SIGMOIDF, 0x34000000, 0x3f000000}, {GDN_REF_SIGMOIDF, 0x418a6666, 0x3f7fffff},
    {GDN_REF_SIGMOIDF, 0xc2af0000, 0x006cb2bc}, {GDN_REF_SIGMOIDF, 0xc2cf0000, 0x00000001},
    {GDN_REF_SIGMOIDF, 0xc1fdcbaf, 0x289641bc}, {GDN_REF_SIGMOIDF, 0x415c4937, 0x3f7fffee},
    {GDN_REF_SIGMOIDF, 0xc0a581f2, 0x3bb8d496}, {GDN_REF_SIGMOIDF, 0xc27a45ba, 0x1254cba2},
    {GDN_REF_SIGMOIDF, 0x41db61c0, 0x3f800000}, {GDN_REF_SIGMOIDF, 0xc2a94d8b, 0x026a8d9e},
    {GDN_REF_SIGMOIDF, 0xc236937d, 0x1e8dfbd7}, {GDN_REF_SIGMOIDF, 0xbfc92cc8, 0x3e301ac7},
    {GDN_REF_SIGMOIDF, 0x95ae98c7, 0x3f000000}, {GDN_REF_SIGMOIDF, 0x2402a0d8, 0x3f000000},
    {GDN_REF_SIGMOIDF, 0xb624a932, 0x3effffeb}, {GDN_REF_SIGMOIDF, 0x9fa71f2d, 0x3f000000},
    {GDN_REF_SILUF, 0x00010001, 0x00008001}, {GDN_REF_SILUF, 0x00010003, 0x00008002},
    {GDN_REF_SILUF, 0x80010001, 0x80008000}, {GDN_REF_SILUF, 0x80010003, 0x80008001},
    {GDN_REF_SILUF, 0x00800001, 0x00400001}, {GDN_REF_SILUF, 0x21800000, 0x21000000},
    {GDN_REF_SILUF, 0x418a6666, 0x418a6666}, {GDN_REF_SILUF, 0xc2b40000, 0x81c8c18a},
    {GDN_REF_SILUF, 0xc2d20000, 0x80000013}, {GDN_REF_SILUF, 0xc1b5daf7, 0xb15196f9},
    {GDN_REF_SILUF, 0xc1c4e8b3, 0xb00a4750}, {GDN_REF_SILUF, 0xc222c5f2, 0xa4c748f2},
    {GDN_REF_SILUF, 0x4113220b, 0x41131e39}, {GDN_REF_SILUF, 0x41b677e5, 0x41b677e5},
    {GDN_REF_SILUF, 0xc2197808, 0xa67073cc}, {GDN_REF_SILUF, 0xc15a903c, 0xb785d77c},
    {GDN_REF_SILUF, 0xc2b839d8, 0x806358bb}, {GDN_REF_SILUF, 0xb2cceba4, 0xb24ceba4},
    {GDN_REF_SILUF, 0x9cb51865, 0x9c351865}, {GDN_REF_SILUF, 0xbca22bf9, 0xbc20910e},
    {GDN_REF_SILUF, 0x8ed4c4b0, 0x8e54c4b0}, {GDN_REF_RSQRTF, 0x3f800001, 0x3f7fffff},
    {GDN_REF_RSQRTF, 0x40800001, 0x3effffff}, {GDN_REF_RSQRTF, 0x7f7fffff, 0x1f800000},
    {GDN_REF_RSQRTF, 0x00000001, 0x64b504f3}, {GDN_REF_RSQRTF, 0x00800000, 0x5f000000},
    {GDN_REF_RSQRTF, 0x40000000, 0x3f3504f3}, {GDN_REF_RSQRTF, 0x40400000, 0x3f13cd3a},
    {GDN_REF_RSQRTF, 0x006ce3ee, 0x5f0ac723}, {GDN_REF_RSQRTF, 0x708f9221, 0x26f1b838},
    {GDN_REF_RSQRTF, 0x70f6bf9a, 0x26b861b5}, {GDN_REF_RSQRTF, 0x70c766a9, 0x26cd1b7d},
    {GDN_REF_RSQRTF, 0x7030444f, 0x271a41c5}, {GDN_REF_RSQRTF, 0x70682f87, 0x2706676e},
    {GDN_REF_RSQRTF, 0x71151c7e, 0x26a7b750}, {GDN_REF_RSQRTF, 0x70a0b5a8, 0x26e477a1},
    {GDN_REF_RSQRTF, 0x7139264a, 0x269682d9}, {GDN_REF_RSQRTF, 0x27f86f76, 0x4b37c12d},
    {GDN_REF_RSQRTF, 0x2575f7b2, 0x4c829596}, {GDN_REF_RSQRTF, 0x3c77f32f, 0x41020faf},
    {GDN_REF_RSQRTF, 0x3b6e8d84, 0x41849925},
};

/* The reference (math_ref.h) against mpmath's correctly rounded values: hard cases (near midpoints, thresholds,
 * subnormals) and random inputs, every one decided. */
TEST(math_reference_against_mpmath) {
    int wrong = 0, undecided = 0;
    for (size_t i = 0; i < sizeof ref_cases / sizeof ref_cases[0]; ++i) {
        int u = 0;
        const float y = gdn__ref_call(ref_cases[i].fn, GDN_REF_CR, gdn__bits_f32(ref_cases[i].x), &u);
        undecided += u;
        if (bits(y) != ref_cases[i].y && wrong++ < 5)
            printf("     %s(%08x): reference %08x, mpmath %08x\n", gdn__ref_name(ref_cases[i].fn), ref_cases[i].x,
                   bits(y), ref_cases[i].y);
    }
    CHECK(wrong == 0 && undecided == 0, "%d wrong, %d undecided of %zu", wrong, undecided,
          sizeof ref_cases / sizeof ref_cases[0]);
}

/* Every input where the slow path is not correctly rounded (dev/math_exhaustive.cu, all 2^32 inputs) but SiLU's
 * subnormal ties: function, x, the slow path's result, the correctly rounded one. */
static const struct { int fn; uint32_t x, slow, cr; } slow_not_cr[] = {
    {GDN_REF_LOG1PF, 0x35400003, 0x353ffffe, 0x353fffff}, {GDN_REF_LOG1PF, 0x3710001b, 0x370ffff2, 0x370ffff3},
    {GDN_REF_LOG1PF, 0x3ebe9143, 0x3ea20161, 0x3ea20160}, {GDN_REF_LOG1PF, 0x41078feb, 0x400fe5e8, 0x400fe5e7},
    {GDN_REF_LOG1PF, 0x65d890d3, 0x4254d1f8, 0x4254d1f9}, {GDN_REF_LOG1PF, 0x6f31a8ec, 0x42845a88, 0x42845a89},
    {GDN_REF_LOG1PF, 0xb53ffffd, 0xb5400002, 0xb5400001}, {GDN_REF_LOG1PF, 0xb70fffe5, 0xb710000e, 0xb710000d},
    {GDN_REF_LOG1PF, 0xbb0ec8c4, 0xbb0ef0a4, 0xbb0ef0a5}, {GDN_REF_SOFTPLUSF, 0xbf7d0271, 0x3ea20161, 0x3ea20160},
    {GDN_REF_SOFTPLUSF, 0xbf7d0272, 0x3ea20161, 0x3ea20160}, {GDN_REF_SOFTPLUSF, 0xc13aa6c6, 0x370ffff2, 0x370ffff3},
    {GDN_REF_SIGMOIDF, 0x34c00000, 0x3f000002, 0x3f000001}, {GDN_REF_SIGMOIDF, 0x35600000, 0x3f000004, 0x3f000003},
    {GDN_REF_SIGMOIDF, 0x35b00000, 0x3f000006, 0x3f000005}, {GDN_REF_SIGMOIDF, 0x35f00000, 0x3f000008, 0x3f000007},
    {GDN_REF_SIGMOIDF, 0x36180000, 0x3f00000a, 0x3f000009}, {GDN_REF_SIGMOIDF, 0x36380000, 0x3f00000c, 0x3f00000b},
    {GDN_REF_SIGMOIDF, 0x36580000, 0x3f00000e, 0x3f00000d}, {GDN_REF_SIGMOIDF, 0x36780000, 0x3f000010, 0x3f00000f},
    {GDN_REF_SIGMOIDF, 0x368c0000, 0x3f000012, 0x3f000011}, {GDN_REF_SIGMOIDF, 0x369c0000, 0x3f000014, 0x3f000013},
    {GDN_REF_SIGMOIDF, 0x36ac0000, 0x3f000016, 0x3f000015}, {GDN_REF_SIGMOIDF, 0x36bc0000, 0x3f000018, 0x3f000017},
    {GDN_REF_SIGMOIDF, 0x36cc0000, 0x3f00001a, 0x3f000019}, {GDN_REF_SIGMOIDF, 0x36dc0000, 0x3f00001c, 0x3f00001b},
    {GDN_REF_SIGMOIDF, 0x36ec0000, 0x3f00001e, 0x3f00001d}, {GDN_REF_SIGMOIDF, 0x36fc0000, 0x3f000020, 0x3f00001f},
    {GDN_REF_SIGMOIDF, 0x37060000, 0x3f000022, 0x3f000021}, {GDN_REF_SIGMOIDF, 0x370e0000, 0x3f000024, 0x3f000023},
    {GDN_REF_SIGMOIDF, 0x37160000, 0x3f000026, 0x3f000025}, {GDN_REF_SIGMOIDF, 0x371e0000, 0x3f000028, 0x3f000027},
    {GDN_REF_SIGMOIDF, 0x372e0000, 0x3f00002c, 0x3f00002b}, {GDN_REF_SIGMOIDF, 0x37360000, 0x3f00002e, 0x3f00002d},
    {GDN_REF_SIGMOIDF, 0x373e0000, 0x3f000030, 0x3f00002f}, {GDN_REF_SIGMOIDF, 0x37460000, 0x3f000032, 0x3f000031},
    {GDN_REF_SIGMOIDF, 0x374e0000, 0x3f000034, 0x3f000033}, {GDN_REF_SIGMOIDF, 0x37560000, 0x3f000036, 0x3f000035},
    {GDN_REF_SIGMOIDF, 0x375e0000, 0x3f000038, 0x3f000037}, {GDN_REF_SIGMOIDF, 0x37660000, 0x3f00003a, 0x3f000039},
    {GDN_REF_SIGMOIDF, 0xb4400000, 0x3efffffe, 0x3effffff}, {GDN_REF_SIGMOIDF, 0xb4e00000, 0x3efffffc, 0x3efffffd},
    {GDN_REF_SIGMOIDF, 0xb5300000, 0x3efffffa, 0x3efffffb}, {GDN_REF_SIGMOIDF, 0xb5700000, 0x3efffff8, 0x3efffff9},
    {GDN_REF_SIGMOIDF, 0xb5980000, 0x3efffff6, 0x3efffff7}, {GDN_REF_SIGMOIDF, 0xb5b80000, 0x3efffff4, 0x3efffff5},
    {GDN_REF_SIGMOIDF, 0xb5d80000, 0x3efffff2, 0x3efffff3}, {GDN_REF_SIGMOIDF, 0xb5f80000, 0x3efffff0, 0x3efffff1},
    {GDN_REF_SIGMOIDF, 0xb60c0000, 0x3effffee, 0x3effffef}, {GDN_REF_SIGMOIDF, 0xb61c0000, 0x3effffec, 0x3effffed},
    {GDN_REF_SIGMOIDF, 0xb62c0000, 0x3effffea, 0x3effffeb}, {GDN_REF_SIGMOIDF, 0xb63c0000, 0x3effffe8, 0x3effffe9},
    {GDN_REF_SIGMOIDF, 0xb64c0000, 0x3effffe6, 0x3effffe7}, {GDN_REF_SIGMOIDF, 0xb65c0000, 0x3effffe4, 0x3effffe5},
    {GDN_REF_SIGMOIDF, 0xb66c0000, 0x3effffe2, 0x3effffe3}, {GDN_REF_SIGMOIDF, 0xb67c0000, 0x3effffe0, 0x3effffe1},
    {GDN_REF_SIGMOIDF, 0xb6860000, 0x3effffde, 0x3effffdf}, {GDN_REF_SIGMOIDF, 0xb68e0000, 0x3effffdc, 0x3effffdd},
    {GDN_REF_SIGMOIDF, 0xb6960000, 0x3effffda, 0x3effffdb}, {GDN_REF_SIGMOIDF, 0xb69e0000, 0x3effffd8, 0x3effffd9},
    {GDN_REF_SIGMOIDF, 0xb6a60000, 0x3effffd6, 0x3effffd7}, {GDN_REF_SIGMOIDF, 0xb6ae0000, 0x3effffd4, 0x3effffd5},
    {GDN_REF_SIGMOIDF, 0xb6b60000, 0x3effffd2, 0x3effffd3}, {GDN_REF_SIGMOIDF, 0xb6be0000, 0x3effffd0, 0x3effffd1},
    {GDN_REF_SIGMOIDF, 0xb6c60000, 0x3effffce, 0x3effffcf}, {GDN_REF_SIGMOIDF, 0xb6ce0000, 0x3effffcc, 0x3effffcd},
    {GDN_REF_SIGMOIDF, 0xb6d60000, 0x3effffca, 0x3effffcb}, {GDN_REF_SIGMOIDF, 0xb6de0000, 0x3effffc8, 0x3effffc9},
    {GDN_REF_SIGMOIDF, 0xb6e60000, 0x3effffc6, 0x3effffc7}, {GDN_REF_SIGMOIDF, 0xb6ee0000, 0x3effffc4, 0x3effffc5},
    {GDN_REF_SIGMOIDF, 0xb6f60000, 0x3effffc2, 0x3effffc3}, {GDN_REF_SIGMOIDF, 0xb6fe0000, 0x3effffc0, 0x3effffc1},
    {GDN_REF_SIGMOIDF, 0xb7570000, 0x3effff94, 0x3effff95}, {GDN_REF_SIGMOIDF, 0xb77b0000, 0x3effff82, 0x3effff83},
    {GDN_REF_SIGMOIDF, 0xb77f0000, 0x3effff80, 0x3effff81}, {GDN_REF_SIGMOIDF, 0xb7818000, 0x3effff7e, 0x3effff7f},
    {GDN_REF_SIGMOIDF, 0xb7838000, 0x3effff7c, 0x3effff7d}, {GDN_REF_SIGMOIDF, 0xba928601, 0x3effdb5e, 0x3effdb5f},
};

/* SiLU's: x/2 a tie between two subnormals (|x| < 2^-125, its last bit set) that the slow path rounds to even while
 * the exact x/2 + x^2/4 - ... lies beyond it (up: x > 0, last two bits 01; toward 0: x < 0, 11). 2^23 inputs. */
static int silu_tie(uint32_t u) { return (u & 0x7fffffffu) < 0x01000000u && (u & 3u) == (u >> 31 ? 3u : 1u); }

/* Where the slow path (the functions' bits) is not correctly rounded: the list and SiLU's ties. Anything else is a
 * defect. */
static int known_not_cr(int fn, uint32_t u) {
    if (fn == GDN_REF_SILUF) return silu_tie(u);
    for (size_t i = 0; i < sizeof slow_not_cr / sizeof slow_not_cr[0]; ++i)
        if (slow_not_cr[i].fn == fn && slow_not_cr[i].x == u) return 1;
    return 0;
}

/* Each listed input: the fast and slow paths give the listed bits, and the reference decides the listed correctly
 * rounded value (mpmath agrees: dev/math_ref_cases.py's cr()); SiLU's ties likewise, every 61st. */
TEST(math_slow_path_exceptions) {
    int wrong = 0;
    for (size_t i = 0; i < sizeof slow_not_cr / sizeof slow_not_cr[0]; ++i) {
        float r[3];
        const int flags = gdn__ref_check(slow_not_cr[i].fn, gdn__bits_f32(slow_not_cr[i].x), r);
        const int ok =
            flags == GDN_REF_SLOW_WRONG && bits(r[1]) == slow_not_cr[i].slow && bits(r[2]) == slow_not_cr[i].cr;
        if (!ok && wrong++ < 5)
            printf("     %s(%08x): fast %08x slow %08x CR %08x, flags %d\n", gdn__ref_name(slow_not_cr[i].fn),
                   slow_not_cr[i].x, bits(r[0]), bits(r[1]), bits(r[2]), flags);
    }
    long ties = 0;
    for (uint32_t m = 1; m < 0x01000000u; m += 4 * 61)
        for (int s = 0; s < 2; ++s) {
            const uint32_t u = s ? (m + 2) | 0x80000000u : m;
            float r[3];
            ++ties;
            if (gdn__ref_check(GDN_REF_SILUF, gdn__bits_f32(u), r) != GDN_REF_SLOW_WRONG && wrong++ < 5)
                printf("     siluf(%08x): fast %08x slow %08x CR %08x\n", u, bits(r[0]), bits(r[1]), bits(r[2]));
        }
    printf("     %zu listed inputs and %ld of SiLU's ties checked\n", sizeof slow_not_cr / sizeof slow_not_cr[0], ties);
    CHECK(wrong == 0);
}

typedef struct math_tally {
    long points, differ, not_cr, unknown_not_cr, undecided;
} math_tally;

static void math_point(int fn, uint32_t u, math_tally *t) {
    const float x = gdn__bits_f32(u);
    float r[3];
    const int flags = gdn__ref_check(fn, x, r);
    /* gdn_* (the fast path where GDN_MATH_FAST, else the slow one) has the slow path's bits too */
    float g;
    switch (fn) {
    case GDN_REF_EXPF: g = gdn_expf(x); break;
    case GDN_REF_LOG1PF: g = gdn_log1pf(x); break;
    case GDN_REF_SOFTPLUSF: g = gdn_softplusf(x); break;
    case GDN_REF_SIGMOIDF: g = gdn_sigmoidf(x); break;
    case GDN_REF_SILUF: g = gdn_siluf(x); break;
    default: g = gdn_rsqrtf(x); break;
    }
    const int differ = (flags & GDN_REF_NEW_DIFFERS) || bits(g) != bits(r[1]);
    t->points++;
    const char *name = gdn__ref_name(fn);
    if (differ && t->differ++ < 5)
        printf("     %s(%08x): fast %08x, gdn_ %08x, slow %08x\n", name, u, bits(r[0]), bits(g), bits(r[1]));
    if (flags & GDN_REF_UNDECIDED && t->undecided++ < 5)
        printf("     %s(%08x): the reference cannot decide\n", name, u);
    if (flags & GDN_REF_SLOW_WRONG) {
        t->not_cr++;
        if (!known_not_cr(fn, u) && t->unknown_not_cr++ < 5)
            printf("     %s(%08x): slow %08x, correctly rounded %08x\n", name, u, bits(r[1]), bits(r[2]));
    }
}

/* Each function on every float whose bits are a multiple of the sweep's stride, 2^16 random bit patterns, every
 * 64th subnormal, and the 4096 floats around each place where a path changes course (range limits of the fast
 * paths and of the results, the slow paths' branches, the sigmoid's and SiLU's near-0 ties): the fast path has the
 * slow path's bits everywhere, the slow path is correctly rounded but at the known exceptions. */
static void check_fast_paths(int fn) {
    math_tally t = {0, 0, 0, 0, 0};
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += sweep_stride()) math_point(fn, (uint32_t)u, &t);
    harness_rng r = {99 + (uint64_t)fn};
    for (int i = 0; i < 1 << 16; ++i) math_point(fn, (uint32_t)rng_u64(&r), &t);
    for (uint32_t u = 0; u < 0x00800000u; u += 64) math_point(fn, u, &t), math_point(fn, u | 0x80000000u, &t);
    const float centers[] = {0.0f,  0x1p-60f, 0x1p-25f, 0x1p-24f, 0x1p-23f,   3 * 0x1p-23f, 0x1p-20f, 1e-5f,
                             0.29289f, 0.41421f, 1.0f,    17.33f,  17.5f,     20.0f,        87.0f,    87.33f,
                             88.72283f, 89.0f,  103.97f,  104.0f,  120.0f,    0x1p-126f,    0x1p-125f, FLT_MAX};
    for (size_t c = 0; c < sizeof centers / sizeof centers[0]; ++c)
        for (int s = 0; s < 2; ++s) {
            const uint32_t mid = bits(s ? -centers[c] : centers[c]);
            for (uint32_t d = 0; d < 4096; ++d) {
                const uint32_t u = mid + d - 2048;
                if (((u ^ mid) & 0x80000000u) == 0) math_point(fn, u, &t);
            }
        }
    printf("     %-10s %ld inputs: %ld fast != slow, %ld slow not correctly rounded (%ld unexplained), %ld undecided\n",
           gdn__ref_name(fn), t.points, t.differ, t.not_cr, t.unknown_not_cr, t.undecided);
    CHECK(t.differ == 0 && t.unknown_not_cr == 0 && t.undecided == 0, "%s", gdn__ref_name(fn));
}

TEST(math_expf_fast_path) { check_fast_paths(GDN_REF_EXPF); }
TEST(math_log1pf_fast_path) { check_fast_paths(GDN_REF_LOG1PF); }
TEST(math_softplusf_fast_path) { check_fast_paths(GDN_REF_SOFTPLUSF); }
TEST(math_sigmoidf_fast_path) { check_fast_paths(GDN_REF_SIGMOIDF); }
TEST(math_siluf_fast_path) { check_fast_paths(GDN_REF_SILUF); }
TEST(math_rsqrtf_fast_path) { check_fast_paths(GDN_REF_RSQRTF); }

/* The raw gate through the fast paths against the slow ones on random (a, A_log, dt_bias) around a model's values
 * and one in eight any bit pattern. */
TEST(math_raw_gate_fast_path) {
    harness_rng r = {5};
    long differ = 0, n = test_quick() ? 1 << 16 : 1 << 20;
    for (long i = 0; i < n; ++i) {
        float v[3];
        const float lo[3] = {-12.0f, -3.0f, -8.0f}, hi[3] = {12.0f, 4.5f, 3.0f};
        for (int k = 0; k < 3; ++k) {
            const uint64_t b = rng_u64(&r);
            v[k] = (b & 7) == 0 ? gdn__bits_f32((uint32_t)(b >> 32)) : lo[k] + (hi[k] - lo[k]) * rng_uniform(&r);
        }
        const float fast = gdn__expf_fast(-(gdn__expf_fast(v[1]) * gdn__softplusf_fast(v[0] + v[2])));
        const float slow = gdn__expf_slow(-(gdn__expf_slow(v[1]) * gdn__softplusf_slow(v[0] + v[2])));
        const float g = gdn_raw_gate(v[0], v[1], v[2]);
        if ((bits(fast) != bits(slow) || bits(g) != bits(slow)) && differ++ < 5)
            printf("     gate(%08x, %08x, %08x): fast %08x, gdn_raw_gate %08x, slow %08x\n", bits(v[0]), bits(v[1]),
                   bits(v[2]), bits(fast), bits(g), bits(slow));
    }
    printf("     %ld random triples: %ld differ\n", n, differ);
    CHECK(differ == 0);
}

/* ---- f16 and bf16 ---- */

/* Value of a non-negative f16 code; 0x7c00 (inf) reads as 2^16, the next step after the largest finite. */
static double f16_value(uint32_t c) {
    const uint32_t e = c >> 10, m = c & 0x3ff;
    return e == 0 ? ldexp((double)m, -24) : ldexp((double)(m + 1024), (int)e - 25);
}

/* Value of a non-negative bf16 code; 0x7f80 (inf) reads as 2^128. */
static double bf16_value(uint32_t c) {
    const uint32_t e = c >> 7, m = c & 0x7f;
    return e == 0 ? ldexp((double)m, -133) : ldexp((double)(m + 128), (int)e - 134);
}

/* Round-to-nearest-even by search: the largest code whose value is <= |x| (codes increase with value), then the
 * nearer of it and the next one, the even code on a tie; beyond the largest finite value's half step: inf. */
static uint16_t nearest_code(float x, double (*value)(uint32_t), uint32_t inf_code) {
    const uint16_t sign = (uint16_t)(signbit(x) ? 0x8000 : 0);
    const double a = fabs((double)x);
    if (isinf(x)) return (uint16_t)(sign | inf_code);
    uint32_t lo = 0, hi = inf_code; /* value(lo) <= a; find the last such code below inf_code */
    if (a >= value(inf_code)) return (uint16_t)(sign | inf_code);
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (value(mid) <= a) lo = mid;
        else hi = mid;
    }
    const double below = a - value(lo), above = value(lo + 1) - a;
    const uint32_t c = below < above ? lo : above < below ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    return (uint16_t)(sign | c);
}

TEST(math_f16_bf16_decode_exhaustive) {
    int bad_f16 = 0, bad_bf16 = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float sign = h & 0x8000 ? -1.0f : 1.0f;
        const uint32_t mag = h & 0x7fff;
        /* f16 */
        const float f = gdn__f16_to_f32((uint16_t)h);
        if (mag > 0x7c00) bad_f16 += !(isnan(f) && !signbit(f) == !(h & 0x8000));
        else bad_f16 += bits(f) != bits(mag == 0x7c00 ? sign * INFINITY : sign * (float)f16_value(mag));
        if (mag < 0x7c00) bad_f16 += gdn__f32_to_f16(f) != h; /* round trip */
        else if (mag > 0x7c00) bad_f16 += (gdn__f32_to_f16(f) & 0x7fff) <= 0x7c00;
        /* bf16 */
        const float b = gdn__bf16_to_f32((uint16_t)h);
        if (mag > 0x7f80) bad_bf16 += !(isnan(b) && !signbit(b) == !(h & 0x8000));
        else bad_bf16 += bits(b) != bits(mag == 0x7f80 ? sign * INFINITY : sign * (float)bf16_value(mag));
        if (mag <= 0x7f80) bad_bf16 += gdn__f32_to_bf16(b) != h;
        else bad_bf16 += (gdn__f32_to_bf16(b) & 0x7fff) <= 0x7f80 || !(gdn__f32_to_bf16(b) & 0x40); /* quiet NaN */
    }
    CHECK(bad_f16 == 0, "%d f16 codes decode or round-trip wrongly", bad_f16);
    CHECK(bad_bf16 == 0, "%d bf16 codes decode or round-trip wrongly", bad_bf16);
    CHECK(gdn__f32_to_f16(INFINITY) == 0x7c00 && gdn__f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(gdn__f32_to_bf16(INFINITY) == 0x7f80 && gdn__f32_to_bf16(-INFINITY) == 0xff80);
}

static int check_rounding(float x, int *bad16, int *badb) {
    if (isnan(x)) return 0;
    const uint16_t h = gdn__f32_to_f16(x), want_h = nearest_code(x, f16_value, 0x7c00);
    const uint16_t b = gdn__f32_to_bf16(x), want_b = nearest_code(x, bf16_value, 0x7f80);
    if (h != want_h && (*bad16)++ < 5) printf("     f32 %a -> f16 %04x, expected %04x\n", (double)x, h, want_h);
    if (b != want_b && (*badb)++ < 5) printf("     f32 %a -> bf16 %04x, expected %04x\n", (double)x, b, want_b);
    return 1;
}

TEST(math_f32_to_half_round_to_nearest_even) {
    int bad16 = 0, badb = 0;
    long n = 0;
    /* every representable midpoint between neighbouring codes (the ties) and the floats just around them */
    for (uint32_t c = 0; c < 0x7c00; ++c) {
        const float mid = (float)((f16_value(c) + f16_value(c + 1)) / 2);
        for (int s = 0; s < 2; ++s) {
            const float m = s ? -mid : mid;
            n += check_rounding(m, &bad16, &badb) + check_rounding(nextafterf(m, INFINITY), &bad16, &badb) +
                 check_rounding(nextafterf(m, -INFINITY), &bad16, &badb);
        }
    }
    for (uint32_t c = 0; c < 0x7f80; ++c) {
        const double mid_d = (bf16_value(c) + bf16_value(c + 1)) / 2;
        if (mid_d > FLT_MAX) break;
        const float mid = (float)mid_d;
        n += check_rounding(mid, &bad16, &badb) + check_rounding(nextafterf(mid, INFINITY), &bad16, &badb) +
             check_rounding(nextafterf(mid, -INFINITY), &bad16, &badb) + check_rounding(-mid, &bad16, &badb);
    }
    /* a stride through every f32 bit pattern */
    const uint32_t stride = test_quick() ? 65537u : 4099u;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += stride) n += check_rounding(gdn__bits_f32((uint32_t)u), &bad16, &badb);
    printf("     %ld f32 values rounded to f16 and bf16: %d and %d differ from the nearest-even search\n", n, bad16, badb);
    CHECK(bad16 == 0 && badb == 0);
    /* hand-picked ties and edges */
    CHECK(gdn__f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);         /* tie, down to even */
    CHECK(gdn__f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);     /* tie, up to even */
    CHECK(gdn__f32_to_f16(0x1p-25f) == 0x0000);                /* half the smallest subnormal: to 0 */
    CHECK(gdn__f32_to_f16(3 * 0x1p-25f) == 0x0002);            /* subnormal tie up to even */
    CHECK(gdn__f32_to_f16(65504.0f) == 0x7bff);
    CHECK(gdn__f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7bff);
    CHECK(gdn__f32_to_f16(65520.0f) == 0x7c00);                /* tie between the largest finite and inf: inf */
    CHECK(gdn__f32_to_f16(-0.0f) == 0x8000 && gdn__f32_to_f16(0x1p-149f) == 0x0000);
    CHECK(gdn__f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(gdn__f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(gdn__f32_to_bf16(FLT_MAX) == 0x7f80);                /* rounds past the largest finite bf16 */
    CHECK(gdn__f32_to_bf16(-0.0f) == 0x8000 && gdn__f32_to_bf16(0x1p-149f) == 0x0000);
    CHECK(gdn__f32_to_bf16(0x1p-133f) == 0x0001);              /* the smallest bf16 subnormal */
    /* NaN in, quiet NaN out, sign kept */
    const float snan = gdn__bits_f32(0x7f800001u), neg_nan = gdn__bits_f32(0xffc00000u);
    CHECK((gdn__f32_to_f16(snan) & 0x7fff) > 0x7c00 && (gdn__f32_to_f16(snan) & 0x0200));
    CHECK((gdn__f32_to_bf16(snan) & 0x7fff) > 0x7f80 && (gdn__f32_to_bf16(snan) & 0x0040));
    CHECK((gdn__f32_to_f16(neg_nan) & 0xfe00) == 0xfe00 && (gdn__f32_to_bf16(neg_nan) & 0xffc0) == 0xffc0);
}

/* ---- the CPU layer stages' rows (each SIMD table the CPU has) against the scalar functions ---- */

enum { GATE_ROW = 1021 }; /* a row length that is no multiple of the vectors: the rows' scalar tails run too */
static const char *const row_tables[] = {"scalar", "AVX2", "AVX-512"};

typedef struct gate_check {
    float x[GATE_ROW];
    int n, sigmoid, table;
    long points, wrong;
    float first_wrong;
} gate_check;

/* the row of inputs so far through the table's rows, each result against the scalar function's bits (a NaN against
 * a NaN: which NaN depends on the compiler's operand order, in the scalar code too) */
static void gate_flush(gate_check *g) {
    float y[GATE_ROW];
    memset(y, 0x7e, sizeof y); /* a finite poison: an unwritten result differs from the scalar's */
    gdn__layer_gate_rows(g->table, y, g->x, g->n, g->sigmoid);
    for (int i = 0; i < g->n; ++i) {
        const float want = g->sigmoid ? gdn_sigmoidf(g->x[i]) : gdn_siluf(g->x[i]);
        const int both_nan = y[i] != y[i] && want != want; /* NaN payloads are not in the contract (CONTRACT.md 5) */
        if (bits(y[i]) != bits(want) && !both_nan && g->wrong++ == 0) g->first_wrong = g->x[i];
    }
    g->points += g->n;
    g->n = 0;
}

static void gate_point(gate_check *g, float x) {
    g->x[g->n++] = x;
    if (g->n == GATE_ROW) gate_flush(g);
}

/* Every float whose bits are a multiple of the sweep's stride, 2^18 random bit patterns, the special values, and
 * the 4096 floats around each place where the double evaluation changes course: e^-x's clamps (|x| = 709, 745),
 * float exp's overflow and underflow (88.7, 103.9, 104), SiLU's and sigmoid's saturation (16.6, 17, 20, 30), 0. */
static void check_gate_table(int sigmoid, int table) {
    static gate_check g;
    memset(&g, 0, sizeof g);
    g.sigmoid = sigmoid, g.table = table;
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, gdn__bits_f32(0x7f800001u),
                              gdn__bits_f32(0xffbfffffu), FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f,
                              0x1p-127f, -0x1p-127f, 1.0f, -1.0f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) gate_point(&g, specials[i]);
    const uint32_t stride = sweep_stride();
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += stride) gate_point(&g, gdn__bits_f32((uint32_t)u));
    harness_rng r = {7 + (uint64_t)sigmoid};
    for (int i = 0; i < 1 << 18; ++i) gate_point(&g, gdn__bits_f32((uint32_t)rng_u64(&r)));
    const float centers[] = {0.0f, 709.0f, 745.0f, 88.72283f, 103.97208f, 104.0f, 16.635532f, 17.0f, 20.0f, 30.0f};
    for (size_t c = 0; c < sizeof centers / sizeof centers[0]; ++c)
        for (int s = 0; s < 2; ++s) {
            const uint32_t mid = bits(s ? -centers[c] : centers[c]);
            for (uint32_t d = 0; d < 4096; ++d) {
                const uint32_t u = mid + d - 2048;
                if (((u ^ mid) & 0x80000000u) == 0) gate_point(&g, gdn__bits_f32(u)); /* the same sign as the center */
            }
        }
    gate_flush(&g);
    printf("     %s rows (%s): %ld of %ld points differ from %s\n", sigmoid ? "sigmoid" : "SiLU", row_tables[table],
           g.wrong, g.points, sigmoid ? "gdn_sigmoidf" : "gdn_siluf");
    CHECK(g.wrong == 0, "%s: %ld points differ, the first at %.9g (bits %08x)", row_tables[table], g.wrong,
          (double)g.first_wrong, bits(g.first_wrong));
}

/* every SIMD table this CPU runs (none: the scalar table against itself would prove nothing) */
static void check_gate_rows(int sigmoid) {
    int ran = 0;
    for (int table = 1; table < 3; ++table)
        if (gdn__layer_gate_rows(table, NULL, NULL, 0, sigmoid)) check_gate_table(sigmoid, table), ++ran;
    if (!ran) printf("     no SIMD rows on this CPU\n");
}

TEST(math_layer_silu_rows_bitwise) { check_gate_rows(0); }
TEST(math_layer_sigmoid_rows_bitwise) { check_gate_rows(1); }

/* The conv + SiLU row of each SIMD table against the scalar table's, bit for bit: random taps, weights and biases
 * (and none), rows of every length to 40 (the vector bodies and their tails), and special values in the taps. */
TEST(math_layer_conv_rows_bitwise) {
    enum { N = 40 };
    harness_rng r = {11};
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 0x1p-149f, 100.0f, -100.0f};
    for (int table = 1; table < 3; ++table) {
        if (!gdn__layer_conv_rows(table, NULL, NULL, NULL, NULL, 0)) continue;
        long points = 0, wrong = 0;
        for (int round = 0; round < 400; ++round) {
            float taps[4][N], w[4 * N], bias[N], want[N], got[N];
            const int n = 1 + round % N;
            for (int i = 0; i < n; ++i) {
                for (int j = 0; j < 4; ++j) taps[j][i] = (float)(rng_u64(&r) % 20001) / 1000.0f - 10.0f;
                for (int j = 0; j < 4; ++j) w[j * n + i] = (float)(rng_u64(&r) % 2001) / 1000.0f - 1.0f;
                bias[i] = (float)(rng_u64(&r) % 2001) / 1000.0f - 1.0f;
            }
            if (round % 3 == 2) /* a special value in one of the taps */
                taps[(round / 3) % 4][round % n] = specials[(round / 12) % (sizeof specials / sizeof specials[0])];
            const float *const x[4] = {taps[0], taps[1], taps[2], taps[3]};
            const float *b = round % 5 == 0 ? NULL : bias;
            memset(want, 0x7f, sizeof want), memset(got, 0x7e, sizeof got); /* two finite poisons: unwritten differs */
            gdn__layer_conv_rows(0, want, x, w, b, n);
            gdn__layer_conv_rows(table, got, x, w, b, n);
            for (int i = 0; i < n; ++i, ++points)
                wrong += bits(got[i]) != bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]);
        }
        printf("     conv + SiLU rows (%s): %ld of %ld points differ from the scalar rows\n", row_tables[table], wrong,
               points);
        CHECK(wrong == 0, "%s: %ld points differ", row_tables[table], wrong);
    }
}
