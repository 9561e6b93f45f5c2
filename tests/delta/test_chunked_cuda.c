/* cuda_chunked, the chunked contract (docs/CONTRACT.md, "The chunked contract"). Without a device: GDN_ERR_NO_DEVICE
 * and nothing written. With one, every run poisoned first (0xFF bytes):
 *   - against the float64 oracle over shapes, dtypes, gates (log-decay and raw, with exact zeros and huge decays),
 *     beta forms, masks, both layouts, GQA, with and without a state, windows of 1 .. 777 tokens: y within
 *     CHUNKED_Y_TOL of max |y|, the state within CHUNKED_S_TOL of max |S|, every element finite and written;
 *   - bitwise run to run; bitwise the same for a sequence alone and inside varlen batches of other sequences
 *     (skipped and permuted slots, in place; the batches of Qwen-shaped sequences, bf16 and f16, run the 8-warp
 *     scan, each sequence alone the 16-warp one), "fastest" batches of long and short windows too; bitwise the same
 *     for a window in one call and split at multiples of 64 tokens with the state carried;
 *   - the router: never cuda_chunked by default; "fastest" takes it for eligible windows of 64 tokens or more;
 *     ineligible arguments named to it are refused with nothing written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* y is rounded to bf16 or f16 (2^-9 of an element at most); the state stays f32 (its products use 16 bits) */
#define CHUNKED_Y_TOL 6e-3
#define CHUNKED_S_TOL 2e-4

static case_cfg chunk_cfg(int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t Dv, gdn_dtype dt, gdn_gate_kind gate,
                          uint64_t seed) {
    return (case_cfg){.B = B, .T = T, .Hk = Hk, .Hv = Hv, .Dk = 128, .Dv = Dv, .dtype = dt, .gate_kind = gate,
                      .seed = seed};
}

TEST(chunked_without_device_writes_nothing) {
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) SKIP("a CUDA device is present (CUDA_VISIBLE_DEVICES= hides it)");
    const case_cfg g = chunk_cfg(1, 70, 1, 2, 32, GDN_BF16, GDN_GATE_LOG_DECAY, 1);
    gdn_case c;
    CHECK(case_init(&c, &g));
    void *y = malloc(c.n_v * c.dsize);
    CHECK(y != NULL);
    const char *names[] = {"cuda_chunked", "fastest"};
    for (int i = 0; y && i < 2; ++i) {
        gdn_delta_args a = case_args(&c);
        a.backend = GDN_BACKEND_CUDA, a.kernel = names[i], a.y = y;
        poison(y, c.n_v * c.dsize);
        CHECK(gdn_delta(&a) == GDN_ERR_NO_DEVICE, "%s: %s", names[i], gdn_last_error());
        CHECK(poisoned_count(y, c.n_v, c.dsize) == c.n_v);
        CHECK(gdn_kernel_eligible(kernel_index("cuda_chunked"), &a) == 0);
    }
    free(y);
    case_free(&c);
}

#ifdef GDN_HAVE_CUDA

/* One run's device buffers: y and a state (or pool) of `n_state` floats. */
typedef struct dev_out {
    void *y;
    float *s;
    size_t ny, ns;
} dev_out;

static int dev_out_init(dev_out *o, size_t ny, size_t ns) {
    o->ny = ny, o->ns = ns, o->y = NULL, o->s = NULL;
    return cudaMalloc(&o->y, ny) == cudaSuccess && cudaMalloc((void **)&o->s, ns * 4 + 4) == cudaSuccess;
}
static void dev_out_free(dev_out *o) { cudaFree(o->y), cudaFree(o->s); }

/* Runs a (device-pointer) call with y and state_out poisoned first; host copies of both into y, s. */
static gdn_status run_dev(gdn_delta_args a, const dev_out *o, void *y, float *s) {
    cudaMemset(o->y, 0xFF, o->ny);
    if (!a.state_out || a.state_out != a.state_in) cudaMemset(o->s, 0xFF, o->ns * 4);
    a.y = o->y;
    if (!a.state_out) a.state_out = o->s;
    const gdn_status st = gdn_delta(&a);
    if (cudaDeviceSynchronize() != cudaSuccess) return GDN_ERR_DEVICE;
    cudaMemcpy(y, o->y, o->ny, cudaMemcpyDeviceToHost);
    if (s) cudaMemcpy(s, a.state_out, o->ns * 4, cudaMemcpyDeviceToHost);
    return st;
}

