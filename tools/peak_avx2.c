/* The machine's FMA floor: every thread runs independent chains of fused multiply-adds (enough to cover the FMA
 * latency on both pipes of current x86 cores), so the figure is issue-bound, not latency-bound. Measured with the
 * widest ISA the CPU has: AVX-512 (tools/peak_avx512.c) where present, else AVX2 here. Built with -mavx2 -mfma (this
 * file only); asks the CPU before running. */
#include <pthread.h>

#include "gdn_tool.h"

/* Best of a few trials of `iters` iterations of `worker` on every thread, all started together (start-up is well
 * under 1% of a trial); flops_per_iter per thread and iteration. */
double tool_peak_trials(void *(*worker)(void *), int threads, int64_t iters, double flops_per_iter) {
    enum { MAX_THREADS = 256, TRIALS = 3 };
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    double best = 0.0;
    for (int trial = 0; trial < TRIALS; ++trial) {
        pthread_t tid[MAX_THREADS];
        int started[MAX_THREADS];
        tool_peak_job jobs[MAX_THREADS];
        const double t0 = tool_now();
        for (int t = 0; t < threads; ++t) {
            jobs[t] = (tool_peak_job){iters, 0.0f};
            started[t] = t > 0 && pthread_create(&tid[t], NULL, worker, &jobs[t]) == 0;
        }
        for (int t = 0; t < threads; ++t)
            if (!started[t]) worker(&jobs[t]);
        for (int t = 1; t < threads; ++t)
            if (started[t]) pthread_join(tid[t], NULL);
        const double gflops = (double)threads * (double)iters * flops_per_iter / (tool_now() - t0) * 1e-9;
        if (gflops > best) best = gflops;
    }
    return best;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

enum { CHAINS = 12, FLOPS_PER_ITER = CHAINS * 8 * 2 };

static void *fma_worker(void *arg) {
    tool_peak_job *j = arg;
    const __m256 m = _mm256_set1_ps(0.99999994f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f);
    __m256 a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f);
    __m256 a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f);
    __m256 a9 = _mm256_set1_ps(1.0f), a10 = _mm256_set1_ps(1.1f), a11 = _mm256_set1_ps(1.2f);
    /* a_i <- a_i * m + c, CHAINS independent chains per iteration */
    for (int64_t it = 0; it < j->iters; ++it) {
        a0 = _mm256_fmadd_ps(a0, m, c);
        a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c);
        a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c);
        a7 = _mm256_fmadd_ps(a7, m, c);
        a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
        a10 = _mm256_fmadd_ps(a10, m, c);
        a11 = _mm256_fmadd_ps(a11, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    j->sink = _mm256_cvtss_f32(s);
    return NULL;
}

/* Trials of ~40 ms at the widest ISA. */
double tool_fma_peak_gflops(int threads) {
    const double wide = tool_fma_peak_avx512_gflops(threads);
    if (wide > 0.0) return wide;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0.0;
    return tool_peak_trials(fma_worker, threads, (int64_t)1 << 24, FLOPS_PER_ITER);
}

const char *tool_fma_peak_isa(void) {
    __builtin_cpu_init();
    return tool_fma_peak_avx512_gflops(-1) > 0.0                                  ? "AVX-512"
           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "AVX2"
                                                                                  : "none";
}

#else

double tool_fma_peak_gflops(int threads) { return threads < 0 ? -1.0 : 0.0; }
const char *tool_fma_peak_isa(void) { return "none"; }

#endif
