/* `gdn bench`: prefill (B=1, T in {1, 7, 64, 257, 2048, 8192}) and decode (T=1, B in {1, 8, 64, 256}) at the
 * Qwen3.6 head shape, the fast kernels (the other CPU kernels where they are quick), against the machine's floors
 * measured in the same run. Each call takes the next slot of a pool of cases (inputs, y and state) whose total is 4x the
 * last-level cache, so a decode figure is a memory figure, not a cache figure. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdn_testing.h"
#include "gdn_tool.h"

enum { HK = 16, HV = 32, D = 128, MAX_SLOTS = 256, MAX_KERNELS = 32 };
#define REF_CHECK_TOKENS 2048 /* bitwise check against ref when B*T is at most this (ref is slow); --quick: 256 */
#define SMALL_TOKENS 256      /* CPU kernels the router does not pick here (ref, fallbacks) are timed when B*T is at
                               * most this; --all times them everywhere */

typedef struct bench_opts {
    int json, quick, all, reps;
    const char *kernel;
    gdn_dtype dtype;
    gdn_state_layout layout;
} bench_opts;

typedef struct bench_floor {
    double cpu_gflops, cpu_gbps, gpu_gflops, gpu_gbps;
} bench_floor;

/* Progress goes to stderr only where stderr is a terminal, as one line rewritten in place and erased before each
 * table row (and before a message of its own), so that it never interleaves with the table on stdout; messages
 * (failures) are whole lines on stderr wherever it goes. */
static int progress_tty = -1;

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    if (progress_tty < 0) progress_tty = isatty(STDERR_FILENO);
    if (!progress_tty) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K[bench] ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static void progress_clear(void) {
    if (progress_tty > 0) fputs("\r\033[K", stderr);
}

static void message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void message(const char *fmt, ...) {
    progress_clear();
    va_list ap;
    va_start(ap, fmt);
    fputs("[bench] ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* One result line. */
typedef struct bench_row {
    const char *kernel;
    gdn_backend backend;
    double ms_median, ms_min;
    int reps, slots;
    int equal; /* 1, 0, or -1: not checked */
} bench_row;

static size_t slot_bytes(const tool_case *c) {
    return 2 * c->qk_bytes + 2 * c->v_bytes + c->gate_bytes + c->beta_bytes + c->state_bytes;
}

/* Times `reps` in-place calls of CPU kernel `name`, one slot after another from slot 0, after one warm-up call
 * on the last slot when reps > 1 (every slot was written when it was filled; slot 0 first, so it is out of the
 * cache). */
static gdn_status time_cpu(tool_case *slots, int n_slots, const char *name, int reps, bench_row *row) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) return GDN_ERR_OUT_OF_MEMORY;
    gdn_status st = GDN_OK;
    for (int i = reps > 1 ? -1 : 0; i < reps && st == GDN_OK; ++i) {
        tool_case *c = &slots[(i + n_slots) % n_slots];
        gdn_delta_args a = c->a;
        a.kernel = name;
        a.state_in = a.state_out = c->state;
        const double t0 = tool_now();
        st = gdn_delta(&a);
        if (i >= 0) t[i] = tool_now() - t0;
    }
    if (st == GDN_OK) {
        row->ms_median = tool_median(t, reps) * 1e3;
        row->ms_min = t[0] * 1e3; /* t is sorted now */
        row->reps = reps;
        row->slots = n_slots;
    }
    free(t);
    return st;
}

/* Reps for a call that took `sec` once: about a second of timing (a fifth with --quick), at least 3; a single
 * one when the call took more than 2 s. */
static int auto_reps(const bench_opts *o, double sec) {
    if (o->reps > 0) return o->reps;
    if (sec > 2.0) return 1;
    const double budget = o->quick ? 0.2 : 1.0;
    const double n = sec > 0.0 ? budget / sec : 200.0;
    return n < 3.0 ? 3 : n > 200.0 ? 200 : (int)n;
}

/* A JSON number, or null where it is not finite (a floor or a ratio whose peak is unknown). */
static const char *json_num(char *buf, size_t n, double x) {
    if (isfinite(x)) snprintf(buf, n, "%.6g", x);
    else snprintf(buf, n, "null");
    return buf;
}

