/* cuda_fused: the layer step for short windows (n <= 8) in one kernel, on the contract's arithmetic,
 * spread over a thread-block cluster per (sequence, key head hk). D = Dk = Dv = 128.
 *
 * The cluster: the `group` = Hv / Hk value heads h of the key head (gdn__value_head: hk group + g grouped, g Hk + hk
 * tiled; g = 0 .. group - 1), each split into S column
 * blocks (S = 8 / group rounded down to a power of two, CS = group S <= 8 blocks). Block (g, r) holds the state
 * columns c0 = r D / S .. c0 + D / S - 1 of head h, 4 per warp (NCOL = 4), lane l the keys 4 l .. 4 l + 3, in
 * registers for the whole window. The state's loads are issued first, then:
 *   1. the prologue, the cluster's channels (q, k of hk, v of its heads: U = (2 + group) D) shared out: block rho
 *      convolves channels u = rho (mod CS) of every token (conv + SiLU) into its shared memory (at u / CS), and
 *      the output gate of its columns' z, on warps 2 ..; warp 0 its head's decays, warp 1 its betas, a token a
 *      lane (each a chain of double-precision transcendentals: the critical path, so nothing else shares them).
 *      Every channel's history is read by its one block, which writes the committed history at the end: in
 *      place is race free.
 *   -- cluster barrier --
 *   2. each block gathers what it needs through distributed shared memory: q and k whole (their L2 norms from
 *      a warp's butterfly, the same in every block), its columns of v. Then the recurrence token by token, no
 *      barrier (a warp's columns depend on nothing else), the readout times scale into shared memory; the state
 *      after the commit's k-th token written there when k < n (the rare case pays for the barriers' wait).
 *   3. the gated RMSNorm: the block's lanes of the contract's tree over D (32 / S of them) summed in the warp,
 *      -- cluster barrier -- the S partials of the head added in the butterfly's order, y of its columns.
 *   -- cluster barrier -- (no block leaves while another reads its shared memory)
 *   4. the global writes: y (and its planes when asked for), the state when k = n (in place: the block owns its
 *      columns of its slot's head), the histories.
 * A cluster barrier releases at cluster scope, which waits for the block's outstanding global writes: none is
 * issued before the last one. */
#include <cooperative_groups.h>

#include "layer/cuda/layer.cuh"

namespace cg = cooperative_groups;

#define FUSED_D 128
#define FUSED_MAX_LEN 8 /* the longest window it takes; longer: cuda_staged */
#define FUSED_MAX_MINE 192 /* channels per block: ceil((2 + group) D / (group S)) <= 180 for group <= 8 */

/* Column blocks per head for a group size: CS = group S <= 8. */
static inline int fused_splits(int64_t group) { return group == 1 ? 8 : group <= 3 ? (group == 2 ? 4 : 2) : group <= 8 ? 1 : 0; }

/* The lane's keys row0 .. row0 + 3 of the warp's columns j0 .. j0 + 3 of a head's state, streamed out. */
template <int CM, int NCOL>
__device__ __forceinline__ void fused_store_state(float *st, const float (&s)[NCOL][CM], bool vk, int j0, int row0) {
#pragma unroll
    for (int c = 0; c < NCOL; ++c) {
        if (vk) {
            __stcs((float4 *)(st + (j0 + c) * FUSED_D + row0), make_float4(s[c][0], s[c][1], s[c][2], s[c][3]));
        } else {
#pragma unroll
            for (int e = 0; e < CM; ++e) __stcs(st + (row0 + e) * FUSED_D + j0 + c, s[c][e]);
        }
    }
}

