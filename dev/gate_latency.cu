/* Latency of the contract's scalar functions on the GPU (gdn_math.h): one warp, clock64 around one dependent
 * evaluation, the best of 8. The gate and beta of a short window run before its first token, so their chains are
 * on its critical path (docs/kernels/cuda_window.md).
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

/* function K of x (a, b: A_log and dt_bias of the raw gate) */
template <int K>
__device__ float gdn_fn(float x, float a, float b) {
    if (K == 0) return gdn_expf(x);
    if (K == 1) return gdn_log1pf(x);
    if (K == 2) return gdn_softplusf(x);
    if (K == 3) return gdn_raw_gate(x, a, b);
    if (K == 4) return gdn_sigmoidf(x);
    if (K == 5) return (float)(1.0 / (double)x);
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

int main(void) {
    float h[96];
    for (int i = 0; i < 32; ++i) {
        h[i] = -0.3f + 0.05f * i;     /* x */
        h[32 + i] = 1.0f + 0.1f * i;  /* A_log */
        h[64 + i] = 0.01f * i;        /* dt_bias */
    }
    float *in = NULL, *out = NULL;
    long long *cycles = NULL, c[7];
    if (cudaMalloc(&in, sizeof h) != cudaSuccess || cudaMalloc(&out, 32 * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&cycles, sizeof c) != cudaSuccess) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    gdn_latency_kernel<0><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<1><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<2><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<3><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<4><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<5><<<1, 32>>>(in, out, cycles);
    gdn_latency_kernel<6><<<1, 32>>>(in, out, cycles);
    cudaMemcpy(c, cycles, sizeof c, cudaMemcpyDeviceToHost);
    const char *names[] = {"gdn_expf", "gdn_log1pf", "gdn_softplusf", "gdn_raw_gate", "gdn_sigmoidf", "double 1/x", "float mul"};
    for (int i = 0; i < 7; ++i) printf("%-14s %5lld cycles\n", names[i], c[i]);
    return 0;
}
