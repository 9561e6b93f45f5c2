/* The install test's consumer (tests/install/check.sh): a program that knows libgdn only through an installed prefix
 * (its gdn.h, its libgdn.so or libgdn.a), built through pkg-config and through find_package(libgdn). It runs the
 * README's minimal problem and checks the known values: one sequence of 4 tokens, one head, Dk = Dv = 16, f32,
 * S = 0 at the start; token t reads and writes key row t, so S[t][j] = beta * v[t][j] and y[t][j] = scale * S[t][j]. */
#include <stdio.h>

#include "gdn.h"

enum { T = 4, DK = 16, DV = 16 };

int main(void) {
    float q[T * DK] = {0}, k[T * DK] = {0}, v[T * DV], y[T * DV], gate[T], beta[T], state[DV * DK];
    for (int t = 0; t < T; ++t) {
        q[t * DK + t] = k[t * DK + t] = 1.0f;
        gate[t] = 0.9f;
        beta[t] = 0.5f;
        for (int j = 0; j < DV; ++j) v[t * DV + j] = (float)(t + j);
    }
    gdn_delta_args args = {.B = 1, .T = T, .Hk = 1, .Hv = 1, .Dk = DK, .Dv = DV, .dtype = GDN_F32,
                           .q = q, .k = k, .v = v, .y = y,
                           .gate_kind = GDN_GATE_DECAY, .gate = gate,
                           .beta_kind = GDN_BETA_DIRECT, .beta = beta,
                           .state_out = state, .scale = 0.25f};
    const gdn_status status = gdn_delta(&args);
    if (status != GDN_OK) {
        fprintf(stderr, "consumer: gdn_delta: %s\n", gdn_status_str(status));
        return 1;
    }
    /* the last token's row: S[3][j] = 0.5 * (3 + j) (state[j * DK + i] holds S[i][j]), y[3][j] = 0.25 * S[3][j] */
    int bad = 0;
    for (int j = 0; j < DV; ++j) {
        const float s = 0.5f * (float)(3 + j);
        bad += state[j * DK + 3] != s || y[3 * DV + j] != 0.25f * s;
    }
    printf("consumer: libgdn %d.%d, y[3][1] = %g, S[3][1] = %g: %s\n", GDN_VERSION_MAJOR, GDN_VERSION_MINOR,
           y[3 * DV + 1], state[1 * DK + 3], bad ? "WRONG" : "ok");
    return bad ? 1 : 0;
}
