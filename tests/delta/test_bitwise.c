/* Bitwise: every CPU kernel, forced by name, against `ref` (threads 1, separate state buffers): memcmp on y and
 * on the final state, over a deterministic sample of the cartesian product of the axes (the head mapping,
 * grouped or tiled, one of them). Every value
 * of every axis is forced at least once; the other axes are drawn at random under a cost cap, so that pairs
 * across axes are covered widely while big T with big heads stays rare. Outputs are poisoned before each run. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdn_case.h"
#include "harness.h"

enum { AX_DK, AX_DV, AX_HEADS, AX_B, AX_T, AX_DTYPE, AX_GATE, AX_BETA, AX_MASK, AX_LAYOUT, AX_THREADS, AX_STATE, AX_INPUTS, AX_MAP, AX_COUNT };

static const int64_t dk_values[] = {32, 48, 64, 128, 256};
static const int64_t dv_values[] = {8, 64, 100, 128};
static const int64_t heads_values[][2] = {{1, 1}, {16, 32}, {2, 6}, {3, 12}};
static const int64_t b_values[] = {1, 3};
static const int64_t t_values[] = {1, 7, 64, 257, 2048};
static const int axis_n[AX_COUNT] = {5, 4, 4, 2, 5, 3, 4, 2, 2, 2, 3, 4, 2, 2};
static const char *axis_names[AX_COUNT] = {"Dk", "Dv", "heads", "B", "T", "dtype", "gate", "beta", "mask", "layout",
                                           "threads", "state", "inputs", "head_map"};

/* The state axis: 0 state_in + separate state_out, 1 state_in NULL, 2 state_out NULL, 3 in place. */
static case_state_mode state_mode(int v) { return v == 2 ? CASE_STATE_OUT_NULL : v == 3 ? CASE_STATE_IN_PLACE : CASE_STATE_SEPARATE; }

static double cost(const int *x) {
    return (double)b_values[x[AX_B]] * (double)t_values[x[AX_T]] * (double)heads_values[x[AX_HEADS]][1] *
           (double)dk_values[x[AX_DK]] * (double)dv_values[x[AX_DV]];
}

/* Case i: axis (i mod AX_COUNT) forced to value (i / AX_COUNT) mod n, the rest drawn until the cost
 * (state element updates B*T*Hv*Dk*Dv) is under the cap. One case in 8 gets a large cap and T = 2048 (unless
 * T is the forced axis), so that the longest window meets the other axes' large values too. */
static void sample(int i, double small_cap, double large_cap, int *x) {
    harness_rng r = {0x5eedull + (uint64_t)i * 7919u};
    const int forced = i % AX_COUNT, forced_value = (i / AX_COUNT) % axis_n[forced];
    const int large = i % 8 == 7;
    const double cap = large ? large_cap : small_cap;
    for (int attempt = 0; attempt < 100000; ++attempt) {
        for (int a = 0; a < AX_COUNT; ++a) x[a] = a == forced ? forced_value : (int)(rng_u64(&r) % (uint64_t)axis_n[a]);
        if (large && forced != AX_T) x[AX_T] = 4;
        if (cost(x) <= cap) return;
    }
    for (int a = AX_DK; a <= AX_T; ++a) x[a] = a == forced ? forced_value : 0;
}

static case_cfg cfg_of(const int *x, uint64_t seed) {
    return (case_cfg){.B = b_values[x[AX_B]], .T = t_values[x[AX_T]], .Hk = heads_values[x[AX_HEADS]][0],
                      .Hv = heads_values[x[AX_HEADS]][1], .Dk = dk_values[x[AX_DK]], .Dv = dv_values[x[AX_DV]],
                      .dtype = (gdn_dtype)x[AX_DTYPE], .gate_kind = (gdn_gate_kind)x[AX_GATE],
                      .beta_kind = (gdn_beta_kind)x[AX_BETA], .mask = x[AX_MASK], .layout = (gdn_state_layout)x[AX_LAYOUT],
                      .state_in = x[AX_STATE] != 1, .inputs = (case_inputs)x[AX_INPUTS], .seed = seed,
                      .head_map = (gdn_head_map)x[AX_MAP]};
}

static size_t first_difference(const void *a, const void *b, size_t n, size_t size) {
    for (size_t e = 0; e < n; ++e)
        if (memcmp((const char *)a + e * size, (const char *)b + e * size, size) != 0) return e;
    return n;
}

/* Every CPU kernel of the list (src/delta/kernels.h), ref included (against its own threads-1 run). */
enum { MAX_KERNELS = 32 };
static const char *kernels_under_test[MAX_KERNELS];
static int N_KERNELS;

