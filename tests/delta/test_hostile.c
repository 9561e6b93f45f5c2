/* Hostile values (docs/RELIABILITY.md, "Hostile values"): decays 0 and 1, raw gates whose exps overflow, beta
 * 0 and 1 and infinite logits, NaN and inf in every input, subnormals, all-zero keys, extreme scales, f16 at its
 * limits. Every case runs each CPU kernel that can take it (and the router's choice), at 1 and several threads,
 * and requires y and the final state memcmp-equal to `ref` (NaN payloads included); then it checks the
 * documented behaviour. */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "gdn.h"
#include "harness.h"

#if defined(__SSE__)
#include <xmmintrin.h>
/* The caller's floating-point modes: rounding direction and, on x86, MXCSR's FTZ/DAZ/rounding bits (not the
 * sticky exception flags, which any float operation may set). */
static unsigned fp_modes(void) { return (unsigned)fegetround() ^ (_mm_getcsr() & ~0x3fu) << 4; }
#else
static unsigned fp_modes(void) { return (unsigned)fegetround(); }
#endif

/* ---- a case: owned inputs of one shape ---- */

typedef struct hcase {
    gdn_delta_args a;                   /* inputs and options; y and state_out are set per run */
    int64_t n_qk, n_v, n_bt, n_state;   /* elements of q/k, v/y, [B,T,Hv], state */
    void *q, *k, *v;
    float *gate, *beta, *A_log, *dt_bias, *state; /* gate has room for the vector gate */
    uint8_t *mask;
} hcase;

static size_t dsize(gdn_dtype dt) { return dt == GDN_F32 ? 4 : 2; }

static void put(void *base, gdn_dtype dt, int64_t idx, float x) {
    if (dt == GDN_F32) ((float *)base)[idx] = x;
    else if (dt == GDN_F16) ((uint16_t *)base)[idx] = gdn__f32_to_f16(x);
    else ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x);
}

static float get(const void *base, gdn_dtype dt, int64_t idx) {
    if (dt == GDN_F32) return ((const float *)base)[idx];
    const uint16_t h = ((const uint16_t *)base)[idx];
    return dt == GDN_F16 ? gdn__f16_to_f32(h) : gdn__bf16_to_f32(h);
}

/* Typical values: q, k ~ 0.3 N(0,1), v ~ N(0,1), decays in [0.8, 1), beta in [0, 1), state ~ 0.3 N(0,1). */
static void hc_init(hcase *c, int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, gdn_dtype dt,
                    uint64_t seed) {
    memset(c, 0, sizeof *c);
    harness_rng r = {seed};
    c->n_qk = B * T * Hk * Dk, c->n_v = B * T * Hv * Dv, c->n_bt = B * T * Hv, c->n_state = B * Hv * Dk * Dv;
    c->q = malloc((size_t)c->n_qk * dsize(dt));
    c->k = malloc((size_t)c->n_qk * dsize(dt));
    c->v = malloc((size_t)c->n_v * dsize(dt));
    c->gate = malloc(sizeof(float) * (size_t)(c->n_bt * Dk));
    c->beta = malloc(sizeof(float) * (size_t)c->n_bt);
    c->A_log = malloc(sizeof(float) * (size_t)Hv);
    c->dt_bias = malloc(sizeof(float) * (size_t)Hv);
    c->state = malloc(sizeof(float) * (size_t)c->n_state);
    c->mask = malloc((size_t)(B * T));
    for (int64_t e = 0; e < c->n_qk; ++e) put(c->q, dt, e, 0.3f * rng_normal(&r)), put(c->k, dt, e, 0.3f * rng_normal(&r));
    for (int64_t e = 0; e < c->n_v; ++e) put(c->v, dt, e, rng_normal(&r));
    for (int64_t e = 0; e < c->n_bt * Dk; ++e) c->gate[e] = 0.8f + 0.2f * rng_uniform(&r);
    for (int64_t e = 0; e < c->n_bt; ++e) c->beta[e] = rng_uniform(&r);
    for (int64_t e = 0; e < Hv; ++e) c->A_log[e] = rng_normal(&r), c->dt_bias[e] = rng_normal(&r);
    for (int64_t e = 0; e < c->n_state; ++e) c->state[e] = 0.3f * rng_normal(&r);
    memset(c->mask, 1, (size_t)(B * T));
    c->a = (gdn_delta_args){.B = B, .T = T, .Hk = Hk, .Hv = Hv, .Dk = Dk, .Dv = Dv, .dtype = dt, .q = c->q, .k = c->k,
                            .v = c->v, .gate = c->gate, .A_log = c->A_log, .dt_bias = c->dt_bias, .beta = c->beta,
                            .state_in = c->state, .scale = 1.0f};
}

