/* cuda_rowsplit: lane = value column, the warps of a block split the key rows.
 *
 * A block of W warps serves 32 adjacent value columns j0 .. j0+31 of one (b, h): lane l holds column j0 + l, warp w
 * holds the R = Dk/W key rows w*R .. w*R+R-1 of that column, S[w*R + e][j0 + l] -> s[e], for the whole window.
 * With C = Dk/32 keys per contract lane, warp w plays the contract's lanes w*N .. w*N+N-1 (N = 32/W): each thread
 * keeps N partials (each ascending over its C keys from +0 with fmaf), combines them with the butterfly levels
 * m = 1 .. N/2 in registers, and the levels m = N .. 16 combine the W warps' partials (warp w and w + m/N) in
 * shared memory: after a barrier every warp reads all W partials of its column and adds them pairwise
 * ((P0+P1)+(P2+P3))..., so every warp holds the contract's kv and computes delta itself. No shuffles; q, k and
 * gate rows are broadcast loads from shared memory (every lane of a warp reads the same address).
 *
 * Per live token t, per column j (the kv partials of t were computed while updating the previous token):
 *     P_w   = regtree(kv partials)  -> shared memory; barrier; kv = tree(P_0 .. P_W-1)
 *     d     = (v_j - g kv) beta                    (vector gate: (v_j - kv) beta)
 *     S[i][j] = fmaf(g, S[i][j], k_t,i d)          (vector gate: g_t,i)
 *     kv partials of t+1 from the new S and k_t+1  (vector gate: g_t+1,i k_t+1,i rounded)
 * The readout of t, y_j = tree(S . q_t) * scale, is off that chain: its partials are computed right after the
 * barrier of the next live token (q_t loaded there; they fill the wait for the W partials and the delta chain, S
 * unchanged since) and stored per token; at the end of each chunk the block combines them (warp w the chunk's
 * tokens w, w + W, ...) and writes the y rows. A masked token keeps S, recomputes the next kv partials and gets
 * y = 0. Token t+1's (g, beta, live) and k row are loaded at the top of token t, before its barrier (two k rows in
 * registers, the tokens in pairs so that they swap roles without copies).
 *
 * Chunks of tc tokens: cp.async copies the next chunk's q, k (one token more), v (32 columns) and vector gate rows
 * into a raw area while the warps run the current chunk from the f32 area; between two barriers at the chunk end
 * the raw rows are converted and the chunk's gates, betas and mask bits computed (one token per thread). */
#include <type_traits>

#include "cuda/gdn_cuda.cuh"

/* Shared-memory layout of one block, in bytes (16-byte aligned pieces). */
struct gdn_rowsplit_smem {
    int qs, ks, vs, gvs, tok;  /* f32 area: q [tc][Dk], k [tc+1][Dk], v [tc][32], gate rows [tc+1][Dk], (g, beta, live)
                                * [tc+1] (the last slot is read one token ahead, never used) */
    int qr, kr, vr, gvr;       /* raw area: the same rows in the input dtype */
    int part, outp;            /* kv partials [2][W*32], readout partials [tc][W*32] */
    int total;
};

static __host__ __device__ __forceinline__ int gdn_rs_al16(int x) { return (x + 15) & ~15; }

static __host__ __device__ __forceinline__ gdn_rowsplit_smem gdn_rowsplit_layout(int Dk, int W, int tc, int ds, bool vec) {
    gdn_rowsplit_smem m;
    int o = 0;
    m.qs = o; o = gdn_rs_al16(o + tc * Dk * 4);
    m.ks = o; o = gdn_rs_al16(o + (tc + 1) * Dk * 4);
    m.vs = o; o = gdn_rs_al16(o + tc * 32 * 4);
    m.gvs = o; o = gdn_rs_al16(o + (vec ? (tc + 1) * Dk * 4 : 0));
    m.tok = o; o = gdn_rs_al16(o + (tc + 1) * 16);
    m.qr = o; o = gdn_rs_al16(o + tc * Dk * ds);
    m.kr = o; o = gdn_rs_al16(o + (tc + 1) * Dk * ds);
    m.vr = o; o = gdn_rs_al16(o + tc * 32 * ds);
    m.gvr = o; o = gdn_rs_al16(o + (vec ? (tc + 1) * Dk * 4 : 0));
    m.part = o; o = gdn_rs_al16(o + 2 * W * 32 * 4);
    m.outp = o; o = gdn_rs_al16(o + tc * W * 32 * 4);
    m.total = o;
    return m;
}

