/* The layer step's recurrence as gdn_delta calls, a sequence at a time (runs of like windows in one call), on either
 * backend: the path of the staged kernels (src/layer/cpu/staged.c, src/layer/cuda/staged.cu), so that a long window
 * runs the fastest recurrence kernel the router has, under the same contract.
 *
 * The calls are walked twice: the first pass prepares each (gdn__delta_prepare: validation, kernels) and sizes the
 * largest host workspace, and device workspace (cuda_chunked's, under "fastest"); the second runs them all in those
 * (gdn__delta_execute, which allocates nothing). So every allocation comes before the first state is written: a call
 * that cannot get its memory writes nothing. A sequence's checkpoints are found in a copy of them sorted by sequence
 * and position, so that their cost grows as n log n with their number. */
#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"
#include "layer/layer.h"

/* One pass over the calls. */
typedef struct walk {
    const gdn__layer_problem *p;
    const gdn__layer_buffers *w;
    const char *kernel;             /* the gdn_delta kernel name, or NULL for the router */
    const gdn_layer_checkpoint *ck; /* the checkpoints sorted by sequence, then position (NULL: none) */
    int run;                        /* 0: prepare every call and size the workspace; 1: run them */
    int64_t ws_bytes;               /* the largest call's host workspace (pass 0); ws's size (pass 1) */
    void *ws;
    int64_t dev_bytes;              /* the same for the device workspace of cuda_chunked (CUDA, "fastest") */
    void *dev_ws;
} walk;

/* The gdn_delta call over the stages' buffers from token s0: B sequences of T tokens each, from the state `from`
 * (NULL: zero), into `into` (NULL: not written). */
static gdn_status delta(walk *k, int64_t s0, int64_t B, int64_t T, const float *from, float *into, const int32_t *slot) {
    const gdn__layer_problem *p = k->p;
    const gdn__layer_buffers *w = k->w;
    const gdn_layer_args *a = &p->a;
    gdn_delta_args d;
    memset(&d, 0, sizeof d);
    d.B = B, d.T = T, d.Hk = a->Hk, d.Hv = a->Hv, d.Dk = a->Dk, d.Dv = a->Dv;
    d.dtype = GDN_F32;
    d.q = w->q + s0 * a->Hk * a->Dk, d.k = w->k + s0 * a->Hk * a->Dk, d.v = w->v + s0 * a->Hv * a->Dv;
    d.y = w->o + s0 * a->Hv * a->Dv;
    d.gate_kind = GDN_GATE_DECAY, d.gate = w->g + s0 * a->Hv;
    d.beta_kind = GDN_BETA_DIRECT, d.beta = w->beta + s0 * a->Hv;
    d.state_layout = a->state_layout;
    d.head_map = a->head_map;
    d.state_in = from;
    d.state_out = into;
    d.scale = p->scale;
    d.backend = a->backend;
    d.stream = a->stream;
    d.kernel = k->kernel;
    d.threads = a->threads;
    d.cpu_runner = a->cpu_runner;
    d.state_slot = slot, d.slots = slot ? a->slots : 0;
    const int hand_off = w->qh && !k->kernel && T >= GDN_CHUNKED_MIN_T;
    if (hand_off) { /* the chunked hand-off: bf16 inputs, the log-decay, the readout in bf16 then widened */
        d.dtype = GDN_BF16;
        d.q = w->qh + s0 * a->Hk * a->Dk, d.k = w->kh + s0 * a->Hk * a->Dk, d.v = w->vh + s0 * a->Hv * a->Dv;
        d.y = w->oh + s0 * a->Hv * a->Dv;
        d.gate_kind = GDN_GATE_LOG_DECAY, d.gate = w->lg + s0 * a->Hv;
        d.kernel = "fastest";
    }
    gdn__delta_call c;
    gdn_status s = gdn__delta_prepare(&d, &c);
    if (s != GDN_OK) return s;
    if (!k->run) {
        k->ws_bytes = c.ws_bytes > k->ws_bytes ? c.ws_bytes : k->ws_bytes;
        k->dev_bytes = c.dev_bytes > k->dev_bytes ? c.dev_bytes : k->dev_bytes;
        return GDN_OK;
    }
    if (c.ws_bytes > k->ws_bytes || c.dev_bytes > k->dev_bytes) return GDN_ERR_OUT_OF_MEMORY; /* (pass 0: never) */
    s = gdn__delta_execute(&c, k->ws, k->dev_ws);
    if (s != GDN_OK || !hand_off) return s;
    return gdn__layer_cuda_widen(w->o + s0 * a->Hv * a->Dv, w->oh + s0 * a->Hv * a->Dv, B * T * a->Hv * a->Dv, a->stream);
}

