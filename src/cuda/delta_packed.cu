/* cuda_packed: several value columns per warp, the state of the whole window in registers.
 *
 * L lanes serve one column; lane r (0 <= r < L) of a column plays the contract's lanes r*N .. r*N+N-1 (N = 32/L),
 * so it keeps E = N*C consecutive key rows S[r*E .. r*E+E-1][j] (C = Dk/32) of each of its P columns. A warp
 * holds N*P columns; lane = r*N + (column slot). The contract's butterfly splits in two: levels m = 1 .. N/2
 * combine partials inside the lane (gdn_reg_tree), levels m = N .. 16 are shuffles xor m, which pair lanes of
 * one column. The result is the contract's tree, so y and S equal ref's bit for bit.
 *
 * Per token t, per column j (k_t held in registers from the previous token):
 *     kv_j  = tree(S[:,j], k_t)     (partials computed while updating token t-1)
 *     d_j   = (v_j - g kv_j) beta
 *     S[i][j] = fmaf(g, S[i][j], k_t,i d_j);  o partial fmaf(S, q_t,i);  next kv partial fmaf(S, k_t+1,i)
 *     y_j   = tree(o) * scale
 * (vector gate: g_i in the update, g_t+1,i k_t+1,i rounded in the next kv, d = (v - kv) beta.)
 *
 * A block (W warps, CB = W*N*P columns of one (b, h)) stages the window's inputs by chunks of tc tokens:
 * cp.async copies the next chunk's q, k (one token more), v, and vector gate rows into a raw area while the
 * warps run the current chunk from the f32 area; then the raw chunk is converted to f32 (and the chunk's gates,
 * betas and mask bits computed, one token per thread) between two barriers. */
#include "gdn_cuda.cuh"

/* Shared-memory layout of one block, in bytes (16-byte aligned pieces). */
struct gdn_packed_smem {
    int qs, ks, vs, gvs, gs, bs, ls; /* f32 area: q [tc][Dk], k [tc+1][Dk], v [tc][CB], gate rows, g, beta, live */
    int qr, kr, vr, gvr;              /* raw area: the same rows in the input dtype */
    int total;
};

static __host__ __device__ __forceinline__ int gdn_al16(int x) { return (x + 15) & ~15; }

static __host__ __device__ __forceinline__ gdn_packed_smem gdn_packed_layout(int Dk, int CB, int tc, int ds, bool vec) {
    gdn_packed_smem m;
    int o = 0;
    m.qs = o; o = gdn_al16(o + tc * Dk * 4);
    m.ks = o; o = gdn_al16(o + (tc + 1) * Dk * 4);
    m.vs = o; o = gdn_al16(o + tc * CB * 4);
    m.gvs = o; o = gdn_al16(o + (vec ? (tc + 1) * Dk * 4 : 0));
    m.gs = o; o = gdn_al16(o + tc * 4);
    m.bs = o; o = gdn_al16(o + tc * 4);
    m.ls = o; o = gdn_al16(o + tc * 4);
    m.qr = o; o = gdn_al16(o + tc * Dk * ds);
    m.kr = o; o = gdn_al16(o + (tc + 1) * Dk * ds);
    m.vr = o; o = gdn_al16(o + tc * CB * ds);
    m.gvr = o; o = gdn_al16(o + (vec ? (tc + 1) * Dk * 4 : 0));
    m.total = o;
    return m;
}

/* The raw chunk (q tcn rows, k nk rows, v tcn rows of cbe columns with row stride CB) into the f32 area, 16 raw
 * bytes per step (row lengths are multiples of 8 elements). */
