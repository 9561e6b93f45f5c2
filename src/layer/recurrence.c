/* The layer step's recurrence as gdn_delta calls, a sequence at a time (a uniform batch in one call), on either
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

int gdn__layer_uniform(const gdn__layer_problem *p) {
    const int64_t n = gdn__seq_len(p, 0), k = gdn__seq_commit(p, 0);
    if (p->a.n_checkpoints || (k != 0 && k != n)) return 0;
    for (int64_t b = 0; b < p->a.B; ++b)
        if (gdn__seq_slot(p, b) < 0 || gdn__seq_fresh(p, b) || gdn__seq_len(p, b) != n || gdn__seq_commit(p, b) != k)
            return 0;
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

gdn_status gdn__layer_recurrence(const gdn__layer_problem *p, const gdn__layer_buffers *bufs, const char *delta_kernel) {
    if (p->a.B > 1 && gdn__layer_uniform(p)) {
        const int64_t n = gdn__seq_len(p, 0);
        return delta(p, bufs, 0, p->a.B, n, p->a.state, gdn__seq_commit(p, 0) ? p->a.state : NULL, p->a.slot, delta_kernel);
    }
    gdn_status s = GDN_OK;
    for (int64_t b = 0; b < p->a.B && s == GDN_OK; ++b)
        if (gdn__seq_slot(p, b) >= 0) s = sequence(p, bufs, b, delta_kernel);
    return s;
}