/* A warp partial's slot in a [W*32] buffer: warps 4g .. 4g+3 of lane l side by side, so one float4 load at
 * (g*32 + l)*4 reads four warps' partials of column l. */
__device__ __forceinline__ int gdn_rs_slot(int warp, int lane) { return ((warp >> 2) * 32 + lane) * 4 + (warp & 3); }

/* The W warps' partials of column `lane` from buf, added pairwise: the butterfly levels above the warp's own. */
template <int W>
__device__ __forceinline__ float gdn_rs_cross(const float *buf, int lane) {
    float x[W];
#pragma unroll
    for (int g = 0; g < W / 4; ++g) {
        const float4 f = *(const float4 *)(buf + (g * 32 + lane) * 4);
        x[4 * g] = f.x; x[4 * g + 1] = f.y; x[4 * g + 2] = f.z; x[4 * g + 3] = f.w;
    }
    return gdn_reg_tree<W>(x);
}

/* n elements (a multiple of 8) of dtype DT from raw to f32 at dst, 16 raw bytes per step. */
template <int DT, int NT>
__device__ __forceinline__ void gdn_rs_convert(float *dst, const unsigned char *raw, int n) {
    constexpr int VE = DT == GDN_F32 ? 4 : 8;
    for (int i = threadIdx.x * VE; i < n; i += NT * VE) gdn_cvt16<DT>(dst, raw, i);
}

template <int DT, int NT>
__device__ __forceinline__ void gdn_rs_convert_chunk(unsigned char *sm, const gdn_rowsplit_smem &m, int Dk, int tcn,
                                                     int nk) {
    gdn_rs_convert<DT, NT>((float *)(sm + m.qs), sm + m.qr, tcn * Dk);
    gdn_rs_convert<DT, NT>((float *)(sm + m.ks), sm + m.kr, nk * Dk);
    gdn_rs_convert<DT, NT>((float *)(sm + m.vs), sm + m.vr, tcn * 32);
}

