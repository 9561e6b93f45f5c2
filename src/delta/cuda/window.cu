/* cuda_window: a short window (T <= 8: a speculative-decoding verify, a few decode steps) of few sequences, with
 * every input of the window in registers before the first token, so that the token loop waits on no memory. While the
 * kernel before it still runs (PDL), the block asks L2 for all of it (gdn_prefetch_columns), so those loads hit L2.
 *
 * A block of 8 warps serves 32 adjacent value columns j0 .. j0+31 of one (b, h). Warp w takes the 4 columns
 * j0 + 4w .. j0 + 4w + 3; lane l is the contract's lane l and keeps S[l*C .. l*C + C-1][j] (C = Dk/32) of its 4
 * columns. At the start, while the state is on its way, lane l loads its C keys of every token's k and q rows (and
 * of the vector gate's rows), the v of the column it will compute delta for, and lane t < T computes the gate,
 * beta and mask bit of token t. The state arrives straight into registers in VK (lane l's keys of a column are
 * one 16-byte piece, so a warp reads a column's 512 contiguous bytes); in KV the block copies its Dk x 32 tile
 * into shared memory in whole 128-byte rows (pieces swizzled, gdn_kv_piece) and each lane picks its pieces there,
 * and the new state goes out the same way.
 *
 * Per live token t, per column j:
 *     kv_j    = tree(S[:,j] . k_t)                   (vector gate: g_t,i k_t,i rounded first)
 *     d_j     = (v_j - g kv_j) beta                  (vector gate: (v_j - kv_j) beta)
 *     S[i][j] = fmaf(g, S[i][j], k_t,i d_j)          (vector gate: g_t,i)
 *     y_j     = tree(S[:,j] . q_t) * scale
 * The tree is the contract's butterfly run transposed over the warp's 4 columns (gdn_tree_transposed): after its
 * first two levels a lane keeps one column, so kv and delta are computed once per column and delta is broadcast.
 * Token t's kv tree runs beside token t-1's readout tree, whose y is stored a token later, off the token's chain.
 * A masked token keeps S and gets y = 0. */
#include "cuda/gdn_cuda.cuh"

#define GDN_WIN_WARPS 8
#define GDN_WIN_NCOL 4                             /* columns per warp */
#define GDN_WIN_COLS (GDN_WIN_WARPS * GDN_WIN_NCOL) /* columns per block: 32 */
#define GDN_WIN_TMAX 8

