/* What the libFuzzer targets share (fuzz_delta.c, fuzz_layer.c): reading the input, drawing values (typical,
 * specials, raw bits), guarded heap blocks (canaries poisoned for ASan, snapshots to prove nothing was written),
 * and the bitwise comparison with ref (NaN payloads optionally relaxed). Define FUZZ_NAME before including it. */
#ifndef GDN_FUZZ_COMMON_H
#define GDN_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define FUZZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#endif
#endif
#ifndef FUZZ_POISON
#define FUZZ_POISON(p, n) ((void)(p), (void)(n))
#define FUZZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define FAIL(...)                                                                                              \
    do {                                                                                                       \
        fprintf(stderr, FUZZ_NAME ": " __VA_ARGS__);                                                           \
        fprintf(stderr, "\n");                                                                                 \
        abort();                                                                                               \
    } while (0)

/* ---- input reading ---- */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static inline unsigned rd(reader *r) { return r->i < r->n ? r->p[r->i++] : 0u; }

/* Value source: the payload bytes cycled, and a splitmix64 stream for typical values. */
typedef struct source {
    const uint8_t *p;
    size_t n, i;
    uint64_t rng;
} source;

static inline uint64_t rng_next(source *s) { return gdn__splitmix64(&s->rng); }

static inline unsigned payload_byte(source *s) {
    if (s->n == 0) return (unsigned)(rng_next(s) & 0xff);
    return s->p[s->i++ % s->n];
}

static inline float uniform01(source *s) { return (float)(rng_next(s) >> 40) * (1.0f / 16777216.0f); }

/* Roughly normal (sum of four uniforms, centred, unit variance). */
static inline float normalish(source *s) {
    return (uniform01(s) + uniform01(s) + uniform01(s) + uniform01(s) - 2.0f) * 1.7320508f;
}

/* ---- values ---- */

typedef enum vkind { V_QK, V_V, V_DECAY, V_LOG_DECAY, V_RAW_GATE, V_PARAM, V_BETA_DIRECT, V_BETA_LOGIT, V_STATE } vkind;

/* f32 specials: zeros, ones, infinities, quiet/signalling/negative NaNs with payloads, extremes, subnormals,
 * the f16 overflow edge, exp overflow/underflow edges, the softplus threshold. */
static const uint32_t special_f32[] = {
    0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x3f000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
    0x7fa12345u, 0xffc00001u, 0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x00000001u, 0x807fffffu, 0x7149f2cau,
    0xf149f2cau, 0x0da24260u, 0x477fe000u, 0x477ff000u, 0x42b17218u, 0xc2cff0a4u, 0x41a00000u, 0x41a00001u,
    0x3f7fffffu, 0x501502f9u, 0xd01502f9u, 0x40000000u, 0x7fbfffffu, 0x3e000000u, 0x00400000u, 0xc2ae999au};
static const uint16_t special_f16[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x7c00, 0xfc00, 0x7e00,
                                       0x7d01, 0xfe01, 0x7bff, 0xfbff, 0x0400, 0x0001, 0x83ff, 0x4000};
static const uint16_t special_bf16[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3f00, 0x7f80, 0xff80, 0x7fc0,
                                        0x7fa1, 0xffc1, 0x7f7f, 0xff7f, 0x0080, 0x0001, 0x807f, 0x4000};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static inline float typical(vkind kind, source *s) {
    switch (kind) {
    case V_QK: return 0.3f * normalish(s);
    case V_DECAY: return uniform01(s);
    case V_LOG_DECAY: return -3.0f * uniform01(s);
    case V_RAW_GATE: return 2.0f * normalish(s);
    case V_BETA_DIRECT: return uniform01(s);
    case V_BETA_LOGIT: return 2.0f * normalish(s);
    case V_STATE: return 0.3f * normalish(s);
    default: return normalish(s);
    }
}

