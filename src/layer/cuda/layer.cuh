/* Device-side pieces of the layer step's CUDA kernels (staged.cu, fused.cu): the problem as the kernels read it,
 * a chunk of sequences passed by value (no device copy of the host arrays), the conv's taps, and the launches
 * of the stages that both kernels share. */
#ifndef GDN_LAYER_CUDA_CUH
#define GDN_LAYER_CUDA_CUH

#include "cuda/gdn_cuda.cuh"
#include "layer/layer.h"

/* Sequences per launch: their arrays travel as kernel parameters (under the 4 KiB of a launch's parameters). */
#define GDN_LAYER_CHUNK 192

struct gdn_layer_dev {
    int Hk, Hv, Dk, Dv, group, out_gate, layout;
    int tiled;         /* the head map (gdn__key_head, gdn__value_head) */
    int64_t C;
    float eps_l2, eps_rms, scale;
    const void *qkv, *z, *alpha, *beta;
    void *y;
    const float *conv_w, *conv_bias, *dt_bias, *A, *A_log, *gamma;
    float *state;
    const void *hist_in;
    void *hist_out;
    float *planes;     /* NULL: none */
    int64_t T;         /* the call's tokens (the planes' second dimension) */
};

/* Sequences b0 .. b0 + n - 1 of the call, as chunk entries 0 .. n - 1 (start: absolute tokens); dst: where the
 * history after `commit` tokens goes (the sequence's slot; a checkpoint's for the history kernel's checkpoint
 * chunks, whose start, slot and fresh are their sequence's and whose commit is their `after`). */
struct gdn_layer_seqs {
    int n, max_len;
    int32_t start[GDN_LAYER_CHUNK + 1];
    int32_t slot[GDN_LAYER_CHUNK], commit[GDN_LAYER_CHUNK], dst[GDN_LAYER_CHUNK];
    uint8_t fresh[GDN_LAYER_CHUNK];
};

static inline gdn_layer_dev gdn_layer_dev_of(const gdn__layer_problem *p) {
    const gdn_layer_args *a = &p->a;
    gdn_layer_dev d;
    d.Hk = (int)a->Hk, d.Hv = (int)a->Hv, d.Dk = (int)a->Dk, d.Dv = (int)a->Dv, d.group = (int)p->group, d.tiled = p->tiled;
    d.out_gate = (int)a->out_gate, d.layout = (int)a->state_layout, d.C = p->C;
    d.eps_l2 = p->eps_l2, d.eps_rms = p->eps_rms, d.scale = p->scale;
    d.qkv = a->qkv, d.z = a->z, d.alpha = a->alpha, d.beta = a->beta, d.y = a->y;
    d.conv_w = a->conv_w, d.conv_bias = a->conv_bias, d.dt_bias = a->dt_bias, d.A = a->A, d.A_log = a->A_log;
    d.gamma = a->gamma, d.state = a->state, d.hist_in = a->hist_in, d.hist_out = a->hist_out;
    d.planes = a->planes, d.T = p->T;
    return d;
}

/* The chunk of sequences from b0. */
static inline gdn_layer_seqs gdn_layer_seqs_of(const gdn__layer_problem *p, int64_t b0) {
    gdn_layer_seqs s;
    const int64_t n = p->a.B - b0 < GDN_LAYER_CHUNK ? p->a.B - b0 : GDN_LAYER_CHUNK;
    s.n = (int)n, s.max_len = 0;
    for (int64_t i = 0; i <= n; ++i) s.start[i] = p->a.cu_seqlens[b0 + i];
    for (int64_t i = 0; i < n; ++i) {
        s.slot[i] = (int32_t)gdn__seq_slot(p, b0 + i);
        s.commit[i] = (int32_t)gdn__seq_commit(p, b0 + i);
        s.fresh[i] = (uint8_t)gdn__seq_fresh(p, b0 + i);
        s.dst[i] = s.slot[i];
        const int len = s.start[i + 1] - s.start[i];
        if (len > s.max_len) s.max_len = len;
    }
    return s;
}

/* Input t of channel c (t relative to the window; -3 .. -1: the history, zero when fresh). */
template <int DT>
__device__ __forceinline__ float gdn_layer_tap(const gdn_layer_dev &d, int64_t tok0, int slot, bool fresh, int64_t c,
                                               int t) {
    if (t >= 0) return gdn_ld<DT>(d.qkv, (tok0 + t) * d.C + c);
    if (fresh) return 0.0f;
    return gdn_ld<DT>(d.hist_in, ((int64_t)slot * d.C + c) * 3 + 3 + t);
}

