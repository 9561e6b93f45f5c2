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

/* The recurrence of `args` in float64, plain sums and libm (tests/delta/test_oracle.c checks ref against it): y
 * [B, T, Hv, Dv] and state_out (NULL: not written; layout as args->state_layout) as double; args->y and
 * args->state_out are not written. Validates args as gdn_delta does; the dense form only (GDN_ERR_UNSUPPORTED for
 * the batch form or slots). */
gdn_status gdn__oracle_delta(const gdn_delta_args *args, double *y, double *state_out);

/* The layer step of `args` in float64, plain sums and libm: y [T, Hv, Dv], and the state pool [slots, ...] (layout as
 * args->state_layout) and the history pool [slots, C, 3] after the call, commits and checkpoints written (filled
 * from args' pools first), as double; nothing of args is written. Validates args as gdn_layer does. */
gdn_status gdn__oracle_layer(const gdn_layer_args *args, double *y, double *state, double *hist);

/* SiLU (sigmoid: 1) of n floats into y (may be x) through the CPU layer stages' rows (src/layer/cpu/rows.h):
 * gdn_siluf's (gdn_sigmoidf's) bits. Returns 1 when it ran the AVX2 rows (the CPU has AVX2 and FMA), 0 the scalar. */
int gdn__layer_gate_rows(float *y, const float *x, int64_t n, int sigmoid);

#ifdef __cplusplus
}
#endif
#endif
