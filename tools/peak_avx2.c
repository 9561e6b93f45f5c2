/* The FMA floor with AVX2: every thread runs independent chains of fused multiply-adds (enough to cover the FMA
 * latency on both pipes of current x86 cores), so the figure is issue-bound, not latency-bound. Built with -mavx2
 * -mfma (this file only); asks the CPU, none where it lacks AVX2 or FMA. */
#include "gdn_tool.h"

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

/* Trials of ~40 ms. */
const tool_peak_kernel *tool_fma_peak_avx2(void) {
    static const tool_peak_kernel k = {fma_worker, (int64_t)1 << 24, FLOPS_PER_ITER};
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &k : NULL;
}

#else

const tool_peak_kernel *tool_fma_peak_avx2(void) { return NULL; }

#endif
