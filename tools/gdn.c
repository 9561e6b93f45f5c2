/* gdn — the libgdn command line: run | bench | check | list.
 *
 *   gdn run [--T N]     the recurrence at Qwen3.6-35B-A3B shapes on every kernel here: checked bitwise against
 *                       ref and by relative L2 error against the float64 oracle, timed; exit 1 on any failure
 *   gdn layer [...]     the layer step (gdn_layer) at the same heads: checked bitwise, timed against its floors
 *                       (tools/gdn_layer.c; `gdn run` ends with `gdn layer --quick`)
 *   gdn bench [...]     prefill and decode sweeps (tools/gdn_bench.c; `gdn bench --help`)
 *   gdn check           every eligible kernel against ref, bitwise, on a few small shapes; exit 1 on failure
 *   gdn list            the kernel table and what is eligible here for the Qwen shape */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdn_testing.h"
#include "gdn_tool.h"

/* Qwen3.6-35B-A3B linear-attention layer: 16 key heads, 32 value heads, head dim 128. */
enum { QWEN_HK = 16, QWEN_HV = 32, QWEN_D = 128, QWEN_T = 2048, BF16_T = 256 };
enum { RUN_OOM = -1 };                  /* run_dtype: the case or its outputs could not be allocated */
#define RUN_T_MAX ((int64_t)1 << 30)    /* gdn run --T: the largest window asked for (memory decides below it) */
#define REL_L2_BOUND 1e-5      /* f32 outputs and every state, against the float64 oracle */
#define REL_L2_BOUND_HALF 4e-3 /* y rounded to bf16/f16 (2^-8) */

static const char *backend_name(gdn_backend b) { return b == GDN_BACKEND_CUDA ? "cuda" : "cpu"; }

/* ---- list ---- */

static int cmd_list(void) {
    tool_case pre, dec;
    const tool_spec sp = {.B = 1, .T = QWEN_T, .Hk = QWEN_HK, .Hv = QWEN_HV, .Dk = QWEN_D, .Dv = QWEN_D,
                          .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .no_fill = 1};
    tool_spec sd = sp;
    sd.T = 1;
    if (!tool_case_init(&pre, &sp, 1) || !tool_case_init(&dec, &sd, 1)) {
        fprintf(stderr, "gdn list: out of memory\n");
        return 1;
    }
    printf("Kernels in routing order; eligible here for B=1 Hk=16 Hv=32 Dk=Dv=128 f32 (prefill T=%d, decode T=1).\n", QWEN_T);
    printf("CPU pool: %d threads; CUDA devices: %d\n\n", gdn_cpu_threads(), tool_cuda_devices());
    printf("%-20s %-8s %-8s %-8s %-8s %s\n", "kernel", "backend", "contract", "prefill", "decode",
           "variants (\"kernel:variant\")");
    for (int i = 0; i < gdn_kernel_count(); ++i) {
        const gdn_backend be = gdn_kernel_backend(i);
        pre.a.backend = dec.a.backend = be;
        printf("%-20s %-8s %-8s %-8s %-8s", gdn_kernel_name(i), backend_name(be),
               gdn_kernel_contract(i) == GDN_CONTRACT_EXACT ? "exact" : "chunked", gdn_kernel_eligible(i, &pre.a) ? "yes" : "no",
               gdn_kernel_eligible(i, &dec.a) ? "yes" : "no");
        for (int v = 0; v < gdn_kernel_variant_count(i); ++v) printf(" %s", gdn_kernel_variant_name(i, v));
        printf("\n");
    }
    for (int be = GDN_BACKEND_CPU; be <= GDN_BACKEND_CUDA; ++be) {
        const char *np = NULL, *nd = NULL;
        pre.a.backend = dec.a.backend = (gdn_backend)be;
        const gdn_status s1 = gdn_route(&pre.a, &np), s2 = gdn_route(&dec.a, &nd);
        printf("router, %-4s: prefill -> %s, decode -> %s\n", backend_name((gdn_backend)be),
               s1 == GDN_OK ? np : gdn_status_str(s1), s2 == GDN_OK ? nd : gdn_status_str(s2));
    }
    tool_case_free(&pre);
    tool_case_free(&dec);
    printf("environment:\n%s", gdn_env_report());
    return 0;
}

