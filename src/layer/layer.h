/* Private to libgdn: the validated layer step every layer kernel receives, and the contract's stage functions
 * (docs/CONTRACT.md, "The layer step"), shared by the C and the CUDA kernels. */
#ifndef GDN_LAYER_H
#define GDN_LAYER_H

#include "gdn.h"
#include "common/gdn_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A validated gdn_layer_args, defaults resolved. Kernels trust every field. */
typedef struct gdn__layer_problem {
    gdn_layer_args a;
    int64_t C;         /* channels: 2 Hk Dk + Hv Dv */
    int64_t T;         /* tokens: cu_seqlens[B] */
    int64_t group;     /* Hv / Hk */
    int tiled;         /* a.head_map == GDN_HEADS_TILED: value head h reads q/k head h % Hk, else h / group */
    float eps_l2, eps_rms, scale;
    int64_t max_len;   /* the longest window */
    int threads;       /* CPU worker ids (>= 1) */
    int chunked;       /* args->kernel = "fastest": cuda_staged runs long windows on the chunked prefill */
} gdn__layer_problem;

/* Sequence b's window [start, start + n), slot (< 0: skipped), commit count k and fresh flag. */
static inline int64_t gdn__seq_start(const gdn__layer_problem *p, int64_t b) { return p->a.cu_seqlens[b]; }
static inline int64_t gdn__seq_len(const gdn__layer_problem *p, int64_t b) {
    return (int64_t)p->a.cu_seqlens[b + 1] - p->a.cu_seqlens[b];
}
static inline int64_t gdn__seq_slot(const gdn__layer_problem *p, int64_t b) { return p->a.slot ? p->a.slot[b] : b; }
static inline int64_t gdn__seq_commit(const gdn__layer_problem *p, int64_t b) {
    return p->a.commit ? p->a.commit[b] : gdn__seq_len(p, b);
}
static inline int gdn__seq_fresh(const gdn__layer_problem *p, int64_t b) { return p->a.fresh && p->a.fresh[b]; }

/* ---- the stages' scalar math, for C and CUDA (src/common/gdn_math.h's rules) ---- */

/* The causal conv of one channel and SiLU: the fma chain over the taps from +0, oldest first, then + bias (+0
 * without one). */
GDN_HD float gdn__conv_silu(float x0, float x1, float x2, float x3, const float *w, float bias) {
    float s = 0.0f;
    s = fmaf(x0, w[0], s);
    s = fmaf(x1, w[1], s);
    s = fmaf(x2, w[2], s);
    s = fmaf(x3, w[3], s);
    return gdn_siluf(s + bias);
}

/* The L2 norm's factor from the tree sum of squares of D elements: rsqrt(ssq / D + eps / D); an element x
 * becomes (factor x) rsqrt(D). */
GDN_HD float gdn__l2_factor(float ssq, int64_t D, float eps) {
    const float d = (float)D;
    return gdn_rsqrtf(ssq / d + eps / d);
}

/* The decay: exp(softplus(alpha + dt_bias) A). */
GDN_HD float gdn__layer_gate(float alpha, float dt_bias, float A) { return gdn_expf(gdn_softplusf(alpha + dt_bias) * A); }

/* A of a head from A_log: -exp(A_log). */
GDN_HD float gdn__layer_A(float A_log) { return -gdn_expf(A_log); }

/* The gated RMSNorm of one element: ((rs o) gamma) gate, rs = rsqrt(ssq / Dv + eps) from the tree sum, gate the
 * output gate of z (silu, or sigmoid with GDN_OUT_GATE_SIGMOID). */
GDN_HD float gdn__rms_factor(float ssq, int64_t Dv, float eps) { return gdn_rsqrtf(ssq / (float)Dv + eps); }
GDN_HD float gdn__out_gate(float z, int sigmoid_gate) { return sigmoid_gate ? gdn_sigmoidf(z) : gdn_siluf(z); }
GDN_HD float gdn__gated_out(float rs, float o, float gamma, float gate) { return ((rs * o) * gamma) * gate; }

