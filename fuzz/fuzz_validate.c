/* libFuzzer target over the validators alone: gdn_layer_route, gdn_route and gdn_kernel_eligible with hostile sizes
 * (every size field drawn from the whole int64 range, weighted to the edges: 0, ±1, 2^k and its neighbours up to 2^63,
 * INT64_MIN, raw bits), hostile threads, slots, windows and checkpoints over small host arrays, and tensors that are
 * addresses never touched (64-byte aligned, 2^40 apart, some NULL). Built with the fuzzers (`make fuzz`, clang,
 * AddressSanitizer + UndefinedBehaviorSanitizer, -fno-sanitize-recover): a signed overflow in any size expression of a
 * validator aborts the run. The target also checks the validators' promise on every call they accept: every tensor's
 * byte count, the pools' and the state's of the shape, within 2^62 (computed here in 128 bits). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "gdn_testing.h"

#define FUZZ_NAME "fuzz_validate"
#include "fuzz_common.h"

enum { MAX_B = 4, MAX_CK = 3 };

/* A size: small, an edge of int64 (2^k - 1, 2^k, 2^k + 1 for k up to 63, the negatives), or raw bits. */
static int64_t size_of(reader *r) {
    const unsigned kind = rd(r) % 8;
    if (kind < 3) return 1 + (int64_t)(rd(r) % 48);
    if (kind < 6) {
        const unsigned k = rd(r) % 64, near = rd(r) % 3;
        const uint64_t p = (uint64_t)1 << k;
        const int64_t v = k == 63 ? (near == 0 ? INT64_MAX : near == 1 ? INT64_MIN : INT64_MIN + 1)
                                  : (int64_t)(p - 1 + near);
        return kind == 5 && rd(r) % 4 == 0 && v != INT64_MIN ? -v : v;
    }
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = bits << 8 | rd(r);
    return kind == 6 ? (int64_t)(bits >> (rd(r) % 64)) : (int64_t)bits;
}

static int32_t int32_of(reader *r);

/* Hv: Hk times 1 .. 3 (Hk where that leaves int64), or a size of its own. */
static int64_t hv_of(reader *r, int64_t Hk) {
    int64_t hv = 0;
    if (rd(r) % 2 == 0) return size_of(r);
    return __builtin_mul_overflow(Hk, (int64_t)(1 + rd(r) % 3), &hv) ? Hk : hv;
}

/* The next cu_seqlens entry: a window of 0 .. 4 tokens after `prev` (wrapping as int32), or any int32. */
static int32_t next_cu(reader *r, int32_t prev) {
    return rd(r) % 4 ? (int32_t)((uint32_t)prev + rd(r) % 5) : int32_of(r);
}

static int32_t int32_of(reader *r) {
    const int64_t v = size_of(r);
    return rd(r) % 2 ? (int32_t)(v % 64) : (int32_t)(uint32_t)(uint64_t)v;
}

/* The i-th fake tensor: never dereferenced; NULL for about one in 24. */
static void *fake(reader *r, int i) {
    if (rd(r) % 24 == 0) return NULL;
    return (void *)(((uintptr_t)1 << 44) + ((uintptr_t)i << 40));
}

typedef __int128 wide;
#define LIMIT ((wide)1 << 62)

