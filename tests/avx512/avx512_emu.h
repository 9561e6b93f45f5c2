/* A C emulation of the AVX-512 intrinsics that packed_avx512.c, packed_decode_avx512.c and the layer's
 * rows_avx512.c use, lane by lane as Intel's guide defines them, so that their code runs (slowly) on a machine
 * without AVX-512. For checking the kernels' logic only: force-included into those files, built with -mavx2 -mfma
 * and no AVX-512 flag, aligned loads and stores assert their 64-byte alignment. GDN_AVX512_EMULATED makes gdn__cpu_has_avx512 (and test_routing)
 * say yes. The whole suite so, on any AVX2 machine (a testing build, never shipped; CMake's GDN_AVX512_EMULATED):
 *
 *     cmake -S . -B build/emu -G Ninja -DGDN_TESTING=ON -DGDN_CUDA=OFF -DGDN_AVX512_EMULATED=ON &&
 *         cmake --build build/emu && ctest --test-dir build/emu
 *     cc -std=c11 -O2 -Iinclude tests/avx512/avx512_check.c build/emu/libgdn.a -lm -pthread \
 *         -o build/emu/avx512_check && build/emu/avx512_check */
#ifndef GDN_TESTS_AVX512_EMU_H
#define GDN_TESTS_AVX512_EMU_H

#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct emu512 {
    float x[16];
} emu512;

#define __m512 emu512

static inline emu512 emu512_setzero(void) {
    emu512 r;
    for (int i = 0; i < 16; ++i) r.x[i] = 0.0f;
    return r;
}
static inline emu512 emu512_set1(float a) {
    emu512 r;
    for (int i = 0; i < 16; ++i) r.x[i] = a;
    return r;
}
static inline emu512 emu512_loadu(const float *p) {
    emu512 r;
    memcpy(r.x, p, sizeof r.x);
    return r;
}
static inline emu512 emu512_load(const float *p) {
    assert((uintptr_t)p % 64 == 0);
    return emu512_loadu(p);
}
static inline void emu512_storeu(float *p, emu512 a) { memcpy(p, a.x, sizeof a.x); }
static inline void emu512_store(float *p, emu512 a) {
    assert((uintptr_t)p % 64 == 0);
    emu512_storeu(p, a);
}
static inline emu512 emu512_fmadd(emu512 a, emu512 b, emu512 c) {
    for (int i = 0; i < 16; ++i) c.x[i] = fmaf(a.x[i], b.x[i], c.x[i]);
    return c;
}
static inline emu512 emu512_mul(emu512 a, emu512 b) {
    for (int i = 0; i < 16; ++i) a.x[i] = a.x[i] * b.x[i];
    return a;
}
static inline emu512 emu512_add(emu512 a, emu512 b) {
    for (int i = 0; i < 16; ++i) a.x[i] = a.x[i] + b.x[i];
    return a;
}
static inline emu512 emu512_sub(emu512 a, emu512 b) {
    for (int i = 0; i < 16; ++i) a.x[i] = a.x[i] - b.x[i];
    return a;
}
/* per 128-bit chunk k: (a0 b0 a1 b1) and (a2 b2 a3 b3) */
static inline emu512 emu512_unpacklo(emu512 a, emu512 b) {
    emu512 r;
    for (int k = 0; k < 4; ++k) {
        r.x[4 * k] = a.x[4 * k];
        r.x[4 * k + 1] = b.x[4 * k];
        r.x[4 * k + 2] = a.x[4 * k + 1];
        r.x[4 * k + 3] = b.x[4 * k + 1];
    }
    return r;
}
static inline emu512 emu512_unpackhi(emu512 a, emu512 b) {
    emu512 r;
    for (int k = 0; k < 4; ++k) {
        r.x[4 * k] = a.x[4 * k + 2];
        r.x[4 * k + 1] = b.x[4 * k + 2];
        r.x[4 * k + 2] = a.x[4 * k + 3];
        r.x[4 * k + 3] = b.x[4 * k + 3];
    }
    return r;
}
/* per 128-bit chunk: a[imm bits 1:0], a[3:2], b[5:4], b[7:6] */
static inline emu512 emu512_shuffle(emu512 a, emu512 b, int imm) {
    emu512 r;
    for (int k = 0; k < 4; ++k) {
        r.x[4 * k] = a.x[4 * k + (imm & 3)];
        r.x[4 * k + 1] = a.x[4 * k + ((imm >> 2) & 3)];
        r.x[4 * k + 2] = b.x[4 * k + ((imm >> 4) & 3)];
        r.x[4 * k + 3] = b.x[4 * k + ((imm >> 6) & 3)];
    }
    return r;
}
static inline __m128 emu512_extract4(emu512 a, int k) { return _mm_loadu_ps(a.x + 4 * k); }

