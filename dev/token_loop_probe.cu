/* Where the prefill's ~375 cycles per token go: cuda_packed:l4p1w4's token loop (L = 4 lanes per column, 8 columns per
 * warp, 32 keys per lane, Dk = 128) rebuilt alone, with each of its parts switchable, timed with clock64 on the
 * H200 at the prefill's occupancy (128 blocks of 4 warps: one warp per scheduler) or at twice it. Not the contract's
 * kernel: no gate math, no chunk staging, the rows of 64 tokens reused; only the token's instruction stream.
 *
 * Per token, per lane (the parts, by flag):
 *     kv    = tree of 8 partials in registers, then the column's 4 lanes: 2 shuffle levels    (P_SHFL; else 2 FMULs)
 *     d     = (v - g kv) beta
 *     rows  = the next token's 32 k and this token's 32 q values: 16 LDS.128 from padded rows (P_LDS; else kept)
 *     S[e]  = fmaf(g, S[e], k_e d)                                                              (always)
 *     kvp   = 8 chains of 4 fmaf over S and the next k                                          (always)
 *     y     = 8 chains of 4 fmaf over S and q, the tree of 8, one STS                         (P_READOUT)
 * P_PIPE puts token t-1's readout between the kv tree's first shuffle and its use; P_BRANCH puts the update under
 * the token's live flag (a uniform branch, as cuda_packed's mask test); P_SCALARS reads (g, beta, live, v) of the
 * next token from shared memory a token ahead, as cuda_packed does; P_PAIRS runs two tokens per loop iteration with
 * the k rows swapping roles, as cuda_packed does. Results and what they mean:
 * docs/kernels/cuda_packed.md.
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Isrc -Iinclude dev/token_loop_probe.cu -o /tmp/token_loop_probe
 *     /tmp/token_loop_probe            (prints cycles per token per warp, median over warps, per variant)
 */
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/gdn_cuda.cuh" /* gdn_reg_tree, gdn_smem_row: the kernels' own helpers */

#define PROBE_TOKENS 2048
#define PROBE_ROWS 64
#define PROBE_RS (128 + 16) /* a row of 128 keys, 4 floats of padding after each lane's 32 */

__device__ __forceinline__ long long probe_clock(void) {
    long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}

enum { P_SHFL = 1, P_LDS = 2, P_READOUT = 4, P_PIPE = 8, P_BRANCH = 16, P_SCALARS = 32, P_PAIRS = 64 };

template <int F>
__global__ void __launch_bounds__(128, 1) probe_kernel(float *out, long long *cycles) {
    constexpr bool SHFL = F & P_SHFL, LDS = F & P_LDS, READOUT = F & P_READOUT, PIPE = F & P_PIPE;
    extern __shared__ __align__(16) float sm[];
    float *ks = sm, *qs = sm + PROBE_ROWS * PROBE_RS, *yp = qs + PROBE_ROWS * PROBE_RS, *tok = yp + PROBE_ROWS * 32 * 4;
    for (int i = threadIdx.x; i < 2 * PROBE_ROWS * PROBE_RS; i += blockDim.x) sm[i] = 0.001f * ((i * 37) % 101) - 0.05f;
    for (int i = threadIdx.x; i < PROBE_ROWS; i += blockDim.x) { /* (g, beta, live, v) of each row's token */
        tok[4 * i] = 0.97f; tok[4 * i + 1] = 0.5f; tok[4 * i + 2] = 1.0f; tok[4 * i + 3] = 0.25f;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, r = lane >> 3, seg = r * 36;
    float s[32], kA[32], kB[32], q[32], kvp[8];
#pragma unroll
    for (int e = 0; e < 32; ++e) s[e] = 0.01f * (e - lane);
    gdn_smem_row<32>(kA, ks + seg);
    gdn_smem_row<32>(q, qs + seg);
#pragma unroll
    for (int c = 0; c < 8; ++c) kvp[c] = 0.1f * c;
    float4 sc = make_float4(0.97f, 0.5f, 1.0f, 0.25f); /* (g, beta, live, v) of the token */
    float ysum = 0.0f;
    const long long t0 = probe_clock();
    auto readout = [&](int t) {
        float op[8];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 8; ++c) op[c] = __fmaf_rn(s[c * 4 + i], q[c * 4 + i], i == 0 ? 0.0f : op[c]);
        yp[((t & (PROBE_ROWS - 1)) * 32 + (threadIdx.x >> 2 & 31)) * 4 + r] = gdn_reg_tree<8>(op);
    };
    auto step = [&](int t, float (&kc)[32], float (&kn)[32]) {
        /* P_SCALARS: the next token's (g, beta, live, v) read a token ahead, as cuda_packed does */
        const float4 sc_next = F & P_SCALARS ? *(const float4 *)(tok + 4 * ((t + 1) & (PROBE_ROWS - 1))) : sc;
        float kv = gdn_reg_tree<8>(kvp);
        if (SHFL && PIPE) { /* token t-1's readout between the first shuffle's issue and its use */
            const float x = __shfl_xor_sync(0xffffffffu, kv, 8);
            if (t > 0) readout(t - 1);
            kv = __fadd_rn(kv, x);
            kv = __fadd_rn(kv, __shfl_xor_sync(0xffffffffu, kv, 16));
        } else if (SHFL) {
            kv = __fadd_rn(kv, __shfl_xor_sync(0xffffffffu, kv, 8));
            kv = __fadd_rn(kv, __shfl_xor_sync(0xffffffffu, kv, 16));
        } else {
            kv = __fmul_rn(kv, 0.5f);
            kv = __fmul_rn(kv, 0.5f);
        }
        const float g = sc.x, d = __fmul_rn(__fsub_rn(sc.w, __fmul_rn(g, kv)), sc.y);
        const int row = ((t + 1) & (PROBE_ROWS - 1)) * PROBE_RS + seg;
        if (LDS) {
            gdn_smem_row<32>(kn, ks + row);
            gdn_smem_row<32>(q, qs + (t & (PROBE_ROWS - 1)) * PROBE_RS + seg);
        } else {
#pragma unroll
            for (int e = 0; e < 32; ++e) kn[e] = kc[e];
        }
        if (!(F & P_BRANCH) || sc.z != 0.0f) /* P_BRANCH: the update under the token's live flag, as cuda_packed */
#pragma unroll
            for (int e = 0; e < 32; ++e) s[e] = __fmaf_rn(g, s[e], __fmul_rn(kc[e], d));
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 8; ++c) kvp[c] = __fmaf_rn(s[c * 4 + i], kn[c * 4 + i], i == 0 ? 0.0f : kvp[c]);
        if (READOUT && !PIPE) readout(t);
        sc = sc_next;
    };
    if (F & P_PAIRS) { /* two tokens per iteration, the k rows swapping roles (cuda_packed's loop) */
        for (int t = 0; t < PROBE_TOKENS; t += 2) {
            step(t, kA, kB);
            step(t + 1, kB, kA);
        }
    } else {
        for (int t = 0; t < PROBE_TOKENS; ++t) {
            step(t, kA, kB);
#pragma unroll
            for (int e = 0; e < 32; ++e) kA[e] = kB[e];
        }
    }
    const long long t1 = probe_clock();
