/* The recurrence's public entry points: validation of gdn_delta_args (every failure names its field through
 * gdn_last_error), the choice of kernel (named, with an optional variant, or routed), and the call. The batch form
 * (cu_seqlens, state_slot) runs as dense B = 1 calls, a sequence at a time, of kernels that know only the dense
 * form; on CUDA, uniform windows of up to 8 tokens run in one launch per 256 sequences with the slots beside them,
 * and the windows of the chunked contract (cuda_chunked named, or "fastest" windows long enough) as one chunked
 * batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "gdn_internal.h"

#define FAIL(status, ...) gdn__fail(status, __VA_ARGS__)

/* 1 when the call runs a sequence at a time: the batch form, or slots. */
static int per_sequence(const gdn_delta_args *a) { return a->cu_seqlens || a->state_slot; }

/* The batch form's host arrays: the windows, T against them, the slots in range (written once: check_writers). */
static gdn_status validate_batch(const gdn_delta_args *a) {
    gdn_status s = GDN_OK;
    for (int64_t b = 0; a->cu_seqlens && b < a->B && s == GDN_OK; ++b) s = gdn__check_window(a->cu_seqlens, b);
    if (s != GDN_OK) return s;
    if (a->cu_seqlens && a->T != 0 && a->T != a->cu_seqlens[a->B])
        return FAIL(GDN_ERR_BAD_SIZE, "args->T = %lld: must be 0 or cu_seqlens[B] = %d (the batch form's tokens)",
                    (long long)a->T, (int)a->cu_seqlens[a->B]);
    for (int64_t b = 0; a->state_slot && b < a->B && s == GDN_OK; ++b)
        s = gdn__check_slot("state_slot", b, a->state_slot[b], a->slots);
    return s;
}

/* No two sequences of a validated call write one slot (state_slot with state_out), sorted in `scratch` of
 * writers_bytes(a) bytes (NULL: an allocation of its own). */
static int64_t writers_bytes(const gdn_delta_args *a) {
    return a->state_slot && a->state_out ? gdn__slot_writers_bytes(a->B) : 0;
}
static gdn_status check_writers(const gdn_delta_args *a, void *scratch) {
    if (!a->state_slot || !a->state_out) return GDN_OK;
    return gdn__check_slot_writers("state_slot", a->state_slot, NULL, a->B, "both write it (args->state_out is not NULL)",
                                   scratch);
}

