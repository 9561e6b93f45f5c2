/* gdn_delta's batch form (cu_seqlens, state_slot, slots): bitwise the same as one dense B = 1 call per sequence,
 * for every CPU kernel and the router, over mixed window lengths, dtypes, layouts, masks and state modes, with
 * permuted and skipped slots in pools larger than the batch; dense tensors through slots the same as without; bad
 * batch arrays rejected with the field named and nothing written. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

enum { MAX_SEQ = 8 };

/* A batch's host arrays: B windows (lengths), their slots in a pool of `slots` states. */
typedef struct batch {
    int64_t B, slots;
    int32_t cu[MAX_SEQ + 1], slot[MAX_SEQ];
} batch;

static batch make_batch(const int32_t *lengths, const int32_t *slots, int64_t B, int64_t pool) {
    batch b = {.B = B, .slots = pool};
    for (int64_t i = 0; i < B; ++i) {
        b.cu[i + 1] = b.cu[i] + lengths[i];
        b.slot[i] = slots[i];
    }
    return b;
}

/* Sequence i of a batch-form or slotted call as the dense B = 1 call of its window and its slot's state. */
static gdn_delta_args window_call(const gdn_delta_args *a, int64_t i) {
    const size_t ds = a->dtype == GDN_F32 ? 4 : 2;
    const int64_t t0 = a->cu_seqlens ? a->cu_seqlens[i] : i * a->T;
    const int64_t slot = a->state_slot ? a->state_slot[i] : i, per = a->Hv * a->Dk * a->Dv;
    gdn_delta_args d = *a;
    d.B = 1;
    d.T = a->cu_seqlens ? a->cu_seqlens[i + 1] - t0 : a->T;
    d.q = (const char *)a->q + (size_t)(t0 * a->Hk * a->Dk) * ds;
    d.k = (const char *)a->k + (size_t)(t0 * a->Hk * a->Dk) * ds;
    d.v = (const char *)a->v + (size_t)(t0 * a->Hv * a->Dv) * ds;
    d.y = (char *)a->y + (size_t)(t0 * a->Hv * a->Dv) * ds;
    d.gate += t0 * a->Hv * (a->gate_kind == GDN_GATE_VECTOR ? a->Dk : 1);
    d.beta += t0 * a->Hv;
    if (d.mask) d.mask += t0;
    d.state_in = a->state_in && slot >= 0 ? a->state_in + slot * per : NULL;
    d.state_out = a->state_out && slot >= 0 ? a->state_out + slot * per : NULL;
    d.cu_seqlens = NULL, d.state_slot = NULL, d.slots = 0;
    return d;
}

/* What the batch form must equal: one dense call per sequence, +0 into the y rows of a skipped one. */
static gdn_status separate_calls(const gdn_delta_args *a) {
    for (int64_t i = 0; i < a->B; ++i) {
        const gdn_delta_args d = window_call(a, i);
        if (a->state_slot && a->state_slot[i] < 0) {
            memset(d.y, 0, (size_t)(d.T * d.Hv * d.Dv) * (d.dtype == GDN_F32 ? 4 : 2));
            continue;
        }
        const gdn_status s = gdn_delta(&d);
        if (s != GDN_OK) return s;
    }
    return GDN_OK;
}

/* How a run passes the pools. */
typedef enum pool_mode { POOL_SEPARATE, POOL_IN_PLACE, POOL_OUT_NULL, POOL_IN_NULL, POOL_MODES } pool_mode;

/* The pools of a run: state_in / state_out per mode, out poisoned (separate) or a copy of the initial pool. */
static void set_pools(gdn_delta_args *a, pool_mode mode, const float *initial, float *out, size_t n) {
    if (mode == POOL_IN_PLACE) memcpy(out, initial, n * 4);
    else poison(out, n * 4);
    a->state_in = mode == POOL_IN_NULL ? NULL : mode == POOL_IN_PLACE ? out : initial;
    a->state_out = mode == POOL_OUT_NULL ? NULL : out;
}

/* 1 when slot s is named by a sequence of the batch. */
static int named(const batch *b, int64_t s) {
    for (int64_t i = 0; i < b->B; ++i)
        if (b->slot[i] == s) return 1;
    return 0;
}

static size_t y_bytes(const gdn_case *c) { return c->n_v * c->dsize; }

