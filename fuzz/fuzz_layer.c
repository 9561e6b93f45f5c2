/* libFuzzer target over the public gdn_layer (CPU backend; GDN_BACKEND_CUDA must answer GDN_ERR_NO_DEVICE here).
 *
 * The input decides one call: heads and sizes (small), dtype, output gate, state layout, head map, a batch of up to 4
 * windows, the pools' slots, each sequence's slot (possibly skipped, possibly out of range or shared), commit
 * count (possibly over its window) and fresh flag, the arrays given or NULL, up to 2 checkpoints (possibly
 * invalid), A and/or A_log, a bias, histories in place / separate / overlapping, y's planes (refused unless
 * Dv % 16 == 0), eps and scale, threads, a
 * kernel name (valid or not), values (typical, with specials, specials only, raw bits), and at most one more
 * fault (a NULL tensor, a reserved word, a zero size, a misaligned or overlapping y).
 *
 * Every tensor lives in a guarded block (fuzz_common.h). The expected outcome is computed here from the API's
 * rules. The call must
 *   - return an error exactly when the rules say so, agree with gdn_layer_route, and change no byte of any block;
 *   - or return GDN_OK and produce y, the planes and both pools bitwise equal (memcmp; GDN_FUZZ_NAN_PAYLOAD=any: a NaN for a
 *     NaN) to a one-thread `ref` call on copies, changing no input.
 * Any violation prints what differed and aborts, so libFuzzer keeps the input. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "gdn_testing.h"

#define FUZZ_NAME "fuzz_layer"
#include "fuzz_common.h"

enum { MAX_B = 4, MAX_CK = 2 };
static const int64_t dims[] = {1, 2, 5, 16, 32, 33, 40};
static const char *const names[] = {NULL, "staged", "ref", "cuda_fused", "cuda_staged", "bogus"};

typedef struct call {
    gdn_layer_args a;
    int32_t cu[MAX_B + 1], slot[MAX_B], commit[MAX_B];
    uint8_t fresh[MAX_B];
    gdn_layer_checkpoint ck[MAX_CK];
    int valid; /* the rules' verdict */
} call;

/* The slot sequence b uses. */
static int64_t slot_of(const gdn_layer_args *a, int64_t b) { return a->slot ? a->slot[b] : b; }

/* The API's rules for the per-sequence arrays and checkpoints (docs/API.md, "The layer step"). */
static int sequences_valid(const gdn_layer_args *a) {
    int64_t written[MAX_B + MAX_CK], read[MAX_B], nw = 0, nr = 0;
    for (int64_t b = 0; b < a->B; ++b) {
        const int64_t n = a->cu_seqlens[b + 1] - a->cu_seqlens[b], s = slot_of(a, b), k = a->commit ? a->commit[b] : n;
        if (s >= a->slots || k < 0 || k > n) return 0;
        if (s >= 0 && k > 0) written[nw++] = s;
        else if (s >= 0) read[nr++] = s;
    }
    for (int64_t i = 0; i < a->n_checkpoints; ++i) {
        const gdn_layer_checkpoint *c = &a->checkpoints[i];
        if (c->seq < 0 || c->seq >= a->B || c->slot < 0 || c->slot >= a->slots || slot_of(a, c->seq) < 0) return 0;
        if (c->after < 1 || c->after > a->cu_seqlens[c->seq + 1] - a->cu_seqlens[c->seq]) return 0;
        written[nw++] = c->slot;
    }
    for (int64_t i = 0; i < nw; ++i) {
        for (int64_t j = i + 1; j < nw; ++j)
            if (written[i] == written[j]) return 0;
        for (int64_t j = 0; j < nr; ++j)
            if (written[i] == read[j]) return 0;
    }
    return 1;
}

static void *tensor(size_t bytes, size_t skew) { return block_new(bytes ? bytes : 1, skew, 16)->tensor; }

