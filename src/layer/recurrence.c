/* The layer step's recurrence as gdn_delta calls, a sequence at a time, on either backend: the path of the staged
 * kernels (src/layer/cpu/staged.c, src/layer/cuda/staged.cu), so that a long window runs the fastest recurrence
 * kernel the router has, under the same contract. */
#include <string.h>

#include "layer/layer.h"

/* Tokens [t0, t1) of sequence b: from the slot's state (or zero), writing it back if `write`. */
static gdn_status window(const gdn__layer_problem *p, const gdn__layer_buffers *w, int64_t b, int64_t t0, int64_t t1,
                         int from_slot, int write, const char *kernel) {
    const gdn_layer_args *a = &p->a;
    const int64_t s0 = gdn__seq_start(p, b) + t0;
    float *state = a->state + gdn__seq_slot(p, b) * a->Hv * a->Dk * a->Dv;
    gdn_delta_args d;
    memset(&d, 0, sizeof d);
    d.B = 1, d.T = t1 - t0, d.Hk = a->Hk, d.Hv = a->Hv, d.Dk = a->Dk, d.Dv = a->Dv;
    d.dtype = GDN_F32;
    d.q = w->q + s0 * a->Hk * a->Dk, d.k = w->k + s0 * a->Hk * a->Dk, d.v = w->v + s0 * a->Hv * a->Dv;
    d.y = w->o + s0 * a->Hv * a->Dv;
    d.gate_kind = GDN_GATE_DECAY, d.gate = w->g + s0 * a->Hv;
    d.beta_kind = GDN_BETA_DIRECT, d.beta = w->beta + s0 * a->Hv;
    d.state_layout = a->state_layout;
    d.state_in = from_slot ? state : NULL;
    d.state_out = write ? state : NULL;
    d.scale = p->scale;
    d.backend = a->backend;
    d.stream = a->stream;
    d.kernel = kernel;
    d.threads = a->threads;
    d.cpu_runner = a->cpu_runner;
    return gdn_delta(&d);
}

gdn_status gdn__layer_recurrence(const gdn__layer_problem *p, const gdn__layer_buffers *bufs, const char *delta_kernel) {
    gdn_status s = GDN_OK;
    for (int64_t b = 0; b < p->a.B && s == GDN_OK; ++b) {
        if (gdn__seq_slot(p, b) < 0) continue;
        const int64_t n = gdn__seq_len(p, b), k = gdn__seq_commit(p, b);
        const int from_slot = !gdn__seq_fresh(p, b);
        if (k == 0 || k == n) {
            s = window(p, bufs, b, 0, n, from_slot, k == n, delta_kernel);
        } else {
            s = window(p, bufs, b, 0, k, from_slot, 1, delta_kernel);
            if (s == GDN_OK) s = window(p, bufs, b, k, n, 1, 0, delta_kernel);
        }
    }
    return s;
}