/* The batch form against separate calls for one configuration, every CPU kernel and the router. */
static void check_batch(const case_cfg *g, const batch *bt, pool_mode mode, int *runs) {
    gdn_case c;
    CHECK(case_init(&c, g));
    const size_t per = (size_t)(g->Hv * g->Dk * g->Dv), n_pool = (size_t)bt->slots * per, ny = y_bytes(&c);
    float *initial = malloc(n_pool * 4), *pool = malloc(n_pool * 4), *pool_ref = malloc(n_pool * 4);
    void *y = malloc(ny), *y_ref = malloc(ny);
    CHECK(initial && pool && pool_ref && y && y_ref);
    harness_rng r = {g->seed + 77};
    for (size_t i = 0; initial && i < n_pool; ++i) initial[i] = 0.3f * rng_normal(&r);
    for (int k = -1; initial && pool && pool_ref && y && y_ref && k < gdn_kernel_count(); ++k) {
        if (k >= 0 && gdn_kernel_backend(k) != GDN_BACKEND_CPU) continue;
        gdn_delta_args a = case_args(&c);
        a.B = bt->B, a.T = 0, a.cu_seqlens = bt->cu, a.state_slot = bt->slot, a.slots = bt->slots;
        a.kernel = k < 0 ? NULL : gdn_kernel_name(k);
        const char *kname = k < 0 ? "(routed)" : a.kernel;
        a.y = y;
        poison(y, ny);
        set_pools(&a, mode, initial, pool, n_pool);
        if (k >= 0 && !gdn_kernel_eligible(k, &a)) {
            CHECK(gdn_delta(&a) == GDN_ERR_INELIGIBLE && poisoned_count(y, c.n_v, c.dsize) == c.n_v, "%s: %s",
                  kname, gdn_last_error());
            continue;
        }
        CHECK(gdn_delta(&a) == GDN_OK, "%s: %s (%s)", kname, gdn_last_error(), case_describe(g));
        gdn_delta_args ref = a;
        ref.y = y_ref;
        poison(y_ref, ny);
        set_pools(&ref, mode, initial, pool_ref, n_pool);
        CHECK(separate_calls(&ref) == GDN_OK, "%s: %s", kname, gdn_last_error());
        CHECK(memcmp(y, y_ref, ny) == 0, "%s: y differs from separate calls (%s, pools %d)", kname, case_describe(g),
              (int)mode);
        CHECK(memcmp(pool, pool_ref, n_pool * 4) == 0, "%s: the pool differs from separate calls (%s, pools %d)", kname,
              case_describe(g), (int)mode);
        for (int64_t i = 0; i < bt->B; ++i)
            if (bt->slot[i] < 0) {
                const size_t row = (size_t)(g->Hv * g->Dv) * c.dsize, n = (size_t)(bt->cu[i + 1] - bt->cu[i]) * row;
                const unsigned char *rows = (const unsigned char *)y + (size_t)bt->cu[i] * row;
                int zero = 1;
                for (size_t e = 0; e < n; ++e) zero &= rows[e] == 0;
                CHECK(zero, "%s: the y rows of skipped sequence %lld are not +0", kname, (long long)i);
            }
        for (int64_t s = 0; s < bt->slots; ++s)
            if (!named(bt, s) && mode != POOL_OUT_NULL) {
                const float *was = mode == POOL_IN_PLACE ? initial + s * per : NULL;
                CHECK(was ? memcmp(pool + s * per, was, per * 4) == 0 : poisoned_count(pool + s * per, per, 4) == per,
                      "%s: slot %lld is named by no sequence but was written", kname, (long long)s);
            }
        if (k < 0) { /* the router's name for the batch: its choice for the longest window (the first of them) */
            int64_t longest = 0;
            for (int64_t i = 1; i < bt->B; ++i)
                if (bt->cu[i + 1] - bt->cu[i] > bt->cu[longest + 1] - bt->cu[longest]) longest = i;
            const gdn_delta_args w = window_call(&a, longest);
            const char *got = NULL, *want = NULL;
            CHECK(gdn_route(&a, &got) == GDN_OK && gdn_route(&w, &want) == GDN_OK && got && want && strcmp(got, want) == 0,
                  "gdn_route of the batch: %s, of its longest window: %s", got ? got : "-", want ? want : "-");
        }
        ++*runs;
    }
    free(initial), free(pool), free(pool_ref), free(y), free(y_ref);
    case_free(&c);
}

