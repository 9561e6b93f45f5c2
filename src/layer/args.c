/* The layer step's public entry points: validation of gdn_layer_args (every failure names its field through
 * gdn_last_error), the choice of kernel (named or routed), and the call. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "gdn_internal.h"
#include "layer/layer.h"

#define FAIL(status, ...) gdn__fail(status, __VA_ARGS__)

/* The table, from the list (src/layer/kernels.h). */
#define GDN__LAYER_ENTRY(name, backend) \
    {#name, GDN_BACKEND_##backend, gdn__layer_##name##_eligible, gdn__layer_##name##_routed, gdn__layer_##name},
static const gdn__layer_kernel layer_kernels[] = {GDN_LAYER_KERNELS(GDN__LAYER_ENTRY)};
#undef GDN__LAYER_ENTRY
enum { LAYER_KERNELS = (int)(sizeof layer_kernels / sizeof layer_kernels[0]) };

int gdn_layer_kernel_count(void) { return LAYER_KERNELS; }
const char *gdn_layer_kernel_name(int index) {
    return index >= 0 && index < LAYER_KERNELS ? layer_kernels[index].name : NULL;
}

/* The per-sequence arrays and the checkpoints: windows, slots in range, commit counts in range, checkpoints of
 * sequences with a slot, inside their windows; no written slot (a commit's, a checkpoint's) named twice. */
static gdn_status validate_sequences(const gdn_layer_args *a, int64_t *tokens, int64_t *max_len) {
    *max_len = 0;
    for (int64_t b = 0; b < a->B; ++b) {
        gdn_status s = gdn__check_window(a->cu_seqlens, b);
        if (s != GDN_OK) return s;
        const int64_t n = (int64_t)a->cu_seqlens[b + 1] - a->cu_seqlens[b];
        if (n > *max_len) *max_len = n;
        const int64_t slot = a->slot ? a->slot[b] : b;
        if ((s = gdn__check_slot("slot", b, slot, a->slots)) != GDN_OK) return s;
        const int64_t k = a->commit ? a->commit[b] : n;
        if (k < 0 || k > n)
            return FAIL(GDN_ERR_BAD_SIZE, "args->commit[%lld] = %lld: must be in 0 .. %lld (the window's tokens)",
                        (long long)b, (long long)k, (long long)n);
    }
    *tokens = a->cu_seqlens[a->B];
    if (a->n_checkpoints < 0 || (a->n_checkpoints > 0 && !a->checkpoints) || a->n_checkpoints > INT32_MAX)
        return FAIL(a->n_checkpoints > 0 && !a->checkpoints ? GDN_ERR_NULL_POINTER : GDN_ERR_BAD_SIZE,
                    "args->n_checkpoints = %lld%s", (long long)a->n_checkpoints,
                    a->n_checkpoints > 0 ? " with args->checkpoints NULL" : ": must be 0 .. 2^31 - 1");
    for (int64_t i = 0; i < a->n_checkpoints; ++i) {
        const gdn_layer_checkpoint *c = &a->checkpoints[i];
        if (c->seq < 0 || c->seq >= a->B)
            return FAIL(GDN_ERR_BAD_SIZE, "args->checkpoints[%lld].seq = %d: the batch has %lld sequences", (long long)i,
                        (int)c->seq, (long long)a->B);
        const int64_t n = (int64_t)a->cu_seqlens[c->seq + 1] - a->cu_seqlens[c->seq];
        if (c->after < 1 || c->after > n)
            return FAIL(GDN_ERR_BAD_SIZE, "args->checkpoints[%lld].after = %d: must be in 1 .. %lld (the window's "
                        "tokens)", (long long)i, (int)c->after, (long long)n);
        if (c->slot < 0 || c->slot >= a->slots)
            return FAIL(GDN_ERR_BAD_SIZE, "args->checkpoints[%lld].slot = %d: the pools have %lld slots", (long long)i,
                        (int)c->slot, (long long)a->slots);
        if ((a->slot ? a->slot[c->seq] : c->seq) < 0)
            return FAIL(GDN_ERR_BAD_SIZE, "args->checkpoints[%lld].seq = %d is a skipped sequence", (long long)i,
                        (int)c->seq);
    }
    if (a->n_checkpoints == 0) /* without a slot array sequence b uses slot b: distinct */
        return a->slot ? gdn__check_slot_writers("slot", a->slot, a->commit, a->B, "one of them commits", NULL) : GDN_OK;
    /* the sequences' slots and the checkpoints' together: a written slot named once */
    const int64_t n_use = a->B + a->n_checkpoints;
    int32_t *slots = gdn__malloc((size_t)n_use * 2 * sizeof *slots);
    if (!slots) return FAIL(GDN_ERR_OUT_OF_MEMORY, "no memory to check args->checkpoints");
    int32_t *writes = slots + n_use;
    for (int64_t b = 0; b < a->B; ++b) {
        slots[b] = a->slot ? a->slot[b] : (int32_t)b;
        writes[b] = a->commit ? a->commit[b] : 1;
    }
    for (int64_t i = 0; i < a->n_checkpoints; ++i) slots[a->B + i] = a->checkpoints[i].slot, writes[a->B + i] = 1;
    const gdn_status s = gdn__check_slot_writers("slot and args->checkpoints", slots, writes, n_use,
                                                 "one of them is written (a commit or a checkpoint)", NULL);
    free(slots);
    return s;
}

static gdn_status validate(const gdn_layer_args *args, gdn__layer_problem *p) {
    if (!args) return FAIL(GDN_ERR_NULL_POINTER, "args is NULL");
    const gdn_layer_args *a = args;
    if ((unsigned)a->dtype > GDN_BF16) return FAIL(GDN_ERR_BAD_ENUM, "args->dtype = %d: not a gdn_dtype", (int)a->dtype);
    if ((unsigned)a->out_gate > GDN_OUT_GATE_SIGMOID)
        return FAIL(GDN_ERR_BAD_ENUM, "args->out_gate = %d: not a gdn_out_gate", (int)a->out_gate);
    gdn_status shared = gdn__check_layout_backend_reserved(a->state_layout, a->backend, a->reserved, 6);
    if (shared == GDN_OK) shared = gdn__check_state_dtype_head_map(a->state_dtype, a->head_map);
    if (shared != GDN_OK) return shared;
    const struct { const char *name; int64_t value; } sizes[] = {
        {"B", a->B}, {"Hk", a->Hk}, {"Hv", a->Hv}, {"Dk", a->Dk}, {"Dv", a->Dv}, {"slots", a->slots}};
    for (int i = 0; i < 6; ++i)
        if (sizes[i].value < 1)
            return FAIL(GDN_ERR_BAD_SIZE, "args->%s = %lld: must be at least 1", sizes[i].name, (long long)sizes[i].value);
    if ((shared = gdn__check_threads_heads(a->threads, a->Hk, a->Hv)) != GDN_OK) return shared;
    if (a->cu_seqlens && a->B <= INT32_MAX && a->cu_seqlens[a->B] == 0) /* before the tensors: theirs may be NULL */
        return FAIL(GDN_ERR_BAD_SIZE, "args->cu_seqlens[%lld] = 0: the batch is empty (every window holds at least one "
                    "token)", (long long)a->B);
    const struct { const char *name; const void *ptr; } required[] = {
        {"cu_seqlens", a->cu_seqlens}, {"qkv", a->qkv},         {"z", a->z},           {"alpha", a->alpha},
        {"beta", a->beta},             {"y", a->y},             {"conv_w", a->conv_w}, {"dt_bias", a->dt_bias},
        {"gamma", a->gamma},           {"state", a->state},     {"hist_in", a->hist_in}, {"hist_out", a->hist_out}};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; ++i)
        if (!required[i].ptr) return FAIL(GDN_ERR_NULL_POINTER, "args->%s is NULL", required[i].name);
    if (!a->A == !a->A_log)
        return FAIL(a->A ? GDN_ERR_BAD_ENUM : GDN_ERR_NULL_POINTER, "args->A and args->A_log: exactly one is given, not %s",
                    a->A ? "both" : "neither");
    const gdn_status runner = gdn__validate_runner(a->cpu_runner);
    if (runner != GDN_OK) return runner;

    /* sizes: C and every tensor within GDN_SIZE_LIMIT, before the per-sequence arrays are read; every product and
     * sum checked (src/core/checked.h), so that no size wraps or overflows on the way */
    int ok = 1;
    const int64_t qk_channels = GDN_SIZE_PROD(&ok, 2, a->Hk, a->Dk), v_channels = GDN_SIZE_PROD(&ok, a->Hv, a->Dv);
    int64_t C = 0;
    if (ok) ok = gdn__size_add(qk_channels, v_channels, &C);
    const int64_t state_bytes = GDN_SIZE_PROD(&ok, a->slots, a->Hv, a->Dk, a->Dv, 4);
    const int64_t ds = a->dtype == GDN_F32 ? 4 : 2;
    const int64_t hist_bytes = GDN_SIZE_PROD(&ok, a->slots, C, 3, ds);
    if (!ok || !gdn__size_fits(state_bytes) || !gdn__size_fits(hist_bytes) || a->B > INT32_MAX)
        return FAIL(GDN_ERR_BAD_SIZE, "the pools of slots=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld are over 2^62 bytes",
                    (long long)a->slots, (long long)a->Hk, (long long)a->Hv, (long long)a->Dk, (long long)a->Dv);
    int64_t T = 0, max_len = 0;
    gdn_status s = validate_sequences(a, &T, &max_len);
    if (s != GDN_OK) return s;
    const gdn__extent qkv = {a->qkv, GDN_SIZE_PROD(&ok, T, C, ds)};
    const gdn__extent z = {a->z, GDN_SIZE_PROD(&ok, T, a->Hv, a->Dv, ds)}, y = {a->y, z.bytes};
    const gdn__extent alpha = {a->alpha, GDN_SIZE_PROD(&ok, T, a->Hv, ds)}, beta = {a->beta, alpha.bytes};
    const gdn__extent conv_w = {a->conv_w, GDN_SIZE_PROD(&ok, C, 4, 4)}, conv_bias = {a->conv_bias, GDN_SIZE_PROD(&ok, C, 4)};
    const int64_t head_bytes = GDN_SIZE_PROD(&ok, a->Hv, 4);
    const gdn__extent dt_bias = {a->dt_bias, head_bytes}, A = {a->A, head_bytes}, A_log = {a->A_log, head_bytes};
    const gdn__extent gamma = {a->gamma, GDN_SIZE_PROD(&ok, a->Dv, 4)};
    const gdn__extent state = {a->state, state_bytes}, hist_in = {a->hist_in, hist_bytes};
    const gdn__extent hist_out = {a->hist_out, hist_bytes};
    if (a->planes && a->Dv % 16 != 0)
        return FAIL(GDN_ERR_BAD_SIZE, "args->planes with Dv = %lld: the planes' sums take Dv a multiple of 16",
                    (long long)a->Dv);
    /* the planes: f32 [3, T, N] and [T, N / 16], N = Hv Dv: 49 T N / 16 floats */
    const gdn__extent planes = {a->planes, GDN_SIZE_PROD(&ok, T, a->Hv, a->Dv / 16, 49, 4)};
    if (!ok || !gdn__size_fits(qkv.bytes) || !gdn__size_fits(planes.bytes))
        return FAIL(GDN_ERR_BAD_SIZE, "args->qkv of %lld tokens and %lld channels (or its y planes) is over 2^62 bytes",
                    (long long)T, (long long)C);

    /* y and the planes overlap nothing; the pools overlap no input and each other only as hist_out == hist_in */
    static const char *const names[] = {"qkv", "z", "alpha", "beta", "conv_w", "conv_bias", "dt_bias", "A", "A_log",
                                        "gamma", "hist_in"};
    const gdn__extent inputs[] = {qkv, z, alpha, beta, conv_w, conv_bias, dt_bias, A, A_log, gamma, hist_in};
    const int n_in = (int)(sizeof inputs / sizeof inputs[0]);
    for (int i = 0; i < n_in; ++i) {
        if (gdn__overlaps(y, inputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->%s", names[i]);
        if (gdn__overlaps(planes, inputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->planes overlaps args->%s", names[i]);
        if (gdn__overlaps(state, inputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->state overlaps args->%s", names[i]);
        const int in_place = i == n_in - 1 && hist_out.p == hist_in.p;
        if (!in_place && gdn__overlaps(hist_out, inputs[i]))
            return FAIL(GDN_ERR_OVERLAP, "args->hist_out overlaps args->%s%s", names[i],
                        i == n_in - 1 ? " without being equal to it (in place)" : "");
    }
    if (gdn__overlaps(y, state) || gdn__overlaps(y, hist_out))
        return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->%s", gdn__overlaps(y, state) ? "state" : "hist_out");
    if (gdn__overlaps(state, hist_out)) return FAIL(GDN_ERR_OVERLAP, "args->state overlaps args->hist_out");
    const gdn__extent outputs[] = {y, state, hist_out};
    static const char *const out_names[] = {"y", "state", "hist_out"};
    for (int i = 0; i < 3; ++i)
        if (gdn__overlaps(planes, outputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->planes overlaps args->%s", out_names[i]);

    const gdn__aligned aligned[] = {
        {"qkv", a->qkv, ds},       {"z", a->z, ds},           {"alpha", a->alpha, ds},       {"beta", a->beta, ds},
        {"y", a->y, ds},           {"hist_in", a->hist_in, ds}, {"hist_out", a->hist_out, ds}, {"conv_w", a->conv_w, 4},
        {"conv_bias", a->conv_bias, 4}, {"dt_bias", a->dt_bias, 4}, {"A", a->A, 4},           {"A_log", a->A_log, 4},
        {"gamma", a->gamma, 4},    {"state", a->state, 4},      {"planes", a->planes, 4}};
    if ((s = gdn__check_aligned(aligned, sizeof aligned / sizeof aligned[0])) != GDN_OK) return s;

    memset(p, 0, sizeof *p);
    p->a = *a;
    p->C = C;
    p->T = T;
    p->group = a->Hv / a->Hk;
    p->tiled = a->head_map == GDN_HEADS_TILED;
    p->eps_l2 = a->eps_l2 != 0.0f ? a->eps_l2 : 1e-6f;
    p->eps_rms = a->eps_rms != 0.0f ? a->eps_rms : 1e-6f;
    p->scale = a->scale != 0.0f ? a->scale : gdn_rsqrtf((float)a->Dk);
    p->max_len = max_len;
    p->threads = gdn__call_threads(a->backend, a->cpu_runner, a->threads);
    return GDN_OK;
}

/* Validates args into *p and picks the kernel: the named one (it must exist, be of the call's backend and be
 * eligible) or the first of the call's backend that routes it. */
static gdn_status pick(const gdn_layer_args *args, gdn__layer_problem *p, const gdn__layer_kernel **out) {
    const gdn_status s = validate(args, p);
    if (s != GDN_OK) return s;
    if (p->a.backend == GDN_BACKEND_CUDA && gdn__cuda_devices() == 0)
        return FAIL(GDN_ERR_NO_DEVICE, "args->backend is GDN_BACKEND_CUDA: no CUDA device (or a build without CUDA)");
    const char *name = p->a.kernel; /* "fastest": the router's choice, long windows on the chunked prefill */
    p->chunked = name && strcmp(name, "fastest") == 0;
    if (p->chunked) name = NULL;
    for (int i = 0; i < LAYER_KERNELS; ++i) {
        const gdn__layer_kernel *kn = &layer_kernels[i];
        if (name ? strcmp(kn->name, name) != 0 : kn->backend != p->a.backend || !kn->routed(p)) continue;
        if (kn->backend != p->a.backend || !kn->eligible(p))
            return FAIL(GDN_ERR_INELIGIBLE, "args->kernel = \"%.64s\" cannot run these arguments here", p->a.kernel);
        *out = kn;
        return GDN_OK;
    }
    if (name)
        return FAIL(GDN_ERR_UNKNOWN_KERNEL, "args->kernel = \"%.64s\": no such layer kernel (gdn_layer_kernel_name "
                    "lists them, or \"fastest\")", p->a.kernel);
    return FAIL(GDN_ERR_UNSUPPORTED, "no layer kernel of this backend takes this shape");
}

gdn_status gdn_layer(const gdn_layer_args *args) {
    gdn__layer_problem p;
    const gdn__layer_kernel *kn = NULL;
    gdn_status s = pick(args, &p, &kn);
    if (s != GDN_OK) return s;
    s = kn->run(&p);
    return s == GDN_OK ? gdn__ok() : FAIL(s, "layer kernel %s: %s", kn->name, gdn_status_str(s));
}

gdn_status gdn_layer_route(const gdn_layer_args *args, const char **kernel_name) {
    if (!kernel_name) return gdn__fail(GDN_ERR_NULL_POINTER, "kernel_name is NULL");
    gdn__layer_problem p;
    const gdn__layer_kernel *kn = NULL;
    const gdn_status s = pick(args, &p, &kn);
    if (s == GDN_OK) *kernel_name = kn->name;
    return s == GDN_OK ? gdn__ok() : s;
}
