/* The contract's transcendentals over all 2^32 binary32 inputs on a GPU, each input three ways (tests/core/math_ref.h,
 * as dev/math_exhaustive.c does on the CPU): gdn_math.h's function, its binary64 slow path (the previous definition)
 * and the correctly rounded value from a double-double reference. Per function: new != slow (any bit: must be 0),
 * slow != correctly rounded, undecided by the reference (each listed, up to 4096, the first 8 printed, with -v all
 * of them), the largest relative errors of the fast and slow paths' binary64 results and how often the fast path
 * falls back; then the raw gate, exp(-exp(A_log) softplus(a + dt)), against its slow pieces on 2^32 random
 * triples. Exit status 1 if new != slow anywhere. About a minute on an H200.
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Isrc -Iinclude dev/math_exhaustive.cu -o /tmp/math_exhaustive
 *     /tmp/math_exhaustive [-v] [function ...]
 */
#include <cmath>
#include <cstdio>
#include <cstring>

#include "../tests/core/math_ref.h"

enum { CAP = 4096 };

struct tally {
    unsigned long long counts[3], fast_points, fallbacks, worst[2]; /* worst: the double's bits (ordered as uint64) */
    unsigned int worst_x[2];
    unsigned int listed[3], x[3][CAP];
    float r[3][CAP][3];
};

__device__ void gdn_record(tally *t, int kind, unsigned int u, const float r[3]) {
    const unsigned int i = atomicAdd(&t->listed[kind], 1u);
    if (i < CAP) {
        t->x[kind][i] = u;
        for (int k = 0; k < 3; ++k) t->r[kind][i][k] = r[k];
    }
}

/* bit patterns base + i, i < 2^32 / gridDim / blockDim per thread */
__global__ void gdn_sweep(int fn, tally *t) {
    unsigned long long counts[3] = {0, 0, 0}, fast_points = 0, fallbacks = 0;
    double worst[2] = {0.0, 0.0};
    unsigned int worst_x[2] = {0, 0};
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long v0 = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned long long v = v0; v < (1ull << 32); v += threads) {
        const unsigned int u = (unsigned int)v;
        const float x = gdn__bits_f32(u);
        float r[3];
        const int flags = gdn__ref_check(fn, x, r);
        for (int k = 0; k < 3; ++k)
            if (flags & (1 << k)) ++counts[k], gdn_record(t, k, u, r);
        double err[2];
        int falls_back;
        if (gdn__ref_errors(fn, x, err, &falls_back)) {
            ++fast_points, fallbacks += falls_back;
            for (int k = 0; k < 2; ++k)
                if (err[k] > worst[k]) worst[k] = err[k], worst_x[k] = u;
        }
    }
    for (int k = 0; k < 3; ++k)
        if (counts[k]) atomicAdd(&t->counts[k], counts[k]);
    atomicAdd(&t->fast_points, fast_points);
    atomicAdd(&t->fallbacks, fallbacks);
    for (int k = 0; k < 2; ++k) {
        const unsigned long long w = (unsigned long long)gdn__f64_bits(worst[k]);
        if (atomicMax(&t->worst[k], w) < w) t->worst_x[k] = worst_x[k]; /* racy but only a witness */
    }
}

/* splitmix64 */
__device__ unsigned long long gdn_mix(unsigned long long z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* a float from 32 random bits: 1 in 8 any bit pattern, else uniform in [lo, hi) */
__device__ float gdn_pick(unsigned int bits, float lo, float hi) {
    if ((bits & 7u) == 0) return gdn__bits_f32(bits * 2654435761u);
    return lo + (hi - lo) * (float)(bits >> 8) * 0x1p-24f;
}

/* the raw gate on 2^32 random (a, A_log, dt_bias) triples around a model's values: new against the slow pieces */
__global__ void gdn_gate_sample(unsigned long long *differs, unsigned int *first) {
    unsigned long long n = 0;
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long v0 = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned long long v = v0; v < (1ull << 32); v += threads) {
        const unsigned long long h1 = gdn_mix(v), h2 = gdn_mix(h1);
        const float a = gdn_pick((unsigned int)h1, -12.0f, 12.0f), dt = gdn_pick((unsigned int)h2, -8.0f, 3.0f);
        const float A_log = gdn_pick((unsigned int)(h1 >> 32), -3.0f, 4.5f);
        const float g = gdn_raw_gate(a, A_log, dt);
        const float s = gdn__expf_slow(-(gdn__expf_slow(A_log) * gdn__softplusf_slow(a + dt)));
        if (gdn__f32_bits(g) != gdn__f32_bits(s)) {
            if (n++ == 0) first[0] = gdn__f32_bits(a), first[1] = gdn__f32_bits(A_log), first[2] = gdn__f32_bits(dt);
        }
    }
    if (n) atomicAdd(differs, n);
}

