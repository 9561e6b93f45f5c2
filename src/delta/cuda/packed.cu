/* cuda_packed: several value columns per warp, the state of the whole window in registers.
 *
 * L lanes serve one column; lane r (0 <= r < L) of a column plays the contract's lanes r*N .. r*N+N-1 (N = 32/L),
 * so it keeps E = N*C consecutive key rows S[r*E .. r*E+E-1][j] (C = Dk/32) of each of its P columns. A warp
 * holds N*P columns; lane = r*N + (column slot). The contract's butterfly splits in two: levels m = 1 .. N/2
 * combine partials inside the lane (gdn_reg_tree), levels m = N .. 16 pair the column's L lanes (lane r with
 * r xor m/N). The kv tree takes those levels as shuffles; the readout's lane partials go to shared memory and
 * the block adds them (gdn_reg_tree over r) at the end of each chunk, off the token chain. The result is the
 * contract's tree, so y and S equal ref's bit for bit.
 *
 * Per live token t, per column j (kv partials of t computed while updating token t-1):
 *     kv_j  = tree(S[:,j], k_t)
 *     d_j   = (v_j - g kv_j) beta
 *     S[i][j] = fmaf(g, S[i][j], k_t,i d_j);  next kv partial fmaf(S, k_t+1,i)
 *     y_j   = tree(S[:,j], q_t) * scale    (lane partials after the update, the tree's top and y at the chunk end)
 * (vector gate: g_i in the update, g_t+1,i k_t+1,i rounded in the next kv, d = (v - kv) beta.)
 * A masked token keeps S, recomputes the next kv partials and gets y = 0.
 *
 * The token chain (kv tree, delta, update, next kv partials) is the time per token, so the rest is kept off it:
 * the token's scalars (g, beta, live) are read a token ahead; the readout of token t is issued beside the kv tree of
 * token t+1 (the compiler interleaves them); tokens run in pairs so that the two k rows in registers swap roles
 * without copies; the f32 rows in shared memory are padded so that a warp's row loads meet no bank conflict.
 *
 * A block (W warps, CB = W*N*P columns of one (b, h)) stages the window's inputs by chunks of tc tokens:
 * cp.async copies the next chunk's q, k (one token more), v, and vector gate rows into a raw area while the
 * warps run the current chunk from the f32 area; at the chunk's end the block writes the chunk's y rows, then
 * converts the raw chunk to f32 and computes its gates, betas and mask bits (one token per thread).
 *
 * TILE variants move the state through shared memory: the block's columns copied in whole rows of the layout with
 * the first chunk, and written back the same way, instead of each lane's strided loads and stores (VK: a lane's E
 * keys are E*4 bytes apart from the next lane's, a partial line per load). */
#include "cuda/gdn_cuda.cuh"

/* Shared-memory layout of one block, in bytes (16-byte aligned pieces). The f32 q, k and gate rows are padded: lane r
 * of a column reads the E keys r*E .. r*E+E-1 of a row, so each such segment is followed by 4 unused floats
 * (row stride Dk + 4L), which puts the L segments a warp reads at once in different banks. */
struct gdn_packed_smem {
    int qs, ks, vs, gvs, tok; /* f32 area: q [tc][RS], k [tc+1][RS], v [tc][CB], gate rows [tc+1][RS], (g, beta, live)
                               * [tc+1] (the last slot is read a token ahead and never used) */
    int qr, kr, vr, gvr;      /* raw area: the rows as they are in memory, in the input dtype */
    int yp;                   /* readout lane partials [tc][CB][L] */
    int st;                   /* the state tile (TILE variants): VK [CB][Dk + 4], KV [Dk][CB + 4] */
    int total;
};

static __host__ __device__ __forceinline__ int gdn_al16(int x) { return (x + 15) & ~15; }

