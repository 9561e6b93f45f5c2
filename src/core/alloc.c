/* Every allocation of the library, and every pool thread it starts, goes through here. In a GDN_TESTING build a
 * test can make the calling thread's n-th one fail (gdn_testing.h: gdn__alloc_fail_at), to check that a call which
 * cannot get its memory returns GDN_ERR_OUT_OF_MEMORY having written nothing. */
#include <stdlib.h>

#include "gdn_internal.h"
#include "gdn_testing.h"

#if GDN_TESTING
static _Thread_local int64_t alloc_count, alloc_fail_at;

void gdn__alloc_fail_at(int64_t n) {
    alloc_count = 0;
    alloc_fail_at = n > 0 ? n : 0;
}

int64_t gdn__alloc_count(void) { return alloc_count; }

int gdn__alloc_refused(void) { return ++alloc_count == alloc_fail_at; }
#else
int gdn__alloc_refused(void) { return 0; }
#endif

void *gdn__malloc(size_t bytes) { return gdn__alloc_refused() ? NULL : malloc(bytes ? bytes : 1); }

void *gdn__calloc(size_t n, size_t size) { return gdn__alloc_refused() ? NULL : calloc(n ? n : 1, size ? size : 1); }

void *gdn__aligned_alloc(size_t align, size_t bytes) {
    const size_t rounded = (bytes + align - 1) / align * align; /* aligned_alloc takes a multiple of align */
    if (rounded < bytes) return NULL;
    return gdn__alloc_refused() ? NULL : aligned_alloc(align, rounded ? rounded : align);
}