static double to_f64(const void *y, gdn_dtype dt, size_t i) {
    const uint16_t u = ((const uint16_t *)y)[i];
    return dt == GDN_BF16 ? (double)gdn__bf16_to_f32(u) : (double)gdn__f16_to_f32(u);
}

/* max |x - ref| / max |ref| (ref all zero: max |x - ref|); -1 when an element is not finite. */
static double rel_err_y(const void *y, gdn_dtype dt, const double *ref, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double x = to_f64(y, dt, i);
        if (!isfinite(x)) return -1.0;
        e = fmax(e, fabs(x - ref[i])), m = fmax(m, fabs(ref[i]));
    }
    return m > 0.0 ? e / m : e;
}
static double rel_err_s(const float *s, const double *ref, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(s[i])) return -1.0;
        e = fmax(e, fabs((double)s[i] - ref[i])), m = fmax(m, fabs(ref[i]));
    }
    return m > 0.0 ? e / m : e;
}

/* Hostile gates: 1 every 37th token's log-decay exactly -inf (decay 0), 2 log-decays down to -50 per token. */
static void hostile_gates(gdn_case *c, int kind) {
    harness_rng r = {c->cfg.seed + 5};
    for (size_t i = 0; i < c->n_gate; ++i) {
        if (kind == 1 && (i / (size_t)c->cfg.Hv) % 37 == 5) c->gate[i] = -INFINITY;
        if (kind == 2) c->gate[i] = -50.0f * rng_uniform(&r);
    }
}

/* One case against the oracle; also bitwise run to run. Returns the y error (or -1). */
static double check_oracle(const case_cfg *g, int hostile, double *worst_y, double *worst_s) {
    gdn_case c, dc;
    CHECK(case_init(&c, g));
    if (hostile) hostile_gates(&c, hostile);
    const size_t ny = c.n_v * c.dsize;
    double *y64 = malloc(c.n_v * sizeof(double)), *s64 = malloc(c.n_state * sizeof(double));
    void *y = malloc(ny), *y2 = malloc(ny);
    float *s = malloc(c.n_state * 4), *s2 = malloc(c.n_state * 4);
    dev_out o;
    int ok = y64 && s64 && y && y2 && s && s2 && case_to_device(&dc, &c) && dev_out_init(&o, ny, c.n_state);
    float *d_state = ok && c.state_in ? to_device(c.state_in, c.n_state * 4, &ok) : NULL;
    CHECK(ok, "allocations");
    double ey = -1.0;
    if (ok) {
        gdn_delta_args h = case_args(&c);
        h.y = y, h.state_out = s; /* the oracle writes neither */
        CHECK(gdn__oracle_delta(&h, y64, s64) == GDN_OK, "oracle: %s", gdn_last_error());
        gdn_delta_args a = case_args(&dc);
        a.backend = GDN_BACKEND_CUDA, a.kernel = "cuda_chunked", a.state_in = d_state;
        gdn_status st = run_dev(a, &o, y, s);
        CHECK(st == GDN_OK, "%s: %s", case_describe(g), gdn_last_error());
        ey = rel_err_y(y, g->dtype, y64, c.n_v);
        const double es = rel_err_s(s, s64, c.n_state);
        CHECK(ey >= 0.0 && ey <= CHUNKED_Y_TOL, "%s hostile %d: y error %.3g", case_describe(g), hostile, ey);
        CHECK(es >= 0.0 && es <= CHUNKED_S_TOL, "%s hostile %d: state error %.3g", case_describe(g), hostile, es);
        *worst_y = fmax(*worst_y, ey), *worst_s = fmax(*worst_s, es);
        if (harness_verbose)
            fprintf(stderr, "    %s hostile %d: y %.3g, state %.3g\n", case_describe(g), hostile, ey, es);
        st = run_dev(a, &o, y2, s2);
        CHECK(st == GDN_OK && memcmp(y, y2, ny) == 0 && memcmp(s, s2, c.n_state * 4) == 0,
              "%s: two runs differ", case_describe(g));
    }
    if (ok) dev_out_free(&o), case_device_free(&dc);
    cudaFree(d_state);
    free(y64), free(s64), free(y), free(y2), free(s), free(s2);
    case_free(&c);
    return ey;
}

