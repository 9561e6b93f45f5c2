/* Every bad-argument path of gdn_delta: the exact status, the same status from gdn_route, and not one byte of
 * memory changed. All buffers live in one arena of 2 KiB slots (each buffer at the start of its slot), so
 * overlapping pointers stay inside one object and any stray write shows up in a byte-for-byte comparison. */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "gdn_case.h"
#include "harness.h"

/* Base problem: B=2, T=3, Hk=2, Hv=4, Dk=8, Dv=4, f32, raw gate, mask, state in and out. */
enum { B = 2, T = 3, HK = 2, HV = 4, DK = 8, DV = 4 };
enum { N_QK = B * T * HK * DK, N_V = B * T * HV * DV, N_BT = B * T * HV, N_STATE = B * HV * DK * DV };
enum { S_PAD0, S_Q, S_K, S_V, S_Y, S_GATE, S_BETA, S_MASK, S_ALOG, S_DT, S_SIN, S_SOUT, S_PAD1, N_SLOTS };
#define SLOT 2048

static _Alignas(64) unsigned char arena[N_SLOTS * SLOT];
static unsigned char snapshot[N_SLOTS * SLOT];

static float *slot(int s) { return (float *)(arena + (size_t)s * SLOT); }

static void fill_slot(int s, float value, size_t n) {
    for (size_t i = 0; i < n; ++i) slot(s)[i] = value + 0.001f * (float)(i % 7);
}

static gdn_delta_args base(void) {
    memset(arena, 0xa5, sizeof arena);
    fill_slot(S_Q, 0.25f, SLOT / 4);
    fill_slot(S_K, 0.125f, SLOT / 4);
    fill_slot(S_V, 0.5f, SLOT / 4);
    fill_slot(S_GATE, 0.9f, SLOT / 4);
    fill_slot(S_BETA, 0.5f, SLOT / 4);
    memset(slot(S_MASK), 1, SLOT);
    fill_slot(S_ALOG, 0.0f, SLOT / 4);
    fill_slot(S_DT, -2.0f, SLOT / 4);
    fill_slot(S_SIN, 0.1f, SLOT / 4);
    memset(slot(S_Y), 0xff, SLOT);
    memset(slot(S_SOUT), 0xff, SLOT);
    return (gdn_delta_args){.B = B, .T = T, .Hk = HK, .Hv = HV, .Dk = DK, .Dv = DV, .dtype = GDN_F32, .q = slot(S_Q),
                            .k = slot(S_K), .v = slot(S_V), .y = slot(S_Y), .gate_kind = GDN_GATE_RAW, .gate = slot(S_GATE),
                            .A_log = slot(S_ALOG), .dt_bias = slot(S_DT), .beta_kind = GDN_BETA_LOGIT, .beta = slot(S_BETA),
                            .mask = (const uint8_t *)slot(S_MASK), .state_layout = GDN_STATE_VK, .state_in = slot(S_SIN),
                            .state_out = slot(S_SOUT), .scale = 1.0f, .kernel = "ref"};
}

static int n_rejected, n_accepted;

/* Calls gdn_delta and gdn_route on `a`: both give `expect`; a rejected call changes no byte of the arena. */
static void expect_call(const gdn_delta_args *a, gdn_status expect, const char *what) {
    memcpy(snapshot, arena, sizeof arena);
    const char *name = NULL;
    const gdn_status routed = gdn_route(a, &name);
    CHECK(routed == expect, "%s: gdn_route returned \"%s\", expected \"%s\"", what, gdn_status_str(routed), gdn_status_str(expect));
    CHECK(memcmp(snapshot, arena, sizeof arena) == 0, "%s: gdn_route wrote memory", what);
    const gdn_status st = gdn_delta(a);
    CHECK(st == expect, "%s: gdn_delta returned \"%s\", expected \"%s\"", what, gdn_status_str(st), gdn_status_str(expect));
    if (expect != GDN_OK) {
        CHECK(memcmp(snapshot, arena, sizeof arena) == 0, "%s: a rejected call wrote memory", what);
        n_rejected++;
    } else {
        n_accepted++;
    }
}

#define EXPECT(status, what, ...)                                                                                      \
    do {                                                                                                               \
        gdn_delta_args a = base();                                                                                     \
        __VA_ARGS__;                                                                                                   \
        expect_call(&a, status, what);                                                                                 \
    } while (0)

