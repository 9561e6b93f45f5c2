/* `ref` against the float64 oracle by tolerance, and a tiny hand-worked case whose every step is exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

static double rel_l2(const double *exact, const void *got, gdn_dtype dtype, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = (double)gdn__load(got, dtype, (int64_t)i) - exact[i];
        num += d * d;
        den += exact[i] * exact[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* ref (routed by name) and the oracle on one case; returns the relative L2 errors of y and of the state. */
static int ref_vs_oracle(const case_cfg *cfg, double *err_y, double *err_s) {
    gdn_case c;
    if (!case_init(&c, cfg)) return 0;
    void *y = malloc(c.n_v * c.dsize);
    float *s = malloc(c.n_state * 4);
    double *oy = malloc(c.n_v * sizeof(double)), *os = malloc(c.n_state * sizeof(double));
    int ok = y && s && oy && os && case_run(&c, "ref", 2, CASE_STATE_SEPARATE, y, s) == GDN_OK;
    gdn_delta_args a = case_args(&c);
    a.y = y;
    a.state_out = s;
    ok = ok && gdn__oracle_delta(&a, oy, os) == GDN_OK;
    if (ok) {
        *err_y = rel_l2(oy, y, cfg->dtype, c.n_v);
        *err_s = rel_l2(os, s, GDN_F32, c.n_state);
    }
    free(y);
    free(s);
    free(oy);
    free(os);
    case_free(&c);
    return ok;
}

/* f32, realistic gates, T = 2048 (quick: 512), Dk = Dv = 128 with few heads: relative L2 error < 1e-5. */
TEST(oracle_ref_tolerance_f32) {
    const int64_t T = test_quick() ? 512 : 2048;
    const case_cfg cfgs[] = {
        {.B = 1, .T = T, .Hk = 1, .Hv = 2, .Dk = 128, .Dv = 128, .dtype = GDN_F32, .gate_kind = GDN_GATE_RAW,
         .beta_kind = GDN_BETA_LOGIT, .layout = GDN_STATE_VK, .state_in = 1, .seed = 5},
        {.B = 1, .T = T, .Hk = 1, .Hv = 1, .Dk = 128, .Dv = 128, .dtype = GDN_F32, .gate_kind = GDN_GATE_VECTOR,
         .beta_kind = GDN_BETA_DIRECT, .layout = GDN_STATE_KV, .mask = 1, .state_in = 1, .seed = 6},
        {.B = 2, .T = T / 2, .Hk = 1, .Hv = 1, .Dk = 128, .Dv = 128, .dtype = GDN_F32, .gate_kind = GDN_GATE_LOG_DECAY,
         .beta_kind = GDN_BETA_LOGIT, .layout = GDN_STATE_VK, .state_in = 0, .seed = 7},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; ++i) {
        double ey = 1.0, es = 1.0;
        CHECK(ref_vs_oracle(&cfgs[i], &ey, &es), "run failed");
        printf("     ref vs oracle, %s: relative L2 error y %.3e, state %.3e\n", case_describe(&cfgs[i]), ey, es);
        CHECK(ey < 1e-5, "y error %.3e", ey);
        CHECK(es < 1e-5, "state error %.3e", es);
    }
}

/* f16 / bf16: the state stays f32 (same bound); y carries one rounding to the dtype (2^-11, 2^-8 relative). */
TEST(oracle_ref_tolerance_half) {
    const int64_t T = test_quick() ? 256 : 1024;
    for (int d = GDN_F16; d <= GDN_BF16; ++d) {
        const case_cfg cfg = {.B = 1, .T = T, .Hk = 1, .Hv = 2, .Dk = 128, .Dv = 64, .dtype = (gdn_dtype)d,
                              .gate_kind = GDN_GATE_DECAY, .beta_kind = GDN_BETA_DIRECT, .state_in = 1, .seed = 8};
        double ey = 1.0, es = 1.0;
        CHECK(ref_vs_oracle(&cfg, &ey, &es), "run failed");
        printf("     ref vs oracle, %s: relative L2 error y %.3e, state %.3e\n", case_describe(&cfg), ey, es);
        CHECK(ey < (d == GDN_F16 ? 5e-4 : 4e-3), "y error %.3e", ey);
        CHECK(es < 1e-5, "state error %.3e", es);
    }
}