/* Slots on the device (gdn.h): a CUDA call of dense windows of at most 8 tokens and a scalar gate. */
static gdn_status validate_device_slots(const gdn_delta_args *a) {
    if (a->backend != GDN_BACKEND_CUDA)
        return FAIL(GDN_ERR_UNSUPPORTED, "args->state_slot_device: slots in device memory need GDN_BACKEND_CUDA");
    if (a->state_slot || a->cu_seqlens)
        return FAIL(GDN_ERR_UNSUPPORTED, "args->state_slot_device: takes the dense [B, T] form (args->%s must be NULL)",
                    a->state_slot ? "state_slot" : "cu_seqlens");
    if (a->T > 8 || a->gate_kind == GDN_GATE_VECTOR)
        return FAIL(GDN_ERR_UNSUPPORTED, "args->state_slot_device: %s", a->T > 8 ? "windows of at most 8 tokens (args->T)"
                                                                              : "a scalar gate (args->gate_kind)");
    if (((uintptr_t)a->state_slot_device & 3) != 0)
        return FAIL(GDN_ERR_ALIGNMENT, "args->state_slot_device is not aligned to 4 bytes");
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
    gdn_status shared = gdn__check_layout_backend_reserved(a->state_layout, a->backend, a->reserved, 6);
    if (shared == GDN_OK) shared = gdn__check_state_dtype_head_map(a->state_dtype, a->head_map);
    if (shared != GDN_OK) return shared;
    const struct { const char *name; int64_t value; } sizes[] = {{"B", a->B},   {"T", a->T},   {"Hk", a->Hk},
                                                                 {"Hv", a->Hv}, {"Dk", a->Dk}, {"Dv", a->Dv}};
    for (int i = 0; i < 6; ++i)
        if (sizes[i].value < 1 && !(a->cu_seqlens && i == 1)) /* the batch form's T: validate_batch */
            return FAIL(GDN_ERR_BAD_SIZE, "args->%s = %lld: must be at least 1", sizes[i].name, (long long)sizes[i].value);
    const int pooled = a->state_slot || a->state_slot_device;
    if (pooled ? a->slots < 1 : a->slots != 0)
        return FAIL(GDN_ERR_BAD_SIZE, "args->slots = %lld: must be %s", (long long)a->slots,
                    pooled ? "at least 1 with args->state_slot or state_slot_device"
                           : "0 without args->state_slot or state_slot_device");
    if (a->state_slot_device && (shared = validate_device_slots(a)) != GDN_OK) return shared;
    if ((shared = gdn__check_threads_heads(a->threads, a->Hk, a->Hv)) != GDN_OK) return shared;
    if (a->cu_seqlens && a->cu_seqlens[a->B] == 0) /* before the tensors: an empty batch's may be NULL */
        return FAIL(GDN_ERR_BAD_SIZE, "args->cu_seqlens[%lld] = 0: the batch is empty (every window holds at least one "
                    "token)", (long long)a->B);
    const struct { const char *name; const void *ptr; } required[] = {
        {"q", a->q}, {"k", a->k}, {"v", a->v}, {"y", a->y}, {"gate", a->gate}, {"beta", a->beta}};
    for (int i = 0; i < 6; ++i)
        if (!required[i].ptr) return FAIL(GDN_ERR_NULL_POINTER, "args->%s is NULL", required[i].name);
    if (a->gate_kind == GDN_GATE_RAW && (!a->A_log || !a->dt_bias))
        return FAIL(GDN_ERR_NULL_POINTER, "args->%s is NULL (GDN_GATE_RAW needs it)", a->A_log ? "dt_bias" : "A_log");
    gdn_status s = gdn__validate_runner(a->cpu_runner);
    if (s != GDN_OK || (s = validate_batch(a)) != GDN_OK) return s;

    /* Every tensor's byte count, and one (b, h) state's (the kernels' workspaces hold one or a few), within
     * GDN_SIZE_LIMIT: whether or not a state is passed, so that no kernel's size arithmetic can wrap. */
    const int64_t ds = a->dtype == GDN_F32 ? 4 : 2;
    int ok = 1;
    const int64_t T = a->cu_seqlens ? a->cu_seqlens[a->B] : a->T; /* tokens per sequence, or of the batch */
    const int64_t tokens = a->cu_seqlens ? T : GDN_SIZE_PROD(&ok, a->B, T);
    const int64_t states = pooled ? a->slots : a->B;
    const gdn__extent q = {a->q, GDN_SIZE_PROD(&ok, tokens, a->Hk, a->Dk, ds)}, k = {a->k, q.bytes};
    const gdn__extent v = {a->v, GDN_SIZE_PROD(&ok, tokens, a->Hv, a->Dv, ds)}, y = {a->y, v.bytes};
    const int64_t gate_row = a->gate_kind == GDN_GATE_VECTOR ? a->Dk : 1;
    const gdn__extent gate = {a->gate, GDN_SIZE_PROD(&ok, tokens, a->Hv, gate_row, 4)};
    const gdn__extent beta = {a->beta, GDN_SIZE_PROD(&ok, tokens, a->Hv, 4)};
    const gdn__extent mask = {a->mask, tokens};
    const int raw = a->gate_kind == GDN_GATE_RAW;
    const gdn__extent A_log = {raw ? a->A_log : NULL, GDN_SIZE_PROD(&ok, a->Hv, 4)};
    const gdn__extent dt_bias = {raw ? a->dt_bias : NULL, A_log.bytes};
    const gdn__extent state_in = {a->state_in, GDN_SIZE_PROD(&ok, states, a->Hv, a->Dk, a->Dv, 4)};
    const gdn__extent state_out = {a->state_out, state_in.bytes};
    if (!ok || !gdn__size_fits(state_in.bytes) || !gdn__size_fits(q.bytes) || !gdn__size_fits(v.bytes))
        return FAIL(GDN_ERR_BAD_SIZE, "a tensor of B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld (or the state of that "
                    "shape) is over 2^62 bytes", (long long)a->B, (long long)T, (long long)a->Hk, (long long)a->Hv,
                    (long long)a->Dk, (long long)a->Dv);

    /* y overlaps nothing; state_out overlaps no input except state_in exactly (in place). */
    static const char *const input_names[] = {"q",     "k",       "v",       "gate",     "beta",
                                              "mask",  "A_log",   "dt_bias", "state_slot_device", "state_in"};
    const gdn__extent slot_device = {a->state_slot_device, GDN_SIZE_PROD(&ok, a->B, 4)};
    const gdn__extent inputs[] = {q, k, v, gate, beta, mask, A_log, dt_bias, slot_device, state_in};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i) {
        if (gdn__overlaps(y, inputs[i])) return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->%s", input_names[i]);
        const int in_place = i == sizeof inputs / sizeof inputs[0] - 1 && state_out.p == state_in.p; /* state_in */
        if (!in_place && gdn__overlaps(state_out, inputs[i]))
            return FAIL(GDN_ERR_OVERLAP, "args->state_out overlaps args->%s%s", input_names[i],
                        i == 9 ? " without being equal to it (in place)" : "");
    }
    if (gdn__overlaps(y, state_out)) return FAIL(GDN_ERR_OVERLAP, "args->y overlaps args->state_out");

    /* every tensor the call reads or writes is aligned to its element (A_log, dt_bias: raw gate only) */
    const gdn__aligned aligned[] = {
        {"q", a->q, ds},         {"k", a->k, ds},       {"v", a->v, ds},          {"y", a->y, ds},
        {"gate", a->gate, 4},    {"beta", a->beta, 4},  {"A_log", A_log.p, 4},    {"dt_bias", dt_bias.p, 4},
        {"state_in", a->state_in, 4}, {"state_out", a->state_out, 4}};
    if ((s = gdn__check_aligned(aligned, sizeof aligned / sizeof aligned[0])) != GDN_OK) return s;

    memset(p, 0, sizeof *p);
    p->a = *a;
    p->group = a->Hv / a->Hk;
    p->tiled = a->head_map == GDN_HEADS_TILED;
    if (a->scale == 0.0f) p->a.scale = gdn_rsqrtf((float)a->Dk); /* 0 (or -0): 1 / sqrt(Dk), as gdn_layer's */
    p->dk_lane = (a->Dk + 31) / 32;
    p->dv_lane = (a->Dv + 31) / 32;
    p->dtype_size = (size_t)ds;
    p->threads = gdn__call_threads(a->backend, a->cpu_runner, a->threads);
    return GDN_OK;
}

