/* Public entry points: argument validation, status text, dispatch to the routed kernel. */
#include <string.h>

#include "core/checked.h"
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
    }
    return "unknown status code";
}

typedef struct extent {
    const void *p;
    int64_t bytes;
} extent;

/* 1 when p (NULL counts as aligned) is not a multiple of `align` bytes (a power of two). */
static int misaligned(const void *p, int64_t align) { return ((uintptr_t)p & (uintptr_t)(align - 1)) != 0; }

static int overlaps(extent x, extent y) {
    if (!x.p || !y.p) return 0;
    const uintptr_t a = (uintptr_t)x.p, b = (uintptr_t)y.p;
    return a < b + (uintptr_t)y.bytes && b < a + (uintptr_t)x.bytes;
}

gdn_status gdn__validate(const gdn_delta_args *args, gdn__problem *p) {
    if (!args) return GDN_ERR_NULL_POINTER;
    const gdn_delta_args *a = args;
    if ((unsigned)a->dtype > GDN_BF16 || (unsigned)a->gate_kind > GDN_GATE_RAW || (unsigned)a->beta_kind > GDN_BETA_LOGIT ||
        (unsigned)a->state_layout > GDN_STATE_KV || (unsigned)a->backend > GDN_BACKEND_CUDA)
        return GDN_ERR_BAD_ENUM;
    if (a->B < 1 || a->T < 1 || a->Hk < 1 || a->Hv < 1 || a->Dk < 1 || a->Dv < 1 || a->threads < 0)
        return GDN_ERR_BAD_SIZE;
    if (a->Hv % a->Hk != 0) return GDN_ERR_HEAD_RATIO;
    if (!a->q || !a->k || !a->v || !a->y || !a->gate || !a->beta) return GDN_ERR_NULL_POINTER;
    if (a->gate_kind == GDN_GATE_RAW && (!a->A_log || !a->dt_bias)) return GDN_ERR_NULL_POINTER;

    /* Every tensor's byte count, and one (b, h) state's (the kernels' workspaces hold one or a few), within
     * GDN_SIZE_LIMIT: whether or not a state is passed, so that no kernel's size arithmetic can wrap. */
    const int64_t ds = a->dtype == GDN_F32 ? 4 : 2;
    int ok = 1;
    const int64_t tokens = GDN_SIZE_PROD(&ok, a->B, a->T);
    const extent q = {a->q, GDN_SIZE_PROD(&ok, tokens, a->Hk, a->Dk, ds)}, k = {a->k, q.bytes};
    const extent v = {a->v, GDN_SIZE_PROD(&ok, tokens, a->Hv, a->Dv, ds)}, y = {a->y, v.bytes};
    const int64_t gate_row = a->gate_kind == GDN_GATE_VECTOR ? a->Dk : 1;
    const extent gate = {a->gate, GDN_SIZE_PROD(&ok, tokens, a->Hv, gate_row, 4)};
    const extent beta = {a->beta, GDN_SIZE_PROD(&ok, tokens, a->Hv, 4)};
    const extent mask = {a->mask, tokens};
    const int raw = a->gate_kind == GDN_GATE_RAW;
    const extent A_log = {raw ? a->A_log : NULL, GDN_SIZE_PROD(&ok, a->Hv, 4)};
    const extent dt_bias = {raw ? a->dt_bias : NULL, A_log.bytes};
    const extent state_in = {a->state_in, GDN_SIZE_PROD(&ok, a->B, a->Hv, a->Dk, a->Dv, 4)};
    const extent state_out = {a->state_out, state_in.bytes};
    if (!ok || !gdn__size_fits(state_in.bytes) || !gdn__size_fits(q.bytes) || !gdn__size_fits(v.bytes))
        return GDN_ERR_BAD_SIZE;

    /* y overlaps nothing; state_out overlaps no input except state_in exactly (in place). */
    const extent inputs[] = {q, k, v, gate, beta, mask, A_log, dt_bias, state_in};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i) {
        if (overlaps(y, inputs[i])) return GDN_ERR_OVERLAP;
        const int in_place = i == sizeof inputs / sizeof inputs[0] - 1 && state_out.p == state_in.p; /* state_in */
        if (!in_place && overlaps(state_out, inputs[i])) return GDN_ERR_OVERLAP;
    }
    if (overlaps(y, state_out)) return GDN_ERR_OVERLAP;

    /* every tensor the call reads or writes is aligned to its element (A_log, dt_bias: raw gate only) */
    if (misaligned(a->q, ds) || misaligned(a->k, ds) || misaligned(a->v, ds) || misaligned(a->y, ds) ||
        misaligned(a->gate, 4) || misaligned(a->beta, 4) || misaligned(A_log.p, 4) || misaligned(dt_bias.p, 4) ||
        misaligned(a->state_in, 4) || misaligned(a->state_out, 4))
        return GDN_ERR_ALIGNMENT;

    memset(p, 0, sizeof *p);
    p->a = *a;
    p->group = a->Hv / a->Hk;
    p->dk_lane = (a->Dk + 31) / 32;
    p->dv_lane = (a->Dv + 31) / 32;
    p->dtype_size = (size_t)ds;
    const int pool = a->backend == GDN_BACKEND_CPU ? gdn_cpu_threads() : 1;
    p->threads = a->threads == 0 || a->threads > pool ? pool : a->threads;
    return GDN_OK;
}

/* The kernel the call runs: the named one (if it exists, is of the call's backend and is eligible) or the
 * router's choice. */
static gdn_status pick(const gdn__problem *p, const gdn__kernel **out) {
    if (p->a.backend == GDN_BACKEND_CUDA && gdn__cuda_devices() == 0) return GDN_ERR_NO_DEVICE;
    if (p->a.kernel) {
        for (int i = 0; i < gdn__kernel_total; ++i)
            if (strcmp(gdn__kernels[i].name, p->a.kernel) == 0) {
                const gdn__kernel *kn = &gdn__kernels[i];
                if (kn->backend != p->a.backend || !kn->eligible(p)) return GDN_ERR_INELIGIBLE;
                *out = kn;
                return GDN_OK;
            }
        return GDN_ERR_UNKNOWN_KERNEL;
    }
    *out = gdn__route(p);
    return *out ? GDN_OK : GDN_ERR_UNSUPPORTED;
}

gdn_status gdn_delta(const gdn_delta_args *args) {
    gdn__problem p;
    gdn_status s = gdn__validate(args, &p);
    if (s != GDN_OK) return s;
    const gdn__kernel *kn = NULL;
    s = pick(&p, &kn);
    if (s == GDN_OK && p.a.backend == GDN_BACKEND_CUDA && gdn__check_pointers()) s = gdn__cuda_check_pointers(&p);
    return s != GDN_OK ? s : kn->run(&p);
}

gdn_status gdn_route(const gdn_delta_args *args, const char **kernel_name) {
    if (!kernel_name) return GDN_ERR_NULL_POINTER;
    gdn__problem p;
    gdn_status s = gdn__validate(args, &p);
    if (s != GDN_OK) return s;
    const gdn__kernel *kn = NULL;
    s = pick(&p, &kn);
    if (s == GDN_OK) *kernel_name = kn->name;
    return s;
}

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

int gdn_kernel_eligible(int index, const gdn_delta_args *args) {
    gdn__problem p;
    if (index < 0 || index >= gdn__kernel_total || gdn__validate(args, &p) != GDN_OK) return 0;
    return gdn__kernels[index].backend == p.a.backend && gdn__kernels[index].eligible(&p);
}