TEST(chunked_within_tolerance_of_float64) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    static const int64_t Ts[] = {1, 7, 63, 64, 65, 200, 777};
    double wy = 0.0, ws = 0.0;
    int n = 0;
    for (int i = 0; i < 7; ++i)
        for (int v = 0; v < 4; ++v) {
            case_cfg g = chunk_cfg(1 + (v == 3), Ts[i], v == 1 ? 2 : 1, v == 1 ? 4 : 2, v == 2 ? 128 : 32,
                                   v % 2 ? GDN_F16 : GDN_BF16, (i + v) % 2 ? GDN_GATE_RAW : GDN_GATE_LOG_DECAY,
                                   (uint64_t)(100 + 10 * i + v));
            g.beta_kind = (gdn_beta_kind)((i + v / 2) % 2);
            g.layout = (gdn_state_layout)(v % 2);
            g.state_in = (i + v) % 3 != 0;
            g.mask = v == 3 || i == 5;
            g.head_map = (gdn_head_map)(i % 2); /* tiled: value head h reads q/k head h % Hk (v = 1: Hk 2, Hv 4) */
            check_oracle(&g, 0, &wy, &ws);
            ++n;
        }
    for (int hostile = 1; hostile <= 2; ++hostile)
        for (int i = 0; i < 3; ++i) {
            case_cfg g = chunk_cfg(1, (int64_t[]){64, 300, 1000}[i], 2, 4, 64, i == 1 ? GDN_F16 : GDN_BF16,
                                   GDN_GATE_LOG_DECAY, (uint64_t)(300 + 10 * hostile + i));
            g.state_in = i != 0;
            g.head_map = (gdn_head_map)((i + hostile) % 2);
            check_oracle(&g, hostile, &wy, &ws);
            ++n;
        }
    if (harness_verbose) fprintf(stderr, "    %d cases: worst y %.3g, worst state %.3g\n", n, wy, ws);
}

/* Sequence b of a case (host), as its own dense B = 1 case from `state` (its own entry). */
static int slice_of(gdn_case *dst, const gdn_case *src, int64_t t0, int64_t nt, const float *state) {
    return case_slice(dst, src, 0, 1, t0, nt, state);
}

/* A varlen batch of nb <= 8 windows over a pool of n_slots slots (unnamed slots 1 and 3, when pool > 3), in place
 * and not, by `kernel` ("cuda_chunked", or "fastest": windows of the chunked contract batched, the others each on its
 * own choice): each sequence's y rows and state bitwise equal to the sequence alone by the same kernel, and, for
 * cuda_chunked, alone split at the last multiple of 64 below its length; a skipped sequence's rows +0. */