#define _mm512_setzero_ps() emu512_setzero()
#define _mm512_set1_ps(a) emu512_set1(a)
#define _mm512_loadu_ps(p) emu512_loadu((const float *)(p))
#define _mm512_load_ps(p) emu512_load((const float *)(p))
#define _mm512_storeu_ps(p, a) emu512_storeu((float *)(p), (a))
#define _mm512_store_ps(p, a) emu512_store((float *)(p), (a))
#define _mm512_stream_ps(p, a) emu512_store((float *)(p), (a))
#define _mm512_fmadd_ps(a, b, c) emu512_fmadd((a), (b), (c))
#define _mm512_mul_ps(a, b) emu512_mul((a), (b))
#define _mm512_add_ps(a, b) emu512_add((a), (b))
#define _mm512_sub_ps(a, b) emu512_sub((a), (b))
#define _mm512_unpacklo_ps(a, b) emu512_unpacklo((a), (b))
#define _mm512_unpackhi_ps(a, b) emu512_unpackhi((a), (b))
#define _mm512_shuffle_ps(a, b, imm) emu512_shuffle((a), (b), (imm))
#define _mm512_castps512_ps128(a) emu512_extract4((a), 0)
#define _mm512_extractf32x4_ps(a, k) emu512_extract4((a), (k))

/* Doubles (the layer rows' SiLU and sigmoid, rows_avx512.c): eight lanes, the integer half as int64 lanes, and the
 * compare masks as the low 8 bits of an unsigned. */
typedef struct emu512d {
    double x[8];
} emu512d;
typedef struct emu512i {
    int64_t x[8];
} emu512i;

#define __m512d emu512d
#define __m512i emu512i

static inline emu512d emu512d_set1(double a) {
    emu512d r;
    for (int i = 0; i < 8; ++i) r.x[i] = a;
    return r;
}
#define EMU512D_OP(name, expr)                                                                                         \
    static inline emu512d emu512d_##name(emu512d a, emu512d b) {                                                       \
        emu512d r;                                                                                                     \
        for (int i = 0; i < 8; ++i) r.x[i] = (expr);                                                                   \
        return r;                                                                                                      \
    }
