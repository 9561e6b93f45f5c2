/* cuda_decode: a few tokens (T <= 8) for many sequences, streamed through shared memory.
 *
 * Work item = (sequence b, value head h, 32 value columns j0 .. j0+31): its state piece (Dk x 32 floats) and its
 * tokens' q, k, v (32 columns). A persistent grid of blocks walks the items; each block keeps a ring of 2-4
 * shared-memory stages filled ahead (depths below), so the state streams from memory while earlier items are
 * computed. Two ways:
 *  - block-synchronous (KV, and VK where a block walks fewer than 4 items, unless T >= 3 and some block walks two):
 *    4 warps fill the stages by cp.async and compute; the new state leaves by streaming stores from registers (VK)
 *    or from the stage as whole row pieces (KV);
 *  - warp-specialized (VK, a block walking at least 4 items, or 2 from T = 3): a fifth warp fills the stages by bulk
 *    (TMA) copies that complete on the stage's "full" mbarrier; each of the 4 computing warps writes its 8 new
 *    columns back into the stage, sends them out as one bulk store, and once the store has read them arrives on the
 *    stage's "empty" mbarrier, which the filling warp waits on before it reuses the stage. No block barrier per
 *    item: B=256 282 -> 269 us on the H200 (docs/kernels/cuda_decode.md).
 *
 * Gates, betas and mask bits come from a table: the block-synchronous loop fills it for up to 128 (item, token) pairs
 * at once, one pair per thread, before it waits for the copies; the filling warp writes a stage's T entries (lane t:
 * token t) before issuing its copies. Either way the double-precision gate math runs once per pair and overlaps the
 * state's transfer instead of running in every warp after it.
 *
 * Computing an item: warp w takes the columns j0 + 8w .. j0 + 8w + 7; lane l is the contract's lane l and holds
 * S[l*C .. l*C + C-1][j] of its 8 columns (C = Dk/32). Per token: the 8 columns' fmaf partials, the butterfly run
 * transposed (gdn_tree_transposed: the same additions, a third of the shuffles), delta of the lane's column, broadcast,
 * update, readout.
 *
 * Stage layout: the state as it lies in memory (VK: 32 columns of Dk keys, contiguous; KV: Dk rows of 32 columns,
 * the 16-byte pieces of row i XOR-swizzled by (i / C) mod 8 so the 8 lanes of a load phase hit different banks),
 * then q and k rows [T][Dk], v [T][32] (input dtype), the vector gate rows [T][Dk]. After the ring: the table. */
#include "delta/cuda/decode_stream.cuh"

#define GDN_DEC_WARPS 4
#define GDN_DEC_COLS 32 /* columns per item: 4 warps x 8 */
#define GDN_DEC_NCOL 8
/* Default ring depths (2 .. 4 on request, bench variants), H200 (docs/kernels/cuda_decode.md). Warp-specialized, B=256: one or
 * two tokens are memory-bound and want the deepest ring (4 stages, 3 blocks per SM: T=1 269 us against 280-282 with 2
 * or 3, T=2 275 against 291-292); from about four tokens the compute wants more blocks (2 stages, 4 blocks per SM:
 * T=4 79.2 us against 81.9 at B=64, T=7 426 against 457 and 540 at B=256). Block-synchronous the same way: 3 stages
 * up to 2 tokens, 2 from 4 (KV B=256: T=4 375 us against 409 with 3, T=7 528 against 573; B=8 T=7 20.8 against
 * 23.8). */
#define GDN_DEC_STAGES 3          /* block-synchronous, T < GDN_DEC_LONG_T */
#define GDN_DEC_STAGES_LONG 2     /* block-synchronous, longer windows */
#define GDN_DEC_STAGES_WS_SHORT 4 /* warp-specialized, T <= GDN_DEC_WS_SHORT_T */
#define GDN_DEC_STAGES_WS 2       /* warp-specialized, longer windows */
#define GDN_DEC_WS_SHORT_T 2
#define GDN_DEC_LONG_T 4
#define GDN_DEC_TMAX 8
#define GDN_DEC_TAB (GDN_DEC_WARPS * 32) /* gate-table entries: one (item, token) pair per thread */
#define GDN_DEC_BULK_ITEMS 4             /* VK: warp-specialized from this many items per block, */
#define GDN_DEC_WS_LONG_T 3              /* or from this many tokens where some block takes two items */

