/* The contract's transcendentals over binary32 inputs on the CPU, each input three ways (tests/core/math_ref.h):
 * gdn_math.h's function, its binary64 slow path (the previous definition) and the correctly rounded value from a
 * double-double reference. Counts, per function: new != slow (any bit), slow != correctly rounded, undecided by the
 * reference; prints the first inputs of each kind and, with -o, every input of the last two kinds to a file; and
 * the largest relative errors of the fast and slow paths' binary64 results (before rounding to float) where the
 * fast path evaluates, and how often its rounding test falls back.
 * dev/math_exhaustive.cu runs the same check on a GPU, all 2^32 inputs in seconds; here the reference costs
 * about 0.2 us an input, so a full sweep is hours of one core: use a stride (every stride-th bit pattern, from an
 * offset) or a range of bit patterns.
 *
 *     cc -std=c11 -O2 -ffp-contract=off -Isrc -Iinclude dev/math_exhaustive.c -lm -pthread -o /tmp/math_exhaustive
 *     /tmp/math_exhaustive [-f expf,log1pf,...] [-s stride] [-a first] [-b last] [-t threads] [-o file]
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/core/math_ref.h"

enum { CHUNK = 1 << 16, SHOW = 8 };

typedef struct job {
    int fn;
    uint64_t first, last, stride; /* bit patterns first, first + stride, ... <= last */
    _Atomic uint64_t next;        /* the next chunk's index */
    pthread_mutex_t lock;
    uint64_t points, counts[3], fast_points, fallbacks;
    double worst[2];     /* the largest relative errors of the fast and slow paths' binary64 results */
    uint32_t worst_x[2];
    int shown[3];
    FILE *out;
} job;

static void report(job *j, int kind, uint32_t u, const float r[3]) {
    static const char *const what[3] = {"new != slow", "slow != CR", "undecided"};
    if (j->shown[kind]++ < SHOW)
        printf("    %-11s x = %08x (%.9g): new %08x slow %08x CR %08x (%.9g)\n", what[kind], u,
               (double)gdn__bits_f32(u), gdn__f32_bits(r[0]), gdn__f32_bits(r[1]), gdn__f32_bits(r[2]), (double)r[2]);
    if (j->out && kind > 0)
        fprintf(j->out, "%s %s %08x %08x %08x %08x\n", gdn__ref_name(j->fn), kind == 1 ? "wrong" : "undecided", u,
                gdn__f32_bits(r[0]), gdn__f32_bits(r[1]), gdn__f32_bits(r[2]));
}

static void *worker(void *arg) {
    job *j = arg;
    const uint64_t n = (j->last - j->first) / j->stride + 1;
    for (;;) {
        const uint64_t c = atomic_fetch_add(&j->next, 1);
        if (c * CHUNK >= n) break;
        uint64_t points = 0, counts[3] = {0, 0, 0}, fast_points = 0, fallbacks = 0;
        double worst[2] = {0.0, 0.0};
        uint32_t worst_x[2] = {0, 0};
        for (uint64_t i = c * CHUNK; i < n && i < (c + 1) * CHUNK; ++i) {
            const uint32_t u = (uint32_t)(j->first + i * j->stride);
            float r[3];
            const int flags = gdn__ref_check(j->fn, gdn__bits_f32(u), r);
            double err[2];
            int falls_back;
            ++points;
            if (gdn__ref_errors(j->fn, gdn__bits_f32(u), err, &falls_back)) {
                ++fast_points, fallbacks += falls_back;
                for (int k = 0; k < 2; ++k)
                    if (err[k] > worst[k]) worst[k] = err[k], worst_x[k] = u;
            }
            if (!flags) continue;
            pthread_mutex_lock(&j->lock);
            for (int k = 0; k < 3; ++k)
                if (flags & (1 << k)) ++counts[k], report(j, k, u, r);
            pthread_mutex_unlock(&j->lock);
        }
        pthread_mutex_lock(&j->lock);
        j->points += points, j->fast_points += fast_points, j->fallbacks += fallbacks;
        for (int k = 0; k < 2; ++k)
            if (worst[k] > j->worst[k]) j->worst[k] = worst[k], j->worst_x[k] = worst_x[k];
        for (int k = 0; k < 3; ++k) j->counts[k] += counts[k];
        pthread_mutex_unlock(&j->lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *fns = "expf,log1pf,softplusf,sigmoidf,siluf,rsqrtf", *out_name = NULL;
    uint64_t stride = 1, first = 0, last = 0xffffffffu;
    int threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-f")) fns = argv[i + 1];
        else if (!strcmp(argv[i], "-s")) stride = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "-a")) first = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "-b")) last = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-o")) out_name = argv[i + 1];
        else return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    if (stride < 1 || first > last || last > 0xffffffffu || threads < 1 || threads > 64)
        return fprintf(stderr, "bad stride, range or threads\n"), 2;
    FILE *out = out_name ? fopen(out_name, "w") : NULL;
    if (out_name && !out) return fprintf(stderr, "cannot write %s\n", out_name), 2;
    int status = 0;
    for (int fn = 0; fn < GDN_REF_FNS; ++fn) {
        const char *name = gdn__ref_name(fn), *at = strstr(fns, name);
        if (!at || (at[strlen(name)] != ',' && at[strlen(name)] != 0)) continue;
        static job j;
        memset(&j, 0, sizeof j);
        j.fn = fn, j.first = first, j.last = last, j.stride = stride, j.out = out;
        pthread_mutex_init(&j.lock, NULL);
        printf("%s: bit patterns %#" PRIx64 "..%#" PRIx64 " stride %" PRIu64 "\n", name, first, last, stride);
        pthread_t t[64];
        for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, worker, &j);
        for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
        printf("  %s: %" PRIu64 " inputs: %" PRIu64 " new != slow, %" PRIu64 " slow != CR, %" PRIu64 " undecided\n",
               name, j.points, j.counts[0], j.counts[1], j.counts[2]);
        if (j.fast_points)
            printf("  %s: fast path on %" PRIu64 " inputs, %" PRIu64 " fall back; max relative error of the binary64 "
                   "results: fast 2^%.2f (x = %08x), slow 2^%.2f (x = %08x)\n",
                   name, j.fast_points, j.fallbacks, log2(j.worst[0]), j.worst_x[0], log2(j.worst[1]), j.worst_x[1]);
        fflush(stdout);
        status |= j.counts[0] != 0;
        pthread_mutex_destroy(&j.lock);
    }
    if (out) fclose(out);
    return status;
}
