/* cuda_staged: the layer step on the GPU as its stages, for any shape and window (src/layer/cpu/staged.c's plan):
 *   prologue   a warp per (head of q, k or v; 8 tokens; sequence): lane l convolves its contract chunk of the
 *              head's channels (ceil(D/32) from l ceil(D/32)), the L2 norm's sum is the warp's butterfly; the v
 *              warps also the gate and beta. Into f32 buffers (stream-ordered allocation).
 *   recurrence gdn_delta per sequence (src/layer/recurrence.c): cuda_window and the rest of the router.
 *   epilogue   a warp per (value head; 8 tokens; sequence): the gated RMSNorm, its sum the warp's butterfly.
 *   planes     when asked for, a thread per column of y (as stored), its half warp's butterfly the per-16 sum.
 *   histories  a thread per (channel, checkpoint), then per (channel, sequence) of the committing sequences,
 *              after everything that reads hist_in, so hist_out may be hist_in. */
#include "core/checked.h"
#include "layer/cuda/layer.cuh"

#define LAYER_WARPS 4       /* warps per block of the prologue and the epilogue */
#define LAYER_TOKENS 8      /* tokens per warp */

/* grid: x head (2 Hk + Hv), y token groups of LAYER_WARPS * LAYER_TOKENS, z sequence of the chunk */
template <int DT>
__global__ void __launch_bounds__(32 * LAYER_WARPS) gdn_layer_prologue(gdn_layer_dev d, gdn_layer_seqs sq, gdn__layer_buffers w) {
    const int head = blockIdx.x, b = blockIdx.z, lane = threadIdx.x & 31;
    const int t0 = (blockIdx.y * LAYER_WARPS + threadIdx.x / 32) * LAYER_TOKENS;
    const int64_t tok0 = sq.start[b];
    const int n = sq.start[b + 1] - sq.start[b], slot = sq.slot[b];
    const bool fresh = sq.fresh[b];
    if (slot < 0 || t0 >= n) return;
    const bool qk = head < 2 * d.Hk;
    const int h = qk ? head % d.Hk : head - 2 * d.Hk, D = qk ? d.Dk : d.Dv, c = (D + 31) / 32;
    const int64_t c0 = qk ? (int64_t)(head >= d.Hk) * d.Hk * d.Dk + (int64_t)h * d.Dk : 2 * (int64_t)d.Hk * d.Dk + (int64_t)h * d.Dv;
    const int e0 = lane * c, e1 = e0 + c < D ? e0 + c : D;
    const float inv = gdn_rsqrtf((float)d.Dk);
    for (int t = t0; t < n && t < t0 + LAYER_TOKENS; ++t) {
        const int64_t tok = tok0 + t;
        float *x = qk ? (head >= d.Hk ? w.k : w.q) + (tok * d.Hk + h) * d.Dk : w.v + (tok * d.Hv + h) * d.Dv;
        float acc = 0.0f;
        for (int e = e0; e < e1; ++e) {
            const float v = gdn_layer_conv<DT>(d, tok0, slot, fresh, c0 + e, t);
            x[e] = v;
            acc = __fmaf_rn(v, v, acc);
        }
        if (qk) {
            const float f = gdn__l2_factor(gdn_warp_tree<1>(acc), d.Dk, d.eps_l2);
            for (int e = e0; e < e1; ++e) x[e] = __fmul_rn(__fmul_rn(f, x[e]), inv);
        } else if (lane == 0) {
            w.g[tok * d.Hv + h] = gdn_layer_decay<DT>(d, tok * d.Hv + h, h);
            w.beta[tok * d.Hv + h] = gdn_layer_beta<DT>(d, tok * d.Hv + h);
        }
    }
}

/* grid: x value head, y token groups, z sequence of the chunk */
template <int DT>
__global__ void __launch_bounds__(32 * LAYER_WARPS) gdn_layer_epilogue(gdn_layer_dev d, gdn_layer_seqs sq, const float *o) {
    const int h = blockIdx.x, b = blockIdx.z, lane = threadIdx.x & 31;
    const int t0 = (blockIdx.y * LAYER_WARPS + threadIdx.x / 32) * LAYER_TOKENS;
    const int n = sq.start[b + 1] - sq.start[b], c = (d.Dv + 31) / 32, e0 = lane * c, e1 = e0 + c < d.Dv ? e0 + c : d.Dv;
    for (int t = t0; t < n && t < t0 + LAYER_TOKENS; ++t) {
        const int64_t row = ((int64_t)sq.start[b] + t) * d.Hv + h;
        if (sq.slot[b] < 0) {
            for (int e = e0; e < e1; ++e) gdn_st_dt<DT>(d.y, row * d.Dv + e, 0.0f);
            continue;
        }
        const float *x = o + row * d.Dv;
        float acc = 0.0f;
        for (int e = e0; e < e1; ++e) acc = __fmaf_rn(x[e], x[e], acc);
        const float rs = gdn__rms_factor(gdn_warp_tree<1>(acc), d.Dv, d.eps_rms);
        for (int e = e0; e < e1; ++e) {
            const float gate = gdn__out_gate(gdn_ld<DT>(d.z, row * d.Dv + e), d.out_gate);
            gdn_st_dt<DT>(d.y, row * d.Dv + e, gdn__gated_out(rs, x[e], __ldg(d.gamma + e), gate));
        }
    }
}

