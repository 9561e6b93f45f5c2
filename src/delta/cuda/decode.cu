/* cuda_decode: a few tokens (T <= 4; up to 8 through the streamed kernel of decode_stream.cu), Dk a power of two from
 * 32 to 256, Dv % 8 == 0. One VK token over few items: the warp kernel (warp.cuh) with 2 columns per warp, straight
 * into registers; else the streamed kernel where it applies; else the warp kernel with 8 columns per warp
 * (4 at Dk = 256). */
#include "delta/cuda/decode_stream.cuh"
#include "delta/cuda/warp.cuh"

#define GDN_DECODE_TMAX 4

template <int DT, bool VEC>
static gdn_status gdn_decode_cm(const gdn__problem *p, int ncol) {
    switch (p->a.Dk) {
    case 32: return gdn_launch_warp<DT, VEC, 1, 8, true>(p);
    case 64: return gdn_launch_warp<DT, VEC, 2, 8, true>(p);
    case 128:
        if (ncol == 1) return gdn_launch_warp<DT, VEC, 4, 1, true>(p);
        if (ncol == 2) return gdn_launch_warp<DT, VEC, 4, 2, true>(p);
        return ncol == 4 ? gdn_launch_warp<DT, VEC, 4, 4, true>(p) : gdn_launch_warp<DT, VEC, 4, 8, true>(p);
    default: return gdn_launch_warp<DT, VEC, 8, 4, true>(p);
    }
}

/* the warp decode with ncol columns per warp, for the problem's dtype and gate */
static gdn_status gdn_decode_dt(const gdn__problem *p, int ncol) {
    return gdn_dispatch_dtype_gate(p, [&](auto dt, auto vec) { return gdn_decode_cm<dt.value, vec.value>(p, ncol); });
}

extern "C" {

/* Dk a power of two from 32 to 256, whole groups of 8 columns, every tensor 16-byte aligned, a few tokens. */
static int gdn_decode_shape_ok(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int dk_ok = a->Dk == 32 || a->Dk == 64 || a->Dk == 128 || a->Dk == 256;
    const int aligned = gdn_aligned16(a->q) && gdn_aligned16(a->k) && gdn_aligned16(a->state_in) &&
                        gdn_aligned16(a->state_out);
    return gdn__cuda_devices() > 0 && dk_ok && a->Dv % 8 == 0 && aligned && gdn_warp_grid_fits(p) && !a->state_slot_device;
}

/* T <= 4, or windows up to 8 tokens where the streamed kernel takes them. */
int gdn__delta_cuda_decode_eligible(const gdn__problem *p) {
    if (p->a.T <= GDN_DECODE_TMAX && gdn_decode_shape_ok(p)) return 1;
    return gdn__cuda_decode_stream_eligible(p); /* also the one with slots on the device */
}

/* Routed where eligible, except KV windows of more than 4 tokens over no more 32-column items than SMs, which rowsplit
 * takes (H200, B=1, T=7, KV: rowsplit 5.7 us, streamed 6.5; cuda_window comes first where it applies). With more items
 * the streamed kernel wins in KV too (B=8, T=7: 23.8 against rowsplit's 27.5 us): docs/kernels/cuda_decode.md. */
int gdn__delta_cuda_decode_routed(const gdn__problem *p) {
    if (!gdn__delta_cuda_decode_eligible(p)) return 0;
    return p->a.T <= GDN_DECODE_TMAX || p->a.state_layout == GDN_STATE_VK || !gdn_cuda_items32_in_one_wave(p);
}

/* One VK token with no more 32-column items than SMs (B=1 at the model's heads): warps of 2 columns (Dk = 128)
 * loading straight into registers, 3.0 us on the H200 against 3.9 for the streamed kernel, whose one item per block
 * has nothing to overlap (docs/kernels/cuda_decode.md). Else the streamed kernel where it applies, else warps of 8 columns. */
static int gdn_decode_few_items(const gdn__problem *p) {
    return p->a.T == 1 && p->a.state_layout == GDN_STATE_VK && gdn_cuda_items32_in_one_wave(p) && !p->a.state_slot_device;
}

/* cols: the warp kernel with that many columns per warp (1, 2, 4 at Dk = 128 only; 8), or 32: the streamed kernel,
 * with `stages` (0: its default), `blocks` (a grid cap: every block walks many items) and `mode` */
const gdn__variant gdn__delta_cuda_decode_variants[] = {
    {"warp1", 0, 1, 0, 0, 0, 0, 0},          {"warp2", 0, 2, 0, 0, 0, 0, 0},
    {"warp4", 0, 4, 0, 0, 0, 0, 0},          {"warp8", 0, 8, 0, 0, 0, 0, 0},
    {"stream", 0, 32, 0, 0, 0, 0, 0},        {"stream_stages2", 0, 32, 0, 2, 0, 0, 0},
    {"stream_stages3", 0, 32, 0, 3, 0, 0, 0}, {"stream_stages4", 0, 32, 0, 4, 0, 0, 0},
    {"stream_blocks8", 0, 32, 0, 0, 8, 0, 0},
    {"stream_sync", 0, 32, 0, 0, 0, GDN__DECODE_SYNC, 0}, {"stream_ws", 0, 32, 0, 0, 0, GDN__DECODE_WS, 0},
#if GDN_TESTING
    {"stream_ws_pauses", 0, 32, 0, 0, 8, GDN__DECODE_WS_PAUSES, 0}, /* tests only: the hand-offs under stress */
#endif
    {NULL, 0, 0, 0, 0, 0, 0, 0}};

gdn_status gdn__delta_cuda_decode(const gdn__problem *p, const gdn__variant *v) {
    if (!gdn__delta_cuda_decode_eligible(p)) return GDN_ERR_INELIGIBLE;
    if (!v) {
        if (gdn_decode_few_items(p)) return gdn_decode_dt(p, 2);
        if (gdn__cuda_decode_stream_eligible(p)) return gdn__cuda_decode_stream(p, 0, 0, GDN__DECODE_AUTO);
        return gdn_decode_dt(p, 8);
    }
    if (v->cols == 32) return gdn__cuda_decode_stream(p, v->stages, v->blocks, v->mode);
    if (!gdn_decode_shape_ok(p) || (p->a.Dk != 128 && v->cols != 8)) return GDN_ERR_INELIGIBLE;
    return gdn_decode_dt(p, v->cols);
}

} /* extern "C" */
