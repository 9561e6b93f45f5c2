/* Invariances, bitwise, for every CPU kernel: a window split in two (or three) calls with the state carried
 * equals one call; a sequence's result does not depend on the other sequences of the batch. */
#include <stdlib.h>
#include <string.h>

#include "gdn_case.h"
#include "harness.h"

static const char *kernels[] = {"ref", "portable", "packed_avx2"};

/* Configurations spanning the axes that matter here: dtype, gate, beta, mask, layout, heads, odd sizes. */
static case_cfg config(int i, int64_t B, int64_t T) {
    static const int64_t dk[] = {128, 48, 32, 256, 64, 128}, dv[] = {128, 100, 8, 64, 128, 64};
    static const int64_t hk[] = {1, 2, 16, 1, 2, 1}, hv[] = {1, 6, 32, 2, 2, 3};
    const int s = i % 6;
    return (case_cfg){.B = B, .T = T, .Hk = hk[s], .Hv = hv[s], .Dk = dk[s], .Dv = dv[s], .dtype = (gdn_dtype)(i % 3),
                      .gate_kind = (gdn_gate_kind)(i % 4), .beta_kind = (gdn_beta_kind)(i / 2 % 2), .mask = i % 5 < 2,
                      .layout = (gdn_state_layout)(i / 3 % 2), .state_in = i % 7 != 3,
                      .inputs = i % 4 == 3 ? CASE_ADVERSARIAL : CASE_REALISTIC, .seed = 1000u + (uint64_t)i};
}

/* Runs tokens [t0, t0+nt) of every sequence from `state` (NULL: zeros) on `kernel`; y rows go to their place in
 * y_full, the final state replaces `next`. */
static int run_part(const gdn_case *c, const char *kernel, int64_t t0, int64_t nt, const float *state, float *next,
                    void *y_full) {
    gdn_case part;
    if (!case_slice(&part, c, 0, c->cfg.B, t0, nt, state)) return 0;
    void *y = malloc(part.n_v * part.dsize);
    gdn_status st = y ? case_run(&part, kernel, 2, CASE_STATE_SEPARATE, y, next) : GDN_ERR_OUT_OF_MEMORY;
    if (st == GDN_OK) {
        const size_t row = part.n_v / (size_t)(c->cfg.B * nt) * part.dsize; /* bytes of one token's y */
        for (int64_t b = 0; b < c->cfg.B; ++b)
            memcpy((char *)y_full + (size_t)(b * c->cfg.T + t0) * row, (char *)y + (size_t)(b * nt) * row, (size_t)nt * row);
    }
    free(y);
    case_free(&part);
    return st == GDN_OK;
}

TEST(invariance_split_window) {
    const int n = test_quick() ? 6 : 18;
    for (int i = 0; i < n; ++i) {
        const int64_t T = i % 3 == 0 ? 257 : i % 3 == 1 ? 64 : 9;
        const case_cfg cfg = config(i, 1 + i % 2, T);
        gdn_case c;
        if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); continue; }
        harness_rng r = {77u + (uint64_t)i};
        /* cuts: one split at t1, or three parts t1 < t2 */
        const int64_t t1 = 1 + (int64_t)(rng_u64(&r) % (uint64_t)(T - 1));
        const int64_t t2 = i % 2 ? t1 + (int64_t)(rng_u64(&r) % (uint64_t)(T - t1)) : T;
        void *y_one = malloc(c.n_v * c.dsize), *y_parts = malloc(c.n_v * c.dsize);
        float *s_one = malloc(c.n_state * 4), *s_a = malloc(c.n_state * 4), *s_b = malloc(c.n_state * 4);
        for (int kn = 0; kn < 3 && y_one && y_parts && s_one && s_a && s_b; ++kn) {
            CHECK(case_run(&c, kernels[kn], 2, CASE_STATE_SEPARATE, y_one, s_one) == GDN_OK);
            poison(y_parts, c.n_v * c.dsize);
            int ok = run_part(&c, kernels[kn], 0, t1, c.state_in, s_a, y_parts);
            if (t2 > t1) ok = ok && run_part(&c, kernels[kn], t1, t2 - t1, s_a, s_b, y_parts);
            else memcpy(s_b, s_a, c.n_state * 4);
            if (t2 < T) ok = ok && run_part(&c, kernels[kn], t2, T - t2, s_b, s_b, y_parts);
            CHECK(ok, "%s: a part failed", kernels[kn]);
            CHECK(memcmp(y_one, y_parts, c.n_v * c.dsize) == 0, "%s: y of one call != y of calls split at %lld, %lld: %s",
                  kernels[kn], (long long)t1, (long long)t2, case_describe(&cfg));
            CHECK(memcmp(s_one, s_b, c.n_state * 4) == 0, "%s: state of one call != state of split calls at %lld, %lld: %s",
                  kernels[kn], (long long)t1, (long long)t2, case_describe(&cfg));
            CHECK(poisoned_count(y_one, c.n_v, c.dsize) == 0);
        }
        CHECK(y_one && y_parts && s_one && s_a && s_b, "allocation");
        free(y_one);
        free(y_parts);
        free(s_one);
        free(s_a);
        free(s_b);
        case_free(&c);
    }
}

