/* The library-wide public calls: status text, the last error's detail, device counts, the kernel table. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gdn_internal.h"

const char *gdn_status_str(gdn_status status) {
    switch (status) {
    case GDN_OK: return "success";
    case GDN_ERR_NULL_POINTER: return "a required pointer argument is NULL";
    case GDN_ERR_BAD_SIZE: return "a size is zero or negative, or a tensor is too large to address";
    case GDN_ERR_HEAD_RATIO: return "Hv is not a multiple of Hk";
    case GDN_ERR_BAD_ENUM: return "an enum argument holds an unknown value";
    case GDN_ERR_OVERLAP: return "an output buffer overlaps an input or another output";
    case GDN_ERR_UNKNOWN_KERNEL: return "no kernel has the requested name";
    case GDN_ERR_INELIGIBLE: return "the requested kernel cannot run these arguments on this machine";
    case GDN_ERR_NO_DEVICE: return "no CUDA device is available (or the library was built without CUDA)";
    case GDN_ERR_DEVICE: return "the CUDA runtime reported an error";
    case GDN_ERR_OUT_OF_MEMORY: return "a workspace allocation failed";
    case GDN_ERR_ALIGNMENT: return "a tensor pointer is not aligned to its element size";
    case GDN_ERR_UNSUPPORTED: return "no kernel of the requested backend can run these arguments (a launch limit)";
    case GDN_ERR_NOT_DEVICE_MEMORY: return "a pointer of a CUDA call is not device memory (GDN_CHECK_POINTERS=1)";
    case GDN_ERR_RESERVED: return "a reserved field of the arguments is not zero";
    }
    return "unknown status code";
}

/* The calling thread's last failure, named. */
static _Thread_local char last_error[256];

gdn_status gdn__fail(gdn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

gdn_status gdn__ok(void) {
    last_error[0] = '\0';
    return GDN_OK;
}

const char *gdn_last_error(void) { return last_error; }

int gdn_device_count(gdn_backend backend) {
    return backend == GDN_BACKEND_CPU ? 1 : backend == GDN_BACKEND_CUDA ? gdn__cuda_devices() : 0;
}

int gdn_kernel_count(void) { return gdn__kernel_total; }

const char *gdn_kernel_name(int index) {
    return index >= 0 && index < gdn__kernel_total ? gdn__kernels[index].name : NULL;
}

gdn_backend gdn_kernel_backend(int index) {
    return index >= 0 && index < gdn__kernel_total ? gdn__kernels[index].backend : GDN_BACKEND_CPU;
}

gdn_contract gdn_kernel_contract(int index) {
    return index >= 0 && index < gdn__kernel_total ? gdn__kernels[index].contract : GDN_CONTRACT_EXACT;
}

int gdn_kernel_variant_count(int index) {
    int n = 0;
    if (index >= 0 && index < gdn__kernel_total)
        while (gdn__kernels[index].variants[n].name) ++n;
    return n;
}

const char *gdn_kernel_variant_name(int index, int variant) {
    return variant >= 0 && variant < gdn_kernel_variant_count(index) ? gdn__kernels[index].variants[variant].name : NULL;
}