/* Tokens [t0, t1) of sequence b: from the state `from` (NULL: zero), into `into` (NULL: not written). */
static gdn_status window(walk *k, int64_t b, int64_t t0, int64_t t1, const float *from, float *into) {
    return delta(k, gdn__seq_start(k->p, b) + t0, 1, t1 - t0, from, into, NULL);
}

/* Sequence b's checkpoints: k->ck[*lo .. *hi) (none without checkpoints). */
static void checkpoints_of(const walk *k, int64_t b, int64_t *lo, int64_t *hi) {
    const int64_t n = k->ck ? k->p->a.n_checkpoints : 0;
    int64_t l = 0, h = n;
    while (l < h) { /* the first of a sequence >= b */
        const int64_t m = l + (h - l) / 2;
        if (k->ck[m].seq < b) l = m + 1;
        else h = m;
    }
    *lo = l, h = n;
    while (l < h) { /* the first of a sequence > b */
        const int64_t m = l + (h - l) / 2;
        if (k->ck[m].seq <= b) l = m + 1;
        else h = m;
    }
    *hi = l;
}

/* Whether sequence b's window runs as one plain call: a slot, not fresh, committing all or none, no checkpoint
 * (k NULL: there are none). */
static int plain(const gdn__layer_problem *p, const walk *k, int64_t b) {
    const int64_t n = gdn__seq_len(p, b), c = gdn__seq_commit(p, b);
    if (gdn__seq_slot(p, b) < 0 || gdn__seq_fresh(p, b) || (c != 0 && c != n)) return 0;
    int64_t lo = 0, hi = 0;
    if (k) checkpoints_of(k, b, &lo, &hi);
    return lo == hi;
}

/* Whether sequences b and c run in one call: both plain, with the same window and commit. */
static int same_run(const gdn__layer_problem *p, const walk *k, int64_t b, int64_t c) {
    return plain(p, k, b) && plain(p, k, c) && gdn__seq_len(p, b) == gdn__seq_len(p, c) &&
           gdn__seq_commit(p, b) == gdn__seq_commit(p, c);
}

int gdn__layer_uniform(const gdn__layer_problem *p) {
    if (p->a.n_checkpoints > 0) return 0; /* a checkpoint's sequence is not plain */
    for (int64_t b = 0; b < p->a.B; ++b)
        if (!same_run(p, NULL, 0, b)) return 0;
    return 1;
}

/* The state of one (sequence's) slot, `bytes` long, copied on the call's backend. */
static gdn_status copy_state(const gdn__layer_problem *p, float *dst, const float *src, size_t bytes) {
    if (p->a.backend == GDN_BACKEND_CUDA) return gdn__cuda_copy(dst, src, bytes, p->a.stream);
    memcpy(dst, src, bytes);
    return GDN_OK;
}

/* Sequence b's window as segments ending at its checkpoints, at its commit count c (0 < c) and at n: each segment
 * runs from the state the last one left, into the slot it ends at (the sequence's own at c, a checkpoint's, none at n
 * past c); further checkpoints at the same position get copies. */