static __host__ __device__ __forceinline__ gdn_packed_smem gdn_packed_layout(int Dk, int CB, int L, int tc, int ds,
                                                                             bool vec, bool tile) {
    const int rs = Dk + 4 * L;
    gdn_packed_smem m;
    int o = 0;
    m.qs = o; o = gdn_al16(o + tc * rs * 4);
    m.ks = o; o = gdn_al16(o + (tc + 1) * rs * 4);
    m.vs = o; o = gdn_al16(o + tc * CB * 4);
    m.gvs = o; o = gdn_al16(o + (vec ? (tc + 1) * rs * 4 : 0));
    m.tok = o; o = gdn_al16(o + (tc + 1) * 16);
    m.qr = o; o = gdn_al16(o + tc * Dk * ds);
    m.kr = o; o = gdn_al16(o + (tc + 1) * Dk * ds);
    m.vr = o; o = gdn_al16(o + tc * CB * ds);
    m.gvr = o; o = gdn_al16(o + (vec ? (tc + 1) * Dk * 4 : 0));
    m.yp = o; o = gdn_al16(o + tc * CB * L * 4);
    m.st = o; o = gdn_al16(o + (tile ? (CB * (Dk + 4) > Dk * (CB + 4) ? CB * (Dk + 4) : Dk * (CB + 4)) * 4 : 0));
    m.total = o;
    return m;
}

/* n raw rows of DK elements into padded f32 rows: element (row, col) to row*(DK + 4L) + col + 4*(col / E); 16 raw
 * bytes per piece (E is a multiple of 4, so each float4 stays inside one segment). A thread's pieces are NT*VE
 * elements apart, a whole number of rows, so its columns stay the same and its rows advance by a constant. */
template <int DT, int NT, int DK, int L>
__device__ __forceinline__ void gdn_convert_padded(float *dst, const unsigned char *raw, int rows) {
    constexpr int VE = DT == GDN_F32 ? 4 : 8, E = DK / L, RS = DK + 4 * L, STEP = NT * VE;
    static_assert(STEP % DK == 0, "a thread's pieces keep their columns");
    const int col = threadIdx.x * VE % DK; /* the piece's first column; VE <= E, so it lies in one segment ... */
    const int at0 = threadIdx.x * VE / DK * RS + col + 4 * (col / E), col2 = col + 4; /* ... or two float4s */
    const int at2 = at0 - col + col2 + 4 * (col2 / E - col / E);
    int at = 0;
#pragma unroll 4
    for (int i = threadIdx.x * VE; i < rows * DK; i += STEP, at += STEP / DK * RS) {
        float f[8];
        gdn_unpack16<DT>(raw, i, f);
        *(float4 *)(dst + at0 + at) = make_float4(f[0], f[1], f[2], f[3]);
        if (VE == 8) *(float4 *)(dst + at2 + at) = make_float4(f[4], f[5], f[6], f[7]);
    }
}

/* The raw chunk (q tcn rows, k nk rows, gate rows nk, v tcn rows of cbe columns with row stride CB) into the f32 area. */
template <int DT, int NT, int DK, int L>
__device__ __forceinline__ void gdn_convert_chunk(unsigned char *sm, const gdn_packed_smem &m, int CB, int tcn, int nk,
                                                  int cbe, bool vec) {
    constexpr int VE = DT == GDN_F32 ? 4 : 8;
    gdn_convert_padded<DT, NT, DK, L>((float *)(sm + m.qs), sm + m.qr, tcn);
    gdn_convert_padded<DT, NT, DK, L>((float *)(sm + m.ks), sm + m.kr, nk);
    float *vs = (float *)(sm + m.vs);
    for (int i = threadIdx.x * VE; i < tcn * CB; i += NT * VE)
        if (i % CB < cbe) gdn_cvt16<DT>(vs, sm + m.vr, i);
    if (vec) gdn_convert_padded<GDN_F32, NT, DK, L>((float *)(sm + m.gvs), sm + m.gvr, nk);
}

/* The y rows of a finished chunk: y[row0 + tt*row_step + c] = tree over the L lane partials of (tt, c) * scale, or 0
 * for a masked token. Thread x takes column x % CB of every (NT/CB)-th token. */
template <int DT, int NT, int L, int CB>
__device__ __forceinline__ void gdn_packed_write_y(void *y, int64_t row0, int64_t row_step, const float *yp,
                                                   const float4 *tok, int tcn, int cbe, float scale) {
    static_assert(NT % CB == 0, "whole token rows per pass");
    const int c = threadIdx.x % CB;
    if (c >= cbe) return;
#pragma unroll 4
    for (int tt = threadIdx.x / CB; tt < tcn; tt += NT / CB) {
        float x[L];
#pragma unroll
        for (int l = 0; l < L; ++l) x[l] = yp[(tt * CB + c) * L + l];
        const float out = tok[tt].z != 0.0f ? __fmul_rn(gdn_reg_tree<L>(x), scale) : 0.0f;
        gdn_st_dt<DT>(y, row0 + tt * row_step + c, out);
    }
}

