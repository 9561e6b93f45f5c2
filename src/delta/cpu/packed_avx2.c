/* The AVX2 + FMA kernel `packed_avx2`: the blocked kernel of blocked.h with __m256 vectors, two per row
 * of a 16-column block. Compiled with -mavx2 -mfma (this file only); routed only where the CPU has both. */
#include <immintrin.h>
#include <string.h>

#include "delta/cpu/x86_avx2.h"
#include "gdn_internal.h"

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
#define blk_transpose8(dst, ds, src, ss) avx2_transpose8((dst), (ds), (src), (ss))
#define blk_cvt_in16(dst, src, n, bf16) avx2_cvt_in16((dst), (src), (n), (bf16))
#define blk_cvt_out16(dst, src, n, bf16) avx2_cvt_out16((dst), (src), (n), (bf16))
#define blk_vloadu(p) _mm256_loadu_ps(p)
#define blk_vstream(p, x) _mm256_stream_ps((p), (x))
#define blk_vstoreu(p, x) _mm256_storeu_ps((p), (x))
#define BLK_STATIC_TREES
#include "delta/cpu/blocked.h"

/* Dk up to 512 (a block of columns' state on the stack), a CPU with AVX2 and FMA. */
int gdn__delta_packed_avx2_eligible(const gdn__problem *p) { return p->a.Dk <= BLK_MAX_DK && gdn__cpu_has_avx2_fma(); }
int gdn__delta_packed_avx2_routed(const gdn__problem *p) { return gdn__delta_packed_avx2_eligible(p) && gdn__cpu_call_is_big(p); }
const gdn__variant gdn__delta_packed_avx2_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
int64_t gdn__delta_packed_avx2_workspace(const gdn__problem *p) { return blk_workspace(p); }

gdn_status gdn__delta_packed_avx2(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    return blk_run(p);
}
