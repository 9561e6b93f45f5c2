/* Shared by the files of the `gdn` CLI (tools/): test cases with realistic inputs, timing, the machine's
 * measured floors, and the CUDA side. Not part of the library. */
#ifndef GDN_TOOL_H
#define GDN_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "gdn.h"

/* What a case looks like. Zero-initialized fields give: f32, gate as decays, beta direct, state layout VK, no
 * mask, a random initial state, not in place (the Qwen cases set gate_kind GDN_GATE_RAW, beta_kind
 * GDN_BETA_LOGIT). */
typedef struct tool_spec {
    int64_t B, T, Hk, Hv, Dk, Dv;
    gdn_dtype dtype;
    gdn_gate_kind gate_kind;
    gdn_beta_kind beta_kind;
    gdn_state_layout layout;
    int masked;     /* every third token (t % 3 == 1) is masked out */
    int zero_state; /* state_in = NULL (start from zero) */
    int in_place;   /* state_out = state_in in checked calls */
    int no_fill;    /* leave the buffers unwritten (for eligibility questions only) */
} tool_spec;

/* One problem with its own host buffers. `a` points at them (state_in at `state`, or NULL); a.y, a.state_out
 * and a.kernel are set per call. */
typedef struct tool_case {
    tool_spec spec;
    gdn_delta_args a;
    void *q, *k, *v, *y;          /* q, k [B,T,Hk,Dk]; v, y [B,T,Hv,Dv]; dtype */
    float *gate, *A_log, *dt_bias; /* gate [B,T,Hv] (vector: [B,T,Hv,Dk]); A_log, dt_bias [Hv] */
    float *beta;                   /* [B,T,Hv] */
    uint8_t *mask;                 /* [B,T] or NULL */
    float *state;                  /* [B,Hv,Dv,Dk] or [B,Hv,Dk,Dv]: the initial state (zeros if zero_state) */
    size_t qk_bytes, v_bytes, gate_bytes, beta_bytes, mask_bytes, state_bytes;
} tool_case;

/* Realistic inputs (seeded): q, k L2-normalized rows, v ~ N(0,1); raw gate a ~ N(0,1) with per-head A_log and
 * dt_bias so that decays are mostly in [0.9, 1) (other gate kinds: decays ~ U(0.85, 1)); beta logits ~ N(0,1)
 * (direct: U(0,1)); state ~ U(-0.1, 0.1). Returns 0 on OOM. */
int tool_case_init(tool_case *c, const tool_spec *spec, uint64_t seed);
void tool_case_free(tool_case *c);
/* Runs CPU kernel `name` once on c (state from c->state, or in place on a copy of it when spec.in_place),
 * writing y and the final state (state_out may be NULL); *seconds gets the wall time. */
gdn_status tool_cpu_call(const tool_case *c, const char *name, void *y, float *state_out, double *seconds);
/* Bytes a call must move: inputs read once, y written, state read and written (f32). */
double tool_case_bytes(const gdn_delta_args *a);
/* Flops the library counts: 7 Dk Dv per token per value head. */
double tool_case_flops(const gdn_delta_args *a);
/* Decays of a raw-gate case: fraction in [0.9, 1), minimum, and the median. */
void tool_case_decays(const tool_case *c, double *frac_high, double *min, double *median);

const char *tool_dtype_name(gdn_dtype d);

/* The cases' random numbers (tools/gdn_cases.c): splitmix64, uniform in [0, 1), standard normal (Box-Muller, two
 * per draw). Seed with {seed, 0, 0}. */
typedef struct tool_rng {
    uint64_t s;
    double spare;
    int has_spare;
} tool_rng;
uint64_t tool_rng_u64(tool_rng *r);
double tool_rng_uniform(tool_rng *r);
double tool_rng_normal(tool_rng *r);

/* Strict number parsing for the CLI: 1 when the whole of s is a decimal integer in [lo, hi] (no sign but '-',
 * no spaces, no exponent, no overflow), stored in *out; else 0 and *out untouched. */
int tool_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* The CLI's command lines: tool_is_help is 1 for "--help" and "-h"; tool_usage_error prints "gdn CMD: <what was
 * wrong>" (a printf format), then the usage line, on stderr, and returns 2, the exit status of a bad command line. */