static void emit(const bench_opts *o, const char *mode, const tool_case *c, const bench_row *r, const bench_floor *fl) {
    const gdn_delta_args *a = &c->a;
    const double flops = tool_case_flops(a), bytes = tool_case_bytes(a), sec = r->ms_median * 1e-3;
    const int gpu = r->backend == GDN_BACKEND_CUDA;
    const double peak_gflops = gpu ? fl->gpu_gflops : fl->cpu_gflops, peak_gbps = gpu ? fl->gpu_gbps : fl->cpu_gbps;
    const double gflops = flops / sec * 1e-9, gbps = bytes / sec * 1e-9;
    /* the floor: the larger of the flop time at the FMA peak and the byte time at the copy bandwidth */
    const double t_flops = peak_gflops > 0.0 ? flops / (peak_gflops * 1e9) : NAN;
    const double t_bytes = peak_gbps > 0.0 ? bytes / (peak_gbps * 1e9) : NAN;
    const double floor_ms = 1e3 * (isnan(t_flops) ? t_bytes : isnan(t_bytes) || t_flops > t_bytes ? t_flops : t_bytes);
    const double pct_gflops = peak_gflops > 0.0 ? 100.0 * gflops / peak_gflops : NAN;
    const double pct_gbps = peak_gbps > 0.0 ? 100.0 * gbps / peak_gbps : NAN;
    const char *eq = r->equal < 0 ? "null" : r->equal ? "true" : "false";
    if (o->json) {
        char j[7][32];
        printf("{\"backend\":\"%s\",\"kernel\":\"%s\",\"mode\":\"%s\",\"B\":%lld,\"T\":%lld,\"Hk\":%lld,\"Hv\":%lld,"
               "\"Dk\":%lld,\"Dv\":%lld,\"dtype\":\"%s\",\"layout\":\"%s\",\"threads\":%d,\"ms_median\":%.6g,\"ms_min\":%.6g,\"reps\":%d,"
               "\"pool_slots\":%d,\"pool_mb\":%.1f,\"gflops\":%s,\"gbps\":%s,\"peak_gflops\":%s,\"peak_gbps\":%s,"
               "\"pct_peak_gflops\":%s,\"pct_peak_gbps\":%s,\"floor_ms\":%s,\"bitwise_equal_ref\":%s,\"device\":\"%s\"}\n",
               gpu ? "cuda" : "cpu", r->kernel, mode, (long long)a->B, (long long)a->T, (long long)a->Hk, (long long)a->Hv,
               (long long)a->Dk, (long long)a->Dv, tool_dtype_name(a->dtype), a->state_layout == GDN_STATE_KV ? "kv" : "vk",
               gpu ? 1 : gdn_cpu_threads(), r->ms_median,
               r->ms_min, r->reps, r->slots, (double)r->slots * (double)slot_bytes(c) / 1048576.0,
               json_num(j[0], sizeof j[0], gflops), json_num(j[1], sizeof j[1], gbps),
               json_num(j[2], sizeof j[2], peak_gflops), json_num(j[3], sizeof j[3], peak_gbps),
               json_num(j[4], sizeof j[4], pct_gflops), json_num(j[5], sizeof j[5], pct_gbps),
               json_num(j[6], sizeof j[6], floor_ms), eq,
               gpu ? tool_cuda_device_name() : tool_cpu_model());
    } else {
        printf("%-7s %4lld %5lld  %-18s %-4s %10.3f %9.1f %6.1f%% %8.1f %6.1f%% %9.3f %6.2fx  %-5s %4d\n", mode,
               (long long)a->B, (long long)a->T, r->kernel, gpu ? "cuda" : "cpu", r->ms_median, gflops, pct_gflops,
               gbps, pct_gbps, floor_ms, r->ms_median / floor_ms, r->equal < 0 ? "-" : r->equal ? "yes" : "NO",
               r->slots);
    }
    fflush(stdout);
}

