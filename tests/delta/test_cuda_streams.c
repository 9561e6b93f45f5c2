/* The CUDA backend under concurrency.
 *
 * With a device, over a fixed table of 19 cases (the router's choice and every CUDA kernel forced: cuda_decode,
 * cuda_rowsplit, cuda_packed, cuda_generic, some at other variants; several shapes, dtypes, gates, layouts,
 * masks and state modes), every output poisoned (0xFF bytes) before each call:
 *  - cuda_streams_threads: GDN_TEST_STREAMS_THREADS application threads (default 6) each own a stream (thread 0
 *    the per-thread default stream, the others non-blocking streams) and device copies of every case; they
 *    start together and each issues GDN_TEST_STREAMS_ITERS rounds (default 32) of three calls (poison, call,
 *    copy back; one synchronize per round), threads and rounds starting at different cases, so different
 *    kernels and shapes run at once. Every result must be memcmp-equal to the CPU ref. Then each case runs
 *    alone (serial), must equal ref, and each thread's last result of the case must equal the serial one.
 *    (The threads run first, so each kernel's first launches in the process happen concurrently.)
 *  - cuda_streams_one_thread: one thread issues every case three times over four non-blocking streams, round
 *    robin, without synchronizing between calls (inputs shared, outputs per call), and one window split into
 *    six segments chained across the streams by events (each segment's state_out is the next one's state_in,
 *    its y rows land in one buffer); then synchronizes once: every result memcmp-equal to ref.
 * Without a device (or without a CUDA build): the same calls from several threads at once return
 * GDN_ERR_NO_DEVICE and write nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* One call of the table: the problem, how the state is passed, and the kernel. */
typedef struct stream_case {
    case_cfg cfg;
    case_state_mode mode;
    const char *kernel; /* NULL: the router; "name" or "name:variant" */
} stream_case;