struct gdn_dec_smem {
    int st, q, k, v, gv; /* byte offsets within a stage */
    int stage;           /* bytes per stage */
};

static __host__ __device__ __forceinline__ int gdn_dec_al16(int x) { return (x + 15) & ~15; }

static __host__ __device__ __forceinline__ gdn_dec_smem gdn_dec_layout(int Dk, int T, int ds, bool vec) {
    gdn_dec_smem m;
    int o = 0;
    m.st = o; o = gdn_dec_al16(o + Dk * GDN_DEC_COLS * 4);
    m.q = o; o = gdn_dec_al16(o + T * Dk * ds);
    m.k = o; o = gdn_dec_al16(o + T * Dk * ds);
    m.v = o; o = gdn_dec_al16(o + T * GDN_DEC_COLS * ds);
    m.gv = o; o = gdn_dec_al16(o + (vec ? T * Dk * 4 : 0));
    m.stage = o;
    return m;
}

/* The batch form's slots (gdn__cuda_decode_stream_slots), by value: sequence b of the launch uses state entry
 * slot[b] of the pools. SL = false: the dense form, entry b (one unused word). */
template <bool SL>
struct gdn_dec_slots {
    int32_t slot[SL ? GDN_DEC_SLOTS : 1];
};

/* An item's coordinates: it = (b Hv + h) (Dv / 32) + j0 / 32; hk = h's key head; sbh = (its state entry) Hv + h;
 * skip: its slot (on the device) is out of range: y = 0, no state written. 32-bit divisions: the launcher keeps every
 * item index below 2^31. */
struct gdn_dec_item {
    int64_t sbh, b, h, hk, j0;
    bool skip;
};

/* waited: after the dependency wait, where slots on the device may be read (before it, entry b: for prefetches, which
 * read such a slot themselves) */
template <bool SL>
__device__ __forceinline__ gdn_dec_item gdn_dec_item_of(const gdn_dev_args &a, const gdn_dec_slots<SL> &sl, unsigned u,
                                                        bool waited = true) {
    const unsigned col_items = (unsigned)(a.Dv / GDN_DEC_COLS), Hv = (unsigned)a.Hv;
    const unsigned bh = u / col_items, b = bh / Hv, h = bh - b * Hv;
    gdn_dec_item I;
    I.skip = false;
    I.sbh = SL ? (int64_t)sl.slot[b] * Hv + h : waited ? gdn_state_entry(a, b, &I.skip) * Hv + h : (int64_t)bh;
    I.b = b; I.h = h; I.hk = gdn__key_head32(h, (unsigned)a.Hk, (unsigned)a.group, a.tiled); I.j0 = (int64_t)(u - bh * col_items) * GDN_DEC_COLS;
    return I;
}

/* A bulk (TMA) copy into shared memory that completes on an mbarrier (gdn_cuda.cuh): bytes (a multiple of 16, both
 * addresses 16-byte aligned) from global src to shared dst. The barrier of a stage expects the bytes of one item; its
 * k-th completion (phase parity k mod 2) means the k-th item of that stage has landed. */
__device__ __forceinline__ void gdn_bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(gdn_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(gdn_smem_addr(bar))
                 : "memory");
}

/* ws == 2 (GDN_TESTING builds only): a pseudo-random pause of up to 4 us in one of four items of a warp, before it takes its next item
 * (the filling warp: before it waits for the stage to be empty; a computing warp: once the stage is full), so that
 * the warps meet the mbarriers in orders that plain runs rarely produce. */
__device__ __forceinline__ void gdn_dec_jitter(unsigned n, unsigned warp) {
    unsigned x = blockIdx.x * 0x9e3779b9u ^ n * 0x85ebca6bu ^ (warp + 1) * 0xc2b2ae35u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    if ((x & 3u) == 0) __nanosleep(x >> 20);
}

