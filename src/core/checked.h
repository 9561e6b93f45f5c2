/* Checked size arithmetic: the one helper every size computation of the library and its tools goes through.
 * A size is an int64 in [0, GDN_SIZE_LIMIT]; a product or sum that would leave that range fails (returns 0 and
 * leaves *out alone), so no size ever wraps, in int64 or in size_t. Header-only, no dependencies. */
#ifndef GDN_CHECKED_H
#define GDN_CHECKED_H

#include <stddef.h>
#include <stdint.h>

#define GDN_SIZE_LIMIT ((int64_t)1 << 62)

/* *out = x * y when x, y >= 0 and the product is at most GDN_SIZE_LIMIT, else 0. */
static inline int gdn__size_mul(int64_t x, int64_t y, int64_t *out) {
    if (x < 0 || y < 0 || x > GDN_SIZE_LIMIT || y > GDN_SIZE_LIMIT || (y != 0 && x > GDN_SIZE_LIMIT / y)) return 0;
    *out = x * y;
    return 1;
}

/* *out = x + y when x, y >= 0 and the sum is at most GDN_SIZE_LIMIT, else 0. */
static inline int gdn__size_add(int64_t x, int64_t y, int64_t *out) {
    if (x < 0 || y < 0 || x > GDN_SIZE_LIMIT || y > GDN_SIZE_LIMIT - x) return 0;
    *out = x + y;
    return 1;
}

/* The product of n factors (n <= 8), or 0 with *ok cleared when one step fails; *ok is sticky, so a chain of
 * sizes can be computed and checked once at the end. */
static inline int64_t gdn__size_prod(int *ok, int n, const int64_t *f) {
    int64_t r = 1;
    for (int i = 0; i < n && *ok; ++i) *ok = gdn__size_mul(r, f[i], &r);
    return *ok ? r : 0;
}
#define GDN_SIZE_PROD(ok, ...) \
    gdn__size_prod((ok), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* A size in bytes that fits size_t on this machine (always, on 64-bit), else 0. */
static inline int gdn__size_fits(int64_t bytes) { return bytes >= 0 && (uint64_t)bytes <= (uint64_t)SIZE_MAX; }

/* A tensor's bytes, for the overlap checks of validation. */
typedef struct gdn__extent {
    const void *p;
    int64_t bytes;
} gdn__extent;

/* 1 when both are non-NULL and their byte ranges intersect. */
static inline int gdn__overlaps(gdn__extent x, gdn__extent y) {
    if (!x.p || !y.p) return 0;
    const uintptr_t a = (uintptr_t)x.p, b = (uintptr_t)y.p;
    return a < b + (uintptr_t)y.bytes && b < a + (uintptr_t)x.bytes;
}

/* 1 when p (NULL counts as aligned) is not a multiple of `align` bytes (a power of two). */
static inline int gdn__misaligned(const void *p, int64_t align) { return ((uintptr_t)p & (uintptr_t)(align - 1)) != 0; }

#endif
