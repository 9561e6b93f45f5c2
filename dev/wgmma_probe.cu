/* Warpgroup MMA (wgmma, sm_90a) on the layouts a wgmma scan of cuda_chunked would use, against mma.sync: which
 * matrix-descriptor strides read an unswizzled core-matrix tile correctly, with A K-major (U = A X, K S0) and with
 * A transposed from a [token][key] tile (K^T diag(e) U), and whether wgmma's f32 sums are bitwise those of a chain of
 * mma.sync m16n8k16 in the same k order (then a wgmma scan could keep cuda_chunked's bits).
 *
 * D [64, 32] = A [64, 64] B [64, 32], bf16 in, f32 accumulate, four k steps of 16. A core matrix is 8 rows of
 * 16 bytes (8 bf16), 128 contiguous bytes; the tile is core matrices in row-major order of their block indices.
 * Each variant prints the largest |D - D64| / max |D64| against a float64 reference and whether D equals the
 * mma.sync chain bit for bit.
 *
 *     nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a --fmad=false dev/wgmma_probe.cu -o /tmp/wgmma_probe && /tmp/wgmma_probe
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

constexpr int M = 64, N = 32, K = 64;

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* The descriptor of an unswizzled operand at p: start, leading and stride byte offsets (each >> 4). */
__device__ __forceinline__ uint64_t desc(const void *p, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((smem_u32(p) & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
}

/* d += A B for one k step: m64n32k16, both operands from shared memory, A transposed when TA. */
template <int TA>
__device__ __forceinline__ void wgmma_step(float (&d)[16], uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1, %18, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15])
                 : "l"(da), "l"(db), "n"(TA));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Byte offset of element (r, c) of a tile of core matrices: rows of 8 elements along c, blocks in row-major order
 * with cb blocks along c. */
__host__ __device__ inline int core_off(int r, int c, int cb) { return ((r / 8) * cb + c / 8) * 128 + (r % 8) * 16 + (c % 8) * 2; }

/* a: A [M][K] and b: B^T [N][K], row-major bf16 bits. TA = 0: A stored K-major (rows m, 16 bytes along k);
 * TA = 1: A stored as A^T [K][M] (rows k, 16 bytes along m), the way a [token][key] tile holds K^T. lbo_a, sbo_a,
 * lbo_b, sbo_b: the descriptors' strides; kstep_a: bytes from one k step of A to the next. d: [M][N] by wgmma,
 * ds: the same by mma.sync chains. */
template <int TA>
__global__ void probe(const uint16_t *a, const uint16_t *b, float *d, float *ds, uint32_t lbo_a, uint32_t sbo_a,
                      uint32_t kstep_a, uint32_t lbo_b, uint32_t sbo_b) {
    __shared__ __align__(128) uint16_t sa[M * K], sb[N * K];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    for (int i = tid; i < M * K; i += 128) {
        const int m = i / K, k = i % K;
        *(uint16_t *)((char *)sa + (TA ? core_off(k, m, M / 8) : core_off(m, k, K / 8))) = a[i];
    }
    for (int i = tid; i < N * K; i += 128) {
        const int n = i / K, k = i % K;
        *(uint16_t *)((char *)sb + core_off(n, k, K / 8)) = b[i];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float acc[16] = {};
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < K / 16; ++s)
        wgmma_step<TA>(acc, desc((char *)sa + s * kstep_a, lbo_a, sbo_a), desc((char *)sb + s * 256, lbo_b, sbo_b));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    for (int i = 0; i < 16; ++i) { /* accumulator i: tile i / 4, rows g (+ 8), columns 2 t (+ 1) */
        const int r = 16 * w + g + 8 * ((i >> 1) & 1), c = 8 * (i >> 2) + 2 * t + (i & 1);
        d[r * N + c] = acc[i];
    }
    /* the same sums by mma.sync: warp w's rows, four n tiles, the k steps in order */
    for (int nt = 0; nt < N / 8; ++nt) {
        float c4[4] = {};
        for (int s = 0; s < K / 16; ++s) {
            uint32_t fa[4], fb[2];
            auto pa = [&](int r, int k) { return (uint32_t)a[r * K + k] | (uint32_t)a[r * K + k + 1] << 16; };
            auto pb = [&](int n, int k) { return (uint32_t)b[n * K + k] | (uint32_t)b[n * K + k + 1] << 16; };
            const int r0 = 16 * w + g, k0 = 16 * s + 2 * t, n0 = 8 * nt + g;
            fa[0] = pa(r0, k0), fa[1] = pa(r0 + 8, k0), fa[2] = pa(r0, k0 + 8), fa[3] = pa(r0 + 8, k0 + 8);
            fb[0] = pb(n0, k0), fb[1] = pb(n0, k0 + 8);
            mma16816(c4, fa, fb[0], fb[1]);
        }
        for (int e = 0; e < 4; ++e) ds[(16 * w + g + 8 * (e >> 1)) * N + 8 * nt + 2 * t + (e & 1)] = c4[e];
    }
}