static void list_cpu_kernels(void) {
    N_KERNELS = 0;
    for (int i = 0; i < gdn_kernel_count() && N_KERNELS < MAX_KERNELS; ++i)
        if (gdn_kernel_backend(i) == GDN_BACKEND_CPU) kernels_under_test[N_KERNELS++] = gdn_kernel_name(i);
}

/* The tally slot of a kernel by name; a name not in the list gets the spare last slot (never compared). */
static int slot_of(const char *name) {
    for (int k = 0; k < N_KERNELS; ++k)
        if (strcmp(kernels_under_test[k], name) == 0) return k;
    return MAX_KERNELS - 1;
}

typedef struct tally {
    int compared[MAX_KERNELS], ineligible[MAX_KERNELS];
    double updates;
} tally;

/* Runs the case on every kernel with `threads` and the state axis' mode; compares against ref. */
static void check_case(const case_cfg *cfg, int threads, case_state_mode mode, tally *tl) {
    gdn_case c;
    CHECK(case_init(&c, cfg), "allocation: %s", case_describe(cfg));
    if (!c.q) return;
    void *y0 = malloc(c.n_v * c.dsize), *y = malloc(c.n_v * c.dsize);
    float *s0 = malloc(c.n_state * 4), *s = malloc(c.n_state * 4);
    CHECK(y0 && y && s0 && s);
    if (y0 && y && s0 && s) {
        const uint64_t inputs = case_input_hash(&c);
        const gdn_status st0 = case_run(&c, "ref", 1, CASE_STATE_SEPARATE, y0, s0);
        CHECK(st0 == GDN_OK, "ref: %s: %s", gdn_status_str(st0), case_describe(cfg));
        CHECK(poisoned_count(y0, c.n_v, c.dsize) == 0, "ref left y unwritten: %s", case_describe(cfg));
        CHECK(poisoned_count(s0, c.n_state, 4) == 0, "ref left the state unwritten: %s", case_describe(cfg));
        for (int kn = 0; kn < N_KERNELS; ++kn) {
            gdn_delta_args a = case_args(&c);
            a.y = y;
            a.state_out = mode == CASE_STATE_OUT_NULL ? NULL : s;
            const int eligible = gdn_kernel_eligible(kernel_index(kernels_under_test[kn]), &a);
            const gdn_status st = case_run(&c, kernels_under_test[kn], threads, mode, y, s);
            if (!eligible) {
                CHECK(st == GDN_ERR_INELIGIBLE, "%s ineligible but returned %s", kernels_under_test[kn], gdn_status_str(st));
                tl->ineligible[kn]++;
                continue;
            }
            CHECK(st == GDN_OK, "%s: %s: %s", kernels_under_test[kn], gdn_status_str(st), case_describe(cfg));
            const size_t dy = first_difference(y0, y, c.n_v, c.dsize);
            CHECK(dy == c.n_v, "%s threads=%d mode=%d: y differs from ref at element %zu: %s", kernels_under_test[kn],
                  threads, (int)mode, dy, case_describe(cfg));
            if (mode != CASE_STATE_OUT_NULL) {
                const size_t ds = first_difference(s0, s, c.n_state, 4);
                CHECK(ds == c.n_state, "%s threads=%d mode=%d: state differs from ref at element %zu: %s",
                      kernels_under_test[kn], threads, (int)mode, ds, case_describe(cfg));
            }
            tl->compared[kn]++;
        }
        CHECK(case_input_hash(&c) == inputs, "an input was modified: %s", case_describe(cfg));
        tl->updates += (double)(cfg->B * cfg->T * cfg->Hv * cfg->Dk * cfg->Dv) * (N_KERNELS + 1);
    }
    free(y0);
    free(y);
    free(s0);
    free(s);
    case_free(&c);
}