/* The kernel a validated dense problem runs: the named one ("name" or "name:variant"; it must exist, be of the
 * call's backend and be eligible) or the router's choice; *variant is the named variant or NULL. `where` ends the
 * messages of a batch's sequence. */
static gdn_status pick_kernel(const gdn__problem *p, const char *where, const gdn__kernel **out,
                              const gdn__variant **variant) {
    *variant = NULL;
    const char *name = p->a.kernel;
    if (!name || strcmp(name, "fastest") == 0) {
        *out = name ? gdn__route_fastest(p) : gdn__route(p);
        return *out ? GDN_OK : FAIL(GDN_ERR_UNSUPPORTED, "no kernel of this backend takes this shape (a launch limit)%s",
                                    where);
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
            return FAIL(GDN_ERR_INELIGIBLE, "args->kernel = \"%.64s\" cannot run these arguments here%s", name, where);
        *out = kn;
        return GDN_OK;
    }
    return FAIL(GDN_ERR_UNKNOWN_KERNEL, "args->kernel = \"%.64s\": no such kernel (gdn_kernel_name lists them)", name);
}

/* The dense arguments of B sequences of T tokens each from token t0 of a batch-form call: its tensors from t0, its
 * state pointers as they are (the caller places them). */
static gdn_delta_args dense_from(const gdn__problem *p, int64_t t0, int64_t B, int64_t T) {
    const gdn_delta_args *a = &p->a;
    const int64_t qk = t0 * a->Hk * a->Dk, v = t0 * a->Hv * a->Dv, bt = t0 * a->Hv;
    gdn_delta_args d = *a;
    d.B = B, d.T = T;
    d.q = (const char *)a->q + qk * (int64_t)p->dtype_size, d.k = (const char *)a->k + qk * (int64_t)p->dtype_size;
    d.v = (const char *)a->v + v * (int64_t)p->dtype_size, d.y = (char *)a->y + v * (int64_t)p->dtype_size;
    d.gate = a->gate + bt * (a->gate_kind == GDN_GATE_VECTOR ? a->Dk : 1);
    d.beta = a->beta + bt;
    d.mask = a->mask ? a->mask + t0 : NULL;
    d.cu_seqlens = NULL, d.state_slot = NULL, d.slots = 0;
    return d;
}