template <int DT, bool VEC, int C, bool KV>
__global__ void __launch_bounds__(GDN_WIN_WARPS * 32, VEC ? 1 : 2) gdn_delta_window_kernel(gdn_dev_args a) {
    constexpr int NT = GDN_WIN_WARPS * 32, DK = 32 * C, NC = GDN_WIN_NCOL, TW = GDN_WIN_TMAX, DS = DT == GDN_F32 ? 4 : 2;
    __shared__ __align__(16) unsigned char tile[KV ? DK * 128 : 16]; /* KV: the state's Dk rows of 32 columns */

    /* block = (b Hv + h) (Dv / 32) + j0 / 32 (32-bit index math: the launcher keeps the grid below 2^31) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, T = (int)a.T;
    const unsigned col_blocks = (unsigned)(a.Dv / GDN_WIN_COLS), bh32 = blockIdx.x / col_blocks;
    const unsigned b32 = bh32 / (unsigned)a.Hv, h32 = bh32 - b32 * (unsigned)a.Hv;
    const int64_t b = b32, h = h32, hk = gdn__key_head32(h32, (unsigned)a.Hk, (unsigned)a.group, a.tiled);
    const int64_t j0 = (int64_t)(blockIdx.x - bh32 * col_blocks) * GDN_WIN_COLS, jw = j0 + NC * warp;
    const int col = gdn_tree_col<NC>(lane); /* the column (of the warp's 4) whose trees this lane ends with */

    /* everything the block reads, asked of L2 while the kernel before it may still run */
    gdn_prefetch_columns<DT, VEC, KV, DK>(a, b, b, h, hk, j0);
    gdn_grid_dependency_wait();
    bool skip; /* slots on the device: one out of range writes y = 0 and no state */
    const int64_t sbase = (gdn_state_entry(a, b, &skip) * a.Hv + h) * DK * a.Dv;

    /* lane t < T: the raw gate, beta and mask bit of token t (and the head's A_log, dt_bias), loaded first: the gate's
     * and beta's math (double precision) then runs while the state is still arriving */
    float gate_raw = 0.0f, beta_raw = 0.0f;
    gdn_head_gate hg = {0.0f, 0.0f};
    bool live_lane = false;
    if (lane < T) {
        const int64_t gi = (b * a.T + lane) * a.Hv + h;
        if (!VEC) {
            gate_raw = __ldg(a.gate + gi);
            hg = gdn_head_gate_of(a, h);
        }
        beta_raw = __ldg(a.beta + gi);
        live_lane = !skip && (a.mask == NULL || a.mask[b * a.T + lane] != 0);
    }

    /* KV: the tile's copies, 8 pieces of 16 bytes per key row */
    if (KV && a.state_in) {
        const float *src = a.state_in + sbase + j0;
        for (int p = threadIdx.x; p < DK * 8; p += NT) gdn_cp16(tile + gdn_kv_piece<C>(p >> 3, p & 7), src + (p >> 3) * a.Dv + 4 * (p & 7));
        gdn_cp_commit();
    }
    /* VK: S[lane*C + e][jw + n] -> s[n][e], column jw + n's keys straight from memory */
    float s[NC][C];
#pragma unroll
    for (int n = 0; n < NC; ++n) {
        if (!KV && a.state_in) {
            gdn_lane_keys<GDN_F32, C>(s[n], (const unsigned char *)(a.state_in + sbase + (jw + n) * DK), lane);
        } else {
#pragma unroll
            for (int e = 0; e < C; ++e) s[n][e] = 0.0f;
        }
    }

    /* every token's inputs, raw (unpacked when used, so that all loads are in flight at once): the lane's keys of
     * k, q (and the vector gate) and v of its column `col` */
    constexpr int KW = gdn_words(DT, C), GW = gdn_words(GDN_F32, C);
    uint32_t kw[TW][KW], qw[TW][KW], gw[VEC ? TW : 1][GW], vw[TW];
    const int64_t qk_row = a.Hk * DK, v_row = a.Hv * a.Dv;
    const unsigned char *k0 = (const unsigned char *)a.k + (b * a.T * a.Hk + hk) * DK * DS;
    const unsigned char *q0 = (const unsigned char *)a.q + (b * a.T * a.Hk + hk) * DK * DS;
    const int64_t v0 = (b * a.T * a.Hv + h) * a.Dv + jw + col;
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        if (t < T) {
            gdn_lane_load<DT, C>(kw[t], k0 + t * qk_row * DS, lane);
            gdn_lane_load<DT, C>(qw[t], q0 + t * qk_row * DS, lane);
            if (VEC) gdn_lane_load<GDN_F32, C>(gw[VEC ? t : 0], (const unsigned char *)(a.gate + ((b * a.T + t) * a.Hv + h) * DK), lane);
            vw[t] = DT == GDN_F32 ? ((const uint32_t *)a.v)[v0 + t * v_row] : ((const uint16_t *)a.v)[v0 + t * v_row];
        } else {
#pragma unroll
            for (int e = 0; e < KW; ++e) kw[t][e] = qw[t][e] = 0u;
#pragma unroll
            for (int e = 0; e < GW; ++e) gw[VEC ? t : 0][e] = 0u;
            vw[t] = 0u;
        }
    }
    /* lane t < T: gate and beta of token t */
    float g_lane = 0.0f, beta_lane = 0.0f;
    if (lane < T) {
        if (!VEC) g_lane = gdn_gate_loaded(a, gate_raw, hg);
        beta_lane = gdn_beta_of(a, beta_raw);
    }
    const unsigned live_bits = __ballot_sync(GDN_FULL_MASK, live_lane);

    /* KV: the lane's rows lane*C + e, piece `warp` (its 4 columns) */
    if (KV && a.state_in) {
        gdn_cp_wait_all();
        __syncthreads();
#pragma unroll
        for (int e = 0; e < C; ++e) {
            const float4 x = *(const float4 *)(tile + gdn_kv_piece<C>(lane * C + e, warp));
            s[0][e] = x.x; s[1][e] = x.y; s[2][e] = x.z; s[3][e] = x.w;
        }
    }

    /* the new state out (KV: back into the lane's pieces of the tile, which no other warp reads, then whole rows) */
    auto write_state = [&]() {
        if (KV) {
#pragma unroll
            for (int e = 0; e < C; ++e)
                *(float4 *)(tile + gdn_kv_piece<C>(lane * C + e, warp)) = make_float4(s[0][e], s[1][e], s[2][e], s[3][e]);
            __syncthreads();
            float *dst = a.state_out + sbase + j0;
            for (int p = threadIdx.x; p < DK * 8; p += NT)
                __stcs((float4 *)(dst + (p >> 3) * a.Dv + 4 * (p & 7)), *(const float4 *)(tile + gdn_kv_piece<C>(p >> 3, p & 7)));
        } else {
#pragma unroll
            for (int n = 0; n < NC; ++n) gdn_lane_put<true>(a.state_out + sbase + (jw + n) * DK + lane * C, s[n]);
        }
    };

    /* tokens 0 .. T-1, then the last token's readout tree alone; o: the readout partials of token t-1. VK: the new
     * state leaves before that last tree, so that its stores drain beside it; KV sends its rows out through the tile
     * after a block barrier, after the tree (before it, T=7 measured slower) */
    float o[NC], y_held = 0.0f; /* y_held: token t-2's readout tree during token t (held_live: that token was live) */
    bool prev_live = false, held_live = false;
