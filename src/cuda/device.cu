/* The CUDA backend's device query, pointer check, device workspaces and device copies. */
#include "core/checked.h"
#include "cuda/gdn_cuda.cuh"

extern "C" {

/* Number of CUDA devices, asked once (0 when the driver is missing or reports none). */
int gdn__cuda_devices(void) {
    static int count = -1; /* -1: not asked yet; racing first callers store the same answer */
    if (__atomic_load_n(&count, __ATOMIC_RELAXED) < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            n = 0;
            cudaGetLastError(); /* clear the error so that later calls start clean */
        }
        __atomic_store_n(&count, n, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&count, __ATOMIC_RELAXED);
}


/* 1 when p is device or managed memory (NULL counts: the call does not use it). */
static int gdn_device_pointer(const void *p) {
    if (!p) return 1;
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError(); /* an unknown host pointer: clear the error */
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

gdn_status gdn__cuda_check_pointers(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    const int raw = a->gate_kind == GDN_GATE_RAW;
    const void *ptrs[] = {a->q, a->k, a->v, a->y, a->gate, a->beta, a->mask, raw ? a->A_log : NULL,
                          raw ? a->dt_bias : NULL, a->state_in, a->state_out};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; ++i)
        if (!gdn_device_pointer(ptrs[i])) return GDN_ERR_NOT_DEVICE_MEMORY;
    return GDN_OK;
}

/* Device workspaces, stream-ordered; every allocation goes through gdn__alloc_refused (a test's failure on demand). */
gdn_status gdn__cuda_alloc(void **p, int64_t bytes, void *stream) {
    *p = NULL;
    if (bytes < 0 || !gdn__size_fits(bytes) || gdn__alloc_refused()) return GDN_ERR_OUT_OF_MEMORY;
    if (cudaMallocAsync(p, (size_t)(bytes ? bytes : 1), (cudaStream_t)stream) == cudaSuccess) return GDN_OK;
    (void)cudaGetLastError();
    *p = NULL;
    return GDN_ERR_OUT_OF_MEMORY;
}

gdn_status gdn__cuda_free(void *p, void *stream) {
    return !p || cudaFreeAsync(p, (cudaStream_t)stream) == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

/* bytes from src to dst, device memory, ordered on the stream. */
gdn_status gdn__cuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream) == cudaSuccess ? GDN_OK
                                                                                                         : GDN_ERR_DEVICE;
}

/* bytes of device memory at p zeroed, ordered on the stream. */
gdn_status gdn__cuda_zero(void *p, size_t bytes, void *stream) {
    return cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream) == cudaSuccess ? GDN_OK : GDN_ERR_DEVICE;
}

} /* extern "C" */
