/* gdn_env_report: how each environment switch was read (its raw value and what the library made of it), built
 * once from the switches' readers (core/env.h, src/core/env.c) and the CPU pool's size. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/env.h"
#include "gdn_internal.h"

/* One line per switch: its raw value and what the library made of it. */
static char report[960];
static pthread_once_t report_once = PTHREAD_ONCE_INIT;

static void describe(char *out, size_t n, const char *name, const char *effect, int understood) {
    const char *raw = getenv(name);
    if (!raw)
        snprintf(out, n, "%s unset: %s\n", name, effect);
    else
        snprintf(out, n, "%s='%.40s'%s: %s\n", name, raw, understood ? "" : " (not understood, ignored)", effect);
}

static void build_report(void) {
    char line[5][160];
    const int threads = gdn_cpu_threads();
    char effect[64];
    snprintf(effect, sizeof effect, "a pool of %d CPU threads", threads);
    const int t_ok = !getenv("GDN_THREADS") || gdn__env_int("GDN_THREADS", 1, GDN_THREADS_MAX, -1) != -1;
    describe(line[0], sizeof line[0], "GDN_THREADS", effect, t_ok);
    const int p_ok = !getenv("GDN_PACKED") || gdn__env_bool("GDN_PACKED", -1) != -1;
    describe(line[1], sizeof line[1], "GDN_PACKED", gdn__packed_enabled() ? "packed kernels routed" : "packed kernels not routed",
             p_ok);
    const int c_ok = !getenv("GDN_CHECK_POINTERS") || gdn__env_bool("GDN_CHECK_POINTERS", -1) != -1;
    describe(line[2], sizeof line[2], "GDN_CHECK_POINTERS",
             gdn__check_pointers() ? "CUDA calls check that every pointer is device memory" : "CUDA pointers not checked", c_ok);
    const int pdl = gdn__env_bool("GDN_CUDA_PDL", 1), d_ok = !getenv("GDN_CUDA_PDL") || gdn__env_bool("GDN_CUDA_PDL", -1) != -1;
    describe(line[3], sizeof line[3], "GDN_CUDA_PDL",
             pdl ? "CUDA kernels launch with programmatic dependent launch" : "CUDA kernels launch plainly", d_ok);
    const int64_t spin = gdn__env_int("GDN_SPIN_US", 0, GDN_SPIN_US_MAX, -1);
    char waits[96];
    snprintf(waits, sizeof waits, "idle CPU workers poll %lld us before they sleep",
             (long long)(spin < 0 ? GDN_SPIN_US_DEFAULT : spin));
    describe(line[4], sizeof line[4], "GDN_SPIN_US", waits, !getenv("GDN_SPIN_US") || spin != -1);
    snprintf(report, sizeof report, "%s%s%s%s%s", line[0], line[1], line[2], line[3], line[4]);
}

const char *gdn_env_report(void) {
    pthread_once(&report_once, build_report);
    return report;
}