static uint16_t bf16_bits(float x) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float bf16_val(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

int main() {
    std::vector<uint16_t> a(M * K), b(N * K);
    uint32_t seed = 12345;
    auto rnd = [&]() { /* signed values over four binades: rounding in the sums shows */
        seed = seed * 1664525u + 1013904223u;
        const float u = (float)(seed >> 8) / 16777216.0f;
        seed = seed * 1664525u + 1013904223u;
        return (u - 0.5f) * ldexpf(1.0f, (int)(seed >> 30));
    };
    for (auto &x : a) x = bf16_bits(rnd());
    for (auto &x : b) x = bf16_bits(rnd());
    std::vector<double> ref(M * N, 0.0);
    double big = 0.0;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            for (int k = 0; k < K; ++k) ref[m * N + n] += (double)bf16_val(a[m * K + k]) * bf16_val(b[n * K + k]);
            big = fmax(big, fabs(ref[m * N + n]));
        }
    uint16_t *da, *db;
    float *dd, *dds;
    cudaMalloc(&da, a.size() * 2), cudaMalloc(&db, b.size() * 2), cudaMalloc(&dd, M * N * 4), cudaMalloc(&dds, M * N * 4);
    cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
    struct variant {
        const char *name;
        int ta;
        uint32_t lbo_a, sbo_a, kstep_a, lbo_b, sbo_b;
    };
    /* K-major: core matrices 128 bytes apart along k, K / 8 * 128 along m (n); a k step is two along k.
     * A^T [K][M]: 128 bytes apart along m, M / 8 * 128 along k; a k step is two rows of blocks. */
    const uint32_t kk = K / 8 * 128, mm = M / 8 * 128;
    const variant vs[] = {
        {"A, B K-major; LBO = k stride, SBO = m/n stride", 0, 128, kk, 256, 128, kk},
        {"A, B K-major; LBO = m/n stride, SBO = k stride", 0, kk, 128, 256, kk, 128},
        {"A transposed; LBO = k stride, SBO = m stride", 1, mm, 128, 2 * mm, 128, kk},
        {"A transposed; LBO = m stride, SBO = k stride", 1, 128, mm, 2 * mm, 128, kk},
    };
    std::vector<float> d(M * N), ds(M * N);
    for (const variant &v : vs) {
        cudaMemset(dd, 0xff, M * N * 4);
        if (v.ta) probe<1><<<1, 128>>>(da, db, dd, dds, v.lbo_a, v.sbo_a, v.kstep_a, v.lbo_b, v.sbo_b);
        else probe<0><<<1, 128>>>(da, db, dd, dds, v.lbo_a, v.sbo_a, v.kstep_a, v.lbo_b, v.sbo_b);
        const cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            printf("%-52s CUDA error: %s\n", v.name, cudaGetErrorString(e));
            return 1;
        }
        cudaMemcpy(d.data(), dd, M * N * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(ds.data(), dds, M * N * 4, cudaMemcpyDeviceToHost);
        double worst = 0.0;
        for (int i = 0; i < M * N; ++i) worst = fmax(worst, std::isfinite(d[i]) ? fabs(d[i] - ref[i]) / big : INFINITY);
        const bool same = memcmp(d.data(), ds.data(), M * N * 4) == 0;
        printf("%-52s max err %.2e of max |D|  %s  mma.sync chain %s\n", v.name, worst, worst < 1e-5 ? "reads right" : "WRONG",
               same ? "== bitwise" : "differs");
    }
    return 0;
}