template <int DT, int S>
__global__ void __launch_bounds__(FUSED_D / S * 8) gdn_layer_fused_kernel(gdn_layer_dev d, gdn_layer_seqs sq) {
    constexpr int D = FUSED_D, CM = 4, NCOL = 4, COLS = D / S, THREADS = COLS * 8;
    __shared__ __align__(16) float xs[FUSED_MAX_LEN][FUSED_MAX_MINE]; /* conv outputs of channels u = rho + i CS at i */
    __shared__ __align__(16) float qs[FUSED_MAX_LEN][D], ks[FUSED_MAX_LEN][D];
    __shared__ __align__(16) float vs[FUSED_MAX_LEN][COLS], gz[FUSED_MAX_LEN][COLS], os[FUSED_MAX_LEN][COLS];
    __shared__ float gs[FUSED_MAX_LEN], bs[FUSED_MAX_LEN], part[FUSED_MAX_LEN];
    cg::cluster_group cluster = cg::this_cluster();
    const int CS = d.group * S, rho = (int)(blockIdx.x % CS), hk = (int)(blockIdx.x / CS), gi = rho / S, r = rho % S;
    const int h = (int)gdn__value_head(hk, gi, d.Hk, d.group, d.tiled), c0 = r * COLS, U = (2 + d.group) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, b = blockIdx.y;
    const int slot = sq.slot[b], n = sq.start[b + 1] - sq.start[b], commit = sq.commit[b];
    const bool fresh = sq.fresh[b], vk = d.layout == GDN_STATE_VK;
    const int64_t tok0 = sq.start[b], HD = (int64_t)d.Hv * D;
    if (slot >= 0 && !fresh) { /* the block's state columns, asked of L2 while the kernel before it may still run */
        const float *sp = d.state + ((int64_t)slot * d.Hv + h) * D * D;
        if (vk && threadIdx.x == 0) gdn_prefetch_l2_bulk(sp + c0 * D, COLS * D * 4);
        if (!vk)
            for (int i = threadIdx.x; i < D; i += THREADS) gdn_prefetch_l2(sp + i * D + c0);
    }
    gdn_grid_dependency_wait();
    if (slot < 0) { /* the whole cluster leaves together */
        for (int i = threadIdx.x; i < n * COLS; i += THREADS) {
            gdn_st_dt<DT>(d.y, (tok0 + i / COLS) * HD + (int64_t)h * D + c0 + i % COLS, 0.0f);
            if (d.planes) gdn_layer_put_planes(d, tok0 + i / COLS, (int64_t)h * D + c0 + i % COLS, 0.0f, 0.0f);
        }
        return;
    }
    const int j0 = c0 + warp * NCOL, row0 = lane * CM;
    float *st = d.state + ((int64_t)slot * d.Hv + h) * D * D;
    float s[NCOL][CM];
#pragma unroll
    for (int c = 0; c < NCOL; ++c) {
        if (fresh) {
#pragma unroll
            for (int e = 0; e < CM; ++e) s[c][e] = 0.0f;
        } else if (vk) {
            const float4 f = __ldcs((const float4 *)(st + (j0 + c) * D + row0));
            s[c][0] = f.x, s[c][1] = f.y, s[c][2] = f.z, s[c][3] = f.w;
        } else {
#pragma unroll
            for (int e = 0; e < CM; ++e) s[c][e] = __ldcs(st + (row0 + e) * D + j0 + c);
        }
    }

    /* 1. the prologue: cluster channel u (q: u < D, k: u < 2 D, v of the cluster's value head g: 2 D + g D ..) is
     * channel ch(u) of the input; this block takes u = rho, rho + CS, .. for every token */
    auto channel = [&](int u) -> int64_t {
        if (u < 2 * D) return (int64_t)((u / D) * d.Hk + hk) * D + u % D;
        const int64_t hv = gdn__value_head(hk, (u - 2 * D) / D, d.Hk, d.group, d.tiled);
        return 2 * (int64_t)d.Hk * D + hv * D + u % D;
    };
    const int mine = (U - rho + CS - 1) / CS; /* channels of this block */
    if (warp == 0 && lane < n) { /* the decays: warp 0, a token a lane */
        gs[lane] = gdn_layer_decay<DT>(d, (tok0 + lane) * d.Hv + h, h);
    } else if (warp == 1 && lane < n) { /* the betas: warp 1 */
        bs[lane] = gdn_layer_beta<DT>(d, (tok0 + lane) * d.Hv + h);
    } else if (warp >= 2) { /* the convs, then the output gates, over the other warps' threads, 4 at a time */
        const int tid = threadIdx.x - 64, workers = THREADS - 64;
#pragma unroll 4
        for (int i = tid; i < mine * n; i += workers) {
            const int t = i / mine, u = rho + (i % mine) * CS;
            xs[t][i % mine] = gdn_layer_conv<DT>(d, tok0, slot, fresh, channel(u), t);
        }
#pragma unroll 4
        for (int i = tid; i < n * COLS; i += workers) {
            const int t = i / COLS, j = i % COLS;
            const float z = gdn_ld<DT>(d.z, (tok0 + t) * HD + (int64_t)h * D + c0 + j);
            gz[t][j] = gdn__out_gate(z, d.out_gate);
        }
    }
    cluster.sync();

    /* 2. gather: q (warp 0) and k (warp 1) normalized per token, v of the block's columns */
    const float inv = gdn_rsqrtf((float)D);
    for (int job = warp; job < 2 * n; job += THREADS / 32) {
        const int t = job >> 1, which = job & 1;
        float x[CM], acc = 0.0f;
#pragma unroll
        for (int e = 0; e < CM; ++e) {
            const int u = which * D + row0 + e;
            x[e] = cluster.map_shared_rank(&xs[t][u / CS], (unsigned)(u % CS))[0];
            acc = __fmaf_rn(x[e], x[e], acc);
        }
        const float f = gdn__l2_factor(gdn_warp_tree<1>(acc), D, d.eps_l2);
        float *dst = which ? ks[t] : qs[t];
#pragma unroll
        for (int e = 0; e < CM; ++e) dst[row0 + e] = __fmul_rn(__fmul_rn(f, x[e]), inv);
    }
    for (int i = threadIdx.x; i < n * COLS; i += THREADS) {
        const int t = i / COLS, u = 2 * D + gi * D + c0 + i % COLS;
        vs[t][i % COLS] = cluster.map_shared_rank(&xs[t][u / CS], (unsigned)(u % CS))[0];
    }
    __syncthreads();
    bool all[CM]; /* every key of the lane's chunk is in range */
#pragma unroll
    for (int e = 0; e < CM; ++e) all[e] = true;
    for (int t = 0; t < n; ++t) {
        float k[CM], q[CM], v[NCOL];
#pragma unroll
        for (int e = 0; e < CM; ++e) k[e] = ks[t][row0 + e], q[e] = qs[t][row0 + e];
#pragma unroll
        for (int c = 0; c < NCOL; ++c) v[c] = vs[t][warp * NCOL + c];
        const float o = gdn_warp_token_step<CM, NCOL, false>(s, k, q, nullptr, v, gs[t], bs[t], all, lane);
        if (lane < NCOL) os[t][warp * NCOL + lane] = __fmul_rn(o, d.scale);
        if (t + 1 == commit && commit < n) fused_store_state<CM, NCOL>(st, s, vk, j0, row0); /* inside the window */
    }
    __syncthreads();

    /* 3. the RMS tree's lanes c0 / 4 .. of this block (32 / S lanes, 4 elements each) for token `warp` */
    constexpr int LANES = 32 / S;
    if (warp < n) {
        float acc = 0.0f;
        if (lane < LANES)
#pragma unroll
            for (int e = 0; e < CM; ++e) acc = __fmaf_rn(os[warp][4 * lane + e], os[warp][4 * lane + e], acc);
#pragma unroll
        for (int m = 1; m < LANES; m <<= 1) acc = __fadd_rn(acc, __shfl_xor_sync(GDN_FULL_MASK, acc, m));
        if (lane == 0) part[warp] = acc;
    }
    cluster.sync();
    float y[FUSED_MAX_LEN * FUSED_D / THREADS]; /* this thread's outputs i = threadIdx.x + m THREADS */
#pragma unroll
    for (int m = 0; m < FUSED_MAX_LEN * FUSED_D / THREADS; ++m) {
        const int i = threadIdx.x + m * THREADS, t = i / COLS, j = i % COLS;
        y[m] = 0.0f;
        if (t >= n) continue;
        float p[S];
#pragma unroll
        for (int q = 0; q < S; ++q) p[q] = cluster.map_shared_rank(&part[t], (unsigned)(gi * S + q))[0];
        const float rs = gdn__rms_factor(gdn_reg_tree<S>(p), D, d.eps_rms);
        y[m] = gdn__gated_out(rs, os[t][j], __ldg(d.gamma + c0 + j), gz[t][j]);
    }
    cluster.sync();

    /* every global write after the last cluster barrier, whose release would wait for them: y, the state, the
     * histories of this block's channels (their only reader was this block, before the first barrier) */
#pragma unroll
    for (int m = 0; m < FUSED_MAX_LEN * FUSED_D / THREADS; ++m) {
        const int i = threadIdx.x + m * THREADS, t = i / COLS;
        if (t < n) gdn_st_dt<DT>(d.y, (tok0 + t) * HD + (int64_t)h * D + c0 + i % COLS, y[m]);
        if (d.planes) { /* a half warp: 16 columns of one token (COLS >= 16), wholly in or out of the window */
            const float yr = gdn_layer_stored<DT>(y[m]), sum = gdn_warp_tree<1, 16>(yr);
            if (t < n) gdn_layer_put_planes(d, tok0 + t, (int64_t)h * D + c0 + i % COLS, yr, sum);
        }
    }
    if (commit == n) fused_store_state<CM, NCOL>(st, s, vk, j0, row0);
    for (int i = threadIdx.x; commit > 0 && i < mine; i += THREADS)
        gdn_layer_put_history<DT>(d, tok0, slot, fresh, channel(rho + i * CS), commit, slot);
}

