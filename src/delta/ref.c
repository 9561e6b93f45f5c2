/* The contract in code: `ref` (scalar f32, docs/CONTRACT.md line by line) and the float64 oracle. */
#include <math.h>
#include <stdlib.h>

#include "core/checked.h"
#include "gdn_internal.h"
#include "gdn_testing.h"

/* Per-thread scratch of ref: the state of one (b, h) as Dv columns of Dk keys, and one token's vectors. */
typedef struct ref_scratch {
    float *S;            /* [Dv][Dk] */
    float *q, *k, *gk;   /* [Dk]: q, k and (vector gate) g_i k_i */
    const float *g_vec;  /* [Dk] row of the vector gate, points into the input */
    float *v;            /* [Dv] */
} ref_scratch;

typedef struct ref_job {
    const gdn__problem *p;
    ref_scratch *scratch; /* one per worker */
} ref_job;

/* On x86-64 with GCC, ref_head is also built for FMA machines and picked at load time: fmaf is then one
 * instruction instead of a libm call. Same bits (fmaf rounds once either way; -ffp-contract=off still keeps
 * every other product and sum separate). */
/* (Not under ThreadSanitizer: gcc's TSan runtime is not up when the clones' resolver runs, before main.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define REF_CLONES __attribute__((target_clones("fma", "default")))
#else
#define REF_CLONES
#endif

/* One (b, h): the window's tokens in order, every column j through the contract's steps. */
REF_CLONES static void ref_head(void *ctx, int64_t item, int worker) {
    const ref_job *job = ctx;
    const gdn_delta_args *a = &job->p->a;
    ref_scratch *w = &job->scratch[worker];
    const int64_t b = item / a->Hv, h = item % a->Hv, hk = gdn__key_head(h, a->Hk, job->p->group, job->p->tiled), Dk = a->Dk, Dv = a->Dv;

    for (int64_t j = 0; j < Dv; ++j)
        for (int64_t i = 0; i < Dk; ++i)
            w->S[j * Dk + i] = a->state_in ? a->state_in[gdn__state_index(a, b, h, i, j)] : 0.0f;

    for (int64_t t = 0; t < a->T; ++t) {
        const int64_t y_row = ((b * a->T + t) * a->Hv + h) * Dv;
        if (!gdn__token_live(a, b, t)) {
            for (int64_t j = 0; j < Dv; ++j) gdn__store(a->y, a->dtype, y_row + j, 0.0f);
            continue;
        }
        const int64_t qk_row = ((b * a->T + t) * a->Hk + hk) * Dk;
        gdn__load_row(w->q, a->q, a->dtype, qk_row, Dk);
        gdn__load_row(w->k, a->k, a->dtype, qk_row, Dk);
        gdn__load_row(w->v, a->v, a->dtype, y_row, Dv);
        const float beta = gdn__beta(a, b, t, h);
        const int vector_gate = a->gate_kind == GDN_GATE_VECTOR;
        float g = 0.0f;
        if (vector_gate) {
            w->g_vec = a->gate + ((b * a->T + t) * a->Hv + h) * Dk;
            for (int64_t i = 0; i < Dk; ++i) w->gk[i] = w->g_vec[i] * w->k[i];
        } else {
            g = gdn__scalar_gate(a, b, t, h);
        }
        for (int64_t j = 0; j < Dv; ++j) {
            float *col = w->S + j * Dk;
            /* kv_j = tree(S[:,j] . k) (vector gate: . g k); d_j = (v_j - g kv_j) beta (vector: (v_j - kv_j) beta) */
            const float kv = gdn__tree_dot(col, vector_gate ? w->gk : w->k, Dk);
            const float delta = vector_gate ? (w->v[j] - kv) * beta : (w->v[j] - g * kv) * beta;
            /* S[i][j] = fma(g, S[i][j], k_i d_j) (vector: g_i) */
            for (int64_t i = 0; i < Dk; ++i) col[i] = fmaf(vector_gate ? w->g_vec[i] : g, col[i], w->k[i] * delta);
            /* y_j = tree(S[:,j] . q) * scale */
            gdn__store(a->y, a->dtype, y_row + j, gdn__tree_dot(col, w->q, Dk) * a->scale);
        }
    }
    if (a->state_out)
        for (int64_t j = 0; j < Dv; ++j)
            for (int64_t i = 0; i < Dk; ++i) a->state_out[gdn__state_index(a, b, h, i, j)] = w->S[j * Dk + i];
}

/* Any arguments that validate. */
int gdn__delta_ref_eligible(const gdn__problem *p) { return p != NULL; }
int gdn__delta_ref_routed(const gdn__problem *p) { return p != NULL; }
const gdn__variant gdn__delta_ref_variants[] = {{NULL, 0, 0, 0, 0, 0, 0, 0}};

/* Per worker: its ref_scratch, and S [Dv][Dk], q, k, gk [Dk], v [Dv] floats (`per`: Dk (Dv + 3) + Dv); -1 when the
 * bytes cannot be counted (a workspace that cannot be counted cannot be had). */
static int64_t ref_workspace(const gdn__problem *p, int64_t *per) {
    const int64_t Dk = p->a.Dk, Dv = p->a.Dv, workers = p->threads;
    int64_t floats = 0, bytes = 0;
    if (!gdn__size_mul(Dk, Dv + 3, per) || !gdn__size_add(*per, Dv, per) || !gdn__size_mul(*per, workers, &floats) ||
        !gdn__size_mul(floats, (int64_t)sizeof(float), &bytes) ||
        !gdn__size_add(bytes, workers * (int64_t)sizeof(ref_scratch), &bytes) || !gdn__size_fits(bytes))
        return -1;
    return bytes;
}