/* The hand-worked case: Dk = Dv = 2, one head, scale 2, dyadic values so every step below is exact in every
 * dtype (the dot of two 2-vectors is lane 0's x0*w0 plus lane 1's x1*w1, the other 30 lanes add +0).
 * S[i][j]: key row i, value column j.
 *
 *   S0 = [[1, 0.5], [0, 2]]   (S[:,0] = (1, 0), S[:,1] = (0.5, 2))
 *
 *   token 1: k = (1, 0.5), q = (0.5, 1), v = (2, -1), g = 0.5, beta = 0.5
 *     j=0: kv = 1*1 + 0*0.5 = 1;        d = (2 - 0.5*1)*0.5 = 0.75
 *          S[:,0] = 0.5*(1, 0) + (1, 0.5)*0.75 = (1.25, 0.375);      y0 = 2*(1.25*0.5 + 0.375*1) = 2
 *     j=1: kv = 0.5*1 + 2*0.5 = 1.5;    d = (-1 - 0.5*1.5)*0.5 = -0.875
 *          S[:,1] = 0.5*(0.5, 2) + (1, 0.5)*(-0.875) = (-0.625, 0.5625); y1 = 2*(-0.3125 + 0.5625) = 0.5
 *   token 2: k = (0, 1), q = (1, -1), v = (0.5, 1), g = 0.75, beta = 1
 *     j=0: kv = 0.375;   d = 0.5 - 0.75*0.375 = 0.21875
 *          S[:,0] = 0.75*(1.25, 0.375) + (0, 0.21875) = (0.9375, 0.5);      y0 = 2*(0.9375 - 0.5) = 0.875
 *     j=1: kv = 0.5625;  d = 1 - 0.75*0.5625 = 0.578125
 *          S[:,1] = 0.75*(-0.625, 0.5625) + (0, 0.578125) = (-0.46875, 1); y1 = 2*(-0.46875 - 1) = -2.9375
 *
 *   From S0 = 0 (state_in NULL), the same tokens:
 *   token 1: d = v*beta = (1, -0.5); S[:,0] = (1, 0.5), S[:,1] = (-0.5, -0.25); y = 2*(1, -0.5) = (2, -1)
 *   token 2: j=0: kv = 0.5, d = 0.5 - 0.375 = 0.125, S[:,0] = (0.75, 0.5), y0 = 2*0.25 = 0.5
 *            j=1: kv = -0.25, d = 1 + 0.1875 = 1.1875, S[:,1] = (-0.375, 1), y1 = 2*(-1.375) = -2.75
 *
 * Variants that must give the same numbers: the vector gate with g_i = g (kv = S.(g k) = g (S.k) exactly),
 * beta as logits 0 and 20 (sigmoid rounds to exactly 0.5 and 1), and a masked junk token between the two
 * (its y row is 0 and the state passes through). */