template <int L, int P, int C, bool VEC, int W, bool TILE>
__global__ void __launch_bounds__(W * 32, 1) gdn_delta_packed_kernel(gdn_dev_args a, int tc) {
    constexpr int NT = W * 32, N = 32 / L, E = N * C, CW = N * P, CB = W * CW, DK = 32 * C, RS = DK + 4 * L;
    constexpr int NSC = (3 * 64 + NT - 1) / NT; /* scalar inputs (gate, beta, mask) per thread per chunk of <= 64 */
    static_assert(E % 4 == 0, "a lane's rows come in float4s");
    extern __shared__ __align__(16) unsigned char sm[];
    gdn_grid_dependency_wait();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r = lane / N, slot = lane % N;
    const int64_t col_blocks = (a.Dv + CB - 1) / CB;
    const int64_t bh = blockIdx.x / col_blocks, j0 = (blockIdx.x % col_blocks) * CB;
    const int64_t b = bh / a.Hv, h = bh % a.Hv, hk = gdn__key_head(h, a.Hk, a.group, a.tiled);
    const int cbe = a.Dv - j0 < CB ? (int)(a.Dv - j0) : CB;
    const int jl = warp * CW + slot * P; /* the lane's first column, relative to j0 */
    const int64_t sbase = bh * DK * a.Dv;
    const bool vk = a.layout == GDN_STATE_VK;
    const int ds = a.dtype == GDN_F32 ? 4 : 2;
    const gdn_packed_smem m = gdn_packed_layout(DK, CB, L, tc, ds, VEC, TILE);
    const float *qs = (const float *)(sm + m.qs), *ks = (const float *)(sm + m.ks), *vs = (const float *)(sm + m.vs);
    const float *gvs = (const float *)(sm + m.gvs);
    const float4 *tok = (const float4 *)(sm + m.tok);
    float *yp = (float *)(sm + m.yp);

    /* The scalar input u of this thread in a chunk of tcn tokens: its kind (0 gate, 1 beta, 2 mask, 3 none) and token */
    auto scalar_input = [&](int u, int tcn, int *tt) {
        const int i = threadIdx.x + u * NT, kind = (i >= tcn) + (i >= 2 * tcn) + (i >= 3 * tcn);
        *tt = i - kind * tcn;
        return kind;
    };
    /* chunk [t0, t0 + tcn): async copies of q, k (+1 token), v, gate rows; scalars into registers */
    float sc[NSC];
    auto issue = [&](int64_t t0, int tcn) {
        const int nk = a.T - t0 < tcn + 1 ? (int)(a.T - t0) : tcn + 1;
        const unsigned char *q = (const unsigned char *)a.q + ((b * a.T + t0) * a.Hk + hk) * DK * ds;
        const unsigned char *k = (const unsigned char *)a.k + ((b * a.T + t0) * a.Hk + hk) * DK * ds;
        const unsigned char *v = (const unsigned char *)a.v + (((b * a.T + t0) * a.Hv + h) * a.Dv + j0) * ds;
        gdn_stage_rows<NT>(sm + m.qr, DK * ds, q, a.Hk * DK * ds, tcn, DK * ds);
        gdn_stage_rows<NT>(sm + m.kr, DK * ds, k, a.Hk * DK * ds, nk, DK * ds);
        gdn_stage_rows<NT>(sm + m.vr, CB * ds, v, a.Hv * a.Dv * ds, tcn, cbe * ds);
        if (VEC)
            gdn_stage_rows<NT>(sm + m.gvr, DK * 4, (const unsigned char *)(a.gate + ((b * a.T + t0) * a.Hv + h) * DK),
                               a.Hv * DK * 4, nk, DK * 4);
        gdn_cp_commit();
#pragma unroll
        for (int u = 0; u < NSC; ++u) {
            int tt;
            const int kind = scalar_input(u, tcn, &tt);
            const int64_t gi = (b * a.T + t0 + tt) * a.Hv + h;
            sc[u] = 0.0f;
            if (kind == 0 && !VEC) sc[u] = __ldg(a.gate + gi);
            else if (kind == 1) sc[u] = __ldg(a.beta + gi);
            else if (kind == 2) sc[u] = a.mask == NULL || a.mask[b * a.T + t0 + tt] != 0 ? 1.0f : 0.0f;
        }
    };
    /* The y rows of the finished chunk [t0, t0 + tcn) */
    auto write_y = [&](int64_t t0, int tcn) {
        const int64_t row0 = ((b * a.T + t0) * a.Hv + h) * a.Dv + j0, row_step = a.Hv * a.Dv;
        switch (a.dtype) {
        case GDN_F16: gdn_packed_write_y<GDN_F16, NT, L, CB>(a.y, row0, row_step, yp, tok, tcn, cbe, a.scale); break;
        case GDN_BF16: gdn_packed_write_y<GDN_BF16, NT, L, CB>(a.y, row0, row_step, yp, tok, tcn, cbe, a.scale); break;
        default: gdn_packed_write_y<GDN_F32, NT, L, CB>(a.y, row0, row_step, yp, tok, tcn, cbe, a.scale); break;
        }
    };
    /* after issue(t0, tcn): the f32 area of the chunk (the y rows of the chunk before it written first) */
    auto land = [&](int64_t t0, int tcn, int64_t t0_done, int tcn_done) {
        gdn_cp_wait_all();
        __syncthreads(); /* every copy landed; every warp is done with the previous chunk */
        if (tcn_done > 0) {
            write_y(t0_done, tcn_done);
            __syncthreads(); /* its scalars are read until here */
        }
        const int nk = a.T - t0 < tcn + 1 ? (int)(a.T - t0) : tcn + 1;
        switch (a.dtype) {
        case GDN_F16: gdn_convert_chunk<GDN_F16, NT, DK, L>(sm, m, CB, tcn, nk, cbe, VEC); break;
        case GDN_BF16: gdn_convert_chunk<GDN_BF16, NT, DK, L>(sm, m, CB, tcn, nk, cbe, VEC); break;
        default: gdn_convert_chunk<GDN_F32, NT, DK, L>(sm, m, CB, tcn, nk, cbe, VEC); break;
        }
#pragma unroll
        for (int u = 0; u < NSC; ++u) {
            int tt;
            const int kind = scalar_input(u, tcn, &tt);
            float *slot4 = (float *)(sm + m.tok) + tt * 4;
            if (kind == 0 && !VEC) slot4[0] = gdn_gate_of(a, sc[u], h);
            else if (kind == 1) slot4[1] = gdn_beta_of(a, sc[u]);
            else if (kind == 2) slot4[2] = sc[u];
        }
        __syncthreads();
    };

    /* TILE: the block's state columns j0 .. j0+cbe-1 as one tile in shared memory, copied in whole rows of the
     * layout (VK: cbe rows of Dk keys, one contiguous run; KV: Dk rows of cbe columns); element (i, c) of the tile
     * at c*(DK + 4) + i (VK) or i*(CB + 4) + c (KV) */
    float *tile = (float *)(sm + m.st);
    const int tile_at = vk ? DK + 4 : 1, tile_step = vk ? 1 : CB + 4; /* (i, c) at c * tile_at + i * tile_step */
    const int tile_rows = vk ? cbe : DK, tile_row_bytes = (vk ? DK : cbe) * 4, tile_stride = (vk ? DK + 4 : CB + 4) * 4;
    const int64_t tile_base = sbase + (vk ? j0 * DK : j0), tile_gstride = (vk ? DK : a.Dv) * 4;
    if (TILE && a.state_in)
        gdn_stage_rows<NT>(sm + m.st, tile_stride, (const unsigned char *)(a.state_in + tile_base), tile_gstride,
                           tile_rows, tile_row_bytes);
    const int tc0 = a.T < tc ? (int)a.T : tc;
    issue(0, tc0); /* commits the tile's copies with the first chunk's */

    /* the state, S[r*E + e][j0 + jl + p] -> s[p][e]: straight from global memory while the first chunk is in
     * flight, or from the tile once it has landed */
    float s[P][E];
    bool jv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
        const int64_t j = j0 + jl + p;
        jv[p] = jl + p < cbe;
#pragma unroll
        for (int e = 0; e < E; e += 4) {
            float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (!TILE && a.state_in && jv[p]) {
                if (vk) {
                    const float4 f = __ldg((const float4 *)(a.state_in + sbase + j * DK + r * E + e));
                    x[0] = f.x; x[1] = f.y; x[2] = f.z; x[3] = f.w;
                } else {
#pragma unroll
                    for (int i = 0; i < 4; ++i) x[i] = __ldg(a.state_in + sbase + (int64_t)(r * E + e + i) * a.Dv + j);
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) s[p][e + i] = x[i];
        }
    }
    land(0, tc0, 0, 0);
    if (TILE && a.state_in) {
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
            for (int e = 0; e < E; ++e)
                if (jv[p]) s[p][e] = tile[(jl + p) * tile_at + (r * E + e) * tile_step];
    }

    /* kA: k of the current token (kB the next one's, loaded during the token); the kv partials of a token over its
     * C keys ascending from +0, the N partials interleaved; sc4: the current token's (g, beta, live) */
    float kA[E], kB[E], kvp[P][N];
    auto kv_partials = [&](const float *kn, const float *gvn) {
        float w[E];
#pragma unroll
        for (int e = 0; e < E; ++e) w[e] = VEC ? __fmul_rn(gvn[e], kn[e]) : kn[e];
#pragma unroll
        for (int i = 0; i < C; ++i)
#pragma unroll
            for (int c = 0; c < N; ++c)
#pragma unroll
                for (int p = 0; p < P; ++p)
                    kvp[p][c] = __fmaf_rn(s[p][c * C + i], w[c * C + i], i == 0 ? 0.0f : kvp[p][c]);
    };
    gdn_smem_row<E>(kA, ks + r * (E + 4));
    {
        float gv0[E];
        if (VEC) gdn_smem_row<E>(gv0, gvs + r * (E + 4));
        kv_partials(kA, gv0);
    }
    float4 sc4 = tok[0];

    /* The readout y_t = tree(S . q_t) after update t, at the end of the token beside the next token's kv tree:
     * C keys ascending per contract lane from +0, levels 1 .. N/2 in registers, the lane partial to the chunk's
     * readout slot. */
    float qr[E];
    auto readout = [&](float *yv) {
        float op[P][N];
#pragma unroll
        for (int i = 0; i < C; ++i)
#pragma unroll
            for (int c = 0; c < N; ++c)
#pragma unroll
                for (int p = 0; p < P; ++p)
                    op[p][c] = __fmaf_rn(s[p][c * C + i], qr[c * C + i], i == 0 ? 0.0f : op[p][c]);
#pragma unroll
        for (int p = 0; p < P; ++p) yv[p] = gdn_reg_tree<N>(op[p]);
    };
    auto put_y = [&](int tt, const float *yv) {
#pragma unroll
        for (int p = 0; p < P; ++p) yp[((tt * CB) + jl + p) * L + r] = yv[p];
    };

    /* Token tt of the chunk: kc holds its k row; kn receives the next token's, qr its q row. */
    auto step = [&](int tt, const float *kc, float *kn) {
        const float4 sc_next = tok[tt + 1];
        float gvn[E], v[P], delta[P], yv[P];
#pragma unroll
        for (int p = 0; p < P; ++p) v[p] = jv[p] ? vs[tt * CB + jl + p] : 0.0f;
        /* kv, delta (for a masked token too: cheaper than a branch around the chain's first half) */
#pragma unroll
        for (int p = 0; p < P; ++p) {
            const float kv = gdn_warp_tree<N>(gdn_reg_tree<N>(kvp[p]));
            delta[p] = VEC ? __fmul_rn(__fsub_rn(v[p], kv), sc4.y) : __fmul_rn(__fsub_rn(v[p], __fmul_rn(sc4.x, kv)), sc4.y);
        }
        /* the next k row (for the kv partials) and q_t (for the readout); the compiler issues the loads early */
        const int row = tt * RS + r * (E + 4);
        gdn_smem_row<E>(kn, ks + row + RS);
        if (VEC) gdn_smem_row<E>(gvn, gvs + row + RS);
        gdn_smem_row<E>(qr, qs + row);
        if (sc4.z != 0.0f) {
            /* S = fmaf(g, S, k d) (vector gate: g_i) */
#pragma unroll
            for (int e4 = 0; e4 < E; e4 += 4) {
                float gc[4] = {sc4.x, sc4.x, sc4.x, sc4.x};
                if (VEC) {
                    const float4 g4 = *(const float4 *)(gvs + row + e4);
                    gc[0] = g4.x; gc[1] = g4.y; gc[2] = g4.z; gc[3] = g4.w;
                }
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int p = 0; p < P; ++p)
                        s[p][e4 + i] = __fmaf_rn(gc[i], s[p][e4 + i], __fmul_rn(kc[e4 + i], delta[p]));
            }
        }
        kv_partials(kn, gvn); /* masked: S stays, y = 0 (write_y), the next kv from the same S */
        readout(yv);
        put_y(tt, yv);
        sc4 = sc_next;
    };

    for (int64_t t0 = 0; t0 < a.T; t0 += tc) {
        const int tcn = a.T - t0 < tc ? (int)(a.T - t0) : tc;
        const bool more = t0 + tcn < a.T;
        if (more) issue(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc);
        int tt = 0;
        for (; tt + 2 <= tcn; tt += 2) {
            step(tt, kA, kB);
            step(tt + 1, kB, kA);
        }
        if (tt < tcn) { /* an odd chunk (the window's last): kA takes the next token's k row */
            step(tt, kA, kB);
#pragma unroll
            for (int e = 0; e < E; ++e) kA[e] = kB[e];
        }
        if (more) {
            land(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc, t0, tcn);
            sc4 = tok[0];
        } else {
            __syncthreads();
            write_y(t0, tcn);
        }
    }

    if (!a.state_out) return;
    if (TILE) { /* through the tile (every warp is past its reads: the barrier before the last write_y) */
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
            for (int e = 0; e < E; ++e)
                if (jv[p]) tile[(jl + p) * tile_at + (r * E + e) * tile_step] = s[p][e];
        __syncthreads();
        gdn_unstage_rows<NT>((unsigned char *)(a.state_out + tile_base), tile_gstride, sm + m.st, tile_stride,
                             tile_rows, tile_row_bytes);
    } else {
#pragma unroll
        for (int p = 0; p < P; ++p) {
            if (!jv[p]) continue;
            const int64_t j = j0 + jl + p;
#pragma unroll
            for (int e = 0; e < E; e += 4) {
                if (vk) {
                    *(float4 *)(a.state_out + sbase + j * DK + r * E + e) = make_float4(s[p][e], s[p][e + 1], s[p][e + 2], s[p][e + 3]);
                } else {
#pragma unroll
                    for (int i = 0; i < 4; ++i) a.state_out[sbase + (int64_t)(r * E + e + i) * a.Dv + j] = s[p][e + i];
                }
            }
        }
    }
}