/* byte offset into a slot, as a pointer of the needed type */
#define AT(s, bytes) ((void *)(arena + (ptrdiff_t)(s) * SLOT + (ptrdiff_t)(bytes)))

TEST(validation_null_pointers) {
    const char *name = NULL;
    CHECK(gdn_delta(NULL) == GDN_ERR_NULL_POINTER);
    CHECK(gdn_route(NULL, &name) == GDN_ERR_NULL_POINTER);
    EXPECT(GDN_OK, "the base problem", (void)0);
    EXPECT(GDN_ERR_NULL_POINTER, "q NULL", a.q = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "k NULL", a.k = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "v NULL", a.v = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "y NULL", a.y = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "gate NULL", a.gate = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "beta NULL", a.beta = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "A_log NULL with the raw gate", a.A_log = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "dt_bias NULL with the raw gate", a.dt_bias = NULL);
    EXPECT(GDN_ERR_NULL_POINTER, "q NULL, vector gate", a.gate_kind = GDN_GATE_VECTOR; a.q = NULL);
    /* optional pointers */
    EXPECT(GDN_OK, "A_log and dt_bias NULL with the decay gate", a.gate_kind = GDN_GATE_DECAY; a.A_log = a.dt_bias = NULL);
    EXPECT(GDN_OK, "mask NULL", a.mask = NULL);
    EXPECT(GDN_OK, "state_in NULL", a.state_in = NULL);
    EXPECT(GDN_OK, "state_out NULL", a.state_out = NULL);
    EXPECT(GDN_OK, "state_in and state_out NULL", a.state_in = NULL; a.state_out = NULL);
    EXPECT(GDN_OK, "kernel NULL (routed)", a.kernel = NULL);
}

TEST(validation_sizes) {
    const int64_t bad[] = {0, -1, INT64_MIN, -((int64_t)1 << 40)};
    static const char *field[] = {"B", "T", "Hk", "Hv", "Dk", "Dv"};
    for (int f = 0; f < 6; ++f)
        for (int i = 0; i < 4; ++i) {
            char what[64];
            snprintf(what, sizeof what, "%s = %lld", field[f], (long long)bad[i]);
            gdn_delta_args a = base();
            int64_t *sizes[6] = {&a.B, &a.T, &a.Hk, &a.Hv, &a.Dk, &a.Dv};
            *sizes[f] = bad[i];
            expect_call(&a, GDN_ERR_BAD_SIZE, what);
        }
    EXPECT(GDN_ERR_BAD_SIZE, "threads = -1", a.threads = -1);
    EXPECT(GDN_ERR_BAD_SIZE, "threads = INT_MIN", a.threads = INT_MIN);
    EXPECT(GDN_OK, "threads = 1", a.threads = 1);
    EXPECT(GDN_OK, "threads = 1000 (clamped to the pool)", a.threads = 1000);
    /* too large to address: the byte counts overflow int64 or size_t */
    EXPECT(GDN_ERR_BAD_SIZE, "T = INT64_MAX", a.T = INT64_MAX);
    EXPECT(GDN_ERR_BAD_SIZE, "B = T = 2^40", a.B = a.T = (int64_t)1 << 40);
    EXPECT(GDN_ERR_BAD_SIZE, "Dk = 2^62", a.Dk = (int64_t)1 << 62);
    EXPECT(GDN_ERR_BAD_SIZE, "Dv = 2^61", a.Dv = (int64_t)1 << 61);
    EXPECT(GDN_ERR_BAD_SIZE, "Hv = 2^62, Hk = 1", a.Hk = 1; a.Hv = (int64_t)1 << 62);
    EXPECT(GDN_ERR_BAD_SIZE, "state of 2^62 floats", a.B = (int64_t)1 << 31; a.T = 1; a.Dk = (int64_t)1 << 31);
    EXPECT(GDN_ERR_BAD_SIZE, "vector gate of 2^63 bytes", a.gate_kind = GDN_GATE_VECTOR; a.T = (int64_t)1 << 20;
           a.Hk = 1; a.Hv = (int64_t)1 << 20; a.Dk = (int64_t)1 << 20; a.Dv = 1);
}

/* state_slot_device: CUDA, the dense form, T <= 8, a scalar gate, slots >= 1, 4-byte aligned; each refused with its
 * field named and nothing written (the arena's slot words stand in for device memory: nothing reads them). */