#define R CASE_REALISTIC
static const stream_case cases[] = {
    /* B T Hk Hv Dk Dv, dtype, gate, beta, layout, mask, state_in, inputs, seed, head_map */
    {{8, 1, 4, 8, 128, 128, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 0, 1, R, 11, GDN_HEADS_TILED}, CASE_STATE_IN_PLACE, NULL},
    {{4, 3, 2, 4, 64, 64, GDN_F32, GDN_GATE_VECTOR, GDN_BETA_DIRECT, GDN_STATE_KV, 1, 1, R, 12, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, "cuda_decode"},
    {{2, 4, 2, 4, 128, 32, GDN_F16, GDN_GATE_LOG_DECAY, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 0, R, 13, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_decode:warp4"},
    /* the chained window of cuda_streams_one_thread: B = 1, state separate */
    {{1, 257, 2, 4, 128, 128, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_KV, 1, 1, R, 14, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, NULL},
    {{2, 20, 2, 4, 128, 64, GDN_F32, GDN_GATE_DECAY, GDN_BETA_LOGIT, GDN_STATE_KV, 0, 1, R, 15, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, NULL},
    {{2, 64, 1, 2, 256, 64, GDN_F32, GDN_GATE_DECAY, GDN_BETA_DIRECT, GDN_STATE_VK, 0, 1, R, 16, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, "cuda_rowsplit:warps16"},
    {{3, 130, 2, 2, 64, 32, GDN_F16, GDN_GATE_VECTOR, GDN_BETA_LOGIT, GDN_STATE_KV, 1, 1, R, 17, GDN_HEADS_TILED}, CASE_STATE_OUT_NULL, "cuda_rowsplit:warps8"},
    {{2, 100, 2, 4, 128, 64, GDN_F32, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, R, 18, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, "cuda_packed"},
    {{1, 9, 2, 4, 128, 64, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 0, 1, R, 19, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_packed"},
    {{1, 513, 1, 2, 64, 16, GDN_BF16, GDN_GATE_LOG_DECAY, GDN_BETA_DIRECT, GDN_STATE_KV, 0, 1, R, 20, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, "cuda_packed:l8p2w4"},
    {{4, 33, 2, 6, 32, 8, GDN_F16, GDN_GATE_DECAY, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 0, R, 21, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_packed"},
    {{1, 700, 1, 2, 128, 64, GDN_F32, GDN_GATE_VECTOR, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, R, 22, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, "cuda_packed:l4p1w2"},
    {{2, 17, 1, 3, 100, 33, GDN_F32, GDN_GATE_VECTOR, GDN_BETA_LOGIT, GDN_STATE_KV, 1, 1, R, 23, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_generic"},
    {{1, 40, 2, 2, 48, 5, GDN_BF16, GDN_GATE_RAW, GDN_BETA_DIRECT, GDN_STATE_VK, 0, 1, R, 24, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, NULL},
    {{16, 1, 4, 8, 128, 128, GDN_F32, GDN_GATE_DECAY, GDN_BETA_DIRECT, GDN_STATE_VK, 0, 1, R, 25, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_generic"},
    {{2, 64, 2, 4, 256, 128, GDN_F16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, R, 26, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, NULL},
    /* cuda_window: a verify window with the state in place (KV), the vector gate at Dk = 64 (VK) */
    {{1, 7, 2, 4, 128, 64, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_KV, 1, 1, R, 30, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, "cuda_window"},
    {{2, 8, 2, 4, 64, 32, GDN_F32, GDN_GATE_VECTOR, GDN_BETA_DIRECT, GDN_STATE_VK, 0, 1, R, 31, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_window"},
    /* cuda_decode's warp kernel (Dv not a multiple of 32) and its streamed kernel with a 2-stage ring */
    {{3, 2, 1, 2, 32, 24, GDN_F32, GDN_GATE_LOG_DECAY, GDN_BETA_DIRECT, GDN_STATE_KV, 1, 1, R, 27, GDN_HEADS_TILED}, CASE_STATE_IN_PLACE, "cuda_decode"},
    {{4, 4, 2, 4, 256, 64, GDN_BF16, GDN_GATE_VECTOR, GDN_BETA_LOGIT, GDN_STATE_KV, 0, 1, R, 28, GDN_HEADS_GROUPED}, CASE_STATE_SEPARATE, "cuda_decode:stream_stages2"},
    /* the streamed kernel instance of case 0 (bf16, scalar gate, Dk = 128, VK) with another shared-memory size */
    {{2, 4, 2, 4, 128, 64, GDN_BF16, GDN_GATE_DECAY, GDN_BETA_DIRECT, GDN_STATE_VK, 1, 0, R, 29, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_decode:stream_stages3"},
    /* the streamed kernel warp-specialized (filling warp, mbarrier hand-offs): one token in place (4-stage ring), five
     * tokens with the vector gate (2-stage ring) */
    {{6, 1, 2, 4, 128, 64, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, R, 32, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, "cuda_decode:stream_ws"},
    {{3, 5, 2, 4, 64, 96, GDN_F16, GDN_GATE_VECTOR, GDN_BETA_DIRECT, GDN_STATE_VK, 0, 1, R, 33, GDN_HEADS_TILED}, CASE_STATE_SEPARATE, "cuda_decode:stream_ws"},
#if GDN_TESTING
    /* the same on 8 blocks with pseudo-random pauses at the hand-offs (stream_ws_pauses: testing builds only), two
     * tokens in place */
    {{16, 2, 2, 4, 128, 128, GDN_BF16, GDN_GATE_LOG_DECAY, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 1, R, 34, GDN_HEADS_GROUPED}, CASE_STATE_IN_PLACE, "cuda_decode:stream_ws_pauses"},
#endif
};
#undef R
enum { N_CASES = (int)(sizeof cases / sizeof cases[0]), CHAIN_CASE = 3, MAX_THREADS = 16 };

/* ---- without a device: NO_DEVICE from every thread, nothing written ---- */

typedef struct absent_worker {
    const gdn_case *hc;
    int id, wrong_status, wrote;
} absent_worker;

static pthread_barrier_t start_line;

static void *absent_main(void *arg) {
    absent_worker *w = arg;
    const gdn_case *hc = w->hc;
    const size_t y_bytes = hc->n_v * hc->dsize, s_bytes = hc->n_state * 4;
    unsigned char *y = malloc(y_bytes), *st = malloc(s_bytes);
    if (!y || !st) {
        w->wrong_status++;
        free(y), free(st);
        return NULL;
    }
    memset(y, 0xab, y_bytes);
    memset(st, 0xcd, s_bytes);
    pthread_barrier_wait(&start_line);
    for (int rep = 0; rep < 50; ++rep) {
        const stream_case *sc = &cases[(w->id + rep) % N_CASES];
        gdn_delta_args a = case_args(hc);
        a.y = y, a.state_out = (float *)st, a.backend = GDN_BACKEND_CUDA;
        a.stream = (void *)(uintptr_t)(0x1000 + 16 * w->id); /* never a stream: must not be touched */
        a.kernel = sc->kernel;
        const char *name = NULL;
        w->wrong_status += gdn_delta(&a) != GDN_ERR_NO_DEVICE;
        w->wrong_status += gdn_route(&a, &name) != GDN_ERR_NO_DEVICE || name != NULL;
    }
    for (size_t i = 0; i < y_bytes; ++i) w->wrote += y[i] != 0xab;
    for (size_t i = 0; i < s_bytes; ++i) w->wrote += st[i] != 0xcd;
    free(y), free(st);
    return NULL;
}

TEST(cuda_streams_without_device) {
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) SKIP("a CUDA device is present (CUDA_VISIBLE_DEVICES= hides it)");
    gdn_case hc;
    CHECK(case_init(&hc, &cases[CHAIN_CASE].cfg));
    enum { N = 6 };
    absent_worker w[N];
    pthread_t tid[N];
    pthread_barrier_init(&start_line, NULL, N);
    for (int i = 0; i < N; ++i) {
        w[i] = (absent_worker){&hc, i, 0, 0};
        CHECK(pthread_create(&tid[i], NULL, absent_main, &w[i]) == 0);
    }
    for (int i = 0; i < N; ++i) pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start_line);
    for (int i = 0; i < N; ++i) {
        CHECK(w[i].wrong_status == 0, "thread %d: %d CUDA calls without a device did not return GDN_ERR_NO_DEVICE", i,
              w[i].wrong_status);
        CHECK(w[i].wrote == 0, "thread %d: %d output bytes written by CUDA calls without a device", i, w[i].wrote);
    }
    case_free(&hc);
}

#ifdef GDN_HAVE_CUDA

static const char *kernel_label(const stream_case *sc) { return sc->kernel ? sc->kernel : "(routed)"; }

static int env_int(const char *name, int fallback, int lo, int hi) {
    const char *s = getenv(name);
    const int v = s && *s ? atoi(s) : fallback;
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- host side: inputs and the CPU ref of every case ---- */

typedef struct host_case {
    gdn_case hc;
    size_t y_bytes, s_bytes;
    void *y_ref;
    float *s_ref; /* the final state; all 0xFF bytes when state_out is NULL (the device buffer stays poisoned) */
} host_case;

static int host_cases_init(host_case *h) {
    int ok = 1;
    for (int c = 0; c < N_CASES; ++c) {
        const stream_case *sc = &cases[c];
        if (!case_init(&h[c].hc, &sc->cfg)) return 0;
        h[c].y_bytes = h[c].hc.n_v * h[c].hc.dsize;
        h[c].s_bytes = h[c].hc.n_state * 4;
        h[c].y_ref = malloc(h[c].y_bytes);
        h[c].s_ref = malloc(h[c].s_bytes);
        if (!h[c].y_ref || !h[c].s_ref) return 0;
        ok &= case_run(&h[c].hc, "ref", 0, sc->mode, h[c].y_ref, h[c].s_ref) == GDN_OK;
        if (sc->mode == CASE_STATE_OUT_NULL) memset(h[c].s_ref, 0xff, h[c].s_bytes);
    }
    return ok;
}

static void host_cases_free(host_case *h) {
    for (int c = 0; c < N_CASES; ++c) {
        case_free(&h[c].hc);
        free(h[c].y_ref);
        free(h[c].s_ref);
    }
}

/* ---- device side ---- */

/* Device copies of a case's inputs, and one set of outputs. */
typedef struct dev_inputs {
    void *q, *k, *v;
    float *gate, *beta, *A_log, *dt_bias, *state_in;
    uint8_t *mask;
} dev_inputs;

typedef struct dev_outputs {
    void *y;
    float *state; /* state_out; in place, state_in too */
} dev_outputs;

static int dmalloc(void *p, size_t bytes) { return cudaMalloc((void **)p, bytes ? bytes : 1) == cudaSuccess; }

/* Uploads on `stream` (pageable sources: the copy is done when it returns or at the next synchronize). */
static int up(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
    return !src || cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess;
}

static int dev_inputs_init(dev_inputs *d, const gdn_case *hc, cudaStream_t stream) {
    memset(d, 0, sizeof *d);
    const size_t bt = (size_t)(hc->cfg.B * hc->cfg.T), hv = (size_t)hc->cfg.Hv;
    const int ok = dmalloc(&d->q, hc->n_qk * hc->dsize) && dmalloc(&d->k, hc->n_qk * hc->dsize) &&
                   dmalloc(&d->v, hc->n_v * hc->dsize) && dmalloc(&d->gate, hc->n_gate * 4) &&
                   dmalloc(&d->beta, hc->n_bt * 4) && dmalloc(&d->A_log, hv * 4) && dmalloc(&d->dt_bias, hv * 4) &&
                   dmalloc(&d->state_in, hc->n_state * 4) && dmalloc(&d->mask, bt);
    return ok && up(d->q, hc->q, hc->n_qk * hc->dsize, stream) && up(d->k, hc->k, hc->n_qk * hc->dsize, stream) &&
           up(d->v, hc->v, hc->n_v * hc->dsize, stream) && up(d->gate, hc->gate, hc->n_gate * 4, stream) &&
           up(d->beta, hc->beta, hc->n_bt * 4, stream) && up(d->A_log, hc->A_log, hv * 4, stream) &&
           up(d->dt_bias, hc->dt_bias, hv * 4, stream) && up(d->state_in, hc->state_in, hc->n_state * 4, stream) &&
           up(d->mask, hc->mask, bt, stream) && cudaStreamSynchronize(stream) == cudaSuccess;
}

static void dev_inputs_free(dev_inputs *d) {
    cudaFree(d->q), cudaFree(d->k), cudaFree(d->v), cudaFree(d->gate), cudaFree(d->beta), cudaFree(d->A_log);
    cudaFree(d->dt_bias), cudaFree(d->state_in), cudaFree(d->mask);
}

static int dev_outputs_init(dev_outputs *o, const host_case *h) {
    o->y = NULL, o->state = NULL;
    return dmalloc(&o->y, h->y_bytes) && dmalloc(&o->state, h->s_bytes);
}

static void dev_outputs_free(dev_outputs *o) { cudaFree(o->y), cudaFree(o->state); }

/* The case's arguments over device buffers, a window of `nt` tokens from token t0 (B = 1 when t0 > 0),
 * state as the case's mode passes it. */
static gdn_delta_args dev_args(const stream_case *sc, const gdn_case *hc, const dev_inputs *d, const dev_outputs *o,
                               int64_t t0, int64_t nt, cudaStream_t stream) {
    gdn_delta_args a = case_args(hc);
    const int64_t qk_row = hc->cfg.Hk * hc->cfg.Dk, v_row = hc->cfg.Hv * hc->cfg.Dv;
    const int64_t gate_row = hc->cfg.Hv * (hc->cfg.gate_kind == GDN_GATE_VECTOR ? hc->cfg.Dk : 1);
    a.T = nt;
    a.q = (const char *)d->q + t0 * qk_row * (int64_t)hc->dsize;
    a.k = (const char *)d->k + t0 * qk_row * (int64_t)hc->dsize;
    a.v = (const char *)d->v + t0 * v_row * (int64_t)hc->dsize;
    a.y = (char *)o->y + t0 * v_row * (int64_t)hc->dsize;
    a.gate = d->gate + t0 * gate_row;
    a.beta = d->beta + t0 * hc->cfg.Hv;
    a.A_log = d->A_log, a.dt_bias = d->dt_bias;
    a.mask = hc->mask ? d->mask + t0 : NULL;
    a.state_in = hc->state_in ? d->state_in : NULL;
    switch (sc->mode) {
    case CASE_STATE_IN_PLACE: a.state_in = a.state_out = o->state; break;
    case CASE_STATE_OUT_NULL: a.state_out = NULL; break;
    default: a.state_out = o->state; break;
    }
    a.backend = GDN_BACKEND_CUDA;
    a.stream = stream;
    a.kernel = sc->kernel;
    return a;
}

/* Enqueues on `stream`: the poison of y and of the state buffer, the in-place state's start, the call, and the
 * copies of y and the state buffer into y_host, s_host. Returns the call's status (GDN_ERR_DEVICE when an
 * enqueue around it failed). */
static gdn_status enqueue_case(const stream_case *sc, const host_case *h, const dev_inputs *d, const dev_outputs *o,
                               cudaStream_t stream, void *y_host, float *s_host) {
    int ok = cudaMemsetAsync(o->y, 0xff, h->y_bytes, stream) == cudaSuccess &&
             cudaMemsetAsync(o->state, 0xff, h->s_bytes, stream) == cudaSuccess;
    if (sc->mode == CASE_STATE_IN_PLACE)
        ok = ok && (h->hc.state_in ? cudaMemcpyAsync(o->state, d->state_in, h->s_bytes, cudaMemcpyDeviceToDevice, stream)
                                   : cudaMemsetAsync(o->state, 0, h->s_bytes, stream)) == cudaSuccess;
    gdn_delta_args a = dev_args(sc, &h->hc, d, o, 0, h->hc.cfg.T, stream);
    const gdn_status s = !ok ? GDN_ERR_DEVICE : gdn_delta(&a);
    ok = cudaMemcpyAsync(y_host, o->y, h->y_bytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
         cudaMemcpyAsync(s_host, o->state, h->s_bytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess;
    return s != GDN_OK ? s : ok ? GDN_OK : GDN_ERR_DEVICE;
}

static int same_as(const host_case *h, const void *y, const float *s, const void *y_want, const float *s_want) {
    return memcmp(y, y_want, h->y_bytes) == 0 && memcmp(s, s_want, h->s_bytes) == 0;
}

/* Pinned host buffers for one result of every case. */
typedef struct host_results {
    void *y[N_CASES];
    float *s[N_CASES];
} host_results;

static int host_results_init(host_results *r, const host_case *h) {
    memset(r, 0, sizeof *r);
    for (int c = 0; c < N_CASES; ++c)
        if (cudaMallocHost(&r->y[c], h[c].y_bytes) != cudaSuccess || cudaMallocHost((void **)&r->s[c], h[c].s_bytes) != cudaSuccess)
            return 0;
    return 1;
}

static void host_results_free(host_results *r) {
    for (int c = 0; c < N_CASES; ++c) cudaFreeHost(r->y[c]), cudaFreeHost(r->s[c]);
}

/* ---- many threads, a stream each ---- */

typedef struct stream_worker {
    int id, iters;
    const host_case *h;
    cudaStream_t stream;
    dev_inputs in[N_CASES];
    dev_outputs out[N_CASES];
    host_results res;
    int ready;                                  /* buffers allocated and inputs uploaded */
    int calls[N_CASES], mismatches[N_CASES];    /* per case: calls made, results differing from ref */
    int failures[N_CASES];                      /* per case: calls or synchronizations that failed */
    gdn_status first_status;                    /* the first failing status, GDN_OK if none */
} stream_worker;

static void *stream_worker_main(void *arg) {
    stream_worker *w = arg;
    pthread_barrier_wait(&start_line);
    if (!w->ready) return NULL;
    enum { PER_ROUND = 3 };
    for (int r = 0; r < w->iters; ++r) {
        int batch[PER_ROUND];
        gdn_status st[PER_ROUND];
        for (int j = 0; j < PER_ROUND; ++j) {
            const int c = batch[j] = (w->id * 5 + r * PER_ROUND + j) % N_CASES;
            st[j] = enqueue_case(&cases[c], &w->h[c], &w->in[c], &w->out[c], w->stream, w->res.y[c], w->res.s[c]);
        }
        const int synced = cudaStreamSynchronize(w->stream) == cudaSuccess;
        for (int j = 0; j < PER_ROUND; ++j) {
            const int c = batch[j];
            w->calls[c]++;
            if (st[j] != GDN_OK || !synced) {
                w->failures[c]++;
                if (w->first_status == GDN_OK) w->first_status = st[j] != GDN_OK ? st[j] : GDN_ERR_DEVICE;
                continue;
            }
            w->mismatches[c] += !same_as(&w->h[c], w->res.y[c], w->res.s[c], w->h[c].y_ref, w->h[c].s_ref);
        }
    }
    return NULL;
}

TEST(cuda_streams_threads) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    const int n_threads = env_int("GDN_TEST_STREAMS_THREADS", 6, 1, MAX_THREADS);
    const int iters = env_int("GDN_TEST_STREAMS_ITERS", 32, 1, 100000);
    host_case *h = calloc(N_CASES, sizeof *h);
    stream_worker *w = calloc((size_t)n_threads, sizeof *w);
    CHECK(h && w && host_cases_init(h), "host setup");
    if (!h || !w) return;
    for (int i = 0; i < n_threads; ++i) {
        w[i].id = i, w[i].iters = iters, w[i].h = h;
        int ok = 1;
        if (i == 0) w[i].stream = cudaStreamPerThread; /* thread 0's own default stream */
        else ok = cudaStreamCreateWithFlags(&w[i].stream, cudaStreamNonBlocking) == cudaSuccess;
        ok = ok && host_results_init(&w[i].res, h);
        for (int c = 0; c < N_CASES && ok; ++c)
            ok = dev_inputs_init(&w[i].in[c], &h[c].hc, w[i].stream) && dev_outputs_init(&w[i].out[c], &h[c]);
        w[i].ready = ok;
        CHECK(ok, "thread %d: device buffers or stream", i);
    }
    pthread_t tid[MAX_THREADS];
    pthread_barrier_init(&start_line, NULL, (unsigned)n_threads);
    for (int i = 0; i < n_threads; ++i) CHECK(pthread_create(&tid[i], NULL, stream_worker_main, &w[i]) == 0);
    for (int i = 0; i < n_threads; ++i) pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start_line);

    /* each case alone on a fresh stream: must equal ref, and each thread's last result of it must equal this */
    cudaStream_t serial = NULL;
    CHECK(cudaStreamCreateWithFlags(&serial, cudaStreamNonBlocking) == cudaSuccess);
    host_results sr;
    CHECK(host_results_init(&sr, h));
    int calls = 0, bad_calls = 0, bad_results = 0;
    for (int c = 0; c < N_CASES; ++c) {
        const gdn_status s = enqueue_case(&cases[c], &h[c], &w[0].in[c], &w[0].out[c], serial, sr.y[c], sr.s[c]);
        const int synced = cudaStreamSynchronize(serial) == cudaSuccess;
        CHECK(s == GDN_OK && synced, "case %d (%s) alone: %s", c, kernel_label(&cases[c]),
              gdn_status_str(s));
        CHECK(same_as(&h[c], sr.y[c], sr.s[c], h[c].y_ref, h[c].s_ref), "case %d (%s) alone differs from ref: %s", c,
              kernel_label(&cases[c]), case_describe(&cases[c].cfg));
        for (int i = 0; i < n_threads; ++i) {
            calls += w[i].calls[c];
            bad_calls += w[i].failures[c];
            bad_results += w[i].mismatches[c];
            CHECK(w[i].failures[c] == 0, "thread %d, case %d (%s): %d of %d calls failed (first status: %s)", i, c,
                  kernel_label(&cases[c]), w[i].failures[c], w[i].calls[c], gdn_status_str(w[i].first_status));
            CHECK(w[i].mismatches[c] == 0, "thread %d, case %d (%s): %d of %d concurrent results differ from ref: %s", i,
                  c, kernel_label(&cases[c]), w[i].mismatches[c], w[i].calls[c], case_describe(&cases[c].cfg));
            if (w[i].calls[c] > w[i].failures[c])
                CHECK(same_as(&h[c], w[i].res.y[c], w[i].res.s[c], sr.y[c], sr.s[c]),
                      "thread %d, case %d: last concurrent result differs from the serial one", i, c);
        }
    }
    printf("     cuda streams: %d threads x %d rounds: %d concurrent calls over %d cases (%d failed, %d differ from ref); "
           "serial = ref, last concurrent = serial\n",
           n_threads, iters, calls, N_CASES, bad_calls, bad_results);
    host_results_free(&sr);
    cudaStreamDestroy(serial);
    for (int i = 0; i < n_threads; ++i) {
        for (int c = 0; c < N_CASES; ++c) dev_inputs_free(&w[i].in[c]), dev_outputs_free(&w[i].out[c]);
        host_results_free(&w[i].res);
        if (i > 0 && w[i].stream) cudaStreamDestroy(w[i].stream);
    }
    host_cases_free(h);
    free(h);
    free(w);
}

/* ---- one thread, several streams, no synchronization between calls ---- */

enum { N_STREAMS = 4, REPEATS = 3, N_SEGMENTS = 6 };

TEST(cuda_streams_one_thread) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    host_case *h = calloc(N_CASES, sizeof *h);
    CHECK(h && host_cases_init(h), "host setup");
    if (!h) return;
    cudaStream_t streams[N_STREAMS] = {0};
    for (int s = 0; s < N_STREAMS; ++s) CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking) == cudaSuccess);
    dev_inputs in[N_CASES];
    dev_outputs out[REPEATS][N_CASES];
    host_results res[REPEATS];
    int ok = 1;
    for (int c = 0; c < N_CASES; ++c) {
        ok = ok && dev_inputs_init(&in[c], &h[c].hc, streams[0]);
        for (int r = 0; r < REPEATS; ++r) ok = ok && dev_outputs_init(&out[r][c], &h[c]);
    }
    for (int r = 0; r < REPEATS; ++r) ok = ok && host_results_init(&res[r], h);
    CHECK(ok, "device or pinned buffers");
    if (!ok) return;

    /* every case REPEATS times, round robin over the streams, nothing synchronized */
    gdn_status st[REPEATS][N_CASES];
    for (int r = 0; r < REPEATS; ++r)
        for (int c = 0; c < N_CASES; ++c)
            st[r][c] = enqueue_case(&cases[c], &h[c], &in[c], &out[r][c], streams[(c + r) % N_STREAMS], res[r].y[c], res[r].s[c]);

    /* the chained window: segment i runs on stream i % N_STREAMS after segment i - 1 (an event), reading its state */
    static const int64_t seg_len[N_SEGMENTS] = {1, 3, 7, 64, 100, 82};
    static const char *const seg_kernel[N_SEGMENTS] = {NULL, "cuda_decode", "cuda_generic", "cuda_packed", "cuda_rowsplit", NULL};
    const stream_case *cc = &cases[CHAIN_CASE];
    const host_case *ch = &h[CHAIN_CASE];
    dev_outputs seg_out[N_SEGMENTS]; /* y: only segment 0's is used (the whole window); state: each segment's */
    cudaEvent_t done[N_SEGMENTS];
    void *chain_y = NULL;
    float *chain_s = NULL;
    gdn_status seg_st[N_SEGMENTS];
    int chain_ok = cudaMallocHost(&chain_y, ch->y_bytes) == cudaSuccess && cudaMallocHost((void **)&chain_s, ch->s_bytes) == cudaSuccess;
    for (int i = 0; i < N_SEGMENTS; ++i) {
        chain_ok = chain_ok && dev_outputs_init(&seg_out[i], ch) &&
                   cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming) == cudaSuccess;
    }
    CHECK(chain_ok, "chain buffers");
    int64_t t0 = 0;
    chain_ok = chain_ok && cudaMemsetAsync(seg_out[0].y, 0xff, ch->y_bytes, streams[0]) == cudaSuccess;
    for (int i = 0; i < N_SEGMENTS && chain_ok; ++i) {
        cudaStream_t s = streams[i % N_STREAMS];
        if (i > 0) chain_ok = cudaStreamWaitEvent(s, done[i - 1], 0) == cudaSuccess;
        chain_ok = chain_ok && cudaMemsetAsync(seg_out[i].state, 0xff, ch->s_bytes, s) == cudaSuccess;
        const dev_outputs o = {seg_out[0].y, seg_out[i].state};
        gdn_delta_args a = dev_args(cc, &ch->hc, &in[CHAIN_CASE], &o, t0, seg_len[i], s);
        if (i > 0) a.state_in = seg_out[i - 1].state;
        a.kernel = seg_kernel[i];
        seg_st[i] = gdn_delta(&a);
        chain_ok = chain_ok && seg_st[i] == GDN_OK && cudaEventRecord(done[i], s) == cudaSuccess;
        CHECK(seg_st[i] == GDN_OK, "chain segment %d (T %lld from %lld, %s): %s", i, (long long)seg_len[i], (long long)t0,
              seg_kernel[i] ? seg_kernel[i] : "(routed)", gdn_status_str(seg_st[i]));
        t0 += seg_len[i];
    }
    CHECK(t0 == ch->hc.cfg.T);
    cudaStream_t last = streams[(N_SEGMENTS - 1) % N_STREAMS];
    chain_ok = chain_ok && cudaMemcpyAsync(chain_y, seg_out[0].y, ch->y_bytes, cudaMemcpyDeviceToHost, last) == cudaSuccess &&
               cudaMemcpyAsync(chain_s, seg_out[N_SEGMENTS - 1].state, ch->s_bytes, cudaMemcpyDeviceToHost, last) == cudaSuccess;

    /* one synchronization, then every result */
    for (int s = 0; s < N_STREAMS; ++s) CHECK(cudaStreamSynchronize(streams[s]) == cudaSuccess);
    int calls = 0, bad = 0;
    for (int r = 0; r < REPEATS; ++r)
        for (int c = 0; c < N_CASES; ++c) {
            const int good = st[r][c] == GDN_OK && same_as(&h[c], res[r].y[c], res[r].s[c], h[c].y_ref, h[c].s_ref);
            CHECK(good, "repeat %d, case %d (%s, stream %d): status %s, result %s: %s", r, c, kernel_label(&cases[c]),
                  (c + r) % N_STREAMS, gdn_status_str(st[r][c]), good ? "ok" : "differs from ref",
                  case_describe(&cases[c].cfg));
            calls++, bad += !good;
        }
    CHECK(chain_ok && same_as(ch, chain_y, chain_s, ch->y_ref, ch->s_ref),
          "the window chained over %d segments and %d streams differs from ref", N_SEGMENTS, N_STREAMS);
    printf("     cuda streams: one thread, %d streams: %d calls without synchronization (%d wrong), a %lld-token window "
           "in %d segments chained by events: %s\n",
           N_STREAMS, calls, bad, (long long)ch->hc.cfg.T, N_SEGMENTS,
           chain_ok && same_as(ch, chain_y, chain_s, ch->y_ref, ch->s_ref) ? "= ref" : "DIFFERS");

    for (int i = 0; i < N_SEGMENTS; ++i) dev_outputs_free(&seg_out[i]), cudaEventDestroy(done[i]);
    cudaFreeHost(chain_y), cudaFreeHost(chain_s);
    for (int r = 0; r < REPEATS; ++r) {
        host_results_free(&res[r]);
        for (int c = 0; c < N_CASES; ++c) dev_outputs_free(&out[r][c]);
    }
    for (int c = 0; c < N_CASES; ++c) dev_inputs_free(&in[c]);
    for (int s = 0; s < N_STREAMS; ++s) cudaStreamDestroy(streams[s]);
    host_cases_free(h);
    free(h);
}

#endif
