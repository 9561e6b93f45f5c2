/* Built instead of the CUDA sources when nvcc is not found: no device; every CUDA kernel of the list is a stub
 * that is never eligible and answers GDN_ERR_NO_DEVICE. */
#include "gdn_internal.h"
#include "layer/layer.h"

int gdn__cuda_devices(void) { return 0; }
gdn_status gdn__cuda_check_pointers(const gdn__problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
gdn_status gdn__cuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
    (void)dst, (void)src, (void)bytes, (void)stream;
    return GDN_ERR_NO_DEVICE;
}
gdn_status gdn__cuda_alloc(void **p, int64_t bytes, void *stream) {
    (void)bytes, (void)stream;
    *p = NULL;
    return GDN_ERR_NO_DEVICE;
}
gdn_status gdn__cuda_free(void *p, void *stream) {
    (void)stream;
    return p ? GDN_ERR_NO_DEVICE : GDN_OK;
}
int64_t gdn__cuda_chunked_bytes(const gdn__problem *p, const uint8_t *take) {
    (void)take;
    return p ? 0 : -1;
}
gdn_status gdn__cuda_zero(void *p, size_t bytes, void *stream) {
    (void)p, (void)bytes, (void)stream;
    return GDN_ERR_NO_DEVICE;
}
gdn_status gdn__layer_cuda_widen(float *o, const uint16_t *oh, int64_t n, void *stream) {
    (void)o, (void)oh, (void)n, (void)stream;
    return GDN_ERR_NO_DEVICE;
}
gdn_status gdn__cuda_chunked_sequences(const gdn__problem *p, const uint8_t *take) {
    (void)take;
    return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER;
}
gdn_status gdn__cuda_decode_stream_slots(const gdn__problem *p, const int32_t *slot, int launch) {
    (void)p, (void)slot, (void)launch;
    return GDN_ERR_NO_DEVICE;
}

#define GDN__STUB_CPU(name)
#define GDN__STUB_CUDA(name)                                                                          \
    int gdn__delta_##name##_eligible(const gdn__problem *p) { return p == NULL; }                    \
    int gdn__delta_##name##_routed(const gdn__problem *p) { return p == NULL; }                      \
    gdn_status gdn__delta_##name(const gdn__problem *p, const gdn__variant *v) {                     \
        (void)p, (void)v;                                                                             \
        return GDN_ERR_NO_DEVICE;                                                                     \
    }                                                                                                 \
    const gdn__variant gdn__delta_##name##_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};
#define GDN__STUB(name, backend, packed, contract) GDN__STUB_##backend(name)
GDN_DELTA_KERNELS(GDN__STUB)

#define GDN__LAYER_STUB_CPU(name)
#define GDN__LAYER_STUB_CUDA(name)                                                          \
    int gdn__layer_##name##_eligible(const gdn__layer_problem *p) { return p == NULL; }    \
    int gdn__layer_##name##_routed(const gdn__layer_problem *p) { return p == NULL; }      \
    gdn_status gdn__layer_##name(const gdn__layer_problem *p) { return p ? GDN_ERR_NO_DEVICE : GDN_ERR_NULL_POINTER; }
#define GDN__LAYER_STUB(name, backend) GDN__LAYER_STUB_##backend(name)
GDN_LAYER_KERNELS(GDN__LAYER_STUB)
