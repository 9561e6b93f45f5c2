/* The head mapping (gdn_head_map) of gdn_delta: a tiled call (value head h reads q/k head h % Hk) equals, bit for
 * bit, a grouped call (h / G) on the same inputs with the value heads permuted, grouped head P(h) = (h % Hk) G + h / Hk
 * holding tiled head h's v, gate, beta, A_log, dt_bias and state; on every CPU kernel, forced by name and routed,
 * in the dense and the batch form. Also: the mappings differ where Hk < Hv (so the test can fail), agree at Hk = Hv,
 * and scale 0 is 1 / sqrt(Dk). */
#include <stdlib.h>
#include <string.h>

#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

/* The grouped head holding tiled head h's data. */
static int64_t grouped_of(int64_t h, int64_t Hk, int64_t G) { return h % Hk * G + h / Hk; }

/* dst rows [n][Hv][row] = src rows with head h at grouped_of(h) (or the inverse when `back`). */
static void permute_heads(void *dst, const void *src, int64_t n, int64_t Hk, int64_t Hv, size_t row, int back) {
    const int64_t G = Hv / Hk;
    for (int64_t r = 0; r < n; ++r)
        for (int64_t h = 0; h < Hv; ++h) {
            const int64_t g = grouped_of(h, Hk, G), to = back ? h : g, from = back ? g : h;
            memcpy((char *)dst + (size_t)(r * Hv + to) * row, (const char *)src + (size_t)(r * Hv + from) * row, row);
        }
}

/* A grouped copy of tiled case c: its value-head tensors permuted. */
static int permuted_case(gdn_case *d, const gdn_case *c) {
    case_cfg g = c->cfg;
    g.head_map = GDN_HEADS_GROUPED;
    if (!case_init(d, &g)) return 0;
    const int64_t Hk = g.Hk, Hv = g.Hv, bt = g.B * g.T;
    memcpy(d->q, c->q, c->n_qk * c->dsize);
    memcpy(d->k, c->k, c->n_qk * c->dsize);
    permute_heads(d->v, c->v, bt, Hk, Hv, (size_t)g.Dv * c->dsize, 0);
    permute_heads(d->gate, c->gate, bt, Hk, Hv, (size_t)(g.gate_kind == GDN_GATE_VECTOR ? g.Dk : 1) * 4, 0);
    permute_heads(d->beta, c->beta, bt, Hk, Hv, 4, 0);
    if (c->A_log) permute_heads(d->A_log, c->A_log, 1, Hk, Hv, 4, 0);
    if (c->dt_bias) permute_heads(d->dt_bias, c->dt_bias, 1, Hk, Hv, 4, 0);
    if (c->mask) memcpy(d->mask, c->mask, (size_t)bt);
    if (c->state_in) permute_heads(d->state_in, c->state_in, g.B, Hk, Hv, (size_t)(g.Dk * g.Dv) * 4, 0);
    d->scale = c->scale;
    return 1;
}

static const char *cpu_kernels[32];
static int n_cpu_kernels(void) {
    int n = 0;
    for (int i = 0; i < gdn_kernel_count() && n < 31; ++i)
        if (gdn_kernel_backend(i) == GDN_BACKEND_CPU) cpu_kernels[n++] = gdn_kernel_name(i);
    cpu_kernels[n] = NULL; /* routed */
    return n + 1;
}

/* Shapes: the ratios 2 .. 8, Dk 128 (the decode kernels), odd sizes, the Qwen3.5 ratio 16 / 32 (and 16 / 48). */
static case_cfg config(int i) {
    static const int64_t hk[] = {2, 2, 3, 4, 2, 16, 3, 16}, hv[] = {8, 6, 12, 8, 4, 32, 6, 48};
    static const int64_t dk[] = {128, 48, 128, 32, 128, 32, 64, 16}, dv[] = {64, 24, 32, 16, 128, 8, 100, 8};
    static const int64_t t[] = {2, 9, 1, 70, 1, 3, 33, 2};
    const int s = i % 8;
    return (case_cfg){.B = 1 + i % 3, .T = t[s], .Hk = hk[s], .Hv = hv[s], .Dk = dk[s], .Dv = dv[s],
                      .dtype = (gdn_dtype)(i % 3), .gate_kind = (gdn_gate_kind)(i / 2 % 4),
                      .beta_kind = (gdn_beta_kind)(i / 3 % 2), .mask = i % 5 == 1,
                      .layout = (gdn_state_layout)(i / 4 % 2), .state_in = i % 7 != 2,
                      .inputs = i % 6 == 5 ? CASE_ADVERSARIAL : CASE_REALISTIC, .seed = 4300u + (uint64_t)i,
                      .head_map = GDN_HEADS_TILED};
}