static void hc_free(hcase *c) {
    free(c->q), free(c->k), free(c->v), free(c->gate), free(c->beta), free(c->A_log), free(c->dt_bias);
    free(c->state), free(c->mask);
}

/* Element offsets. */
static int64_t qk_at(const hcase *c, int64_t b, int64_t t, int64_t hk, int64_t i) {
    return ((b * c->a.T + t) * c->a.Hk + hk) * c->a.Dk + i;
}
static int64_t v_at(const hcase *c, int64_t b, int64_t t, int64_t h, int64_t j) {
    return ((b * c->a.T + t) * c->a.Hv + h) * c->a.Dv + j;
}
static int64_t bt_at(const hcase *c, int64_t b, int64_t t, int64_t h) { return (b * c->a.T + t) * c->a.Hv + h; }
static int64_t s_at(const hcase *c, int64_t b, int64_t h, int64_t i, int64_t j) {
    const int64_t base = (b * c->a.Hv + h) * c->a.Dk * c->a.Dv;
    return c->a.state_layout == GDN_STATE_VK ? base + j * c->a.Dk + i : base + i * c->a.Dv + j;
}

/* ---- runs ---- */

typedef struct hres {
    uint8_t *y; /* [B,T,Hv,Dv] of the dtype */
    float *s;   /* [B,Hv,Dk,Dv] */
} hres;

static size_t y_bytes(const hcase *c) { return (size_t)c->n_v * dsize(c->a.dtype); }
static size_t s_bytes(const hcase *c) { return sizeof(float) * (size_t)c->n_state; }

/* One call into fresh outputs prefilled with `fill` (so an element a kernel forgot cannot match another run). */
static gdn_status hc_run(const hcase *c, const char *kernel, int threads, uint8_t fill, hres *out) {
    out->y = malloc(y_bytes(c));
    out->s = malloc(s_bytes(c));
    memset(out->y, fill, y_bytes(c));
    memset(out->s, fill, s_bytes(c));
    gdn_delta_args a = c->a;
    a.y = out->y, a.state_out = out->s, a.kernel = kernel, a.threads = threads;
    return gdn_delta(&a);
}

static void hres_free(hres *r) { free(r->y), free(r->s); }

static float y_val(const hcase *c, const hres *r, int64_t idx) { return get(r->y, c->a.dtype, idx); }

/* memcmp-equal, or a CHECK failure that says where, and whether only NaN payloads differ. */
static int same_bits(const char *what, const char *kernel, int threads, const void *got, const void *want, size_t n,
                     size_t es, gdn_dtype dt) {
    if (memcmp(got, want, n * es) == 0) return 1;
    size_t first = n, diff = 0, nan_only = 0;
    for (size_t e = 0; e < n; ++e) {
        if (memcmp((const uint8_t *)got + e * es, (const uint8_t *)want + e * es, es) == 0) continue;
        if (first == n) first = e;
        ++diff;
        const float g = es == 4 ? ((const float *)got)[e] : get(got, dt, (int64_t)e);
        const float w = es == 4 ? ((const float *)want)[e] : get(want, dt, (int64_t)e);
        nan_only += isnan(g) && isnan(w);
    }
    uint32_t gb = 0, wb = 0;
    memcpy(&gb, (const uint8_t *)got + first * es, es);
    memcpy(&wb, (const uint8_t *)want + first * es, es);
    CHECK(0, "%s: kernel %s (threads %d) differs from ref in %zu elements (%zu only in NaN payload); first %zu: "
             "0x%x vs ref 0x%x",
          what, kernel ? kernel : "(router)", threads, diff, nan_only, first, gb, wb);
    return 0;
}

/* Runs ref (1 thread) into *ref, then every eligible CPU kernel and the router at 1 and 3 threads; each must
 * return GDN_OK and match ref bit for bit. */
static void hc_check_kernels(const hcase *c, const char *what, hres *ref) {
    CHECK(hc_run(c, "ref", 1, 0xa5, ref) == GDN_OK, "%s: ref failed", what);
    for (int i = -1; i < gdn_kernel_count(); ++i) {
        if (i >= 0 && gdn_kernel_backend(i) != GDN_BACKEND_CPU) continue;
        const char *name = i < 0 ? NULL : gdn_kernel_name(i);
        gdn_delta_args probe = c->a;
        probe.y = ref->y, probe.state_out = ref->s;
        if (i >= 0 && !gdn_kernel_eligible(i, &probe)) continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            hres r;
            const gdn_status st = hc_run(c, name, threads, 0x5a, &r);
            CHECK(st == GDN_OK, "%s: kernel %s returned %d", what, name ? name : "(router)", st);
            if (st == GDN_OK) {
                same_bits(what, name, threads, r.y, ref->y, (size_t)c->n_v, dsize(c->a.dtype), c->a.dtype);
                same_bits(what, name, threads, r.s, ref->s, (size_t)c->n_state, 4, GDN_F32);
            }
            hres_free(&r);
        }
    }
}

