/* Test problems for gdn_delta: a configuration, its inputs filled deterministically from a seed, and runs with
 * every output poisoned first (0xFF bytes: a NaN in f32, f16 and bf16) so that an element a kernel forgets to
 * write cannot pass for a correct one. */
#ifndef GDN_TEST_CASE_H
#define GDN_TEST_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "gdn.h"

typedef enum case_inputs {
    CASE_REALISTIC = 0,  /* unit q and k, normal v, decays in ~[0.9, 1), beta in (0, 1) */
    CASE_ADVERSARIAL = 1 /* finite but awkward: wide magnitudes, zeros, -0, gates 0 and 1, underflowing decays */
} case_inputs;

/* How a run passes the state. */
typedef enum case_state_mode {
    CASE_STATE_SEPARATE = 0, /* state_in as the case has it (may be NULL), state_out a separate buffer */
    CASE_STATE_OUT_NULL = 1, /* state_out NULL */
    CASE_STATE_IN_PLACE = 2  /* state_out == state_in: a buffer holding a copy of the case's initial state */
} case_state_mode;

typedef struct case_cfg {
    int64_t B, T, Hk, Hv, Dk, Dv;
    gdn_dtype dtype;
    gdn_gate_kind gate_kind;
    gdn_beta_kind beta_kind;
    gdn_state_layout layout;
    int mask;     /* 1: a mask with some tokens off (the first token on) */
    int state_in; /* 1: a random initial state; 0: state_in NULL */
    case_inputs inputs;
    uint64_t seed;
    gdn_head_map head_map; /* GDN_HEADS_GROUPED (0) or GDN_HEADS_TILED */
} case_cfg;

typedef struct gdn_case {
    case_cfg cfg;
    void *q, *k, *v; /* dtype */
    float *gate, *beta, *A_log, *dt_bias;
    uint8_t *mask;   /* NULL without a mask */
    float *state_in; /* NULL without an initial state */
    float scale;
    size_t n_qk, n_v, n_gate, n_bt, n_state; /* element counts */
    size_t dsize;                             /* bytes per q/k/v/y element */
} gdn_case;

/* Allocates and fills a case; 0 on allocation failure. */
int case_init(gdn_case *c, const case_cfg *cfg);
/* A copy of sequences [b0, b0+nb) and tokens [t0, t0+nt) of src, starting from `state_in` (the slice's own
 * [nb, Hv, ...] state, NULL for none). */
int case_slice(gdn_case *dst, const gdn_case *src, int64_t b0, int64_t nb, int64_t t0, int64_t nt,
               const float *state_in);
void case_free(gdn_case *c);

/* The arguments of the case, outputs unset. */
gdn_delta_args case_args(const gdn_case *c);

/* Poisons y (n_v elements) and state (n_state floats, when not NULL), then runs `kernel` (NULL: routed) with
 * `threads`. With CASE_STATE_IN_PLACE, state is first filled with the case's initial state (zeros without one)
 * and passed as both state_in and state_out; with CASE_STATE_OUT_NULL state is ignored. */
gdn_status case_run(const gdn_case *c, const char *kernel, int threads, case_state_mode mode, void *y, float *state);

/* Elements still holding the poison: n elements of `size` bytes. */
size_t poisoned_count(const void *buf, size_t n, size_t size);
void poison(void *buf, size_t bytes);

/* FNV-1a hash of every input buffer of the case (to check that a call left its inputs alone). */
uint64_t case_input_hash(const gdn_case *c);

#ifdef GDN_HAVE_CUDA
/* A device copy of `bytes` bytes of host memory (NULL for NULL); *ok cleared on failure. */
void *to_device(const void *host, size_t bytes, int *ok);
/* The case's inputs on the device, in a gdn_case of device pointers (sizes as the host case's; state_in NULL). */
int case_to_device(gdn_case *dev, const gdn_case *host);
void case_device_free(gdn_case *dev);
#endif

/* Index of a kernel by name, -1 if none. */
int kernel_index(const char *name);

/* 1 when GDN_TEST_QUICK is set (sanitizer builds): suites use smaller samples. */
int test_quick(void);

/* One-line description of a configuration, for failure messages. */
const char *case_describe(const case_cfg *cfg);

#endif