TEST(validation_device_slots) {
    int32_t *slots = AT(S_PAD1, 0);
    EXPECT(GDN_ERR_UNSUPPORTED, "state_slot_device on the CPU", a.state_slot_device = slots; a.slots = 2);
    CHECK(strstr(gdn_last_error(), "state_slot_device") != NULL, "%s", gdn_last_error());
    EXPECT(GDN_ERR_BAD_SIZE, "state_slot_device with slots = 0", a.backend = GDN_BACKEND_CUDA; a.state_slot_device = slots);
    EXPECT(GDN_ERR_UNSUPPORTED, "state_slot_device with state_slot", a.backend = GDN_BACKEND_CUDA;
           a.state_slot_device = slots; a.state_slot = slots; a.slots = 2);
    EXPECT(GDN_ERR_UNSUPPORTED, "state_slot_device and T = 9", a.backend = GDN_BACKEND_CUDA; a.state_slot_device = slots;
           a.slots = 2; a.T = 9);
    EXPECT(GDN_ERR_UNSUPPORTED, "state_slot_device and a vector gate", a.backend = GDN_BACKEND_CUDA;
           a.state_slot_device = slots; a.slots = 2; a.gate_kind = GDN_GATE_VECTOR);
    EXPECT(GDN_ERR_ALIGNMENT, "state_slot_device misaligned", a.backend = GDN_BACKEND_CUDA;
           a.state_slot_device = AT(S_PAD1, 2); a.slots = 2);
    EXPECT(GDN_ERR_OVERLAP, "y over state_slot_device", a.backend = GDN_BACKEND_CUDA;
           a.state_slot_device = (const int32_t *)slot(S_Y); a.slots = 2);
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0)
        EXPECT(GDN_ERR_NO_DEVICE, "state_slot_device without a device", a.backend = GDN_BACKEND_CUDA;
               a.state_slot_device = slots; a.slots = 2; a.kernel = NULL);
}

TEST(validation_head_ratio) {
    EXPECT(GDN_ERR_HEAD_RATIO, "Hk = 3, Hv = 4", a.Hk = 3);
    EXPECT(GDN_ERR_HEAD_RATIO, "Hk = 8, Hv = 4", a.Hk = 8);
    EXPECT(GDN_ERR_HEAD_RATIO, "Hk = 4, Hv = 6", a.Hk = 4; a.Hv = 6);
    EXPECT(GDN_OK, "Hk = 1, Hv = 4", a.Hk = 1);
}

TEST(validation_enums) {
    EXPECT(GDN_ERR_BAD_ENUM, "dtype 3", a.dtype = (gdn_dtype)3);
    EXPECT(GDN_ERR_BAD_ENUM, "dtype -1", a.dtype = (gdn_dtype)-1);
    EXPECT(GDN_ERR_BAD_ENUM, "gate_kind 4", a.gate_kind = (gdn_gate_kind)4);
    EXPECT(GDN_ERR_BAD_ENUM, "gate_kind -1", a.gate_kind = (gdn_gate_kind)-1);
    EXPECT(GDN_ERR_BAD_ENUM, "beta_kind 2", a.beta_kind = (gdn_beta_kind)2);
    EXPECT(GDN_ERR_BAD_ENUM, "beta_kind INT_MAX", a.beta_kind = (gdn_beta_kind)INT_MAX);
    EXPECT(GDN_ERR_BAD_ENUM, "state_layout 2", a.state_layout = (gdn_state_layout)2);
    EXPECT(GDN_ERR_BAD_ENUM, "state_layout -5", a.state_layout = (gdn_state_layout)-5);
    EXPECT(GDN_ERR_BAD_ENUM, "backend 2", a.backend = (gdn_backend)2);
    EXPECT(GDN_ERR_BAD_ENUM, "backend -1", a.backend = (gdn_backend)-1);
    for (int d = GDN_F32; d <= GDN_BF16; ++d)
        for (int g = GDN_GATE_DECAY; g <= GDN_GATE_RAW; ++g)
            EXPECT(GDN_OK, "every valid dtype and gate kind", a.dtype = (gdn_dtype)d; a.gate_kind = (gdn_gate_kind)g;
                   a.state_layout = (gdn_state_layout)(g % 2); a.beta_kind = (gdn_beta_kind)(d % 2));
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) EXPECT(GDN_ERR_NO_DEVICE, "CUDA backend without a device", a.backend = GDN_BACKEND_CUDA);
}