template <int DT, bool VEC, int C, bool KV, bool SL>
__global__ void __launch_bounds__((GDN_DEC_WARPS + 1) * 32, C <= 4 ? 3 : 1)
    gdn_delta_decode_kernel(gdn_dev_args a, int64_t items, int stages, int ws, gdn_dec_slots<SL> sl) {
    constexpr int NT = GDN_DEC_WARPS * 32, DK = 32 * C, DS = DT == GDN_F32 ? 4 : 2;
    extern __shared__ __align__(16) unsigned char sm[];
    if (blockIdx.x < items) { /* the block's first item, asked of L2 while the kernel before it may still run */
        const gdn_dec_item I = gdn_dec_item_of(a, sl, blockIdx.x, false);
        gdn_prefetch_columns<DT, VEC, KV, DK>(a, I.b, I.sbh / a.Hv, I.h, I.hk, I.j0);
    }
    gdn_grid_dependency_wait();
    const int T = (int)a.T, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const gdn_dec_smem m = gdn_dec_layout(DK, T, DS, VEC);
    float *tab_g = (float *)(sm + stages * m.stage), *tab_beta = tab_g + GDN_DEC_TAB;
    int *tab_live = (int *)(tab_beta + GDN_DEC_TAB);
    /* warp-specialized (VK): full[sg] completes when item n's bytes have landed in stage sg, empty[sg] when the 4
     * computing warps are done with it */
    uint64_t *full = (uint64_t *)(tab_live + GDN_DEC_TAB), *empty = full + stages;
    const int per_tab = GDN_DEC_TAB / T; /* items per filling of the table */
    const bool jitter = GDN_TESTING && ws == 2;
    ws = ws && !KV;
    if (ws && threadIdx.x == 0) {
        for (int sg = 0; sg < stages; ++sg) {
            gdn_mbar_init(full + sg, 1);
            gdn_mbar_init(empty + sg, GDN_DEC_WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (ws) __syncthreads(); /* the barriers are initialized before anyone waits on them */

    /* VK: item I into stage sg as bulk copies issued by the filling warp, one per lane (the state piece is one
     * contiguous run of 32 columns; then the q, k rows, the 32 values and the vector gate row of each token) */
    auto issue_bulk = [&](const gdn_dec_item &I, int sg) {
        constexpr int NR = VEC ? 4 : 3; /* rows per token: q, k, v (, the vector gate) */
        unsigned char *st = sm + sg * m.stage;
        const unsigned row = DK * DS, vrow = GDN_DEC_COLS * DS;
        if (lane == 0) {
            /* the computing warps' reads of the stage, and the bulk stores they waited for, come first */
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            gdn_mbar_expect(full + sg, (a.state_in ? DK * GDN_DEC_COLS * 4 : 0) + T * (2 * row + vrow) + (VEC ? T * DK * 4 : 0));
        }
        __syncwarp();
        /* copy x: 0 the state piece, 1 + NR t + r row r of token t; one per lane */
        for (int x = lane; x < 1 + NR * T; x += 32) {
            if (x == 0) {
                if (a.state_in) gdn_bulk_copy(st + m.st, a.state_in + (I.sbh * a.Dv + I.j0) * DK, DK * GDN_DEC_COLS * 4, full + sg);
                continue;
            }
            const int t = (x - 1) / NR, r = (x - 1) % NR;
            const int64_t bt = I.b * a.T + t;
            if (r < 2)
                gdn_bulk_copy(st + (r ? m.k : m.q) + t * row, (const unsigned char *)(r ? a.k : a.q) + (bt * a.Hk + I.hk) * row, row, full + sg);
            else if (r == 2)
                gdn_bulk_copy(st + m.v + t * vrow, (const unsigned char *)a.v + ((bt * a.Hv + I.h) * a.Dv + I.j0) * DS, vrow, full + sg);
            else
                gdn_bulk_copy(st + m.gv + t * DK * 4, a.gate + (bt * a.Hv + I.h) * DK, DK * 4, full + sg);
        }
    };

    /* copies of item I into stage `sg` by cp.async: this thread's share, committed by the caller */
    auto issue = [&](const gdn_dec_item &I, int sg) {
        unsigned char *st = sm + sg * m.stage;
        if (a.state_in) {
            /* 16-byte pieces: VK piece p = column p / (DK/4), keys 4 (p mod DK/4) ..; KV piece p = row p / 8,
             * columns 4 (p mod 8) .., stored at piece (p mod 8) xor ((row / C) mod 8) of the row */
            const float *src = a.state_in + I.sbh * DK * a.Dv;
            for (int p = threadIdx.x; p < DK * GDN_DEC_COLS / 4; p += NT) {
                if (KV) {
                    const int i = p >> 3, c = p & 7;
                    gdn_cp16(st + m.st + gdn_kv_piece<C>(i, c), src + i * a.Dv + I.j0 + 4 * c);
                } else {
                    gdn_cp16(st + m.st + p * 16, src + I.j0 * DK + 4 * p);
                }
            }
        }
        /* q, k rows of the key head and v of the 32 columns, per token; the vector gate rows */
        constexpr int QP = DK * DS / 16, VP = GDN_DEC_COLS * DS / 16;
        for (int p = threadIdx.x; p < T * (2 * QP + VP); p += NT) {
            const int t = p / (2 * QP + VP), r = p % (2 * QP + VP);
            const int64_t bt = I.b * a.T + t;
            if (r < 2 * QP) {
                const int w = r / QP, c = r % QP;
                const unsigned char *src = (const unsigned char *)(w ? a.k : a.q) + ((bt * a.Hk + I.hk) * DK) * DS + c * 16;
                gdn_cp16(st + (w ? m.k : m.q) + t * DK * DS + c * 16, src);
            } else {
                const int c = r - 2 * QP;
                gdn_cp16(st + m.v + t * GDN_DEC_COLS * DS + c * 16,
                         (const unsigned char *)a.v + ((bt * a.Hv + I.h) * a.Dv + I.j0) * DS + c * 16);
            }
        }
        if (VEC)
            for (int p = threadIdx.x; p < T * DK / 4; p += NT) {
                const int t = p / (DK / 4), c = p % (DK / 4);
                gdn_cp16(st + m.gv + t * DK * 4 + c * 16, a.gate + ((I.b * a.T + t) * a.Hv + I.h) * DK + 4 * c);
            }
    };

    /* table entry e: token t of item I (mask bit, gate, beta) */
    auto table_entry = [&](const gdn_dec_item &I, int t, int e) {
        const int64_t bt = I.b * a.T + t, gi = bt * a.Hv + I.h;
        tab_live[e] = !I.skip && (a.mask == NULL || a.mask[bt] != 0);
        tab_g[e] = VEC ? 0.0f : gdn_gate_of(a, __ldg(a.gate + gi), I.h);
        tab_beta[e] = gdn_beta_of(a, __ldg(a.beta + gi));
    };

    /* the table for this block's items n0 .. n0 + per_tab - 1: entry (n - n0) T + t = token t of item n */
    auto fill_table = [&](int n0, int mine) {
        const int x = threadIdx.x, n = n0 + x / T;
        if (x >= per_tab * T || n >= mine) return;
        table_entry(gdn_dec_item_of(a, sl, blockIdx.x + n * gridDim.x), x % T, x);
    };

    /* item I from stage `sg` (its tokens at table entries e0 ..): the state into registers, the tokens, the new
     * state out */
    auto compute = [&](const gdn_dec_item &I, int sg, int e0) {
        const unsigned char *st = sm + sg * m.stage;
        const int jw = GDN_DEC_NCOL * warp; /* the warp's first column within the item */
        const int col = gdn_tree_col<GDN_DEC_NCOL>(lane);  /* the column whose trees end in this lane */
        float s[GDN_DEC_NCOL][C];
        if (!a.state_in) {
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n)
#pragma unroll
                for (int e = 0; e < C; ++e) s[n][e] = 0.0f;
        } else if (KV) {
            /* row lane*C + e: pieces 2w and 2w + 1 of the row (the warp's 8 columns) */
#pragma unroll
            for (int e = 0; e < C; ++e) {
                const float4 lo = *(const float4 *)(st + m.st + gdn_kv_piece<C>(lane * C + e, 2 * warp));
                const float4 hi = *(const float4 *)(st + m.st + gdn_kv_piece<C>(lane * C + e, 2 * warp + 1));
                s[0][e] = lo.x; s[1][e] = lo.y; s[2][e] = lo.z; s[3][e] = lo.w;
                s[4][e] = hi.x; s[5][e] = hi.y; s[6][e] = hi.z; s[7][e] = hi.w;
            }
        } else {
            /* column jw + n: keys lane*C .. lane*C + C-1, contiguous */
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n) {
                float x[C];
                gdn_lane_keys<GDN_F32, C>(x, st + m.st + (jw + n) * DK * 4, lane);
#pragma unroll
                for (int e = 0; e < C; ++e) s[n][e] = x[e];
            }
        }
        /* Token t's kv tree runs beside token t-1's readout tree (o: its partials), so the readout is off the
         * chain from one token's update to the next's kv. */
        float o[GDN_DEC_NCOL];
        bool prev_live = false;
#pragma unroll
        for (int n = 0; n < GDN_DEC_NCOL; ++n) o[n] = 0.0f;
        const int64_t y_row = (I.b * a.T * a.Hv + I.h) * a.Dv + I.j0 + jw + col; /* y[b, 0, h, column]; + t Hv Dv */
        for (int t = 0; t <= T; ++t) {
            const bool live = t < T && tab_live[e0 + t];
            float k[C], q[C], gv[C], kg[C], pp[2][GDN_DEC_NCOL], r[2];
            if (live) {
                gdn_lane_keys<DT, C>(k, st + m.k + t * DK * DS, lane);
                gdn_lane_keys<DT, C>(q, st + m.q + t * DK * DS, lane);
                if (VEC) gdn_lane_keys<GDN_F32, C>(gv, st + m.gv + t * DK * 4, lane);
#pragma unroll
                for (int e = 0; e < C; ++e) kg[e] = VEC ? __fmul_rn(gv[e], k[e]) : k[e];
            }
            /* kv partials of each column: fmaf ascending from +0 (zeros where the token is masked or past the end) */
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n) {
                pp[0][n] = 0.0f;
                if (live)
#pragma unroll
                    for (int e = 0; e < C; ++e) pp[0][n] = __fmaf_rn(s[n][e], kg[e], pp[0][n]);
                pp[1][n] = o[n];
            }
            gdn_tree_transposed<GDN_DEC_NCOL, 2>(pp, r, lane);
            /* token t-1's y. VK: here, by lanes 0 .. 7. KV: after the update in program order, by every lane (lanes
             * l and l + 8 hold the same column's tree: equal values to one address; t = 0 writes a zero into row 0,
             * which t = 1 overwrites), with no branch around it, so that its rounding is scheduled between the next
             * token's work instead of standing between the kv tree and delta (B=8, T=7: 20.7 -> 20.0 us). In VK that
             * order held 18 more registers across the update and cost the warp-specialized kernel a block per SM. */
            auto y_prev = [&]() { return prev_live ? __fmul_rn(r[1], a.scale) : 0.0f; };
            if (!KV && t > 0 && lane < GDN_DEC_NCOL) gdn_st(a.y, DT, y_row + (t - 1) * a.Hv * a.Dv, y_prev());
            if (live) { /* the token's update and the readout partials (gdn_update_columns) */
                const float g = tab_g[e0 + t], beta = tab_beta[e0 + t];
                const float v = gdn_row_ld<DT>(st + m.v + t * GDN_DEC_COLS * DS, jw + col);
                gdn_update_columns<GDN_DEC_NCOL, C, VEC>(s, o, r[0], v, g, beta, k, q, gv);
            }
            if (KV) gdn_st(a.y, DT, y_row + (t > 0 ? t - 1 : 0) * a.Hv * a.Dv, y_prev());
            prev_live = live;
        }
        if (!a.state_out || I.skip) return;
        if (KV) {
            /* back into the stage where they came from; the block writes the rows out after a barrier */
#pragma unroll
            for (int e = 0; e < C; ++e) {
                unsigned char *tile = sm + sg * m.stage + m.st;
                *(float4 *)(tile + gdn_kv_piece<C>(lane * C + e, 2 * warp)) = make_float4(s[0][e], s[1][e], s[2][e], s[3][e]);
                *(float4 *)(tile + gdn_kv_piece<C>(lane * C + e, 2 * warp + 1)) = make_float4(s[4][e], s[5][e], s[6][e], s[7][e]);
            }
            return;
        }
        if (ws) {
            /* VK: the warp's 8 columns back into the stage as they came (column jw + n, keys lane*C ..), out as one
             * bulk store of 8 Dk floats, which has read the stage when lane 0 returns */
            float *tile = (float *)(sm + sg * m.stage + m.st) + jw * DK;
#pragma unroll
            for (int n = 0; n < GDN_DEC_NCOL; ++n) gdn_lane_put<false>(tile + n * DK + lane * C, s[n]);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* visible to the bulk store */
            __syncwarp();
            if (lane == 0) {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(a.state_out + (I.sbh * a.Dv + I.j0 + jw) * DK),
                             "r"(gdn_smem_addr(tile)), "r"(GDN_DEC_NCOL * DK * 4)
                             : "memory");
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            }
            return;
        }
        /* VK: column j0 + jw + n, keys lane*C .. lane*C + C-1, straight from registers */
        float *out = a.state_out + I.sbh * DK * a.Dv;
#pragma unroll
        for (int n = 0; n < GDN_DEC_NCOL; ++n) gdn_lane_put<true>(out + (I.j0 + jw + n) * DK + lane * C, s[n]);
    };

    /* KV: item I's new state from stage `sg` to state_out, whole 128-byte row pieces */
    auto write_rows = [&](const gdn_dec_item &I, int sg) {
        const unsigned char *st = sm + sg * m.stage + m.st;
        float *out = a.state_out + I.sbh * DK * a.Dv + I.j0;
        for (int p = threadIdx.x; p < DK * 8; p += NT) {
            const int i = p >> 3, c = p & 7;
            __stcs((float4 *)(out + i * a.Dv + 4 * c), *(const float4 *)(st + gdn_kv_piece<C>(i, c)));
        }
    };

    /* the ring of `stages` (2 .. 4) stages: items blockIdx.x, blockIdx.x + gridDim.x, ...; item n lives in stage
     * n mod stages (32-bit counts: items < 2^31) */
    const int mine = (int)(((unsigned)items - blockIdx.x + gridDim.x - 1) / gridDim.x);
    if (ws) {
        /* the filling warp: item n into stage n mod stages once the computing warps are done with item n - stages
         * (phase bit ph: the parity of the stage's current round); lanes t < T first write its table entries
         * (stage sg: entries sg T ..) */
        if (warp == GDN_DEC_WARPS) {
#pragma unroll 1
            for (int n = 0, sg = 0, ph = 0; n < mine; ++n) {
                if (jitter) gdn_dec_jitter(n, warp);
                if (n >= stages) gdn_mbar_wait(empty + sg, ph ^ 1u);
                const gdn_dec_item I = gdn_dec_item_of(a, sl, blockIdx.x + n * gridDim.x);
                if (lane < T) table_entry(I, lane, sg * T + lane);
                __syncwarp();
                issue_bulk(I, sg);
                if (++sg == stages) sg = 0, ph ^= 1;
            }
            return;
        }
        /* the computing warps: item n once stage n mod stages is full; the stage is released when the warp's bulk
         * store has read it */
#pragma unroll 1
        for (int n = 0, sg = 0, ph = 0; n < mine; ++n) {
            gdn_mbar_wait(full + sg, ph);
            if (jitter) gdn_dec_jitter(n, warp);
            compute(gdn_dec_item_of(a, sl, blockIdx.x + n * gridDim.x), sg, sg * T);
            __syncwarp();
            if (lane == 0) gdn_mbar_arrive(empty + sg);
            if (++sg == stages) sg = 0, ph ^= 1;
        }
        if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
        return;
    }
