/* The CUDA backend's device query, and the bench hook that runs one named kernel variant. */
#include <string.h>

#include "cuda/gdn_cuda.cuh"

extern "C" {

/* Number of CUDA devices, asked once (0 when the driver is missing or reports none). */
int gdn__cuda_devices(void) {
    static int count = -1;
    if (count < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            n = 0;
            cudaGetLastError(); /* clear the error so that later calls start clean */
        }
        count = n;
    }
    return count;
}

int gdn_cuda_device_count(void) { return gdn__cuda_devices(); }

gdn_status gdn__cuda_run_variant(const gdn_delta_args *args, const char *kernel, int variant) {
    gdn__problem p;
    gdn_status s = gdn__validate(args, &p);
    if (s != GDN_OK) return s;
    if (!kernel || p.a.backend != GDN_BACKEND_CUDA) return GDN_ERR_INELIGIBLE;
    if (gdn__cuda_devices() == 0) return GDN_ERR_NO_DEVICE;
    if (strcmp(kernel, "cuda_packed") == 0) return gdn__delta_cuda_packed_variant(&p, variant);
    if (strcmp(kernel, "cuda_decode") == 0) return gdn__delta_cuda_decode_ncol(&p, variant);
    if (strcmp(kernel, "cuda_rowsplit") == 0) return gdn__delta_cuda_rowsplit_variant(&p, variant);
    if (strcmp(kernel, "cuda_window") == 0)
        return variant == 0 && gdn__cuda_window_eligible(&p) ? gdn__delta_cuda_window(&p) : GDN_ERR_INELIGIBLE;
    if (strcmp(kernel, "cuda_generic") == 0)
        return gdn__cuda_generic_eligible(&p) ? gdn__delta_cuda_generic(&p) : GDN_ERR_INELIGIBLE;
    return GDN_ERR_UNKNOWN_KERNEL;
}

} /* extern "C" */
