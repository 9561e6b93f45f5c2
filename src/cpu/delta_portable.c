/* Placeholder until the blocked portable kernel lands: runs the contract's scalar kernel. */
#include "gdn_internal.h"

gdn_status gdn__delta_portable(const gdn__problem *p) { return gdn__delta_ref(p); }
