/* The layer step's cases for `gdn layer` (tools/gdn_layer.c, tools/gdn_layer_cuda.c): host buffers at the Qwen3.6
 * heads with realistic inputs (seeded), pools of rotation sets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "gdn_tool.h"

enum { L_HK = TOOL_LAYER_HK, L_D = TOOL_LAYER_D };

/* n f32 values ~ U(lo, hi) */
static float *fill_f32(size_t n, tool_rng *r, float lo, float hi) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; ++i) x[i] = lo + (hi - lo) * (float)tool_rng_uniform(r);
    return x;
}

/* n elements ~ N(mean, sd), stored as dtype */
static void *fill_normal(size_t n, gdn_dtype dt, tool_rng *r, float mean, float sd) {
    void *x = malloc(n * (dt == GDN_F32 ? 4 : 2));
    for (size_t i = 0; x && i < n; ++i) gdn__store(x, dt, (int64_t)i, mean + sd * (float)tool_rng_normal(r));
    return x;
}

int tool_layer_case_init(tool_layer_case *c, int64_t Hv, int64_t B, int64_t n, gdn_dtype dt, int commit,
                         double pool_bytes) {
    memset(c, 0, sizeof *c);
    gdn_layer_args *a = &c->a;
    a->B = B, a->Hk = L_HK, a->Hv = Hv, a->Dk = L_D, a->Dv = L_D, a->dtype = dt;
    const int64_t C = 2 * L_HK * L_D + Hv * L_D, ds = dt == GDN_F32 ? 4 : 2;
    c->T = B * n;
    c->set_state_bytes = (size_t)(B * Hv * L_D * L_D * 4);
    c->set_hist_bytes = (size_t)(B * C * 3 * ds);
    c->sets = (int64_t)ceil(pool_bytes / (double)c->set_state_bytes);
    if (c->sets < 1) c->sets = 1;
    a->slots = B * c->sets;
    c->state_bytes = c->set_state_bytes * (size_t)c->sets;
    c->hist_bytes = c->set_hist_bytes * (size_t)c->sets;
    c->y_bytes = (size_t)(c->T * Hv * L_D * ds);
    c->cu = malloc((size_t)(B + 1) * sizeof *c->cu);
    c->slot = malloc((size_t)B * sizeof *c->slot);
    c->commit = malloc((size_t)B * sizeof *c->commit);
    tool_rng s = {0x5eed + (uint64_t)(B * 131 + n), 0.0, 0};
    a->qkv = fill_normal((size_t)(c->T * C), dt, &s, 0.0f, 1.0f);
    a->z = fill_normal((size_t)(c->T * Hv * L_D), dt, &s, 0.0f, 1.0f);
    a->alpha = fill_normal((size_t)(c->T * Hv), dt, &s, 0.0f, 1.0f);
    a->beta = fill_normal((size_t)(c->T * Hv), dt, &s, 0.0f, 1.0f);
    float *conv_w = fill_normal((size_t)(C * 4), GDN_F32, &s, 0.0f, 0.25f);
    float *A_log = fill_f32((size_t)Hv, &s, 1.0f, 16.0f), *dt_bias = fill_f32((size_t)Hv, &s, 0.0f, 1.0f);
    float *gamma = fill_normal((size_t)L_D, GDN_F32, &s, 1.0f, 0.1f);
    a->state = fill_f32(c->state_bytes / 4, &s, -0.1f, 0.1f);
    void *hist = fill_normal(c->hist_bytes / (size_t)ds, dt, &s, 0.0f, 1.0f);
    a->y = malloc(c->y_bytes);
    for (int64_t h = 0; A_log && h < Hv; ++h) A_log[h] = logf(A_log[h]);
    a->conv_w = conv_w, a->A_log = A_log, a->dt_bias = dt_bias, a->gamma = gamma;
    a->hist_in = hist, a->hist_out = hist;
    a->cu_seqlens = c->cu, a->slot = c->slot, a->commit = c->commit;
    if (!c->cu || !c->slot || !c->commit || !a->qkv || !a->z || !a->alpha || !a->beta || !conv_w || !A_log || !dt_bias ||
        !gamma || !a->state || !hist || !a->y) {
        tool_layer_case_free(c);
        return 0;
    }
    for (int64_t b = 0; b <= B; ++b) c->cu[b] = (int32_t)(b * n);
    for (int64_t b = 0; b < B; ++b) c->commit[b] = commit < 0 ? (int32_t)n : commit;
    tool_layer_case_set(c, 0);
    const int writes = commit != 0;
    c->bytes = (double)c->set_state_bytes * (1 + writes) + (double)c->set_hist_bytes * (1 + writes) +
               (double)c->T * (double)(C + 2 * Hv * L_D + 2 * Hv) * (double)ds;
    return 1;
}

void tool_layer_case_free(tool_layer_case *c) {
    gdn_layer_args *a = &c->a;
    free(c->cu), free(c->slot), free(c->commit);
    free((void *)a->qkv), free((void *)a->z), free((void *)a->alpha), free((void *)a->beta), free((void *)a->conv_w);
    free((void *)a->A_log), free((void *)a->dt_bias), free((void *)a->gamma), free(a->state), free(a->hist_out), free(a->y);
    memset(c, 0, sizeof *c);
}

void tool_layer_case_set(tool_layer_case *c, int64_t r) {
    for (int64_t b = 0; b < c->a.B; ++b) c->slot[b] = (int32_t)((r % c->sets) * c->a.B + b);
}