template <int C, int W, bool VEC>
__global__ void __launch_bounds__(W * 32, 1) gdn_delta_rowsplit_kernel(gdn_dev_args a, int tc) {
    constexpr int NT = W * 32, DK = 32 * C, R = DK / W, N = 32 / W;
    static_assert(W % 4 == 0 && R % 4 == 0 && R == N * C, "R rows per thread, N contract lanes of C keys");
    extern __shared__ __align__(16) unsigned char sm[];
    gdn_grid_dependency_wait();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i0 = warp * R;
    const int64_t col_blocks = a.Dv / 32;
    const int64_t bh = blockIdx.x / col_blocks, j0 = (blockIdx.x % col_blocks) * 32, j = j0 + lane;
    const int64_t b = bh / a.Hv, h = bh % a.Hv, hk = gdn__key_head(h, a.Hk, a.group, a.tiled);
    const int64_t sbase = bh * DK * a.Dv;
    const bool vk = a.layout == GDN_STATE_VK;
    const int ds = a.dtype == GDN_F32 ? 4 : 2;
    const gdn_rowsplit_smem m = gdn_rowsplit_layout(DK, W, tc, ds, VEC);
    const float *qs = (const float *)(sm + m.qs), *ks = (const float *)(sm + m.ks), *vs = (const float *)(sm + m.vs);
    const float *gvs = (const float *)(sm + m.gvs);
    const float4 *tok = (const float4 *)(sm + m.tok);
    float *part = (float *)(sm + m.part), *outp = (float *)(sm + m.outp);
    const int slot = gdn_rs_slot(warp, lane);

    /* chunk [t0, t0 + tcn): async copies of q, k (+1 token), v, vector gate rows; thread tt < tcn loads the raw
     * gate, beta and mask of token t0 + tt into registers */
    float sc_g = 0.0f, sc_b = 0.0f;
    bool sc_live = false;
    auto issue = [&](int64_t t0, int tcn) {
        const int nk = a.T - t0 < tcn + 1 ? (int)(a.T - t0) : tcn + 1;
        const unsigned char *q = (const unsigned char *)a.q + ((b * a.T + t0) * a.Hk + hk) * DK * ds;
        const unsigned char *k = (const unsigned char *)a.k + ((b * a.T + t0) * a.Hk + hk) * DK * ds;
        const unsigned char *v = (const unsigned char *)a.v + (((b * a.T + t0) * a.Hv + h) * a.Dv + j0) * ds;
        gdn_stage_rows<NT>(sm + m.qr, DK * ds, q, a.Hk * DK * ds, tcn, DK * ds);
        gdn_stage_rows<NT>(sm + m.kr, DK * ds, k, a.Hk * DK * ds, nk, DK * ds);
        gdn_stage_rows<NT>(sm + m.vr, 32 * ds, v, a.Hv * a.Dv * ds, tcn, 32 * ds);
        if (VEC)
            gdn_stage_rows<NT>(sm + m.gvr, DK * 4, (const unsigned char *)(a.gate + ((b * a.T + t0) * a.Hv + h) * DK),
                               a.Hv * DK * 4, nk, DK * 4);
        gdn_cp_commit();
        if ((int)threadIdx.x < tcn) {
            const int64_t t = t0 + threadIdx.x, gi = (b * a.T + t) * a.Hv + h;
            sc_g = VEC ? 0.0f : __ldg(a.gate + gi);
            sc_b = __ldg(a.beta + gi);
            sc_live = a.mask == NULL || a.mask[b * a.T + t] != 0;
        }
    };
    /* after issue(t0, tcn): wait for the copies, then the f32 area and the token scalars of the chunk */
    auto land = [&](int64_t t0, int tcn) {
        gdn_cp_wait_all();
        __syncthreads(); /* every copy landed; every warp is done with the previous chunk */
        const int nk = a.T - t0 < tcn + 1 ? (int)(a.T - t0) : tcn + 1;
        switch (a.dtype) {
        case GDN_F16: gdn_rs_convert_chunk<GDN_F16, NT>(sm, m, DK, tcn, nk); break;
        case GDN_BF16: gdn_rs_convert_chunk<GDN_BF16, NT>(sm, m, DK, tcn, nk); break;
        default: gdn_rs_convert_chunk<GDN_F32, NT>(sm, m, DK, tcn, nk); break;
        }
        if (VEC) gdn_rs_convert<GDN_F32, NT>((float *)(sm + m.gvs), sm + m.gvr, nk * DK);
        if ((int)threadIdx.x < tcn)
            ((float4 *)(sm + m.tok))[threadIdx.x] =
                make_float4(VEC ? 0.0f : gdn_gate_of(a, sc_g, h), gdn_beta_of(a, sc_b), sc_live ? 1.0f : 0.0f, 0.0f);
        __syncthreads();
    };

    const int tc0 = a.T < tc ? (int)a.T : tc;
    issue(0, tc0);

    /* the state, S[i0 + e][j] -> s[e], while the first chunk is in flight */
    float s[R];
#pragma unroll
    for (int e = 0; e < R; e += 4) {
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (a.state_in) {
            if (vk) {
                const float4 f = __ldg((const float4 *)(a.state_in + sbase + j * DK + i0 + e));
                x[0] = f.x; x[1] = f.y; x[2] = f.z; x[3] = f.w;
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i) x[i] = __ldg(a.state_in + sbase + (int64_t)(i0 + e + i) * a.Dv + j);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) s[e + i] = x[i];
    }
    land(0, tc0);

    /* kv partials of S with the row w (k, or g k rounded for the vector gate): partial c over keys c*C .. c*C+C-1
     * ascending from +0, the N partials interleaved */
    auto partials = [&](float *p, const float *w) {
#pragma unroll
        for (int i = 0; i < C; ++i)
#pragma unroll
            for (int c = 0; c < N; ++c) p[c] = __fmaf_rn(s[c * C + i], w[c * C + i], i == 0 ? 0.0f : p[c]);
    };
    /* the kv row of the token after k's: k, or g k rounded for the vector gate (g row from grow) */
    auto kv_row = [&](float *w, const float *k, const float *grow) {
#pragma unroll
        for (int e = 0; e < R; ++e) w[e] = k[e];
        if (VEC) {
            float gr[R];
            gdn_smem_row<R>(gr, grow);
#pragma unroll
            for (int e = 0; e < R; ++e) w[e] = __fmul_rn(gr[e], k[e]);
        }
    };
    /* two k rows, used in turn: the current token's (for its update) and the next one's (loaded a token ahead);
     * kA holds the current one at every chunk start. The kv partials of the first token: */
    float kA[R], kB[R], kvp[N];
    gdn_smem_row<R>(kA, ks + i0);
    {
        float w[R];
        kv_row(w, kA, gvs + i0);
        partials(kvp, w);
    }

    /* the pending readout: the last live token (its y partials are computed from S right after the barrier of the
     * next live token, or at the chunk end, with its q row loaded there: after the barrier, so the readout fills
     * the wait for the W partials and the delta chain) */
    bool pend = false;
    int pend_tt = 0, par = 0; /* par: the kv partial buffer of the next live token, 0 or NT */
    auto readout = [&](int tt) {
        float qr[R], op[N];
        gdn_smem_row<R>(qr, qs + tt * DK + i0);
        partials(op, qr);
        outp[tt * NT + slot] = gdn_reg_tree<N>(op);
    };

    /* token tt of the chunk: tk its (g, beta, live), kc its k row; loads the next token's scalars into tk_next
     * and its k row into kn first (before the barrier: they do not depend on it) */
    float4 tk_next = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    auto token = [&](int tt, const float *kc, float *kn) {
        const float4 tk = tk_next;
        tk_next = tok[tt + 1];
        gdn_smem_row<R>(kn, ks + (tt + 1) * DK + i0);
        const float *grow = gvs + (tt + 1) * DK + i0;
        if (tk.z == 0.0f) {
            /* masked: S stays (a pending readout stays valid); the next token's kv partials from the same S */
            float w[R];
            kv_row(w, kn, grow);
            partials(kvp, w);
            return;
        }
        const float v = vs[tt * 32 + lane];
        /* kv: this warp's partial, then the W warps' partials of the column, pairwise */
        part[par + slot] = gdn_reg_tree<N>(kvp);
        __syncthreads();
        const float kv = gdn_rs_cross<W>(part + par, lane);
        /* beside the kv combine, without a branch: with nothing pending (the chunk's first live token) it writes
         * the slot of token pend_tt (0 at a chunk start), which is a token before this one (masked: y = 0) or
         * this one (its own readout comes later) */
        readout(pend_tt);
        const float delta = VEC ? __fmul_rn(__fsub_rn(v, kv), tk.y) : __fmul_rn(__fsub_rn(v, __fmul_rn(tk.x, kv)), tk.y);
        /* S = fmaf(g, S, k d) (vector gate: g_i), then the next token's kv partials from the new S */
        float gc[R];
        if (VEC) gdn_smem_row<R>(gc, gvs + tt * DK + i0);
        float kd[R];
#pragma unroll
        for (int e = 0; e < R; ++e) kd[e] = __fmul_rn(kc[e], delta);
#pragma unroll
        for (int e = 0; e < R; ++e) s[e] = __fmaf_rn(VEC ? gc[e] : tk.x, s[e], kd[e]);
        float w[R];
        kv_row(w, kn, grow);
        partials(kvp, w);
        pend = true;
        pend_tt = tt;
        par ^= NT;
    };

    /* y rows of a chunk from the readout partials in outp: warp w combines tokens w, w + W, ... (masked: 0) */
    auto y_rows = [&](auto dt, int64_t t0, int tcn) {
        constexpr int DT = decltype(dt)::value;
        const int64_t y0 = ((b * a.T + t0) * a.Hv + h) * a.Dv + j, ystep = W * a.Hv * a.Dv;
        int64_t yi = y0 + (int64_t)warp * a.Hv * a.Dv;
#pragma unroll 2
        for (int tt = warp; tt < tcn; tt += W, yi += ystep) {
            const float y = tok[tt].z != 0.0f ? __fmul_rn(gdn_rs_cross<W>(outp + tt * NT, lane), a.scale) : 0.0f;
            gdn_st_dt<DT>(a.y, yi, y);
        }
    };

    for (int64_t t0 = 0; t0 < a.T; t0 += tc) {
        const int tcn = a.T - t0 < tc ? (int)(a.T - t0) : tc;
        const bool more = t0 + tcn < a.T;
        if (more) issue(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc);

        /* the tokens in pairs (the two k rows swap roles without copies), then the odd last one */
        tk_next = tok[0];
        int tt = 0;
        for (; tt + 1 < tcn; tt += 2) {
            token(tt, kA, kB);
            token(tt + 1, kB, kA);
        }
        if (tt < tcn) {
            token(tt, kA, kB);
#pragma unroll
            for (int e = 0; e < R; ++e) kA[e] = kB[e];
        }
        if (pend) readout(pend_tt);
        pend = false;
        pend_tt = 0;
        __syncthreads(); /* every readout partial of the chunk is in outp */

        switch (a.dtype) {
        case GDN_F16: y_rows(std::integral_constant<int, GDN_F16>(), t0, tcn); break;
        case GDN_BF16: y_rows(std::integral_constant<int, GDN_BF16>(), t0, tcn); break;
        default: y_rows(std::integral_constant<int, GDN_F32>(), t0, tcn); break;
        }
        if (more) land(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc);
    }

    if (!a.state_out) return;
#pragma unroll
    for (int e = 0; e < R; e += 4) {
        if (vk) {
            *(float4 *)(a.state_out + sbase + j * DK + i0 + e) = make_float4(s[e], s[e + 1], s[e + 2], s[e + 3]);
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) a.state_out[sbase + (int64_t)(i0 + e + i) * a.Dv + j] = s[e + i];
        }
    }
}