/* One shape: a pool of slots, ref's outputs on slot 0, every selected kernel checked then timed. Returns the
 * number of kernels that differ from ref or failed. */
static int bench_shape(const bench_opts *o, const char *mode, int64_t B, int64_t T, const bench_floor *fl, uint64_t seed) {
    const tool_spec sp = {.B = B, .T = T, .Hk = HK, .Hv = HV, .Dk = D, .Dv = D, .dtype = o->dtype,
                          .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .layout = o->layout};
    tool_case *slots = calloc(MAX_SLOTS, sizeof *slots);
    int n_slots = 0, failures = 0;
    void *y_ref = NULL, *y = NULL;
    float *s_ref = NULL, *s = NULL;
    if (!slots || !tool_case_init(&slots[0], &sp, seed)) goto oom;
    n_slots = 1;
    const size_t per_slot = slot_bytes(&slots[0]), want = (4 * tool_llc_bytes() + per_slot - 1) / per_slot;
    const int target = want < 1 ? 1 : want > MAX_SLOTS ? MAX_SLOTS : (int)want;
    progress("%s B=%lld T=%lld: filling a pool of %d slots (%.0f MiB)", mode, (long long)B, (long long)T, target,
             (double)target * (double)per_slot / 1048576.0);
    for (; n_slots < target; ++n_slots)
        if (!tool_case_init(&slots[n_slots], &sp, seed + (uint64_t)n_slots)) goto oom;
    y_ref = malloc(slots[0].v_bytes);
    y = malloc(slots[0].v_bytes);
    s_ref = malloc(slots[0].state_bytes);
    s = malloc(slots[0].state_bytes);
    if (!y_ref || !y || !s_ref || !s) goto oom;

    const int checkable = B * T <= (o->quick ? SMALL_TOKENS : REF_CHECK_TOKENS);
    const char *routed = NULL;
    if (gdn_route(&slots[0].a, &routed) != GDN_OK) routed = NULL;
    double ref_sec = 0.0;
    if (checkable) {
        progress("%s B=%lld T=%lld: ref, for the bitwise checks", mode, (long long)B, (long long)T);
        const gdn_status st = tool_cpu_call(&slots[0], "ref", y_ref, s_ref, &ref_sec);
        if (st != GDN_OK) {
            message("%s B=%lld T=%lld: ref failed: %s", mode, (long long)B, (long long)T, gdn_status_str(st));
            failures++;
            goto done;
        }
    }

    /* checks (and the CUDA runs) first, on the pristine slot 0; then the CPU timings, which write the slots */
    bench_row rows[MAX_KERNELS];
    int n_rows = 0;
    double first_sec[MAX_KERNELS];
    for (int i = 0; i < gdn_kernel_count() && n_rows < MAX_KERNELS; ++i) {
        const char *name = gdn_kernel_name(i);
        const gdn_backend be = gdn_kernel_backend(i);
        const int is_ref = strcmp(name, "ref") == 0;
        const int fallback = be == GDN_BACKEND_CPU && (!routed || strcmp(name, routed) != 0);
        if (o->kernel ? strcmp(o->kernel, name) != 0 : fallback && !o->all && B * T > SMALL_TOKENS) continue;
        bench_row *r = &rows[n_rows];
        *r = (bench_row){name, be, 0.0, 0.0, 0, 0, -1};
        progress("%s B=%lld T=%lld: checking %s", mode, (long long)B, (long long)T, name);
        gdn_status st;
        if (be == GDN_BACKEND_CUDA) {
            if (tool_cuda_devices() == 0) continue;
            st = tool_cuda_run(&slots[0], name, o->reps > 0 ? o->reps : o->quick ? 5 : 20, y, s, &r->ms_median, &r->slots);
            r->ms_min = r->ms_median;
            r->reps = o->reps > 0 ? o->reps : o->quick ? 5 : 20;
        } else if (!gdn_kernel_eligible(i, &slots[0].a)) {
            st = GDN_ERR_INELIGIBLE;
        } else if (is_ref && checkable) {
            st = GDN_OK;
            first_sec[n_rows] = ref_sec;
        } else {
            st = tool_cpu_call(&slots[0], name, y, s, &first_sec[n_rows]);
        }
        if (st == GDN_ERR_INELIGIBLE) continue;
        if (st != GDN_OK) {
            message("%s B=%lld T=%lld: %s failed: %s", mode, (long long)B, (long long)T, name, gdn_status_str(st));
            failures++;
            continue;
        }
        if (checkable && gdn_kernel_contract(i) == GDN_CONTRACT_EXACT) /* the chunked contract: not ref's bits */
            r->equal = is_ref || (memcmp(y, y_ref, slots[0].v_bytes) == 0 && memcmp(s, s_ref, slots[0].state_bytes) == 0);
        failures += r->equal == 0;
        n_rows++;
    }
    for (int k = 0; k < n_rows; ++k) {
        bench_row *r = &rows[k];
        if (r->backend == GDN_BACKEND_CPU) {
            const int reps = auto_reps(o, first_sec[k]);
            progress("%s B=%lld T=%lld: timing %s (%d calls)", mode, (long long)B, (long long)T, r->kernel, reps);
            const gdn_status st = time_cpu(slots, n_slots, r->kernel, reps, r);
            if (st != GDN_OK) {
                message("%s B=%lld T=%lld: %s failed: %s", mode, (long long)B, (long long)T, r->kernel,
                        gdn_status_str(st));
                failures++;
                continue;
            }
        }
        progress_clear();
        emit(o, mode, &slots[0], r, fl);
    }
    goto done;
oom:
    message("%s B=%lld T=%lld: out of memory", mode, (long long)B, (long long)T);
    failures++;
done:
    for (int i = 0; i < n_slots; ++i) tool_case_free(&slots[i]);
    free(slots);
    free(y_ref);
    free(y);
    free(s_ref);
    free(s);
    return failures;
}

