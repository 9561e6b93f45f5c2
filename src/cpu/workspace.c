/* The CPU kernels' large per-call buffers (the layer stages' q, k, v, o and gates; the blocked kernel's per-worker
 * blocks), kept between calls: a call that finds a kept buffer large enough writes into pages already mapped,
 * where a fresh allocation of that size (an mmap) faults every page in again, zeroed, and the faults of several
 * threads queue on the process's memory map. Measured on the 2-vCPU Zen 3 guest, the layer's 2048-token prefill
 * at the Qwen3-Next heads (a 100 MB buffer): 323 ms a call with fresh pages, 247-257 ms reusing them.
 *
 * Up to GDN_WS_SLOTS buffers are kept; gdn__ws_take hands out the smallest that fits (or allocates), and
 * gdn__ws_give keeps a buffer while a slot is free, else frees the smallest of it and the kept ones. Concurrent
 * callers each get their own buffer. gdn_cpu_release() frees what is kept. A lock guards the slots, held only to
 * pick; pthread_atfork handlers keep a fork from copying it held. Under AddressSanitizer (the sanitizer suites) a
 * taken buffer is filled with NaN bytes first, so that a kernel reading a workspace before writing it fails the
 * bitwise tests. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"

#define GDN_WS_SLOTS 4

#if defined(__SANITIZE_ADDRESS__)
#define GDN_WS_POISON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GDN_WS_POISON 1
#endif
#endif
#ifndef GDN_WS_POISON
#define GDN_WS_POISON 0
#endif

typedef struct ws_slot {
    void *p;
    size_t bytes;
} ws_slot;

static ws_slot slots[GDN_WS_SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }
static void init(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

void *gdn__ws_take(size_t bytes, size_t *got) {
    pthread_once(&once, init);
    pthread_mutex_lock(&lock);
    int best = -1;
    for (int i = 0; i < GDN_WS_SLOTS; ++i)
        if (slots[i].p && slots[i].bytes >= bytes && (best < 0 || slots[i].bytes < slots[best].bytes)) best = i;
    ws_slot s = {NULL, 0};
    if (best >= 0) s = slots[best], slots[best] = (ws_slot){NULL, 0};
    pthread_mutex_unlock(&lock);
    if (!s.p) { /* 64-byte aligned, its size rounded up to 64 */
        s.bytes = (bytes + 63) / 64 * 64;
        s.p = s.bytes >= bytes ? gdn__aligned_alloc(64, s.bytes ? s.bytes : 64) : NULL;
    }
    *got = s.p ? s.bytes : 0;
#if GDN_WS_POISON
    if (s.p) memset(s.p, 0xFF, bytes);
#endif
    return s.p;
}

void gdn__ws_give(void *p, size_t bytes) {
    if (!p) return;
    pthread_once(&once, init);
    ws_slot s = {p, bytes};
    pthread_mutex_lock(&lock);
    int low = 0; /* a free slot, else the smallest kept */
    for (int i = 0; i < GDN_WS_SLOTS && slots[low].p; ++i)
        if (!slots[i].p || slots[i].bytes < slots[low].bytes) low = i;
    if (!slots[low].p || slots[low].bytes < s.bytes) {
        const ws_slot out = slots[low];
        slots[low] = s;
        s = out;
    }
    pthread_mutex_unlock(&lock);
    free(s.p);
}

void gdn_cpu_release(void) {
    pthread_once(&once, init);
    ws_slot out[GDN_WS_SLOTS];
    pthread_mutex_lock(&lock);
    for (int i = 0; i < GDN_WS_SLOTS; ++i) out[i] = slots[i], slots[i] = (ws_slot){NULL, 0};
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < GDN_WS_SLOTS; ++i) free(out[i].p);
}
