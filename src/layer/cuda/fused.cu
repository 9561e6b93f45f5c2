/* cuda_fused: the layer step for short windows in one kernel (the histories in a second, tiny one), the second
 * seed's plan on the contract's arithmetic. A block per (value head h, sequence), 16 warps; Dk = Dv = D = 32 CM
 * (CM = 1, 2, 4); warp w holds the state columns j0 = w NCOL .. j0 + NCOL - 1 (NCOL = 2 CM), lane l their keys
 * l CM .. l CM + CM - 1, in registers for the whole window. Per token:
 *   A  warp 0: q of key head h / group, conv + SiLU of its lane chunk, L2 norm from the warp's butterfly;
 *      warp 1: k the same; warp 2: v's conv + SiLU; warp 3, lane 0: the gate and beta; warp 4: the gated
 *      RMSNorm of the previous token's readout (its z loaded a token ahead)
 *   -- barrier --
 *   B  every warp: the recurrence step of its columns (gdn_warp_token_step), the readout times scale to shared
 *      memory (two buffers, so that A's norm of token t reads while B of t + 1 writes)
 *   -- barrier --
 * The state is written back after the commit's k-th token, in place (the block owns its slot's head). */
#include "layer/cuda/layer.cuh"

#define FUSED_WARPS 16
#define FUSED_MAX_LEN 64 /* the longest window it takes; longer ones are cuda_staged's */

template <int DT, int CM>
__global__ void __launch_bounds__(32 * FUSED_WARPS) gdn_layer_fused_kernel(gdn_layer_dev d, gdn_layer_seqs sq) {
    constexpr int D = 32 * CM, NCOL = 2 * CM;
    __shared__ __align__(16) float qs[D], ks[D], vs[D], os[2][D];
    __shared__ float gb[2];
    const int h = blockIdx.x, b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int hk = h / d.group, slot = sq.slot[b], n = sq.start[b + 1] - sq.start[b], commit = sq.commit[b];
    const bool fresh = sq.fresh[b];
    const int64_t tok0 = sq.start[b], HD = (int64_t)d.Hv * D;
    if (slot < 0) {
        for (int64_t i = threadIdx.x; i < (int64_t)n * D; i += blockDim.x)
            gdn_st_dt<DT>(d.y, (tok0 + i / D) * HD + (int64_t)h * D + i % D, 0.0f);
        return;
    }
    const int j0 = warp * NCOL, row0 = lane * CM;
    float *st = d.state + ((int64_t)slot * d.Hv + h) * D * D;
    const bool vk = d.layout == GDN_STATE_VK;
    float s[NCOL][CM];
#pragma unroll
    for (int c = 0; c < NCOL; ++c)
#pragma unroll
        for (int e = 0; e < CM; ++e) s[c][e] = fresh ? 0.0f : st[vk ? (j0 + c) * D + row0 + e : (row0 + e) * D + j0 + c];

    /* the phase-A roles: warps 0, 1 convolve q, k channels c0 + row0 ..; warp 2 v's */
    const int64_t c0 = warp == 0 ? (int64_t)hk * D : warp == 1 ? (int64_t)(d.Hk + hk) * D : 2 * (int64_t)d.Hk * D + (int64_t)h * D;
    const float inv = gdn_rsqrtf((float)D), scale = d.scale;
    float z_next[CM], z_cur[CM], gam[CM];
    if (warp == 4)
#pragma unroll
        for (int e = 0; e < CM; ++e) gam[e] = __ldg(d.gamma + row0 + e), z_next[e] = gdn_ld<DT>(d.z, tok0 * HD + (int64_t)h * D + row0 + e);
    bool all[CM]; /* every key of the lane's chunk is in range */
#pragma unroll
    for (int e = 0; e < CM; ++e) all[e] = true;

    /* warp 4: the gated RMSNorm of token t's readout in os[t & 1] */
    auto norm_out = [&](int t) {
        float o[CM], acc = 0.0f;
#pragma unroll
        for (int e = 0; e < CM; ++e) o[e] = os[t & 1][row0 + e], acc = __fmaf_rn(o[e], o[e], acc);
        const float rs = gdn__rms_factor(gdn_warp_tree<1>(acc), D, d.eps_rms);
        const int64_t y0 = (tok0 + t) * HD + (int64_t)h * D + row0;
#pragma unroll
        for (int e = 0; e < CM; ++e) gdn_st_dt<DT>(d.y, y0 + e, gdn__gated_out(rs, o[e], gam[e], z_cur[e], d.out_gate));
    };

    for (int t = 0; t < n; ++t) {
        if (warp < 2) {
            float x[CM], acc = 0.0f;
#pragma unroll
            for (int e = 0; e < CM; ++e) x[e] = gdn_layer_conv<DT>(d, tok0, slot, fresh, c0 + row0 + e, t), acc = __fmaf_rn(x[e], x[e], acc);
            const float f = gdn__l2_factor(gdn_warp_tree<1>(acc), D, d.eps_l2);
            float *dst = warp == 0 ? qs : ks;
#pragma unroll
            for (int e = 0; e < CM; ++e) dst[row0 + e] = __fmul_rn(__fmul_rn(f, x[e]), inv);
        } else if (warp == 2) {
#pragma unroll
            for (int e = 0; e < CM; ++e) vs[row0 + e] = gdn_layer_conv<DT>(d, tok0, slot, fresh, c0 + row0 + e, t);
        } else if (warp == 3 && lane == 0) {
            gdn_layer_gate_beta<DT>(d, (tok0 + t) * d.Hv + h, h, &gb[0], &gb[1]);
        } else if (warp == 4) {
            if (t > 0) norm_out(t - 1);
#pragma unroll
            for (int e = 0; e < CM; ++e) {
                z_cur[e] = z_next[e];
                if (t + 1 < n) z_next[e] = gdn_ld<DT>(d.z, (tok0 + t + 1) * HD + (int64_t)h * D + row0 + e);
            }
        }
        __syncthreads();
        float k[CM], q[CM], v[NCOL];
#pragma unroll
        for (int e = 0; e < CM; ++e) k[e] = ks[row0 + e], q[e] = qs[row0 + e];
#pragma unroll
        for (int c = 0; c < NCOL; ++c) v[c] = vs[j0 + c];
        const float o = gdn_warp_token_step<CM, NCOL, false>(s, k, q, nullptr, v, gb[0], gb[1], all, lane);
        if (lane < NCOL) os[t & 1][j0 + lane] = __fmul_rn(o, scale);
        if (t + 1 == commit)
#pragma unroll
            for (int c = 0; c < NCOL; ++c)
#pragma unroll
                for (int e = 0; e < CM; ++e) st[vk ? (j0 + c) * D + row0 + e : (row0 + e) * D + j0 + c] = s[c][e];
        __syncthreads();
    }
    if (warp == 4) norm_out(n - 1);
}