template <int DT, int NT>
__device__ __forceinline__ void gdn_convert_chunk(unsigned char *sm, const gdn_packed_smem &m, int Dk, int CB, int tcn,
                                                  int nk, int cbe, bool vec) {
    constexpr int VE = DT == GDN_F32 ? 4 : 8;
    float *qs = (float *)(sm + m.qs), *ks = (float *)(sm + m.ks), *vs = (float *)(sm + m.vs);
    for (int i = threadIdx.x * VE; i < tcn * Dk; i += NT * VE) gdn_cvt16<DT>(qs, sm + m.qr, i);
    for (int i = threadIdx.x * VE; i < nk * Dk; i += NT * VE) gdn_cvt16<DT>(ks, sm + m.kr, i);
    for (int i = threadIdx.x * VE; i < tcn * CB; i += NT * VE)
        if (i % CB < cbe) gdn_cvt16<DT>(vs, sm + m.vr, i);
    if (vec) {
        float *gvs = (float *)(sm + m.gvs);
        for (int i = threadIdx.x * 4; i < nk * Dk; i += NT * 4) gdn_cvt16<GDN_F32>(gvs, sm + m.gvr, i);
    }
}

template <int L, int P, int C, bool VEC, int W>
__global__ void __launch_bounds__(W * 32, 1) gdn_delta_packed_kernel(gdn_dev_args a, int tc) {
    constexpr int NT = W * 32, N = 32 / L, E = N * C, CW = N * P, CB = W * CW, DK = 32 * C;
    constexpr int NSC = (3 * 64 + NT - 1) / NT; /* scalar inputs (gate, beta, mask) per thread per chunk of <= 64 */
    static_assert(E % 4 == 0, "a lane's rows come in float4s");
    extern __shared__ __align__(16) unsigned char sm[];
    gdn_grid_dependency_wait();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r = lane / N, slot = lane % N;
    const int64_t col_blocks = (a.Dv + CB - 1) / CB;
    const int64_t bh = blockIdx.x / col_blocks, j0 = (blockIdx.x % col_blocks) * CB;
    const int64_t b = bh / a.Hv, h = bh % a.Hv, hk = h / a.group;
    const int cbe = a.Dv - j0 < CB ? (int)(a.Dv - j0) : CB;
    const int jl = warp * CW + slot * P; /* the lane's first column, relative to j0 */
    const int64_t sbase = bh * DK * a.Dv;
    const bool vk = a.layout == GDN_STATE_VK;
    const int ds = a.dtype == GDN_F32 ? 4 : 2;
    const gdn_packed_smem m = gdn_packed_layout(DK, CB, tc, ds, VEC);
    const float *qs = (const float *)(sm + m.qs), *ks = (const float *)(sm + m.ks), *vs = (const float *)(sm + m.vs);
    const float *gvs = (const float *)(sm + m.gvs), *gs = (const float *)(sm + m.gs), *bs = (const float *)(sm + m.bs);
    const int *ls = (const int *)(sm + m.ls);

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
            const int i = threadIdx.x + u * NT, kind = i / tcn, tt = i % tcn;
            const int64_t gi = (b * a.T + t0 + tt) * a.Hv + h;
            sc[u] = 0.0f;
            if (kind == 0 && !VEC) sc[u] = __ldg(a.gate + gi);
            else if (kind == 1) sc[u] = __ldg(a.beta + gi);
            else if (kind == 2) sc[u] = a.mask == NULL || a.mask[b * a.T + t0 + tt] != 0 ? 1.0f : 0.0f;
        }
    };
    /* after issue(t0, tcn) and a barrier-free wait: the f32 area of the chunk */
    auto land = [&](int64_t t0, int tcn) {
        gdn_cp_wait_all();
        __syncthreads(); /* every copy landed; every warp is done with the previous chunk */
        const int nk = a.T - t0 < tcn + 1 ? (int)(a.T - t0) : tcn + 1;
        switch (a.dtype) {
        case GDN_F16: gdn_convert_chunk<GDN_F16, NT>(sm, m, DK, CB, tcn, nk, cbe, VEC); break;
        case GDN_BF16: gdn_convert_chunk<GDN_BF16, NT>(sm, m, DK, CB, tcn, nk, cbe, VEC); break;
        default: gdn_convert_chunk<GDN_F32, NT>(sm, m, DK, CB, tcn, nk, cbe, VEC); break;
        }
#pragma unroll
        for (int u = 0; u < NSC; ++u) {
            const int i = threadIdx.x + u * NT, kind = i / tcn, tt = i % tcn;
            if (kind == 0 && !VEC) ((float *)(sm + m.gs))[tt] = gdn_gate_of(a, sc[u], h);
            else if (kind == 1) ((float *)(sm + m.bs))[tt] = gdn_beta_of(a, sc[u]);
            else if (kind == 2) ((int *)(sm + m.ls))[tt] = sc[u] != 0.0f;
        }
        __syncthreads();
    };

    const int tc0 = a.T < tc ? (int)a.T : tc;
    issue(0, tc0);

    /* the state, S[r*E + e][j0 + jl + p] -> s[p][e], while the first chunk is in flight */
    float s[P][E];
    bool jv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
        const int64_t j = j0 + jl + p;
        jv[p] = jl + p < cbe;
