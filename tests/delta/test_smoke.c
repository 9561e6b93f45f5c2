/* Smoke: ref runs a small case and writes every output. */
#include <math.h>
#include <stdlib.h>

#include "gdn.h"
#include "harness.h"

TEST(smoke_ref_writes_all) {
    enum { B = 1, T = 3, H = 1, D = 8 };
    float q[B * T * H * D], k[B * T * H * D], v[B * T * H * D], y[B * T * H * D], g[B * T * H], beta[B * T * H];
    harness_rng r = {1};
    for (int i = 0; i < B * T * H * D; ++i) { q[i] = rng_normal(&r); k[i] = rng_normal(&r); v[i] = rng_normal(&r); y[i] = NAN; }
    for (int i = 0; i < B * T * H; ++i) { g[i] = 0.9f; beta[i] = 0.5f; }
    gdn_delta_args a = {.B = B, .T = T, .Hk = H, .Hv = H, .Dk = D, .Dv = D, .q = q, .k = k, .v = v, .y = y,
                        .gate = g, .beta = beta, .scale = 1.0f, .kernel = "ref"};
    CHECK(gdn_delta(&a) == GDN_OK);
    for (int i = 0; i < B * T * H * D; ++i) CHECK(!isnan(y[i]));
}