template <int C, int W, bool VEC>
static gdn_status gdn_launch_rowsplit(const gdn__problem *p) {
    const gdn_dev_args a = gdn_dev_args_of(p);
    const int ds = (int)p->dtype_size, limit = gdn_cuda_smem_optin();
    int tc = 8; /* the smallest of 8, 16, 32, 64 tokens that holds the window, halved to fit */
    while (tc < 64 && tc < a.T) tc *= 2;
    while (tc > 8 && gdn_rowsplit_layout(32 * C, W, tc, ds, VEC).total > limit) tc /= 2;
    const int bytes = gdn_rowsplit_layout(32 * C, W, tc, ds, VEC).total;
    if (bytes > limit) return GDN_ERR_INELIGIBLE;
    static int smem_ok = 0; /* this instantiation may use the opt-in shared memory */
    if (bytes > 48 * 1024 && gdn_cuda_allow_smem(gdn_delta_rowsplit_kernel<C, W, VEC>, &smem_ok) != GDN_OK)
        return GDN_ERR_DEVICE;
    const int64_t blocks = a.B * a.Hv * (a.Dv / 32); /* fits: eligibility */
    return gdn_launch_pdl(gdn_delta_rowsplit_kernel<C, W, VEC>, (unsigned)blocks, W * 32, bytes, p->a.stream, a, tc);
}

