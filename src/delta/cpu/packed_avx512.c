/* The AVX-512 kernel `packed_avx512`: the blocked kernel of blocked.h with __m512 vectors (16 columns each), two per
 * row of a 32-column block; the tree per column is the contract's whatever the width (docs/CONTRACT.md). f16/bf16 rows,
 * output streams and the VK state's 8 x 8 transposes use the AVX2 helpers (every AVX-512 CPU has AVX2). Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma (this file only); eligible only where the CPU has all of them. */
#include <immintrin.h>
#include <string.h>

#include "delta/cpu/x86_avx2.h"
#include "gdn_internal.h"

#define BLK_VEC __m512
#define BLK_VW 16
#define BLK_NV 2
#define blk_vzero() _mm512_setzero_ps()
#define blk_vload(p) _mm512_load_ps(p)
#define blk_vstore(p, x) _mm512_store_ps((p), (x))
#define blk_vbcast(x) _mm512_set1_ps(x)
#define blk_vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define blk_vmul(a, b) _mm512_mul_ps((a), (b))
#define blk_vsub(a, b) _mm512_sub_ps((a), (b))
#define blk_vadd(a, b) _mm512_add_ps((a), (b))
#define blk_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define blk_stream(dst, src, bytes) avx2_stream((dst), (src), (bytes))
#define blk_stream_fence() _mm_sfence()
#define blk_transpose8(dst, ds, src, ss) avx2_transpose8((dst), (ds), (src), (ss))
#define blk_cvt_in16(dst, src, n, bf16) avx2_cvt_in16((dst), (src), (n), (bf16))
#define blk_cvt_out16(dst, src, n, bf16) avx2_cvt_out16((dst), (src), (n), (bf16))
#define blk_vloadu(p) _mm512_loadu_ps(p)
#define blk_vstream(p, x) _mm512_stream_ps((p), (x))
#define blk_vstoreu(p, x) _mm512_storeu_ps((p), (x))
#define BLK_STATIC_TREES
#include "delta/cpu/blocked.h"

/* Dk up to 512 (a block's state in the workspace) and the CPU has AVX-512 F, BW, VL, DQ. */
int gdn__delta_packed_avx512_eligible(const gdn__problem *p) { return p->a.Dk <= BLK_MAX_DK && gdn__cpu_has_avx512(); }
int gdn__delta_packed_avx512_routed(const gdn__problem *p) { return gdn__delta_packed_avx512_eligible(p) && gdn__cpu_call_is_big(p); }
const gdn__variant gdn__delta_packed_avx512_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
int64_t gdn__delta_packed_avx512_workspace(const gdn__problem *p) { return blk_workspace(p); }

gdn_status gdn__delta_packed_avx512(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_packed_avx512_eligible(p)) return GDN_ERR_INELIGIBLE;
    return blk_run(p);
}
