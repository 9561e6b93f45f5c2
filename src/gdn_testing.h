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
 * args->state_out are not written. Validates args as gdn_delta does. */
gdn_status gdn__oracle_delta(const gdn_delta_args *args, double *y, double *state_out);

#ifdef __cplusplus
}
#endif
#endif