/* Dk = 128 takes the fast kernels' unrolled path, Dk = 40 their general one; Dv = 24 leaves a partial block. */
static const int64_t shape_dk[] = {128, 40};

/* ---- decay 0 and 1, beta 0 and 1 ---- */

/* g = 0, beta = 1: the state forgets everything, S = k v^T of the last token (d = v - 0 kv = v exactly). */
TEST(hostile_decay0_beta1_state_is_k_v) {
    for (size_t si = 0; si < 2; ++si)
        for (int layout = 0; layout < 2; ++layout) {
            hcase c;
            hc_init(&c, 2, 3, 1, 2, shape_dk[si], 24, GDN_F32, 11 + si);
            c.a.state_layout = (gdn_state_layout)layout;
            for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = 0.0f, c.beta[e] = 1.0f;
            hres ref;
            hc_check_kernels(&c, "decay 0 beta 1", &ref);
            int bad = 0;
            for (int64_t b = 0; b < 2; ++b)
                for (int64_t h = 0; h < 2; ++h)
                    for (int64_t i = 0; i < c.a.Dk; ++i)
                        for (int64_t j = 0; j < 24; ++j) {
                            const float kv = ((float *)c.k)[qk_at(&c, b, 2, 0, i)] * ((float *)c.v)[v_at(&c, b, 2, h, j)];
                            bad += ref.s[s_at(&c, b, h, i, j)] != kv;
                        }
            CHECK(bad == 0, "%d state elements differ from k_i v_j", bad);
            hres_free(&ref);
            hc_free(&c);
        }
}

/* g = 0 does not launder a non-finite state: 0 * inf = NaN, so a column holding inf becomes NaN; the other
 * columns are k v^T. */
TEST(hostile_decay0_keeps_nonfinite_column) {
    hcase c;
    hc_init(&c, 1, 1, 1, 1, 64, 24, GDN_F32, 12);
    for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = 0.0f, c.beta[e] = 1.0f;
    c.state[s_at(&c, 0, 0, 5, 7)] = INFINITY;
    hres ref;
    hc_check_kernels(&c, "decay 0 with inf state", &ref);
    int bad = 0;
    for (int64_t i = 0; i < 64; ++i)
        for (int64_t j = 0; j < 24; ++j) {
            const float s = ref.s[s_at(&c, 0, 0, i, j)];
            bad += j == 7 ? !isnan(s) : s != ((float *)c.k)[i] * ((float *)c.v)[j];
        }
    CHECK(bad == 0, "%d state elements off", bad);
    CHECK(isnan(((float *)ref.y)[7]) && !isnan(((float *)ref.y)[6]));
    hres_free(&ref);
    hc_free(&c);
}

/* g = 1, beta = 0: the state is left as it was (d = 0, S = S + k 0): every nonzero element bitwise. Decay
 * given as log-decay 0 (exp(0) = 1) is the same call bit for bit. */
TEST(hostile_decay1_beta0_keeps_state) {
    for (size_t si = 0; si < 2; ++si) {
        hcase c;
        hc_init(&c, 2, 4, 2, 4, shape_dk[si], 24, GDN_BF16, 13 + si);
        for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = 1.0f, c.beta[e] = 0.0f;
        for (int64_t e = 0; e < c.n_state; ++e)
            if (c.state[e] == 0.0f) c.state[e] = 0.5f;
        hres ref, logd;
        hc_check_kernels(&c, "decay 1 beta 0", &ref);
        CHECK(memcmp(ref.s, c.state, s_bytes(&c)) == 0, "state changed");
        for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = 0.0f;
        c.a.gate_kind = GDN_GATE_LOG_DECAY;
        hc_check_kernels(&c, "log-decay 0 beta 0", &logd);
        CHECK(memcmp(ref.s, logd.s, s_bytes(&c)) == 0 && memcmp(ref.y, logd.y, y_bytes(&c)) == 0);
        hres_free(&ref), hres_free(&logd);
        hc_free(&c);
    }
}