/* The instances built, by warps per block W (rows per thread R = Dk/W); 0 = the routed one. Dk = 128, measured on
 * the H200 (docs/kernels/cuda_rowsplit.md): W = 4 is fastest from T = 64 on in both layouts and at T = 7 in VK, W = 8 at T = 7
 * in KV (6.35 vs 6.84 us). Dk = 64 and 256 (not timed): W = 4 and 8, R = 16 and 32 rows. */
template <bool VEC>
static gdn_status gdn_rowsplit_warps(const gdn__problem *p, int warps) {
    if (warps == 0 && p->a.Dk == 128) warps = p->a.T < 32 && p->a.state_layout == GDN_STATE_KV ? 8 : 4;
    switch (p->a.Dk) {
    case 64:
        switch (warps) {
        case 0: case 4: return gdn_launch_rowsplit<2, 4, VEC>(p);
        case 8: return gdn_launch_rowsplit<2, 8, VEC>(p);
        default: return GDN_ERR_INELIGIBLE;
        }
    case 128:
        switch (warps) {
        case 4: return gdn_launch_rowsplit<4, 4, VEC>(p);
        case 8: return gdn_launch_rowsplit<4, 8, VEC>(p);
        case 16: return gdn_launch_rowsplit<4, 16, VEC>(p);
        default: return GDN_ERR_INELIGIBLE;
        }
    default:
        switch (warps) {
        case 0: case 8: return gdn_launch_rowsplit<8, 8, VEC>(p);
        case 16: return gdn_launch_rowsplit<8, 16, VEC>(p);
        default: return GDN_ERR_INELIGIBLE;
        }
    }
}