static void layer_one(reader *r) {
    gdn_layer_args a;
    memset(&a, 0, sizeof a);
    int32_t cu[MAX_B + 1], slot[MAX_B], commit[MAX_B];
    uint8_t fresh[MAX_B];
    gdn_layer_checkpoint ck[MAX_CK];
    a.B = 1 + rd(r) % MAX_B;
    a.Hk = size_of(r), a.Hv = hv_of(r, a.Hk), a.Dk = size_of(r), a.Dv = size_of(r), a.slots = size_of(r);
    a.dtype = (gdn_dtype)(rd(r) % 4);
    const unsigned lay = rd(r); /* the state layout; the head map (2: not one, GDN_ERR_BAD_ENUM) */
    a.state_layout = (gdn_state_layout)(lay % 2);
    a.head_map = (gdn_head_map)((lay / 2) % 3);
    a.threads = rd(r) % 4 ? (int)(rd(r) % 4) : (int)int32_of(r);
    cu[0] = rd(r) % 8 ? 0 : int32_of(r);
    for (int64_t b = 0; b < a.B; ++b) {
        cu[b + 1] = next_cu(r, cu[b]);
        slot[b] = rd(r) % 4 ? (int32_t)(rd(r) % 8) - 1 : int32_of(r);
        commit[b] = rd(r) % 4 ? (int32_t)(rd(r) % 5) : int32_of(r);
        fresh[b] = (uint8_t)rd(r);
    }
    const unsigned arrays = rd(r);
    a.cu_seqlens = arrays & 1 ? NULL : cu;
    a.slot = arrays & 2 ? slot : NULL, a.commit = arrays & 4 ? commit : NULL, a.fresh = arrays & 8 ? fresh : NULL;
    if (arrays & 16) {
        a.n_checkpoints = 1 + rd(r) % MAX_CK;
        for (int64_t i = 0; i < a.n_checkpoints; ++i)
            ck[i] = (gdn_layer_checkpoint){rd(r) % 4 ? (int32_t)(rd(r) % (MAX_B + 1)) : int32_of(r),
                                           rd(r) % 4 ? (int32_t)(rd(r) % 6) : int32_of(r),
                                           rd(r) % 4 ? (int32_t)(rd(r) % 12) : int32_of(r)};
        a.checkpoints = ck;
    } else if (arrays & 32) {
        a.n_checkpoints = size_of(r); /* with no array: refused before any is read */
    }
    int i = 0;
    a.qkv = fake(r, i++), a.z = fake(r, i++), a.alpha = fake(r, i++), a.beta = fake(r, i++), a.y = fake(r, i++);
    a.conv_w = fake(r, i++), a.conv_bias = rd(r) % 2 ? fake(r, i++) : NULL, a.dt_bias = fake(r, i++);
    if (rd(r) % 2) a.A = fake(r, i++);
    else a.A_log = fake(r, i++);
    a.gamma = fake(r, i++), a.state = fake(r, i++), a.hist_in = fake(r, i++);
    a.hist_out = rd(r) % 2 ? (void *)a.hist_in : fake(r, i++);
    a.planes = rd(r) % 4 == 0 ? fake(r, i++) : NULL;
    a.backend = rd(r) % 8 == 0 ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
    const char *name = NULL;
    const gdn_status s = gdn_layer_route(&a, &name);
    if ((unsigned)s > GDN_ERR_RESERVED) FAIL("gdn_layer_route: status %d is no gdn_status", (int)s);
    if (s != GDN_OK) return;
    const wide ds = a.dtype == GDN_F32 ? 4 : 2, C = 2 * (wide)a.Hk * a.Dk + (wide)a.Hv * a.Dv, T = a.cu_seqlens[a.B];
    const wide bytes[] = {T * C * ds, T * a.Hv * a.Dv * ds, (wide)a.slots * a.Hv * a.Dk * a.Dv * 4, (wide)a.slots * C * 3 * ds,
                          C * 16, a.planes ? T * a.Hv * a.Dv * 49 / 16 * 4 : 0};
    for (size_t j = 0; j < sizeof bytes / sizeof bytes[0]; ++j)
        if (bytes[j] > LIMIT || bytes[j] < 0)
            FAIL("gdn_layer_route accepted Hk %lld Hv %lld Dk %lld Dv %lld slots %lld T %lld: tensor %zu is over 2^62 bytes",
                 (long long)a.Hk, (long long)a.Hv, (long long)a.Dk, (long long)a.Dv, (long long)a.slots, (long long)T, j);
    if (!name) FAIL("gdn_layer_route: GDN_OK without a kernel");
}