int64_t gdn__delta_ref_workspace(const gdn__problem *p) {
    int64_t per = 0;
    return ref_workspace(p, &per);
}

gdn_status gdn__delta_ref(const gdn__problem *p, const gdn__variant *v) {
    (void)v; /* no variants */
    const int64_t Dk = p->a.Dk, Dv = p->a.Dv;
    const int workers = p->threads;
    int64_t per = 0;
    const int64_t bytes = ref_workspace(p, &per);
    if (bytes < 0 || !p->ws || p->ws_bytes < bytes) return GDN_ERR_OUT_OF_MEMORY;
    ref_scratch *scratch = p->ws; /* the workers' ref_scratch, then their floats */
    float *arena = (float *)(scratch + workers);
    for (int w = 0; w < workers; ++w) {
        float *base = arena + (size_t)w * (size_t)per;
        scratch[w] = (ref_scratch){base, base + Dk * Dv, base + Dk * Dv + Dk, base + Dk * Dv + 2 * Dk, NULL,
                                   base + Dk * Dv + 3 * Dk};
    }
    ref_job job = {p, scratch};
    gdn__parallel_for(p, p->a.B * p->a.Hv, p->threads, ref_head, &job);
    return GDN_OK;
}

/* ---- float64 oracle: the same recurrence with plain sums in double and libm's functions ---- */

static double oracle_gate(const gdn_delta_args *a, int64_t b, int64_t t, int64_t h) {
    double x = a->gate[(b * a->T + t) * a->Hv + h];
    switch (a->gate_kind) {
    case GDN_GATE_LOG_DECAY: return exp(x);
    case GDN_GATE_RAW: {
        double z = x + (double)a->dt_bias[h];
        double softplus = z > 20.0 ? z : log1p(exp(z));
        return exp(-exp((double)a->A_log[h]) * softplus);
    }
    default: return x;
    }
}

/* The float64 recurrence of a validated problem, dense form: y and state_out (NULL: not written) as double. */
static gdn_status oracle(const gdn__problem *p, double *y, double *state_out);

gdn_status gdn__oracle_delta(const gdn_delta_args *args, double *y, double *state_out) {
    gdn__problem p;
    const gdn_status s = gdn__validate(args, &p);
    if (s == GDN_OK && (p.a.cu_seqlens || p.a.state_slot))
        return gdn__fail(GDN_ERR_UNSUPPORTED, "the oracle takes the dense form only (args->cu_seqlens, state_slot NULL)");
    return s != GDN_OK ? s : oracle(&p, y, state_out);
}

static gdn_status oracle(const gdn__problem *p, double *y, double *state_out) {
    const gdn_delta_args *a = &p->a;
    const int64_t Dk = a->Dk, Dv = a->Dv;
    int64_t bytes = 0; /* S [Dv][Dk], q, k, g [Dk] doubles */
    if (!gdn__size_mul(Dk, Dv + 3, &bytes) || !gdn__size_mul(bytes, (int64_t)sizeof(double), &bytes) ||
        !gdn__size_fits(bytes))
        return GDN_ERR_OUT_OF_MEMORY;
    double *S = gdn__malloc((size_t)bytes);
    if (!S) return GDN_ERR_OUT_OF_MEMORY;
    double *q = S + Dk * Dv, *k = q + Dk, *g_vec = k + Dk;
    for (int64_t b = 0; b < a->B; ++b)
        for (int64_t h = 0; h < a->Hv; ++h) {
            const int64_t hk = gdn__key_head(h, a->Hk, p->group, p->tiled);
            for (int64_t j = 0; j < Dv; ++j)
                for (int64_t i = 0; i < Dk; ++i)
                    S[j * Dk + i] = a->state_in ? a->state_in[gdn__state_index(a, b, h, i, j)] : 0.0;
            for (int64_t t = 0; t < a->T; ++t) {
                const int64_t y_row = ((b * a->T + t) * a->Hv + h) * Dv;
                if (!gdn__token_live(a, b, t)) {
                    for (int64_t j = 0; j < Dv; ++j) y[y_row + j] = 0.0;
                    continue;
                }
                const int64_t qk_row = ((b * a->T + t) * a->Hk + hk) * Dk;
                for (int64_t i = 0; i < Dk; ++i) {
                    q[i] = gdn__load(a->q, a->dtype, qk_row + i);
                    k[i] = gdn__load(a->k, a->dtype, qk_row + i);
                    g_vec[i] = a->gate_kind == GDN_GATE_VECTOR ? a->gate[((b * a->T + t) * a->Hv + h) * Dk + i]
                                                               : oracle_gate(a, b, t, h);
                }
                double beta = a->beta[(b * a->T + t) * a->Hv + h];
                if (a->beta_kind == GDN_BETA_LOGIT) beta = 1.0 / (1.0 + exp(-beta));
                for (int64_t j = 0; j < Dv; ++j) {
                    double *col = S + j * Dk, kv = 0.0, o = 0.0;
                    /* decay after: kv uses g S, then S = g S + k d */
                    for (int64_t i = 0; i < Dk; ++i) kv += g_vec[i] * col[i] * k[i];
                    const double delta = ((double)gdn__load(a->v, a->dtype, y_row + j) - kv) * beta;
                    for (int64_t i = 0; i < Dk; ++i) col[i] = g_vec[i] * col[i] + k[i] * delta;
                    for (int64_t i = 0; i < Dk; ++i) o += col[i] * q[i];
                    y[y_row + j] = o * (double)a->scale;
                }
            }
            if (state_out)
                for (int64_t j = 0; j < Dv; ++j)
                    for (int64_t i = 0; i < Dk; ++i) state_out[gdn__state_index(a, b, h, i, j)] = S[j * Dk + i];
        }
    free(S);
    return GDN_OK;
}
