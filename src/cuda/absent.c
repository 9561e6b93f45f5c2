/* Built instead of the CUDA sources when nvcc is not found: no device, every CUDA kernel ineligible. */
#include "gdn_internal.h"

int gdn__cuda_devices(void) { return 0; }
gdn_status gdn__cuda_check_pointers(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
int gdn__cuda_generic_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_packed_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_decode_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_decode_routed(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_rowsplit_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_window_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_window_routed(const gdn__problem *p) { return p == NULL; }
gdn_status gdn__delta_cuda_generic(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_packed(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_decode(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_rowsplit(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_window(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_rowsplit_variant(const gdn__problem *p, int variant) {
    return p && variant >= 0 ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER;
}
gdn_status gdn__delta_cuda_packed_variant(const gdn__problem *p, int variant) {
    return p && variant >= 0 ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER;
}
gdn_status gdn__delta_cuda_decode_ncol(const gdn__problem *p, int ncol) {
    return p && ncol >= 0 ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER;
}
gdn_status gdn__cuda_run_variant(const gdn_delta_args *args, const char *kernel, int variant) {
    gdn__problem p;
    gdn_status s = gdn__validate(args, &p);
    if (s != GDN_OK) return s;
    return kernel && variant >= 0 ? GDN_ERR_NO_DEVICE : GDN_ERR_INELIGIBLE;
}
