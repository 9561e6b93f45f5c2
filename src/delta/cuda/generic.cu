/* cuda_generic: the warp kernel (warp.cuh) with one column per warp, for any Dk <= 1024 and any Dv, scalar loads. */
#include "delta/cuda/warp.cuh"

template <int DT, bool VEC>
static gdn_status gdn_generic_cm(const gdn__problem *p) {
    const int64_t c = p->dk_lane;
    if (c <= 1) return gdn_launch_warp<DT, VEC, 1, 1, false>(p);
    if (c <= 2) return gdn_launch_warp<DT, VEC, 2, 1, false>(p);
    if (c <= 4) return gdn_launch_warp<DT, VEC, 4, 1, false>(p);
    if (c <= 8) return gdn_launch_warp<DT, VEC, 8, 1, false>(p);
    if (c <= 16) return gdn_launch_warp<DT, VEC, 16, 1, false>(p);
    return gdn_launch_warp<DT, VEC, 32, 1, false>(p);
}

extern "C" {

int gdn__delta_cuda_generic_eligible(const gdn__problem *p) {
    if (p->a.state_slot_device) return 0; /* slots on the device: the window and streamed decode kernels */
    return gdn__cuda_devices() > 0 && p->a.Dk <= 1024 && gdn_warp_grid_fits(p);
}

int gdn__delta_cuda_generic_routed(const gdn__problem *p) { return gdn__delta_cuda_generic_eligible(p); }

const gdn__variant gdn__delta_cuda_generic_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

gdn_status gdn__delta_cuda_generic(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    if (!gdn__delta_cuda_generic_eligible(p)) return GDN_ERR_INELIGIBLE;
    return gdn_dispatch_dtype_gate(p, [&](auto dt, auto vec) { return gdn_generic_cm<dt.value, vec.value>(p); });
}

} /* extern "C" */
