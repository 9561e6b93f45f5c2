/* The AVX-512 kernels (packed_avx512, packed_decode_avx512) against ref, bitwise, on a machine that has AVX-512.
 * Public API only. Refuses to pass where the kernels are not eligible (exit 2: nothing was checked).
 *
 *     make -j GDN_CUDA=0 lib && cc -std=c11 -O2 -Iinclude tests/avx512/avx512_check.c build/libgdn.a -lm -pthread \
 *         -o build/avx512_check && build/avx512_check
 *
 * Sweeps Dk, Dv, T, B, head ratios, dtypes, gate and beta kinds, masks, both state layouts, state in / none / in
 * place, 1-3 threads, inputs with signed zeros and tiny values, and y aligned to 64 bytes or only to 4 (the streamed
 * y path needs 64 and 8 MiB of y: the Qwen prefill shape). y and the final state memcmp-equal to ref's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u32() & 0xffffff) / 16777216.0f; }

/* f32 to f16 / bf16 by truncation (any bits will do as inputs) */
static uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}
static uint16_t to_f16(float x) { /* |x| < 2: normal halves and zeros */
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xff;
    if (e < 113) return (uint16_t)sign; /* tiny: a signed zero */
    return (uint16_t)(sign | ((e - 112) << 10) | ((u >> 13) & 0x3ff));
}

typedef struct shape {
    int64_t B, T, Hk, Hv, Dk, Dv;
    gdn_dtype dtype;
    gdn_gate_kind gate;
    gdn_beta_kind beta;
    gdn_state_layout layout;
    int masked, state_mode, threads, hostile, y_offset; /* state_mode: 0 in and out, 1 no state_in, 2 in place,
                                                           3 no state_out; y_offset: elements past a 64-byte boundary */
} shape;

static int failures, compared;

static void fill(void *p, gdn_dtype dt, size_t n, float scale, int hostile) {
    for (size_t i = 0; i < n; ++i) {
        float x = uniform(-scale, scale);
        if (hostile && next_u32() % 8 == 0) x = next_u32() % 2 ? -0.0f : 0.0f;
        if (hostile && next_u32() % 16 == 0) x *= 1e-30f;
        if (dt == GDN_F32)
            ((float *)p)[i] = x;
        else
            ((uint16_t *)p)[i] = dt == GDN_BF16 ? to_bf16(x) : to_f16(x);
    }
}

/* Runs ref and `kernel` on one shape; returns 1 if the kernel ran. */
static int check(const shape *s, const char *kernel) {
    const size_t ds = s->dtype == GDN_F32 ? 4 : 2;
    const size_t nqk = (size_t)(s->B * s->T * s->Hk * s->Dk), nv = (size_t)(s->B * s->T * s->Hv * s->Dv);
    const size_t ng = (size_t)(s->B * s->T * s->Hv) * (s->gate == GDN_GATE_VECTOR ? (size_t)s->Dk : 1);
    const size_t nb = (size_t)(s->B * s->T * s->Hv), ns = (size_t)(s->B * s->Hv * s->Dk * s->Dv);
    void *q = malloc(nqk * ds), *k = malloc(nqk * ds), *v = malloc(nv * ds);
    char *ybuf0 = aligned_alloc(64, (nv * ds + 64 + 63) / 64 * 64), *ybuf1 = aligned_alloc(64, (nv * ds + 64 + 63) / 64 * 64);
    float *gate = malloc(ng * 4), *beta = malloc(nb * 4), *A = malloc((size_t)s->Hv * 4), *dt = malloc((size_t)s->Hv * 4);
    float *s_in = malloc(ns * 4), *s0 = malloc(ns * 4), *s1 = malloc(ns * 4);
    uint8_t *mask = malloc((size_t)(s->B * s->T));
    if (!q || !k || !v || !ybuf0 || !ybuf1 || !gate || !beta || !A || !dt || !s_in || !s0 || !s1 || !mask) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill(q, s->dtype, nqk, 0.2f, s->hostile);
    fill(k, s->dtype, nqk, 0.2f, s->hostile);
    fill(v, s->dtype, nv, 1.0f, s->hostile);
    for (size_t i = 0; i < ng; ++i)
        gate[i] = s->gate == GDN_GATE_LOG_DECAY ? uniform(-0.2f, 0.0f) : s->gate == GDN_GATE_RAW ? uniform(-3.0f, 3.0f)
                                                                                           : uniform(0.8f, 1.0f);
    for (size_t i = 0; i < nb; ++i) beta[i] = s->beta == GDN_BETA_LOGIT ? uniform(-3.0f, 3.0f) : uniform(0.0f, 1.0f);
    for (int64_t h = 0; h < s->Hv; ++h) {
        A[h] = uniform(-2.0f, 1.0f);
        dt[h] = uniform(-1.0f, 1.0f);
    }
    for (size_t i = 0; i < ns; ++i) s_in[i] = uniform(-0.1f, 0.1f);
    for (int64_t i = 0; i < s->B * s->T; ++i) mask[i] = (uint8_t)(i % 3 != 1);
    void *y0 = ybuf0 + s->y_offset * ds, *y1 = ybuf1 + s->y_offset * ds;
    int ran = 0;
    for (int pass = 1; pass >= 0; --pass) { /* the kernel first (ineligible: ref is not run), then ref */
        float *st = pass ? s1 : s0;
        memcpy(st, s_in, ns * 4);
        gdn_delta_args a;
        memset(&a, 0, sizeof a);
        a.B = s->B, a.T = s->T, a.Hk = s->Hk, a.Hv = s->Hv, a.Dk = s->Dk, a.Dv = s->Dv, a.dtype = s->dtype;
        a.q = q, a.k = k, a.v = v, a.y = pass ? y1 : y0;
        a.gate_kind = s->gate, a.gate = gate, a.A_log = A, a.dt_bias = dt, a.beta_kind = s->beta, a.beta = beta;
        a.mask = s->masked ? mask : NULL, a.state_layout = s->layout, a.scale = 0.0883883f;
        a.state_in = s->state_mode == 1 ? NULL : s->state_mode == 2 ? st : s_in;
        a.state_out = s->state_mode == 3 ? NULL : st;
        a.kernel = pass ? kernel : "ref", a.threads = s->threads;
        const gdn_status r = gdn_delta(&a);
        if (pass && r == GDN_ERR_INELIGIBLE) break;
        if (r != GDN_OK) {
            printf("FAIL %s: %s\n", pass ? kernel : "ref", gdn_status_str(r));
            failures++;
            break;
        }
        if (pass) continue;
        ran = 1;
        compared++;
        const int ydiff = memcmp(y0, y1, nv * ds) != 0, sdiff = s->state_mode != 3 && memcmp(s0, s1, ns * 4) != 0;
        if (ydiff || sdiff) {
            failures++;
            printf("DIFFERS %s (%s%s): B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld dtype %d gate %d beta %d layout %d "
                   "masked %d state mode %d threads %d hostile %d y offset %d\n",
                   kernel, ydiff ? "y" : "", sdiff ? " state" : "", (long long)s->B, (long long)s->T, (long long)s->Hk,
                   (long long)s->Hv, (long long)s->Dk, (long long)s->Dv, (int)s->dtype, (int)s->gate, (int)s->beta,
                   (int)s->layout, s->masked, s->state_mode, s->threads, s->hostile, s->y_offset);
        }
    }
    free(q), free(k), free(v), free(ybuf0), free(ybuf1), free(gate), free(beta), free(A), free(dt);
    free(s_in), free(s0), free(s1), free(mask);
    return ran;
}