static int fuzz_one(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    call c;
    memset(&c, 0, sizeof c);
    gdn_layer_args *a = &c.a;
    a->dtype = (gdn_dtype)(rd(&r) % 3);
    a->out_gate = (gdn_out_gate)(rd(&r) % 2);
    const unsigned lay = rd(&r); /* bit 0: the state layout; bit 1: the head map */
    a->state_layout = (gdn_state_layout)(lay % 2);
    a->head_map = (gdn_head_map)((lay / 2) % 2);
    a->Hk = 1 + rd(&r) % 2;
    a->Hv = a->Hk * (1 + rd(&r) % 3);
    a->Dk = dims[rd(&r) % 7], a->Dv = dims[rd(&r) % 7];
    a->B = 1 + rd(&r) % MAX_B;
    a->slots = 1 + rd(&r) % 8;
    for (int64_t b = 0; b < a->B; ++b) c.cu[b + 1] = c.cu[b] + 1 + (int32_t)(rd(&r) % 6);
    for (int64_t b = 0; b < a->B; ++b) {
        const int32_t n = c.cu[b + 1] - c.cu[b];
        c.slot[b] = (int32_t)(rd(&r) % (unsigned)(a->slots + 2)) - 1;
        c.commit[b] = (int32_t)(rd(&r) % (unsigned)(n + 2));
        c.fresh[b] = (uint8_t)(rd(&r) % 2);
    }
    const unsigned arrays = rd(&r);
    a->cu_seqlens = c.cu;
    a->slot = arrays & 1 ? c.slot : NULL;
    a->commit = arrays & 2 ? c.commit : NULL;
    a->fresh = arrays & 4 ? c.fresh : NULL;
    a->n_checkpoints = rd(&r) % (MAX_CK + 1);
    for (int64_t i = 0; i < a->n_checkpoints; ++i) {
        c.ck[i].seq = (int32_t)(rd(&r) % (unsigned)(a->B + 1));
        c.ck[i].after = (int32_t)(rd(&r) % 8);
        c.ck[i].slot = (int32_t)(rd(&r) % (unsigned)(a->slots + 1));
    }
    a->checkpoints = a->n_checkpoints ? c.ck : NULL;
    const unsigned gate = rd(&r) % 4, bias = rd(&r) % 2, hist = rd(&r) % 3, eps = rd(&r) % 2, fault = rd(&r) % 8;
    a->threads = (int)(rd(&r) % 3);
    a->kernel = names[rd(&r) % 6];
    a->backend = rd(&r) % 8 == 0 ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
    const unsigned mode = rd(&r);
    if (eps) a->eps_l2 = 1e-3f, a->eps_rms = 1e-5f, a->scale = 0.5f;
    source s = {r.p + r.i, r.i < r.n ? r.n - r.i : 0, 0, size * 0x9e3779b97f4a7c15ull};

    const int64_t C = 2 * a->Hk * a->Dk + a->Hv * a->Dv, T = c.cu[a->B];
    const size_t ds = esize(a->dtype), n_state = (size_t)(a->slots * a->Hv * a->Dk * a->Dv), n_hist = (size_t)(a->slots * C * 3);
    void *qkv = tensor((size_t)(T * C) * ds, 0), *z = tensor((size_t)(T * a->Hv * a->Dv) * ds, 0);
    void *alpha = tensor((size_t)(T * a->Hv) * ds, 0), *beta = tensor((size_t)(T * a->Hv) * ds, 0);
    float *conv_w = tensor((size_t)(C * 16), 0), *conv_bias = tensor((size_t)C * 4, 0), *dt_bias = tensor((size_t)a->Hv * 4, 0);
    float *A = tensor((size_t)a->Hv * 4, 0), *A_log = tensor((size_t)a->Hv * 4, 0), *gamma = tensor((size_t)a->Dv * 4, 0);
    float *state = tensor(n_state * 4, 0);
    void *hist_in = tensor(n_hist * ds, 0), *hist_out = hist == 1 ? tensor(n_hist * ds, 0) : hist_in;
    void *y = tensor((size_t)(T * a->Hv * a->Dv) * ds, fault == 4 ? 1 : 0);
    const size_t n_planes = (size_t)(T * a->Hv * a->Dv) / 16 * 49; /* Dv % 16 != 0: refused, never written */
    float *planes = arrays & 8 ? tensor(n_planes * 4, 0) : NULL;
    fill(qkv, a->dtype, T * C, V_QK, mode, &s);
    fill(z, a->dtype, T * a->Hv * a->Dv, V_V, mode, &s);
    fill(alpha, a->dtype, T * a->Hv, V_RAW_GATE, mode, &s);
    fill(beta, a->dtype, T * a->Hv, V_BETA_LOGIT, mode, &s);
    fill(conv_w, GDN_F32, C * 4, V_PARAM, mode >> 2, &s);
    fill(conv_bias, GDN_F32, C, V_PARAM, mode >> 2, &s);
    fill(dt_bias, GDN_F32, a->Hv, V_PARAM, mode >> 2, &s);
    fill(A, GDN_F32, a->Hv, V_LOG_DECAY, mode >> 2, &s);
    fill(A_log, GDN_F32, a->Hv, V_PARAM, mode >> 2, &s);
    fill(gamma, GDN_F32, a->Dv, V_PARAM, mode >> 2, &s);
    fill(state, GDN_F32, (int64_t)n_state, V_STATE, mode >> 4, &s);
    fill(hist_in, a->dtype, (int64_t)n_hist, V_QK, mode >> 4, &s);
    if (hist == 1) memcpy(hist_out, hist_in, n_hist * ds);
    a->qkv = qkv, a->z = z, a->alpha = alpha, a->beta = beta, a->y = y;
    a->conv_w = conv_w, a->conv_bias = bias ? conv_bias : NULL, a->dt_bias = dt_bias, a->gamma = gamma;
    a->A = gate == 0 || gate == 2 ? A : NULL;
    a->A_log = gate == 1 || gate == 2 ? A_log : NULL;
    a->state = state, a->hist_in = hist_in, a->planes = planes;
    a->hist_out = hist == 2 ? (uint8_t *)hist_in + ds : hist_out; /* 2: overlapping, not equal */
    switch (fault) {
    case 1: a->gamma = NULL; break;
    case 2: a->reserved[5] = 1; break;
    case 3: a->Dv = 0; break;
    case 5: a->y = state; break;
    default: break;
    }

    c.valid = fault == 0 || fault >= 6 ? 1 : 0;
    c.valid = c.valid && (gate == 0 || gate == 1) && hist != 2 && (fault == 4 ? ds == 1 : 1) && sequences_valid(a) &&
              (!planes || a->Dv % 16 == 0);
    const int known_kernel = !a->kernel || strcmp(a->kernel, "staged") == 0 || strcmp(a->kernel, "ref") == 0 ||
                             strcmp(a->kernel, "cuda_fused") == 0 || strcmp(a->kernel, "cuda_staged") == 0;
    const int cpu_kernel = !a->kernel || strncmp(a->kernel, "cuda", 4) != 0;
    const int runs = c.valid && known_kernel && cpu_kernel && a->backend == GDN_BACKEND_CPU;

    blocks_snapshot();
    const char *route = NULL;
    const gdn_status rs = gdn_layer_route(a, &route);
    const gdn_status st = gdn_layer(a);
    blocks_check_canaries();
    if (rs != st) FAIL("gdn_layer_route says %d, gdn_layer %d (%s)", (int)rs, (int)st, gdn_last_error());
    if ((st == GDN_OK) != runs)
        FAIL("status %d (%s), but the rules say it %s", (int)st, gdn_last_error(), runs ? "runs" : "fails");
    if (st != GDN_OK) {
        for (int i = 0; i < n_blocks; ++i)
            if (!block_same(&blocks[i], 0, blocks[i].bytes)) FAIL("a failed call (%d: %s) wrote block %d", (int)st, gdn_last_error(), i);
        blocks_free();
        return 0;
    }
    /* ref, one thread, on copies of the pools as they were */
    void *ry = malloc((size_t)(T * a->Hv * a->Dv) * ds);
    float *rstate = malloc(n_state * 4);
    void *rhist_in = malloc(n_hist * ds), *rhist_out = hist == 1 ? malloc(n_hist * ds) : rhist_in;
    float *rplanes = planes ? malloc(n_planes * 4) : NULL;
    if (!ry || !rstate || !rhist_in || !rhist_out || (planes && !rplanes)) FAIL("out of memory");
    memcpy(rstate, block_of(state)->snap + (HEAD), n_state * 4);
    memcpy(rhist_in, block_of(hist_in)->snap + (HEAD), n_hist * ds);
    if (hist == 1) memcpy(rhist_out, block_of(hist_out)->snap + (HEAD), n_hist * ds);
    gdn_layer_args ra = *a;
    ra.y = ry, ra.state = rstate, ra.hist_in = rhist_in, ra.hist_out = rhist_out, ra.kernel = "ref", ra.threads = 1;
    ra.planes = rplanes;
    if (gdn_layer(&ra) != GDN_OK) FAIL("ref failed where %s ran: %s", route, gdn_last_error());
    compare_with_ref("y", y, ry, (size_t)(T * a->Hv * a->Dv), a->dtype, route, a->threads);
    compare_with_ref("state", state, rstate, n_state, GDN_F32, route, a->threads);
    compare_with_ref("hist_out", hist_out, rhist_out, n_hist, a->dtype, route, a->threads);
    if (planes) compare_with_ref("planes", planes, rplanes, n_planes, GDN_F32, route, a->threads);
    const void *inputs[] = {qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i)
        if (!block_same(block_of(inputs[i]), 0, block_of(inputs[i])->bytes)) FAIL("input %zu was written", i);
    if (hist == 1 && !block_same(block_of(hist_in), 0, block_of(hist_in)->bytes)) FAIL("hist_in was written");
    free(ry), free(rstate), free(rhist_in), free(rplanes);
    if (hist == 1) free(rhist_out);
    blocks_free();
    return 0;
}
