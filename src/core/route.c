/* The routing table: an ordered list of (eligible?, routed?, kernel); the first entry of the call's backend that
 * the router may take wins (routed, or eligible where no routed predicate is given); a kernel named in the call runs
 * wherever it is eligible. Both depend on the arguments and the hardware only, so routing is a pure function of
 * them (and of GDN_PACKED, read once). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_internal.h"

static int packed_enabled_value = 1;
static pthread_once_t packed_once = PTHREAD_ONCE_INIT;

static void read_packed_switch(void) {
    const char *s = getenv("GDN_PACKED");
    packed_enabled_value = !(s && strcmp(s, "0") == 0);
}

int gdn__packed_enabled(void) {
    pthread_once(&packed_once, read_packed_switch);
    return packed_enabled_value;
}

static int always(const gdn__problem *p) { return p != NULL; }

/* The AVX2 kernel keeps a block of columns' state on the stack: Dk up to 512. */
static int packed_avx2_eligible(const gdn__problem *p) { return p->a.Dk <= 512 && gdn__cpu_has_avx2_fma(); }
static int portable_eligible(const gdn__problem *p) { return p->a.Dk <= 512; }
/* portable beats ref where its fmaf is a vector fma, on calls of at least 128 state updates (B T Hv Dk Dv). Without a
 * vector fma (x86 without FMA3) both spend their time in libm's fmaf (T=64, Hv=32, Dk=Dv=128, libm's software fmaf:
 * ref 1242 ms, portable 1310 ms); below 128 updates portable's fixed cost, ~0.2 us above ref's, is not repaid
 * (T=1, Hv=1, Dk=32, Dv=1: ref 0.56 us, portable 0.67 us). */
static int portable_routed(const gdn__problem *p) {
    const gdn_delta_args *a = &p->a;
    return portable_eligible(p) && gdn__portable_fast() && a->B * a->T * a->Hv * a->Dk * a->Dv >= 128;
}
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
    {"packed_decode_avx512", GDN_BACKEND_CPU, 1, gdn__decode_avx512_eligible, NULL, gdn__delta_decode_avx512},
    {"packed_avx512", GDN_BACKEND_CPU, 1, gdn__packed_avx512_eligible, NULL, gdn__delta_packed_avx512},
    {"packed_decode_avx2", GDN_BACKEND_CPU, 1, gdn__decode_avx2_eligible, NULL, gdn__delta_decode_avx2},
    {"packed_avx2", GDN_BACKEND_CPU, 1, packed_avx2_eligible, NULL, gdn__delta_packed_avx2},
    {"portable", GDN_BACKEND_CPU, 0, portable_eligible, portable_routed, gdn__delta_portable},
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