#pragma unroll
        for (int e = 0; e < E; e += 4) {
            float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (a.state_in && jv[p]) {
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
    land(0, tc0);

    /* k of the current token, and the kv partials of the first token */
    float kc[E], kvp[P][N];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
        for (int c = 0; c < N; ++c) kvp[p][c] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        kc[e] = ks[r * E + e];
        const float w = VEC ? __fmul_rn(gvs[r * E + e], kc[e]) : kc[e];
#pragma unroll
        for (int p = 0; p < P; ++p) kvp[p][e / C] = __fmaf_rn(s[p][e], w, kvp[p][e / C]);
    }

    /* The readout of a live token t runs at the top of the next live token, beside that token's kv butterfly
     * (both read S after update t): y_t = tree(S . q_t) * scale, stored when `pend`. A masked token, the end of
     * a chunk (its q rows are about to be overwritten) and the end of the window flush a pending readout. */
    bool pend = false;
    int pend_tt = 0;
    int64_t pend_row = 0;
    auto load_row = [&](float *dst, const float *row) {
#pragma unroll
        for (int e4 = 0; e4 < E; e4 += 4) {
            const float4 x = *(const float4 *)(row + e4);
            dst[e4] = x.x; dst[e4 + 1] = x.y; dst[e4 + 2] = x.z; dst[e4 + 3] = x.w;
        }
    };
    auto readout_regs = [&](const float *qv, float *o) {
        float op[P][N];
        /* partial c sums its C keys ascending; the N partials (and P columns) interleave for ILP */
#pragma unroll
        for (int i = 0; i < C; ++i)
#pragma unroll
            for (int c = 0; c < N; ++c)
#pragma unroll
                for (int p = 0; p < P; ++p)
                    op[p][c] = __fmaf_rn(s[p][c * C + i], qv[c * C + i], i == 0 ? 0.0f : op[p][c]);
#pragma unroll
        for (int p = 0; p < P; ++p) o[p] = __fmul_rn(gdn_warp_tree<N>(gdn_reg_tree<N>(op[p])), a.scale);
    };
    auto readout = [&](int qtt, float *o) {
        float qv[E];
        load_row(qv, qs + qtt * DK + r * E);
        readout_regs(qv, o);
    };
    /* q of the pending token, loaded once its update is issued (registers), read by the next live token */
    float q_pend[E];
#pragma unroll
    for (int e = 0; e < E; ++e) q_pend[e] = 0.0f;
    auto store_y = [&](bool on, int64_t row, const float *o) {
#pragma unroll
        for (int p = 0; p < P; ++p)
            if (on && r == 0 && jv[p]) gdn_st(a.y, a.dtype, row + p, o[p]);
    };
    auto flush = [&]() {
        if (!pend) return;
        float o[P];
        readout(pend_tt, o);
        store_y(true, pend_row, o);
        pend = false;
    };

    for (int64_t t0 = 0; t0 < a.T; t0 += tc) {
        const int tcn = a.T - t0 < tc ? (int)(a.T - t0) : tc;
        const bool more = t0 + tcn < a.T;
        if (more) issue(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc);

        int live = ls[0];
        const int64_t y_step = a.Hv * a.Dv;
        int64_t yrow = ((b * a.T + t0) * a.Hv + h) * a.Dv + j0 + jl;
        for (int tt = 0; tt < tcn; ++tt, yrow += y_step) {
            const float *knext = ks + (tt + 1) * DK + r * E;
            const int live_next = tt + 1 < tcn ? ls[tt + 1] : 1;
            if (!live) {
                /* masked: S stays; y = 0; the kv partials of the next token from the same S */
                flush();
                const float zero[P] = {};
                store_y(true, yrow, zero);
#pragma unroll
                for (int p = 0; p < P; ++p)
#pragma unroll
                    for (int c = 0; c < N; ++c) kvp[p][c] = 0.0f;
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    kc[e] = knext[e];
                    const float w = VEC ? __fmul_rn(gvs[(tt + 1) * DK + r * E + e], kc[e]) : kc[e];
#pragma unroll
                    for (int p = 0; p < P; ++p) kvp[p][e / C] = __fmaf_rn(s[p][e], w, kvp[p][e / C]);
                }
                live = live_next;
                continue;
            }
            const float g = VEC ? 0.0f : gs[tt], beta = bs[tt];
            float v[P];
#pragma unroll
            for (int p = 0; p < P; ++p) v[p] = jv[p] ? vs[tt * CB + jl + p] : 0.0f;
            float kn[E];
            load_row(kn, knext);
            /* the previous token's readout (stale registers when none is pending: not stored) beside this token's
             * kv tree */
            float o[P], delta[P];
            readout_regs(q_pend, o);
#pragma unroll
            for (int p = 0; p < P; ++p) {
                const float kv = gdn_warp_tree<N>(gdn_reg_tree<N>(kvp[p]));
                delta[p] = VEC ? __fmul_rn(__fsub_rn(v[p], kv), beta) : __fmul_rn(__fsub_rn(v[p], __fmul_rn(g, kv)), beta);
            }
            store_y(pend, pend_row, o);
            /* S = fmaf(g, S, k d) (vector gate: g_i); the next token's kv partials from the new S, partial c over
             * its C keys ascending, the N partials interleaved */
            float wn[E];
#pragma unroll
            for (int e4 = 0; e4 < E; e4 += 4) {
                float gc[4] = {g, g, g, g};
                if (VEC) {
                    const float4 g4 = *(const float4 *)(gvs + tt * DK + r * E + e4);
                    gc[0] = g4.x; gc[1] = g4.y; gc[2] = g4.z; gc[3] = g4.w;
                }
#pragma unroll
                for (int i = 0; i < 4; ++i) {
#pragma unroll
                    for (int p = 0; p < P; ++p)
                        s[p][e4 + i] = __fmaf_rn(gc[i], s[p][e4 + i], __fmul_rn(kc[e4 + i], delta[p]));
                    kc[e4 + i] = kn[e4 + i];
                    wn[e4 + i] = kn[e4 + i];
                }
                if (VEC) {
                    const float4 n4 = *(const float4 *)(gvs + (tt + 1) * DK + r * E + e4);
                    wn[e4] = __fmul_rn(n4.x, kn[e4]); wn[e4 + 1] = __fmul_rn(n4.y, kn[e4 + 1]);
                    wn[e4 + 2] = __fmul_rn(n4.z, kn[e4 + 2]); wn[e4 + 3] = __fmul_rn(n4.w, kn[e4 + 3]);
                }
            }
#pragma unroll
            for (int i = 0; i < C; ++i)
#pragma unroll
                for (int c = 0; c < N; ++c)
#pragma unroll
                    for (int p = 0; p < P; ++p)
                        kvp[p][c] = __fmaf_rn(s[p][c * C + i], wn[c * C + i], i == 0 ? 0.0f : kvp[p][c]);
            load_row(q_pend, qs + tt * DK + r * E);
            pend = true;
            pend_tt = tt;
            pend_row = yrow;
            live = live_next;
        }
        flush();
        if (more) land(t0 + tcn, a.T - t0 - tcn < tc ? (int)(a.T - t0 - tcn) : tc);
    }

    if (!a.state_out) return;
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