static const char bench_usage[] =
    "usage: gdn bench [--json] [--kernel NAME] [--reps N] [--quick] [--all] [--dtype f32|bf16|f16] [--layout vk|kv]\n";

/* 1: options in *o; 0: --help (printed); 2: a bad command line (reported) */
static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->layout = GDN_STATE_VK;
    for (int i = 0; i < argc; ++i) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const int takes_value = strcmp(opt, "--kernel") == 0 || strcmp(opt, "--reps") == 0 ||
                                strcmp(opt, "--dtype") == 0 || strcmp(opt, "--layout") == 0;
        if (takes_value && !val) return tool_usage_error("bench", bench_usage, "%s needs a value", opt);
        if (takes_value) ++i;
        if (strcmp(opt, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(opt, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(opt, "--all") == 0) {
            o->all = 1;
        } else if (strcmp(opt, "--kernel") == 0) {
            o->kernel = val;
        } else if (strcmp(opt, "--reps") == 0) {
            int64_t reps;
            if (!tool_parse_int(val, 1, 1000000, &reps))
                return tool_usage_error("bench", bench_usage, "--reps takes an integer from 1 to 1000000, not '%s'",
                                        val);
            o->reps = (int)reps;
        } else if (tool_is_help(opt)) {
            printf("%s", bench_usage);
            printf("  prefill B=1, T in {1, 7, 64, 257, 2048, 8192}; decode T=1, B in {1, 8, 64, 256} (--quick: fewer\n"
                   "  shapes and reps); Hk=16 Hv=32 Dk=Dv=128; every CUDA kernel and the CPU kernel the router picks,\n"
                   "  the other CPU kernels (ref, fallbacks) up to B*T = 256 (--all: everywhere); --json: one JSON\n"
                   "  object per line on stdout; --layout: the state layout (default vk). The table goes to stdout;\n"
                   "  progress to stderr, on a terminal only, on one line that is erased before each row.\n");
            return 0;
        } else if (strcmp(opt, "--dtype") == 0) {
            if (strcmp(val, "f32") == 0) o->dtype = GDN_F32;
            else if (strcmp(val, "bf16") == 0) o->dtype = GDN_BF16;
            else if (strcmp(val, "f16") == 0) o->dtype = GDN_F16;
            else return tool_usage_error("bench", bench_usage, "--dtype takes f32, bf16 or f16, not '%s'", val);
        } else if (strcmp(opt, "--layout") == 0) {
            if (strcmp(val, "vk") == 0) o->layout = GDN_STATE_VK;
            else if (strcmp(val, "kv") == 0) o->layout = GDN_STATE_KV;
            else return tool_usage_error("bench", bench_usage, "--layout takes vk or kv, not '%s'", val);
        } else {
            return tool_usage_error("bench", bench_usage, "unknown option '%s'", opt);
        }
    }
    return 1;
}

