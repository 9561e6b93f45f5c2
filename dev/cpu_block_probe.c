/* The blocked kernel's per-token step (packed_avx2's fused pass, Dk = 128, c = 4, scalar gate) on one or two
 * 16-column blocks whose state stays in L1, timed alone against an FMA-peak loop run beside it.
 *
 * Build (repository root, after `make`):
 *     cc -O2 -std=c11 -ffp-contract=off -fno-fast-math -mavx2 -mfma -Isrc -Iinclude dev/cpu_block_probe.c \
 *        build/libgdn.a -lm -pthread -o /tmp/cpu_block_probe && GDN_THREADS=1 taskset -c 0 /tmp/cpu_block_probe
 *
 * Each case runs `ntok` tokens (argv[1], default 256) over `nb` blocks in lockstep (as blk_steps does with BLK_IL =
 * 2): per token and block the delta from a (hot) v row and the carried kv, the inlined pass
 * blk_pass_groups(BLK_FUSED, c = 4, all lanes full) on the block's S[128][16], and y stored to a small hot buffer.
 * The token's q and k rows come from two buffers of `wrap` tokens `stride` floats apart (stride 2048 = the bench's
 * layout, Hk 16 x Dk 128: every token's row of a head at the same offset modulo 4 KB), at `qoff` / `koff` bytes past
 * a 4 KB boundary (the state is 4 KB aligned); `pfd` > 0 prefetches (T0) the q and k rows `pfd` tokens ahead; `gap`
 * puts the second block that many bytes further. argv[2] runs one case only; PROBE_QUANTILES=1 prints the spread.
 * Each case: 101 short trials alternating with short FMA-peak trials (12 chains, as tools/peak_avx2.c); printed:
 * median rate / median peak and best / best, in % of the peak (112 counted flops per state row of a block) and in
 * cycles per row (a cycle = 1/32 of the peak's flops: 2 FMA pipes x 8 lanes x 2). -DPROBE_NOSTORE (diagnostic,
 * wrong results) drops the state stores.
 *
 * Found (Zen 3 EPYC guest, 2 vCPUs, one thread, taskset -c 0, GCC 12, no perf counters):
 *   - The step alone reaches the static bound: best 4.49-4.68 cycles per row = 75-78% of the FMA peak (best peak
 *     103.7 GFLOP/s), against llvm-mca's 4.93 (71%), with hot rows and equally with the bench's layout (64 tokens of
 *     rows from L2 at the 8 KB stride, every row of a head 4K-aliased with the others and with the state): 4.55-4.60.
 *     The q/k offsets (0, +64 B, +1 KB / +2 KB+64), a 1 KB+64 or 512 B stride, a 4 KB+64 gap between the blocks,
 *     and prefetching the next 1-4 tokens' rows all land within the noise of that (4.50-4.73). 4K aliasing, L1
 *     conflicts of the state with the rows and the tree's chains are not the gap. Rows streamed from DRAM (2048
 *     tokens) cost 4.9-6.4 (prefetching 4 tokens ahead helps a little); the kernel's chunk prefetcher covers that.
 *   - This machine is noisy for this loop and not for the peak loop: the peak's median trial is within 3% of its
 *     best, the step's median is 6.8-9.7 cycles per row (p90 10-15) against its 4.5 best, and without the state
 *     stores the spread mostly goes (median 5.4-5.9). A median of a few long runs, as `gdn bench` reports, sees
 *     that: the whole kernel at T = 2048 runs a median 149-162 ms (7.2-7.8 cycles per row, 45-49% of 103.7) but a
 *     minimum over 300 runs of 119.3-126.2 ms (5.8-6.1 cycles per row, 57-61%).
 *   - So of the 1.6x between the static bound and the bench's median, about 1.3x is the machine's dispersion
 *     (median against best, also seen by the isolated step), and about 1.25x (best kernel 5.8-6.1 against best step
 *     4.5-4.6 cycles per row) is the kernel around the step: per-chunk work, the item's 256 KB state coming back from
 *     L2 per block pair, the v and y streams, the chunk prefetcher, the first pair's rows from memory.
 *   - argv[2] = 100 runs the kernel's block-pair schedule over a 256 KB item state (no v/y, no chunk prefetcher):
 *     best 5.1-6.9 cycles per row in three runs whose hot-rows case was 5.3-5.5 (a noisier window than above), the
 *     same chunk's rows for every chunk 4.9-6.2: the state's trips to L2 and the rows from L3 cost 0-25% here,
 *     not resolved on this machine.
 *   - Kernel toggles (one-line, bitwise-neutral, `gdn bench --quick --json --reps 60`, T = 2048 ms_min, three
 *     alternating rounds): as is 124.7 / 128.6 / 128.1 ms; y through the chunk buffer (direct_y off) 128.6 / 135.5
 *     / 135.3; no v prefetch 133.8 / 133.6 / 154.0; q, k copied into contiguous chunk rows (direct_qk off, no 4K
 *     aliasing of the rows) 130.2 / 120.7 / 145.1. None is a 5% gain; the streamed y and the v prefetch earn theirs.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "delta/cpu/x86_avx2.h"
#include "gdn_internal.h"

#define BLK_VEC __m256
#define BLK_VW 8
#define BLK_NV 2
#define blk_vzero() _mm256_setzero_ps()
#define blk_vload(p) _mm256_load_ps(p)
#ifdef PROBE_NOSTORE /* diagnostic only (wrong results): the state rows are not stored back */
#define blk_vstore(p, x) ((void)(p), (void)(x))
#else
#define blk_vstore(p, x) _mm256_store_ps((p), (x))
#endif
#define blk_vbcast(x) _mm256_set1_ps(x)
#define blk_vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define blk_vmul(a, b) _mm256_mul_ps((a), (b))
#define blk_vsub(a, b) _mm256_sub_ps((a), (b))
#define blk_vadd(a, b) _mm256_add_ps((a), (b))
#define blk_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define blk_stream(dst, src, bytes) avx2_stream((dst), (src), (bytes))
#define blk_stream_fence() _mm_sfence()
#define blk_transpose8(dst, ds, src, ss) avx2_transpose8((dst), (ds), (src), (ss))
#define blk_cvt_in16(dst, src, n, bf16) avx2_cvt_in16((dst), (src), (n), (bf16))
#define blk_cvt_out16(dst, src, n, bf16) avx2_cvt_out16((dst), (src), (n), (bf16))
#define blk_vloadu(p) _mm256_loadu_ps(p)
#define blk_vstream(p, x) _mm256_stream_ps((p), (x))
#define blk_vstoreu(p, x) _mm256_storeu_ps((p), (x))
#define BLK_STATIC_TREES
#pragma GCC diagnostic ignored "-Wunused-function"
#include "delta/cpu/blocked.h"