#pragma unroll
    for (int n = 0; n < NC; ++n) o[n] = 0.0f;
    const int64_t y0 = (b * a.T * a.Hv + h) * a.Dv + jw + col; /* y[b, t, h, jw + col] = y0 + t v_row */
    auto store_held = [&](int t) { gdn_st_dt<DT>(a.y, y0 + t * v_row, held_live ? __fmul_rn(y_held, a.scale) : 0.0f); };
#pragma unroll
    for (int t = 0; t < TW; ++t) {
        if (t == T) break;
        const bool live = (live_bits >> t) & 1u;
        /* the token's gate and beta from lane t, ahead of the tree that delta waits for */
        const float g = __shfl_sync(GDN_FULL_MASK, g_lane, t), beta = __shfl_sync(GDN_FULL_MASK, beta_lane, t);
        float k[C], q[C], gv[C], v[1], pp[2][NC], r[2];
        gdn_lane_unpack<DT, C>(k, kw[t]);
        gdn_lane_unpack<DT, C>(q, qw[t]);
        if (VEC) gdn_lane_unpack<GDN_F32, C>(gv, gw[VEC ? t : 0]);
        const uint32_t vt[1] = {vw[t]};
        gdn_lane_unpack<DT, 1>(v, vt);
        /* kv partials (used only for a live token) beside the readout partials of token t-1 */
#pragma unroll
        for (int n = 0; n < NC; ++n) {
            pp[0][n] = 0.0f;
#pragma unroll
            for (int e = 0; e < C; ++e) pp[0][n] = __fmaf_rn(s[n][e], VEC ? __fmul_rn(gv[e], k[e]) : k[e], pp[0][n]);
            pp[1][n] = o[n];
        }
        gdn_tree_transposed<NC, 2>(pp, r, lane);
        if (live) gdn_update_columns<NC, C, VEC>(s, o, r[0], v[0], g, beta, k, q, gv);
        /* token t-2's y, its tree finished a token ago, stored by every lane (lanes l and l + NC hold the same
         * column's tree: equal values to one address) with no branch around it: its scaling and rounding find their
         * operand ready wherever ptxas puts them, instead of waiting, in issue order, ahead of the kv tree's chain */
        if (t > 1) store_held(t - 2);
        y_held = r[1];
        held_live = prev_live;
        prev_live = live;
    }
    if (T > 1) store_held(T - 2);
    if (!KV && a.state_out && !skip) write_state();
    float ro[1][NC], r[1];
