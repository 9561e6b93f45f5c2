/* The FMA floor with AVX-512: every thread runs 16 independent chains of 16-wide fused multiply-adds (32 zmm
 * registers hold them; two FMA pipes of latency 4 need 8), so the figure is issue-bound. Built with -mavx512f
 * -mavx512bw -mavx512vl -mavx512dq -mfma (this file only); asks the CPU, none where it lacks AVX-512. */
#include "gdn_tool.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>

enum { CHAINS = 16, FLOPS_PER_ITER = CHAINS * 16 * 2 };

static void *fma512_worker(void *arg) {
    tool_peak_job *j = arg;
    const __m512 m = _mm512_set1_ps(0.99999994f), c = _mm512_set1_ps(1e-7f);
    __m512 a[CHAINS];
    for (int i = 0; i < CHAINS; ++i) a[i] = _mm512_set1_ps(0.1f * (float)(i + 1));
    /* a_i <- a_i * m + c, CHAINS independent chains per iteration (unrolled: the chains stay in registers) */
    for (int64_t it = 0; it < j->iters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < CHAINS; ++i) s = _mm512_add_ps(s, a[i]);
    j->sink = _mm512_cvtss_f32(s);
    return NULL;
}

const tool_peak_kernel *tool_fma_peak_avx512(void) {
    static const tool_peak_kernel k = {fma512_worker, (int64_t)1 << 23, FLOPS_PER_ITER};
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? &k : NULL;
}

#else

const tool_peak_kernel *tool_fma_peak_avx512(void) { return NULL; }

#endif