/* Log-decay -inf is decay 0, log-decay +inf is decay +inf (exp(+inf) = inf), bit for bit. */
TEST(hostile_log_decay_infinities) {
    const float logd[] = {-INFINITY, INFINITY, -200.0f, 89.0f};
    const float decay[] = {0.0f, INFINITY, 0.0f, INFINITY}; /* exp(-200) underflows to +0, exp(89) overflows */
    for (int v = 0; v < 4; ++v) {
        hcase c;
        hc_init(&c, 1, 3, 1, 2, 128, 16, GDN_F32, 14);
        hres r1, r2;
        for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = decay[v];
        hc_check_kernels(&c, "decay", &r1);
        for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = logd[v];
        c.a.gate_kind = GDN_GATE_LOG_DECAY;
        hc_check_kernels(&c, "log-decay", &r2);
        CHECK(memcmp(r1.s, r2.s, s_bytes(&c)) == 0 && memcmp(r1.y, r2.y, y_bytes(&c)) == 0, "log-decay %g", logd[v]);
        hres_free(&r1), hres_free(&r2);
        hc_free(&c);
    }
}

/* g = 1, beta = 1, a one-hot key e_0: the delta rule writes v at that key, S[0][j] = S + (v - S) = v up to the
 * two roundings. */
TEST(hostile_delta_rule_writes_v) {
    hcase c;
    hc_init(&c, 1, 1, 1, 1, 32, 16, GDN_F32, 15);
    for (int64_t i = 0; i < 32; ++i) ((float *)c.k)[i] = i == 0 ? 1.0f : 0.0f;
    c.gate[0] = 1.0f, c.beta[0] = 1.0f;
    hres ref;
    hc_check_kernels(&c, "delta rule", &ref);
    int bad = 0;
    for (int64_t j = 0; j < 16; ++j) {
        const float want = ((float *)c.v)[j], got = ref.s[s_at(&c, 0, 0, 0, j)];
        bad += fabsf(got - want) > 1e-6f * (1.0f + fabsf(want));
        for (int64_t i = 1; i < 32; ++i) bad += ref.s[s_at(&c, 0, 0, i, j)] != c.state[s_at(&c, 0, 0, i, j)];
    }
    CHECK(bad == 0, "%d elements off", bad);
    hres_free(&ref);
    hc_free(&c);
}

/* ---- the raw gate at its limits ---- */

/* With S = 1 everywhere, beta = 0 and one token, state_out = fma(g, 1, k * 0) shows g per head. */
TEST(hostile_raw_gate_extremes) {
    /* per head: gate (a), A_log, dt_bias, and the g the contract gives */
    const struct { float a, A_log, dt, g; int nan; } h[] = {
        {1e30f, 0.0f, 0.0f, 0.0f, 0},          /* softplus(1e30) = 1e30: g = exp(-1e30) = 0 */
        {1.0f, 100.0f, 0.0f, 0.0f, 0},         /* exp(A_log) overflows to inf: g = exp(-inf) = 0 */
        {1.0f, 88.8f, 0.0f, 0.0f, 0},          /* just past float's exp range: same */
        {1.0f, -100.0f, 0.0f, 1.0f, 0},        /* exp(A_log) subnormal: g = exp(-tiny) = 1 */
        {1.0f, -INFINITY, 0.0f, 1.0f, 0},      /* exp(-inf) = 0: g = exp(-0) = 1 */
        {-1e30f, 0.0f, 0.0f, 1.0f, 0},         /* softplus(-1e30) = log1p(0) = 0: g = 1 */
        {INFINITY, 0.0f, 0.0f, 0.0f, 0},       /* softplus(inf) = inf: g = 0 */
        {3e38f, 0.0f, 3e38f, 0.0f, 0},         /* a + dt_bias overflows to inf: g = 0 */
        {-1e30f, INFINITY, 0.0f, 0.0f, 1},     /* inf * 0 = NaN */
        {INFINITY, -INFINITY, 0.0f, 0.0f, 1},  /* 0 * inf = NaN */
        {NAN, 0.0f, 0.0f, 0.0f, 1},            /* NaN in, NaN out */
        {1.0f, NAN, 0.0f, 0.0f, 1},
    };
    enum { NH = sizeof h / sizeof h[0] };
    hcase c;
    hc_init(&c, 1, 1, 1, NH, 32, 16, GDN_F32, 16);
    c.a.gate_kind = GDN_GATE_RAW;
    for (int64_t e = 0; e < c.n_state; ++e) c.state[e] = 1.0f;
    for (int x = 0; x < NH; ++x) {
        c.gate[x] = h[x].a, c.A_log[x] = h[x].A_log, c.dt_bias[x] = h[x].dt, c.beta[x] = 0.0f;
        const float g = gdn_raw_gate(h[x].a, h[x].A_log, h[x].dt);
        CHECK(h[x].nan ? isnan(g) : g == h[x].g, "head %d: gdn_raw_gate = %g", x, g);
    }
    hres ref;
    hc_check_kernels(&c, "raw gate", &ref);
    for (int x = 0; x < NH; ++x) {
        int bad = 0;
        for (int64_t i = 0; i < 32; ++i)
            for (int64_t j = 0; j < 16; ++j) {
                const float s = ref.s[s_at(&c, 0, x, i, j)];
                bad += h[x].nan ? !isnan(s) : s != h[x].g;
            }
        CHECK(bad == 0, "head %d: %d state elements are not g = %g", x, bad, h[x].g);
    }
    hres_free(&ref);
    hc_free(&c);
}

