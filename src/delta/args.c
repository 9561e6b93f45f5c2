/* The recurrence's public entry points: validation of gdn_delta_args (every failure names its field through
 * gdn_last_error), the choice of kernel (named, with an optional variant, or routed), and the call. */
#include <string.h>

#include "core/checked.h"
#include "gdn_internal.h"

#define FAIL(status, ...) gdn__fail(status, __VA_ARGS__)

gdn_status gdn__validate_runner(const gdn_cpu_runner *r) {
    if (r && (!r->parallel_for || r->workers < 1))
        return FAIL(r->parallel_for ? GDN_ERR_BAD_SIZE : GDN_ERR_NULL_POINTER, "args->cpu_runner->%s",
                    r->parallel_for ? "workers must be at least 1" : "parallel_for is NULL");
    for (int i = 0; r && i < 4; ++i)
        if (r->reserved[i]) return FAIL(GDN_ERR_RESERVED, "args->cpu_runner->reserved[%d] is not NULL", i);
    return GDN_OK;
}

gdn_status gdn__validate(const gdn_delta_args *args, gdn__problem *p) {
    if (!args) return FAIL(GDN_ERR_NULL_POINTER, "args is NULL");
    const gdn_delta_args *a = args;
    if ((unsigned)a->dtype > GDN_BF16) return FAIL(GDN_ERR_BAD_ENUM, "args->dtype = %d: not a gdn_dtype", (int)a->dtype);
    if ((unsigned)a->gate_kind > GDN_GATE_RAW)
        return FAIL(GDN_ERR_BAD_ENUM, "args->gate_kind = %d: not a gdn_gate_kind", (int)a->gate_kind);
    if ((unsigned)a->beta_kind > GDN_BETA_LOGIT)
        return FAIL(GDN_ERR_BAD_ENUM, "args->beta_kind = %d: not a gdn_beta_kind", (int)a->beta_kind);
    if ((unsigned)a->state_layout > GDN_STATE_KV)
        return FAIL(GDN_ERR_BAD_ENUM, "args->state_layout = %d: not a gdn_state_layout", (int)a->state_layout);
    if ((unsigned)a->backend > GDN_BACKEND_CUDA)
        return FAIL(GDN_ERR_BAD_ENUM, "args->backend = %d: not a gdn_backend", (int)a->backend);
    for (int i = 0; i < (int)(sizeof a->reserved / sizeof a->reserved[0]); ++i)
        if (a->reserved[i] != 0) return FAIL(GDN_ERR_RESERVED, "args->reserved[%d] is not zero", i);
    const struct { const char *name; int64_t value; } sizes[] = {{"B", a->B},   {"T", a->T},   {"Hk", a->Hk},
                                                                 {"Hv", a->Hv}, {"Dk", a->Dk}, {"Dv", a->Dv}};
    for (int i = 0; i < 6; ++i)
        if (sizes[i].value < 1)
            return FAIL(GDN_ERR_BAD_SIZE, "args->%s = %lld: must be at least 1", sizes[i].name, (long long)sizes[i].value);
    if (a->threads < 0) return FAIL(GDN_ERR_BAD_SIZE, "args->threads = %d: must be 0 (all) or more", a->threads);
    if (a->Hv % a->Hk != 0)
        return FAIL(GDN_ERR_HEAD_RATIO, "args->Hv = %lld is not a multiple of args->Hk = %lld", (long long)a->Hv,
                    (long long)a->Hk);
    const struct { const char *name; const void *ptr; } required[] = {
        {"q", a->q}, {"k", a->k}, {"v", a->v}, {"y", a->y}, {"gate", a->gate}, {"beta", a->beta}};
    for (int i = 0; i < 6; ++i)
        if (!required[i].ptr) return FAIL(GDN_ERR_NULL_POINTER, "args->%s is NULL", required[i].name);
    if (a->gate_kind == GDN_GATE_RAW && (!a->A_log || !a->dt_bias))
        return FAIL(GDN_ERR_NULL_POINTER, "args->%s is NULL (GDN_GATE_RAW needs it)", a->A_log ? "dt_bias" : "A_log");
    const gdn_status runner = gdn__validate_runner(a->cpu_runner);
    if (runner != GDN_OK) return runner;

    /* Every tensor's byte count, and one (b, h) state's (the kernels' workspaces hold one or a few), within
     * GDN_SIZE_LIMIT: whether or not a state is passed, so that no kernel's size arithmetic can wrap. */
    const int64_t ds = a->dtype == GDN_F32 ? 4 : 2;
    int ok = 1;
    const int64_t tokens = GDN_SIZE_PROD(&ok, a->B, a->T);
    const gdn__extent q = {a->q, GDN_SIZE_PROD(&ok, tokens, a->Hk, a->Dk, ds)}, k = {a->k, q.bytes};
    const gdn__extent v = {a->v, GDN_SIZE_PROD(&ok, tokens, a->Hv, a->Dv, ds)}, y = {a->y, v.bytes};
    const int64_t gate_row = a->gate_kind == GDN_GATE_VECTOR ? a->Dk : 1;
    const gdn__extent gate = {a->gate, GDN_SIZE_PROD(&ok, tokens, a->Hv, gate_row, 4)};
    const gdn__extent beta = {a->beta, GDN_SIZE_PROD(&ok, tokens, a->Hv, 4)};
    const gdn__extent mask = {a->mask, tokens};
    const int raw = a->gate_kind == GDN_GATE_RAW;
    const gdn__extent A_log = {raw ? a->A_log : NULL, GDN_SIZE_PROD(&ok, a->Hv, 4)};
    const gdn__extent dt_bias = {raw ? a->dt_bias : NULL, A_log.bytes};
    const gdn__extent state_in = {a->state_in, GDN_SIZE_PROD(&ok, a->B, a->Hv, a->Dk, a->Dv, 4)};
    const gdn__extent state_out = {a->state_out, state_in.bytes};
    if (!ok || !gdn__size_fits(state_in.bytes) || !gdn__size_fits(q.bytes) || !gdn__size_fits(v.bytes))
        return FAIL(GDN_ERR_BAD_SIZE, "a tensor of B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld (or the state of that "
                    "shape) is over 2^62 bytes", (long long)a->B, (long long)a->T, (long long)a->Hk, (long long)a->Hv,
                    (long long)a->Dk, (long long)a->Dv);

    /* y overlaps nothing; state_out overlaps no input except state_in exactly (in place). */
    static const char *const input_names[] = {"q", "k", "v", "gate", "beta", "mask", "A_log", "dt_bias", "state_in"};
    const gdn__extent inputs[] = {q, k, v, gate, beta, mask, A_log, dt_bias, state_in};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i) {
        if (gdn__overlaps(y, inputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->%s", input_names[i]);
        const int in_place = i == sizeof inputs / sizeof inputs[0] - 1 && state_out.p == state_in.p; /* state_in */
        if (!in_place && gdn__overlaps(state_out, inputs[i]))
            return FAIL(GDN_ERR_OVERLAP, "args->state_out overlaps args->%s%s", input_names[i],
                        i == 8 ? " without being equal to it (in place)" : "");
    }
    if (gdn__overlaps(y, state_out)) return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->state_out");

    /* every tensor the call reads or writes is aligned to its element (A_log, dt_bias: raw gate only) */
    const struct { const char *name; const void *ptr; int64_t align; } aligned[] = {
        {"q", a->q, ds},         {"k", a->k, ds},       {"v", a->v, ds},          {"y", a->y, ds},
        {"gate", a->gate, 4},    {"beta", a->beta, 4},  {"A_log", A_log.p, 4},    {"dt_bias", dt_bias.p, 4},
        {"state_in", a->state_in, 4}, {"state_out", a->state_out, 4}};
    for (size_t i = 0; i < sizeof aligned / sizeof aligned[0]; ++i)
        if (gdn__misaligned(aligned[i].ptr, aligned[i].align))
            return FAIL(GDN_ERR_ALIGNMENT, "args->%s = %p is not aligned to its %lld-byte element", aligned[i].name,
                        aligned[i].ptr, (long long)aligned[i].align);

    memset(p, 0, sizeof *p);
    p->a = *a;
    p->group = a->Hv / a->Hk;
    p->dk_lane = (a->Dk + 31) / 32;
    p->dv_lane = (a->Dv + 31) / 32;
    p->dtype_size = (size_t)ds;
    if (a->backend == GDN_BACKEND_CPU && a->cpu_runner) {
        p->threads = a->cpu_runner->workers;
    } else {
        const int pool = a->backend == GDN_BACKEND_CPU ? gdn_cpu_threads() : 1;
        p->threads = a->threads == 0 || a->threads > pool ? pool : a->threads;
    }
    return GDN_OK;
}

/* Validates args into *p and picks the kernel the call runs: the named one ("name" or "name:variant"; it must exist,
 * be of the call's backend and be eligible) or the router's choice; *variant is the named variant or NULL. */
static gdn_status pick(const gdn_delta_args *args, gdn__problem *p, const gdn__kernel **out, const gdn__variant **variant) {
    *variant = NULL;
    const gdn_status s = gdn__validate(args, p);
    if (s != GDN_OK) return s;
    if (p->a.backend == GDN_BACKEND_CUDA && gdn__cuda_devices() == 0)
        return FAIL(GDN_ERR_NO_DEVICE, "args->backend is GDN_BACKEND_CUDA: no CUDA device (or a build without CUDA)");
    const char *name = p->a.kernel;
    if (!name) {
        *out = gdn__route(p);
        return *out ? GDN_OK : FAIL(GDN_ERR_UNSUPPORTED, "no kernel of this backend takes this shape (a launch limit)");
    }
    const char *colon = strchr(name, ':');
    const size_t len = colon ? (size_t)(colon - name) : strlen(name);
    for (int i = 0; i < gdn__kernel_total; ++i) {
        const gdn__kernel *kn = &gdn__kernels[i];
        if (strlen(kn->name) != len || strncmp(kn->name, name, len) != 0) continue;
        if (colon) {
            for (const gdn__variant *v = kn->variants; v->name; ++v)
                if (strcmp(v->name, colon + 1) == 0) *variant = v;
            if (!*variant) return FAIL(GDN_ERR_UNKNOWN_KERNEL, "args->kernel = \"%.64s\": %s has no such variant", name, kn->name);
        }
        if (kn->backend != p->a.backend || !kn->eligible(p))
            return FAIL(GDN_ERR_INELIGIBLE, "args->kernel = \"%.64s\" cannot run these arguments here", name);
        *out = kn;
        return GDN_OK;
    }
    return FAIL(GDN_ERR_UNKNOWN_KERNEL, "args->kernel = \"%.64s\": no such kernel (gdn_kernel_name lists them)", name);
}

gdn_status gdn_delta(const gdn_delta_args *args) {
    gdn__problem p;
    const gdn__kernel *kn = NULL;
    const gdn__variant *variant = NULL;
    gdn_status s = pick(args, &p, &kn, &variant);
    if (s != GDN_OK) return s;
    if (p.a.backend == GDN_BACKEND_CUDA && gdn__check_pointers() && (s = gdn__cuda_check_pointers(&p)) != GDN_OK)
        return FAIL(s, "a tensor pointer is not device memory (GDN_CHECK_POINTERS=1)");
    s = kn->run(&p, variant);
    return s == GDN_OK ? gdn__ok() : FAIL(s, "kernel %s: %s", kn->name, gdn_status_str(s));
}

gdn_status gdn_route(const gdn_delta_args *args, const char **kernel_name) {
    if (!kernel_name) return gdn__fail(GDN_ERR_NULL_POINTER, "kernel_name is NULL");
    gdn__problem p;
    const gdn__kernel *kn = NULL;
    const gdn__variant *variant = NULL;
    const gdn_status s = pick(args, &p, &kn, &variant);
    if (s == GDN_OK) *kernel_name = kn->name;
    return s == GDN_OK ? gdn__ok() : s;
}

/* 0 for arguments that do not validate (and for an index out of range), as for a kernel of another backend. */
int gdn_kernel_eligible(int index, const gdn_delta_args *args) {
    gdn__problem p;
    if (index < 0 || index >= gdn__kernel_total || gdn__validate(args, &p) != GDN_OK) return 0;
    return gdn__kernels[index].backend == p.a.backend && gdn__kernels[index].eligible(&p);
}