template <int L, int P, int C, bool VEC, int W>
static gdn_status gdn_launch_packed(const gdn__problem *p) {
    constexpr int N = 32 / L, CB = W * N * P;
    const gdn_dev_args a = gdn_dev_args_of(p);
    const int ds = (int)p->dtype_size, limit = gdn_cuda_smem_optin();
    int tc = 8; /* the smallest of 8, 16, 32, 64 tokens that holds the window: small windows, small blocks */
    while (tc < 64 && tc < a.T) tc *= 2;
    while (tc > 4 && gdn_packed_layout(32 * C, CB, tc, ds, VEC).total > (limit < 160 * 1024 ? limit : 160 * 1024)) tc /= 2;
    const int bytes = gdn_packed_layout(32 * C, CB, tc, ds, VEC).total;
    if (bytes > limit) return GDN_ERR_INELIGIBLE;
    static int smem_ok = 0; /* this instantiation may use the opt-in shared memory */
    if (bytes > 48 * 1024 && gdn_cuda_allow_smem(gdn_delta_packed_kernel<L, P, C, VEC, W>, &smem_ok) != GDN_OK)
        return GDN_ERR_DEVICE;
    const int64_t blocks = a.B * a.Hv * ((a.Dv + CB - 1) / CB);
    if (blocks > 0x7fffffffLL) return GDN_ERR_BAD_SIZE;
    return gdn_launch_pdl(gdn_delta_packed_kernel<L, P, C, VEC, W>, (unsigned)blocks, W * 32, bytes, p->a.cuda_stream, a, tc);
}