#pragma unroll 1
    for (int n = 0; n < stages - 1; ++n) {
        if (n < mine) issue(gdn_dec_item_of(a, sl, blockIdx.x + n * gridDim.x), n);
        gdn_cp_commit();
    }
    int sg = 0, ahead_sg = stages - 1, e0 = 0;
#pragma unroll 1
    for (int n = 0; n < mine; ++n) {
        const int ahead = n + stages - 1;
        if (ahead < mine) issue(gdn_dec_item_of(a, sl, blockIdx.x + ahead * gridDim.x), ahead_sg);
        gdn_cp_commit();
        /* the table's next items (the previous ones are no longer read: barrier at the end of the last item) */
        if (e0 == 0) fill_table(n, mine);
        /* item n's copies are in: all but the newest stages - 1 groups */
        if (stages == 2) {
            asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        } else if (stages == 3) {
            asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 3;\n" ::: "memory");
        }
        __syncthreads(); /* item n's copies, from every thread, have landed; the table is written */
        const gdn_dec_item I = gdn_dec_item_of(a, sl, blockIdx.x + n * gridDim.x);
        compute(I, sg, e0);
        __syncthreads(); /* stage sg is free for item n + stages (KV: holds item n's new state) */
        if (KV && a.state_out && !I.skip) {
            write_rows(I, sg);
            __syncthreads();
        }
        sg = sg + 1 == stages ? 0 : sg + 1;
        ahead_sg = ahead_sg + 1 == stages ? 0 : ahead_sg + 1;
        e0 = e0 + T == per_tab * T ? 0 : e0 + T;
    }
}

