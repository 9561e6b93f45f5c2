/* libFuzzer target over the public gdn_delta (CPU backend; GDN_BACKEND_CUDA must answer GDN_ERR_NO_DEVICE on a
 * machine without a device).
 *
 * The input decides one call: shapes (small, so a call is cheap), options (dtype, gate and beta kinds, mask,
 * state layout, head map, state_in NULL or not, state_out NULL / separate / in place, threads, a forced kernel name valid
 * or not, backend, benign aliasing of inputs), values (typical, typical with hostile specials, specials only,
 * raw bit patterns) and, for some inputs, exactly one deliberate fault: a zero, negative or overflowing size,
 * threads < 0, a NULL pointer, Hv % Hk != 0, a bad enum, an output overlapping an input or the other output, a
 * tensor pointer off its element alignment.
 *
 * Every tensor lives in its own heap block laid out as [canary][head][tensor][tail][canary]; the canaries are
 * poisoned for ASan, head and tail are checked bytes too. The call must either
 *   - return the expected error status and change no byte of any block, or
 *   - return GDN_OK, leave every input and every byte around y and state_out as it was, and produce y and
 *     state_out bitwise equal (memcmp, NaN payloads included) to a one-thread `ref` call on the same inputs.
 *     The two calls prefill their outputs with different sentinels, so equality means every element was
 *     written by both. GDN_FUZZ_NAN_PAYLOAD=any relaxes this to "any NaN where ref has a NaN".
 * gdn_route must agree with gdn_delta's status and name an eligible kernel (the forced one, if any).
 * Any violation prints what differed and aborts, so libFuzzer keeps the input.
 *
 * Input layout: one byte per field in the order parse_call reads them (a missing byte reads as 0), then the
 * payload: the bytes that "specials" and "raw" values are drawn from (cycled).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"
#include "gdn.h"

#define FUZZ_NAME "fuzz_delta"
#include "fuzz_common.h"

/* ---- the call ---- */

enum fault {
    FAULT_NONE,
    FAULT_SIZE_NONPOSITIVE, /* one of B, T, Hk, Hv, Dk, Dv is 0 or negative */
    FAULT_SIZE_OVERFLOW,    /* sizes whose byte counts leave int64 (or the 2^62 limit) */
    FAULT_STATE_OVERFLOW,   /* B * Hv * Dk * Dv in (2^61, 2^62]: only the state's byte count overflows */
    FAULT_THREADS,          /* threads < 0 */
    FAULT_NULL,             /* a required pointer is NULL */
    FAULT_HEAD_RATIO,       /* Hv % Hk != 0 */
    FAULT_ENUM,             /* an enum out of range */
    FAULT_Y_OVERLAP,        /* y overlaps an input or state_out */
    FAULT_STATE_OVERLAP,    /* state_out overlaps an input other than (exactly) state_in */
    FAULT_INPLACE_ALIAS,    /* state_in == state_out == another input */
    FAULT_COUNT
};

static const char *const kernel_names[] = {"ref", "portable", "packed_avx2", "cuda_packed", "cuda_generic",
                                           "cuda_decode", "bogus", "", "REF", "ref "};

static int64_t pick_dim(reader *r, const int64_t *table, size_t n_table, int64_t small) {
    const unsigned b = rd(r);
    return b < 160 ? 1 + (int64_t)(b % (unsigned)small) : table[b % n_table];
}

static int kernel_index(const char *name) {
    for (int i = 0; i < gdn_kernel_count(); ++i)
        if (strcmp(gdn_kernel_name(i), name) == 0) return i;
    return -1;
}