/* The variants built, by id: (lanes per column L, columns per lane P, warps per block W) for Dk = 32 C. */
template <bool VEC>
static gdn_status gdn_packed_variant(const gdn__problem *p, int variant) {
    switch (p->a.Dk) {
    case 32:
        return gdn_launch_packed<8, 1, 1, VEC, 4>(p);
    case 64:
        switch (variant) {
        case 1: return gdn_launch_packed<2, 1, 2, VEC, 4>(p);
        case 2: return gdn_launch_packed<8, 2, 2, VEC, 4>(p);
        default: return gdn_launch_packed<4, 1, 2, VEC, 4>(p);
        }
    case 128:
        switch (variant) {
        case 1: return gdn_launch_packed<8, 1, 4, VEC, 4>(p);
        case 2: return gdn_launch_packed<8, 2, 4, VEC, 4>(p);
        case 5: return gdn_launch_packed<4, 1, 4, VEC, 2>(p);
        default: return gdn_launch_packed<4, 1, 4, VEC, 4>(p);
        }
    default:
        switch (variant) {
        case 2: return gdn_launch_packed<16, 2, 8, VEC, 4>(p);
        default: return gdn_launch_packed<8, 1, 8, VEC, 4>(p);
        }
    }
}

extern "C" {

/* Dk a power of two from 32 to 256, Dv % 8 == 0 (16-byte rows of v), 16-byte aligned q, k, v, vector gate and
 * state. Any B, T, heads, dtype, gate, beta, mask, layout. */
int gdn__cuda_packed_eligible(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 32 || a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_staged_tensors_aligned16(a);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % 8 == 0 && aligned;
}

gdn_status gdn__delta_cuda_packed_variant(const gdn__problem *p, int variant) {
    if (!gdn__cuda_packed_eligible(p)) return GDN_ERR_INELIGIBLE;
    return p->a.gate_kind == GDN_GATE_VECTOR ? gdn_packed_variant<true>(p, variant) : gdn_packed_variant<false>(p, variant);
}

gdn_status gdn__delta_cuda_packed(const gdn__problem *p) { return gdn__delta_cuda_packed_variant(p, 0); }

} /* extern "C" */