template <int L, int P, int C, bool VEC, int W, bool TILE = false>
static gdn_status gdn_launch_packed(const gdn__problem *p) {
    constexpr int N = 32 / L, CB = W * N * P;
    const gdn_dev_args a = gdn_dev_args_of(p);
    const int ds = (int)p->dtype_size, limit = gdn_cuda_smem_optin();
    int tc = 8; /* the smallest of 8, 16, 32, 64 tokens that holds the window: small windows, small blocks */
    while (tc < 64 && tc < a.T) tc *= 2;
    while (tc > 4 && gdn_packed_layout(32 * C, CB, L, tc, ds, VEC, TILE).total > (limit < 160 * 1024 ? limit : 160 * 1024)) tc /= 2;
    const int bytes = gdn_packed_layout(32 * C, CB, L, tc, ds, VEC, TILE).total;
    if (bytes > limit) return GDN_ERR_INELIGIBLE;
    static int smem_ok = 0; /* this instantiation may use the opt-in shared memory */
    if (bytes > 48 * 1024 && gdn_cuda_allow_smem(gdn_delta_packed_kernel<L, P, C, VEC, W, TILE>, &smem_ok) != GDN_OK)
        return GDN_ERR_DEVICE;
    const int64_t blocks = a.B * a.Hv * ((a.Dv + CB - 1) / CB); /* fits (CB >= 8): eligibility */
    return gdn_launch_pdl(gdn_delta_packed_kernel<L, P, C, VEC, W, TILE>, (unsigned)blocks, W * 32, bytes, p->a.stream, a, tc);
}

