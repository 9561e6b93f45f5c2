/* Test problems for gdn_delta: deterministic inputs, poisoned runs, slices. */
#include "gdn_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "harness.h"

int test_quick(void) {
    const char *s = getenv("GDN_TEST_QUICK");
    return s && *s && strcmp(s, "0") != 0;
}

int kernel_index(const char *name) {
    for (int i = 0; i < gdn_kernel_count(); ++i)
        if (strcmp(gdn_kernel_name(i), name) == 0) return i;
    return -1;
}

void poison(void *buf, size_t bytes) {
    if (buf) memset(buf, 0xff, bytes);
}

size_t poisoned_count(const void *buf, size_t n, size_t size) {
    const uint8_t *p = buf;
    size_t count = 0;
    for (size_t e = 0; e < n; ++e) {
        size_t ones = 0;
        for (size_t b = 0; b < size; ++b) ones += p[e * size + b] == 0xff;
        count += ones == size;
    }
    return count;
}

static uint64_t fnv(uint64_t h, const void *buf, size_t bytes) {
    const uint8_t *p = buf;
    if (!p) return h * 31u + 7u;
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t case_input_hash(const gdn_case *c) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, c->q, c->n_qk * c->dsize);
    h = fnv(h, c->k, c->n_qk * c->dsize);
    h = fnv(h, c->v, c->n_v * c->dsize);
    h = fnv(h, c->gate, c->n_gate * 4);
    h = fnv(h, c->beta, c->n_bt * 4);
    h = fnv(h, c->mask, (size_t)(c->cfg.B * c->cfg.T));
    h = fnv(h, c->A_log, (size_t)c->cfg.Hv * 4 * (c->A_log != NULL));
    h = fnv(h, c->dt_bias, (size_t)c->cfg.Hv * 4 * (c->dt_bias != NULL));
    return fnv(h, c->state_in, c->n_state * 4);
}

const char *case_describe(const case_cfg *g) {
    static char text[256];
    static const char *dtypes[] = {"f32", "f16", "bf16"}, *gates[] = {"decay", "log_decay", "vector", "raw"};
    snprintf(text, sizeof text, "B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld %s gate=%s beta=%s %s mask=%d state_in=%d %s%s seed=%llu",
             (long long)g->B, (long long)g->T, (long long)g->Hk, (long long)g->Hv, (long long)g->Dk, (long long)g->Dv,
             dtypes[g->dtype], gates[g->gate_kind], g->beta_kind == GDN_BETA_LOGIT ? "logit" : "direct",
             g->layout == GDN_STATE_KV ? "KV" : "VK", g->mask, g->state_in,
             g->inputs == CASE_ADVERSARIAL ? "adversarial" : "realistic", g->head_map == GDN_HEADS_TILED ? " tiled" : "",
             (unsigned long long)g->seed);
    return text;
}

static void store(void *base, gdn_dtype dtype, size_t idx, float x) {
    switch (dtype) {
    case GDN_F16: ((uint16_t *)base)[idx] = gdn__f32_to_f16(x); break;
    case GDN_BF16: ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x); break;
    default: ((float *)base)[idx] = x; break;
    }
}