/* grid: x blocks of 128 of the T N planes' columns (N = Hv Dv, a multiple of 16): y as stored, its planes */
template <int DT>
__global__ void __launch_bounds__(128) gdn_layer_planes(gdn_layer_dev d) {
    const int64_t N = (int64_t)d.Hv * d.Dv, i = (int64_t)blockIdx.x * 128 + threadIdx.x, tok = i / N;
    const float y = tok < d.T ? gdn_ld<DT>(d.y, i) : 0.0f;
    const float s = gdn_warp_tree<1, 16>(y); /* gdn__sum16's tree; a half warp is wholly in or out */
    if (tok < d.T) gdn_layer_put_planes(d, tok, i % N, y, s);
}

/* grid: x channel blocks of 128, y sequence of the chunk */
template <int DT>
__global__ void __launch_bounds__(128) gdn_layer_history(gdn_layer_dev d, gdn_layer_seqs sq) {
    gdn_grid_dependency_wait();
    const int b = blockIdx.y, slot = sq.slot[b], k = sq.commit[b];
    const int64_t c = (int64_t)blockIdx.x * 128 + threadIdx.x;
    if (slot < 0 || k == 0 || c >= d.C) return;
    gdn_layer_put_history<DT>(d, sq.start[b], slot, sq.fresh[b], c, k, sq.dst[b]);
}

/* The chunked hand-off (layer.h, gdn__layer_buffers): x [n] f32 into bf16 (round to nearest even), and log g of g [m]
 * in binary64, rounded (g = 0: -inf). Grid-stride. */
__global__ void __launch_bounds__(256) gdn_layer_narrow(const float *x, uint16_t *xh, int64_t n, const float *g,
                                                        float *lg, int64_t m) {
    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256) {
        xh[i] = gdn__f32_to_bf16(x[i]);
        if (i < m) lg[i] = (float)log((double)g[i]);
    }
}

/* o = oh as f32. Grid-stride. */
__global__ void __launch_bounds__(256) gdn_layer_widen(float *o, const uint16_t *oh, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256)
        o[i] = gdn__bf16_to_f32(oh[i]);
}

static unsigned stride_blocks(int64_t n) { return (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096); }

/* f(integral_constant<int, dtype>) for the problem's dtype */
template <typename F>
static gdn_status layer_dtype(const gdn__layer_problem *p, F &&f) {
    switch (p->a.dtype) {
    case GDN_F16: return f(std::integral_constant<int, GDN_F16>());
    case GDN_BF16: return f(std::integral_constant<int, GDN_BF16>());
    default: return f(std::integral_constant<int, GDN_F32>());
    }
}

static int64_t plane_blocks(const gdn__layer_problem *p) { return (p->T * p->a.Hv * p->a.Dv + 127) / 128; }

static int token_groups(int max_len) { return (max_len + LAYER_WARPS * LAYER_TOKENS - 1) / (LAYER_WARPS * LAYER_TOKENS); }

