/* gdn layer: the layer step (gdn_layer) at the Qwen3.6 heads, Hk 16, D 128, Hv 32 (and 48), bf16 activations:
 * every layer kernel here checked bitwise against the CPU's ref (and the CUDA kernels against the CPU), timed as
 * medians over rotating pool slots, against the floor measured beside it: the bytes the call must move at the copy
 * bandwidth (decode, verify), and the recurrence alone (gdn_delta, routed) for a prefill. A prefill also runs as
 * kernel = "fastest" on CUDA (the chunked prefill, under its own contract: timed, not checked here).
 *
 *   gdn layer [--quick] [--json] [--hv N]   --quick: decode B=1, verify n=7 and a short prefill only */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_tool.h"

enum { L_HK = TOOL_LAYER_HK, L_D = TOOL_LAYER_D };

/* ---- the table ---- */

typedef struct layer_row {
    const char *kernel, *backend;
    int64_t Hv, B, n;
    int commit;              /* -1: all tokens */
    double us, floor_us;     /* the call; its floor (bytes at the copy bandwidth, or the recurrence alone) */
    const char *floor_kind;  /* "copy" or "delta" */
    int equal;               /* bitwise equal to the CPU's ref (1), differs (0), not checked (-1) */
} layer_row;

static void print_row(const layer_row *r, int json) {
    if (json) {
        printf("{\"op\": \"layer\", \"kernel\": \"%s\", \"backend\": \"%s\", \"Hk\": %d, \"Hv\": %lld, \"D\": %d, "
               "\"B\": %lld, \"n\": %lld, \"commit\": %d, \"us\": %.3f, \"floor_us\": %.3f, \"floor\": \"%s\", "
               "\"equal\": %d}\n", r->kernel, r->backend, L_HK, (long long)r->Hv, L_D, (long long)r->B,
               (long long)r->n, r->commit, r->us, r->floor_us, r->floor_kind, r->equal);
        return;
    }
    char commit[16];
    snprintf(commit, sizeof commit, r->commit < 0 ? "all" : "%d", r->commit);
    printf("%-12s %-5s %3lld %4lld %5lld %6s %11.2f %11.2f %-6s %6.2f  %s\n", r->kernel, r->backend, (long long)r->Hv,
           (long long)r->B, (long long)r->n, commit, r->us, r->floor_us, r->floor_kind, r->us / r->floor_us,
           r->equal < 0 ? "-" : r->equal ? "yes" : "NO");
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median microseconds of `reps` CPU calls of `kernel` over rotating sets. */
static double cpu_time(tool_layer_case *c, const char *kernel, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    gdn_layer_args a = c->a;
    a.kernel = kernel;
    for (int r = 0; r < reps; ++r) {
        tool_layer_case_set(c, r + 1);
        const double t0 = tool_now();
        if (gdn_layer(&a) != GDN_OK) return NAN;
        t[r] = (tool_now() - t0) * 1e6;
    }
    tool_layer_case_set(c, 0);
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

/* The recurrence alone as the layer runs it (f32 q, k, v; decays; beta direct), routed, median microseconds. */
static double delta_alone_us(const tool_layer_case *lc, gdn_backend be, int reps) {
    const tool_spec sp = {.B = lc->a.B, .T = lc->T / lc->a.B, .Hk = L_HK, .Hv = lc->a.Hv, .Dk = L_D, .Dv = L_D,
                          .dtype = GDN_F32};
    tool_case c;
    if (!tool_case_init(&c, &sp, 7)) return NAN;
    gdn_delta_args a = c.a;
    a.backend = be;
    void *y = malloc(c.v_bytes);
    float *st = malloc(c.state_bytes);
    const char *name = NULL;
    double us = NAN;
    if (y && st && gdn_route(&a, &name) == GDN_OK) {
        if (be == GDN_BACKEND_CUDA) {
            double ms;
            int slots;
            if (tool_cuda_run(&c, name, reps, y, st, &ms, &slots) == GDN_OK) us = ms * 1e3;
        } else {
            double t[16], sec;
            int n = 0;
            for (int r = 0; r < (reps < 16 ? reps : 16); ++r)
                if (tool_cpu_call(&c, name, y, st, &sec) == GDN_OK) t[n++] = sec * 1e6;
            if (n) us = tool_median(t, n);
        }
    }
    free(y), free(st);
    tool_case_free(&c);
    return us;
}

typedef struct layer_point {
    int64_t Hv, B, n;
    int commit;
} layer_point;

/* One point: ref's bits on set 0 (for a short case), then every layer kernel of each backend here. */
static int run_point(const layer_point *pt, int json, double cpu_gbps, double gpu_gbps, int gpu) {
    int failures = 0;
    const int prefill = pt->n >= 256;
    tool_layer_case c;
    if (!tool_layer_case_init(&c, pt->Hv, pt->B, pt->n, GDN_BF16, pt->commit, 256e6)) {
        fprintf(stderr, "gdn layer: out of memory for B=%lld n=%lld\n", (long long)pt->B, (long long)pt->n);
        return 1;
    }
    /* the CPU reference result: staged on set 0 (ref's bits, pinned by the tests), from pristine pools */
    float *state0 = malloc(c.set_state_bytes), *state_w = malloc(c.set_state_bytes);
    void *hist0 = malloc(c.set_hist_bytes), *hist_w = malloc(c.set_hist_bytes), *y_w = malloc(c.y_bytes);
    void *y_ref = malloc(c.y_bytes), *state_ref = malloc(c.set_state_bytes), *hist_ref = malloc(c.set_hist_bytes);
    if (!state0 || !state_w || !hist0 || !hist_w || !y_w || !y_ref || !state_ref || !hist_ref) {
        failures = 1;
        goto done;
    }
    memcpy(state0, c.a.state, c.set_state_bytes);
    memcpy(hist0, c.a.hist_in, c.set_hist_bytes);
    gdn_layer_args a = c.a;
    a.kernel = "staged";
    if (gdn_layer(&a) != GDN_OK) {
        fprintf(stderr, "gdn layer: staged failed: %s\n", gdn_last_error());
        failures = 1;
        goto done;
    }
    memcpy(y_ref, c.a.y, c.y_bytes);
    memcpy(state_ref, c.a.state, c.set_state_bytes);
    memcpy(hist_ref, c.a.hist_in, c.set_hist_bytes);
    if (!prefill && pt->B <= 8) { /* ref itself, where it is quick */
        memcpy(c.a.state, state0, c.set_state_bytes), memcpy((void *)c.a.hist_in, hist0, c.set_hist_bytes);
        a.kernel = "ref";
        const int eq = gdn_layer(&a) == GDN_OK && memcmp(c.a.y, y_ref, c.y_bytes) == 0 &&
                       memcmp(c.a.state, state_ref, c.set_state_bytes) == 0 && memcmp(c.a.hist_in, hist_ref, c.set_hist_bytes) == 0;
        failures += !eq;
        if (!eq) printf("staged differs from ref at B=%lld n=%lld\n", (long long)pt->B, (long long)pt->n);
    }
    const int reps = prefill ? 5 : 21;
    layer_row r = {"staged", "cpu", pt->Hv, pt->B, pt->n, pt->commit, 0, 0, "copy", 1};
    r.us = cpu_time(&c, "staged", prefill ? 3 : reps);
    r.floor_us = prefill ? delta_alone_us(&c, GDN_BACKEND_CPU, 3) : c.bytes / (cpu_gbps * 1e3);
    r.floor_kind = prefill ? "delta" : "copy";
    print_row(&r, json);
    for (int k = 0; gpu && k < gdn_layer_kernel_count(); ++k) {
        const char *name = gdn_layer_kernel_name(k);
        if (strncmp(name, "cuda", 4) != 0) continue;
        memcpy(c.a.state, state0, c.set_state_bytes), memcpy((void *)c.a.hist_in, hist0, c.set_hist_bytes);
        double us = 0;
        const gdn_status s = tool_layer_cuda_run(&c, name, reps * 10, y_w, state_w, hist_w, &us);
        if (s == GDN_ERR_INELIGIBLE) continue;
        layer_row g = {name, "cuda", pt->Hv, pt->B, pt->n, pt->commit, us, 0, "copy", 0};
        if (s != GDN_OK) {
            printf("%-12s cuda failed: %s\n", name, gdn_last_error());
            failures++;
            continue;
        }
        g.equal = memcmp(y_w, y_ref, c.y_bytes) == 0 && memcmp(state_w, state_ref, c.set_state_bytes) == 0 &&
                  memcmp(hist_w, hist_ref, c.set_hist_bytes) == 0;
        failures += !g.equal;
        g.floor_us = prefill ? delta_alone_us(&c, GDN_BACKEND_CUDA, 20) : c.bytes / (gpu_gbps * 1e3);
        g.floor_kind = prefill ? "delta" : "copy";
        print_row(&g, json);
    }
    if (gpu && prefill) { /* "fastest": the prompt on the chunked prefill (its contract: not ref's bits, unchecked) */
        memcpy(c.a.state, state0, c.set_state_bytes), memcpy((void *)c.a.hist_in, hist0, c.set_hist_bytes);
        double us = 0;
        const gdn_status s = tool_layer_cuda_run(&c, "fastest", reps * 10, y_w, state_w, hist_w, &us);
        layer_row f = {"fastest", "cuda", pt->Hv, pt->B, pt->n, pt->commit, us, 0, "delta", -1};
        if (s != GDN_OK) {
            printf("%-12s cuda failed: %s\n", "fastest", gdn_last_error());
            failures++;
        } else {
            f.floor_us = delta_alone_us(&c, GDN_BACKEND_CUDA, 20);
            print_row(&f, json);
        }
    }
done:
    free(state0), free(state_w), free(hist0), free(hist_w), free(y_w), free(y_ref), free(state_ref), free(hist_ref);
    tool_layer_case_free(&c);
    return failures;
}

/* The table's legend, once, under it */
static const char layer_legend[] =
    "  B sequences of n tokens each; commit: how many of a window's tokens the pools keep (all: the whole window;\n"
    "  0: a verify step, which writes y alone); us median: one call, over rotating pool slots\n"
    "  floor: copy = the bytes a call must move (pools read, written when it commits, inputs, y) at the copy\n"
    "  bandwidth; delta = the recurrence alone (gdn_delta, routed) on the same shape; ratio = us median / floor us\n"
    "  ==ref: y and both pools memcmp-equal to the CPU's staged kernel (itself checked against ref where B <= 8 and\n"
    "  n < 256); -: not checked (\"fastest\", the chunked prefill, under its own contract)\n";

int tool_layer(int argc, char **argv) {
    int quick = 0, json = 0;
    int64_t hv = 32;
    static const char usage[] = "usage: gdn layer [--quick] [--json] [--hv N (16 .. 4096, a multiple of 16)]\n";
    for (int i = 0; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--hv") == 0) {
            if (i + 1 >= argc) return tool_usage_error("layer", usage, "--hv needs a value");
            if (!tool_parse_int(argv[i + 1], 16, 4096, &hv) || hv % 16 != 0)
                return tool_usage_error("layer", usage, "--hv takes a multiple of 16 from 16 to 4096, not '%s'",
                                        argv[i + 1]);
            ++i;
        } else if (tool_is_help(argv[i])) {
            printf("%s  the layer step at Hk=16 Hv=N (default 32) D=128, bf16 activations: every layer kernel here\n"
                   "  checked bitwise against the CPU's ref, timed against its floor (--quick: decode B=1, verify n=7\n"
                   "  and a prefill of 256 tokens only; --json: one JSON object per row on stdout). Exit 1 when one\n"
                   "  differs.\n", usage);
            return 0;
        } else {
            return tool_usage_error("layer", usage, "unknown option '%s'", argv[i]);
        }
    }
    const int gpu = tool_cuda_devices() > 0;
    const double cpu_gbps = tool_copy_gbps(gdn_cpu_threads()), gpu_gbps = gpu ? tool_cuda_copy_gbps() : 0.0;
    if (!json) {
        printf("gdn layer: the GDN layer step (conv, norms, gates, recurrence, gated RMSNorm) at Hk=%d Hv=%lld D=%d, "
               "bf16 activations\n", L_HK, (long long)hv, L_D);
        printf("  CPU: %s, %d threads, copy %.1f GB/s", tool_cpu_model(), gdn_cpu_threads(), cpu_gbps);
        if (gpu) printf("; GPU: %s, copy %.0f GB/s", tool_cuda_device_name(), gpu_gbps);
        printf("\n\n");
        printf("%-12s %-5s %3s %4s %5s %6s %11s %11s %-6s %6s  %s\n", "kernel", "back", "Hv", "B", "n", "commit",
               "us median", "floor us", "floor", "ratio", "==ref");
    }
    static const layer_point full[] = {{0, 1, 1, -1},  {0, 8, 1, -1},  {0, 64, 1, -1}, {0, 256, 1, -1},
                                       {0, 1, 2, 0},   {0, 1, 4, 0},   {0, 1, 8, 0},   {0, 1, 7, 0},
                                       {0, 1, 7, -1},  {0, 64, 2, 0},  {0, 64, 4, 0},  {0, 64, 8, 0},
                                       {0, 1, 2048, -1}};
    static const layer_point brief[] = {{0, 1, 1, -1}, {0, 1, 7, 0}, {0, 1, 256, -1}};
    const layer_point *pts = quick ? brief : full;
    const int n_pts = quick ? (int)(sizeof brief / sizeof brief[0]) : (int)(sizeof full / sizeof full[0]);
    int failures = 0;
    for (int i = 0; i < n_pts; ++i) {
        layer_point p = pts[i];
        p.Hv = hv;
        failures += run_point(&p, json, cpu_gbps, gpu_gbps, gpu);
    }
    if (!json) {
        printf("\n%s", layer_legend);
        printf("\n%s\n",
               failures ? "FAILED: a layer kernel differs from ref" : "every layer kernel bitwise equal to ref");
    }
    return failures ? 1 : 0;
}
