/* A minimal libgdn program: one sequence of 4 tokens, one head, Dk = Dv = 16, f32, starting from S = 0. */
#include <stdio.h>

#include "gdn.h"

enum { T = 4, DK = 16, DV = 16 };

int main(void) {
    float q[T * DK] = {0}, k[T * DK] = {0}, v[T * DV], y[T * DV], gate[T], beta[T], state[DV * DK];
    for (int t = 0; t < T; ++t) {
        q[t * DK + t] = k[t * DK + t] = 1.0f; /* token t reads and writes key row t */
        gate[t] = 0.9f;                       /* decay */
        beta[t] = 0.5f;                       /* write strength */
        for (int j = 0; j < DV; ++j) v[t * DV + j] = (float)(t + j);
    }
    gdn_delta_args args = {.B = 1, .T = T, .Hk = 1, .Hv = 1, .Dk = DK, .Dv = DV, .dtype = GDN_F32,
                           .q = q, .k = k, .v = v, .y = y,
                           .gate_kind = GDN_GATE_DECAY, .gate = gate,
                           .beta_kind = GDN_BETA_DIRECT, .beta = beta,
                           .state_out = state, /* [B, Hv, Dv, Dk]; state_in NULL: S starts at 0 */
                           .scale = 0.25f};    /* 1 / sqrt(Dk) */
    gdn_status status = gdn_delta(&args);
    if (status != GDN_OK) {
        fprintf(stderr, "gdn_delta: %s\n", gdn_status_str(status));
        return 1;
    }
    /* token 3, value column 1: S[3][1] = beta * v = 0.5 * 4 = 2 (state[j * DK + i] holds S[i][j]); y = 0.25 * 2 */
    printf("y[3][1] = %g, S[3][1] = %g\n", y[3 * DV + 1], state[1 * DK + 3]);
    return y[3 * DV + 1] == 0.5f ? 0 : 1;
}