/* Sequence b of a per-sequence call as a validated dense B = 1 problem: its tokens and its slot's state (none for a
 * skipped sequence: it is judged, never run, as a call without state). *skipped: its slot is negative. */
static gdn_status sequence_problem(const gdn__problem *p, int64_t b, gdn__problem *seq, int *skipped) {
    const gdn_delta_args *a = &p->a;
    const int64_t t0 = a->cu_seqlens ? a->cu_seqlens[b] : b * a->T;
    const int64_t slot = a->state_slot ? a->state_slot[b] : b;
    const int64_t state = slot >= 0 ? slot * a->Hv * a->Dk * a->Dv : 0; /* (a skipped slot's offset is no size) */
    gdn_delta_args d = dense_from(p, t0, 1, a->cu_seqlens ? a->cu_seqlens[b + 1] - t0 : a->T);
    d.state_in = a->state_in && slot >= 0 ? a->state_in + state : NULL;
    d.state_out = a->state_out && slot >= 0 ? a->state_out + state : NULL;
    *skipped = slot < 0;
    return gdn__validate(&d, seq);
}

/* Sequence b of a per-sequence call (sequence_problem) and the kernel it takes (pick_kernel; where: for its errors). */
static gdn_status pick_sequence(const gdn__problem *p, int64_t b, const char *where, gdn__problem *seq, int *skipped,
                                const gdn__kernel **kn, const gdn__variant **variant) {
    const gdn_status s = sequence_problem(p, b, seq, skipped);
    return s != GDN_OK ? s : pick_kernel(seq, where, kn, variant);
}

/* The larger of two workspace sizes; -1 (too many bytes) when either is. */
static int64_t ws_max(int64_t x, int64_t y) { return x < 0 || y < 0 ? -1 : x > y ? x : y; }

/* Validates args into *p and picks the kernel the call runs (pick_kernel); for a per-sequence call, every sequence's
 * (each must take it), *out being the longest window's (the first of the longest), and *chunked 1 when every
 * sequence's is of the chunked contract (the call then runs as one batch of cuda_chunked's, the only one). *ws (ws
 * NULL: not asked for, as gdn_route does not): the largest host workspace of the kernels that run (-1: too large to
 * count). */
static gdn_status pick(const gdn_delta_args *args, gdn__problem *p, const gdn__kernel **out, const gdn__variant **variant,
                       int *chunked, int64_t *ws) {
    *variant = NULL;
    *chunked = 0;
    if (ws) *ws = 0;
    gdn_status s = gdn__validate(args, p);
    if (s != GDN_OK) return s;
    if (p->a.backend == GDN_BACKEND_CUDA && gdn__cuda_devices() == 0)
        return FAIL(GDN_ERR_NO_DEVICE, "args->backend is GDN_BACKEND_CUDA: no CUDA device (or a build without CUDA)");
    if (!per_sequence(&p->a)) {
        if ((s = pick_kernel(p, "", out, variant)) == GDN_OK && ws) *ws = (*out)->workspace(p);
        return s;
    }
    int64_t longest = 0;
    *chunked = 1;
    for (int64_t b = 0; b < p->a.B; ++b) {
        gdn__problem seq;
        const gdn__kernel *kn = NULL;
        const gdn__variant *v = NULL;
        char where[48];
        int skipped = 0;
        snprintf(where, sizeof where, " (sequence %lld)", (long long)b);
        if ((s = pick_sequence(p, b, where, &seq, &skipped, &kn, &v)) != GDN_OK) return s;
        if (seq.a.T > longest) longest = seq.a.T, *out = kn, *variant = v;
        *chunked &= kn->contract == GDN_CONTRACT_CHUNKED;
        if (!skipped && ws) *ws = ws_max(*ws, kn->workspace(&seq));
    }
    return GDN_OK;
}

static gdn_status run_kernel(const gdn__problem *p, const gdn__kernel *kn, const gdn__variant *variant) {
    const gdn_status s = kn->run(p, variant);
    return s == GDN_OK ? GDN_OK : FAIL(s, "kernel %s: %s", kn->name, gdn_status_str(s));
}

