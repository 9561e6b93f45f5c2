/* The layer step's recurrence as gdn_delta calls, a sequence at a time (runs of like windows in one call), on either
 * backend: the path of the staged kernels (src/layer/cpu/staged.c, src/layer/cuda/staged.cu), so that a long window
 * runs the fastest recurrence kernel the router has, under the same contract. */
#include <string.h>

#include "gdn_internal.h"
#include "layer/layer.h"

/* The gdn_delta call over the stages' buffers from token s0: B sequences of T tokens each, from the state `from`
 * (NULL: zero), into `into` (NULL: not written). */
static gdn_status delta(const gdn__layer_problem *p, const gdn__layer_buffers *w, int64_t s0, int64_t B, int64_t T,
                        const float *from, float *into, const int32_t *slot, const char *kernel) {
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
    d.state_in = from;
    d.state_out = into;
    d.scale = p->scale;
    d.backend = a->backend;
    d.stream = a->stream;
    d.kernel = kernel;
    d.threads = a->threads;
    d.cpu_runner = a->cpu_runner;
    d.state_slot = slot, d.slots = slot ? a->slots : 0;
    if (!w->qh || kernel || T < GDN_CHUNKED_MIN_T) return gdn_delta(&d);
    /* the chunked hand-off: bf16 inputs, the log-decay, the readout in bf16 then widened */
    d.dtype = GDN_BF16;
    d.q = w->qh + s0 * a->Hk * a->Dk, d.k = w->kh + s0 * a->Hk * a->Dk, d.v = w->vh + s0 * a->Hv * a->Dv;
    d.y = w->oh + s0 * a->Hv * a->Dv;
    d.gate_kind = GDN_GATE_LOG_DECAY, d.gate = w->lg + s0 * a->Hv;
    d.kernel = "fastest";
    const gdn_status s = gdn_delta(&d);
    return s != GDN_OK ? s : gdn__layer_cuda_widen(w->o + s0 * a->Hv * a->Dv, w->oh + s0 * a->Hv * a->Dv,
                                                   B * T * a->Hv * a->Dv, a->stream);
}

/* Tokens [t0, t1) of sequence b: from the state `from` (NULL: zero), into `into` (NULL: not written). */
static gdn_status window(const gdn__layer_problem *p, const gdn__layer_buffers *w, int64_t b, int64_t t0, int64_t t1,
                         const float *from, float *into, const char *kernel) {
    return delta(p, w, gdn__seq_start(p, b) + t0, 1, t1 - t0, from, into, NULL, kernel);
}

/* Whether sequence b's window runs as one plain call: a slot, not fresh, no checkpoint, committing all or none. */
static int plain(const gdn__layer_problem *p, int64_t b) {
    const int64_t n = gdn__seq_len(p, b), k = gdn__seq_commit(p, b);
    if (gdn__seq_slot(p, b) < 0 || gdn__seq_fresh(p, b) || (k != 0 && k != n)) return 0;
    for (int64_t i = 0; i < p->a.n_checkpoints; ++i)
        if (p->a.checkpoints[i].seq == b) return 0;
    return 1;
}

/* Whether sequences b and c run in one call: both plain, with the same window and commit. */
static int same_run(const gdn__layer_problem *p, int64_t b, int64_t c) {
    return plain(p, b) && plain(p, c) && gdn__seq_len(p, b) == gdn__seq_len(p, c) &&
           gdn__seq_commit(p, b) == gdn__seq_commit(p, c);
}

int gdn__layer_uniform(const gdn__layer_problem *p) {
    for (int64_t b = 0; b < p->a.B; ++b)
        if (!same_run(p, 0, b)) return 0;
    return 1;
}

/* The state of one (sequence's) slot, `bytes` long, copied on the call's backend. */
static gdn_status copy_state(const gdn__layer_problem *p, float *dst, const float *src, size_t bytes) {
    if (p->a.backend == GDN_BACKEND_CUDA) return gdn__cuda_copy(dst, src, bytes, p->a.stream);
    memcpy(dst, src, bytes);
    return GDN_OK;
}

/* Sequence b's window as segments ending at its checkpoints, at k (0 < k) and at n: each segment runs from the
 * state the last one left, into the slot it ends at (the sequence's own at k, a checkpoint's, none at n past k);
 * further checkpoints at the same position get copies. */
static gdn_status sequence(const gdn__layer_problem *p, const gdn__layer_buffers *w, int64_t b, const char *kernel) {
    const gdn_layer_args *a = &p->a;
    const int64_t n = gdn__seq_len(p, b), k = gdn__seq_commit(p, b), per = a->Hv * a->Dk * a->Dv;
    const size_t bytes = (size_t)per * sizeof(float);
    float *own = a->state + gdn__seq_slot(p, b) * per;
    const float *from = gdn__seq_fresh(p, b) ? NULL : own;
    int64_t at = 0;
    while (at < n) {
        int64_t end = n; /* the next boundary after `at` */
        if (k > at && k < end) end = k;
        for (int64_t i = 0; i < a->n_checkpoints; ++i)
            if (a->checkpoints[i].seq == b && a->checkpoints[i].after > at && a->checkpoints[i].after < end)
                end = a->checkpoints[i].after;
        float *into = end == k ? own : NULL;
        for (int64_t i = 0; i < a->n_checkpoints && !into; ++i)
            if (a->checkpoints[i].seq == b && a->checkpoints[i].after == end) into = a->state + a->checkpoints[i].slot * per;
        gdn_status s = window(p, w, b, at, end, from, into, kernel);
        for (int64_t i = 0; i < a->n_checkpoints && s == GDN_OK; ++i) {
            float *ck = a->state + a->checkpoints[i].slot * per;
            if (a->checkpoints[i].seq == b && a->checkpoints[i].after == end && ck != into) s = copy_state(p, ck, into, bytes);
        }
        if (s != GDN_OK) return s;
        from = into ? into : from;
        at = end;
    }
    return GDN_OK;
}

/* Each run of two or more consecutive plain sequences with the same window and commit (a batch's decode steps or
 * verify windows, a uniform batch whole) in one batch-form call over the pool, the others a sequence at a time. */
gdn_status gdn__layer_recurrence(const gdn__layer_problem *p, const gdn__layer_buffers *bufs, const char *delta_kernel) {
    const gdn_layer_args *a = &p->a;
    gdn_status s = GDN_OK;
    for (int64_t b0 = 0, b1 = 0; b0 < a->B && s == GDN_OK; b0 = b1) { /* the run b0 .. b1 - 1 */
        b1 = b0 + 1;
        while (b1 < a->B && same_run(p, b0, b1)) ++b1;
        if (b1 - b0 == 1) {
            if (gdn__seq_slot(p, b0) >= 0) s = sequence(p, bufs, b0, delta_kernel);
            continue;
        }
        float *state = a->slot ? a->state : a->state + b0 * a->Hv * a->Dk * a->Dv; /* no slots: entry b */
        s = delta(p, bufs, gdn__seq_start(p, b0), b1 - b0, gdn__seq_len(p, b0), state,
                  gdn__seq_commit(p, b0) ? state : NULL, a->slot ? a->slot + b0 : NULL, delta_kernel);
    }
    return s;
}