TEST(batch_form_equals_separate_calls) {
    /* mixed windows over a pool of 9 (sequence 2 skipped; slots 1, 3, 4, 7 named by none), and decode steps */
    static const int32_t mixed[] = {1, 2, 7, 16, 33, 3}, mixed_slots[] = {5, 0, -1, 8, 2, 6};
    static const int32_t decode[] = {1, 2, 1, 1, 2}, decode_slots[] = {3, -1, 0, 4, 1};
    /* state_out NULL: two sequences may share a slot */
    static const int32_t shared_mixed[] = {5, 0, -1, 5, 2, 6}, shared_decode[] = {3, -1, 3, 4, 1};
    int runs = 0, n = 0;
    for (int set = 0; set < 2; ++set)
        for (int dt = 0; dt < 2; ++dt)
            for (int layout = 0; layout < 2; ++layout)
                for (int mask = 0; mask < 2; ++mask)
                    for (int mode = 0; mode < POOL_MODES; ++mode, ++n) {
                        const int shared = mode == POOL_OUT_NULL;
                        const batch bt = set == 0 ? make_batch(mixed, shared ? shared_mixed : mixed_slots, 6, 9)
                                                  : make_batch(decode, shared ? shared_decode : decode_slots, 5, 6);
                        const case_cfg g = {.B = 1, .T = bt.cu[bt.B], .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 32,
                                            .dtype = dt ? GDN_BF16 : GDN_F32, .gate_kind = (gdn_gate_kind)(n % 4),
                                            .beta_kind = (gdn_beta_kind)(n / 4 % 2), .layout = (gdn_state_layout)layout,
                                            .mask = mask, .state_in = 0, .seed = 500u + (uint64_t)n};
                        check_batch(&g, &bt, (pool_mode)mode, &runs);
                    }
    CHECK(runs >= 64, "only %d runs", runs);
}

TEST(batch_form_dense_slots_equal_no_slots) {
    static const int32_t slot[] = {3, 0, 5, 1}; /* slots 2 and 4 named by none */
    const case_cfg g = {.B = 4, .T = 9, .Hk = 1, .Hv = 2, .Dk = 64, .Dv = 16, .dtype = GDN_BF16,
                        .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .layout = GDN_STATE_KV, .mask = 1,
                        .state_in = 1, .seed = 31};
    gdn_case c;
    CHECK(case_init(&c, &g));
    const size_t per = (size_t)(g.Hv * g.Dk * g.Dv), ny = y_bytes(&c), n_pool = 6 * per;
    void *y0 = malloc(ny), *y = malloc(ny);
    float *s0 = malloc(c.n_state * 4), *initial = malloc(n_pool * 4), *pool = malloc(n_pool * 4);
    CHECK(y0 && y && s0 && initial && pool);
    if (initial) { /* the case's states at their slots, poison elsewhere */
        poison(initial, n_pool * 4);
        for (int64_t b = 0; b < g.B; ++b) memcpy(initial + slot[b] * per, c.state_in + b * per, per * 4);
    }
    for (int k = 0; y0 && y && s0 && initial && pool && k < gdn_kernel_count(); ++k) {
        if (gdn_kernel_backend(k) != GDN_BACKEND_CPU) continue;
        const char *name = gdn_kernel_name(k);
        const gdn_status st0 = case_run(&c, name, 0, CASE_STATE_SEPARATE, y0, s0);
        if (st0 == GDN_ERR_INELIGIBLE) continue;
        CHECK(st0 == GDN_OK, "%s: %s", name, gdn_last_error());
        for (int in_place = 0; in_place < 2; ++in_place) {
            if (in_place) memcpy(pool, initial, n_pool * 4);
            else poison(pool, n_pool * 4);
            gdn_delta_args a = case_args(&c);
            a.kernel = name, a.y = y, a.state_slot = slot, a.slots = 6;
            a.state_in = in_place ? pool : initial;
            a.state_out = pool;
            poison(y, ny);
            CHECK(gdn_delta(&a) == GDN_OK, "%s: %s", name, gdn_last_error());
            CHECK(memcmp(y, y0, ny) == 0, "%s: y through slots differs", name);
            for (int64_t b = 0; b < g.B; ++b)
                CHECK(memcmp(pool + slot[b] * per, s0 + b * per, per * 4) == 0, "%s: sequence %lld's slot differs", name,
                      (long long)b);
            CHECK(poisoned_count(pool + 2 * per, per, 4) == per && poisoned_count(pool + 4 * per, per, 4) == per,
                  "%s: a slot named by none was written", name);
        }
    }
    free(y0), free(y), free(s0), free(initial), free(pool);
    case_free(&c);
}

/* A skipped sequence's slot far below 0 with a large state: its offset (slot Hv Dk Dv) is never computed as a size
 * (it overflowed int64: make sanitize traps that). The tensors are addresses never touched; gdn_route only. */
TEST(batch_form_skipped_slot_far_below_zero) {
    const int32_t cu[2] = {0, 1}, slot[1] = {INT32_MIN};
    char *base = (char *)((uintptr_t)1 << 44);
    gdn_delta_args a;
    memset(&a, 0, sizeof a);
    a.B = 1, a.Hk = 1, a.Hv = 2, a.Dk = (int64_t)1 << 17, a.Dv = (int64_t)1 << 16, a.dtype = GDN_BF16;
    a.cu_seqlens = cu, a.state_slot = slot, a.slots = 1;
    a.q = base, a.k = base + ((int64_t)1 << 40), a.v = base + ((int64_t)2 << 40), a.y = base + ((int64_t)3 << 40);
    a.gate = (const float *)(base + ((int64_t)4 << 40)), a.beta = (const float *)(base + ((int64_t)5 << 40));
    a.state_in = (const float *)(base + ((int64_t)6 << 40)), a.state_out = (float *)(base + ((int64_t)8 << 40));
    a.scale = 1.0f;
    const char *name = NULL;
    CHECK(gdn_route(&a, &name) == GDN_OK && name, "%s", gdn_last_error());
}

