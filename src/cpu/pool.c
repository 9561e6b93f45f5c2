/* The persistent CPU thread pool: created on first use, sized to GDN_THREADS or the online cores. One job
 * at a time; a caller that finds the pool busy runs its items alone, so concurrent callers never wait on
 * each other and never share scratch. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "gdn_internal.h"

#define POOL_MAX_THREADS 256

typedef struct pool {
    int size;                  /* threads including the caller's */
    pthread_mutex_t busy;      /* held by the caller whose job runs */
    pthread_mutex_t lock;      /* guards the fields below */
    pthread_cond_t wake, done;
    uint64_t generation;       /* bumped for each job */
    int participants;          /* workers 1 .. participants-1 take part in this job */
    int finished;
    gdn__item_fn fn;
    void *ctx;
    int64_t n_items;
    atomic_llong next;
} pool;

static pool the_pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static int env_threads(void) {
    const char *s = getenv("GDN_THREADS");
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end == '\0' && n >= 1) return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)n;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)cores;
}

static void run_items(int worker) {
    for (;;) {
        int64_t item = atomic_fetch_add(&the_pool.next, 1);
        if (item >= the_pool.n_items) return;
        the_pool.fn(the_pool.ctx, item, worker);
    }
}

static void *worker_main(void *arg) {
    const int worker = (int)(intptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&the_pool.lock);
    for (;;) {
        while (the_pool.generation == seen) pthread_cond_wait(&the_pool.wake, &the_pool.lock);
        seen = the_pool.generation;
        if (worker >= the_pool.participants) continue;
        pthread_mutex_unlock(&the_pool.lock);
        run_items(worker);
        pthread_mutex_lock(&the_pool.lock);
        if (++the_pool.finished == the_pool.participants - 1) pthread_cond_signal(&the_pool.done);
    }
    return NULL;
}

static void pool_init(void) {
    the_pool.size = env_threads();
    pthread_mutex_init(&the_pool.busy, NULL);
    pthread_mutex_init(&the_pool.lock, NULL);
    pthread_cond_init(&the_pool.wake, NULL);
    pthread_cond_init(&the_pool.done, NULL);
    for (int w = 1; w < the_pool.size; ++w) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)w) != 0) the_pool.size = w;
        pthread_attr_destroy(&attr);
        if (the_pool.size == w) break;
    }
}

int gdn_cpu_threads(void) {
    pthread_once(&pool_once, pool_init);
    return the_pool.size;
}

void gdn__parallel_for(int64_t n_items, int threads, gdn__item_fn fn, void *ctx) {
    const int size = gdn_cpu_threads();
    if (threads > size) threads = size;
    if (threads > n_items) threads = (int)n_items;
    if (threads <= 1 || pthread_mutex_trylock(&the_pool.busy) != 0) {
        for (int64_t item = 0; item < n_items; ++item) fn(ctx, item, 0);
        return;
    }
    pthread_mutex_lock(&the_pool.lock);
    the_pool.fn = fn;
    the_pool.ctx = ctx;
    the_pool.n_items = n_items;
    atomic_store(&the_pool.next, 0);
    the_pool.participants = threads;
    the_pool.finished = 0;
    the_pool.generation++;
    pthread_cond_broadcast(&the_pool.wake);
    pthread_mutex_unlock(&the_pool.lock);
    run_items(0);
    pthread_mutex_lock(&the_pool.lock);
    while (the_pool.finished < threads - 1) pthread_cond_wait(&the_pool.done, &the_pool.lock);
    pthread_mutex_unlock(&the_pool.lock);
    pthread_mutex_unlock(&the_pool.busy);
}