/* ---- beta ---- */

/* Logits +-inf (and +-200, past float's sigmoid range) are beta 1 and 0 given directly, bit for bit. */
TEST(hostile_beta_logit_limits) {
    const float logit[] = {INFINITY, -INFINITY, 200.0f, -200.0f, 0.0f};
    const float direct[] = {1.0f, 0.0f, 1.0f, 0.0f, 0.5f};
    for (int v = 0; v < 5; ++v) {
        hcase c;
        hc_init(&c, 2, 3, 1, 2, 40, 24, GDN_F32, 17);
        hres r1, r2;
        for (int64_t e = 0; e < c.n_bt; ++e) c.beta[e] = direct[v];
        hc_check_kernels(&c, "beta direct", &r1);
        for (int64_t e = 0; e < c.n_bt; ++e) c.beta[e] = logit[v];
        c.a.beta_kind = GDN_BETA_LOGIT;
        hc_check_kernels(&c, "beta logit", &r2);
        CHECK(memcmp(r1.s, r2.s, s_bytes(&c)) == 0 && memcmp(r1.y, r2.y, y_bytes(&c)) == 0, "logit %g", logit[v]);
        hres_free(&r1), hres_free(&r2);
        hc_free(&c);
    }
}

/* ---- NaN and inf isolation ---- */

typedef enum { IN_Q, IN_K, IN_V, IN_GATE, IN_VGATE, IN_BETA, IN_LOGIT, IN_STATE, IN_COUNT } input_kind;
static const char *const input_name[] = {"q", "k", "v", "gate", "vector gate", "beta", "beta logit", "state"};

/* Where a non-finite value put into sequence B0, token T0 (key head 0 / value head H0, column J0) may reach:
 * y element (b, t, h, j) or state element (b, h, j), by the recurrence's data flow. */
enum { B0 = 1, T0 = 1, H0 = 1, J0 = 5, I0 = 3 };
static int reaches_y(input_kind in, int64_t group, int64_t b, int64_t t, int64_t h, int64_t j) {
    if (b != B0) return 0;
    switch (in) {
    case IN_Q: return t == T0 && h / group == 0;
    case IN_K: return t >= T0 && h / group == 0;
    case IN_V: return t >= T0 && h == H0 && j == J0;
    case IN_STATE: return h == H0 && j == J0;
    default: return t >= T0 && h == H0;
    }
}
static int reaches_s(input_kind in, int64_t group, int64_t b, int64_t h, int64_t j) {
    if (b != B0) return 0;
    switch (in) {
    case IN_Q: return 0;
    case IN_K: return h / group == 0;
    case IN_V:
    case IN_STATE: return h == H0 && j == J0;
    default: return h == H0;
    }
}

static void inject(hcase *c, input_kind in, float x) {
    const gdn_dtype dt = c->a.dtype;
    switch (in) {
    case IN_Q: put(c->q, dt, qk_at(c, B0, T0, 0, I0), x); break;
    case IN_K: put(c->k, dt, qk_at(c, B0, T0, 0, I0), x); break;
    case IN_V: put(c->v, dt, v_at(c, B0, T0, H0, J0), x); break;
    case IN_GATE: c->gate[bt_at(c, B0, T0, H0)] = x; break;
    case IN_VGATE: c->gate[bt_at(c, B0, T0, H0) * c->a.Dk + I0] = x; break;
    case IN_BETA:
    case IN_LOGIT: c->beta[bt_at(c, B0, T0, H0)] = x; break;
    default: c->state[s_at(c, B0, H0, I0, J0)] = x; break;
    }
}

/* A NaN or inf in one sequence never reaches another sequence (bitwise equal to a run without it), and within
 * its sequence reaches exactly what the data flow says (a NaN makes every element it reaches NaN). Masked
 * tokens' inputs are never read: a NaN there changes nothing. */