/* The conv and SiLU of channel c at token t. */
template <int DT>
__device__ __forceinline__ float gdn_layer_conv(const gdn_layer_dev &d, int64_t tok0, int slot, bool fresh, int64_t c,
                                                int t) {
    const float w[4] = {__ldg(d.conv_w + c * 4), __ldg(d.conv_w + c * 4 + 1), __ldg(d.conv_w + c * 4 + 2),
                        __ldg(d.conv_w + c * 4 + 3)};
    return gdn__conv_silu(gdn_layer_tap<DT>(d, tok0, slot, fresh, c, t - 3), gdn_layer_tap<DT>(d, tok0, slot, fresh, c, t - 2),
                          gdn_layer_tap<DT>(d, tok0, slot, fresh, c, t - 1), gdn_layer_tap<DT>(d, tok0, slot, fresh, c, t), w,
                          d.conv_bias ? __ldg(d.conv_bias + c) : 0.0f);
}

/* The decay and the beta of token row (t, h) (row = t Hv + h). */
template <int DT>
__device__ __forceinline__ float gdn_layer_decay(const gdn_layer_dev &d, int64_t row, int h) {
    const float A = d.A ? __ldg(d.A + h) : gdn__layer_A(__ldg(d.A_log + h));
    return gdn__layer_gate(gdn_ld<DT>(d.alpha, row), __ldg(d.dt_bias + h), A);
}
template <int DT>
__device__ __forceinline__ float gdn_layer_beta(const gdn_layer_dev &d, int64_t row) {
    return gdn_sigmoidf(gdn_ld<DT>(d.beta, row));
}

/* Channel c's history after the first k tokens of a window from tok0 (its old history at slot, zero when fresh)
 * into hist_out at dst: the last three inputs, oldest first. */
template <int DT>
__device__ __forceinline__ void gdn_layer_put_history(const gdn_layer_dev &d, int64_t tok0, int slot, bool fresh, int64_t c,
                                                      int k, int dst) {
    const float x0 = gdn_layer_tap<DT>(d, tok0, slot, fresh, c, k - 3);
    const float x1 = gdn_layer_tap<DT>(d, tok0, slot, fresh, c, k - 2);
    const float x2 = gdn_layer_tap<DT>(d, tok0, slot, fresh, c, k - 1);
    const int64_t at = ((int64_t)dst * d.C + c) * 3;
    gdn_st_dt<DT>(d.hist_out, at, x0);
    gdn_st_dt<DT>(d.hist_out, at + 1, x1);
    gdn_st_dt<DT>(d.hist_out, at + 2, x2);
}

/* x rounded to the dtype DT, as gdn_st_dt stores it. */
template <int DT>
__device__ __forceinline__ float gdn_layer_stored(float x) {
    if (DT == GDN_F16) return gdn__f16_to_f32(gdn__f32_to_f16(x));
    if (DT == GDN_BF16) return gdn__bf16_to_f32(gdn__f32_to_bf16(x));
    return x;
}

/* The planes of y (as stored) at token row tok, column n of N = Hv Dv; the group's sum s by its column n % 16 == 0. */
__device__ __forceinline__ void gdn_layer_put_planes(const gdn_layer_dev &d, int64_t tok, int64_t n, float y, float s) {
    const int64_t N = (int64_t)d.Hv * d.Dv;
#pragma unroll
    for (int pl = 0; pl < 3; ++pl) __stcs(d.planes + (pl * d.T + tok) * N + n, gdn__plane(y, n, pl));
    if (n % 16 == 0) __stcs(d.planes + 3 * d.T * N + tok * (N / 16) + n / 16, s);
}

/* The chunk of checkpoints from i0, as history entries (their sequence's window, slot and fresh flag; commit =
 * after, dst = the checkpoint's slot). */
static inline gdn_layer_seqs gdn_layer_checkpoints_of(const gdn__layer_problem *p, int64_t i0) {
    gdn_layer_seqs s;
    const int64_t n = p->a.n_checkpoints - i0 < GDN_LAYER_CHUNK ? p->a.n_checkpoints - i0 : GDN_LAYER_CHUNK;
    s.n = (int)n, s.max_len = 0;
    for (int64_t i = 0; i < n; ++i) {
        const gdn_layer_checkpoint *c = &p->a.checkpoints[i0 + i];
        s.start[i] = p->a.cu_seqlens[c->seq];
        s.slot[i] = (int32_t)gdn__seq_slot(p, c->seq);
        s.commit[i] = c->after;
        s.dst[i] = c->slot;
        s.fresh[i] = (uint8_t)gdn__seq_fresh(p, c->seq);
    }
    s.start[n] = 0; /* unused: an entry's window ends at start + commit */
    return s;
}

extern "C" {
/* The histories of the checkpoints, then of the committing sequences, after every kernel that reads hist_in
 * (staged.cu). */
gdn_status gdn__layer_cuda_histories(const gdn__layer_problem *p);
}

#endif
