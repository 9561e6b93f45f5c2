/* The AVX2 + FMA kernel `packed_avx2`: the blocked kernel of delta_blocked.h with __m256 vectors, two per row
 * of a 16-column block. Compiled with -mavx2 -mfma (this file only); routed only where the CPU has both. */
#include <immintrin.h>

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
#include "cpu/delta_blocked.h"

gdn_status gdn__delta_packed_avx2(const gdn__problem *p) { return blk_run(p); }