int tool_bench(int argc, char **argv) {
    bench_opts o;
    const int parsed = parse(argc, argv, &o);
    if (parsed != 1) return parsed;
    if (o.kernel) {
        int found = 0;
        for (int i = 0; i < gdn_kernel_count(); ++i) found |= strcmp(gdn_kernel_name(i), o.kernel) == 0;
        if (!found) {
            fprintf(stderr, "gdn bench: no kernel named %s (see gdn list)\n", o.kernel);
            return 2;
        }
    }
    const int threads = gdn_cpu_threads();
    progress("measuring the floors: FMA peak, copy bandwidth");
    bench_floor fl = {tool_fma_peak_gflops(threads), tool_copy_gbps(threads), 0.0, 0.0};
    if (tool_cuda_devices() > 0) {
        fl.gpu_gflops = tool_cuda_peak_gflops();
        fl.gpu_gbps = tool_cuda_copy_gbps();
    }
    progress_clear();
    /* the machine and its floors: above the table, or on stderr beside --json's lines */
    FILE *head = o.json ? stderr : stdout;
    const char *tag = o.json ? "[bench] " : "";
    fprintf(head, "%sCPU: %s, %d threads, %s FMA peak %.1f GFLOP/s, copy %.1f GB/s, LLC %.0f MiB (measured now)\n",
            tag, tool_cpu_model(), threads, tool_fma_peak_isa(), fl.cpu_gflops, fl.cpu_gbps,
            (double)tool_llc_bytes() / 1048576.0);
    if (fl.gpu_gflops > 0.0)
        fprintf(head, "%sGPU: %s, FP32 peak %.0f GFLOP/s, copy %.0f GB/s\n", tag, tool_cuda_device_name(),
                fl.gpu_gflops, fl.gpu_gbps);
    else
        fprintf(head, "%sGPU: no CUDA device (or built without CUDA): CUDA kernels skipped\n", tag);
    if (!o.json) {
        printf("Hk=%d Hv=%d Dk=Dv=%d %s, state %s; floor = max(flops / FMA peak, bytes / copy bandwidth); pool: the\n"
               "slots a kernel's calls rotate through (4x the last-level cache)\n\n",
               HK, HV, D, tool_dtype_name(o.dtype), o.layout == GDN_STATE_KV ? "KV" : "VK");
        printf("%-7s %4s %5s  %-18s %-4s %10s %9s %7s %8s %7s %9s %7s  %-5s %4s\n", "mode", "B", "T", "kernel", "be",
               "ms median", "GFLOP/s", "%peak", "GB/s", "%bw", "floor ms", "/floor", "==ref", "pool");
    }
    fflush(stdout);
    static const int64_t prefill_T[] = {1, 7, 64, 257, 2048, 8192}, decode_B[] = {1, 8, 64, 256};
    static const int64_t quick_T[] = {1, 64, 2048}, quick_B[] = {1, 64};
    const int64_t *pt = o.quick ? quick_T : prefill_T, *db = o.quick ? quick_B : decode_B;
    const int npt = o.quick ? 3 : 6, ndb = o.quick ? 2 : 4;
    int failures = 0;
    for (int i = 0; i < npt; ++i) failures += bench_shape(&o, "prefill", 1, pt[i], &fl, 1000 + (uint64_t)i * 1000);
    for (int i = 0; i < ndb; ++i) failures += bench_shape(&o, "decode", db[i], 1, &fl, 9000 + (uint64_t)i * 1000);
    progress_clear();
    if (failures) message("%d failures", failures);
    return failures ? 1 : 0;
}