template <int DT, int S>
static gdn_status fused_launch(const gdn__layer_problem *p, const gdn_layer_dev &d, const gdn_layer_seqs &sq) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)(p->group * S), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)(p->a.Hv * S), (unsigned)sq.n);
    cfg.blockDim = dim3(FUSED_D / S * 8);
    cfg.stream = (cudaStream_t)p->a.stream;
    cfg.attrs = attr;
    cfg.numAttrs = gdn_cuda_pdl_enabled() ? 2 : 1;
    return cudaLaunchKernelEx(&cfg, gdn_layer_fused_kernel<DT, S>, d, sq) == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

template <int DT>
static gdn_status fused_by_split(const gdn__layer_problem *p, const gdn_layer_dev &d, const gdn_layer_seqs &sq) {
    switch (fused_splits(p->group)) {
    case 8: return fused_launch<DT, 8>(p, d, sq);
    case 4: return fused_launch<DT, 4>(p, d, sq);
    case 2: return fused_launch<DT, 2>(p, d, sq);
    default: return fused_launch<DT, 1>(p, d, sq);
    }
}

extern "C" {

/* Dk = Dv = 128, Hv / Hk <= 8, windows of at most FUSED_MAX_LEN tokens, no checkpoints, a 16-byte aligned state,
 * grids that fit. */
int gdn__layer_cuda_fused_eligible(const gdn__layer_problem *p) {
    const gdn_layer_args *a = &p->a;
    return a->backend == GDN_BACKEND_CUDA && gdn__cuda_devices() > 0 && a->Dk == FUSED_D && a->Dv == FUSED_D &&
           fused_splits(p->group) > 0 && p->max_len <= FUSED_MAX_LEN && a->n_checkpoints == 0 && gdn_aligned16(a->state) &&
           a->Hv * fused_splits(p->group) <= 0x7fffffff;
}
/* Routed where eligible, except uniform batches of 8 or more sequences: their one-launch recurrence in cuda_staged
 * streams the states at the copy bandwidth while the fused kernel's clusters run in waves of a few blocks per SM
 * (H200, Hv 32, decode: B=8 25.2 us against 29.6, B=64 105 against 203, B=256 370 against 806; verify n=7 at B=64
 * 236 against 388: docs/PERFORMANCE.md, "The layer step"). */
int gdn__layer_cuda_fused_routed(const gdn__layer_problem *p) {
    return gdn__layer_cuda_fused_eligible(p) && !(p->a.B >= 8 && gdn__layer_uniform(p));
}

gdn_status gdn__layer_cuda_fused(const gdn__layer_problem *p) {
    const gdn_layer_dev d = gdn_layer_dev_of(p);
    gdn_status s = GDN_OK;
    for (int64_t b0 = 0; b0 < p->a.B && s == GDN_OK; b0 += GDN_LAYER_CHUNK) {
        const gdn_layer_seqs sq = gdn_layer_seqs_of(p, b0);
        switch (p->a.dtype) {
        case GDN_F16: s = fused_by_split<GDN_F16>(p, d, sq); break;
        case GDN_BF16: s = fused_by_split<GDN_BF16>(p, d, sq); break;
        default: s = fused_by_split<GDN_F32>(p, d, sq); break;
        }
    }
    return s;
}

} /* extern "C" */