/* argv: the blocked and the decode kernel to check (default packed_avx512 packed_decode_avx512; packed_avx2
 * packed_decode_avx2 checks this program on an AVX2 machine) */
int main(int argc, char **argv) {
    const char *names[] = {argc == 3 ? argv[1] : "packed_avx512", argc == 3 ? argv[2] : "packed_decode_avx512"};
    int index[2] = {-1, -1};
    for (int i = 0; i < gdn_kernel_count(); ++i)
        for (int n = 0; n < 2; ++n)
            if (strcmp(gdn_kernel_name(i), names[n]) == 0) index[n] = i;
    if (index[0] < 0 || index[1] < 0) {
        printf("this libgdn has no kernel %s\n", index[0] < 0 ? names[0] : names[1]);
        return 2;
    }
    int ran[2] = {0, 0};
    /* the Qwen shapes first: prefill with y streamed (64-byte aligned, 32 MiB) and not (offset), decode */
    const shape qwen[] = {
        {1, 2048, 16, 32, 128, 128, GDN_F32, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 0, 2, 0, 0, 0},
        {1, 300, 16, 32, 128, 128, GDN_F32, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_KV, 0, 0, 0, 0, 1},
        {1, 64, 16, 32, 128, 128, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 1, 0, 0, 0, 0},
        {64, 1, 16, 32, 128, 128, GDN_F32, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_VK, 0, 2, 0, 0, 0},
        {64, 1, 16, 32, 128, 128, GDN_BF16, GDN_GATE_RAW, GDN_BETA_LOGIT, GDN_STATE_KV, 0, 2, 0, 0, 0},
        {3, 2, 16, 32, 128, 128, GDN_F16, GDN_GATE_VECTOR, GDN_BETA_DIRECT, GDN_STATE_KV, 1, 0, 0, 1, 3},
    };
    for (size_t i = 0; i < sizeof qwen / sizeof qwen[0]; ++i)
        for (int n = 0; n < 2; ++n) ran[n] += check(&qwen[i], names[n]);
    printf("Qwen shapes: %d comparisons, %d failed\n", compared, failures);
    /* the sweep */
    const int64_t dks[] = {1, 7, 32, 64, 96, 100, 128, 128, 128, 200, 256, 512};
    const int64_t dvs[] = {1, 8, 15, 16, 17, 31, 32, 33, 48, 64, 100, 128, 160};
    const int64_t ts[] = {1, 2, 3, 7, 16, 65};
    const int64_t heads[][2] = {{1, 1}, {1, 2}, {2, 6}, {4, 4}};
    int i = 0;
    for (size_t a = 0; a < sizeof dks / sizeof dks[0]; ++a)
        for (size_t b = 0; b < sizeof dvs / sizeof dvs[0]; ++b)
            for (size_t c = 0; c < sizeof ts / sizeof ts[0]; ++c, ++i) {
                shape s = {1 + i % 3, ts[c], heads[i % 4][0], heads[i % 4][1], dks[a], dvs[b], (gdn_dtype)(i % 3),
                           (gdn_gate_kind)(i / 3 % 4), (gdn_beta_kind)(i / 2 % 2), (gdn_state_layout)(i / 5 % 2),
                           i / 7 % 2, i / 11 % 4, 1 + i % 3, i % 5 == 0, (i / 13 % 2) * (1 + i % 7)};
                for (int n = 0; n < 2; ++n) ran[n] += check(&s, names[n]);
            }
    printf("%d comparisons (%s %d, %s %d), %d failed\n", compared, names[0], ran[0], names[1], ran[1], failures);
    if (ran[0] == 0 || ran[1] == 0) {
        printf("%s or %s never eligible on this machine (AVX-512 kernels: no AVX-512 F, BW, VL, DQ): nothing checked\n",
               names[0], names[1]);
        return 2;
    }
    return failures ? 1 : 0;
}
