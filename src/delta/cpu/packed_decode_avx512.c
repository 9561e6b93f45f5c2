/* The AVX-512 kernel `packed_decode_avx512`: the decode kernel of decode.h with __m512 vectors, the same operations
 * in the same order per column as packed_decode_avx2. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
 * -mfma (this file only); eligible only where the CPU has all of them.
 *
 * VK: the column is 2 groups of 64 keys (lanes 16n .. 16n+15 of group n), each as 4 vectors R_0 .. R_3 of 16 keys:
 * 128-bit chunk c of R_i holds the 4 keys of lane 16n + 4i + c. The 4 x 4 transpose inside each chunk gives
 *
 *     E_e, chunk c, element i = key e of lane 16n + 4i + c
 *
 * and the butterfly goes levels 1, 2 across chunks, 4, 8 inside one (dec_group_tree), 16 across the groups. KV: a
 * block of 16 columns is one vector per key row. */
#include <immintrin.h>

#include "gdn_internal.h"

#define DEC_VEC __m512
#define DEC_VW 16
#define dec_vzero() _mm512_setzero_ps()
#define dec_vload(p) _mm512_load_ps(p)
#define dec_vstore(p, x) _mm512_store_ps((p), (x))
#define dec_vloadu(p) _mm512_loadu_ps(p)
#define dec_vstoreu(p, x) _mm512_storeu_ps((p), (x))
#define dec_vbcast(x) _mm512_set1_ps(x)
#define dec_vbcastp(p) _mm512_set1_ps(*(p))
#define dec_vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define dec_vmul(a, b) _mm512_mul_ps((a), (b))
#define dec_vsub(a, b) _mm512_sub_ps((a), (b))
#define dec_vadd(a, b) _mm512_add_ps((a), (b))
#define dec_vunpacklo(a, b) _mm512_unpacklo_ps((a), (b))
#define dec_vunpackhi(a, b) _mm512_unpackhi_ps((a), (b))
#define dec_vshuffle(a, b, imm) _mm512_shuffle_ps((a), (b), (imm))

/* The subtree of one group's 16 lane partials, lane 4i + c in chunk c, element i: levels m = 1 (chunks 0 + 1, 2 + 3)
 * and m = 2 (their sum: lanes 4i .. 4i+3 in element i), then m = 4 and m = 8 inside the 128-bit vector:
 * ((q0 + q1) + (q2 + q3)) with q_i the sum of lanes 4i .. 4i+3. */
static inline __attribute__((always_inline)) float dec_group_tree(__m512 p) {
    const __m128 c0 = _mm512_castps512_ps128(p), c1 = _mm512_extractf32x4_ps(p, 1);
    const __m128 c2 = _mm512_extractf32x4_ps(p, 2), c3 = _mm512_extractf32x4_ps(p, 3);
    const __m128 x = _mm_add_ps(_mm_add_ps(c0, c1), _mm_add_ps(c2, c3)); /* q0 q1 q2 q3 */
    const __m128 y = _mm_add_ps(x, _mm_shuffle_ps(x, x, 0xb1));        /* q0+q1 in 0, q2+q3 in 2 */
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_movehl_ps(y, y)));
}

#include "delta/cpu/decode.h"

/* VK or KV layout, Dk = 128, T <= 2, and the CPU has AVX-512 F, BW, VL, DQ. */
int gdn__delta_packed_decode_avx512_eligible(const gdn__problem *p) { return dec_args_fit(p) && gdn__cpu_has_avx512(); }
int gdn__delta_packed_decode_avx512_routed(const gdn__problem *p) { return gdn__delta_packed_decode_avx512_eligible(p) && gdn__cpu_call_is_big(p); }
const gdn__variant gdn__delta_packed_decode_avx512_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
int64_t gdn__delta_packed_decode_avx512_workspace(const gdn__problem *p) { return p ? 0 : -1; } /* none */

gdn_status gdn__delta_packed_decode_avx512(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_packed_decode_avx512_eligible(p)) return GDN_ERR_INELIGIBLE;
    return dec_run(p);
}