static gdn_status sequence(walk *k, int64_t b) {
    const gdn__layer_problem *p = k->p;
    const gdn_layer_args *a = &p->a;
    const int64_t n = gdn__seq_len(p, b), c = gdn__seq_commit(p, b), per = a->Hv * a->Dk * a->Dv;
    const size_t bytes = (size_t)per * sizeof(float);
    float *own = a->state + gdn__seq_slot(p, b) * per;
    const float *from = gdn__seq_fresh(p, b) ? NULL : own;
    int64_t i = 0, hi = 0; /* b's checkpoints after `at`: k->ck[i .. hi) */
    checkpoints_of(k, b, &i, &hi);
    for (int64_t at = 0, end; at < n; at = end) {
        end = c > at && c < n ? c : n; /* the next boundary after `at` */
        if (i < hi && k->ck[i].after < end) end = k->ck[i].after;
        float *into = end == c ? own : i < hi && k->ck[i].after == end ? a->state + k->ck[i].slot * per : NULL;
        gdn_status s = window(k, b, at, end, from, into);
        for (; s == GDN_OK && i < hi && k->ck[i].after == end; ++i) {
            float *ck = a->state + k->ck[i].slot * per;
            if (k->run && ck != into) s = copy_state(p, ck, into, bytes);
        }
        if (s != GDN_OK) return s;
        from = into ? into : from;
    }
    return GDN_OK;
}

/* Each run of two or more consecutive plain sequences with the same window and commit (a batch's decode steps or
 * verify windows, a uniform batch whole) in one batch-form call over the pool, the others a sequence at a time. */
static gdn_status walk_calls(walk *k) {
    const gdn__layer_problem *p = k->p;
    const gdn_layer_args *a = &p->a;
    gdn_status s = GDN_OK;
    for (int64_t b0 = 0, b1 = 0; b0 < a->B && s == GDN_OK; b0 = b1) { /* the run b0 .. b1 - 1 */
        b1 = b0 + 1;
        while (b1 < a->B && same_run(p, k, b0, b1)) ++b1;
        if (b1 - b0 == 1) {
            if (gdn__seq_slot(p, b0) >= 0) s = sequence(k, b0);
            continue;
        }
        float *state = a->slot ? a->state : a->state + b0 * a->Hv * a->Dk * a->Dv; /* no slots: entry b */
        s = delta(k, gdn__seq_start(p, b0), b1 - b0, gdn__seq_len(p, b0), state, gdn__seq_commit(p, b0) ? state : NULL,
                  a->slot ? a->slot + b0 : NULL);
    }
    return s;
}

static int by_position(const void *x, const void *y) {
    const gdn_layer_checkpoint *a = x, *b = y;
    if (a->seq != b->seq) return (a->seq > b->seq) - (a->seq < b->seq);
    if (a->after != b->after) return (a->after > b->after) - (a->after < b->after);
    return (a->slot > b->slot) - (a->slot < b->slot);
}

gdn_status gdn__layer_recurrence(const gdn__layer_problem *p, const gdn__layer_buffers *bufs, const char *delta_kernel) {
    const gdn_layer_args *a = &p->a;
    walk k = {p, bufs, delta_kernel, NULL, 0, 0, NULL, 0, NULL};
    gdn_layer_checkpoint *sorted = NULL;
    if (a->n_checkpoints > 0) {
        if (!(sorted = gdn__malloc((size_t)a->n_checkpoints * sizeof *sorted))) return GDN_ERR_OUT_OF_MEMORY;
        memcpy(sorted, a->checkpoints, (size_t)a->n_checkpoints * sizeof *sorted);
        qsort(sorted, (size_t)a->n_checkpoints, sizeof *sorted, by_position);
        k.ck = sorted;
    }
    gdn_status s = walk_calls(&k);
    size_t kept = 0;
    if (s == GDN_OK && k.ws_bytes > 0 && !(k.ws = gdn__ws_take((size_t)k.ws_bytes, &kept))) s = GDN_ERR_OUT_OF_MEMORY;
    if (s == GDN_OK && k.dev_bytes > 0) s = gdn__cuda_alloc(&k.dev_ws, k.dev_bytes, a->stream);
    if (s == GDN_OK) {
        k.run = 1;
        s = walk_calls(&k);
    }
    const gdn_status freed = gdn__cuda_free(k.dev_ws, a->stream);
    gdn__ws_give(k.ws, kept);
    free(sorted);
    return s != GDN_OK ? s : freed;
}