/* The instances built: (lanes per column L, columns per lane P, warps per block W, TILE) for Dk = 32 C. */
template <bool VEC>
static gdn_status gdn_packed_geometry(const gdn__problem *p, int L, int P, int W, int tile) {
#define GDN_PACKED_IF(l, pp, c, w, t) \
    if (L == l && P == pp && W == w && tile == t) return gdn_launch_packed<l, pp, c, VEC, w, (t) != 0>(p);
    switch (p->a.Dk) {
    case 32: GDN_PACKED_IF(8, 1, 1, 4, 0) break;
    case 64: GDN_PACKED_IF(4, 1, 2, 4, 0) GDN_PACKED_IF(2, 1, 2, 4, 0) GDN_PACKED_IF(8, 2, 2, 4, 0) break;
    case 128:
        GDN_PACKED_IF(4, 1, 4, 4, 0) GDN_PACKED_IF(8, 1, 4, 4, 0) GDN_PACKED_IF(8, 2, 4, 4, 0)
        GDN_PACKED_IF(4, 1, 4, 2, 0) GDN_PACKED_IF(4, 1, 4, 4, 1) GDN_PACKED_IF(8, 1, 4, 8, 1) break;
    default: GDN_PACKED_IF(8, 1, 8, 4, 0) GDN_PACKED_IF(16, 2, 8, 4, 0) break;
    }
#undef GDN_PACKED_IF
    return GDN_ERR_INELIGIBLE; /* not built for this Dk */
}