/* n elements of dtype `dt` (f32 for every non-q/k/v tensor) in `mode`: 0 typical, 1 typical with one in eight
 * a special, 2 specials only, 3 raw bit patterns. */
static inline void fill(void *dst, gdn_dtype dt, int64_t n, vkind kind, unsigned mode, source *s) {
    for (int64_t e = 0; e < n; ++e) {
        unsigned m = mode & 3u;
        if (m == 1) m = (rng_next(s) & 7u) == 0 ? 2u : 0u;
        if (dt == GDN_F32) {
            uint32_t bits;
            if (m == 0) bits = gdn__f32_bits(typical(kind, s));
            else if (m == 2) bits = special_f32[payload_byte(s) % COUNT(special_f32)];
            else bits = payload_byte(s) | payload_byte(s) << 8 | payload_byte(s) << 16 | (uint32_t)payload_byte(s) << 24;
            memcpy((uint8_t *)dst + 4 * e, &bits, 4);
        } else {
            uint16_t bits;
            if (m == 0) {
                const float x = typical(kind, s);
                bits = dt == GDN_F16 ? gdn__f32_to_f16(x) : gdn__f32_to_bf16(x);
            } else if (m == 2) {
                const unsigned i = payload_byte(s);
                bits = dt == GDN_F16 ? special_f16[i % COUNT(special_f16)] : special_bf16[i % COUNT(special_bf16)];
            } else {
                bits = (uint16_t)(payload_byte(s) | payload_byte(s) << 8);
            }
            memcpy((uint8_t *)dst + 2 * e, &bits, 2);
        }
    }
}

/* ---- guarded blocks ---- */

#define CANARY 64 /* poisoned bytes on each side of a block */
#define HEAD 64   /* checked bytes before the tensor (room for an output that starts below an input) */
#define MAX_BLOCKS 16

typedef struct block {
    uint8_t *mem;          /* [CANARY][data: bytes][CANARY] */
    uint8_t *data, *snap;  /* data region and its copy taken before the call */
    size_t bytes;
    uint8_t *tensor;       /* data + HEAD + misalignment */
    size_t tensor_bytes;
} block;

static block blocks[MAX_BLOCKS];
static int n_blocks;

static inline uint8_t canary_byte(size_t i) { return (uint8_t)(0xc3u ^ (i * 37u)); }

/* A block holding a tensor of `bytes`, misaligned by `skew` bytes, with `tail` checked bytes after it. */
static inline block *block_new(size_t bytes, size_t skew, size_t tail) {
    if (n_blocks == MAX_BLOCKS) FAIL("too many blocks");
    block *b = &blocks[n_blocks++];
    b->bytes = HEAD + skew + bytes + tail;
    b->mem = malloc(b->bytes + 2 * CANARY);
    b->snap = malloc(b->bytes);
    if (!b->mem || !b->snap) FAIL("out of memory");
    for (size_t i = 0; i < CANARY; ++i) b->mem[i] = b->mem[CANARY + b->bytes + i] = canary_byte(i);
    b->data = b->mem + CANARY;
    for (size_t i = 0; i < b->bytes; ++i) b->data[i] = (uint8_t)(0x96u ^ (i * 11u));
    b->tensor = b->data + HEAD + skew;
    b->tensor_bytes = bytes;
    FUZZ_POISON(b->mem, CANARY);
    FUZZ_POISON(b->data + b->bytes, CANARY);
    return b;
}

static inline void blocks_snapshot(void) {
    for (int i = 0; i < n_blocks; ++i) memcpy(blocks[i].snap, blocks[i].data, blocks[i].bytes);
}

static inline void blocks_check_canaries(void) {
    for (int i = 0; i < n_blocks; ++i) {
        block *b = &blocks[i];
        FUZZ_UNPOISON(b->mem, CANARY);
        FUZZ_UNPOISON(b->data + b->bytes, CANARY);
        for (size_t k = 0; k < CANARY; ++k)
            if (b->mem[k] != canary_byte(k) || b->data[b->bytes + k] != canary_byte(k))
                FAIL("canary of block %d overwritten", i);
        FUZZ_POISON(b->mem, CANARY);
        FUZZ_POISON(b->data + b->bytes, CANARY);
    }
}

