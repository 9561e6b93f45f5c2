/* Placeholder until the AVX2 kernel lands: runs the contract's scalar kernel. */
#include "gdn_internal.h"

gdn_status gdn__delta_packed_avx2(const gdn__problem *p) { return gdn__delta_ref(p); }