#define DK 128

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* 12 independent FMA chains in named registers (as tools/peak_avx2.c): the peak (flops per second) */
static __attribute__((noinline)) double peak_loop(int64_t iters) {
    const __m256 m = _mm256_set1_ps(0.99999994f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f);
    __m256 a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f);
    __m256 a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f);
    __m256 a9 = _mm256_set1_ps(1.0f), a10 = _mm256_set1_ps(1.1f), a11 = _mm256_set1_ps(1.2f);
    const double t0 = now();
    for (int64_t it = 0; it < iters; ++it) {
        a0 = _mm256_fmadd_ps(a0, m, c);
        a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c);
        a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c);
        a7 = _mm256_fmadd_ps(a7, m, c);
        a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
        a10 = _mm256_fmadd_ps(a10, m, c);
        a11 = _mm256_fmadd_ps(a11, m, c);
    }
    const double t = now() - t0;
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    if (s[0] == 12345.f) puts("");
    return (double)iters * 12 * 16 / t;
}

typedef struct probe_case {
    const char *name;
    int nb;         /* blocks in lockstep */
    int64_t wrap;   /* distinct tokens of q, k rows (1: the same rows every token) */
    int64_t stride; /* floats between tokens' rows */
    int64_t qoff, koff; /* bytes past a 4 KB boundary */
    int pfd;        /* prefetch q, k rows this many tokens ahead (0: none) */
    int gap;        /* state blocks this many bytes apart beyond 8 KB (0: contiguous, as the workspace) */
} probe_case;