TEST(head_map_tiled_is_grouped_on_permuted_heads) {
    const int nk = n_cpu_kernels(), n = test_quick() ? 8 : 24;
    int compared = 0, differ = 0, realistic = 0;
    for (int i = 0; i < n; ++i) {
        const case_cfg cfg = config(i);
        gdn_case c, d;
        if (!case_init(&c, &cfg) || !permuted_case(&d, &c)) { CHECK(0, "allocation"); return; }
        void *yt = malloc(c.n_v * c.dsize), *yg = malloc(c.n_v * c.dsize), *yb = malloc(c.n_v * c.dsize);
        float *st = malloc(c.n_state * 4), *sg = malloc(c.n_state * 4), *sb = malloc(c.n_state * 4);
        if (!yt || !yg || !yb || !st || !sg || !sb) { CHECK(0, "allocation"); return; }
        for (int kn = 0; kn < nk; ++kn) {
            gdn_delta_args a = case_args(&c);
            a.y = yt, a.state_out = st;
            const int idx = cpu_kernels[kn] ? kernel_index(cpu_kernels[kn]) : -1;
            if (idx >= 0 && !gdn_kernel_eligible(idx, &a)) continue;
            const gdn_status s1 = case_run(&c, cpu_kernels[kn], 1 + kn % 2, CASE_STATE_SEPARATE, yt, st);
            const gdn_status s2 = case_run(&d, cpu_kernels[kn], 1 + kn % 2, CASE_STATE_SEPARATE, yg, sg);
            CHECK(s1 == GDN_OK && s2 == GDN_OK, "%s: %s", cpu_kernels[kn] ? cpu_kernels[kn] : "routed", gdn_last_error());
            permute_heads(yb, yg, cfg.B * cfg.T, cfg.Hk, cfg.Hv, (size_t)cfg.Dv * c.dsize, 1);
            permute_heads(sb, sg, cfg.B, cfg.Hk, cfg.Hv, (size_t)(cfg.Dk * cfg.Dv) * 4, 1);
            CHECK(memcmp(yt, yb, c.n_v * c.dsize) == 0 && memcmp(st, sb, c.n_state * 4) == 0,
                  "%s: tiled differs from grouped on permuted heads: %s", cpu_kernels[kn] ? cpu_kernels[kn] : "routed",
                  case_describe(&cfg));
            ++compared;
        }
        /* the same inputs grouped, unpermuted: another result wherever Hk < Hv */
        CHECK(case_run(&c, "ref", 1, CASE_STATE_SEPARATE, yt, st) == GDN_OK);
        gdn_case plain = c;
        plain.cfg.head_map = GDN_HEADS_GROUPED;
        CHECK(case_run(&plain, "ref", 1, CASE_STATE_SEPARATE, yg, sg) == GDN_OK);
        if (cfg.inputs == CASE_REALISTIC) realistic++, differ += memcmp(st, sg, c.n_state * 4) != 0;
        free(yt), free(yg), free(yb), free(st), free(sg), free(sb);
        case_free(&c), case_free(&d);
    }
    CHECK(differ == realistic && realistic > 0, "the mappings gave one state in %d of %d cases", realistic - differ, realistic);
    CHECK(compared >= n * 3, "only %d comparisons", compared);
    printf("     %d cases, %d kernel runs: tiled == grouped on permuted heads\n", n, compared);
}

/* The batch form (cu_seqlens, state_slot over a pool) under tiled mapping: each sequence's bits are those of its own
 * dense tiled call. */
TEST(head_map_tiled_batch_form_is_per_sequence) {
    const int32_t cu[4] = {0, 3, 4, 11};
    const int32_t slot[3] = {2, -1, 0};
    case_cfg cfg = config(1);
    cfg.B = 1, cfg.T = 11, cfg.state_in = 0, cfg.mask = 0;
    gdn_case c;
    if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); return; }
    const int64_t per = cfg.Hv * cfg.Dk * cfg.Dv, row = cfg.Hv * cfg.Dv;
    float *pool = malloc((size_t)(3 * per) * 4), *init = malloc((size_t)(3 * per) * 4), *s1 = malloc((size_t)per * 4);
    void *y = malloc(c.n_v * c.dsize), *y1 = malloc(c.n_v * c.dsize);
    if (!pool || !init || !s1 || !y || !y1) { CHECK(0, "allocation"); return; }
    harness_rng r = {17};
    for (int64_t i = 0; i < 3 * per; ++i) init[i] = pool[i] = 0.3f * rng_normal(&r);
    const char *names[] = {"ref", "portable", NULL};
    for (int kn = 0; kn < 3; ++kn) {
        memcpy(pool, init, (size_t)(3 * per) * 4);
        gdn_delta_args a = case_args(&c);
        a.B = 3, a.T = 0, a.cu_seqlens = cu, a.state_slot = slot, a.slots = 3;
        a.state_in = a.state_out = pool, a.y = y, a.kernel = names[kn];
        CHECK(gdn_delta(&a) == GDN_OK, "%s", gdn_last_error());
        for (int b = 0; b < 3; ++b) {
            if (slot[b] < 0) continue;
            gdn_case one;
            if (!case_slice(&one, &c, 0, 1, cu[b], cu[b + 1] - cu[b], init + slot[b] * per)) { CHECK(0, "allocation"); continue; }
            CHECK(case_run(&one, "ref", 1, CASE_STATE_SEPARATE, y1, s1) == GDN_OK, "%s", gdn_last_error());
            CHECK(memcmp((char *)y + (size_t)(cu[b] * row) * c.dsize, y1, (size_t)((cu[b + 1] - cu[b]) * row) * c.dsize) == 0 &&
                  memcmp(pool + slot[b] * per, s1, (size_t)per * 4) == 0, "%s: sequence %d differs from its own call",
                  names[kn] ? names[kn] : "routed", b);
            case_free(&one);
        }
    }
    free(pool), free(init), free(s1), free(y), free(y1);
    case_free(&c);
}

