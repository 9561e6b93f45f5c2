/* The machine's FMA floor, measured with the widest ISA the CPU has: AVX-512 (tools/peak_avx512.c) where present,
 * else AVX2 (tools/peak_avx2.c): best of trials of their workers on every thread. */

#include "gdn_tool.h"

/* Best of a few trials of k->iters iterations of k->worker on every thread, all started together (start-up is well
 * under 1% of a trial); k->flops_per_iter per thread and iteration. */
static double peak_trials(const tool_peak_kernel *k, int threads) {
    enum { TRIALS = 3 };
    if (threads < 1) threads = 1;
    if (threads > TOOL_MAX_THREADS) threads = TOOL_MAX_THREADS;
    double best = 0.0;
    for (int trial = 0; trial < TRIALS; ++trial) {
        tool_peak_job jobs[TOOL_MAX_THREADS];
        for (int t = 0; t < threads; ++t) jobs[t] = (tool_peak_job){k->iters, 0.0f};
        const double seconds = tool_time_on_threads(k->worker, jobs, sizeof jobs[0], threads);
        const double gflops = (double)threads * (double)k->iters * k->flops_per_iter / seconds * 1e-9;
        if (gflops > best) best = gflops;
    }
    return best;
}

static const tool_peak_kernel *widest(void) {
    const tool_peak_kernel *k = tool_fma_peak_avx512();
    return k ? k : tool_fma_peak_avx2();
}

double tool_fma_peak_gflops(int threads) {
    const tool_peak_kernel *k = widest();
    return k ? peak_trials(k, threads) : 0.0;
}

const char *tool_fma_peak_isa(void) {
    return tool_fma_peak_avx512() ? "AVX-512" : tool_fma_peak_avx2() ? "AVX2" : "none";
}
