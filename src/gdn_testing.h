/* For the tests, the CLI and the benchmarks only; never installed. Beside the public header: the contract's
 * scalar helpers (src/common/gdn_math.h: conversions, tensor loads), the checked size arithmetic
 * (src/core/checked.h) and the float64 oracle. */
#ifndef GDN_TESTING_H
#define GDN_TESTING_H

#include "common/gdn_math.h"
#include "core/checked.h"
#include "gdn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64, the one generator of the tests' (tests/harness.c), the CLI's (tools/gdn_cases.c) and the fuzz targets'
 * (fuzz/fuzz_common.h) inputs: the next value of the stream whose state is *s. */
static inline uint64_t gdn__splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The recurrence of `args` in float64, plain sums and libm (tests/delta/test_oracle.c checks ref against it): y
 * [B, T, Hv, Dv] and state_out (NULL: not written; layout as args->state_layout) as double; args->y and
 * args->state_out are not written. Validates args as gdn_delta does; the dense form only (GDN_ERR_UNSUPPORTED for
 * the batch form or slots). */
gdn_status gdn__oracle_delta(const gdn_delta_args *args, double *y, double *state_out);

/* The layer step of `args` in float64, plain sums and libm: y [T, Hv, Dv], and the state pool [slots, ...] (layout as
 * args->state_layout) and the history pool [slots, C, 3] after the call, commits and checkpoints written (filled
 * from args' pools first), as double; nothing of args is written. Validates args as gdn_layer does. */
gdn_status gdn__oracle_layer(const gdn_layer_args *args, double *y, double *state, double *hist);

/* The CPU layer stages' rows (src/layer/cpu/rows.h), one table at a time: 0 the scalar rows, 1 AVX2 + FMA,
 * 2 AVX-512. Each returns 0, writing nothing, where this CPU cannot run the table, else 1.
 *   gate: SiLU (sigmoid: 1) of n floats into y (may be x), gdn_siluf's (gdn_sigmoidf's) bits;
 *   conv: y[i] = gdn__conv_silu of channel i's taps x[0..3][i] (oldest first), weights w[j n + i], bias[i] (or 0). */
int gdn__layer_gate_rows(int table, float *y, const float *x, int64_t n, int sigmoid);
int gdn__layer_conv_rows(int table, float *y, const float *const x[4], const float *w, const float *bias, int64_t n);

#if GDN_TESTING
/* Allocation failure on demand (src/core/alloc.c): after gdn__alloc_fail_at(n), the calling thread's n-th allocation
 * inside the library from then on (a pool thread's start counts as one) fails, and only that one; 0: none fails.
 * gdn__alloc_count(): the calling thread's allocations since the last gdn__alloc_fail_at. */
void gdn__alloc_fail_at(int64_t n);
int64_t gdn__alloc_count(void);
#endif

#ifdef __cplusplus
}
#endif
#endif