static int check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

int main(int argc, char **argv) {
    int verbose = 0, chosen = 0;
    for (int i = 1; i < argc; ++i) verbose |= !strcmp(argv[i], "-v"), chosen |= strcmp(argv[i], "-v") != 0;
    tally *t = NULL, *h = (tally *)malloc(sizeof(tally));
    if (!h || !check(cudaMalloc(&t, sizeof(tally)), "cudaMalloc")) return 2;
    int status = 0;
    static const char *const what[3] = {"new != slow", "slow != CR", "undecided"};
    for (int fn = 0; fn < GDN_REF_FNS; ++fn) {
        int want = !chosen;
        for (int i = 1; i < argc; ++i) want |= !strcmp(argv[i], gdn__ref_name(fn));
        if (!want) continue;
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        cudaMemset(t, 0, sizeof(tally));
        cudaEventRecord(e0);
        gdn_sweep<<<132 * 16, 256>>>(fn, t);
        cudaEventRecord(e1);
        if (!check(cudaDeviceSynchronize(), gdn__ref_name(fn))) return 2;
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaMemcpy(h, t, sizeof(tally), cudaMemcpyDeviceToHost);
        printf("%s: 2^32 inputs in %.1f s: %llu new != slow, %llu slow != CR, %llu undecided\n", gdn__ref_name(fn),
               ms / 1000.0f, h->counts[0], h->counts[1], h->counts[2]);
        if (h->fast_points) {
            double w[2];
            for (int k = 0; k < 2; ++k) memcpy(&w[k], &h->worst[k], 8);
            printf("  fast path on %llu inputs, %llu fall back; max relative error of the binary64 results: "
                   "fast 2^%.2f (x = %08x), slow 2^%.2f (x = %08x)\n",
                   h->fast_points, h->fallbacks, log2(w[0]), h->worst_x[0], log2(w[1]), h->worst_x[1]);
        }
        for (int k = 0; k < 3; ++k) {
            const unsigned int n = h->listed[k] < CAP ? h->listed[k] : CAP;
            for (unsigned int i = 0; i < n && (verbose || i < 8); ++i)
                printf("  %-11s x = %08x (%.9g): new %08x slow %08x CR %08x\n", what[k], h->x[k][i],
                       (double)gdn__bits_f32(h->x[k][i]), gdn__f32_bits(h->r[k][i][0]), gdn__f32_bits(h->r[k][i][1]),
                       gdn__f32_bits(h->r[k][i][2]));
        }
        fflush(stdout);
        status |= h->counts[0] != 0;
    }
    if (!chosen) {
        unsigned long long *d = NULL, n = 0;
        unsigned int *first = NULL, f[3] = {0, 0, 0};
        cudaMalloc(&d, 8), cudaMalloc(&first, 12), cudaMemset(d, 0, 8);
        gdn_gate_sample<<<132 * 16, 256>>>(d, first);
        if (!check(cudaDeviceSynchronize(), "raw gate")) return 2;
        cudaMemcpy(&n, d, 8, cudaMemcpyDeviceToHost), cudaMemcpy(f, first, 12, cudaMemcpyDeviceToHost);
        printf("raw gate: 2^32 random triples: %llu new != slow", n);
        if (n) printf(" (first: a %08x A_log %08x dt_bias %08x)", f[0], f[1], f[2]);
        printf("\n");
        status |= n != 0;
    }
    printf(status ? "FAILED: the new functions differ from the slow paths\n" : "new == slow on every input checked\n");
    return status;
}
