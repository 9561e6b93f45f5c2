/* The environment switches, read once each with one parsing rule (docs/API.md, "Environment"):
 * leading and trailing ASCII whitespace is ignored; an integer switch takes a decimal integer in its range,
 * a boolean switch takes 1/0, true/false, yes/no or on/off in any letter case; an empty, unparsable or
 * out-of-range value is ignored (the default applies) and gdn_env_report() says so. */
#ifndef GDN_ENV_H
#define GDN_ENV_H

#include <stdint.h>

#define GDN_THREADS_MAX 256 /* the largest CPU pool */
#define GDN_SPIN_US_DEFAULT 100     /* GDN_SPIN_US: how long an idle CPU worker polls before it sleeps, */
#define GDN_SPIN_US_MAX 1000000     /* in microseconds (0 .. GDN_SPIN_US_MAX) */

#ifdef __cplusplus
extern "C" {
#endif

/* The value of integer switch `name` in [lo, hi], or `fallback` when unset or not understood. */
int64_t gdn__env_int(const char *name, int64_t lo, int64_t hi, int64_t fallback);
/* The value of boolean switch `name` (1 or 0), or `fallback` when unset or not understood. */
int gdn__env_bool(const char *name, int fallback);

#ifdef __cplusplus
}
#endif

#endif
