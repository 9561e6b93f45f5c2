/* Test problems for gdn_layer (layer_case.h). */
#include "layer_case.h"

#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "harness.h"

static void fill(void *dst, gdn_dtype dt, size_t n, harness_rng *r, float sd, float mean) {
    for (size_t i = 0; i < n; ++i) gdn__store(dst, dt, (int64_t)i, mean + sd * rng_normal(r));
}

int lcase_init(lcase *c, const lcase_cfg *cfg) {
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    const lcase_cfg *g = cfg;
    c->C = 2 * g->Hk * g->Dk + g->Hv * g->Dv;
    c->slots = g->slots ? g->slots : g->B + 3;
    c->ds = g->dtype == GDN_F32 ? 4 : 2;
    for (int64_t b = 0; b < g->B; ++b) {
        c->cu[b + 1] = c->cu[b] + g->len[b];
        c->slot[b] = (int32_t)b + 1;
        c->commit[b] = g->len[b];
    }
    c->T = c->cu[g->B];
    c->n_y = (size_t)(c->T * g->Hv * g->Dv);
    c->n_state = (size_t)(c->slots * g->Hv * g->Dk * g->Dv);
    c->n_hist = (size_t)(c->slots * c->C * 3);
    c->n_planes = g->planes ? c->n_y / 16 * 49 : 0;
    c->qkv = malloc((size_t)(c->T * c->C) * c->ds);
    c->z = malloc(c->n_y * c->ds);
    c->alpha = malloc((size_t)(c->T * g->Hv) * c->ds);
    c->beta = malloc((size_t)(c->T * g->Hv) * c->ds);
    c->conv_w = malloc((size_t)(c->C * 4) * sizeof(float));
    c->conv_bias = malloc((size_t)c->C * sizeof(float));
    c->dt_bias = malloc((size_t)g->Hv * sizeof(float));
    c->A = malloc((size_t)g->Hv * sizeof(float));
    c->A_log = malloc((size_t)g->Hv * sizeof(float));
    c->gamma = malloc((size_t)g->Dv * sizeof(float));
    c->state = malloc(c->n_state * sizeof(float));
    c->hist = malloc(c->n_hist * c->ds);
    if (!c->qkv || !c->z || !c->alpha || !c->beta || !c->conv_w || !c->conv_bias || !c->dt_bias || !c->A || !c->A_log ||
        !c->gamma || !c->state || !c->hist) {
        lcase_free(c);
        return 0;
    }
    harness_rng r = {g->seed * 0x9E3779B97F4A7C15ull + 7};
    fill(c->qkv, g->dtype, (size_t)(c->T * c->C), &r, 1.0f, 0.0f);
    fill(c->z, g->dtype, c->n_y, &r, 1.0f, 0.0f);
    fill(c->alpha, g->dtype, (size_t)(c->T * g->Hv), &r, 1.0f, 0.0f);
    fill(c->beta, g->dtype, (size_t)(c->T * g->Hv), &r, 1.0f, 0.0f);
    fill(c->conv_w, GDN_F32, (size_t)(c->C * 4), &r, 0.5f, 0.0f);
    fill(c->conv_bias, GDN_F32, (size_t)c->C, &r, 0.1f, 0.0f);
    fill(c->dt_bias, GDN_F32, (size_t)g->Hv, &r, 0.5f, 0.0f);
    for (int64_t h = 0; h < g->Hv; ++h) {
        c->A_log[h] = 1.5f * rng_uniform(&r) - 1.0f;
        c->A[h] = -gdn_expf(c->A_log[h]);
    }
    fill(c->gamma, GDN_F32, (size_t)g->Dv, &r, 0.1f, 1.0f);
    fill(c->state, GDN_F32, c->n_state, &r, 0.05f, 0.0f);
    fill(c->hist, g->dtype, c->n_hist, &r, 1.0f, 0.0f);
    return 1;
}

void lcase_free(lcase *c) {
    free(c->qkv), free(c->z), free(c->alpha), free(c->beta), free(c->conv_w), free(c->conv_bias), free(c->dt_bias);
    free(c->A), free(c->A_log), free(c->gamma), free(c->state), free(c->hist);
    memset(c, 0, sizeof *c);
}

gdn_layer_args lcase_args(const lcase *c, const lrun *r) {
    const lcase_cfg *g = &c->cfg;
    gdn_layer_args a;
    memset(&a, 0, sizeof a);
    a.B = g->B, a.Hk = g->Hk, a.Hv = g->Hv, a.Dk = g->Dk, a.Dv = g->Dv;
    a.cu_seqlens = c->cu;
    a.dtype = g->dtype;
    a.qkv = c->qkv, a.z = c->z, a.alpha = c->alpha, a.beta = c->beta, a.y = r->y;
    a.conv_w = c->conv_w, a.conv_bias = g->bias ? c->conv_bias : NULL;
    a.dt_bias = c->dt_bias;
    if (g->A_log) a.A_log = c->A_log;
    else a.A = c->A;
    a.gamma = c->gamma;
    a.out_gate = g->out_gate;
    a.slots = c->slots;
    a.state_layout = g->layout;
    a.head_map = g->head_map;
    a.state = r->state, a.hist_in = r->hist_in, a.hist_out = r->hist_out;
    a.slot = c->slot, a.commit = c->commit, a.fresh = c->fresh;
    a.checkpoints = c->n_ck ? c->ck : NULL, a.n_checkpoints = c->n_ck;
    a.planes = r->planes;
    return a;
}

int lrun_init(lrun *r, const lcase *c, int separate) {
    memset(r, 0, sizeof *r);
    r->y = malloc(c->n_y * c->ds);
    r->state = malloc(c->n_state * sizeof(float));
    r->hist_in = malloc(c->n_hist * c->ds);
    r->hist_out = separate ? malloc(c->n_hist * c->ds) : r->hist_in;
    r->planes = c->n_planes ? malloc(c->n_planes * sizeof(float)) : NULL;
    if (!r->y || !r->state || !r->hist_in || !r->hist_out || (c->n_planes && !r->planes)) {
        lrun_free(r);
        return 0;
    }
    memset(r->y, 0xFF, c->n_y * c->ds);
    if (r->planes) memset(r->planes, 0xFF, c->n_planes * sizeof(float));
    memcpy(r->state, c->state, c->n_state * sizeof(float));
    memcpy(r->hist_in, c->hist, c->n_hist * c->ds);
    if (separate) memcpy(r->hist_out, c->hist, c->n_hist * c->ds);
    return 1;
}

void lrun_free(lrun *r) {
    if (r->hist_out != r->hist_in) free(r->hist_out);
    free(r->y), free(r->state), free(r->hist_in), free(r->planes);
    memset(r, 0, sizeof *r);
}

gdn_status lcase_run(const lcase *c, lrun *r, const char *kernel, int threads) {
    gdn_layer_args a = lcase_args(c, r);
    a.kernel = kernel;
    a.threads = threads;
    return gdn_layer(&a);
}

int lrun_equal(const lcase *c, const lrun *x, const lrun *y) {
    return memcmp(x->y, y->y, c->n_y * c->ds) == 0 && memcmp(x->state, y->state, c->n_state * sizeof(float)) == 0 &&
           memcmp(x->hist_out, y->hist_out, c->n_hist * c->ds) == 0 &&
           (!c->n_planes || memcmp(x->planes, y->planes, c->n_planes * sizeof(float)) == 0);
}