TEST(hand_worked_exact) {
    static const float k_tok[3][2] = {{1, 0.5f}, {1000, -3}, {0, 1}}, q_tok[3][2] = {{0.5f, 1}, {7, 7}, {1, -1}};
    static const float v_tok[3][2] = {{2, -1}, {1000, 1000}, {0.5f, 1}}, g_tok[3] = {0.5f, 0.0f, 0.75f};
    static const float beta_tok[3] = {0.5f, 1.0f, 1.0f}, logit_tok[3] = {0.0f, 20.0f, 20.0f};
    static const float S0[2][2] = {{1, 0.5f}, {0, 2}};
    static const float y_expect[2][2][2] = {{{2, 0.5f}, {0.875f, -2.9375f}}, {{2, -1}, {0.5f, -2.75f}}};
    static const float S_expect[2][2][2] = {{{0.9375f, -0.46875f}, {0.5f, 1}}, {{0.75f, -0.375f}, {0.5f, 1}}};
    const char *names[] = {"ref", "portable", "packed_avx2"};
    int runs = 0;
    for (int variant = 0; variant < 64; ++variant) {
        const gdn_dtype dtype = (gdn_dtype)(variant % 3);
        const int vector_gate = variant / 3 % 2, logit = variant / 6 % 2, masked = variant / 12 % 2;
        const int zero_state = variant / 24 % 2, kv_layout = variant / 48 % 2;
        const int T = masked ? 3 : 2;
        uint16_t qh[6], kh[6], vh[6], yh[6];
        float qf[6], kf[6], vf[6], yf[6], gate[3 * 2], beta[3], sin[4], sout[4];
        uint8_t mask[3] = {1, 0, 1};
        for (int t = 0; t < T; ++t) {
            const int src = masked ? t : (t == 0 ? 0 : 2); /* token row: 0, (junk,) 2 */
            for (int i = 0; i < 2; ++i) {
                qf[t * 2 + i] = q_tok[src][i];
                kf[t * 2 + i] = k_tok[src][i];
                vf[t * 2 + i] = v_tok[src][i];
                qh[t * 2 + i] = dtype == GDN_F16 ? gdn__f32_to_f16(qf[t * 2 + i]) : gdn__f32_to_bf16(qf[t * 2 + i]);
                kh[t * 2 + i] = dtype == GDN_F16 ? gdn__f32_to_f16(kf[t * 2 + i]) : gdn__f32_to_bf16(kf[t * 2 + i]);
                vh[t * 2 + i] = dtype == GDN_F16 ? gdn__f32_to_f16(vf[t * 2 + i]) : gdn__f32_to_bf16(vf[t * 2 + i]);
            }
            /* gate: [T] scalar, or [T, Dk] per key row */
            if (vector_gate) gate[t * 2] = gate[t * 2 + 1] = g_tok[src];
            else gate[t] = g_tok[src];
            beta[t] = logit ? logit_tok[src] : beta_tok[src];
        }
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) sin[kv_layout ? i * 2 + j : j * 2 + i] = S0[i][j];
        gdn_delta_args a = {.B = 1, .T = T, .Hk = 1, .Hv = 1, .Dk = 2, .Dv = 2, .dtype = dtype,
                            .q = dtype == GDN_F32 ? (const void *)qf : qh, .k = dtype == GDN_F32 ? (const void *)kf : kh,
                            .v = dtype == GDN_F32 ? (const void *)vf : vh, .y = dtype == GDN_F32 ? (void *)yf : yh,
                            .gate_kind = vector_gate ? GDN_GATE_VECTOR : GDN_GATE_DECAY, .gate = gate,
                            .beta_kind = logit ? GDN_BETA_LOGIT : GDN_BETA_DIRECT, .beta = beta, .mask = masked ? mask : NULL,
                            .state_layout = kv_layout ? GDN_STATE_KV : GDN_STATE_VK, .state_in = zero_state ? NULL : sin,
                            .state_out = sout, .scale = 2.0f};
        for (int kn = 0; kn < 3; ++kn) {
            a.kernel = names[kn];
            poison(yf, sizeof yf);
            poison(yh, sizeof yh);
            poison(sout, sizeof sout);
            const gdn_status st = gdn_delta(&a);
            CHECK(st == GDN_OK, "%s variant %d: %s", names[kn], variant, gdn_status_str(st));
            for (int t = 0; t < T; ++t)
                for (int j = 0; j < 2; ++j) {
                    const int real = masked ? (t == 1 ? -1 : t / 2) : t;
                    const float expect = real < 0 ? 0.0f : y_expect[zero_state][real][j];
                    const float got = gdn__load(a.y, dtype, t * 2 + j);
                    CHECK(got == expect && !signbit(got) == !signbit(expect), "%s variant %d: y[%d][%d] = %.9g, expected %.9g",
                          names[kn], variant, t, j, got, expect);
                }
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j) {
                    const float got = sout[kv_layout ? i * 2 + j : j * 2 + i];
                    CHECK(got == S_expect[zero_state][i][j], "%s variant %d: S[%d][%d] = %.9g, expected %.9g", names[kn],
                          variant, i, j, got, S_expect[zero_state][i][j]);
                }
            runs++;
        }
        /* the float64 oracle agrees exactly too (its sigmoid(20) is not 1: direct beta only) */
        if (logit) continue;
        double oy[6], os[4];
        a.kernel = NULL;
        CHECK(gdn__oracle_delta(&a, oy, os) == GDN_OK);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j)
                CHECK(os[kv_layout ? i * 2 + j : j * 2 + i] == S_expect[zero_state][i][j], "oracle variant %d S[%d][%d]", variant, i, j);
        CHECK(oy[(T - 1) * 2 + 1] == y_expect[zero_state][1][1], "oracle variant %d last y", variant);
    }
    CHECK(runs == 64 * 3);
}
