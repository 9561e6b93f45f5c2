/* Test cases with realistic inputs, timing and statistics, and the memory floor of the machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gdn_testing.h"
#include "gdn_tool.h"

uint64_t tool_rng_u64(tool_rng *r) { return gdn__splitmix64(&r->s); }

double tool_rng_uniform(tool_rng *r) { return (double)(tool_rng_u64(r) >> 11) * 0x1.0p-53; }

double tool_rng_normal(tool_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    const double u = 1.0 - tool_rng_uniform(r), w = tool_rng_uniform(r), m = sqrt(-2.0 * log(u));
    r->spare = m * sin(6.283185307179586 * w);
    r->has_spare = 1;
    return m * cos(6.283185307179586 * w);
}

const char *tool_dtype_name(gdn_dtype d) { return d == GDN_BF16 ? "bf16" : d == GDN_F16 ? "f16" : "f32"; }

static void store_elem(void *base, gdn_dtype dtype, int64_t idx, float x) {
    switch (dtype) {
    case GDN_F16: ((uint16_t *)base)[idx] = gdn__f32_to_f16(x); break;
    case GDN_BF16: ((uint16_t *)base)[idx] = gdn__f32_to_bf16(x); break;
    default: ((float *)base)[idx] = x; break;
    }
}

/* rows of n normals, each scaled to unit L2 norm when `normalize` */
static void fill_rows(void *dst, gdn_dtype dtype, int64_t rows, int64_t n, int normalize, tool_rng *r) {
    int ok = 1;
    const int64_t bytes = GDN_SIZE_PROD(&ok, n, (int64_t)sizeof(double));
    double *row = ok ? malloc((size_t)bytes) : NULL;
    if (!row) return;
    for (int64_t i = 0; i < rows; ++i) {
        double ss = 0.0;
        for (int64_t e = 0; e < n; ++e) {
            row[e] = tool_rng_normal(r);
            ss += row[e] * row[e];
        }
        const double f = normalize ? 1.0 / sqrt(ss) : 1.0;
        for (int64_t e = 0; e < n; ++e) store_elem(dst, dtype, i * n + e, (float)(row[e] * f));
    }
    free(row);
}

void tool_case_free(tool_case *c) {
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->y);
    free(c->gate);
    free(c->A_log);
    free(c->dt_bias);
    free(c->beta);
    free(c->mask);
    free(c->state);
    memset(c, 0, sizeof *c);
}

/* The inputs and the initial state of case c (buffers allocated, spec set). */
static void fill_case(tool_case *c, uint64_t seed) {
    const tool_spec *s = &c->spec;
    const int64_t tokens = s->B * s->T, heads = tokens * s->Hv;
    tool_rng r = {seed, 0.0, 0};
    fill_rows(c->q, s->dtype, tokens * s->Hk, s->Dk, 1, &r);
    fill_rows(c->k, s->dtype, tokens * s->Hk, s->Dk, 1, &r);
    fill_rows(c->v, s->dtype, heads, s->Dv, 0, &r);
    /* Per head: A = exp(A_log) in [1, 8], dt = softplus(dt_bias) log-uniform in [1e-3, 1e-2]; per token
     * a ~ N(0, 1), so g = exp(-A softplus(a + dt_bias)) is mostly in [0.9, 1). */
    for (int64_t h = 0; h < s->Hv; ++h) {
        c->A_log[h] = (float)log(1.0 + 7.0 * tool_rng_uniform(&r));
        const double dt = exp(log(1e-3) + tool_rng_uniform(&r) * log(10.0));
        c->dt_bias[h] = (float)log(expm1(dt));
    }
    const int64_t n_gate = (int64_t)(c->gate_bytes / 4);
    for (int64_t i = 0; i < n_gate; ++i) {
        const double decay = 0.85 + 0.15 * tool_rng_uniform(&r);
        c->gate[i] = (float)(s->gate_kind == GDN_GATE_RAW ? tool_rng_normal(&r)
                             : s->gate_kind == GDN_GATE_LOG_DECAY ? log(decay) : decay);
    }
    for (int64_t i = 0; i < heads; ++i)
        c->beta[i] = (float)(s->beta_kind == GDN_BETA_LOGIT ? tool_rng_normal(&r) : tool_rng_uniform(&r));
    for (int64_t i = 0; i < (int64_t)c->mask_bytes; ++i) c->mask[i] = (uint8_t)(i % s->T % 3 != 1);
    const int64_t n_state = (int64_t)(c->state_bytes / 4);
    for (int64_t i = 0; i < n_state; ++i)
        c->state[i] = s->zero_state ? 0.0f : (float)((double)(tool_rng_u64(&r) >> 40) * 0x1.0p-24 * 0.2 - 0.1);
}