static int alloc_buffers(gdn_case *c) {
    const case_cfg *g = &c->cfg;
    const size_t tokens = (size_t)(g->B * g->T);
    c->dsize = g->dtype == GDN_F32 ? 4 : 2;
    c->n_qk = tokens * (size_t)(g->Hk * g->Dk);
    c->n_v = tokens * (size_t)(g->Hv * g->Dv);
    c->n_bt = tokens * (size_t)g->Hv;
    c->n_gate = c->n_bt * (size_t)(g->gate_kind == GDN_GATE_VECTOR ? g->Dk : 1);
    c->n_state = (size_t)(g->B * g->Hv * g->Dk * g->Dv);
    /* one allocation per buffer, exactly sized, so that the sanitizers see any read past an end */
    c->q = malloc(c->n_qk * c->dsize);
    c->k = malloc(c->n_qk * c->dsize);
    c->v = malloc(c->n_v * c->dsize);
    c->gate = malloc(c->n_gate * 4);
    c->beta = malloc(c->n_bt * 4);
    c->mask = g->mask ? malloc(tokens) : NULL;
    c->state_in = g->state_in ? malloc(c->n_state * 4) : NULL;
    const int raw = g->gate_kind == GDN_GATE_RAW;
    c->A_log = raw ? malloc((size_t)g->Hv * 4) : NULL;
    c->dt_bias = raw ? malloc((size_t)g->Hv * 4) : NULL;
    return c->q && c->k && c->v && c->gate && c->beta && (c->mask || !g->mask) && (c->state_in || !g->state_in) &&
           (!raw || (c->A_log && c->dt_bias));
}

void case_free(gdn_case *c) {
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->gate);
    free(c->beta);
    free(c->mask);
    free(c->state_in);
    free(c->A_log);
    free(c->dt_bias);
    memset(c, 0, sizeof *c);
}

/* One of n values, uniformly. */
static float pick(harness_rng *r, const float *values, int n) { return values[rng_u64(r) % (uint64_t)n]; }

/* A q or k row of length n: a random direction; adversarial rows get zeros, -0 and a length in [0, 1.4]. */
static void key_row(harness_rng *r, float *row, int64_t n, int adversarial, int is_key) {
    double norm = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        row[i] = rng_normal(r);
        if (adversarial && rng_uniform(r) < 0.15f) row[i] = rng_uniform(r) < 0.5f ? 0.0f : -0.0f;
        norm += (double)row[i] * row[i];
    }
    double length = 1.0;
    if (adversarial) length = is_key ? (rng_uniform(r) < 0.05f ? 0.0 : 1.4 * rng_uniform(r)) : ldexp(1.0, (int)(rng_u64(r) % 21) - 12);
    for (int64_t i = 0; i < n; ++i) row[i] = norm > 0.0 ? (float)(row[i] * (length / sqrt(norm))) : 0.0f;
}

/* The realistic decay: the GDN_GATE_RAW formula with Qwen-like A in [0.5, 2] and softplus(a + dt) ~ 0.02. */
static float realistic_raw(harness_rng *r) { return 0.7f * rng_normal(r); }