/* ---- check ---- */

/* Runs kernel i on c (CPU or CUDA) into y/state. Returns GDN_ERR_INELIGIBLE when it cannot run c here. */
static gdn_status run_kernel_once(int i, tool_case *c, void *y, float *state) {
    const gdn_backend be = gdn_kernel_backend(i);
    const char *name = gdn_kernel_name(i);
    if (be == GDN_BACKEND_CUDA) {
        double ms;
        int slots;
        return tool_cuda_devices() > 0 ? tool_cuda_run(c, name, 0, y, state, &ms, &slots) : GDN_ERR_NO_DEVICE;
    }
    if (!gdn_kernel_eligible(i, &c->a)) return GDN_ERR_INELIGIBLE;
    double sec;
    return tool_cpu_call(c, name, y, state, &sec);
}

static const char *gate_name(gdn_gate_kind g) {
    return g == GDN_GATE_RAW ? "raw" : g == GDN_GATE_VECTOR ? "vector" : g == GDN_GATE_LOG_DECAY ? "log-decay" : "decay";
}

static int cmd_check(void) {
#define RAW GDN_GATE_RAW
#define LOGIT GDN_BETA_LOGIT
    static const tool_spec specs[] = {
        {.B = 1, .T = 1, .Hk = 16, .Hv = 32, .Dk = 128, .Dv = 128, .gate_kind = RAW, .beta_kind = LOGIT},
        {.B = 2, .T = 9, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 128, .gate_kind = RAW, .beta_kind = LOGIT,
         .layout = GDN_STATE_KV, .in_place = 1},
        {.B = 2, .T = 7, .Hk = 1, .Hv = 2, .Dk = 128, .Dv = 64, .gate_kind = RAW, .beta_kind = LOGIT, .masked = 1},
        {.B = 1, .T = 5, .Hk = 2, .Hv = 2, .Dk = 64, .Dv = 32, .gate_kind = GDN_GATE_VECTOR, .beta_kind = LOGIT},
        {.B = 1, .T = 6, .Hk = 1, .Hv = 3, .Dk = 96, .Dv = 40, .gate_kind = GDN_GATE_LOG_DECAY},
        {.B = 3, .T = 3, .Hk = 1, .Hv = 1, .Dk = 100, .Dv = 24, .gate_kind = RAW},
        {.B = 1, .T = 3, .Hk = 1, .Hv = 2, .Dk = 256, .Dv = 16, .gate_kind = RAW, .beta_kind = LOGIT,
         .layout = GDN_STATE_KV},
        {.B = 1, .T = 4, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 128, .dtype = GDN_BF16, .gate_kind = RAW, .beta_kind = LOGIT},
        {.B = 2, .T = 4, .Hk = 1, .Hv = 1, .Dk = 128, .Dv = 128, .dtype = GDN_F16, .gate_kind = GDN_GATE_DECAY,
         .zero_state = 1, .masked = 1},
    };
#undef RAW
#undef LOGIT
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int failed = 0, compared = 0;
    if (tool_cuda_devices() == 0) printf("(no CUDA device: CUDA kernels skipped)\n");
    for (int s = 0; s < n_specs; ++s) {
        const tool_spec *sp = &specs[s];
        tool_case c;
        if (!tool_case_init(&c, sp, 100 + (uint64_t)s)) {
            fprintf(stderr, "gdn check: out of memory\n");
            return 1;
        }
        void *y_ref = malloc(c.v_bytes), *y = malloc(c.v_bytes);
        float *s_ref = malloc(c.state_bytes), *st = malloc(c.state_bytes);
        printf("B=%lld T=%lld Hk=%lld Hv=%lld Dk=%lld Dv=%lld %s gate %s, beta %s, %s%s%s%s:",
               (long long)sp->B, (long long)sp->T, (long long)sp->Hk, (long long)sp->Hv, (long long)sp->Dk,
               (long long)sp->Dv, tool_dtype_name(sp->dtype), gate_name(sp->gate_kind),
               sp->beta_kind == GDN_BETA_LOGIT ? "logit" : "direct",
               sp->layout == GDN_STATE_KV ? "KV" : "VK", sp->masked ? " masked" : "", sp->zero_state ? " zero-state" : "",
               sp->in_place ? " in-place" : "");
        double sec;
        gdn_status ref_st = y_ref && y && s_ref && st ? tool_cpu_call(&c, "ref", y_ref, s_ref, &sec) : GDN_ERR_OUT_OF_MEMORY;
        if (ref_st != GDN_OK) {
            printf(" ref failed: %s\n", gdn_status_str(ref_st));
            failed++;
        } else {
            for (int i = 0; i < gdn_kernel_count(); ++i) { /* the chunked contract has no bits to compare */
                if (strcmp(gdn_kernel_name(i), "ref") == 0 || gdn_kernel_contract(i) != GDN_CONTRACT_EXACT) continue;
                const gdn_status ks = run_kernel_once(i, &c, y, st);
                if (ks == GDN_ERR_INELIGIBLE || ks == GDN_ERR_NO_DEVICE) continue;
                const int ok = ks == GDN_OK && memcmp(y, y_ref, c.v_bytes) == 0 && memcmp(st, s_ref, c.state_bytes) == 0;
                printf(" %s %s", gdn_kernel_name(i), ks != GDN_OK ? gdn_status_str(ks) : ok ? "ok" : "DIFFERS");
                failed += !ok;
                compared++;
            }
            printf("\n");
        }
        free(y_ref);
        free(y);
        free(s_ref);
        free(st);
        tool_case_free(&c);
    }
    printf("check: %d comparisons, %d failed\n", compared, failed);
    return failed ? 1 : 0;
}