TEST(hostile_nonfinite_isolation) {
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const gdn_dtype dts[] = {GDN_F32, GDN_BF16};
    for (int di = 0; di < 2; ++di)
        for (int in = 0; in < IN_COUNT; ++in)
            for (int x = 0; x < 3; ++x)
                for (int masked = 0; masked < 2; ++masked) {
                    if (masked && in == IN_STATE) continue;
                    hcase c;
                    hc_init(&c, 3, 4, 2, 4, di ? 40 : 64, 24, dts[di], 18);
                    const int64_t group = 2;
                    if (in == IN_VGATE) c.a.gate_kind = GDN_GATE_VECTOR;
                    if (in == IN_LOGIT) c.a.beta_kind = GDN_BETA_LOGIT;
                    if (masked) c.mask[B0 * c.a.T + T0] = 0, c.a.mask = c.mask;
                    hres clean, hot;
                    hc_check_kernels(&c, "clean", &clean);
                    inject(&c, (input_kind)in, bad[x]);
                    char what[64];
                    snprintf(what, sizeof what, "%s = %g in %s%s", input_name[in], bad[x],
                             di ? "bf16" : "f32", masked ? ", masked" : "");
                    hc_check_kernels(&c, what, &hot);
                    int leaked = 0, missed = 0;
                    for (int64_t b = 0; b < 3; ++b)
                        for (int64_t t = 0; t < 4; ++t)
                            for (int64_t h = 0; h < 4; ++h)
                                for (int64_t j = 0; j < 24; ++j) {
                                    const int64_t e = v_at(&c, b, t, h, j);
                                    const size_t es = dsize(c.a.dtype);
                                    const int same = memcmp(hot.y + e * es, clean.y + e * es, es) == 0;
                                    if (!masked && reaches_y((input_kind)in, group, b, t, h, j)) {
                                        missed += x == 0 && !isnan(y_val(&c, &hot, e));
                                    } else {
                                        leaked += !same;
                                    }
                                }
                    for (int64_t b = 0; b < 3; ++b)
                        for (int64_t h = 0; h < 4; ++h)
                            for (int64_t i = 0; i < c.a.Dk; ++i)
                                for (int64_t j = 0; j < 24; ++j) {
                                    const int64_t e = s_at(&c, b, h, i, j);
                                    if (!masked && reaches_s((input_kind)in, group, b, h, j)) {
                                        missed += x == 0 && !isnan(hot.s[e]);
                                    } else {
                                        leaked += memcmp(&hot.s[e], &clean.s[e], 4) != 0;
                                    }
                                }
                    CHECK(leaked == 0, "%s: %d elements outside its reach changed", what, leaked);
                    CHECK(missed == 0, "%s: %d elements in its reach are not NaN", what, missed);
                    hres_free(&clean), hres_free(&hot);
                    hc_free(&c);
                }
}

/* ---- subnormals ---- */

/* Subnormal inputs and state are used as they are (never flushed to zero), and a call leaves the caller's
 * floating-point environment as it found it. */
TEST(hostile_subnormals) {
    for (size_t si = 0; si < 2; ++si) {
        hcase c;
        hc_init(&c, 2, 3, 1, 2, shape_dk[si], 24, GDN_F32, 19);
        harness_rng r = {190};
        for (int64_t e = 0; e < c.n_qk; ++e)
            if (rng_uniform(&r) < 0.5f) ((float *)c.k)[e] *= 1e-38f, ((float *)c.q)[e] *= 1e-39f;
        for (int64_t e = 0; e < c.n_v; ++e)
            if (rng_uniform(&r) < 0.5f) ((float *)c.v)[e] = 1e-40f * rng_normal(&r);
        for (int64_t e = 0; e < c.n_state; ++e)
            if (rng_uniform(&r) < 0.5f) c.state[e] = 1e-41f * rng_normal(&r);
        c.gate[0] = 1e-40f, c.beta[1] = 1e-42f;
        const unsigned modes = fp_modes();
        hres ref;
        hc_check_kernels(&c, "subnormals", &ref);
        CHECK(fp_modes() == modes, "the floating-point modes changed");
        hres_free(&ref);
        /* decay 1, beta 0: a subnormal state comes back bit for bit */
        for (int64_t e = 0; e < c.n_bt; ++e) c.gate[e] = 1.0f, c.beta[e] = 0.0f;
        for (int64_t e = 0; e < c.n_state; ++e) c.state[e] = 1e-42f * (float)(1 + e % 7);
        hc_check_kernels(&c, "subnormal state kept", &ref);
        CHECK(memcmp(ref.s, c.state, s_bytes(&c)) == 0, "a subnormal state was not kept");
        hres_free(&ref);
        hc_free(&c);
    }
    /* decay 0, beta 1, k = q = e_0: S[0][j] = v_j and y_j = v_j, subnormal f16 values round-trip exactly */
    hcase c;
    hc_init(&c, 1, 1, 1, 1, 32, 16, GDN_F16, 20);
    for (int64_t i = 0; i < 32; ++i) put(c.k, GDN_F16, i, i == 0), put(c.q, GDN_F16, i, i == 0);
    for (int64_t j = 0; j < 16; ++j) ((uint16_t *)c.v)[j] = (uint16_t)(j % 2 ? 0x0001 + j : 0x8000 + 0x03ff - j);
    c.gate[0] = 0.0f, c.beta[0] = 1.0f;
    hres ref;
    hc_check_kernels(&c, "f16 subnormal round trip", &ref);
    CHECK(memcmp(ref.y, c.v, 32) == 0, "f16 subnormals did not round-trip");
    hres_free(&ref);
    hc_free(&c);
}

