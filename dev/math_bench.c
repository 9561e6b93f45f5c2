/* The contract's scalar functions on the CPU (gdn_math.h), each beside its binary64 slow path (the previous
 * definition): ns per evaluation over 2^16 inputs in the ranges a layer sees, independent evaluations (throughput)
 * and a dependent chain (latency: each input depends on the previous result), the best of 5 runs. gdn_* take the
 * fast paths only where fma is one instruction (-mfma; GDN_MATH_FAST): with the library's own flags fma() is a call
 * into libm (glibc: one vfmadd behind the call where the CPU has FMA), as the first line shows.
 *
 *     cc -std=c11 -O2 -ffp-contract=off -Isrc -Iinclude dev/math_bench.c -lm -o /tmp/math_bench && /tmp/math_bench
 *     cc -std=c11 -O2 -ffp-contract=off -mfma -Isrc -Iinclude dev/math_bench.c -lm -o /tmp/math_bench
 *     /tmp/math_bench
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>

#include "common/gdn_math.h"

enum { N = 1 << 16 };

static float in[N], lg[N], dt[N];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float raw_gate_slow(float a, float A_log, float dt_bias) {
    return gdn__expf_slow(-(gdn__expf_slow(A_log) * gdn__softplusf_slow(a + dt_bias)));
}

static float raw_gate_fast(float a, float A_log, float dt_bias) {
    return gdn__expf_fast(-(gdn__expf_fast(A_log) * gdn__softplusf_fast(a + dt_bias)));
}

/* function k of x, new (slow = 0) or slow path */
static inline float fn(int k, int slow, float x, int i) {
    switch (k) {
    case 0: return slow ? gdn__expf_slow(x) : gdn__expf_fast(x);
    case 1: return slow ? gdn__log1pf_slow(x) : gdn__log1pf_fast(x);
    case 2: return slow ? gdn__softplusf_slow(x) : gdn__softplusf_fast(x);
    case 3: return slow ? raw_gate_slow(x, lg[i], dt[i]) : raw_gate_fast(x, lg[i], dt[i]);
    case 4: return slow ? gdn__sigmoidf_slow(x) : gdn__sigmoidf_fast(x);
    case 5: return slow ? gdn__siluf_slow(x) : gdn__siluf_fast(x);
    default: return slow ? gdn__rsqrtf_slow(x + 4.0f) : gdn__rsqrtf_fast(x + 4.0f);
    }
}

static double bench(int k, int slow, int chained) {
    double best = 1e30;
    volatile float sink = 0.0f;
    for (int rep = 0; rep < 5; ++rep) {
        float acc = 0.0f, prev = 0.0f;
        const double t0 = now();
        for (int i = 0; i < N; ++i) {
            const float y = fn(k, slow, chained ? in[i] + prev * 0x1p-40f : in[i], i);
            prev = y, acc += y;
        }
        const double t = now() - t0;
        sink = acc;
        best = t < best ? t : best;
    }
    (void)sink;
    return best / N * 1e9;
}

int main(void) {
    uint64_t s = 1;
    for (int i = 0; i < N; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = (float)(s >> 40) * 0x1p-24f; /* [0, 1) */
        in[i] = -4.0f + 8.0f * u;                   /* x: gate, beta, SiLU inputs */
        lg[i] = -1.0f + 3.5f * u * u;              /* A_log */
        dt[i] = -4.0f + 2.0f * (1.0f - u);         /* dt_bias */
    }
    static const char *const names[7] = {"expf", "log1pf", "softplusf", "raw_gate", "sigmoidf", "siluf", "rsqrtf"};
    printf("ns per evaluation          new    slow   (throughput)      new    slow   (latency)\n");
    for (int k = 0; k < 7; ++k)
        printf("%-18s %12.2f %7.2f %20.2f %7.2f\n", names[k], bench(k, 0, 0), bench(k, 1, 0), bench(k, 0, 1),
               bench(k, 1, 1));
    return 0;
}