/* The planes (docs/API.md, "Planes"), from y as stored (rounded to the dtype), column n of a token's Hv Dv: plane
 * 0, 1, 2 for codes of w = 2, 4, 8 bits packed 32 / w to a 32-bit word, lowest bits first. The code at position
 * m = n mod (32 / w) reads as (word & (2^w - 1) << w m) = code 2^(w m), so the plane holds y 2^-(w m): their
 * product is code y, exactly (a power of two, one rounding only below 2^-96). */
GDN_HD float gdn__plane(float y, int64_t n, int plane) {
    const int w = 2 << plane;
    return y * (1.0f / (float)(1u << (w * (int)(n % (32 / w)))));
}

/* A plane's per-16 sum: ((x0 + x1) + (x2 + x3)) + ..., the pairwise tree (a 16-lane butterfly's). */
static inline float gdn__sum16(const float *x) {
    float s[16];
    for (int l = 0; l < 16; ++l) s[l] = x[l];
    for (int m = 1; m < 16; m <<= 1)
        for (int l = 0; l < 16; l += 2 * m) s[l] = s[l] + s[l + m];
    return s[0];
}

/* ---- the kernel table ---- */

typedef struct gdn__layer_kernel {
    const char *name;
    gdn_backend backend;
    int (*eligible)(const gdn__layer_problem *p);
    int (*routed)(const gdn__layer_problem *p);
    gdn_status (*run)(const gdn__layer_problem *p);
} gdn__layer_kernel;

#include "layer/kernels.h"
#define GDN__LAYER_DECLARE(name, backend)                                \
    int gdn__layer_##name##_eligible(const gdn__layer_problem *p);       \
    int gdn__layer_##name##_routed(const gdn__layer_problem *p);         \
    gdn_status gdn__layer_##name(const gdn__layer_problem *p);
GDN_LAYER_KERNELS(GDN__LAYER_DECLARE)
#undef GDN__LAYER_DECLARE

/* The stages' f32 buffers, host or device memory: q, k [T, Hk, Dk], v and the readout o [T, Hv, Dv], g and
 * beta [T, Hv]. With the chunked hand-off (cuda_staged under "fastest"; else NULL): q, k, v rounded to bf16 (qh, kh,
 * vh, contiguous as q, k, v are), log g (lg, binary64 log of the f32 g, rounded) and oh, the readout of the windows
 * that gdn_delta runs on them, in bf16. */
typedef struct gdn__layer_buffers {
    float *q, *k, *v, *g, *beta, *o;
    uint16_t *qh, *kh, *vh, *oh;
    float *lg;
} gdn__layer_buffers;

/* o[0 .. n) = oh[0 .. n) as f32 (exactly), on the stream (src/layer/cuda/staged.cu). */
gdn_status gdn__layer_cuda_widen(float *o, const uint16_t *oh, int64_t n, void *stream);

/* The recurrence of every sequence with a slot through gdn_delta on the call's backend (src/layer/recurrence.c):
 * from the slot's state (zero when fresh), o for all n tokens; with a commit after k the first k tokens write the
 * state back and the rest read it. `delta_kernel`: a gdn_delta kernel name, or NULL for the router; with the
 * chunked hand-off and no name, each gdn_delta call of GDN_CHUNKED_MIN_T tokens or more per sequence runs on the
 * bf16 buffers as "fastest" and its readout is widened into o. */
gdn_status gdn__layer_recurrence(const gdn__layer_problem *p, const gdn__layer_buffers *bufs, const char *delta_kernel);
/* 1 when every sequence has a slot, none is fresh, all windows have one length and all commits are all or none of
 * it, and there are no checkpoints: then the recurrence is one batch-form gdn_delta call over the pool (on CUDA one
 * launch per 256 sequences), each sequence's bits those of its own call. */
int gdn__layer_uniform(const gdn__layer_problem *p);

/* The CPU stages (src/layer/cpu/staged.c): conv, norms and gates into f32 buffers, the recurrence through
 * gdn_delta per sequence (`delta_kernel`: a name, or NULL for the router), the gated norm, the histories. */
gdn_status gdn__layer_cpu_stages(const gdn__layer_problem *p, const char *delta_kernel);

#ifdef __cplusplus
}
#endif
#endif
