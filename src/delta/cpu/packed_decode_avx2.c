/* The AVX2 + FMA kernel `packed_decode_avx2`: the decode kernel of decode.h with __m256 vectors. Compiled with
 * -mavx2 -mfma (this file only); routed only where the CPU has both.
 *
 * VK: the column is 4 groups of 32 keys (lanes 8n .. 8n+7 of group n), each as 4 vectors R_0 .. R_3 of 8 keys; the
 * 4 x 4 transpose inside each 128-bit half gives
 *
 *     E_e = key 4l + e of lanes l = 8n + (0, 2, 4, 6 | 1, 3, 5, 7)   (low half | high half)
 *
 * and the butterfly goes by halves (dec_group_tree), then ((g0 + g1) + (g2 + g3)) over the groups. KV: a block of
 * 16 columns is 2 vectors per key row. */
#include <immintrin.h>

#include "gdn_internal.h"

#define DEC_VEC __m256
#define DEC_VW 8
#define dec_vzero() _mm256_setzero_ps()
#define dec_vload(p) _mm256_load_ps(p)
#define dec_vstore(p, x) _mm256_store_ps((p), (x))
#define dec_vloadu(p) _mm256_loadu_ps(p)
#define dec_vstoreu(p, x) _mm256_storeu_ps((p), (x))
#define dec_vbcast(x) _mm256_set1_ps(x)
#define dec_vbcastp(p) _mm256_broadcast_ss(p)
#define dec_vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define dec_vmul(a, b) _mm256_mul_ps((a), (b))
#define dec_vsub(a, b) _mm256_sub_ps((a), (b))
#define dec_vadd(a, b) _mm256_add_ps((a), (b))
#define dec_vunpacklo(a, b) _mm256_unpacklo_ps((a), (b))
#define dec_vunpackhi(a, b) _mm256_unpackhi_ps((a), (b))
#define dec_vshuffle(a, b, imm) _mm256_shuffle_ps((a), (b), (imm))

/* The subtree of one group's 8 lane partials p = (p0 p2 p4 p6 | p1 p3 p5 p7): levels m = 1 (the halves), m = 2
 * and m = 4: ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). */
static inline __attribute__((always_inline)) float dec_group_tree(__m256 p) {
    const __m128 x = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1)); /* p0+p1 p2+p3 p4+p5 p6+p7 */
    const __m128 y = _mm_add_ps(x, _mm_shuffle_ps(x, x, 0xb1));                         /* pairs of pairs in 0, 2 */
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_movehl_ps(y, y)));
}

#include "delta/cpu/decode.h"

/* VK or KV layout, Dk = 128, T <= 2, and the CPU has AVX2 and FMA. */
int gdn__delta_packed_decode_avx2_eligible(const gdn__problem *p) { return dec_args_fit(p) && gdn__cpu_has_avx2_fma(); }
int gdn__delta_packed_decode_avx2_routed(const gdn__problem *p) { return gdn__delta_packed_decode_avx2_eligible(p) && gdn__cpu_call_is_big(p); }
const gdn__variant gdn__delta_packed_decode_avx2_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
int64_t gdn__delta_packed_decode_avx2_workspace(const gdn__problem *p) { return p ? 0 : -1; } /* none */

gdn_status gdn__delta_packed_decode_avx2(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_packed_decode_avx2_eligible(p)) return GDN_ERR_INELIGIBLE;
    return dec_run(p);
}
