/* AVX2 helpers of the blocked kernels (packed_avx2.c, and packed_avx512.c, whose CPUs have AVX2 too): output rows
 * streamed around the caches, f16/bf16 rows to and from f32, and the 8 x 8 transpose of the VK state. Included by
 * files compiled with -mavx2 -mfma or wider. */
#ifndef GDN_CPU_DELTA_X86_AVX2_H
#define GDN_CPU_DELTA_X86_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "gdn_internal.h"

/* Output rows that the kernel writes once: whole 32-byte pieces of the destination with non-temporal stores,
 * the unaligned ends with memcpy. */
static inline void avx2_stream(void *dst, const void *src, size_t bytes) {
    char *d = dst;
    const char *s = src;
    size_t i = (32 - ((uintptr_t)d & 31)) & 31;
    if (i >= bytes) {
        memcpy(d, s, bytes);
        return;
    }
    memcpy(d, s, i);
    for (; i + 32 <= bytes; i += 32) _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
    memcpy(d + i, s + i, bytes - i);
}

/* n halves (bf16: bfloat16s) to f32, 8 at a time, the same bits as gdn__f16_to_f32 / gdn__bf16_to_f32:
 * bf16 is the top half of an f32; a half's exponent and mantissa move up 13 bits with the exponent rebased by
 * 112 (normal) or 224 (inf, NaN), and a subnormal is its mantissa times 2^-24 (exact). */
static void avx2_cvt_in16(float *dst, const uint16_t *src, int64_t n, int bf16) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256i r;
        if (bf16) {
            r = _mm256_slli_epi32(x, 16);
        } else {
            const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x8000)), 16);
            const __m256i em = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fff)), 13);
            const __m256i exp = _mm256_and_si256(x, _mm256_set1_epi32(0x7c00));
            const __m256i normal = _mm256_add_epi32(em, _mm256_set1_epi32(112 << 23));
            const __m256i special = _mm256_add_epi32(em, _mm256_set1_epi32(224 << 23));
            const __m256 man = _mm256_cvtepi32_ps(_mm256_and_si256(x, _mm256_set1_epi32(0x3ff)));
            const __m256i tiny = _mm256_castps_si256(_mm256_mul_ps(man, _mm256_set1_ps(5.9604644775390625e-08f)));
            r = _mm256_blendv_epi8(normal, special, _mm256_cmpeq_epi32(exp, _mm256_set1_epi32(0x7c00)));
            r = _mm256_blendv_epi8(r, tiny, _mm256_cmpeq_epi32(exp, _mm256_setzero_si256()));
            r = _mm256_or_si256(r, sign);
        }
        _mm256_storeu_si256((__m256i *)(dst + i), r);
    }
    for (; i < n; ++i) dst[i] = bf16 ? gdn__bf16_to_f32(src[i]) : gdn__f16_to_f32(src[i]);
}

/* n f32 values to halves (bf16: bfloat16s), 8 at a time, the same bits as gdn__f32_to_f16 / gdn__f32_to_bf16:
 * every case of the scalar function is computed and the one that applies is blended in. */
static void avx2_cvt_out16(uint16_t *dst, const float *src, int64_t n, int bf16) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
        const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
        const __m256i one = _mm256_set1_epi32(1);
        const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
        __m256i r;
        if (bf16) {
            /* NaN: quiet, truncated; else round to nearest even */
            const __m256i rounding = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
            const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, rounding), 16);
            const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
            r = _mm256_blendv_epi8(rounded, quiet, nan);
        } else {
            const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000));
            /* NaN: quiet with the top mantissa bits; >= 65520: inf; normal half: rebased and rounded to nearest
             * even; below: |x| 2^24 rounded to an integer (ties to even) by adding and subtracting 2^23 */
            const __m256i quiet = _mm256_or_si256(_mm256_set1_epi32(0x7e00),
                                                  _mm256_and_si256(_mm256_srli_epi32(a, 13), _mm256_set1_epi32(0x3ff)));
            const __m256i inf = _mm256_set1_epi32(0x7c00);
            const __m256i rounding = _mm256_add_epi32(_mm256_set1_epi32(0xfff), _mm256_and_si256(_mm256_srli_epi32(a, 13), one));
            const __m256i normal = _mm256_srli_epi32(_mm256_add_epi32(_mm256_sub_epi32(a, _mm256_set1_epi32(0x38000000)), rounding), 13);
            const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(16777216.0f));
            const __m256 big = _mm256_set1_ps(8388608.0f);
            const __m256i sub = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(scaled, big), big));
            r = _mm256_blendv_epi8(sub, normal, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x38800000 - 1)));
            r = _mm256_blendv_epi8(r, inf, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x477ff000 - 1)));
            r = _mm256_blendv_epi8(r, quiet, nan);
            r = _mm256_or_si256(r, sign);
        }
        /* 8 x 32 -> 8 x 16: the packs work per 128-bit half, so gather the two halves' results first */
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(packed));
    }
    for (; i < n; ++i) dst[i] = bf16 ? gdn__f32_to_bf16(src[i]) : gdn__f32_to_f16(src[i]);
}

/* dst[r * ds + c] = src[c * ss + r], r, c < 8: rows of src in, interleaved by pairs, quads and halves. Written
 * out in named registers and always inlined (as a loop over arrays GCC kept the rows on the stack). */
static inline __attribute__((always_inline)) void avx2_transpose8(float *dst, int64_t ds, const float *src, int64_t ss) {
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ss), r2 = _mm256_loadu_ps(src + 2 * ss);
    const __m256 r3 = _mm256_loadu_ps(src + 3 * ss), r4 = _mm256_loadu_ps(src + 4 * ss), r5 = _mm256_loadu_ps(src + 5 * ss);
    const __m256 r6 = _mm256_loadu_ps(src + 6 * ss), r7 = _mm256_loadu_ps(src + 7 * ss);
    /* rows interleaved by pairs (per 128-bit half) */
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    /* then by quads: u_k holds column k of rows 0-3 (low half) and column k + 4 (high half) */
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    /* then the halves: column k of rows 0-7 = low halves of u_k and u_k+4; column k + 4 = their high halves */
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

#endif