static void check_batch(const char *kernel, const int32_t *lengths, const int32_t *slots, int nb, int n_slots,
                        int64_t Hk, int64_t Hv, int64_t Dv, gdn_dtype dt, uint64_t seed) {
    int32_t cu[9] = {0};
    for (int b = 0; b < nb; ++b) cu[b + 1] = cu[b] + lengths[b];
    const case_cfg g = chunk_cfg(1, cu[nb], Hk, Hv, Dv, dt, GDN_GATE_RAW, seed);
    gdn_case c, dc;
    CHECK(case_init(&c, &g));
    const size_t per = (size_t)(g.Hv * g.Dk * g.Dv), npool = n_slots * per, ny = c.n_v * c.dsize;
    float *pool0 = malloc(npool * 4), *pool = malloc(npool * 4), *s1 = malloc(per * 4), *sp = malloc(per * 4);
    void *y = malloc(ny), *y1 = malloc(ny), *yp = malloc(ny);
    dev_out o, o1;
    int ok = pool0 && pool && s1 && sp && y && y1 && yp && case_to_device(&dc, &c) && dev_out_init(&o, ny, npool) &&
             dev_out_init(&o1, ny, per);
    harness_rng r = {9};
    for (size_t i = 0; pool0 && i < npool; ++i) pool0[i] = 0.2f * rng_normal(&r);
    float *d_pool0 = ok ? to_device(pool0, npool * 4, &ok) : NULL;
    CHECK(ok, "allocations");
    for (int in_place = 0; ok && in_place < 2; ++in_place) {
        /* the batch */
        gdn_delta_args a = case_args(&dc);
        a.backend = GDN_BACKEND_CUDA, a.kernel = kernel;
        a.B = nb, a.T = 0, a.cu_seqlens = cu, a.state_slot = slots, a.slots = n_slots;
        a.state_in = d_pool0;
        if (in_place) {
            cudaMemcpy(o.s, pool0, npool * 4, cudaMemcpyHostToDevice);
            a.state_in = a.state_out = o.s;
        }
        CHECK(run_dev(a, &o, y, pool) == GDN_OK, "batch: %s", gdn_last_error());
        for (int b = 0; b < nb; ++b) {
            const size_t row = (size_t)(g.Hv * g.Dv) * c.dsize, off = (size_t)cu[b] * row, len = (size_t)lengths[b] * row;
            if (slots[b] < 0) { /* skipped: y rows +0, its would-be slot untouched */
                int zero = 1;
                for (size_t i = 0; i < len; ++i) zero &= ((const uint8_t *)y)[off + i] == 0;
                CHECK(zero, "skipped sequence %d: y rows not zero", b);
                continue;
            }
            /* the sequence alone, dense, from its slot's state */
            gdn_case sc, dsc;
            CHECK(slice_of(&sc, &c, cu[b], lengths[b], pool0 + (size_t)slots[b] * per));
            int ok1 = case_to_device(&dsc, &sc);
            float *d_s = to_device(sc.state_in, per * 4, &ok1);
            CHECK(ok1);
            gdn_delta_args a1 = case_args(&dsc);
            a1.backend = GDN_BACKEND_CUDA, a1.kernel = kernel, a1.state_in = d_s;
            o1.ny = len;
            CHECK(ok1 && run_dev(a1, &o1, y1, s1) == GDN_OK, "alone %d: %s", b, gdn_last_error());
            CHECK(memcmp((const uint8_t *)y + off, y1, len) == 0, "sequence %d: y in the batch differs from alone", b);
            CHECK(memcmp(pool + (size_t)slots[b] * per, s1, per * 4) == 0, "sequence %d: state differs", b);
            /* split at a multiple of 64 with the state carried: the same bits */
            if (lengths[b] > 64 && strcmp(kernel, "cuda_chunked") == 0) {
                const int64_t cut = 64 * ((lengths[b] - 1) / 64);
                gdn_case p1, p2, dp1, dp2;
                CHECK(slice_of(&p1, &sc, 0, cut, sc.state_in));
                int ok2 = case_to_device(&dp1, &p1);
                float *d_s1 = to_device(p1.state_in, per * 4, &ok2);
                gdn_delta_args q1 = case_args(&dp1);
                q1.backend = GDN_BACKEND_CUDA, q1.kernel = "cuda_chunked", q1.state_in = d_s1;
                o1.ny = (size_t)cut * row;
                CHECK(ok2 && run_dev(q1, &o1, yp, sp) == GDN_OK, "first part %d: %s", b, gdn_last_error());
                CHECK(memcmp(yp, y1, (size_t)cut * row) == 0, "sequence %d: the first part's y differs", b);
                CHECK(slice_of(&p2, &sc, cut, lengths[b] - cut, sp));
                ok2 = ok2 && case_to_device(&dp2, &p2);
                float *d_s2 = to_device(p2.state_in, per * 4, &ok2);
                gdn_delta_args q2 = case_args(&dp2);
                q2.backend = GDN_BACKEND_CUDA, q2.kernel = "cuda_chunked", q2.state_in = d_s2;
                o1.ny = (size_t)(lengths[b] - cut) * row;
                CHECK(ok2 && run_dev(q2, &o1, yp, sp) == GDN_OK, "second part %d: %s", b, gdn_last_error());
                CHECK(memcmp(yp, (const uint8_t *)y1 + (size_t)cut * row, (size_t)(lengths[b] - cut) * row) == 0 &&
                          memcmp(sp, s1, per * 4) == 0,
                      "sequence %d: split at %lld differs from one call", b, (long long)cut);
                cudaFree(d_s1), cudaFree(d_s2);
                case_device_free(&dp1), case_device_free(&dp2);
                case_free(&p1), case_free(&p2);
            }
            cudaFree(d_s);
            case_device_free(&dsc);
            case_free(&sc);
        }
        /* slots no sequence names are not written: in place they keep their state, else their poison */
        for (int e = 1; e <= 3 && n_slots > 3; e += 2)
            CHECK(in_place ? memcmp(pool + e * per, pool0 + e * per, per * 4) == 0 : poisoned_count(pool + e * per, per, 4) == per,
                  "unnamed slot %d written (in place %d)", e, in_place);
    }
    if (ok) dev_out_free(&o), dev_out_free(&o1), case_device_free(&dc);
    cudaFree(d_pool0);
    free(pool0), free(pool), free(s1), free(sp), free(y), free(y1), free(yp);
    case_free(&c);
}