/* ---- zero keys ---- */

/* k = 0: kv = 0, nothing is written, the state only decays: S = g S (up to the sign of a zero) per token. */
TEST(hostile_zero_keys) {
    for (size_t si = 0; si < 2; ++si) {
        hcase c;
        hc_init(&c, 2, 4, 1, 2, shape_dk[si], 24, GDN_F32, 21);
        memset(c.k, 0, sizeof(float) * (size_t)c.n_qk);
        hres ref;
        hc_check_kernels(&c, "zero keys", &ref);
        int bad = 0;
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t h = 0; h < 2; ++h)
                for (int64_t i = 0; i < c.a.Dk; ++i)
                    for (int64_t j = 0; j < 24; ++j) {
                        float s = c.state[s_at(&c, b, h, i, j)];
                        for (int64_t t = 0; t < 4; ++t) s = c.gate[bt_at(&c, b, t, h)] * s;
                        bad += ref.s[s_at(&c, b, h, i, j)] != s;
                    }
        CHECK(bad == 0, "%d state elements are not the decayed state", bad);
        hres_free(&ref);
        hc_free(&c);
    }
}

/* ---- scale ---- */

/* The scale multiplies the readout only: the state is the same bits whatever the scale, and (f32) each y is
 * exactly y(scale 1) * scale: inf gives +-inf (NaN where the readout is 0), NaN gives NaN; 0 and -0 read as
 * 1 / sqrt(Dk) (gdn_rsqrtf), as gdn_layer's scale does. */
TEST(hostile_scale_extremes) {
    const float scales[] = {0.0f, -0.0f, 1e30f, 1e-45f, FLT_MIN / 2, INFINITY, -INFINITY, NAN, FLT_MAX, -1e-45f};
    for (size_t si = 0; si < 2; ++si) {
        hcase c;
        hc_init(&c, 2, 3, 1, 2, shape_dk[si], 24, GDN_F32, 22);
        ((float *)c.q)[qk_at(&c, 0, 0, 0, 0)] = 0.0f; /* make some readouts exactly 0 */
        for (int64_t i = 0; i < c.a.Dk; ++i) ((float *)c.q)[qk_at(&c, 1, 2, 0, i)] = 0.0f;
        hres one;
        hc_check_kernels(&c, "scale 1", &one);
        for (size_t x = 0; x < sizeof scales / sizeof scales[0]; ++x) {
            c.a.scale = scales[x];
            hres r;
            hc_check_kernels(&c, "extreme scale", &r);
            CHECK(memcmp(r.s, one.s, s_bytes(&c)) == 0, "scale %g changed the state", scales[x]);
            int bad = 0;
            for (int64_t e = 0; e < c.n_v; ++e) {
                const float scale = scales[x] == 0.0f ? gdn_rsqrtf((float)c.a.Dk) : scales[x];
                const float want = ((float *)one.y)[e] * scale;
                bad += memcmp(&((float *)r.y)[e], &want, 4) != 0;
            }
            CHECK(bad == 0, "scale %g: %d y elements are not y(1) * scale", scales[x], bad);
            hres_free(&r);
        }
        hres_free(&one);
        hc_free(&c);
    }
}

/* ---- f16 and bf16 at their limits ---- */

/* Inputs at the f16 maximum, +-inf, NaN and subnormal run bitwise equal to ref; y rounds to nearest even with
 * overflow to inf: 65519 -> 65504 (0x7bff), 65520 -> inf; in bf16 FLT_MAX -> inf, a NaN stays a quiet NaN. */