extern "C" {

/* Dk in {64, 128, 256}, Dv % 32 == 0 (whole warps of columns), 16-byte aligned q, k, v, vector gate and state.
 * Any B, T, heads, dtype, gate, beta, mask, layout. */
int gdn__delta_cuda_rowsplit_eligible(const gdn__problem *p) {
    if (p->a.state_slot_device) return 0; /* slots on the device: the window and streamed decode kernels */
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_staged_tensors_aligned16(a);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % 32 == 0 && aligned && gdn_grid_fits(a->B * a->Hv * (a->Dv / 32));
}

/* Windows of 16 tokens and more go to cuda_packed, faster there (H200, B=1, KV: T=64 17.2 vs 20.8 us, T=2048 433 vs
 * 561 us); below, rowsplit beats packed (T=7: 5.78 vs 6.02 us) where cuda_window is not routed (more sequences than
 * one wave of its blocks, T > 8). bench/results/h200.json. */
int gdn__delta_cuda_rowsplit_routed(const gdn__problem *p) { return p->a.T < 16 && gdn__delta_cuda_rowsplit_eligible(p); }

/* warps per block; a width not built for the call's Dk is ineligible */
const gdn__variant gdn__delta_cuda_rowsplit_variants[] = {
    {"warps4", 0, 0, 4, 0, 0, 0, 0}, {"warps8", 0, 0, 8, 0, 0, 0, 0}, {"warps16", 0, 0, 16, 0, 0, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0, 0}};

gdn_status gdn__delta_cuda_rowsplit(const gdn__problem *p, const gdn__variant *v) {
    if (!gdn__delta_cuda_rowsplit_eligible(p)) return GDN_ERR_INELIGIBLE;
    const int warps = v ? v->warps : 0;
    return p->a.gate_kind == GDN_GATE_VECTOR ? gdn_rowsplit_warps<true>(p, warps) : gdn_rowsplit_warps<false>(p, warps);
}

} /* extern "C" */