static void delta_one(reader *r) {
    gdn_delta_args a;
    memset(&a, 0, sizeof a);
    int32_t cu[MAX_B + 1], slot[MAX_B];
    const unsigned form = rd(r) % 3; /* 0 dense, 1 dense over slots, 2 the batch form */
    a.B = form == 0 ? size_of(r) : 1 + rd(r) % MAX_B;
    a.T = form == 2 && rd(r) % 2 ? 0 : size_of(r);
    a.Hk = size_of(r), a.Hv = hv_of(r, a.Hk), a.Dk = size_of(r), a.Dv = size_of(r);
    a.dtype = (gdn_dtype)(rd(r) % 4);
    a.gate_kind = (gdn_gate_kind)(rd(r) % 5);
    a.beta_kind = (gdn_beta_kind)(rd(r) % 2);
    const unsigned lay = rd(r); /* the state layout; the head map (2: not one, GDN_ERR_BAD_ENUM) */
    a.state_layout = (gdn_state_layout)(lay % 2);
    a.head_map = (gdn_head_map)((lay / 2) % 3);
    a.threads = rd(r) % 4 ? (int)(rd(r) % 4) : (int)int32_of(r);
    if (form >= 1) {
        for (int64_t b = 0; b < a.B; ++b) slot[b] = rd(r) % 4 ? (int32_t)(rd(r) % 8) - 1 : int32_of(r);
        a.state_slot = slot, a.slots = rd(r) % 2 ? 8 : size_of(r);
    }
    if (form == 2) {
        cu[0] = rd(r) % 8 ? 0 : int32_of(r);
        for (int64_t b = 0; b < a.B; ++b) cu[b + 1] = next_cu(r, cu[b]);
        a.cu_seqlens = cu;
        if (rd(r) % 2) a.state_slot = NULL, a.slots = 0;
    }
    int i = 0;
    a.q = fake(r, i++), a.k = fake(r, i++), a.v = fake(r, i++), a.y = fake(r, i++), a.gate = fake(r, i++);
    a.beta = fake(r, i++), a.A_log = fake(r, i++), a.dt_bias = fake(r, i++);
    a.mask = rd(r) % 2 ? fake(r, i++) : NULL;
    a.state_in = rd(r) % 2 ? fake(r, i++) : NULL;
    a.state_out = rd(r) % 3 == 0 ? (float *)a.state_in : rd(r) % 2 ? fake(r, i++) : NULL;
    a.backend = rd(r) % 8 == 0 ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
    a.scale = 1.0f;
    const char *name = NULL;
    const gdn_status s = gdn_route(&a, &name);
    if ((unsigned)s > GDN_ERR_RESERVED) FAIL("gdn_route: status %d is no gdn_status", (int)s);
    int eligible = 0;
    for (int k = 0; k < gdn_kernel_count(); ++k) eligible += gdn_kernel_eligible(k, &a);
    if (s != GDN_OK) return;
    if (eligible == 0 && a.backend == GDN_BACKEND_CPU) FAIL("gdn_route: GDN_OK, but no kernel is eligible");
    const wide ds = a.dtype == GDN_F32 ? 4 : 2, T = a.cu_seqlens ? a.cu_seqlens[a.B] : a.T;
    const wide tokens = a.cu_seqlens ? T : (wide)a.B * T, states = a.state_slot ? a.slots : a.B;
    const wide bytes[] = {tokens * a.Hk * a.Dk * ds, tokens * a.Hv * a.Dv * ds, tokens * a.Hv * a.Dk * 4,
                          states * a.Hv * a.Dk * a.Dv * 4};
    for (size_t j = 0; j < sizeof bytes / sizeof bytes[0]; ++j)
        if (bytes[j] > LIMIT || bytes[j] < 0)
            FAIL("gdn_route accepted B %lld T %lld Hk %lld Hv %lld Dk %lld Dv %lld: tensor %zu is over 2^62 bytes",
                 (long long)a.B, (long long)T, (long long)a.Hk, (long long)a.Hv, (long long)a.Dk, (long long)a.Dv, j);
}

static int fuzz_one(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    if (rd(&r) % 2) layer_one(&r);
    else delta_one(&r);
    return 0;
}