/* `stages` deep (0: the default for the way it runs); a persistent grid of as many blocks as fit on the SMs, at most
 * max_blocks (0: no cap); ws: warp-specialized (VK only), 1 or 0, 2 with pauses (tests), or -1 where a block walks at least
 * GDN_DEC_BULK_ITEMS items, or two from GDN_DEC_WS_LONG_T tokens. */
template <int DT, bool VEC, int C, bool KV, bool SL>
static gdn_status gdn_launch_decode(const gdn__problem *p, int stages, int max_blocks, int ws, const gdn_dec_slots<SL> &sl) {
    const gdn_dev_args a = gdn_dev_args_of(p);
    static int smem_ok = 0; /* this instantiation may use the opt-in shared memory */
    /* blocks per SM for (warp-specialized, ring depth): cached as (bytes << 32 | blocks) in one word, so a thread
     * never pairs a size with another size's count */
    static uint64_t occupancy[2][5];
    const int sms = gdn_cuda_sm_count();
    if (sms < 1) return GDN_ERR_DEVICE;
    const int64_t items = a.B * a.Hv * (a.Dv / GDN_DEC_COLS);
    int depth = 0, bytes = 0;
    int64_t grid = 0;
    /* depth, bytes and grid with (w = 1) or without the filling warp */
    auto configure = [&](int w) -> gdn_status {
        if (stages) depth = stages;
        else if (w) depth = a.T <= GDN_DEC_WS_SHORT_T ? GDN_DEC_STAGES_WS_SHORT : GDN_DEC_STAGES_WS;
        else depth = a.T < GDN_DEC_LONG_T ? GDN_DEC_STAGES : GDN_DEC_STAGES_LONG;
        bytes = depth * gdn_dec_layout(32 * C, (int)a.T, DT == GDN_F32 ? 4 : 2, VEC).stage + 3 * GDN_DEC_TAB * 4 + 2 * depth * 8;
        if (bytes > 48 * 1024 && gdn_cuda_allow_smem(gdn_delta_decode_kernel<DT, VEC, C, KV, SL>, &smem_ok) != GDN_OK)
            return GDN_ERR_DEVICE;
        uint64_t *slot = &occupancy[w][depth];
        const uint64_t cached = __atomic_load_n(slot, __ATOMIC_RELAXED);
        int per_sm = (int)(cached & 0xffffffffu);
        if (cached >> 32 != (uint64_t)bytes) {
            if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gdn_delta_decode_kernel<DT, VEC, C, KV, SL>,
                                                              (GDN_DEC_WARPS + w) * 32, bytes) != cudaSuccess || per_sm < 1)
                return GDN_ERR_DEVICE;
            __atomic_store_n(slot, (uint64_t)bytes << 32 | (uint64_t)per_sm, __ATOMIC_RELAXED);
        }
        grid = items < (int64_t)sms * per_sm ? items : (int64_t)sms * per_sm;
        if (max_blocks > 0 && grid > max_blocks) grid = max_blocks;
        return GDN_OK;
    };
    if (KV) ws = 0;
    if (configure(ws != 0) != GDN_OK) return GDN_ERR_DEVICE;
    /* the filling warp pays where a block streams many items (B=256, VK: 282 -> 269 us), and from 3 tokens as soon as a
     * block takes a second item (B=8: T=4 16.0 -> 14.1 us, T=7 21.3 -> 18.4; B=16 T=4 26.0 -> 23.5); at 1 or 2 tokens
     * with few items per block, or with one item per block, the bulk copies' latency loses (B=1 T=1: 3.6 -> 4.2 us;
     * B=8 T=2 11.9 -> 12.1; B=2 T=7 7.5 -> 8.7): docs/kernels/cuda_decode.md */
    if (ws < 0) {
        ws = items >= GDN_DEC_BULK_ITEMS * grid || (a.T >= GDN_DEC_WS_LONG_T && items > grid);
        if (!ws && configure(0) != GDN_OK) return GDN_ERR_DEVICE;
    }
    return gdn_launch_pdl(gdn_delta_decode_kernel<DT, VEC, C, KV, SL>, (unsigned)grid, (GDN_DEC_WARPS + (ws != 0)) * 32, bytes,
                          p->a.stream, a, items, depth, ws, sl);
}