/* Hk = Hv: both mappings are the identity, the same bits. */
TEST(head_map_equal_heads_agree) {
    case_cfg cfg = config(0);
    cfg.Hk = cfg.Hv = 3;
    gdn_case c;
    if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); return; }
    void *y0 = malloc(c.n_v * c.dsize), *y1 = malloc(c.n_v * c.dsize);
    float *s0 = malloc(c.n_state * 4), *s1 = malloc(c.n_state * 4);
    if (!y0 || !y1 || !s0 || !s1) { CHECK(0, "allocation"); return; }
    CHECK(case_run(&c, NULL, 0, CASE_STATE_SEPARATE, y0, s0) == GDN_OK);
    c.cfg.head_map = GDN_HEADS_GROUPED;
    CHECK(case_run(&c, NULL, 0, CASE_STATE_SEPARATE, y1, s1) == GDN_OK);
    CHECK(memcmp(y0, y1, c.n_v * c.dsize) == 0 && memcmp(s0, s1, c.n_state * 4) == 0);
    free(y0), free(y1), free(s0), free(s1);
    case_free(&c);
}

/* scale = 0 (or -0) reads as 1 / sqrt(Dk) (gdn_rsqrtf), as gdn_layer's does: the same bits as that scale given, on
 * every CPU kernel; the float64 oracle takes the same default. */
TEST(head_map_scale_zero_is_rsqrt_dk) {
    const int nk = n_cpu_kernels();
    for (int i = 0; i < 4; ++i) {
        case_cfg cfg = config(i);
        cfg.head_map = (gdn_head_map)(i % 2);
        gdn_case c;
        if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); return; }
        void *y0 = malloc(c.n_v * c.dsize), *y1 = malloc(c.n_v * c.dsize);
        float *s0 = malloc(c.n_state * 4), *s1 = malloc(c.n_state * 4);
        double *o0 = malloc(c.n_v * sizeof(double)), *o1 = malloc(c.n_v * sizeof(double));
        if (!y0 || !y1 || !s0 || !s1 || !o0 || !o1) { CHECK(0, "allocation"); return; }
        for (int kn = 0; kn < nk; ++kn) {
            gdn_delta_args e = case_args(&c);
            e.y = y0, e.state_out = s0;
            if (cpu_kernels[kn] && !gdn_kernel_eligible(kernel_index(cpu_kernels[kn]), &e)) continue;
            c.scale = gdn_rsqrtf((float)cfg.Dk);
            CHECK(case_run(&c, cpu_kernels[kn], 1, CASE_STATE_SEPARATE, y0, s0) == GDN_OK);
            c.scale = kn % 2 ? -0.0f : 0.0f;
            const gdn_status st = case_run(&c, cpu_kernels[kn], 1, CASE_STATE_SEPARATE, y1, s1);
            CHECK(st == GDN_OK && memcmp(y0, y1, c.n_v * c.dsize) == 0 && memcmp(s0, s1, c.n_state * 4) == 0,
                  "%s: scale 0 is not 1 / sqrt(Dk)", cpu_kernels[kn] ? cpu_kernels[kn] : "routed");
        }
        gdn_delta_args a = case_args(&c);
        a.y = y0, a.scale = 0.0f;
        CHECK(gdn__oracle_delta(&a, o0, NULL) == GDN_OK);
        a.scale = gdn_rsqrtf((float)cfg.Dk);
        CHECK(gdn__oracle_delta(&a, o1, NULL) == GDN_OK);
        CHECK(memcmp(o0, o1, c.n_v * sizeof(double)) == 0, "the oracle's scale 0 is not 1 / sqrt(Dk)");
        free(y0), free(y1), free(s0), free(s1), free(o0), free(o1);
        case_free(&c);
    }
}