TEST(bitwise_kernels_vs_ref_sampled) {
    list_cpu_kernels();
    const int quick = test_quick();
    const int n_cases = quick ? 6 * AX_COUNT : 24 * AX_COUNT;
    const double small_cap = quick ? 2e5 : 1.5e6, large_cap = quick ? 4e6 : 2e7;
    int covered_value[AX_COUNT][5] = {{0}};
    static int covered_pair[AX_COUNT][5][AX_COUNT][5];
    memset(covered_pair, 0, sizeof covered_pair);
    tally tl = {{0}, {0}, 0.0};
    const clock_t start = clock();
    for (int i = 0; i < n_cases; ++i) {
        int x[AX_COUNT];
        sample(i, small_cap, large_cap, x);
        for (int a = 0; a < AX_COUNT; ++a) {
            covered_value[a][x[a]] = 1;
            for (int b = 0; b < AX_COUNT; ++b) covered_pair[a][x[a]][b][x[b]] = 1;
        }
        const case_cfg cfg = cfg_of(x, (uint64_t)i);
        check_case(&cfg, x[AX_THREADS] + 1, state_mode(x[AX_STATE]), &tl);
    }
    /* one Qwen-like window at full length (T=2048, Dk=Dv=128, 2 key heads of 16 with their 4 value heads),
     * outside quick runs */
    if (!quick) {
        const case_cfg qwen = {.B = 1, .T = 2048, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 128, .dtype = GDN_BF16,
                               .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .layout = GDN_STATE_VK,
                               .state_in = 1, .seed = 99};
        check_case(&qwen, 2, CASE_STATE_SEPARATE, &tl);
    }
    int pairs = 0, pairs_covered = 0;
    for (int a = 0; a < AX_COUNT; ++a) {
        for (int v = 0; v < axis_n[a]; ++v) CHECK(covered_value[a][v], "axis %s value %d never sampled", axis_names[a], v);
        for (int b = a + 1; b < AX_COUNT; ++b)
            for (int v = 0; v < axis_n[a]; ++v)
                for (int w = 0; w < axis_n[b]; ++w) {
                    pairs++;
                    pairs_covered += covered_pair[a][v][b][w];
                    if (harness_verbose && !covered_pair[a][v][b][w])
                        printf("     pair not sampled: %s #%d with %s #%d\n", axis_names[a], v, axis_names[b], w);
                }
    }
    /* every pair of axis values is feasible under the large cap (quick runs: not all); nearly all are drawn */
    CHECK(pairs_covered >= (quick ? 0.9 : 0.98) * pairs, "pair coverage %d of %d", pairs_covered, pairs);
    CHECK(tl.compared[slot_of("ref")] == n_cases + !quick);
    CHECK(tl.compared[slot_of("packed_avx2")] > 0, "packed_avx2 never ran");
    CHECK(tl.compared[slot_of("packed_decode_avx2")] > 0, "packed_decode_avx2 never ran");
    printf("     %d cases, %.2e state updates, %.1f s CPU; pairs of axis values covered: %d of %d\n", n_cases + !quick,
           tl.updates, (double)(clock() - start) / CLOCKS_PER_SEC, pairs_covered, pairs);
    for (int kn = 0; kn < N_KERNELS; ++kn)
        printf("     %-18s bitwise equal to ref in %d cases, ineligible in %d\n", kernels_under_test[kn], tl.compared[kn],
               tl.ineligible[kn]);
}

/* The decode kernel's shapes in full (VK and KV, Dk = 128, T = 1 and 2): every dtype, gate and beta kind, mask on
 * and off, each state mode, 1 to 3 threads, over heads (both head mappings), batch and Dv; every kernel against ref
 * as above. */
TEST(bitwise_decode_shapes_vs_ref) {
    list_cpu_kernels();
    tally tl = {{0}, {0}, 0.0};
    int i = 0;
    for (int layout = GDN_STATE_VK; layout <= GDN_STATE_KV; ++layout)
        for (int t = 1; t <= 2; ++t)
            for (int hd = 0; hd < 4; ++hd)
                for (int dv = 0; dv < 4; ++dv)
                    for (int gate = GDN_GATE_DECAY; gate <= GDN_GATE_RAW; ++gate, ++i) {
                        const case_cfg cfg = {.B = 1 + 2 * ((i + i / 4) % 2), .T = t, .Hk = heads_values[hd][0], .Hv = heads_values[hd][1],
                                              .Dk = 128, .Dv = dv_values[dv], .dtype = (gdn_dtype)(i % 3),
                                              .gate_kind = (gdn_gate_kind)gate, .beta_kind = (gdn_beta_kind)(i / 2 % 2),
                                              .mask = i / 3 % 2, .layout = (gdn_state_layout)layout, .state_in = i % 5 != 1,
                                              .inputs = (case_inputs)(i / 7 % 2), .seed = 500 + (uint64_t)i,
                                              .head_map = (gdn_head_map)(i / 5 % 2)};
                        check_case(&cfg, 1 + i % 3, state_mode((i + i / 4) % 4), &tl); /* each gate meets each mode */
                    }
    const int dec = slot_of("packed_decode_avx2"), dec512 = slot_of("packed_decode_avx512");
    CHECK(tl.compared[dec] == i, "packed_decode_avx2 ran %d of %d cases", tl.compared[dec], i);
    CHECK(tl.compared[dec512] == i || tl.ineligible[dec512] == i, "packed_decode_avx512 ran %d of %d cases", tl.compared[dec512], i);
    printf("     %d decode cases: packed_decode_avx2 bitwise equal to ref in %d, packed_decode_avx512 in %d\n", i,
           tl.compared[dec], tl.compared[dec512]);
}
