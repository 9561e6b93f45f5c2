/* The router: the kernel list in order; the first kernel of the call's backend and the exact contract whose routing
 * predicate holds wins; "fastest" first takes an eligible kernel of the chunked contract for long windows.
 * Predicates depend on the arguments and the hardware only, so routing is a pure function of them (and of
 * GDN_PACKED, read once). A kernel named in the call runs wherever it is eligible (src/delta/args.c). */
#include "gdn_internal.h"

/* The table, expanded from the kernel list (src/delta/kernels.h). */
#define GDN__WS_CPU(name) gdn__delta_##name##_workspace
#define GDN__WS_CUDA(name) gdn__no_workspace
#define GDN__ENTRY(name, backend, packed, contract)                                                              \
    {#name, GDN_BACKEND_##backend, packed, GDN_CONTRACT_##contract, gdn__delta_##name##_eligible,                    \
     gdn__delta_##name##_routed, GDN__WS_##backend(name), gdn__delta_##name, gdn__delta_##name##_variants},
const gdn__kernel gdn__kernels[] = {GDN_DELTA_KERNELS(GDN__ENTRY)};
#undef GDN__ENTRY
const int gdn__kernel_total = (int)(sizeof gdn__kernels / sizeof gdn__kernels[0]);

int64_t gdn__no_workspace(const gdn__problem *p) { return p ? 0 : -1; }

const gdn__kernel *gdn__route(const gdn__problem *p) {
    for (int i = 0; i < gdn__kernel_total; ++i) {
        const gdn__kernel *kn = &gdn__kernels[i];
        if (kn->backend != p->a.backend || (kn->packed && !gdn__packed_enabled())) continue;
        if (kn->contract == GDN_CONTRACT_EXACT && kn->routed(p)) return kn;
    }
    return NULL;
}

const gdn__kernel *gdn__route_fastest(const gdn__problem *p) {
    if (p->a.T >= GDN_CHUNKED_MIN_T)
        for (int i = 0; i < gdn__kernel_total; ++i) {
            const gdn__kernel *kn = &gdn__kernels[i];
            if (kn->backend == p->a.backend && kn->contract == GDN_CONTRACT_CHUNKED && kn->eligible(p)) return kn;
        }
    return gdn__route(p);
}