extern "C" {

/* Dk a power of two from 32 to 256, Dv % 8 == 0 (16-byte rows of v), 16-byte aligned q, k, v, vector gate and
 * state, a grid of blocks of 8 columns or more. Any B, T, heads, dtype, gate, beta, mask, layout. */
int gdn__delta_cuda_packed_eligible(const gdn__problem *p) {
    if (p->a.state_slot_device) return 0; /* slots on the device: the window and streamed decode kernels */
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 32 || a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_staged_tensors_aligned16(a);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % 8 == 0 && aligned && gdn_grid_fits(a->B * a->Hv * (a->Dv / 8));
}

int gdn__delta_cuda_packed_routed(const gdn__problem *p) { return gdn__delta_cuda_packed_eligible(p); }

/* lanes L per column, P columns per lane, W warps per block, the state through a tile; each is built for some Dk
 * (gdn_packed_geometry) and ineligible at the others */
const gdn__variant gdn__delta_cuda_packed_variants[] = {
    {"l2p1w4", 2, 1, 4, 0, 0, 0, 0},      {"l4p1w2", 4, 1, 2, 0, 0, 0, 0},  {"l4p1w4", 4, 1, 4, 0, 0, 0, 0},
    {"l4p1w4_tile", 4, 1, 4, 0, 0, 0, 1}, {"l8p1w4", 8, 1, 4, 0, 0, 0, 0},  {"l8p1w8_tile", 8, 1, 8, 0, 0, 0, 1},
    {"l8p2w4", 8, 2, 4, 0, 0, 0, 0},      {"l16p2w4", 16, 2, 4, 0, 0, 0, 0}, {NULL, 0, 0, 0, 0, 0, 0, 0}};

/* Routed: VK windows up to 64 tokens at Dk = 128 through the tile (l8p1w8_tile; H200, B=1: T=16 7.8 against 10.1
 * us, T=64 19.2 against 20.1 us; from T=257 l4p1w4 wins, 62.2 against 65.0 us; bench/results/h200.json); else 4
 * lanes per column (8 at Dk = 32 and 256). */
gdn_status gdn__delta_cuda_packed(const gdn__problem *p, const gdn__variant *v) {
    if (!gdn__delta_cuda_packed_eligible(p)) return GDN_ERR_INELIGIBLE;
    gdn__variant g = {NULL, p->a.Dk == 32 || p->a.Dk == 256 ? 8 : 4, 1, 4, 0, 0, 0, 0};
    if (v) g = *v;
    else if (p->a.Dk == 128 && p->a.state_layout == GDN_STATE_VK && p->a.T <= 64) g.lanes = 8, g.warps = 8, g.tile = 1;
    return p->a.gate_kind == GDN_GATE_VECTOR ? gdn_packed_geometry<true>(p, g.lanes, g.cols, g.warps, g.tile)
                                             : gdn_packed_geometry<false>(p, g.lanes, g.cols, g.warps, g.tile);
}

} /* extern "C" */
