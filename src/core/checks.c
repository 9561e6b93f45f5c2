/* Checks the ops' validations share (src/delta/args.c, src/layer/args.c), each failure naming its field through
 * gdn_last_error; the per-sequence arrays' are in src/core/sequences.c. */
#include "core/checked.h"
#include "gdn_internal.h"

gdn_status gdn__check_layout_backend_reserved(gdn_state_layout layout, gdn_backend backend, const uint64_t *reserved,
                                              int n_reserved) {
    if ((unsigned)layout > GDN_STATE_KV)
        return gdn__fail(GDN_ERR_BAD_ENUM, "args->state_layout = %d: not a gdn_state_layout", (int)layout);
    if ((unsigned)backend > GDN_BACKEND_CUDA)
        return gdn__fail(GDN_ERR_BAD_ENUM, "args->backend = %d: not a gdn_backend", (int)backend);
    for (int i = 0; i < n_reserved; ++i)
        if (reserved[i] != 0) return gdn__fail(GDN_ERR_RESERVED, "args->reserved[%d] is not zero", i);
    return GDN_OK;
}

gdn_status gdn__check_state_dtype_head_map(gdn_dtype state_dtype, gdn_head_map head_map) {
    if ((unsigned)state_dtype > GDN_BF16)
        return gdn__fail(GDN_ERR_BAD_ENUM, "args->state_dtype = %d: not a gdn_dtype", (int)state_dtype);
    if ((unsigned)head_map > GDN_HEADS_TILED)
        return gdn__fail(GDN_ERR_BAD_ENUM, "args->head_map = %d: not a gdn_head_map", (int)head_map);
    if (state_dtype != GDN_F32)
        return gdn__fail(GDN_ERR_UNSUPPORTED, "args->state_dtype = %s: this build takes f32 states only",
                         state_dtype == GDN_BF16 ? "GDN_BF16" : "GDN_F16");
    return GDN_OK;
}

gdn_status gdn__check_threads_heads(int threads, int64_t Hk, int64_t Hv) {
    if (threads < 0) return gdn__fail(GDN_ERR_BAD_SIZE, "args->threads = %d: must be 0 (all) or more", threads);
    if (Hv % Hk != 0)
        return gdn__fail(GDN_ERR_HEAD_RATIO, "args->Hv = %lld is not a multiple of args->Hk = %lld", (long long)Hv,
                         (long long)Hk);
    return GDN_OK;
}

gdn_status gdn__validate_runner(const gdn_cpu_runner *r) {
    if (r && (!r->parallel_for || r->workers < 1))
        return gdn__fail(r->parallel_for ? GDN_ERR_BAD_SIZE : GDN_ERR_NULL_POINTER, "args->cpu_runner->%s",
                         r->parallel_for ? "workers must be at least 1" : "parallel_for is NULL");
    for (int i = 0; r && i < 4; ++i)
        if (r->reserved[i]) return gdn__fail(GDN_ERR_RESERVED, "args->cpu_runner->reserved[%d] is not NULL", i);
    return GDN_OK;
}

gdn_status gdn__check_aligned(const gdn__aligned *list, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (gdn__misaligned(list[i].ptr, list[i].align))
            return gdn__fail(GDN_ERR_ALIGNMENT, "args->%s = %p is not aligned to its %lld-byte element", list[i].name,
                             list[i].ptr, (long long)list[i].align);
    return GDN_OK;
}

int gdn__call_threads(gdn_backend backend, const gdn_cpu_runner *runner, int threads) {
    if (backend == GDN_BACKEND_CPU && runner) return runner->workers;
    const int pool = backend == GDN_BACKEND_CPU ? gdn_cpu_threads() : 1;
    return threads == 0 || threads > pool ? pool : threads;
}