extern "C" {

/* D = Dk = Dv in {32, 64, 128}, windows of at most FUSED_MAX_LEN tokens, grids that fit. */
int gdn__layer_cuda_fused_eligible(const gdn__layer_problem *p) {
    const gdn_layer_args *a = &p->a;
    const int d_ok = a->Dk == a->Dv && (a->Dk == 32 || a->Dk == 64 || a->Dk == 128);
    return a->backend == GDN_BACKEND_CUDA && gdn__cuda_devices() > 0 && d_ok && p->max_len <= FUSED_MAX_LEN &&
           a->Hv <= 0x7fffffff && (p->C + 127) / 128 <= 0x7fffffff;
}
int gdn__layer_cuda_fused_routed(const gdn__layer_problem *p) { return gdn__layer_cuda_fused_eligible(p); }

gdn_status gdn__layer_cuda_fused(const gdn__layer_problem *p) {
    const gdn_layer_dev d = gdn_layer_dev_of(p);
    gdn_status s = GDN_OK;
    for (int64_t b0 = 0; b0 < p->a.B && s == GDN_OK; b0 += GDN_LAYER_CHUNK) {
        const gdn_layer_seqs sq = gdn_layer_seqs_of(p, b0);
        const dim3 grid((unsigned)p->a.Hv, (unsigned)sq.n);
        auto launch = [&](auto kernel) {
            kernel<<<grid, 32 * FUSED_WARPS, 0, (cudaStream_t)p->a.stream>>>(d, sq);
            return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        };
        auto by_d = [&](auto dt) {
            switch (p->a.Dk) {
            case 32: return launch(gdn_layer_fused_kernel<dt.value, 1>);
            case 64: return launch(gdn_layer_fused_kernel<dt.value, 2>);
            default: return launch(gdn_layer_fused_kernel<dt.value, 4>);
            }
        };
        switch (p->a.dtype) {
        case GDN_F16: s = by_d(std::integral_constant<int, GDN_F16>()); break;
        case GDN_BF16: s = by_d(std::integral_constant<int, GDN_BF16>()); break;
        default: s = by_d(std::integral_constant<int, GDN_F32>()); break;
        }
        if (s == GDN_OK) s = gdn__layer_cuda_histories(p, &sq);
    }
    return s;
}

} /* extern "C" */