/* +0 into the y rows of a skipped sequence (zero bytes are +0 in every dtype). */
static gdn_status zero_y(const gdn__problem *seq) {
    const size_t bytes = (size_t)(seq->a.T * seq->a.Hv * seq->a.Dv) * seq->dtype_size;
    if (seq->a.backend == GDN_BACKEND_CPU) {
        memset(seq->a.y, 0, bytes);
        return GDN_OK;
    }
    const gdn_status s = gdn__cuda_zero(seq->a.y, bytes, seq->a.stream);
    return s == GDN_OK ? s : FAIL(s, "zeroing the y rows of a skipped sequence: %s", gdn_status_str(s));
}

/* A picked per-sequence call, a sequence at a time, each on its own kernel (pick took every one); the sequences b
 * with done[b] set (done NULL: none) are passed over. */
static gdn_status run_sequences(const gdn__problem *p, const uint8_t *done) {
    gdn_status s = GDN_OK;
    for (int64_t b = 0; b < p->a.B && s == GDN_OK; ++b) {
        gdn__problem seq;
        const gdn__kernel *kn = NULL;
        const gdn__variant *variant = NULL;
        int skipped = 0;
        if (done && done[b]) continue;
        if ((s = pick_sequence(p, b, "", &seq, &skipped, &kn, &variant)) != GDN_OK) break;
        seq.ws = p->ws, seq.ws_bytes = p->ws_bytes;
        s = skipped ? zero_y(&seq) : run_kernel(&seq, kn, variant);
    }
    return s;
}

/* Sequences b0 .. b0 + m - 1 of a batch-form call, consecutive and n tokens each, as one dense problem over the
 * pools (the slots travel beside it), into *chunk; its slots into slot[0 .. m - 1]. */
static gdn_status chunk_problem(const gdn__problem *p, int64_t b0, int64_t m, int64_t n, gdn__problem *chunk, int32_t *slot) {
    const gdn_delta_args *a = &p->a;
    const gdn_delta_args d = dense_from(p, a->cu_seqlens ? a->cu_seqlens[b0] : b0 * n, m, n);
    for (int64_t i = 0; i < m; ++i) slot[i] = a->state_slot ? a->state_slot[b0 + i] : (int32_t)(b0 + i);
    return gdn__validate(&d, chunk);
}

/* Whether a batch-form call may take the streamed decode kernel over its pools: CUDA, no kernel named (or
 * "fastest"), a scalar gate. */
static int slots_apply(const gdn_delta_args *a) {
    return a->backend == GDN_BACKEND_CUDA && (!a->kernel || strcmp(a->kernel, "fastest") == 0) &&
           a->gate_kind != GDN_GATE_VECTOR;
}

/* The number of tokens in sequence b's window of a batch-form call; *skipped: its slot is negative. */
static int64_t window_of(const gdn_delta_args *a, int64_t b, int *skipped) {
    *skipped = a->state_slot && a->state_slot[b] < 0;
    return a->cu_seqlens ? a->cu_seqlens[b + 1] - a->cu_seqlens[b] : a->T;
}

/* Sequences b0 .. b1 - 1 of a batch-form call (slots_apply), consecutive, every window n <= 8 tokens long, none
 * skipped: the streamed decode kernel over the pools, one launch per GDN_DEC_SLOTS sequences. Each sequence gets its
 * own dense call's bits (every kernel has the contract's). GDN_ERR_INELIGIBLE, nothing written, where it does not
 * apply: every launch is judged before the first. launch = 0: only judges. */
static gdn_status run_slots(const gdn__problem *p, int64_t b0, int64_t b1, int64_t n, int launch) {
    int32_t slot[GDN_DEC_SLOTS];
    gdn_status s = GDN_OK;
    for (int pass = 0; pass <= launch; ++pass) /* pass 0 judges every launch, pass 1 launches */
        for (int64_t b = b0; b < b1 && s == GDN_OK; b += GDN_DEC_SLOTS) {
            const int64_t m = b1 - b < GDN_DEC_SLOTS ? b1 - b : GDN_DEC_SLOTS;
            gdn__problem chunk;
            s = chunk_problem(p, b, m, n, &chunk, slot);
            if (s == GDN_OK) s = gdn__cuda_decode_stream_slots(&chunk, slot, pass);
            else if (!pass) s = GDN_ERR_INELIGIBLE;
            if (s != GDN_OK && pass) return FAIL(s, "kernel cuda_decode (batch form): %s", gdn_status_str(s));
        }
    return s == GDN_OK ? s : GDN_ERR_INELIGIBLE;
}