template <int DT, bool VEC, bool KV, bool SL>
static gdn_status gdn_decode_dk(const gdn__problem *p, int stages, int max_blocks, int ws, const gdn_dec_slots<SL> &sl) {
    switch (p->a.Dk) {
    case 32: return gdn_launch_decode<DT, VEC, 1, KV>(p, stages, max_blocks, ws, sl);
    case 64: return gdn_launch_decode<DT, VEC, 2, KV>(p, stages, max_blocks, ws, sl);
    case 128: return gdn_launch_decode<DT, VEC, 4, KV>(p, stages, max_blocks, ws, sl);
    default: return gdn_launch_decode<DT, VEC, 8, KV>(p, stages, max_blocks, ws, sl);
    }
}

template <int DT, bool VEC, bool SL>
static gdn_status gdn_decode_layout(const gdn__problem *p, int stages, int max_blocks, int ws, const gdn_dec_slots<SL> &sl) {
    return p->a.state_layout == GDN_STATE_KV ? gdn_decode_dk<DT, VEC, true>(p, stages, max_blocks, ws, sl)
                                             : gdn_decode_dk<DT, VEC, false>(p, stages, max_blocks, ws, sl);
}

extern "C" {

/* T <= 8, Dk in {32, 64, 128, 256}, Dv % 32 == 0 (whole items), every tensor that is copied 16-byte aligned. */
int gdn__cuda_decode_stream_eligible(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 32 || a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_staged_tensors_aligned16(a);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % GDN_DEC_COLS == 0 && a->T <= GDN_DEC_TMAX && aligned &&
           gdn_grid_fits(a->B * a->Hv * (a->Dv / GDN_DEC_COLS));
}

gdn_status gdn__cuda_decode_stream(const gdn__problem *p, int stages, int blocks, int mode) {
    if (!gdn__cuda_decode_stream_eligible(p) || stages < 0 || stages == 1 || stages > 4 || blocks < 0 ||
        (mode == GDN__DECODE_WS_PAUSES && !GDN_TESTING))
        return GDN_ERR_INELIGIBLE;
    /* the kernel's ws: -1 chosen by items per block and tokens, 0 block-synchronous, 1 warp-specialized, 2 with pauses */
    const int ws = mode == GDN__DECODE_SYNC ? 0 : mode == GDN__DECODE_WS ? 1 : mode == GDN__DECODE_WS_PAUSES ? 2 : -1;
    const gdn_dec_slots<false> dense = {{0}};
    return gdn_dispatch_dtype_gate(p, [&](auto dt, auto vec) {
        return gdn_decode_layout<dt.value, vec.value>(p, stages, blocks, ws, dense);
    });
}

gdn_status gdn__cuda_decode_stream_slots(const gdn__problem *p, const int32_t *slot, int launch) {
    if (!gdn__cuda_decode_stream_eligible(p) || p->a.B > GDN_DEC_SLOTS || p->a.gate_kind == GDN_GATE_VECTOR)
        return GDN_ERR_INELIGIBLE;
    if (!launch) return GDN_OK;
    gdn_dec_slots<true> sl;
    for (int64_t b = 0; b < p->a.B; ++b) sl.slot[b] = slot[b];
    return gdn_dispatch_dtype_gate(p, [&](auto dt, auto vec) {
        if constexpr (vec.value) return GDN_ERR_INELIGIBLE; /* not instantiated: vector gates run a sequence at a time */
        else return gdn_decode_layout<dt.value, false>(p, 0, 0, -1, sl);
    });
}

} /* extern "C" */