int tool_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return 0;
    const char *p = s + (*s == '-');
    if (!*p) return 0;
    for (const char *d = p; *d; ++d)
        if (*d < '0' || *d > '9') return 0;
    errno = 0;
    char *end = NULL;
    const long long n = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || n < lo || n > hi) return 0;
    *out = (int64_t)n;
    return 1;
}

int tool_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int tool_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gdn %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s(gdn %s --help for more)\n", usage, cmd);
    return 2;
}

int tool_case_init(tool_case *c, const tool_spec *spec, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->spec = *spec;
    const tool_spec *s = spec;
    const int64_t ds = s->dtype == GDN_F32 ? 4 : 2, gate_row = s->gate_kind == GDN_GATE_VECTOR ? s->Dk : 1;
    int ok = 1;
    const int64_t tokens = GDN_SIZE_PROD(&ok, s->B, s->T), heads = GDN_SIZE_PROD(&ok, tokens, s->Hv);
    c->qk_bytes = (size_t)GDN_SIZE_PROD(&ok, tokens, s->Hk, s->Dk, ds);
    c->v_bytes = (size_t)GDN_SIZE_PROD(&ok, heads, s->Dv, ds);
    c->gate_bytes = (size_t)GDN_SIZE_PROD(&ok, heads, gate_row, 4);
    c->beta_bytes = (size_t)GDN_SIZE_PROD(&ok, heads, 4);
    c->mask_bytes = s->masked ? (size_t)tokens : 0;
    c->state_bytes = (size_t)GDN_SIZE_PROD(&ok, s->B, s->Hv, s->Dk, s->Dv, 4);
    if (!ok) return 0; /* sizes past GDN_SIZE_LIMIT: as out of memory */
    c->q = malloc(c->qk_bytes);
    c->k = malloc(c->qk_bytes);
    c->v = malloc(c->v_bytes);
    c->y = calloc(1, c->v_bytes);
    c->gate = malloc(c->gate_bytes);
    c->beta = malloc(c->beta_bytes);
    c->A_log = malloc(sizeof(float) * (size_t)s->Hv);
    c->dt_bias = malloc(sizeof(float) * (size_t)s->Hv);
    c->mask = s->masked ? malloc(c->mask_bytes) : NULL;
    c->state = malloc(c->state_bytes);
    if (!c->q || !c->k || !c->v || !c->y || !c->gate || !c->beta || !c->A_log || !c->dt_bias ||
        (s->masked && !c->mask) || !c->state) {
        tool_case_free(c);
        return 0;
    }
    if (!s->no_fill) fill_case(c, seed);

    gdn_delta_args *a = &c->a;
    a->B = s->B;
    a->T = s->T;
    a->Hk = s->Hk;
    a->Hv = s->Hv;
    a->Dk = s->Dk;
    a->Dv = s->Dv;
    a->dtype = s->dtype;
    a->q = c->q;
    a->k = c->k;
    a->v = c->v;
    a->y = c->y;
    a->gate_kind = s->gate_kind;
    a->gate = c->gate;
    a->A_log = c->A_log;
    a->dt_bias = c->dt_bias;
    a->beta_kind = s->beta_kind;
    a->beta = c->beta;
    a->mask = c->mask;
    a->state_layout = s->layout;
    a->state_in = s->zero_state ? NULL : c->state;
    a->scale = (float)(1.0 / sqrt((double)s->Dk));
    a->backend = GDN_BACKEND_CPU;
    return 1;
}

gdn_status tool_cpu_call(const tool_case *c, const char *name, void *y, float *state_out, double *seconds) {
    gdn_delta_args a = c->a;
    a.kernel = name;
    a.y = y;
    a.state_out = state_out;
    if (c->spec.in_place && state_out) {
        memcpy(state_out, c->state, c->state_bytes);
        a.state_in = state_out;
    }
    const double t0 = tool_now();
    const gdn_status st = gdn_delta(&a);
    *seconds = tool_now() - t0;
    return st;
}

double tool_case_bytes(const gdn_delta_args *a) {
    const double ds = a->dtype == GDN_F32 ? 4.0 : 2.0;
    const double tokens = (double)a->B * (double)a->T;
    const double qk = 2.0 * tokens * (double)(a->Hk * a->Dk) * ds;
    const double vy = 2.0 * tokens * (double)(a->Hv * a->Dv) * ds;
    const double gate = tokens * (double)a->Hv * 4.0 * (a->gate_kind == GDN_GATE_VECTOR ? (double)a->Dk : 1.0);
    const double gate_beta = gate + tokens * (double)a->Hv * 4.0 + (a->gate_kind == GDN_GATE_RAW ? 8.0 * (double)a->Hv : 0.0);
    const double state = 2.0 * (double)a->B * (double)(a->Hv * a->Dk * a->Dv) * 4.0;
    const double mask = a->mask ? tokens : 0.0;
    return qk + vy + gate_beta + mask + state;
}

