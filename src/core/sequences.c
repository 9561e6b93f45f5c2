/* The per-sequence arrays of a varlen batch, checked one way for gdn_delta's batch form and for gdn_layer (every
 * failure names its field through gdn_last_error): the windows of cu_seqlens, slots within the pools, and no slot
 * written twice or written by one sequence and read by another. */
#include <stdlib.h>

#include "core/checked.h"
#include "gdn_internal.h"

gdn_status gdn__check_window(const int32_t *cu_seqlens, int64_t b) {
    if (b == 0 && cu_seqlens[0] != 0)
        return gdn__fail(GDN_ERR_BAD_SIZE, "args->cu_seqlens[0] = %d: must be 0", (int)cu_seqlens[0]);
    if ((int64_t)cu_seqlens[b + 1] - cu_seqlens[b] < 1)
        return gdn__fail(GDN_ERR_BAD_SIZE, "args->cu_seqlens[%lld] = %d is not above cu_seqlens[%lld] = %d (windows "
                         "hold at least one token)", (long long)b + 1, (int)cu_seqlens[b + 1], (long long)b,
                         (int)cu_seqlens[b]);
    return GDN_OK;
}

gdn_status gdn__check_slot(const char *field, int64_t b, int64_t slot, int64_t slots) {
    if (slot < slots) return GDN_OK;
    return gdn__fail(GDN_ERR_BAD_SIZE, "args->%s[%lld] = %lld: the pools have %lld slots", field, (long long)b,
                     (long long)slot, (long long)slots);
}

typedef struct slot_use {
    int32_t slot;
    int32_t writes;
} slot_use;

static int by_slot(const void *x, const void *y) {
    const slot_use *a = x, *b = y;
    return (a->slot > b->slot) - (a->slot < b->slot);
}

int64_t gdn__slot_writers_bytes(int64_t B) {
    int64_t bytes = 0;
    return gdn__size_mul(B, (int64_t)sizeof(slot_use), &bytes) ? bytes : -1;
}

gdn_status gdn__check_slot_writers(const char *field, const int32_t *slot, const int32_t *writes, int64_t B,
                                   const char *why, void *scratch) {
    slot_use *use = scratch ? scratch : gdn__malloc((size_t)B * sizeof *use);
    if (!use) return gdn__fail(GDN_ERR_OUT_OF_MEMORY, "no memory to check args->%s", field);
    int64_t m = 0;
    for (int64_t b = 0; b < B; ++b)
        if (slot[b] >= 0) use[m++] = (slot_use){slot[b], writes ? writes[b] > 0 : 1};
    qsort(use, (size_t)m, sizeof *use, by_slot);
    for (int64_t i = 1; i < m; ++i)
        if (use[i].slot == use[i - 1].slot && (use[i].writes || use[i - 1].writes)) {
            const int32_t clash = use[i].slot;
            if (use != scratch) free(use);
            return gdn__fail(GDN_ERR_OVERLAP, "args->%s: two sequences name slot %d and %s", field, (int)clash, why);
        }
    if (use != scratch) free(use);
    return GDN_OK;
}