static int fuzz_one(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    float *state_in_copy = NULL;

    /* shapes */
    static const int64_t dk_table[] = {32, 64, 96, 128, 128, 160, 256, 512, 513, 600, 31, 33, 127, 129};
    static const int64_t dv_table[] = {8, 16, 24, 32, 64, 128, 7, 9, 33};
    int64_t B = 1 + rd(&r) % 3, T = 1 + rd(&r) % 6, Hk = 1 + rd(&r) % 3, group = 1 + rd(&r) % 3;
    if (rd(&r) >= 224) T = 1 + rd(&r) % 48;
    int64_t Dk = pick_dim(&r, dk_table, COUNT(dk_table), 40);
    int64_t Dv = pick_dim(&r, dv_table, COUNT(dv_table), 24);
    /* keep one call near 2^16 state updates */
    while (B * T * Hk * group * Dk * Dv > (1 << 16)) {
        if (T > 1) T = (T + 1) / 2;
        else if (B > 1) B--;
        else if (group > 1) group--;
        else if (Hk > 1) Hk--;
        else Dv = (Dv + 1) / 2;
    }
    const int64_t Hv = Hk * group;

    /* options */
    const unsigned opt = rd(&r);
    gdn_delta_args a = {0};
    a.B = B, a.T = T, a.Hk = Hk, a.Hv = Hv, a.Dk = Dk, a.Dv = Dv;
    a.dtype = (gdn_dtype)(opt % 3);
    a.gate_kind = (gdn_gate_kind)((opt / 3) % 4);
    a.beta_kind = (gdn_beta_kind)((opt / 12) % 2);
    a.state_layout = (gdn_state_layout)((opt / 24) % 2);
    a.head_map = (gdn_head_map)((opt / 48) % 2);
    const unsigned state_opt = rd(&r);           /* state_in present? state_out NULL / separate / in place */
    const int has_state_in = state_opt % 2;
    const unsigned out_mode = (state_opt / 2) % 3; /* 0 NULL, 1 separate, 2 in place (separate if no state_in) */
    const unsigned mask_mode = rd(&r) % 4;        /* NULL, all ones, random, all zeros */
    a.threads = (int)(rd(&r) % 6);
    const unsigned kern = rd(&r);
    a.kernel = kern < 96 ? NULL : kernel_names[kern % COUNT(kernel_names)];
    a.backend = rd(&r) >= 240 ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
    const unsigned alias = rd(&r); /* benign aliasing: bit 0 k = q, bit 1 beta = gate, bit 2 A_log/dt_bias in y;
                                    * bits 3-5 all set (and no fault): one tensor misaligned, see below */
    const unsigned skew = rd(&r);  /* bit i: misalign tensor i by one element */
    const unsigned scale_sel = rd(&r);
    const unsigned modes = rd(&r) | rd(&r) << 8 | rd(&r) << 16; /* 2 bits of value mode per tensor */
    const unsigned fault_sel = rd(&r), fault_arg = rd(&r), fault_arg2 = rd(&r);
    const uint64_t seed = (uint64_t)rd(&r) | (uint64_t)rd(&r) << 8 | (uint64_t)rd(&r) << 16;
    source src = {data + r.i, size - r.i, 0, seed};
    const enum fault fault = fault_sel < 176 ? FAULT_NONE : (enum fault)(1 + (fault_sel - 176) % (FAULT_COUNT - 1));

    static const uint32_t scale_bits[] = {0x3f800000u, 0x3e000000u, 0x3db504f3u, 0x00000000u, 0x80000000u,
                                          0x7149f2cau, 0xc0000000u, 0x00000001u, 0x7f800000u, 0x7fc00000u};
    a.scale = scale_sel < 128 ? 1.0f : gdn__bits_f32(scale_bits[scale_sel % COUNT(scale_bits)]);
    if (scale_sel >= 250) {
        uint32_t bits = payload_byte(&src) | payload_byte(&src) << 8 | payload_byte(&src) << 16 | (uint32_t)payload_byte(&src) << 24;
        a.scale = gdn__bits_f32(bits);
    }

    /* tensors */
    const size_t ds = esize(a.dtype);
    const size_t tokens = (size_t)(B * T);
    const size_t qk_bytes = tokens * (size_t)(Hk * Dk) * ds, vy_bytes = tokens * (size_t)(Hv * Dv) * ds;
    const size_t gate_bytes = tokens * (size_t)Hv * (a.gate_kind == GDN_GATE_VECTOR ? (size_t)Dk : 1) * 4;
    const size_t beta_bytes = tokens * (size_t)Hv * 4, state_bytes = (size_t)(B * Hv * Dk * Dv) * 4;
    size_t big = qk_bytes > vy_bytes ? qk_bytes : vy_bytes;
    if (state_bytes > big) big = state_bytes;
    if (gate_bytes > big) big = gate_bytes;
    /* every block has room after its tensor for any output aliased onto it */
    const size_t tail = 16 + (fault == FAULT_Y_OVERLAP || fault == FAULT_STATE_OVERLAP || fault == FAULT_INPLACE_ALIAS ? big : 0);
    const int raw = a.gate_kind == GDN_GATE_RAW;
    const vkind gate_kind_v = a.gate_kind == GDN_GATE_LOG_DECAY ? V_LOG_DECAY : a.gate_kind == GDN_GATE_RAW ? V_RAW_GATE : V_DECAY;

    block *bq = block_new(qk_bytes, skew & 1 ? ds : 0, tail);
    fill(bq->tensor, a.dtype, (int64_t)(qk_bytes / ds), V_QK, modes, &src);
    block *bk = NULL;
    if (alias & 1) {
        a.k = bq->tensor;
    } else {
        bk = block_new(qk_bytes, skew & 2 ? ds : 0, tail);
        fill(bk->tensor, a.dtype, (int64_t)(qk_bytes / ds), V_QK, modes >> 2, &src);
        a.k = bk->tensor;
    }
    a.q = bq->tensor;
    block *bv = block_new(vy_bytes, skew & 4 ? ds : 0, tail);
    fill(bv->tensor, a.dtype, (int64_t)(vy_bytes / ds), V_V, modes >> 4, &src);
    a.v = bv->tensor;
    block *bg = block_new(gate_bytes, skew & 8 ? 4 : 0, tail);
    fill(bg->tensor, GDN_F32, (int64_t)(gate_bytes / 4), gate_kind_v, modes >> 6, &src);
    a.gate = (const float *)bg->tensor;
    if ((alias & 2) && a.gate_kind != GDN_GATE_VECTOR && a.beta_kind == GDN_BETA_LOGIT) {
        a.beta = a.gate;
    } else {
        block *bb = block_new(beta_bytes, skew & 16 ? 4 : 0, tail);
        fill(bb->tensor, GDN_F32, (int64_t)(beta_bytes / 4), a.beta_kind == GDN_BETA_LOGIT ? V_BETA_LOGIT : V_BETA_DIRECT,
             modes >> 8, &src);
        a.beta = (const float *)bb->tensor;
    }
    block *by = block_new(vy_bytes, skew & 32 ? ds : 0, tail);
    memset(by->tensor, 0xa5, vy_bytes);
    a.y = by->tensor;
    if (raw) {
        block *ba = block_new((size_t)Hv * 4, 0, tail), *bd = block_new((size_t)Hv * 4, skew & 64 ? 4 : 0, tail);
        fill(ba->tensor, GDN_F32, Hv, V_PARAM, modes >> 10, &src);
        fill(bd->tensor, GDN_F32, Hv, V_PARAM, modes >> 12, &src);
        a.A_log = (const float *)ba->tensor, a.dt_bias = (const float *)bd->tensor;
    } else if (alias & 4) {
        a.A_log = a.dt_bias = (const float *)a.y; /* ignored unless GDN_GATE_RAW */
    }
    if (mask_mode != 0) {
        block *bm = block_new(tokens, skew & 128 ? 1 : 0, tail);
        for (size_t t = 0; t < tokens; ++t)
            bm->tensor[t] = mask_mode == 1 ? 1 : mask_mode == 3 ? 0 : (rng_next(&src) & 3) ? (uint8_t)(1 + payload_byte(&src) % 255) : 0;
        a.mask = bm->tensor;
    }
    block *bs = NULL, *bo = NULL;
    if (has_state_in) {
        bs = block_new(state_bytes, 0, tail);
        fill(bs->tensor, GDN_F32, (int64_t)(state_bytes / 4), V_STATE, modes >> 14, &src);
        a.state_in = (const float *)bs->tensor;
    }
    if (out_mode == 2 && bs) {
        a.state_out = (float *)bs->tensor;
    } else if (out_mode != 0) {
        bo = block_new(state_bytes, 0, tail);
        memset(bo->tensor, 0xa5, state_bytes);
        a.state_out = (float *)bo->tensor;
    }

    /* the fault, and the status the call must return */
    gdn_status expect = GDN_OK;
    switch (fault) {
    case FAULT_NONE: break;
    case FAULT_SIZE_NONPOSITIVE: {
        static const int64_t bad[] = {0, -1, -32, INT64_MIN};
        int64_t *dims[] = {&a.B, &a.T, &a.Hk, &a.Hv, &a.Dk, &a.Dv};
        *dims[fault_arg % 6] = bad[fault_arg2 % 4];
        expect = GDN_ERR_BAD_SIZE;
        break;
    }
    case FAULT_SIZE_OVERFLOW: {
        /* a dimension (Hv with Hk = 1 so the ratio holds) so large that some byte count exceeds 2^63 */
        static const int64_t huge[] = {(int64_t)1 << 62, INT64_MAX, (int64_t)1 << 40, (int64_t)3 << 61, (int64_t)1 << 32};
        const int64_t h = huge[fault_arg2 % 5];
        switch (fault_arg % 5) {
        case 0: a.B = h, a.T = h; break;
        case 1: a.T = h, a.Dk = h; break;
        case 2: a.Hk = 1, a.Hv = h, a.Dv = h; break;
        case 3: a.Dk = h, a.Dv = h; break;
        default: a.B = h, a.Dv = h; break;
        }
        expect = GDN_ERR_BAD_SIZE;
        break;
    }
    case FAULT_STATE_OVERFLOW:
        /* B Hv Dk Dv = 2^61 or 2^62 elements: in range as a count, past 2^63 as bytes; q, k, v stay small */
        a.B = (int64_t)1 << 20, a.T = 1, a.Hk = 1, a.Hv = 1, a.Dk = (int64_t)1 << (fault_arg % 2 ? 21 : 22), a.Dv = (int64_t)1 << 20;
        expect = GDN_ERR_BAD_SIZE;
        break;
    case FAULT_THREADS:
        a.threads = fault_arg % 2 ? -1 : INT32_MIN;
        expect = GDN_ERR_BAD_SIZE;
        break;
    case FAULT_NULL: {
        const unsigned which = fault_arg % (raw ? 8 : 6);
        if (which == 0) a.q = NULL;
        else if (which == 1) a.k = NULL;
        else if (which == 2) a.v = NULL;
        else if (which == 3) a.y = NULL;
        else if (which == 4) a.gate = NULL;
        else if (which == 5) a.beta = NULL;
        else if (which == 6) a.A_log = NULL;
        else a.dt_bias = NULL;
        expect = GDN_ERR_NULL_POINTER;
        break;
    }
    case FAULT_HEAD_RATIO:
        /* buffers are as allocated for the real shape: a call that accepted this would read past them */
        if (fault_arg % 2) a.Hk = Hv + 1;              /* Hv < Hk */
        else if (Hv % (Hk + 1) != 0) a.Hk = Hk + 1;
        else if (Hk > 1) a.Hv = Hv + 1;               /* (Hv + 1) % Hk == 1 */
        else a.Hk = 2, a.Hv = 3;
        expect = GDN_ERR_HEAD_RATIO;
        break;
    case FAULT_ENUM: {
        static const int bad[] = {3, 4, 2, -1, 1000, 0x7fffffff};
        const int v = bad[fault_arg2 % 6];
        switch (fault_arg % 6) {
        case 0: a.dtype = (gdn_dtype)(v == 2 ? 3 : v); break;
        case 1: a.gate_kind = (gdn_gate_kind)(v < 4 && v >= 0 ? 4 : v); break;
        case 2: a.beta_kind = (gdn_beta_kind)(v < 2 && v >= 0 ? 2 : v); break;
        case 3: a.state_layout = (gdn_state_layout)(v < 2 && v >= 0 ? 2 : v); break;
        case 4: a.head_map = (gdn_head_map)(v < 2 && v >= 0 ? 2 : v); break;
        default: a.backend = (gdn_backend)(v < 2 && v >= 0 ? 2 : v); break;
        }
        expect = GDN_ERR_BAD_ENUM;
        break;
    }
    case FAULT_Y_OVERLAP:
    case FAULT_STATE_OVERLAP:
    case FAULT_INPLACE_ALIAS: {
        /* the inputs an output may be aimed at (state_in only for y: state_out == state_in is legal) */
        const void *targets[9];
        size_t target_bytes[9];
        int n = 0;
        const int want_f32 = fault == FAULT_INPLACE_ALIAS;
        if (!want_f32 || a.dtype == GDN_F32) {
            targets[n] = a.q, target_bytes[n++] = qk_bytes;
            targets[n] = a.k, target_bytes[n++] = qk_bytes;
            targets[n] = a.v, target_bytes[n++] = vy_bytes;
        }
        targets[n] = a.gate, target_bytes[n++] = gate_bytes;
        targets[n] = a.beta, target_bytes[n++] = beta_bytes;
        if (raw) targets[n] = a.A_log, target_bytes[n++] = (size_t)Hv * 4;
        if (a.mask && !want_f32) targets[n] = a.mask, target_bytes[n++] = tokens;
        if (a.state_in && fault == FAULT_Y_OVERLAP) targets[n] = a.state_in, target_bytes[n++] = state_bytes;
        if (a.state_out && fault == FAULT_Y_OVERLAP) targets[n] = a.state_out, target_bytes[n++] = state_bytes;
        if (fault == FAULT_STATE_OVERLAP && a.state_in && (fault_arg2 & 1)) {
            /* state_out partially over state_in: shifted by a nonzero number of floats either way */
            const int64_t shift = 1 + (int64_t)(fault_arg % 15);
            const int64_t delta = (fault_arg2 & 2) && shift <= HEAD / 4 ? -shift : shift;
            if ((size_t)((delta > 0 ? delta : -delta) * 4) < state_bytes) {
                a.state_out = (float *)a.state_in + delta;
                expect = GDN_ERR_OVERLAP;
                break;
            }
        }
        const unsigned t = fault_arg % (unsigned)n;
        const size_t out_es = fault == FAULT_Y_OVERLAP ? ds : 4;
        const size_t out_bytes = fault == FAULT_Y_OVERLAP ? vy_bytes : state_bytes;
        /* offset from the target's start: in [-HEAD, target_bytes), rounded down to the output's alignment */
        int64_t delta = want_f32 ? 0 : (int64_t)(fault_arg2 % (HEAD + target_bytes[t] + 1)) - HEAD;
        if (delta <= -(int64_t)out_bytes) delta = 0;
        uintptr_t p = ((uintptr_t)targets[t] + (uintptr_t)delta) & ~(uintptr_t)(out_es - 1);
        if (p >= (uintptr_t)targets[t] + target_bytes[t]) p = (uintptr_t)targets[t] & ~(uintptr_t)(out_es - 1);
        if (p + out_bytes <= (uintptr_t)targets[t]) p += out_es; /* rounding down moved it just below the target */
        if (fault == FAULT_Y_OVERLAP) a.y = (void *)p;
        else a.state_out = (float *)p;
        if (fault == FAULT_INPLACE_ALIAS) a.state_in = a.state_out;
        expect = GDN_ERR_OVERLAP;
        break;
    }
    case FAULT_COUNT: break;
    }
    if (fault == FAULT_NONE && (alias & 0x38) == 0x38) {
        /* one tensor the call reads or writes moved 1-3 bytes inside its block, off its element alignment (the
         * in-place state moves as one) */
        const uint8_t *targets[10] = {a.q, a.k, a.v, a.y, (const uint8_t *)a.gate, (const uint8_t *)a.beta};
        int n = 6;
        if (raw) targets[n++] = (const uint8_t *)a.A_log, targets[n++] = (const uint8_t *)a.dt_bias;
        if (a.state_in) targets[n++] = (const uint8_t *)a.state_in;
        if (a.state_out) targets[n++] = (const uint8_t *)a.state_out;
        const uint8_t *t = targets[fault_arg % (unsigned)n];
        const size_t es = t == a.q || t == a.k || t == a.v || t == a.y ? ds : 4;
        const size_t off = (1 + fault_arg2 % 3) % es ? 1 + fault_arg2 % 3 : 1;
        const int in_place = a.state_in && a.state_in == a.state_out && t == (const uint8_t *)a.state_in;
        if (t == a.q) a.q = t + off;
        else if (t == a.k) a.k = t + off;
        else if (t == a.v) a.v = t + off;
        else if (t == a.y) a.y = (uint8_t *)a.y + off;
        else if (t == (const uint8_t *)a.gate) a.gate = (const float *)(t + off);
        else if (t == (const uint8_t *)a.beta) a.beta = (const float *)(t + off);
        else if (t == (const uint8_t *)a.A_log) a.A_log = (const float *)(t + off);
        else if (t == (const uint8_t *)a.dt_bias) a.dt_bias = (const float *)(t + off);
        else if (t == (const uint8_t *)a.state_in) a.state_in = (const float *)(t + off);
        else a.state_out = (float *)((uint8_t *)a.state_out + off);
        if (in_place) a.state_out = (float *)((uint8_t *)a.state_out + off);
        expect = GDN_ERR_ALIGNMENT;
    }
    if (expect == GDN_OK) {
        if (a.backend == GDN_BACKEND_CUDA) {
            if (gdn_device_count(GDN_BACKEND_CUDA) != 0) goto done; /* this target covers the CPU backend only */
            expect = GDN_ERR_NO_DEVICE;
        } else if (a.kernel) {
            const int idx = kernel_index(a.kernel);
            expect = idx < 0 ? GDN_ERR_UNKNOWN_KERNEL : gdn_kernel_eligible(idx, &a) ? GDN_OK : GDN_ERR_INELIGIBLE;
        }
    }

    /* keep pristine copies of what the reference call needs, then call */
    if (expect == GDN_OK && a.state_in) {
        state_in_copy = malloc(state_bytes);
        if (!state_in_copy) FAIL("out of memory");
        memcpy(state_in_copy, a.state_in, state_bytes);
    }
    blocks_snapshot();
    const char *routed = NULL;
    const gdn_status route_status = gdn_route(&a, &routed);
    const gdn_status status = gdn_delta(&a);
    blocks_check_canaries();
    if (status != expect)
        FAIL("status %d (%s), expected %d (fault %d, kernel %s, B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld)", status,
             gdn_status_str(status), expect, fault, a.kernel ? a.kernel : "(router)", (long long)a.B, (long long)a.T,
             (long long)a.Hk, (long long)a.Hv, (long long)a.Dk, (long long)a.Dv);
    if (route_status != status) FAIL("gdn_route says %d, gdn_delta %d", route_status, status);
    if (status == GDN_OK) {
        const int idx = routed ? kernel_index(routed) : -1;
        if (idx < 0 || !gdn_kernel_eligible(idx, &a) || (a.kernel && strcmp(a.kernel, routed) != 0))
            FAIL("gdn_route named %s", routed ? routed : "(null)");
    }

    if (status != GDN_OK) {
        for (int i = 0; i < n_blocks; ++i)
            if (!block_same(&blocks[i], 0, blocks[i].bytes)) FAIL("status %d but block %d changed", status, i);
        goto done;
    }

    /* success: inputs untouched, nothing written around the outputs */
    for (int i = 0; i < n_blocks; ++i) {
        block *b = &blocks[i];
        if (b == by || b == block_of(a.state_out)) {
            const size_t off = (size_t)(b->tensor - b->data);
            const size_t len = b == by ? vy_bytes : state_bytes;
            if (!block_same(b, 0, off) || !block_same(b, off + len, b->bytes)) FAIL("bytes around an output changed");
        } else if (!block_same(b, 0, b->bytes)) {
            FAIL("input block %d changed", i);
        }
    }

    /* the reference: one thread, `ref`, fresh outputs with another sentinel */
    {
        gdn_delta_args ra = a;
        uint8_t *ry = malloc(vy_bytes);
        float *rs = malloc(state_bytes);
        if (!ry || !rs) FAIL("out of memory");
        memset(ry, 0x5a, vy_bytes);
        memset(rs, 0x5a, state_bytes);
        ra.y = ry, ra.state_in = state_in_copy, ra.state_out = rs;
        ra.kernel = "ref", ra.threads = 1;
        const gdn_status rst = gdn_delta(&ra);
        if (rst != GDN_OK) FAIL("ref call failed: %d", rst);
        compare_with_ref("y", a.y, ry, vy_bytes / ds, a.dtype, routed, a.threads);
        if (a.state_out) compare_with_ref("state", a.state_out, rs, state_bytes / 4, GDN_F32, routed, a.threads);
        free(ry);
        free(rs);
    }
done:
    free(state_in_copy);
    blocks_free();
    return 0;
}