TEST(hostile_half_limits) {
    const uint16_t specials[] = {0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8001, 0x3c00};
    for (size_t si = 0; si < 2; ++si) {
        hcase c;
        hc_init(&c, 2, 3, 1, 2, shape_dk[si], 24, GDN_F16, 23);
        harness_rng r = {230};
        for (int64_t e = 0; e < c.n_qk; ++e)
            if (rng_uniform(&r) < 0.05f) ((uint16_t *)c.k)[e] = specials[rng_u64(&r) % 8];
        for (int64_t e = 0; e < c.n_qk; ++e)
            if (rng_uniform(&r) < 0.05f) ((uint16_t *)c.q)[e] = specials[rng_u64(&r) % 8];
        for (int64_t e = 0; e < c.n_v; ++e)
            if (rng_uniform(&r) < 0.05f) ((uint16_t *)c.v)[e] = specials[rng_u64(&r) % 8];
        hres ref;
        hc_check_kernels(&c, "f16 specials", &ref);
        hres_free(&ref);
        /* all of q, k, v at 65504: k d and the readout overflow f16 but not f32; y is inf */
        for (int64_t e = 0; e < c.n_qk; ++e) ((uint16_t *)c.q)[e] = ((uint16_t *)c.k)[e] = 0x7bff;
        for (int64_t e = 0; e < c.n_v; ++e) ((uint16_t *)c.v)[e] = 0x7bff;
        hc_check_kernels(&c, "f16 max", &ref);
        hres_free(&ref);
        hc_free(&c);
    }
    /* y = scale exactly (decay 0, beta 1, k = q = e_0, v = 1): the rounding of y at the top of each dtype */
    const struct { gdn_dtype dt; float scale; uint16_t bits; } cases[] = {
        {GDN_F16, 65519.0f, 0x7bff}, {GDN_F16, 65520.0f, 0x7c00}, {GDN_F16, -65520.0f, 0xfc00},
        {GDN_F16, 65504.0f, 0x7bff}, {GDN_F16, NAN, 0x7e00},     {GDN_F16, 2.9802322e-08f, 0x0000},
        {GDN_BF16, FLT_MAX, 0x7f80}, {GDN_BF16, 3.3895314e38f, 0x7f7f}, {GDN_BF16, NAN, 0x7fc0},
    };
    for (size_t x = 0; x < sizeof cases / sizeof cases[0]; ++x) {
        hcase c;
        hc_init(&c, 1, 1, 1, 1, 32, 8, cases[x].dt, 24);
        for (int64_t i = 0; i < 32; ++i) put(c.k, c.a.dtype, i, i == 0), put(c.q, c.a.dtype, i, i == 0);
        for (int64_t j = 0; j < 8; ++j) put(c.v, c.a.dtype, j, 1.0f);
        c.gate[0] = 0.0f, c.beta[0] = 1.0f, c.a.scale = cases[x].scale;
        hres ref;
        hc_check_kernels(&c, "half rounding", &ref);
        int bad = 0;
        for (int64_t j = 0; j < 8; ++j) bad += ((uint16_t *)ref.y)[j] != cases[x].bits;
        CHECK(bad == 0, "scale %g: y is 0x%x, expected 0x%x", cases[x].scale, ((uint16_t *)ref.y)[0], cases[x].bits);
        hres_free(&ref);
        hc_free(&c);
    }
}

/* ---- a hostile argument the fuzzer found ---- */

/* state_in == state_out (in place) aimed at another input: the state would overwrite that input while it is
 * read, so the call is rejected (before the fix it was accepted as "in place"). Nothing is written. */
TEST(hostile_in_place_state_over_an_input) {
    hcase c;
    hc_init(&c, 1, 2, 1, 1, 32, 8, GDN_F32, 25);
    float *big = calloc((size_t)(c.n_state + c.n_qk), sizeof(float));
    memcpy(big, c.q, sizeof(float) * (size_t)c.n_qk);
    uint8_t *y = malloc(y_bytes(&c));
    memset(y, 0x77, y_bytes(&c));
    float *before = malloc(sizeof(float) * (size_t)(c.n_state + c.n_qk));
    memcpy(before, big, sizeof(float) * (size_t)(c.n_state + c.n_qk));
    gdn_delta_args a = c.a;
    a.q = big, a.state_in = big, a.state_out = big, a.y = y;
    CHECK(gdn_delta(&a) == GDN_ERR_OVERLAP);
    a.q = c.q, a.gate = big, a.state_in = big, a.state_out = big;
    CHECK(gdn_delta(&a) == GDN_ERR_OVERLAP);
    CHECK(memcmp(before, big, sizeof(float) * (size_t)(c.n_state + c.n_qk)) == 0);
    int touched = 0;
    for (size_t e = 0; e < y_bytes(&c); ++e) touched += y[e] != 0x77;
    CHECK(touched == 0);
    free(big), free(y), free(before);
    hc_free(&c);
}