/* The batch form in one launch per GDN_DEC_SLOTS sequences where two or more windows have the same n <= 8 tokens,
 * none is skipped and slots_apply (run_slots). A batch of one runs as its own dense call, on the kernel the router
 * picks for it (cuda_window at the model's heads). */
static gdn_status run_batched(const gdn__problem *p, int launch) {
    const gdn_delta_args *a = &p->a;
    if (!slots_apply(a) || a->B < 2) return GDN_ERR_INELIGIBLE;
    int skipped = 0;
    const int64_t n = window_of(a, 0, &skipped);
    for (int64_t b = 0; b < a->B; ++b)
        if (window_of(a, b, &skipped) != n || skipped) return GDN_ERR_INELIGIBLE;
    return run_slots(p, 0, a->B, n, launch);
}

/* A CUDA batch-form call whose windows differ: under "fastest", those of the chunked contract (and not skipped) as
 * one cuda_chunked batch first: the call's largest work is queued on the stream while the host launches the others
 * (which picks those twice: a few microseconds each). Then each run of two or more consecutive windows of the same
 * n <= 8 tokens (decode steps, speculative windows) in one launch (run_slots), then the others a sequence at a time.
 * Each sequence gets its own call's bits (the chunked contract is batch-invariant; every exact kernel has the
 * contract's). The table of the sequences taken (B bytes) is the call's workspace (no CUDA kernel takes any). */
static gdn_status run_grouped(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    uint8_t *take = p->ws;
    if (!take || p->ws_bytes < a->B) return FAIL(GDN_ERR_OUT_OF_MEMORY, "the batch's sequence table (%lld bytes)", (long long)a->B);
    memset(take, 0, (size_t)a->B);
    int64_t n = 0;
    gdn_status s = GDN_OK;
    const int fastest = a->kernel && strcmp(a->kernel, "fastest") == 0;
    for (int64_t b = 0; fastest && b < a->B && s == GDN_OK; ++b) {
        gdn__problem seq;
        const gdn__kernel *kn = NULL;
        const gdn__variant *variant = NULL;
        int skipped = 0;
        if ((s = pick_sequence(p, b, "", &seq, &skipped, &kn, &variant)) == GDN_OK && !skipped &&
            kn->contract == GDN_CONTRACT_CHUNKED)
            take[b] = 1, ++n;
    }
    if (s == GDN_OK && n > 0 && (s = gdn__cuda_chunked_sequences(p, take)) != GDN_OK)
        s = FAIL(s, "kernel cuda_chunked (batch form): %s", gdn_status_str(s));
    for (int64_t b0 = 0, b1; slots_apply(a) && b0 < a->B && s == GDN_OK; b0 = b1) { /* runs b0 .. b1 - 1 */
        int skipped = 0;
        const int64_t w = window_of(a, b0, &skipped);
        b1 = b0 + 1;
        if (take[b0] || skipped || w > 8) continue;
        int skip_next = 0;
        while (b1 < a->B && !take[b1] && window_of(a, b1, &skip_next) == w && !skip_next) ++b1;
        if (b1 - b0 < 2) continue;
        const gdn_status r = run_slots(p, b0, b1, w, 1); /* judged whole before its first launch */
        if (r == GDN_OK) memset(take + b0, 1, (size_t)(b1 - b0));
        else if (r != GDN_ERR_INELIGIBLE) s = r;
    }
    if (s == GDN_OK) s = run_sequences(p, take);
    return s;
}

/* The call's host workspace: the largest of the sort that checks the slots written once, the kernels' (the largest
 * over a batch's windows: they run one after another in it) and a CUDA batch's table of sequences (run_grouped); its
 * device workspace: cuda_chunked's where it runs the call whole (a batch-form call that runs it on some windows only,
 * run_grouped, has it allocate its own, before its first launch). */