#pragma unroll
    for (int e = 0; e < 32; ++e) ysum = __fadd_rn(ysum, s[e]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = ysum + (READOUT ? yp[threadIdx.x] : 0.0f);
    if (lane == 0) cycles[blockIdx.x * 4 + (threadIdx.x >> 5)] = t1 - t0;
}

template <int F>
static void probe_run(const char *name, int blocks, float *out, long long *cycles) {
    const int smem = (2 * PROBE_ROWS * PROBE_RS + PROBE_ROWS * 32 * 4 + PROBE_ROWS * 4) * 4;
    cudaFuncSetAttribute(probe_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    probe_kernel<F><<<blocks, 128, smem>>>(out, cycles); /* warm-up */
    probe_kernel<F><<<blocks, 128, smem>>>(out, cycles);
    std::vector<long long> c(blocks * 4);
    if (cudaMemcpy(c.data(), cycles, c.size() * sizeof(long long), cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("%-44s failed\n", name);
        return;
    }
    std::sort(c.begin(), c.end());
    printf("%-44s blocks %4d: %7.1f cycles per token per warp (median; min %.1f, max %.1f)\n", name, blocks,
           (double)c[c.size() / 2] / PROBE_TOKENS, (double)c.front() / PROBE_TOKENS, (double)c.back() / PROBE_TOKENS);
}

int main(void) {
    float *out = NULL;
    long long *cycles = NULL;
    if (cudaMalloc(&out, 264 * 128 * sizeof(float)) != cudaSuccess || cudaMalloc(&cycles, 264 * 4 * sizeof(long long)) != cudaSuccess) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    for (int blocks : {128, 264}) {
        constexpr int FULL = P_SHFL | P_LDS | P_READOUT;
        probe_run<FULL>("full token (shuffles, row loads, readout)", blocks, out, cycles);
        probe_run<FULL | P_PIPE>("full, readout of t-1 inside the kv tree", blocks, out, cycles);
        probe_run<FULL | P_BRANCH>("full, update under the live flag's branch", blocks, out, cycles);
        probe_run<FULL | P_SCALARS>("full, token scalars from shared memory", blocks, out, cycles);
        probe_run<FULL | P_BRANCH | P_SCALARS>("full, branch and scalars (cuda_packed's)", blocks, out, cycles);
        probe_run<FULL | P_PAIRS>("full, two tokens per loop iteration", blocks, out, cycles);
        probe_run<FULL | P_BRANCH | P_SCALARS | P_PAIRS>("full, branch, scalars and pairs", blocks, out, cycles);
        probe_run<P_LDS | P_READOUT>("no shuffles (2 FMULs instead)", blocks, out, cycles);
        probe_run<P_SHFL | P_READOUT>("no row loads (rows kept in registers)", blocks, out, cycles);
        probe_run<P_SHFL | P_LDS>("no readout", blocks, out, cycles);
        probe_run<P_SHFL>("shuffles, no row loads, no readout", blocks, out, cycles);
        probe_run<P_READOUT>("arithmetic only (no shuffles, no row loads)", blocks, out, cycles);
        probe_run<0>("chain only (no shuffles, loads, readout)", blocks, out, cycles);
    }
    return 0;
}