static void fill(gdn_case *c, harness_rng *r) {
    const case_cfg *g = &c->cfg;
    const int adv = g->inputs == CASE_ADVERSARIAL;
    const int64_t tokens = g->B * g->T;
    float *row = malloc(sizeof(float) * (size_t)(g->Dk > g->Dv ? g->Dk : g->Dv));
    if (!row) return;
    /* q, k: [B, T, Hk, Dk], unit rows (adversarial: scaled rows with zeros) */
    for (int64_t n = 0; n < tokens * g->Hk; ++n) {
        key_row(r, row, g->Dk, adv, 0);
        for (int64_t i = 0; i < g->Dk; ++i) store(c->q, g->dtype, (size_t)(n * g->Dk + i), row[i]);
        key_row(r, row, g->Dk, adv, 1);
        for (int64_t i = 0; i < g->Dk; ++i) store(c->k, g->dtype, (size_t)(n * g->Dk + i), row[i]);
    }
    /* v: [B, T, Hv, Dv], normal (adversarial: magnitudes 2^-10 .. 2^10) */
    for (size_t n = 0; n < c->n_v; ++n)
        store(c->v, g->dtype, n, adv ? ldexpf(rng_normal(r), (int)(rng_u64(r) % 21) - 10) : rng_normal(r));
    free(row);

    /* per-head decay parameters (A_log, dt_bias): used by every scalar gate kind */
    float head_A_log[64], head_dt[64];
    for (int64_t h = 0; h < g->Hv && h < 64; ++h) {
        head_A_log[h] = adv ? -4.0f + 7.0f * rng_uniform(r) : logf(0.5f + 1.5f * rng_uniform(r));
        head_dt[h] = adv ? -5.0f + 10.0f * rng_uniform(r) : -4.0f + 0.5f * rng_normal(r);
    }
    if (c->A_log)
        for (int64_t h = 0; h < g->Hv; ++h) {
            c->A_log[h] = head_A_log[h % 64];
            c->dt_bias[h] = head_dt[h % 64];
        }
    static const float adv_decay[] = {0.0f, 1.0f, 1e-30f, 0x1p-140f, 0.5f, 0.999f, 0.9f};
    static const float adv_log_decay[] = {0.0f, -100.0f, -1e-7f, -1000.0f, -0.05f, -3.0f};
    static const float adv_raw[] = {25.0f, -60.0f, 0.0f, 19.9f, 20.0f, -3.0f};
    static const float adv_beta[] = {0.0f, 1.0f, 0.5f, 0.25f};
    static const float adv_logit[] = {20.0f, -20.0f, 0.0f, 100.0f, -100.0f, 3.0f};
    for (size_t n = 0; n < c->n_bt; ++n) {
        const int64_t h = (int64_t)(n % (size_t)g->Hv) % 64;
        /* gate: [B, T, Hv] (vector: [B, T, Hv, Dk]) */
        switch (g->gate_kind) {
        case GDN_GATE_VECTOR:
            for (int64_t i = 0; i < g->Dk; ++i)
                c->gate[n * (size_t)g->Dk + (size_t)i] = adv && rng_uniform(r) < 0.3f ? pick(r, adv_decay, 7) : 0.9f + 0.1f * rng_uniform(r);
            break;
        case GDN_GATE_RAW: c->gate[n] = adv && rng_uniform(r) < 0.5f ? pick(r, adv_raw, 6) : adv ? 10.0f * rng_normal(r) : realistic_raw(r); break;
        case GDN_GATE_LOG_DECAY:
            c->gate[n] = adv && rng_uniform(r) < 0.5f ? pick(r, adv_log_decay, 6)
                                                      : -(gdn_expf(head_A_log[h]) * gdn_softplusf(realistic_raw(r) + head_dt[h]));
            break;
        default:
            c->gate[n] = adv && rng_uniform(r) < 0.5f ? pick(r, adv_decay, 7) : gdn_raw_gate(realistic_raw(r), head_A_log[h], head_dt[h]);
            break;
        }
        /* beta: [B, T, Hv] */
        const float x = rng_normal(r);
        if (g->beta_kind == GDN_BETA_LOGIT) c->beta[n] = adv && rng_uniform(r) < 0.5f ? pick(r, adv_logit, 6) : (adv ? 8.0f : 1.0f) * x;
        else c->beta[n] = adv && rng_uniform(r) < 0.5f ? pick(r, adv_beta, 4) : gdn_sigmoidf(x);
    }
    /* mask: [B, T], the first token of each sequence on, the others on with probability 0.75 */
    if (c->mask)
        for (int64_t n = 0; n < tokens; ++n) c->mask[n] = n % g->T == 0 || rng_uniform(r) < 0.75f ? (uint8_t)(1 + rng_u64(r) % 255) : 0;
    /* state: normal, realistic magnitude ~0.3 (adversarial: 2^-8 .. 2^8) */
    if (c->state_in)
        for (size_t n = 0; n < c->n_state; ++n)
            c->state_in[n] = adv ? ldexpf(rng_normal(r), (int)(rng_u64(r) % 17) - 8) : 0.3f * rng_normal(r);
    c->scale = adv ? 0.75f : (float)(1.0 / sqrt((double)g->Dk));
}

int case_init(gdn_case *c, const case_cfg *cfg) {
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    if (!alloc_buffers(c)) {
        case_free(c);
        return 0;
    }
    harness_rng r = {cfg->seed * 0x9e3779b97f4a7c15ull + 12345u};
    fill(c, &r);
    return 1;
}