static inline void blocks_free(void) {
    for (int i = 0; i < n_blocks; ++i) {
        FUZZ_UNPOISON(blocks[i].mem, blocks[i].bytes + 2 * CANARY);
        free(blocks[i].mem);
        free(blocks[i].snap);
    }
    n_blocks = 0;
}

/* Bytes [from, to) of block b unchanged since the snapshot. */
static inline int block_same(const block *b, size_t from, size_t to) { return memcmp(b->data + from, b->snap + from, to - from) == 0; }

/* The block whose data region holds p (NULL if none). */
static inline block *block_of(const void *p) {
    for (int i = 0; i < n_blocks; ++i)
        if ((const uint8_t *)p >= blocks[i].data && (const uint8_t *)p < blocks[i].data + blocks[i].bytes) return &blocks[i];
    return NULL;
}

/* ---- comparing with ref ---- */

static inline size_t esize(gdn_dtype dt) { return dt == GDN_F32 ? 4 : 2; }

/* GDN_FUZZ_NAN_PAYLOAD=any accepts outputs that differ from ref only where both hold a NaN (any sign and
 * payload); by default such a difference fails like any other. */
static int nan_payload_any;
static unsigned long nan_payload_only;

static inline int is_nan_at(const void *base, gdn_dtype dt, size_t e) {
    uint32_t bits = 0;
    memcpy(&bits, (const uint8_t *)base + e * esize(dt), esize(dt));
    const float x = dt == GDN_F32 ? gdn__bits_f32(bits) : dt == GDN_F16 ? gdn__f16_to_f32((uint16_t)bits)
                                                                        : gdn__bf16_to_f32((uint16_t)bits);
    return x != x;
}

/* got must equal want byte for byte (n elements of dt); a difference fails, saying whether only NaN payloads
 * differ, unless that is accepted. */
static inline void compare_with_ref(const char *what, const void *got, const void *want, size_t n, gdn_dtype dt,
                             const char *kernel, int threads) {
    const size_t es = esize(dt);
    if (memcmp(got, want, n * es) == 0) return;
    size_t first = n, nan_only = 1;
    for (size_t e = 0; e < n; ++e) {
        if (memcmp((const uint8_t *)got + e * es, (const uint8_t *)want + e * es, es) == 0) continue;
        if (first == n) first = e;
        nan_only = nan_only && is_nan_at(got, dt, e) && is_nan_at(want, dt, e);
    }
    if (nan_only && nan_payload_any) {
        ++nan_payload_only;
        if ((nan_payload_only & (nan_payload_only - 1)) == 0)
            fprintf(stderr, FUZZ_NAME ": %lu outputs so far differed from ref only in NaN payloads (accepted)\n",
                    nan_payload_only);
        return;
    }
    uint32_t g = 0, w = 0;
    memcpy(&g, (const uint8_t *)got + first * es, es);
    memcpy(&w, (const uint8_t *)want + first * es, es);
    FAIL("%s differs from ref%s, first at element %zu: 0x%x vs ref 0x%x (kernel %s, threads %d)", what,
         nan_only ? " only in NaN payloads" : "", first, g, w, kernel, threads);
}

/* Before the first input: a pool of 3 whatever the machine (threads 0..5 exercise clamping), and
 * GDN_FUZZ_NAN_PAYLOAD read. */
static inline void fuzz_initialize(void) {
    setenv("GDN_THREADS", "3", 0);
    const char *nan = getenv("GDN_FUZZ_NAN_PAYLOAD");
    nan_payload_any = nan && strcmp(nan, "any") == 0;
}

/* The libFuzzer entry points; the including file defines fuzz_one, one call per input. */
static int fuzz_one(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_initialize();
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_one(data, size); }

#endif
