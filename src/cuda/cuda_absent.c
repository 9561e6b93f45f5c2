/* Built instead of the CUDA sources when nvcc is not found: no device, every CUDA kernel ineligible. */
#include "gdn_internal.h"

int gdn__cuda_devices(void) { return 0; }
int gdn_cuda_device_count(void) { return 0; }
int gdn__cuda_generic_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_packed_eligible(const gdn__problem *p) { return p == NULL; }
int gdn__cuda_decode_eligible(const gdn__problem *p) { return p == NULL; }
gdn_status gdn__delta_cuda_generic(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_packed(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__delta_cuda_decode(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