TEST(validation_overlaps) {
    const int y_bytes = N_V * 4, qk_bytes = N_QK * 4, state_bytes = N_STATE * 4;
    static const struct { int slot, bytes; const char *name; } in[] = {
        {S_Q, N_QK * 4, "q"}, {S_K, N_QK * 4, "k"}, {S_V, N_V * 4, "v"}, {S_GATE, N_BT * 4, "gate"},
        {S_BETA, N_BT * 4, "beta"}, {S_MASK, B * T, "mask"}, {S_ALOG, HV * 4, "A_log"}, {S_DT, HV * 4, "dt_bias"},
        {S_SIN, N_STATE * 4, "state_in"}};
    char what[96];
    for (int i = 0; i < 9; ++i) {
        const int s = in[i].slot, n = in[i].bytes;
        /* y over the input: same start, inside, covering its last byte, covering its first byte */
        snprintf(what, sizeof what, "y == %s", in[i].name);
        EXPECT(GDN_ERR_OVERLAP, what, a.y = AT(s, 0));
        snprintf(what, sizeof what, "y over the last byte of %s", in[i].name);
        EXPECT(GDN_ERR_OVERLAP, what, a.y = AT(s, n - 1));
        snprintf(what, sizeof what, "y over the first byte of %s", in[i].name);
        EXPECT(GDN_ERR_OVERLAP, what, a.y = AT(s, 1 - y_bytes));
        /* state_out over the input */
        if (s != S_SIN) {
            snprintf(what, sizeof what, "state_out == %s", in[i].name);
            EXPECT(GDN_ERR_OVERLAP, what, a.state_out = AT(s, 0));
            snprintf(what, sizeof what, "state_out over the last byte of %s", in[i].name);
            EXPECT(GDN_ERR_OVERLAP, what, a.state_out = AT(s, n - 1));
            snprintf(what, sizeof what, "state_out over the first byte of %s", in[i].name);
            EXPECT(GDN_ERR_OVERLAP, what, a.state_out = AT(s, 4 - state_bytes));
        }
        /* just touching is not overlapping */
        snprintf(what, sizeof what, "y right after %s", in[i].name);
        EXPECT(GDN_OK, what, a.y = AT(s, n); if (n % 4) a.dtype = GDN_F16); /* y stays aligned to its element */
        snprintf(what, sizeof what, "y right before %s", in[i].name);
        EXPECT(GDN_OK, what, a.y = AT(s, -y_bytes));
    }
    /* the outputs against each other, and the state in place */
    EXPECT(GDN_ERR_OVERLAP, "y == state_out", a.y = a.state_out);
    EXPECT(GDN_ERR_OVERLAP, "y over the first float of state_out", a.y = AT(S_SOUT, 4 - y_bytes));
    EXPECT(GDN_ERR_OVERLAP, "y over the first float of state_out, state_in NULL", a.state_in = NULL; a.y = AT(S_SOUT, 4 - y_bytes));
    EXPECT(GDN_ERR_OVERLAP, "state_out one float after state_in", a.state_out = AT(S_SIN, 4));
    EXPECT(GDN_ERR_OVERLAP, "state_out one float before state_in", a.state_out = AT(S_SIN, -4));
    EXPECT(GDN_ERR_OVERLAP, "state_out over the last float of state_in", a.state_out = AT(S_SIN, state_bytes - 4));
    EXPECT(GDN_OK, "state_out right after state_in", a.state_out = AT(S_SIN, state_bytes));
    EXPECT(GDN_OK, "state_out == state_in (in place)", a.state_out = (float *)a.state_in);
    EXPECT(GDN_ERR_OVERLAP, "in place, with the state on q", a.state_in = (const float *)a.q; a.state_out = (float *)a.q);
    EXPECT(GDN_ERR_OVERLAP, "in place, with the state on beta", a.state_in = a.beta; a.state_out = (float *)a.beta);
    EXPECT(GDN_ERR_OVERLAP, "in place, with y on the state", a.state_out = (float *)a.state_in; a.y = AT(S_SIN, 8));
    /* inputs may alias each other */
    EXPECT(GDN_OK, "q == k", a.k = a.q);
    EXPECT(GDN_OK, "state_in == q", a.state_in = (const float *)a.q);
    EXPECT(GDN_OK, "A_log == dt_bias == gate", a.A_log = a.dt_bias = a.gate);
    /* extents follow the dtype, the gate kind and the mask's byte size */
    EXPECT(GDN_OK, "f16: y right after q", a.dtype = GDN_F16; a.y = AT(S_Q, qk_bytes / 2));
    EXPECT(GDN_ERR_OVERLAP, "f16: y over the last element of q", a.dtype = GDN_F16; a.y = AT(S_Q, qk_bytes / 2 - 2));
    EXPECT(GDN_ERR_OVERLAP, "bf16: y over the last element of v", a.dtype = GDN_BF16; a.y = AT(S_V, y_bytes / 2 - 2));
    EXPECT(GDN_OK, "scalar gate: y past its end", a.y = AT(S_GATE, N_BT * 4));
    EXPECT(GDN_ERR_OVERLAP, "vector gate: the same y is inside it", a.gate_kind = GDN_GATE_VECTOR; a.y = AT(S_GATE, N_BT * 4));
    EXPECT(GDN_ERR_OVERLAP, "vector gate: y over its last byte", a.gate_kind = GDN_GATE_VECTOR; a.y = AT(S_GATE, N_BT * DK * 4 - 1));
    EXPECT(GDN_OK, "vector gate: y right after it", a.gate_kind = GDN_GATE_VECTOR; a.y = AT(S_GATE, N_BT * DK * 4));
    EXPECT(GDN_OK, "A_log ignored by the decay gate: y on it", a.gate_kind = GDN_GATE_DECAY; a.y = AT(S_ALOG, 0));
    EXPECT(GDN_OK, "A_log ignored by the vector gate: state_out on it", a.gate_kind = GDN_GATE_VECTOR; a.state_out = AT(S_ALOG, 0));
    EXPECT(GDN_OK, "mask NULL: y where it was", a.mask = NULL; a.y = AT(S_MASK, 0));
    EXPECT(GDN_OK, "state_in NULL: state_out anywhere free", a.state_in = NULL; a.state_out = AT(S_SIN, 4));
    printf("     %d argument sets rejected with memory untouched, %d accepted\n", n_rejected, n_accepted);
}