gdn_status gdn__delta_prepare(const gdn_delta_args *args, gdn__delta_call *c) {
    memset(c, 0, sizeof *c);
    int64_t ws = 0;
    gdn_status s = pick(args, &c->p, &c->kn, &c->variant, &c->chunked, &ws);
    if (s != GDN_OK) return s;
    const gdn__problem *p = &c->p;
    if (p->a.backend == GDN_BACKEND_CUDA && gdn__check_pointers() && (s = gdn__cuda_check_pointers(p)) != GDN_OK)
        return FAIL(s, "a tensor pointer is not device memory (GDN_CHECK_POINTERS=1)");
    ws = ws_max(ws, writers_bytes(&p->a));
    if (p->a.backend == GDN_BACKEND_CUDA && per_sequence(&p->a)) ws = ws_max(ws, p->a.B);
    const int chunked = c->chunked || (!per_sequence(&p->a) && c->kn->contract == GDN_CONTRACT_CHUNKED);
    c->dev_bytes = p->a.backend == GDN_BACKEND_CUDA && chunked ? gdn__cuda_chunked_bytes(p, NULL) : 0;
    if (ws < 0 || !gdn__size_fits(ws) || c->dev_bytes < 0)
        return FAIL(GDN_ERR_OUT_OF_MEMORY, "kernel %s: its workspace for this shape is too large to count", c->kn->name);
    c->ws_bytes = ws;
    return GDN_OK;
}

gdn_status gdn__delta_execute(gdn__delta_call *c, void *ws, void *dev_ws) {
    gdn__problem *p = &c->p;
    gdn_status s = check_writers(&p->a, ws);
    if (s != GDN_OK) return s;
    p->ws = ws, p->ws_bytes = ws ? c->ws_bytes : 0;
    p->dev_ws = dev_ws, p->dev_ws_bytes = dev_ws ? c->dev_bytes : 0;
    if (!per_sequence(&p->a)) s = run_kernel(p, c->kn, c->variant);
    else if (c->chunked) {
        if ((s = gdn__cuda_chunked_sequences(p, NULL)) != GDN_OK) s = FAIL(s, "kernel cuda_chunked (batch form): %s", gdn_status_str(s));
    } else if ((s = run_batched(p, 1)) == GDN_ERR_INELIGIBLE)
        s = p->a.backend == GDN_BACKEND_CUDA ? run_grouped(p) : run_sequences(p, NULL);
    return s;
}

/* Prepared, then run in a workspace kept between calls (src/cpu/workspace.c). */
gdn_status gdn_delta(const gdn_delta_args *args) {
    gdn__delta_call c;
    gdn_status s = gdn__delta_prepare(args, &c);
    if (s != GDN_OK) return s;
    size_t kept = 0;
    void *ws = c.ws_bytes > 0 ? gdn__ws_take((size_t)c.ws_bytes, &kept) : NULL;
    if (c.ws_bytes > 0 && !ws)
        return FAIL(GDN_ERR_OUT_OF_MEMORY, "the call's workspace (%lld bytes) could not be allocated", (long long)c.ws_bytes);
    s = gdn__delta_execute(&c, ws, NULL);
    gdn__ws_give(ws, kept);
    return s == GDN_OK ? gdn__ok() : s;
}

gdn_status gdn_route(const gdn_delta_args *args, const char **kernel_name) {
    if (!kernel_name) return gdn__fail(GDN_ERR_NULL_POINTER, "kernel_name is NULL");
    gdn__problem p;
    const gdn__kernel *kn = NULL;
    const gdn__variant *variant = NULL;
    int chunked = 0;
    gdn_status s = pick(args, &p, &kn, &variant, &chunked, NULL);
    if (s == GDN_OK) s = check_writers(&p.a, NULL);
    if (s == GDN_OK) *kernel_name = per_sequence(&p.a) && run_batched(&p, 0) == GDN_OK ? "cuda_decode" : kn->name;
    return s == GDN_OK ? gdn__ok() : s;
}

/* 0 for arguments that do not validate (and for an index out of range), as for a kernel of another backend; for a
 * per-sequence call, 1 when the kernel takes every sequence's window. */
int gdn_kernel_eligible(int index, const gdn_delta_args *args) {
    gdn__problem p;
    if (index < 0 || index >= gdn__kernel_total || gdn__validate(args, &p) != GDN_OK || check_writers(&p.a, NULL) != GDN_OK)
        return 0;
    const gdn__kernel *kn = &gdn__kernels[index];
    if (kn->backend != p.a.backend) return 0;
    if (!per_sequence(&p.a)) return kn->eligible(&p);
    for (int64_t b = 0; b < p.a.B; ++b) {
        gdn__problem seq;
        int skipped = 0;
        if (sequence_problem(&p, b, &seq, &skipped) != GDN_OK || !kn->eligible(&seq)) return 0;
    }
    return 1;
}