EMU512D_OP(add, a.x[i] + b.x[i])
EMU512D_OP(sub, a.x[i] - b.x[i])
EMU512D_OP(mul, a.x[i] * b.x[i])
EMU512D_OP(div, a.x[i] / b.x[i])
static inline emu512d emu512d_xor(emu512d a, emu512d b) {
    emu512d r;
    for (int i = 0; i < 8; ++i) {
        uint64_t u, v;
        memcpy(&u, &a.x[i], 8), memcpy(&v, &b.x[i], 8);
        u ^= v;
        memcpy(&r.x[i], &u, 8);
    }
    return r;
}
static inline emu512d emu512d_from_ps(__m256 a) {
    float f[8];
    emu512d r;
    _mm256_storeu_ps(f, a);
    for (int i = 0; i < 8; ++i) r.x[i] = (double)f[i];
    return r;
}
static inline __m256 emu512d_to_ps(emu512d a) {
    float f[8];
    for (int i = 0; i < 8; ++i) f[i] = (float)a.x[i];
    return _mm256_loadu_ps(f);
}
/* rounded to nearest; out of range or NaN: the integer indefinite 0x80000000, as the instruction gives */
static inline __m256i emu512d_to_epi32(emu512d a) {
    int32_t v[8];
    for (int i = 0; i < 8; ++i) {
        const double d = nearbyint(a.x[i]);
        v[i] = d == d && d >= -2147483648.0 && d <= 2147483647.0 ? (int32_t)d : INT32_MIN;
    }
    return _mm256_loadu_si256((const __m256i *)v);
}
/* _CMP_GT_OQ, _CMP_LT_OQ, _CMP_UNORD_Q (the predicates rows_avx512.c uses) */
static inline unsigned emu512d_cmp(emu512d a, emu512d b, int pred) {
    unsigned k = 0;
    for (int i = 0; i < 8; ++i) {
        const double x = a.x[i], y = b.x[i];
        const int unord = x != x || y != y;
        const int hit = pred == _CMP_UNORD_Q ? unord : pred == _CMP_GT_OQ ? !unord && x > y : !unord && x < y;
        assert(pred == _CMP_UNORD_Q || pred == _CMP_GT_OQ || pred == _CMP_LT_OQ);
        k |= (unsigned)hit << i;
    }
    return k;
}
static inline emu512d emu512d_blend(unsigned k, emu512d a, emu512d b) {
    emu512d r;
    for (int i = 0; i < 8; ++i) r.x[i] = (k >> i) & 1 ? b.x[i] : a.x[i];
    return r;
}
static inline emu512i emu512i_from_epi32(__m256i a) {
    int32_t v[8];
    emu512i r;
    _mm256_storeu_si256((__m256i *)v, a);
    for (int i = 0; i < 8; ++i) r.x[i] = v[i];
    return r;
}
static inline emu512i emu512i_set1(int64_t a) {
    emu512i r;
    for (int i = 0; i < 8; ++i) r.x[i] = a;
    return r;
}
static inline emu512i emu512i_add(emu512i a, emu512i b) {
    emu512i r;
    for (int i = 0; i < 8; ++i) r.x[i] = (int64_t)((uint64_t)a.x[i] + (uint64_t)b.x[i]);
    return r;
}
static inline emu512i emu512i_slli(emu512i a, int imm) {
    emu512i r;
    for (int i = 0; i < 8; ++i) r.x[i] = imm > 63 ? 0 : (int64_t)((uint64_t)a.x[i] << imm);
    return r;
}
static inline emu512d emu512i_as_pd(emu512i a) {
    emu512d r;
    memcpy(r.x, a.x, sizeof r.x);
    return r;
}

#define _mm512_set1_pd(a) emu512d_set1(a)
#define _mm512_setzero_pd() emu512d_set1(0.0)
#define _mm512_add_pd(a, b) emu512d_add((a), (b))
#define _mm512_sub_pd(a, b) emu512d_sub((a), (b))
#define _mm512_mul_pd(a, b) emu512d_mul((a), (b))
#define _mm512_div_pd(a, b) emu512d_div((a), (b))
#define _mm512_xor_pd(a, b) emu512d_xor((a), (b))
#define _mm512_cvtps_pd(a) emu512d_from_ps(a)
#define _mm512_cvtpd_ps(a) emu512d_to_ps(a)
#define _mm512_cvtpd_epi32(a) emu512d_to_epi32(a)
#define _mm512_cmp_pd_mask(a, b, pred) emu512d_cmp((a), (b), (pred))
#define _mm512_mask_blend_pd(k, a, b) emu512d_blend((k), (a), (b))
#define _mm512_cvtepi32_epi64(a) emu512i_from_epi32(a)
#define _mm512_set1_epi64(a) emu512i_set1(a)
#define _mm512_add_epi64(a, b) emu512i_add((a), (b))
#define _mm512_slli_epi64(a, imm) emu512i_slli((a), (imm))
#define _mm512_castsi512_pd(a) emu512i_as_pd(a)

#endif