extern "C" {

gdn_status gdn__layer_cuda_widen(float *o, const uint16_t *oh, int64_t n, void *stream) {
    if (n <= 0) return GDN_OK;
    gdn_layer_widen<<<stride_blocks(n), 256, 0, (cudaStream_t)stream>>>(o, oh, n);
    return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

gdn_status gdn__layer_cuda_histories(const gdn__layer_problem *p) {
    const gdn_layer_dev d = gdn_layer_dev_of(p);
    gdn_status s = GDN_OK;
    auto launch = [&](const gdn_layer_seqs &sq) {
        const dim3 grid((unsigned)((p->C + 127) / 128), (unsigned)sq.n);
        return layer_dtype(p, [&](auto dt) { return gdn_launch_pdl(gdn_layer_history<dt.value>, grid, 128, 0, p->a.stream, d, sq); });
    };
    for (int64_t i0 = 0; i0 < p->a.n_checkpoints && s == GDN_OK; i0 += GDN_LAYER_CHUNK) s = launch(gdn_layer_checkpoints_of(p, i0));
    for (int64_t b0 = 0; b0 < p->a.B && s == GDN_OK; b0 += GDN_LAYER_CHUNK) s = launch(gdn_layer_seqs_of(p, b0));
    return s;
}

/* Any shape whose grids fit (channel blocks, token groups under 65536). */
int gdn__layer_cuda_staged_eligible(const gdn__layer_problem *p) {
    return p->a.backend == GDN_BACKEND_CUDA && gdn__cuda_devices() > 0 && (p->C + 127) / 128 <= 0x7fffffff &&
           token_groups((int)p->max_len) <= 65535 && 2 * p->a.Hk + p->a.Hv <= 0x7fffffff &&
           (!p->a.planes || plane_blocks(p) <= 0x7fffffff);
}
int gdn__layer_cuda_staged_routed(const gdn__layer_problem *p) { return gdn__layer_cuda_staged_eligible(p); }

gdn_status gdn__layer_cuda_staged(const gdn__layer_problem *p) {
    const gdn_layer_args *a = &p->a;
    cudaStream_t stream = (cudaStream_t)a->stream;
    const int64_t T = p->T, qk = T * a->Hk * a->Dk, vv = T * a->Hv * a->Dv, gb = T * a->Hv;
    /* 2 (qk + vv + gb) floats, and 4 (qk + vv + gb) bytes for the hand-off: sizes that cannot be counted cannot be had */
    int64_t floats = 0, buf_bytes = 0, hand_bytes = 0;
    if (!gdn__size_add(qk, vv, &floats) || !gdn__size_add(floats, gb, &floats) ||
        !gdn__size_mul(floats, 2 * (int64_t)sizeof(float), &buf_bytes) || !gdn__size_mul(floats, 4, &hand_bytes) ||
        !gdn__size_fits(buf_bytes))
        return GDN_ERR_OUT_OF_MEMORY;
    float *buf = NULL;
    if (gdn__cuda_alloc((void **)&buf, buf_bytes, stream) != GDN_OK) return GDN_ERR_OUT_OF_MEMORY;
    gdn__layer_buffers w = {buf, buf + qk, buf + 2 * qk, buf + 2 * qk + 2 * vv, buf + 2 * qk + 2 * vv + gb, buf + 2 * qk + vv,
                            NULL, NULL, NULL, NULL, NULL};
    /* "fastest" with a window the chunked prefill would take: the hand-off's buffers (cuda_chunked's shapes) */
    uint16_t *hand = NULL;
    if (p->chunked && p->max_len >= GDN_CHUNKED_MIN_T && a->Dk == 128 && a->Dv % 32 == 0) {
        if (gdn__cuda_alloc((void **)&hand, hand_bytes, stream) != GDN_OK) { /* bf16 q, k, v, o; f32 lg */
            (void)gdn__cuda_free(buf, stream);
            return GDN_ERR_OUT_OF_MEMORY;
        }
        w.qh = hand, w.kh = hand + qk, w.vh = hand + 2 * qk, w.oh = hand + 2 * qk + vv;
        w.lg = (float *)(hand + 2 * qk + 2 * vv);
    }
    const gdn_layer_dev d = gdn_layer_dev_of(p);
    gdn_status s = GDN_OK;
    for (int64_t b0 = 0; b0 < a->B && s == GDN_OK; b0 += GDN_LAYER_CHUNK) {
        const gdn_layer_seqs sq = gdn_layer_seqs_of(p, b0);
        const dim3 grid((unsigned)(2 * a->Hk + a->Hv), (unsigned)token_groups(sq.max_len), (unsigned)sq.n);
        s = layer_dtype(p, [&](auto dt) {
            gdn_layer_prologue<dt.value><<<grid, 32 * LAYER_WARPS, 0, stream>>>(d, sq, w);
            return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        });
    }
    if (s == GDN_OK && hand) {
        gdn_layer_narrow<<<stride_blocks(2 * qk + vv), 256, 0, stream>>>(w.q, w.qh, 2 * qk + vv, w.g, w.lg, gb);
        s = cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
    }
    if (s == GDN_OK) s = gdn__layer_recurrence(p, &w, NULL);
    for (int64_t b0 = 0; b0 < a->B && s == GDN_OK; b0 += GDN_LAYER_CHUNK) {
        const gdn_layer_seqs sq = gdn_layer_seqs_of(p, b0);
        const dim3 grid((unsigned)a->Hv, (unsigned)token_groups(sq.max_len), (unsigned)sq.n);
        s = layer_dtype(p, [&](auto dt) {
            gdn_layer_epilogue<dt.value><<<grid, 32 * LAYER_WARPS, 0, stream>>>(d, sq, w.o);
            return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        });
    }
    if (s == GDN_OK && a->planes)
        s = layer_dtype(p, [&](auto dt) {
            gdn_layer_planes<dt.value><<<(unsigned)plane_blocks(p), 128, 0, stream>>>(d);
            return cudaGetLastError() == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
        });
    if (s == GDN_OK) s = gdn__layer_cuda_histories(p);
    const gdn_status freed = gdn__cuda_free(buf, stream), freed_hand = gdn__cuda_free(hand, stream);
    return s != GDN_OK ? s : freed != GDN_OK ? freed : freed_hand;
}

} /* extern "C" */