static float *S_buf, *q_buf, *k_buf, *v_buf, *y_buf;

static __attribute__((noinline)) void run_tokens(float *S0, float *S1, const float *q, const float *k, int64_t stride,
                                                 int64_t wrap, int64_t ntok, int nb, int pfd, blk_part *kv) {
    float *S[2] = {S0, S1};
    const BLK_VEC g = blk_vbcast(0.995f), beta = blk_vbcast(0.5f), scale = blk_vbcast(0.088f);
    int64_t t = 0;
    for (int64_t u = 0; u < ntok; ++u) {
        const int64_t tn = t + 1 == wrap ? 0 : t + 1;
        if (pfd) {
            int64_t tp = (t + pfd) % wrap;
            const char *qp = (const char *)(q + tp * stride), *kp = (const char *)(k + tp * stride);
            for (int l = 0; l < DK * 4; l += 64) {
                _mm_prefetch(qp + l, _MM_HINT_T0);
                _mm_prefetch(kp + l, _MM_HINT_T0);
            }
        }
        for (int s = 0; s < nb; ++s) {
            blk_pass P;
            P.S = S[s];
            P.Dk = DK;
            P.c = 4;
            P.gv = NULL;
            P.k = k + t * stride;
            P.q = q + t * stride;
            P.kn = k + tn * stride;
            P.g = g;
            for (int v = 0; v < BLK_NV; ++v) {
                const BLK_VEC vv = blk_vload(v_buf + s * 16 + v * 8);
                P.d[v] = blk_vmul(blk_vsub(vv, blk_vmul(P.g, kv[s].n[v])), beta);
            }
            kv[s] = blk_pass_groups(&P, BLK_FUSED, 0, 4, 1);
            for (int v = 0; v < BLK_NV; ++v) _mm256_store_ps(y_buf + s * 16 + v * 8, blk_vmul(kv[s].o[v], scale));
        }
        t = tn;
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void init_state(float *S, int nb) {
    for (int i = 0; i < nb * DK * 16; ++i) S[i] = 0.01f * (float)((i * 37) % 101 - 50) / 50.0f;
}

/* TRIALS short timings of the case, alternating with short peak timings (the machine is a shared VM: its clocks
 * and neighbours move). Returns the best case rate over the best peak rate in %; *med: median over median. */
#define TRIALS 101
static double run_case(const probe_case *pc, int64_t ntok, double *med) {
    float *S0 = S_buf, *S1 = S_buf + DK * 16 + pc->gap / 4;
    const float *q = (const float *)((char *)q_buf + pc->qoff), *k = (const float *)((char *)k_buf + pc->koff);
    blk_part kv[2];
    memset(kv, 0, sizeof kv);
    double rate[TRIALS], peak[TRIALS];
    init_state(S0, 1);
    init_state(S1, 1);
    run_tokens(S0, S1, q, k, pc->stride, pc->wrap, pc->wrap < 256 ? 256 : pc->wrap, pc->nb, pc->pfd, kv); /* warm */
    for (int r = 0; r < TRIALS; ++r) {
        peak[r] = peak_loop(60000);
        const double t0 = now();
        run_tokens(S0, S1, q, k, pc->stride, pc->wrap, ntok, pc->nb, pc->pfd, kv);
        rate[r] = (double)ntok * pc->nb * DK * 112 / (now() - t0);
    }
    qsort(rate, TRIALS, sizeof rate[0], cmp_double);
    qsort(peak, TRIALS, sizeof peak[0], cmp_double);
    if (!(S0[5] == S0[5])) printf("  (state NaN)\n");
    *med = 100.0 * rate[TRIALS / 2] / peak[TRIALS / 2];
    if (getenv("PROBE_QUANTILES")) { /* the spread: cycles per row of the case's trials, and the peak's GFLOP/s */
        printf("  cyc/row at the best peak, trials p0 p10 p25 p50 p75 p90:");
        for (int qi = 0; qi < 6; ++qi) {
            const int at = (int)((TRIALS - 1) * (1.0 - (double[]){0, .1, .25, .5, .75, .9}[qi]));
            printf(" %.2f", 112.0 / 32.0 * peak[TRIALS - 1] / rate[at]);
        }
        printf("; peak GFLOP/s p0 p50 p90: %.1f %.1f %.1f\n", peak[TRIALS - 1] / 1e9, peak[TRIALS / 2] / 1e9,
               peak[TRIALS / 10] / 1e9);
    }
    return 100.0 * rate[TRIALS - 1] / peak[TRIALS - 1];
}

/* The kernel's schedule for one item (bench shape, one thread: 2 key heads, 4 value heads x 8 blocks = 32 blocks,
 * 256 KB of state in L2): chunks of 64 tokens, each block pair through the chunk's 64 tokens in turn; q, k rows of
 * T = 2048 tokens at the bench's 8 KB stride (the pair's key head's rows). No v/y streams, no chunk prefetcher.
 * same_rows: every chunk reads the first chunk's rows (hot in L2). Best and median of `trials` whole items, in cycles per row at the best peak of the trials beside them. */
static void run_schedule(int trials, int pfd, int same_rows) {
    float *S = aligned_alloc(4096, 32 * DK * 16 * 4);
    init_state(S, 32);
    double rate[64], peak[64];
    blk_part kv[2];
    memset(kv, 0, sizeof kv);
    for (int r = 0; r < trials; ++r) {
        peak[r] = peak_loop(400000);
        const double t0 = now();
        for (int64_t c0 = 0; c0 < 2048; c0 += 64)
            for (int pr = 0; pr < 16; ++pr) {
                const int64_t kh = pr / 8; /* blocks 0-15: value heads 0, 1 (key head 0); 16-31: key head 1 */
                float *S0 = S + (2 * pr) * DK * 16, *S1 = S0 + DK * 16;
                const int64_t r0 = same_rows ? 0 : c0 * 2048;
                run_tokens(S0, S1, q_buf + r0 + kh * DK, k_buf + r0 + kh * DK, 2048, 64, 64, 2, pfd, kv);
            }
        rate[r] = 2048.0 * 32 * DK * 112 / (now() - t0);
    }
    qsort(rate, trials, sizeof rate[0], cmp_double);
    qsort(peak, trials, sizeof peak[0], cmp_double);
    printf("%-44s best %.2f median %.2f cycles per row (best %.1f%%), peak best %.1f GFLOP/s\n",
           same_rows ? "schedule, every chunk the same (L2) rows" : pfd ? "schedule of one item, T=2048, prefetch 1"
                                                                           : "schedule of one item, T=2048 (32 blocks, L2)",
           112.0 / 32.0 * peak[trials - 1] / rate[trials - 1], 112.0 / 32.0 * peak[trials - 1] / rate[trials / 2],
           100.0 * rate[trials - 1] / peak[trials - 1], peak[trials - 1] / 1e9);
    free(S);
}

int main(int argc, char **argv) {
    const int64_t ntok = argc > 1 ? atoll(argv[1]) : 256;
    const size_t qk_floats = (size_t)2048 * 2048 + 4096;
    S_buf = aligned_alloc(4096, 4 * DK * 16 * 4 + 65536);
    q_buf = aligned_alloc(4096, qk_floats * 4);
    k_buf = aligned_alloc(4096, qk_floats * 4);
    v_buf = aligned_alloc(64, 4096);
    y_buf = aligned_alloc(64, 4096);
    for (size_t i = 0; i < qk_floats; ++i) {
        q_buf[i] = 0.05f * (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
        k_buf[i] = 0.06f * (float)((int)(i * 40503u % 2001) - 1000) / 1000.0f;
    }
    for (int i = 0; i < 1024; ++i) v_buf[i] = 0.3f * (float)(i % 7 - 3);
    double pk[5];
    for (int r = 0; r < 5; ++r) pk[r] = peak_loop(20000000);
    qsort(pk, 5, sizeof pk[0], cmp_double);
    printf("FMA peak %.1f GFLOP/s (median of 5 long timings); each case: %d trials of %lld tokens, each against a "
           "peak timing just before it\n", pk[2] / 1e9, TRIALS, (long long)ntok);
    printf("%-44s %3s %5s %6s %5s %5s %3s %5s  %7s %7s %7s %7s\n", "case", "nb", "wrap", "stride", "qoff", "koff", "pfd", "gap",
           "med%pk", "best%pk", "cyc/row", "best");
    static const probe_case cases[] = {
        {"hot rows (same q,k every token), 2 blocks", 2, 1, 2048, 0, 0, 0, 0},
        {"hot rows, 1 block", 1, 1, 2048, 0, 0, 0, 0},
        {"hot rows, 2 blocks, q,k +64 B", 2, 1, 2048, 64, 64, 0, 0},
        {"hot rows, 2 blocks, q +1 KB, k +2 KB+64", 2, 1, 2048, 1024, 2112, 0, 0},
        {"8 tokens, stride 8 KB (4K-aliased rows)", 2, 8, 2048, 0, 0, 0, 0},
        {"64 tokens, stride 8 KB (bench layout, L2)", 2, 64, 2048, 0, 0, 0, 0},
        {"64 tokens, stride 8 KB, k +2 KB", 2, 64, 2048, 0, 2048, 0, 0},
        {"64 tokens, stride 8 KB + 64 B", 2, 64, 2064, 0, 0, 0, 0},
        {"64 tokens, stride 1 KB + 64 B (packed)", 2, 64, 272, 0, 0, 0, 0},
        {"64 tokens, stride 512 B (contiguous rows)", 2, 64, 128, 0, 0, 0, 0},
        {"64 tokens, stride 8 KB, prefetch 1 ahead", 2, 64, 2048, 0, 0, 1, 0},
        {"64 tokens, stride 8 KB, prefetch 4 ahead", 2, 64, 2048, 0, 0, 4, 0},
        {"64 tokens, stride 8 KB + 64, prefetch 2", 2, 64, 2064, 0, 0, 2, 0},
        {"2048 tokens, stride 8 KB (L3/DRAM rows)", 2, 2048, 2048, 0, 0, 0, 0},
        {"2048 tokens, stride 8 KB, prefetch 4", 2, 2048, 2048, 0, 0, 4, 0},
        {"2048 tokens, stride 8 KB + 64, prefetch 4", 2, 2048, 2064, 0, 0, 4, 0},
        {"64 tokens, stride 8 KB, blocks 4 KB apart+", 2, 64, 2048, 0, 0, 0, 4096 + 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const probe_case *pc = &cases[i];
        if (argc > 2 && (size_t)atoi(argv[2]) != i) continue;
        double pct;
        const double best = run_case(pc, ntok, &pct);
        printf("%-44s %3d %5lld %6lld %5lld %5lld %3d %5d  %6.1f%% %6.1f%% %7.2f %7.2f\n", pc->name, pc->nb,
               (long long)pc->wrap, (long long)pc->stride, (long long)pc->qoff, (long long)pc->koff, pc->pfd, pc->gap,
               pct, best, 112.0 / (32.0 * pct / 100.0), 112.0 / (32.0 * best / 100.0));
        fflush(stdout);
    }
    if (argc <= 2 || atoi(argv[2]) >= 100) {
        run_schedule(31, 0, 0);
        run_schedule(31, 1, 0);
        run_schedule(31, 0, 1);
    }
    return 0;
}