/* ---- run ---- */

typedef struct run_floor {
    double cpu_gflops, cpu_gbps, gpu_gflops;
} run_floor;

static void print_row(const char *dtype, const char *kernel, const char *backend, double ms, double flops,
                      double peak, double ref_ms, const char *eq, double rel_y, double rel_s) {
    const double gflops = flops / (ms * 1e-3) * 1e-9;
    char pct[16] = "-", speed[16] = "-";
    if (peak > 0.0) snprintf(pct, sizeof pct, "%.1f%%", 100.0 * gflops / peak);
    if (ref_ms > 0.0) snprintf(speed, sizeof speed, "%.2fx", ref_ms / ms);
    printf("%-5s %-18s %-8s %10.2f %9.1f %7s %8s  %-6s %9.2e %9.2e\n", dtype, kernel, backend, ms, gflops, pct, speed,
           eq, rel_y, rel_s);
}

/* One dtype's rows: oracle, ref, then every other kernel. Returns the number of failures. */
static int run_dtype(gdn_dtype dtype, int64_t T, const run_floor *fl) {
    const tool_spec sp = {.B = 1, .T = T, .Hk = QWEN_HK, .Hv = QWEN_HV, .Dk = QWEN_D, .Dv = QWEN_D, .dtype = dtype,
                          .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT};
    const char *dn = tool_dtype_name(dtype);
    const double y_bound = dtype == GDN_F32 ? REL_L2_BOUND : REL_L2_BOUND_HALF;
    tool_case c;
    if (!tool_case_init(&c, &sp, 1)) return RUN_OOM;
    const int64_t n_y = (int64_t)(c.v_bytes / (dtype == GDN_F32 ? 4 : 2)), n_s = (int64_t)(c.state_bytes / 4);
    int64_t y_o_bytes = 0, s_o_bytes = 0; /* the oracle's f64 copies: sizes checked */
    const int sizes_ok = gdn__size_mul(n_y, 8, &y_o_bytes) && gdn__size_mul(n_s, 8, &s_o_bytes);
    double *y_o = sizes_ok ? malloc((size_t)y_o_bytes) : NULL, *s_o = sizes_ok ? malloc((size_t)s_o_bytes) : NULL;
    void *y_ref = malloc(c.v_bytes), *y = malloc(c.v_bytes);
    float *s_ref = malloc(c.state_bytes), *st = malloc(c.state_bytes), *s_tmp = malloc(c.state_bytes);
    const double flops = tool_case_flops(&c.a);
    int failures = 0;
    if (!y_o || !s_o || !y_ref || !y || !s_ref || !st || !s_tmp) {
        failures = RUN_OOM;
        goto done;
    }

    /* the float64 oracle, once */
    gdn_delta_args oa = c.a;
    oa.state_out = s_ref; /* validation wants a distinct output; the oracle writes y_o, s_o */
    double t0 = tool_now();
    gdn_status s = gdn__oracle_delta(&oa, y_o, s_o);
    const double oracle_ms = (tool_now() - t0) * 1e3;
    if (s != GDN_OK) {
        printf("%-5s oracle failed: %s\n", dn, gdn_status_str(s));
        failures = 1;
        goto done;
    }
    printf("%-5s %-18s %-8s %10.2f %9s %7s %8s  %-6s %9s %9s\n", dn, "oracle", "cpu f64", oracle_ms, "-", "-", "-", "-", "-", "-");

    /* ref, once: the contract's definition */
    double sec;
    s = tool_cpu_call(&c, "ref", y_ref, s_ref, &sec);
    if (s != GDN_OK) {
        printf("%-5s ref failed: %s\n", dn, gdn_status_str(s));
        failures = 1;
        goto done;
    }
    const double ref_ms = sec * 1e3;
    double ry = tool_rel_l2(y_ref, dtype, y_o, n_y), rs = tool_rel_l2(s_ref, GDN_F32, s_o, n_s);
    failures += !(ry <= y_bound && rs <= REL_L2_BOUND);
    print_row(dn, "ref", "cpu", ref_ms, flops, fl->cpu_gflops, ref_ms, "(def)", ry, rs);

    for (int i = 0; i < gdn_kernel_count(); ++i) {
        const char *name = gdn_kernel_name(i);
        const gdn_backend be = gdn_kernel_backend(i);
        if (strcmp(name, "ref") == 0 || (be == GDN_BACKEND_CUDA && tool_cuda_devices() == 0)) continue;
        double ms = 0.0;
        if (be == GDN_BACKEND_CUDA) {
            int slots;
            s = tool_cuda_run(&c, name, 20, y, st, &ms, &slots);
        } else if (!gdn_kernel_eligible(i, &c.a)) {
            s = GDN_ERR_INELIGIBLE;
        } else {
            /* the checked call is the first timed run; more runs while they are short */
            double times[16];
            int n = 0;
            s = tool_cpu_call(&c, name, y, st, &times[n++]);
            const int extra = times[0] > 1.0 ? 0 : times[0] > 0.2 ? 2 : 10;
            for (int r = 0; s == GDN_OK && r < extra; ++r) {
                gdn_delta_args a = c.a;
                a.kernel = name;
                a.state_out = s_tmp; /* y into the case's own buffer: the checked outputs stay */
                t0 = tool_now();
                s = gdn_delta(&a);
                times[n++] = tool_now() - t0;
            }
            ms = tool_median(times, n) * 1e3;
        }
        if (s == GDN_ERR_INELIGIBLE) {
            printf("%-5s %-18s %-8s not eligible for this shape here\n", dn, name, backend_name(be));
            continue;
        }
        if (s != GDN_OK) {
            printf("%-5s %-18s %-8s failed: %s\n", dn, name, backend_name(be), gdn_status_str(s));
            failures++;
            continue;
        }
        /* the chunked contract: within the error bounds, not ref's bits */
        const int exact = gdn_kernel_contract(i) == GDN_CONTRACT_EXACT;
        const int eq = memcmp(y, y_ref, c.v_bytes) == 0 && memcmp(st, s_ref, c.state_bytes) == 0;
        ry = tool_rel_l2(y, dtype, y_o, n_y);
        rs = tool_rel_l2(st, GDN_F32, s_o, n_s);
        failures += (exact && !eq) || !(ry <= y_bound && rs <= REL_L2_BOUND);
        print_row(dn, name, backend_name(be), ms, flops, be == GDN_BACKEND_CUDA ? fl->gpu_gflops : fl->cpu_gflops, ref_ms,
                  !exact ? "chunked" : eq ? "yes" : "NO", ry, rs);
    }
done:
    free(y_o);
    free(s_o);
    free(y_ref);
    free(y);
    free(s_ref);
    free(st);
    free(s_tmp);
    tool_case_free(&c);
    return failures;
}