TEST(chunked_batch_and_split_invariant) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    /* windows of these lengths, slots permuted in a pool of 7 (one sequence skipped) */
    static const int32_t lengths[] = {100, 64, 1, 300, 17, 129}, slots[] = {4, 0, 6, -1, 2, 5};
    check_batch("cuda_chunked", lengths, slots, 6, 7, 2, 4, 64, GDN_BF16, 77);
    /* every sequence skipped: y rows zero, no slot written */
    static const int32_t skip_lengths[] = {70, 5}, skip_slots[] = {-1, -1};
    check_batch("cuda_chunked", skip_lengths, skip_slots, 2, 4, 1, 2, 32, GDN_BF16, 79);
    /* the model's heads, prompts of thousands of tokens */
    static const int32_t long_lengths[] = {2048, 700, 3000}, long_slots[] = {2, 0, 1};
    check_batch("cuda_chunked", long_lengths, long_slots, 3, 3, 16, 32, 128, GDN_BF16, 78);
    /* the same in f16, one sequence skipped, lengths off the chunk size (the batch on the 8-warp scan) */
    static const int32_t f16_lengths[] = {257, 1000, 70, 500}, f16_slots[] = {4, -1, 0, 2};
    check_batch("cuda_chunked", f16_lengths, f16_slots, 4, 5, 16, 32, 128, GDN_F16, 81);
    /* "fastest" over windows on both sides of its threshold: the long ones one chunked batch, the short ones exact */
    static const int32_t mixed_lengths[] = {300, 5, 130, 64, 63, 1000, 1}, mixed_slots[] = {6, 0, -1, 4, 2, 5, 7};
    check_batch("fastest", mixed_lengths, mixed_slots, 7, 8, 2, 4, 64, GDN_BF16, 80);
    /* a serving batch: decode steps and verify windows (runs of them in one launch each) around a prompt */
    static const int32_t serving_lengths[] = {1, 1, 1, 300, 2, 2, 1, 1}, serving_slots[] = {5, 0, 9, 4, 2, 8, 7, 6};
    check_batch("fastest", serving_lengths, serving_slots, 8, 10, 2, 4, 64, GDN_BF16, 82);
}

TEST(chunked_only_when_asked) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    const int chunked = kernel_index("cuda_chunked");
    for (int i = 0; i < 6; ++i) {
        /* 0: eligible, T 2048; 1: T 63 (below the "fastest" threshold); 2: f32; 3: a plain decay gate; 4: Dk 64;
         * 5: Dv 48 */
        case_cfg g = chunk_cfg(1, i == 1 ? 63 : i == 0 ? 2048 : 100, 1, 2, i == 5 ? 48 : 32, i == 2 ? GDN_F32 : GDN_BF16,
                               i == 3 ? GDN_GATE_DECAY : GDN_GATE_LOG_DECAY, (uint64_t)(500 + i));
        if (i == 4) g.Dk = 64;
        gdn_case c, dc;
        CHECK(case_init(&c, &g));
        void *y = malloc(c.n_v * c.dsize);
        dev_out o;
        int ok = y && case_to_device(&dc, &c) && dev_out_init(&o, c.n_v * c.dsize, c.n_state);
        CHECK(ok);
        if (ok) {
            gdn_delta_args a = case_args(&dc);
            a.backend = GDN_BACKEND_CUDA, a.y = o.y, a.state_out = o.s;
            const char *routed = NULL, *fastest = NULL;
            CHECK(gdn_route(&a, &routed) == GDN_OK && routed && strcmp(routed, "cuda_chunked") != 0);
            a.kernel = "fastest";
            CHECK(gdn_route(&a, &fastest) == GDN_OK && fastest);
            const int eligible = i == 0 || i == 1;
            CHECK(gdn_kernel_eligible(chunked, &a) == eligible, "case %d: eligibility", i);
            CHECK(fastest && strcmp(fastest, i == 0 ? "cuda_chunked" : routed) == 0, "case %d: fastest is %s", i,
                  fastest ? fastest : "(null)");
            if (!eligible) { /* named anyway: refused, nothing written */
                a.kernel = "cuda_chunked";
                cudaMemset(o.y, 0xFF, o.ny);
                CHECK(gdn_delta(&a) == GDN_ERR_INELIGIBLE, "case %d: %s", i, gdn_last_error());
                cudaMemcpy(y, o.y, o.ny, cudaMemcpyDeviceToHost);
                CHECK(poisoned_count(y, c.n_v, c.dsize) == c.n_v, "case %d: an ineligible call wrote y", i);
            }
            dev_out_free(&o);
            case_device_free(&dc);
        }
        free(y);
        case_free(&c);
    }
}

#endif