/* Every tensor pointer must be aligned to its element: GDN_ERR_ALIGNMENT otherwise, checked after the overlaps. */
TEST(validation_alignment) {
    static const struct { int slot; const char *name; } f32_tensor[] = {
        {S_GATE, "gate"}, {S_BETA, "beta"}, {S_ALOG, "A_log"}, {S_DT, "dt_bias"}, {S_SIN, "state_in"}, {S_SOUT, "state_out"}};
    static const struct { int slot; const char *name; } io_tensor[] = {{S_Q, "q"}, {S_K, "k"}, {S_V, "v"}, {S_Y, "y"}};
    char what[96];
    for (int d = GDN_F32; d <= GDN_BF16; ++d)
        for (int i = 0; i < 4; ++i)
            for (int off = 1; off < 4; ++off) {
                const int es = d == GDN_F32 ? 4 : 2;
                snprintf(what, sizeof what, "%s %d bytes past a %d-byte boundary, %s", io_tensor[i].name, off, es,
                         d == GDN_F32 ? "f32" : d == GDN_F16 ? "f16" : "bf16");
                gdn_delta_args a = base();
                a.dtype = (gdn_dtype)d;
                const void **in[] = {&a.q, &a.k, &a.v};
                if (i < 3) *in[i] = AT(io_tensor[i].slot, off);
                else a.y = AT(S_Y, off);
                expect_call(&a, off % es ? GDN_ERR_ALIGNMENT : GDN_OK, what);
            }
    for (int i = 0; i < 6; ++i)
        for (int off = 1; off < 4; ++off) {
            snprintf(what, sizeof what, "%s %d bytes past a 4-byte boundary", f32_tensor[i].name, off);
            gdn_delta_args a = base();
            const float **in[] = {&a.gate, &a.beta, &a.A_log, &a.dt_bias, &a.state_in};
            if (i < 5) *in[i] = AT(f32_tensor[i].slot, off);
            else a.state_out = AT(S_SOUT, off);
            expect_call(&a, GDN_ERR_ALIGNMENT, what);
        }
    EXPECT(GDN_ERR_ALIGNMENT, "vector gate 2 bytes off", a.gate_kind = GDN_GATE_VECTOR; a.gate = AT(S_GATE, 2));
    EXPECT(GDN_ERR_ALIGNMENT, "in place, state 2 bytes off", a.state_in = AT(S_SIN, 2); a.state_out = AT(S_SIN, 2));
    EXPECT(GDN_ERR_ALIGNMENT, "state_in 1 byte off, state_out NULL", a.state_in = AT(S_SIN, 1); a.state_out = NULL);
    EXPECT(GDN_ERR_ALIGNMENT, "CUDA backend, q 1 byte off (validated before the device is asked)",
           a.backend = GDN_BACKEND_CUDA; a.q = AT(S_Q, 1));
    EXPECT(GDN_ERR_ALIGNMENT, "unknown kernel, y 2 bytes off (validated before the name)", a.kernel = "bogus"; a.y = AT(S_Y, 2));
    /* pointers the call does not read, and byte tensors, may sit anywhere */
    EXPECT(GDN_OK, "A_log and dt_bias 1 byte off, decay gate", a.gate_kind = GDN_GATE_DECAY; a.A_log = AT(S_ALOG, 1);
           a.dt_bias = AT(S_DT, 3));
    EXPECT(GDN_OK, "mask at an odd address", a.mask = AT(S_MASK, 1));
    EXPECT(GDN_OK, "every tensor 4 bytes past a 16-byte boundary", a.q = AT(S_Q, 4); a.k = AT(S_K, 4); a.v = AT(S_V, 4);
           a.y = AT(S_Y, 4); a.gate = AT(S_GATE, 4); a.beta = AT(S_BETA, 4); a.state_in = AT(S_SIN, 4); a.state_out = AT(S_SOUT, 4));
    EXPECT(GDN_OK, "bf16 q, k, v, y 2 bytes past a 16-byte boundary", a.dtype = GDN_BF16; a.q = AT(S_Q, 2);
           a.k = AT(S_K, 2); a.v = AT(S_V, 2); a.y = AT(S_Y, 2));
    /* an overlap is reported first */
    EXPECT(GDN_ERR_OVERLAP, "y 1 byte into q", a.y = AT(S_Q, 1));
    /* a misaligned call makes no kernel eligible */
    gdn_delta_args a = base();
    a.beta = AT(S_BETA, 2);
    for (int i = 0; i < gdn_kernel_count(); ++i) CHECK(!gdn_kernel_eligible(i, &a), "%s eligible for a misaligned beta", gdn_kernel_name(i));
    CHECK(strstr(gdn_status_str(GDN_ERR_ALIGNMENT), "aligned") != NULL);
}

