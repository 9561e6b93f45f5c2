/* The API's growth points: gdn_last_error names the field, reserved fields must be zero, named variants, and an
 * engine's own CPU threads (gdn_cpu_runner) giving the pool's bits. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_case.h"
#include "harness.h"

static const case_cfg api_cfg = {.B = 2, .T = 9, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 64, .dtype = GDN_BF16,
                                 .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .mask = 1, .state_in = 1,
                                 .seed = 91};

TEST(api_last_error_names_the_field) {
    gdn_case c;
    CHECK(case_init(&c, &api_cfg));
    void *y = malloc(c.n_v * c.dsize);
    float *s = malloc(c.n_state * 4);
    CHECK(y && s);
    if (y && s) {
        const struct { const char *field; gdn_status want; } cases[] = {
            {"args->Dv", GDN_ERR_BAD_SIZE}, {"args->beta", GDN_ERR_NULL_POINTER}, {"args->gate_kind", GDN_ERR_BAD_ENUM},
            {"args->y overlaps args->v", GDN_ERR_OVERLAP}, {"args->reserved[5]", GDN_ERR_RESERVED},
            {"args->kernel", GDN_ERR_UNKNOWN_KERNEL}, {"no such variant", GDN_ERR_UNKNOWN_KERNEL},
            {"args->state_out", GDN_ERR_ALIGNMENT}, {"args->state_dtype", GDN_ERR_BAD_ENUM},
            {"args->head_map", GDN_ERR_BAD_ENUM}, {"args->cpu_runner->parallel_for", GDN_ERR_NULL_POINTER}};
        const gdn_cpu_runner broken = {NULL, NULL, 2, {NULL}};
        for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); ++i) {
            gdn_delta_args a = case_args(&c);
            a.y = y, a.state_out = s;
            switch (i) {
            case 0: a.Dv = 0; break;
            case 1: a.beta = NULL; break;
            case 2: a.gate_kind = (gdn_gate_kind)9; break;
            case 3: a.y = (void *)a.v; break;
            case 4: a.reserved[5] = 1; break;
            case 5: a.kernel = "no_such_kernel"; break;
            case 6: a.kernel = "ref:fastest"; break;
            case 7: a.state_out = (float *)((char *)s + 2); break;
            case 8: a.state_dtype = (gdn_dtype)7; break;
            case 9: a.head_map = (gdn_head_map)2; break;
            default: a.cpu_runner = &broken; break;
            }
            const gdn_status st = gdn_delta(&a);
            CHECK(st == cases[i].want, "case %d: %s", i, gdn_status_str(st));
            CHECK(strstr(gdn_last_error(), cases[i].field) != NULL, "case %d: \"%s\" does not name %s", i, gdn_last_error(),
                  cases[i].field);
        }
        gdn_delta_args a = case_args(&c);
        a.y = y, a.state_out = s;
        CHECK(gdn_delta(&a) == GDN_OK && gdn_last_error()[0] == '\0', "a success clears the detail");
    }
    free(y);
    free(s);
    case_free(&c);
}

/* The fields that took reserved words keep the structs' size (the ABI of builds against an older header). */
_Static_assert(sizeof(gdn_delta_args) == 296, "gdn_delta_args changed size");
_Static_assert(sizeof(gdn_layer_args) == 344, "gdn_layer_args changed size");

TEST(api_variants_listed_and_named) {
    int listed = 0;
    for (int i = 0; i < gdn_kernel_count(); ++i) {
        const int n = gdn_kernel_variant_count(i);
        for (int v = 0; v < n; ++v) listed += gdn_kernel_variant_name(i, v) != NULL;
        CHECK(gdn_kernel_variant_name(i, n) == NULL && gdn_kernel_variant_name(i, -1) == NULL);
    }
    CHECK(gdn_kernel_variant_count(-1) == 0 && gdn_kernel_variant_count(gdn_kernel_count()) == 0);
    CHECK(listed >= 0); /* CUDA kernels list theirs in a CUDA build (tests/delta/test_cuda.c runs them) */
}

/* A runner of the engine's: its own threads, items handed out in reverse order, worker ids 0 .. workers-1. */
typedef struct engine {
    int workers;
    int64_t calls, items;
} engine;

typedef struct engine_job {
    gdn_task_fn fn;
    void *task;
    int64_t n;
    int worker;
    int64_t *next;
    pthread_mutex_t *lock;
} engine_job;

static void *engine_thread(void *arg) {
    engine_job *j = arg;
    for (;;) {
        pthread_mutex_lock(j->lock);
        const int64_t i = --*j->next;
        pthread_mutex_unlock(j->lock);
        if (i < 0) return NULL;
        j->fn(j->task, i, j->worker);
    }
}

static void engine_parallel_for(void *user, int64_t n, gdn_task_fn fn, void *task) {
    engine *e = user;
    pthread_t tid[8];
    engine_job jobs[8];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int64_t next = n;
    e->calls++, e->items += n;
    for (int w = 0; w < e->workers; ++w) {
        jobs[w] = (engine_job){fn, task, n, w, &next, &lock};
        if (w > 0) pthread_create(&tid[w], NULL, engine_thread, &jobs[w]);
    }
    engine_thread(&jobs[0]);
    for (int w = 1; w < e->workers; ++w) pthread_join(tid[w], NULL);
}

TEST(api_cpu_runner_gives_the_pools_bits) {
    for (int dt = 0; dt < 3; ++dt) {
        case_cfg g = api_cfg;
        g.dtype = (gdn_dtype)dt;
        g.T = dt == 0 ? 1 : 9; /* a decode step and a window */
        gdn_case c;
        CHECK(case_init(&c, &g));
        const size_t ny = c.n_v * c.dsize, ns = c.n_state * 4;
        void *y0 = malloc(ny), *y = malloc(ny);
        float *s0 = malloc(ns), *s = malloc(ns);
        CHECK(y0 && y && s0 && s);
        for (int k = 0; y0 && y && s0 && s && k < gdn_kernel_count(); ++k) {
            if (gdn_kernel_backend(k) != GDN_BACKEND_CPU) continue;
            const char *name = gdn_kernel_name(k);
            const gdn_status st0 = case_run(&c, name, 0, CASE_STATE_SEPARATE, y0, s0);
            if (st0 == GDN_ERR_INELIGIBLE) continue;
            CHECK(st0 == GDN_OK);
            for (int workers = 1; workers <= 3; ++workers) {
                engine e = {workers, 0, 0};
                const gdn_cpu_runner runner = {engine_parallel_for, &e, workers, {NULL}};
                gdn_delta_args a = case_args(&c);
                poison(y, ny);
                poison(s, ns);
                a.y = y, a.state_out = s, a.kernel = name, a.cpu_runner = &runner;
                CHECK(gdn_delta(&a) == GDN_OK, "%s on the engine's %d threads", name, workers);
                CHECK(e.calls >= 1 && e.items >= 1, "%s: the runner was not used", name);
                CHECK(memcmp(y, y0, ny) == 0 && memcmp(s, s0, ns) == 0, "%s: %d engine threads differ from the pool", name,
                      workers);
            }
        }
        free(y0), free(y), free(s0), free(s);
        case_free(&c);
    }
}
