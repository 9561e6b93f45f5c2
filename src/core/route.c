/* The routing table: an ordered list of (eligible?, routed?, kernel); the first entry of the call's backend that
 * the router may take wins (routed, or eligible where no routed predicate is given); a kernel named in the call runs
 * wherever it is eligible. Both depend on the arguments and the hardware only, so routing is a pure function of
 * them (and of GDN_PACKED, read once). */
#include <pthread.h>

#include "core/env.h"
#include "gdn_internal.h"

static int packed_enabled_value = 1, check_pointers_value = 0;
static pthread_once_t packed_once = PTHREAD_ONCE_INIT, check_once = PTHREAD_ONCE_INIT;

static void read_packed_switch(void) { packed_enabled_value = gdn__env_bool("GDN_PACKED", 1); }
static void read_check_switch(void) { check_pointers_value = gdn__env_bool("GDN_CHECK_POINTERS", 0); }

int gdn__packed_enabled(void) {
    pthread_once(&packed_once, read_packed_switch);
    return packed_enabled_value;
}

int gdn__check_pointers(void) {
    pthread_once(&check_once, read_check_switch);
    return check_pointers_value;
}

static int always(const gdn__problem *p) { return p != NULL; }

/* The AVX2 kernel keeps a block of columns' state on the stack: Dk up to 512. */
static int packed_avx2_eligible(const gdn__problem *p) { return p->a.Dk <= 512 && gdn__cpu_has_avx2_fma(); }
static int portable_eligible(const gdn__problem *p) { return p->a.Dk <= 512; }
/* Windows of 16 tokens and more go to cuda_packed, faster there (H200, B=1, KV: T=64 17.2 vs 20.8 us, T=2048 433 vs
 * 561 us); below, rowsplit beats packed (T=7: 5.78 vs 6.02 us) where cuda_window is not routed (more sequences than
 * one wave of its blocks, T > 8). bench/results/h200_bench.json. */
static int cuda_rowsplit_routed(const gdn__problem *p) { return p->a.T < 16 && gdn__cuda_rowsplit_eligible(p); }

const gdn__kernel gdn__kernels[] = {
    {"cuda_window", GDN_BACKEND_CUDA, 0, gdn__cuda_window_eligible, gdn__cuda_window_routed, gdn__delta_cuda_window},
    {"cuda_decode", GDN_BACKEND_CUDA, 0, gdn__cuda_decode_eligible, gdn__cuda_decode_routed, gdn__delta_cuda_decode},
    {"cuda_rowsplit", GDN_BACKEND_CUDA, 1, gdn__cuda_rowsplit_eligible, cuda_rowsplit_routed, gdn__delta_cuda_rowsplit},
    {"cuda_packed", GDN_BACKEND_CUDA, 1, gdn__cuda_packed_eligible, NULL, gdn__delta_cuda_packed},
    {"cuda_generic", GDN_BACKEND_CUDA, 0, gdn__cuda_generic_eligible, NULL, gdn__delta_cuda_generic},
    {"packed_decode_avx2", GDN_BACKEND_CPU, 1, gdn__decode_avx2_eligible, NULL, gdn__delta_decode_avx2},
    {"packed_avx2", GDN_BACKEND_CPU, 1, packed_avx2_eligible, NULL, gdn__delta_packed_avx2},
    {"portable", GDN_BACKEND_CPU, 0, portable_eligible, NULL, gdn__delta_portable},
    {"ref", GDN_BACKEND_CPU, 0, always, NULL, gdn__delta_ref},
};
const int gdn__kernel_total = (int)(sizeof gdn__kernels / sizeof gdn__kernels[0]);

const gdn__kernel *gdn__route(const gdn__problem *p) {
    for (int i = 0; i < gdn__kernel_total; ++i) {
        const gdn__kernel *kn = &gdn__kernels[i];
        if (kn->backend != p->a.backend || (kn->packed && !gdn__packed_enabled())) continue;
        if (kn->routed ? kn->routed(p) : kn->eligible(p)) return kn;
    }
    return NULL;
}