TEST(validation_status_text) {
    const gdn_status known[] = {GDN_OK, GDN_ERR_NULL_POINTER, GDN_ERR_BAD_SIZE, GDN_ERR_HEAD_RATIO, GDN_ERR_BAD_ENUM,
                                GDN_ERR_OVERLAP, GDN_ERR_UNKNOWN_KERNEL, GDN_ERR_INELIGIBLE, GDN_ERR_NO_DEVICE,
                                GDN_ERR_DEVICE, GDN_ERR_OUT_OF_MEMORY, GDN_ERR_ALIGNMENT, GDN_ERR_UNSUPPORTED,
                                GDN_ERR_NOT_DEVICE_MEMORY};
    const int n = (int)(sizeof known / sizeof known[0]);
    const char *unknown = gdn_status_str((gdn_status)-1);
    CHECK(unknown != NULL && unknown[0] != '\0');
    CHECK(unknown && strcmp(unknown, gdn_status_str((gdn_status)999)) == 0, "one text for every unknown code");
    for (int i = 0; i < n; ++i) {
        const char *s = gdn_status_str(known[i]);
        CHECK(s != NULL && s[0] != '\0', "status %d has no text", (int)known[i]);
        if (!s || !unknown) continue;
        CHECK(strcmp(s, unknown) != 0, "status %d reads as unknown", (int)known[i]);
        for (int j = 0; j < i; ++j) CHECK(strcmp(s, gdn_status_str(known[j])) != 0, "statuses %d and %d share a text", i, j);
    }
}
