/* Latency of the contract's scalar functions on the GPU (gdn_math.h), each beside its binary64 slow path (the
 * previous definition, now out of line: a call more): one warp, clock64 around one dependent evaluation, the best of
 * 8. The gate and beta of a short window run before its first token, so their chains are on its critical path
 * (docs/kernels/cuda_window.md). The inputs take the fast paths (x in [-0.3, 1.25], rsqrt of 0.5 + |x|).
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Isrc -Iinclude dev/gate_latency.cu -o /tmp/gate_latency
 *     /tmp/gate_latency
 */
#include <cstdio>

#include "common/gdn_math.h"

__device__ __forceinline__ long long gdn_clock(void) {
    long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}

enum { FNS = 16 };
static const char *const names[FNS] = {"expf", "log1pf", "softplusf", "raw_gate", "sigmoidf", "siluf", "rsqrtf",
                                       "expf slow", "log1pf slow", "softplusf slow", "raw_gate slow", "sigmoidf slow",
                                       "siluf slow", "rsqrtf slow", "double 1/x", "float mul"};

/* function K of x (a, b: A_log and dt_bias of the raw gate) */
template <int K>
__device__ float gdn_fn(float x, float a, float b) {
    if (K == 0) return gdn_expf(x);
    if (K == 1) return gdn_log1pf(x);
    if (K == 2) return gdn_softplusf(x);
    if (K == 3) return gdn_raw_gate(x, a, b);
    if (K == 4) return gdn_sigmoidf(x);
    if (K == 5) return gdn_siluf(x);
    if (K == 6) return gdn_rsqrtf(0.5f + fabsf(x));
    if (K == 7) return gdn__expf_slow(x);
    if (K == 8) return gdn__log1pf_slow(x);
    if (K == 9) return gdn__softplusf_slow(x);
    if (K == 10) return gdn__expf_slow(-(gdn__expf_slow(a) * gdn__softplusf_slow(x + b)));
    if (K == 11) return gdn__sigmoidf_slow(x);
    if (K == 12) return gdn__siluf_slow(x);
    if (K == 13) return gdn__rsqrtf_slow(0.5f + fabsf(x));
    if (K == 14) return (float)(1.0 / (double)x);
    return x * 1.0001f;
}

template <int K>
__global__ void gdn_latency_kernel(const float *in, float *out, long long *cycles) {
    __shared__ volatile float sink[32];
    float x = in[threadIdx.x];
    const float a = in[32 + threadIdx.x], b = in[64 + threadIdx.x];
    long long best = 1LL << 60;
    for (int r = 0; r < 8; ++r) {
        __syncwarp();
        const long long t0 = gdn_clock();
        sink[threadIdx.x] = gdn_fn<K>(x, a, b); /* the store issues once the result is there */
        const long long t1 = gdn_clock();
        best = t1 - t0 < best ? t1 - t0 : best;
        x = x + sink[(threadIdx.x + 1) & 31] * 0.0f; /* the next round depends on this one */
    }
    out[threadIdx.x] = sink[threadIdx.x];
    if (threadIdx.x == 0) cycles[K] = best;
}

template <int K>
static void launch(const float *in, float *out, long long *cycles) {
    gdn_latency_kernel<K><<<1, 32>>>(in, out, cycles);
    if (K + 1 < FNS) launch<K + 1 < FNS ? K + 1 : K>(in, out, cycles);
}

int main(void) {
    float h[96];
    for (int i = 0; i < 32; ++i) {
        h[i] = -0.3f + 0.05f * i;     /* x */
        h[32 + i] = 1.0f + 0.1f * i;  /* A_log */
        h[64 + i] = 0.01f * i;        /* dt_bias */
    }
    float *in = NULL, *out = NULL;
    long long *cycles = NULL, c[FNS];
    if (cudaMalloc(&in, sizeof h) != cudaSuccess || cudaMalloc(&out, 32 * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&cycles, sizeof c) != cudaSuccess) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    launch<0>(in, out, cycles);
    cudaMemcpy(c, cycles, sizeof c, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 7; ++i) printf("%-14s %5lld cycles   slow path %5lld\n", names[i], c[i], c[i + 7]);
    for (int i = 14; i < FNS; ++i) printf("%-14s %5lld cycles\n", names[i], c[i]);
    return 0;
}