static int cmd_run(int argc, char **argv) {
    static const char usage[] = "usage: gdn run [--T N]\n";
    int64_t T = QWEN_T;
    for (int i = 0; i < argc; ++i) {
        if (tool_is_help(argv[i])) {
            printf("usage: gdn run [--T N]   (1 <= N <= %lld; default %d)\n"
                   "  the recurrence at the Qwen3.6 shapes on every kernel here (f32 over T tokens, bf16 over at most\n"
                   "  %d), checked bitwise against ref and against the float64 oracle, timed; then gdn layer --quick.\n"
                   "  Exit 1 when a kernel differs from ref or misses an error bound.\n",
                   (long long)RUN_T_MAX, QWEN_T, BF16_T);
            return 0;
        }
        if (strcmp(argv[i], "--T") != 0) return tool_usage_error("run", usage, "unknown option '%s'", argv[i]);
        if (i + 1 >= argc) return tool_usage_error("run", usage, "--T needs a value");
        if (!tool_parse_int(argv[i + 1], 1, RUN_T_MAX, &T))
            return tool_usage_error("run", usage, "--T takes an integer from 1 to %lld, not '%s'", (long long)RUN_T_MAX,
                                    argv[i + 1]);
        ++i;
    }
    /* What the f32 run holds at once: per token q, k (Hk D f32 each), v, y, y_ref, y (Hv D f32 each), the oracle's y
     * (Hv D f64), gate and beta; and five f32 states and the oracle's f64 one. More than this machine's memory is
     * reported before anything is allocated: with memory overcommitted, a huge malloc succeeds and the fill would
     * not return. */
    const double need = (double)T * (2.0 * QWEN_HK * QWEN_D * 4 + 4.0 * QWEN_HV * QWEN_D * 4 + QWEN_HV * QWEN_D * 8.0 +
                                     2.0 * QWEN_HV * 4) +
                        QWEN_HV * (double)QWEN_D * QWEN_D * (5.0 * 4 + 8);
    const double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0.0 && need > have) {
        fprintf(stderr, "gdn run: out of memory for T=%lld: it needs %.1f GiB, this machine has %.1f GiB\n",
                (long long)T, need / 1073741824.0, have / 1073741824.0);
        return 1;
    }
    const int threads = gdn_cpu_threads();
    run_floor fl = {tool_fma_peak_gflops(threads), tool_copy_gbps(threads), 0.0};
    printf("gdn run: the Gated DeltaNet recurrence at Qwen3.6-35B-A3B linear-attention shapes\n");
    printf("  B=1 T=%lld Hk=%d Hv=%d Dk=Dv=%d; gate raw g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(logit),\n",
           (long long)T, QWEN_HK, QWEN_HV, QWEN_D);
    printf("  q, k L2-normalized, v ~ N(0,1), state in ~ U(-0.1, 0.1) [B,Hv,Dv,Dk], scale 1/sqrt(Dk)\n");
    {
        const tool_spec sp = {.B = 1, .T = T, .Hk = QWEN_HK, .Hv = QWEN_HV, .Dk = QWEN_D, .Dv = QWEN_D,
                              .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT};
        tool_case c;
        if (tool_case_init(&c, &sp, 1)) {
            double frac, mn, med;
            tool_case_decays(&c, &frac, &mn, &med);
            printf("  decays: %.1f%% in [0.9, 1), median %.4f, min %.4f; %.2f GFLOP per call (7 Dk Dv T Hv B)\n",
                   100.0 * frac, med, mn, tool_case_flops(&c.a) * 1e-9);
            tool_case_free(&c);
        }
    }
    printf("  CPU: %s, %d threads; measured %s FMA peak %.1f GFLOP/s, copy %.1f GB/s\n", tool_cpu_model(), threads,
           tool_fma_peak_isa(), fl.cpu_gflops, fl.cpu_gbps);
    if (tool_cuda_devices() > 0) {
        fl.gpu_gflops = tool_cuda_peak_gflops();
        printf("  GPU: %s; FP32 FMA peak %.0f GFLOP/s (SMs x clock), copy %.0f GB/s\n", tool_cuda_device_name(),
               fl.gpu_gflops, tool_cuda_copy_gbps());
    } else {
        printf("  GPU: no CUDA device here (or built without CUDA): CUDA kernels skipped\n");
    }
    printf("\n%-5s %-18s %-8s %10s %9s %7s %8s  %-6s %9s %9s\n", "dtype", "kernel", "backend", "ms median", "GFLOP/s",
           "%peak", "vs ref", "==ref", "rel L2 y", "rel L2 S");
    const double t0 = tool_now();
    int failures = run_dtype(GDN_F32, T, &fl);
    /* bf16 activations on a shorter window: ref and the oracle take seconds per thousand tokens */
    const int64_t T_half = T < BF16_T ? T : BF16_T;
    if (failures != RUN_OOM) {
        printf("bf16 q, k, v, y (state f32), T=%lld:\n", (long long)T_half);
        failures = run_dtype(GDN_BF16, T_half, &fl) == RUN_OOM ? RUN_OOM : failures;
    }
    if (failures == RUN_OOM) {
        fprintf(stderr, "gdn run: out of memory for T=%lld (the case, ref's outputs and the oracle's f64 copies)\n",
                (long long)T);
        return 1;
    }
    /* the legend, once, under the table */
    printf("\n  ms median: of 1 to 11 calls (CUDA: 20); %%peak: of the FMA peak measured above; vs ref: ref's\n"
           "  time over this one's; ==ref: y and the final state memcmp-equal to ref's ((def): ref itself; chunked:\n"
           "  a kernel of the chunked contract, held to the bounds alone); rel L2 y, S: ||x - oracle|| / ||oracle||\n"
           "  against the float64 oracle, bound %.0e (bf16 y: %.0e)\n", REL_L2_BOUND, REL_L2_BOUND_HALF);
    printf("\n%s (%.1f s)\n\n",
           failures ? "FAILED: a kernel differs from ref or misses the error bound"
                    : "every exact kernel bitwise equal to ref, errors within bounds",
           tool_now() - t0);
    char quick[] = "--quick";
    char *layer_argv[] = {quick};
    failures += tool_layer(1, layer_argv);
    return failures ? 1 : 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: gdn run [--T N] | layer [--quick] [--json] [--hv N] | bench [--json] [--kernel NAME]\n"
               "           [--reps N] [--quick] [--all] [--dtype D] [--layout vk|kv] | check | list | --help\n"
               "  run    the GDN recurrence at the Qwen3.6 shapes on every kernel here: checked against ref, timed\n"
               "  layer  the layer step (conv, norms, gates, recurrence, gated norm): checked, timed\n"
               "  bench  prefill and decode sweeps against the machine's measured floors (--json: a line per row)\n"
               "  check  every eligible kernel against ref, bitwise, on small shapes\n"
               "  list   the kernel table, eligibility here, the router's choices and the environment switches\n"
               "gdn COMMAND --help: the command's own help\n");
}