/* Each sequence b of c (B = 3) alone (B = 1, its own slice and initial state, 1 + b threads) on `kernel` gives its
 * rows y and its state s of the batch call. y1, s1: scratch of one sequence. */
static void check_sequences_alone(const gdn_case *c, const char *kernel, const void *y, const float *s, void *y1,
                                  float *s1) {
    const size_t y_seq = c->n_v / 3 * c->dsize, s_seq = c->n_state / 3 * 4; /* bytes of one sequence */
    for (int64_t b = 0; b < 3; ++b) {
        gdn_case one;
        if (!case_slice(&one, c, b, 1, 0, c->cfg.T, c->state_in ? c->state_in + (size_t)b * c->n_state / 3 : NULL)) {
            CHECK(0, "allocation");
            continue;
        }
        CHECK(case_run(&one, kernel, 1 + (int)b, CASE_STATE_SEPARATE, y1, s1) == GDN_OK);
        CHECK(memcmp((const char *)y + (size_t)b * y_seq, y1, y_seq) == 0, "%s: sequence %lld of B=3 != alone: %s",
              kernel, (long long)b, case_describe(&c->cfg));
        CHECK(memcmp((const char *)s + (size_t)b * s_seq, s1, s_seq) == 0,
              "%s: state of sequence %lld of B=3 != alone: %s", kernel, (long long)b, case_describe(&c->cfg));
        case_free(&one);
    }
}

TEST(invariance_batch_composition) {
    const int n = test_quick() ? 6 : 12;
    for (int i = 0; i < n; ++i) {
        const case_cfg cfg = config(i, 3, i % 2 ? 33 : 130);
        gdn_case c;
        if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); continue; }
        void *y = malloc(c.n_v * c.dsize), *y1 = malloc(c.n_v * c.dsize);
        float *s = malloc(c.n_state * 4), *s1 = malloc(c.n_state * 4);
        for (int kn = 0; kn < 3 && y && y1 && s && s1; ++kn) {
            CHECK(case_run(&c, kernels[kn], 3, CASE_STATE_SEPARATE, y, s) == GDN_OK);
            check_sequences_alone(&c, kernels[kn], y, s, y1, s1);
        }
        CHECK(y && y1 && s && s1, "allocation");
        free(y);
        free(y1);
        free(s);
        free(s1);
        case_free(&c);
    }
}

/* The decode kernel's own window (VK and KV, Dk = 128, T <= 2): two tokens in one call == two one-token calls with
 * the state carried, and a sequence of B = 3 == the sequence alone; every dtype, gate and beta kind, mask on and off. */
TEST(invariance_decode_kernel) {
    const char *kernel = "packed_decode_avx2";
    for (int i = 0; i < 24; ++i) {
        const case_cfg cfg = {.B = 3, .T = 2, .Hk = 2, .Hv = 6, .Dk = 128, .Dv = 64, .dtype = (gdn_dtype)(i % 3),
                              .gate_kind = (gdn_gate_kind)(i % 4), .beta_kind = (gdn_beta_kind)(i / 4 % 2),
                              .mask = i % 5 == 1, .layout = (gdn_state_layout)(i / 12), .state_in = i % 6 != 2,
                              .inputs = i % 4 == 3 ? CASE_ADVERSARIAL : CASE_REALISTIC, .seed = 3000u + (uint64_t)i};
        gdn_case c;
        if (!case_init(&c, &cfg)) { CHECK(0, "allocation"); continue; }
        void *y_one = malloc(c.n_v * c.dsize), *y_parts = malloc(c.n_v * c.dsize), *y1 = malloc(c.n_v * c.dsize);
        float *s_one = malloc(c.n_state * 4), *s_a = malloc(c.n_state * 4), *s1 = malloc(c.n_state * 4);
        gdn_delta_args probe = case_args(&c);
        probe.y = y_one;
        probe.state_out = s_one;
        const int eligible = gdn_kernel_eligible(kernel_index(kernel), &probe); /* 0 on a CPU without AVX2 + FMA */
        if (eligible && y_one && y_parts && y1 && s_one && s_a && s1) {
            CHECK(case_run(&c, kernel, 2, CASE_STATE_SEPARATE, y_one, s_one) == GDN_OK);
            poison(y_parts, c.n_v * c.dsize);
            const int ok =
                run_part(&c, kernel, 0, 1, c.state_in, s_a, y_parts) && run_part(&c, kernel, 1, 1, s_a, s_a, y_parts);
            CHECK(ok, "a one-token call failed: %s", case_describe(&cfg));
            CHECK(memcmp(y_one, y_parts, c.n_v * c.dsize) == 0, "y of one call != two one-token calls: %s",
                  case_describe(&cfg));
            CHECK(memcmp(s_one, s_a, c.n_state * 4) == 0, "state of one call != two one-token calls: %s",
                  case_describe(&cfg));
            check_sequences_alone(&c, kernel, y_one, s_one, y1, s1);
        } else {
            CHECK(y_one && y_parts && y1 && s_one && s_a && s1, "allocation");
        }
        free(y_one);
        free(y_parts);
        free(y1);
        free(s_one);
        free(s_a);
        free(s1);
        case_free(&c);
    }
}
