/* The persistent CPU thread pool: its size is GDN_THREADS or the online cores (read once); its workers start on
 * the first call that wants more than one thread. One job at a time; a caller that finds the pool busy runs its
 * items alone, so concurrent callers never wait on each other and never share scratch.
 *
 * Waiting: a worker that has finished a job, and a caller waiting for its workers, first poll for up to GDN_SPIN_US
 * microseconds (default 100, core/env.h) before they sleep on a condition variable. The stages of one call, and the
 * calls of a decode loop, then hand work over without a futex wake (tens to hundreds of microseconds on a virtual
 * machine whose idle vCPU has halted). The items and their split are the same either way: waiting changes no bits.
 *
 * fork(): a child has only the forking thread, so the pool's workers do not exist there. pthread_atfork
 * handlers keep fork from splitting a job (the prepare handler waits for the job under way and holds the pool's
 * locks across fork); the child then marks its workers as not started, and its first parallel call starts new
 * ones. A forked child can call the library at any thread count; its pool has the parent's size. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "gdn_internal.h"

typedef struct pool {
    int size;                  /* threads including the caller's */
    int started;               /* workers 1 .. size-1 are running (in this process) */
    pthread_mutex_t busy;      /* held by the caller whose job runs */
    pthread_mutex_t lock;      /* guards the fields below and `started` */
    pthread_cond_t wake, done;
    atomic_ullong generation;  /* bumped for each job (under `lock`; polled without it) */
    uint64_t start_generation; /* the generation when the workers were started: their first job comes after it */
    int participants;          /* workers 1 .. participants-1 take part in this job */
    atomic_int finished;       /* workers done with this job (counted under `lock`; polled without it) */
    gdn_task_fn fn;
    void *ctx;
    int64_t n_items;
    atomic_llong next;
    int64_t spin_ns;           /* GDN_SPIN_US, in ns: how long a waiter polls before it sleeps */
} pool;

static pool the_pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static int default_threads(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int64_t n = gdn__env_int("GDN_THREADS", 1, GDN_THREADS_MAX, cores < 1 ? 1 : cores);
    return n > GDN_THREADS_MAX ? GDN_THREADS_MAX : (int)n;
}

static void run_items(int worker) {
    for (;;) {
        int64_t item = atomic_fetch_add(&the_pool.next, 1);
        if (item >= the_pool.n_items) return;
        the_pool.fn(the_pool.ctx, item, worker);
    }
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Polls until *word != value or the spin budget is spent (the caller re-checks under the lock). */
static void spin_gen(const atomic_ullong *word, uint64_t value) {
    if (the_pool.spin_ns <= 0) return;
    const int64_t until = now_ns() + the_pool.spin_ns;
    for (unsigned i = 1; atomic_load_explicit(word, memory_order_acquire) == value; ++i) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() > until) return;
    }
}

/* Polls until *count >= target or the spin budget is spent. */
static void spin_count(const atomic_int *count, int target) {
    if (the_pool.spin_ns <= 0) return;
    const int64_t until = now_ns() + the_pool.spin_ns;
    for (unsigned i = 1; atomic_load_explicit(count, memory_order_acquire) < target; ++i) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() > until) return;
    }
}

static void *worker_main(void *arg) {
    const int worker = (int)(intptr_t)arg;
    pthread_mutex_lock(&the_pool.lock);
    uint64_t seen = the_pool.start_generation;
    for (;;) {
        if (atomic_load(&the_pool.generation) == seen) { /* poll a while, then sleep */
            pthread_mutex_unlock(&the_pool.lock);
            spin_gen(&the_pool.generation, seen);
            pthread_mutex_lock(&the_pool.lock);
            while (atomic_load(&the_pool.generation) == seen) pthread_cond_wait(&the_pool.wake, &the_pool.lock);
        }
        seen = atomic_load(&the_pool.generation);
        if (worker >= the_pool.participants) continue;
        pthread_mutex_unlock(&the_pool.lock);
        run_items(worker);
        pthread_mutex_lock(&the_pool.lock);
        if (atomic_fetch_add(&the_pool.finished, 1) + 1 == the_pool.participants - 1) pthread_cond_signal(&the_pool.done);
    }
    return NULL;
}

static void init_sync(void) {
    pthread_mutex_init(&the_pool.busy, NULL);
    pthread_mutex_init(&the_pool.lock, NULL);
    pthread_cond_init(&the_pool.wake, NULL);
    pthread_cond_init(&the_pool.done, NULL);
}

/* fork: no job is split (prepare waits for it and holds both locks); the child starts with fresh locks and no
 * workers. */
static void fork_prepare(void) {
    pthread_mutex_lock(&the_pool.busy);
    pthread_mutex_lock(&the_pool.lock);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&the_pool.lock);
    pthread_mutex_unlock(&the_pool.busy);
}
static void fork_child(void) {
    init_sync();
    the_pool.started = 0;
    the_pool.participants = 0;
}

static void pool_init(void) {
    the_pool.size = default_threads();
    the_pool.spin_ns = gdn__env_int("GDN_SPIN_US", 0, GDN_SPIN_US_MAX, GDN_SPIN_US_DEFAULT) * 1000;
    init_sync();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Starts workers 1 .. size-1 once per process (called with `busy` held). A worker that cannot be created
 * shrinks the pool to the workers that were. */
static void start_workers(void) {
    pthread_mutex_lock(&the_pool.lock);
    the_pool.start_generation = atomic_load(&the_pool.generation);
    for (int w = 1; !the_pool.started && w < the_pool.size; ++w) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int failed = gdn__alloc_refused() || pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)w) != 0;
        pthread_attr_destroy(&attr);
        if (failed) the_pool.size = w;
    }
    the_pool.started = 1;
    pthread_mutex_unlock(&the_pool.lock);
}

int gdn_cpu_threads(void) {
    pthread_once(&pool_once, pool_init);
    return the_pool.size;
}

void gdn__parallel_for(const gdn__problem *p, int64_t n_items, int threads, gdn_task_fn fn, void *ctx) {
    const gdn_cpu_runner *runner = p->a.cpu_runner;
    if (runner) {
        runner->parallel_for(runner->user, n_items, fn, ctx);
        return;
    }
    if (threads > gdn_cpu_threads()) threads = the_pool.size;
    if (threads > n_items) threads = (int)n_items;
    if (threads <= 1 || pthread_mutex_trylock(&the_pool.busy) != 0) {
        for (int64_t item = 0; item < n_items; ++item) fn(ctx, item, 0);
        return;
    }
    if (!the_pool.started) start_workers();
    if (threads > the_pool.size) threads = the_pool.size;
    pthread_mutex_lock(&the_pool.lock);
    the_pool.fn = fn;
    the_pool.ctx = ctx;
    the_pool.n_items = n_items;
    atomic_store(&the_pool.next, 0);
    the_pool.participants = threads;
    atomic_store(&the_pool.finished, 0);
    atomic_fetch_add(&the_pool.generation, 1);
    pthread_cond_broadcast(&the_pool.wake); /* no system call when every worker is polling */
    pthread_mutex_unlock(&the_pool.lock);
    run_items(0);
    spin_count(&the_pool.finished, threads - 1);
    pthread_mutex_lock(&the_pool.lock);
    while (atomic_load(&the_pool.finished) < threads - 1) pthread_cond_wait(&the_pool.done, &the_pool.lock);
    pthread_mutex_unlock(&the_pool.lock);
    pthread_mutex_unlock(&the_pool.busy);
}
