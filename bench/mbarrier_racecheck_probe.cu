/* Does compute-sanitizer's racecheck order shared-memory accesses by mbarrier phases? The warp-specialized decode
 * (src/cuda/delta_decode.cu) hands stages between warps with mbarriers only, and racecheck reports hazards on those
 * hand-offs. This probe is the same hand-off reduced to one value: warp 1 writes a word of shared memory, its lane 0
 * arrives on an mbarrier (count 1), warp 0 waits for that phase and reads the word, over several rounds with a second
 * mbarrier for the way back. The program is correctly synchronized; racecheck's verdict on it says how to read its
 * verdict on the decode.
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 bench/mbarrier_racecheck_probe.cu -o /tmp/mbar_probe
 *     /tmp/mbar_probe && compute-sanitizer --tool racecheck /tmp/mbar_probe
 */
#include <cstdio>

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void bar_wait(unsigned long long *bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
}

__device__ __forceinline__ void bar_arrive(unsigned long long *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

/* rounds r = 0 .. R-1: warp 1 writes word = r + 1 once warp 0 has read round r - 1 (empty), then arrives on full;
 * warp 0 waits on full, adds the word into out */
__global__ void probe(int rounds, int *out) {
    __shared__ unsigned long long full, empty;
    __shared__ int word;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&full)) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&empty)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    int sum = 0;
    for (int r = 0; r < rounds; ++r) {
        if (warp == 1) {
            if (r > 0) bar_wait(&empty, (unsigned)(r - 1) & 1u);
            if (lane == 0) {
                word = r + 1;
                bar_arrive(&full);
            }
        } else {
            bar_wait(&full, (unsigned)r & 1u);
            sum += word;
            __syncwarp();
            if (lane == 0) bar_arrive(&empty);
        }
    }
    if (threadIdx.x == 0) *out = sum;
}

int main(void) {
    const int rounds = 8;
    int *out = nullptr, got = -1;
    if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) return 2;
    probe<<<1, 64>>>(rounds, out);
    if (cudaMemcpy(&got, out, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return 2;
    const int want = rounds * (rounds + 1) / 2;
    printf("mbarrier hand-off: sum %d, expected %d: %s\n", got, want, got == want ? "ok" : "WRONG");
    cudaFree(out);
    return got == want ? 0 : 1;
}
