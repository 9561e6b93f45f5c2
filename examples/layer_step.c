/* The layer step as a serving engine calls it: a pool of 4 slots, two prompts prefilled in one varlen call, a decode
 * step for both, then a speculative round for one of them: verify 4 draft tokens (nothing written), and, with 2
 * accepted, commit after 2 of the same 4 tokens, which gives the pools of a 2-token step bit for bit.
 * Heads: Hk = 1, Hv = 2, Dk = Dv = 32 (C = 2*32 + 2*32 = 128 channels); f32 activations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"

enum { HK = 1, HV = 2, D = 32, C = 2 * HK * D + HV * D, SLOTS = 4, TMAX = 8 };

static float qkv[TMAX * C], z[TMAX * HV * D], alpha[TMAX * HV], beta[TMAX * HV], y[TMAX * HV * D];
static float conv_w[C * 4], dt_bias[HV], A_log[HV], gamma_[D];
static float state[SLOTS * HV * D * D], hist[SLOTS * C * 3];

/* deterministic inputs: token t of the call */
static void inputs(int tokens, int seed) {
    for (int i = 0; i < tokens * C; ++i) qkv[i] = (float)((i * 7 + seed) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < tokens * HV * D; ++i) z[i] = (float)((i * 5 + seed) % 11) / 11.0f;
    for (int i = 0; i < tokens * HV; ++i) alpha[i] = 0.1f * (float)(i % 3), beta[i] = 0.5f;
}

/* One gdn_layer call over `b` sequences: windows len[], slots slot[], commit counts commit[] (NULL: all). */
static gdn_status step(int b, const int32_t *len, const int32_t *slot, const int32_t *commit, const uint8_t *fresh) {
    int32_t cu[4] = {0};
    for (int i = 0; i < b; ++i) cu[i + 1] = cu[i] + len[i];
    gdn_layer_args a = {.B = b, .Hk = HK, .Hv = HV, .Dk = D, .Dv = D, .cu_seqlens = cu, .dtype = GDN_F32,
                        .qkv = qkv, .z = z, .alpha = alpha, .beta = beta, .y = y,
                        .conv_w = conv_w, .dt_bias = dt_bias, .A_log = A_log, .gamma = gamma_,
                        .slots = SLOTS, .state = state, .hist_in = hist, .hist_out = hist, /* in place */
                        .slot = slot, .commit = commit, .fresh = fresh};
    const gdn_status s = gdn_layer(&a);
    if (s != GDN_OK) fprintf(stderr, "gdn_layer: %s (%s)\n", gdn_status_str(s), gdn_last_error());
    return s;
}

int main(void) {
    for (int i = 0; i < C * 4; ++i) conv_w[i] = (float)(i % 4 + 1) * 0.25f;
    for (int h = 0; h < HV; ++h) dt_bias[h] = 0.5f, A_log[h] = 0.0f; /* A = -1 */
    for (int j = 0; j < D; ++j) gamma_[j] = 1.0f;

    /* 1. two prompts, 5 and 3 tokens, into slots 2 and 0, starting fresh (the pools' contents there are ignored) */
    inputs(8, 1);
    if (step(2, (const int32_t[]){5, 3}, (const int32_t[]){2, 0}, NULL, (const uint8_t[]){1, 1}) != GDN_OK) return 1;
    /* 2. a decode step: one token each */
    inputs(2, 2);
    if (step(2, (const int32_t[]){1, 1}, (const int32_t[]){2, 0}, NULL, NULL) != GDN_OK) return 1;
    /* 3. the sequence in slot 2 drafts 4 tokens: verify them (commit 0 writes nothing) */
    static float state_before[sizeof state / sizeof(float)], y_verify[4 * HV * D];
    memcpy(state_before, state, sizeof state);
    inputs(4, 3);
    if (step(1, (const int32_t[]){4}, (const int32_t[]){2}, (const int32_t[]){0}, NULL) != GDN_OK) return 1;
    memcpy(y_verify, y, sizeof y_verify);
    const int untouched = memcmp(state, state_before, sizeof state) == 0;
    /* 2 accepted: commit after 2 of the 4 (every output computed again, the pools as after the 2 tokens). A copy
     * of the pools takes a 2-token step instead, for the comparison. */
    static float state2[sizeof state / sizeof(float)], hist2[sizeof hist / sizeof(float)];
    memcpy(state2, state, sizeof state), memcpy(hist2, hist, sizeof hist);
    if (step(1, (const int32_t[]){4}, (const int32_t[]){2}, (const int32_t[]){2}, NULL) != GDN_OK) return 1;
    const int same_y = memcmp(y, y_verify, sizeof y_verify) == 0;
    static float state_k[sizeof state / sizeof(float)], hist_k[sizeof hist / sizeof(float)];
    memcpy(state_k, state, sizeof state), memcpy(hist_k, hist, sizeof hist);
    memcpy(state, state2, sizeof state), memcpy(hist, hist2, sizeof hist);
    if (step(1, (const int32_t[]){2}, (const int32_t[]){2}, NULL, NULL) != GDN_OK) return 1;
    const int same_pools = memcmp(state, state_k, sizeof state) == 0 && memcmp(hist, hist_k, sizeof hist) == 0;

    printf("verify wrote nothing: %s; commit after 2 of 4 == a 2-token step: %s; its outputs == verify's: %s\n",
           untouched ? "yes" : "NO", same_pools ? "yes" : "NO", same_y ? "yes" : "NO");
    printf("y[token 0, head 0, column 0] = %g\n", (double)y[0]);
    return untouched && same_pools && same_y ? 0 : 1;
}