double tool_case_flops(const gdn_delta_args *a) {
    return 7.0 * (double)a->Dk * (double)a->Dv * (double)a->T * (double)a->Hv * (double)a->B;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double tool_median(double *x, int n) {
    if (n <= 0) return 0.0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void tool_case_decays(const tool_case *c, double *frac_high, double *min, double *median) {
    const gdn_delta_args *a = &c->a;
    int ok = 1;
    const int64_t n = GDN_SIZE_PROD(&ok, a->B, a->T, a->Hv), bytes = GDN_SIZE_PROD(&ok, n, (int64_t)sizeof(double));
    *frac_high = *min = *median = 0.0;
    double *g = ok ? malloc((size_t)bytes) : NULL;
    if (!g) return;
    int64_t high = 0;
    for (int64_t i = 0; i < n; ++i) {
        g[i] = gdn_raw_gate(c->gate[i], c->A_log[i % a->Hv], c->dt_bias[i % a->Hv]);
        high += g[i] >= 0.9 && g[i] < 1.0;
    }
    *frac_high = (double)high / (double)n;
    *median = tool_median(g, (int)n); /* sorts g */
    *min = g[0];
    free(g);
}

double tool_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tool_time_on_threads(void *(*worker)(void *), void *jobs, size_t job_size, int threads) {
    pthread_t tid[TOOL_MAX_THREADS];
    int started[TOOL_MAX_THREADS];
    char *job = jobs;
    const double t0 = tool_now();
    for (int t = 0; t < threads; ++t)
        started[t] = t > 0 && pthread_create(&tid[t], NULL, worker, job + (size_t)t * job_size) == 0;
    for (int t = 0; t < threads; ++t)
        if (!started[t]) worker(job + (size_t)t * job_size);
    for (int t = 1; t < threads; ++t)
        if (started[t]) pthread_join(tid[t], NULL);
    return tool_now() - t0;
}

double tool_rel_l2(const void *x, gdn_dtype dtype, const double *o, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)gdn__load(x, dtype, i) - o[i];
        num += d * d;
        den += o[i] * o[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* ---- memory floor: a large copy split over threads, counting bytes read + written ---- */

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes;
} copy_job;

static void *copy_worker(void *arg) {
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

/* Best of a few copies of 256 MiB split over `threads` threads (thread start-up, some 0.1% of a copy, counts). */
double tool_copy_gbps(int threads) {
    enum { MAX_THREADS = 64, TRIALS = 4 };
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    const size_t bytes = (size_t)256 << 20;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0.0;
    }
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    const size_t chunk = (bytes / (size_t)threads) & ~(size_t)4095;
    double best = 0.0;
    for (int trial = 0; trial < TRIALS; ++trial) {
        copy_job jobs[MAX_THREADS];
        for (int t = 0; t < threads; ++t) {
            const size_t off = (size_t)t * chunk;
            jobs[t] = (copy_job){dst + off, src + off, t == threads - 1 ? bytes - off : chunk};
        }
        const double gbps = 2.0 * (double)bytes / tool_time_on_threads(copy_worker, jobs, sizeof jobs[0], threads) * 1e-9;
        if (gbps > best) best = gbps;
    }
    free(src);
    free(dst);
    return best;
}

/* The highest cache level listed in sysfs (glibc's sysconf can report the L3 times the cores on AMD). */
size_t tool_llc_bytes(void) {
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 8; ++i) {
        char path[96], buf[32];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        const int got = fscanf(f, "%d", &level);
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = fopen(path, "r");
        if (!f) continue;
        if (got == 1 && fgets(buf, sizeof buf, f)) {
            char *end;
            size_t n = (size_t)strtoull(buf, &end, 10);
            n <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 0;
            if (level > best_level && n > 0) best = n, best_level = level;
        }
        fclose(f);
    }
    if (best) return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return (size_t)l3;
#endif
    return (size_t)32 << 20;
}

const char *tool_cpu_model(void) {
    static char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return model;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) break;
        colon += 1 + (colon[1] == ' ');
        snprintf(model, sizeof model, "%s", colon);
        model[strcspn(model, "\n")] = '\0';
        break;
    }
    fclose(f);
    return model;
}