int tool_is_help(const char *arg);
int tool_usage_error(const char *cmd, const char *usage, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Time, statistics, comparison. */
double tool_now(void);                 /* seconds, monotonic */
/* Seconds for worker(jobs + t job_size) on threads t = 0 .. threads - 1 (<= TOOL_MAX_THREADS), all started together:
 * t = 0 on the calling thread, and any thread that cannot be created too. */
#define TOOL_MAX_THREADS 256
double tool_time_on_threads(void *(*worker)(void *), void *jobs, size_t job_size, int threads);
double tool_median(double *x, int n);  /* sorts x */
/* sqrt(sum (x - o)^2 / sum o^2) of n elements; x read as `dtype` (f32 for states), o in double. */
double tool_rel_l2(const void *x, gdn_dtype dtype, const double *o, int64_t n);

/* The machine's floors, measured on `threads` threads. */
double tool_fma_peak_gflops(int threads);   /* tools/peak.c: FMA with the widest ISA (AVX-512, AVX2), 0 if none */
const char *tool_fma_peak_isa(void);        /* the ISA it measures: "AVX-512", "AVX2" or "none" */
/* The peak's chains per ISA (tools/peak_avx2.c, tools/peak_avx512.c), which tools/peak.c runs on every thread, best
 * of 3 trials: worker(&job) runs job.iters iterations of flops_per_iter each; NULL where the CPU lacks the ISA. */
typedef struct tool_peak_job {
    int64_t iters;
    float sink; /* keeps the chains alive */
} tool_peak_job;
typedef struct tool_peak_kernel {
    void *(*worker)(void *); /* takes a tool_peak_job */
    int64_t iters;           /* a trial's iterations */
    double flops_per_iter;
} tool_peak_kernel;
const tool_peak_kernel *tool_fma_peak_avx512(void);
const tool_peak_kernel *tool_fma_peak_avx2(void);
double tool_copy_gbps(int threads);         /* memcpy of a large buffer, bytes read + written */
size_t tool_llc_bytes(void);                /* last-level cache, 32 MiB when unknown */
const char *tool_cpu_model(void);

/* CUDA side (tools/gdn_cuda.c). Without a CUDA build every function reports no device. */
int tool_cuda_devices(void);
const char *tool_cuda_device_name(void);
double tool_cuda_peak_gflops(void);  /* FP32 FMA peak from the device's SM count and clock; 0 if unknown */
double tool_cuda_copy_gbps(void);    /* device-to-device copy, bytes read + written */
/* Runs CUDA kernel `name` on a device copy of case c: one checked call (as tool_cpu_call) whose y and final
 * state come back into y_out and state_out; then, when reps > 0, one warm-up and `reps` timed rotations of
 * in-place calls over device slots (copies of the case whose total is 4x the L2 cache), median ms per call.
 * GDN_ERR_INELIGIBLE if the kernel cannot run this case. */
gdn_status tool_cuda_run(const tool_case *c, const char *name, int reps, void *y_out, float *state_out,
                         double *ms_median, int *slots);

/* ---- the layer step (tools/gdn_layer.c, tools/gdn_layer_cases.c, tools/gdn_layer_cuda.c) ---- */

enum { TOOL_LAYER_HK = 16, TOOL_LAYER_D = 128 }; /* the Qwen3.6 heads: Hk, and Dk = Dv */

/* A layer case at the Qwen3.6 heads (Hk 16, D 128): B windows of n tokens, host buffers, pools of `slots` = B x
 * sets slots (sequence b of rotation r at slot r B + b; set 0 is what a checked call uses). */
typedef struct tool_layer_case {
    gdn_layer_args a;                 /* host pointers; a.y, a.state, a.hist_* point at the case's buffers */
    int32_t *cu, *slot, *commit;
    int64_t sets, T;
    size_t y_bytes, state_bytes, hist_bytes, set_state_bytes, set_hist_bytes; /* whole pools, and one set's */
    double bytes;                     /* what one call must move: pools read (and written when it commits), inputs, y */
} tool_layer_case;

/* Realistic inputs (seeded): qkv, z, alpha, beta ~ N(0,1); conv weights ~ N(0, 0.25); A_log = log U(1, 16);
 * dt_bias ~ U(0, 1); gamma ~ 1 + N(0, 0.1); states ~ U(-0.1, 0.1); histories ~ N(0,1). commit: -1 every token
 * (k = n), else k. Pools of at least pool_bytes (rotation); 0 on OOM. */
int tool_layer_case_init(tool_layer_case *c, int64_t Hv, int64_t B, int64_t n, gdn_dtype dtype, int commit,
                         double pool_bytes);
void tool_layer_case_free(tool_layer_case *c);
/* Points the case's sequences at rotation set r. */
void tool_layer_case_set(tool_layer_case *c, int64_t r);
/* On the GPU: a checked call of `kernel` on set 0 (y, the pools after it back into the host buffers y, state,
 * hist: NULL to skip), then `reps` timed calls rotating over the sets; median microseconds per call. */
gdn_status tool_layer_cuda_run(tool_layer_case *c, const char *kernel, int reps, void *y, float *state, void *hist,
                               double *us_median);
/* `gdn layer` (tools/gdn_layer.c); `gdn run` calls it with --quick after the recurrence. */
int tool_layer(int argc, char **argv);

/* `gdn bench` (tools/gdn_bench.c): argv after the subcommand. Returns the exit status. */
int tool_bench(int argc, char **argv);

#endif