TEST(batch_form_bad_arrays_write_nothing) {
    static const int32_t lengths[] = {3, 1, 4, 2}, slots[] = {2, 0, 4, 1};
    const batch good = make_batch(lengths, slots, 4, 5);
    const case_cfg g = {.B = 1, .T = good.cu[4], .Hk = 1, .Hv = 2, .Dk = 32, .Dv = 8, .dtype = GDN_F32, .seed = 3};
    gdn_case c;
    CHECK(case_init(&c, &g));
    const size_t ny = y_bytes(&c), n_pool = (size_t)good.slots * (size_t)(g.Hv * g.Dk * g.Dv);
    void *y = malloc(ny);
    float *pool = malloc(n_pool * 4);
    CHECK(y && pool);
    const struct { const char *field; gdn_status want; } cases[] = {
        {"args->cu_seqlens[0]", GDN_ERR_BAD_SIZE}, {"args->cu_seqlens[3]", GDN_ERR_BAD_SIZE},
        {"args->T", GDN_ERR_BAD_SIZE},             {"args->state_slot[2]", GDN_ERR_BAD_SIZE},
        {"slot 2", GDN_ERR_OVERLAP},               {"args->slots", GDN_ERR_BAD_SIZE},
        {"args->slots", GDN_ERR_BAD_SIZE},         {"args->T", GDN_ERR_BAD_SIZE},
        {"the batch is empty", GDN_ERR_BAD_SIZE}};
    for (int i = 0; y && pool && i < (int)(sizeof cases / sizeof cases[0]); ++i) {
        batch bt = good;
        gdn_delta_args a = case_args(&c);
        a.B = bt.B, a.T = 0, a.cu_seqlens = bt.cu, a.state_slot = bt.slot, a.slots = bt.slots, a.y = y, a.state_out = pool;
        switch (i) {
        case 0: bt.cu[0] = 1; break;                   /* offsets not starting at 0 */
        case 1: bt.cu[3] = bt.cu[2]; break;            /* not increasing */
        case 2: a.T = good.cu[4] + 1; break;           /* T neither 0 nor cu_seqlens[B] */
        case 3: bt.slot[2] = (int32_t)bt.slots; break; /* a slot past the pools */
        case 4: bt.slot[3] = bt.slot[0]; break;        /* slot 2 written twice */
        case 5: a.slots = 0; break;                    /* slots < 1 with state_slot */
        case 6: a.state_slot = NULL; break;            /* slots without state_slot */
        case 7: a.cu_seqlens = NULL, a.B = 4; break;   /* the dense form's T = 0 */
        default: /* no tokens, the tensors NULL (as a binding passes empty ones): the batch is named, not q */
            memset(bt.cu, 0, sizeof bt.cu), a.q = a.k = a.v = NULL, a.y = NULL;
            break;
        }
        poison(y, ny);
        memset(pool, 0x5a, n_pool * 4);
        const gdn_status st = gdn_delta(&a);
        CHECK(st == cases[i].want, "case %d: %s (%s)", i, gdn_status_str(st), gdn_last_error());
        CHECK(strstr(gdn_last_error(), cases[i].field) != NULL, "case %d: \"%s\" does not name %s", i, gdn_last_error(),
              cases[i].field);
        const char *name = NULL;
        CHECK(gdn_route(&a, &name) == cases[i].want && name == NULL, "case %d: gdn_route disagrees", i);
        int clean = poisoned_count(y, c.n_v, c.dsize) == c.n_v;
        for (size_t e = 0; e < n_pool * 4; ++e) clean &= ((const unsigned char *)pool)[e] == 0x5a;
        CHECK(clean, "case %d: a rejected call wrote an output", i);
    }
    /* a slot named twice is fine when nothing is written */
    batch bt = good;
    bt.slot[3] = bt.slot[0];
    gdn_delta_args a = case_args(&c);
    a.B = bt.B, a.T = 0, a.cu_seqlens = bt.cu, a.state_slot = bt.slot, a.slots = bt.slots, a.y = y, a.state_in = pool;
    if (y && pool) CHECK(gdn_delta(&a) == GDN_OK, "a shared slot read only: %s", gdn_last_error());
    free(y), free(pool);
    case_free(&c);
}
