/* The AVX2 + FMA kernel `packed_avx2`: the blocked kernel of delta_blocked.h with __m256 vectors, two per row
 * of a 16-column block. Compiled with -mavx2 -mfma (this file only); routed only where the CPU has both. */
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

#define BLK_VEC __m256
#define BLK_VW 8
#define BLK_NV 2
#define blk_vzero() _mm256_setzero_ps()
#define blk_vload(p) _mm256_load_ps(p)
#define blk_vstore(p, x) _mm256_store_ps((p), (x))
#define blk_vbcast(x) _mm256_set1_ps(x)
#define blk_vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define blk_vmul(a, b) _mm256_mul_ps((a), (b))
#define blk_vsub(a, b) _mm256_sub_ps((a), (b))
#define blk_vadd(a, b) _mm256_add_ps((a), (b))
#define blk_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define blk_stream(dst, src, bytes) avx2_stream((dst), (src), (bytes))
#define blk_stream_fence() _mm_sfence()
#define blk_vloadu(p) _mm256_loadu_ps(p)
#define blk_vstream(p, x) _mm256_stream_ps((p), (x))
#define BLK_STATIC_TREES
#include "cpu/delta_blocked.h"

gdn_status gdn__delta_packed_avx2(const gdn__problem *p) { return blk_run(p); }