/* check and list take no options but --help: -1 to run the command, else the exit status (0 after the help, 2 on a
 * bad command line) */
static int no_options(const char *cmd, const char *help, int argc, char **argv) {
    char usage_line[32];
    snprintf(usage_line, sizeof usage_line, "usage: gdn %s\n", cmd);
    if (argc == 0) return -1;
    if (argc == 1 && tool_is_help(argv[0])) {
        printf("%s%s", usage_line, help);
        return 0;
    }
    const char *what = argv[0][0] == '-' ? "unknown option" : "unexpected argument";
    return tool_usage_error(cmd, usage_line, "%s '%s' (it takes no options)", what, argv[0]);
}

int main(int argc, char **argv) {
    if (argc >= 2 && (tool_is_help(argv[1]) || strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "gdn: no command given\n");
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return tool_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "layer") == 0) return tool_layer(argc - 2, argv + 2);
    static const char check_help[] =
        "  every eligible exact kernel (CPU, and CUDA where a device is present) against ref, bitwise (y and the\n"
        "  final state), on a few small shapes, dtypes, gates and layouts; exit 1 when one differs\n";
    static const char list_help[] =
        "  the kernel table in routing order (backend, contract, variants), which kernels are eligible here for the\n"
        "  Qwen3.6 prefill and decode shapes, the router's choices, the CPU pool and the environment switches\n";
    if (strcmp(cmd, "check") == 0) {
        const int st = no_options("check", check_help, argc - 2, argv + 2);
        return st < 0 ? cmd_check() : st;
    }
    if (strcmp(cmd, "list") == 0) {
        const int st = no_options("list", list_help, argc - 2, argv + 2);
        return st < 0 ? cmd_list() : st;
    }
    fprintf(stderr, "gdn: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