#pragma unroll
    for (int n = 0; n < NC; ++n) ro[0][n] = o[n];
    gdn_tree_transposed<NC, 1>(ro, r, lane);
    if (lane < NC) gdn_st_dt<DT>(a.y, y0 + (T - 1) * v_row, prev_live ? __fmul_rn(r[0], a.scale) : 0.0f);
    if (KV && a.state_out && !skip) write_state();
}

template <int DT, bool VEC, int C>
static gdn_status gdn_launch_window(const gdn__problem *p) {
    const gdn_dev_args a = gdn_dev_args_of(p);
    const int64_t blocks = a.B * a.Hv * (a.Dv / GDN_WIN_COLS); /* fits: eligibility */
    if (a.layout == GDN_STATE_KV)
        return gdn_launch_pdl(gdn_delta_window_kernel<DT, VEC, C, true>, (unsigned)blocks, GDN_WIN_WARPS * 32, 0, p->a.stream, a);
    return gdn_launch_pdl(gdn_delta_window_kernel<DT, VEC, C, false>, (unsigned)blocks, GDN_WIN_WARPS * 32, 0, p->a.stream, a);
}

template <int DT, bool VEC>
static gdn_status gdn_window_dk(const gdn__problem *p) {
    return p->a.Dk == 64 ? gdn_launch_window<DT, VEC, 2>(p) : gdn_launch_window<DT, VEC, 4>(p);
}

extern "C" {

/* Dk 64 or 128, Dv % 32 == 0, T <= 8, q, k, vector gate and state 16-byte aligned (y and v: any). */
int gdn__delta_cuda_window_eligible(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int aligned = gdn_aligned16(a->q) && gdn_aligned16(a->k) && (a->gate_kind != GDN_GATE_VECTOR || gdn_aligned16(a->gate)) &&
                        gdn_aligned16(a->state_in) && gdn_aligned16(a->state_out);
    return gdn__cuda_devices() > 0 && (a->Dk == 64 || a->Dk == 128) && a->Dv % GDN_WIN_COLS == 0 && a->T <= GDN_WIN_TMAX && aligned &&
           gdn_grid_fits(a->B * a->Hv * (a->Dv / GDN_WIN_COLS));
}

/* Routed where its blocks fit in one wave (B Hv Dv / 32 <= SMs: B=1 at the model's heads): there it beats every other
 * kernel at T = 1 .. 8 in both layouts (H200, B=1, T=7: KV 5.24 against rowsplit's 5.53 us, VK 4.75 against the
 * streamed decode's 6.21; docs/kernels/cuda_window.md). With more blocks the streamed decode overlaps items and
 * wins (B=8, T=7, KV: 23.9 against 25.6 us). */
int gdn__delta_cuda_window_routed(const gdn__problem *p) {
    return gdn__delta_cuda_window_eligible(p) && gdn_cuda_items32_in_one_wave(p);
}

const gdn__variant gdn__delta_cuda_window_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

/* p eligible (the router and a named call check it); no variants */
gdn_status gdn__delta_cuda_window(const gdn__problem *p, const gdn__variant *v) {
    (void)v;
    return gdn_dispatch_dtype_gate(p, [&](auto dt, auto vec) { return gdn_window_dk<dt.value, vec.value>(p); });
}

} /* extern "C" */
