/* Does compute-sanitizer's racecheck order shared-memory accesses by mbarrier phases? The warp-specialized decode
 * (src/delta/cuda/decode_stream.cu) hands stages between warps with mbarriers only, and racecheck reports hazards on
 * those hand-offs. This probe is the same hand-off reduced to one value, with the kernels' own mbarrier helpers
 * (gdn_cuda.cuh): warp 1 writes a word of shared memory, its lane 0 arrives on an mbarrier (count 1), warp 0 waits
 * for that phase and reads the word, over several rounds with a second mbarrier for the way back. The program is
 * correctly synchronized; racecheck's verdict on it says how to read its verdict on the decode.
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 -Isrc -Isrc/cuda -Iinclude dev/mbarrier_racecheck_probe.cu -o /tmp/mbar_probe
 *     /tmp/mbar_probe && compute-sanitizer --tool racecheck /tmp/mbar_probe
 */
#include <cstdio>

#include "gdn_cuda.cuh"

/* rounds r = 0 .. R-1: warp 1 writes word = r + 1 once warp 0 has read round r - 1 (empty), then arrives on full;
 * warp 0 waits on full, adds the word into out */
__global__ void probe(int rounds, int *out) {
    __shared__ uint64_t full, empty;
    __shared__ int word;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        gdn_mbar_init(&full, 1);
        gdn_mbar_init(&empty, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    int sum = 0;
    for (int r = 0; r < rounds; ++r) {
        if (warp == 1) {
            if (r > 0) gdn_mbar_wait(&empty, (unsigned)(r - 1) & 1u);
            if (lane == 0) {
                word = r + 1;
                gdn_mbar_arrive(&full);
            }
        } else {
            gdn_mbar_wait(&full, (unsigned)r & 1u);
            sum += word;
            __syncwarp();
            if (lane == 0) gdn_mbar_arrive(&empty);
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