/* Copies rows of `row` elements of [B, T, ...] tensors: sequences [b0, b0+nb), tokens [t0, t0+nt). */
static void copy_rows(void *dst, const void *src, size_t row_bytes, int64_t T, int64_t b0, int64_t nb, int64_t t0, int64_t nt) {
    for (int64_t b = 0; b < nb; ++b)
        memcpy((char *)dst + (size_t)(b * nt) * row_bytes, (const char *)src + (size_t)((b0 + b) * T + t0) * row_bytes,
               (size_t)nt * row_bytes);
}

int case_slice(gdn_case *dst, const gdn_case *src, int64_t b0, int64_t nb, int64_t t0, int64_t nt, const float *state_in) {
    memset(dst, 0, sizeof *dst);
    dst->cfg = src->cfg;
    dst->cfg.B = nb;
    dst->cfg.T = nt;
    dst->cfg.mask = src->mask != NULL;
    dst->cfg.state_in = state_in != NULL;
    if (!alloc_buffers(dst)) {
        case_free(dst);
        return 0;
    }
    const case_cfg *g = &src->cfg;
    const int64_t T = g->T;
    const size_t gate_row = (size_t)(g->Hv * (g->gate_kind == GDN_GATE_VECTOR ? g->Dk : 1)) * 4;
    copy_rows(dst->q, src->q, (size_t)(g->Hk * g->Dk) * src->dsize, T, b0, nb, t0, nt);
    copy_rows(dst->k, src->k, (size_t)(g->Hk * g->Dk) * src->dsize, T, b0, nb, t0, nt);
    copy_rows(dst->v, src->v, (size_t)(g->Hv * g->Dv) * src->dsize, T, b0, nb, t0, nt);
    copy_rows(dst->gate, src->gate, gate_row, T, b0, nb, t0, nt);
    copy_rows(dst->beta, src->beta, (size_t)g->Hv * 4, T, b0, nb, t0, nt);
    if (src->mask) copy_rows(dst->mask, src->mask, 1, T, b0, nb, t0, nt);
    if (src->A_log) {
        memcpy(dst->A_log, src->A_log, (size_t)g->Hv * 4);
        memcpy(dst->dt_bias, src->dt_bias, (size_t)g->Hv * 4);
    }
    if (state_in) memcpy(dst->state_in, state_in, dst->n_state * 4);
    dst->scale = src->scale;
    return 1;
}

gdn_delta_args case_args(const gdn_case *c) {
    const case_cfg *g = &c->cfg;
    return (gdn_delta_args){.B = g->B, .T = g->T, .Hk = g->Hk, .Hv = g->Hv, .Dk = g->Dk, .Dv = g->Dv, .dtype = g->dtype,
                            .q = c->q, .k = c->k, .v = c->v, .gate_kind = g->gate_kind, .gate = c->gate,
                            .A_log = c->A_log, .dt_bias = c->dt_bias, .beta_kind = g->beta_kind, .beta = c->beta,
                            .mask = c->mask, .state_layout = g->layout, .state_in = c->state_in, .scale = c->scale,
                            .head_map = g->head_map};
}

gdn_status case_run(const gdn_case *c, const char *kernel, int threads, case_state_mode mode, void *y, float *state) {
    gdn_delta_args a = case_args(c);
    a.kernel = kernel;
    a.threads = threads;
    a.y = y;
    poison(y, c->n_v * c->dsize);
    switch (mode) {
    case CASE_STATE_IN_PLACE:
        if (c->state_in) memcpy(state, c->state_in, c->n_state * 4);
        else memset(state, 0, c->n_state * 4);
        a.state_in = a.state_out = state;
        break;
    case CASE_STATE_OUT_NULL: a.state_out = NULL; break;
    default:
        poison(state, c->n_state * 4);
        a.state_out = state;
        break;
    }
    return gdn_delta(&a);
}
