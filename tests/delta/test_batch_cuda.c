/* gdn_delta's batch form on CUDA. Without a device (or without a CUDA build): GDN_ERR_NO_DEVICE and nothing
 * written. With a device: the routed call and every eligible CUDA kernel on a few batches (mixed windows, decode
 * steps, uniform windows (one launch), runs of decode steps and of verify windows around a prompt (a launch a run),
 * skipped and permuted slots in a larger pool, in place, separate pools, state_out NULL with a shared slot, no
 * state_slot)
 * bitwise equal to the CPU ref's batch form, y poisoned (0xFF bytes) first. */
#include <stdlib.h>
#include <string.h>

#include "gdn.h"
#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* One batch: its windows and slots, the pool's size and how the pools are passed. */
typedef struct gpu_batch {
    int64_t B, slots;
    int32_t cu[9], slot[8];
    int mode;   /* 0: in place; 1: separate pools; 2: state_out NULL */
    int noslot; /* state_slot NULL: sequence b on entry b (slots 0 .. B - 1, a pool of B) */
    case_cfg cfg;
} gpu_batch;

static gpu_batch gpu_batch_of(const int32_t *lengths, const int32_t *slots, int64_t B, int64_t pool, int mode,
                              case_cfg cfg) {
    gpu_batch b = {.B = B, .slots = pool, .mode = mode, .cfg = cfg};
    for (int64_t i = 0; i < B; ++i) b.cu[i + 1] = b.cu[i] + lengths[i], b.slot[i] = slots[i];
    b.cfg.B = 1, b.cfg.T = b.cu[B]; /* the packed tensors: [T, ...] = [1, T, ...] */
    return b;
}

/* The batch-form arguments of a case's inputs (host or device copies), pools per mode. */
static gdn_delta_args gpu_batch_args(const gpu_batch *bt, const gdn_case *c, void *y, const float *pool_in,
                                     float *pool_out) {
    gdn_delta_args a = case_args(c);
    a.B = bt->B, a.T = 0, a.cu_seqlens = bt->cu, a.state_slot = bt->noslot ? NULL : bt->slot;
    a.slots = bt->noslot ? 0 : bt->slots;
    a.y = y;
    a.state_in = bt->mode == 0 ? pool_out : pool_in;
    a.state_out = bt->mode == 2 ? NULL : pool_out;
    return a;
}

TEST(batch_gpu_without_device_writes_nothing) {
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) SKIP("a CUDA device is present (CUDA_VISIBLE_DEVICES= hides it)");
    static const int32_t lengths[] = {2, 5, 1}, slots[] = {1, -1, 0};
    const case_cfg cfg = {.Hk = 1, .Hv = 2, .Dk = 64, .Dv = 32, .dtype = GDN_BF16, .mask = 1, .seed = 4};
    const gpu_batch bt = gpu_batch_of(lengths, slots, 3, 3, 1, cfg);
    gdn_case c;
    CHECK(case_init(&c, &bt.cfg));
    const size_t ny = c.n_v * c.dsize, n_pool = (size_t)(bt.slots * cfg.Hv * cfg.Dk * cfg.Dv);
    void *y = malloc(ny);
    float *in = calloc(n_pool, 4), *out = malloc(n_pool * 4);
    CHECK(y && in && out);
    for (int k = -1; y && in && out && k < gdn_kernel_count(); ++k) {
        if (k >= 0 && gdn_kernel_backend(k) != GDN_BACKEND_CUDA) continue;
        gdn_delta_args a = gpu_batch_args(&bt, &c, y, in, out);
        a.backend = GDN_BACKEND_CUDA;
        a.kernel = k < 0 ? NULL : gdn_kernel_name(k);
        poison(y, ny);
        poison(out, n_pool * 4);
        CHECK(gdn_delta(&a) == GDN_ERR_NO_DEVICE, "%s: %s", a.kernel ? a.kernel : "(routed)", gdn_last_error());
        CHECK(poisoned_count(y, c.n_v, c.dsize) == c.n_v && poisoned_count(out, n_pool, 4) == n_pool,
              "a CUDA batch without a device wrote an output");
        const char *name = NULL;
        CHECK(gdn_route(&a, &name) == GDN_ERR_NO_DEVICE && name == NULL);
        CHECK(k < 0 || gdn_kernel_eligible(k, &a) == 0, "%s eligible without a device", a.kernel);
    }
    free(y), free(in), free(out);
    case_free(&c);
}

#ifdef GDN_HAVE_CUDA

/* b with state_slot NULL (its slots must be 0 .. B - 1, its pool B entries). */
static gpu_batch without_slots(gpu_batch b) {
    b.noslot = 1;
    return b;
}

/* A batch of uniform windows (n <= 8 tokens, a scalar gate, state_slot given) as the dense [B, n] form with its slots
 * on the device (state_slot_device), routed and through each kernel that takes it: bitwise the CPU ref's batch form
 * (y_ref, pool_ref); then every slot moved out of range (>= slots, or negative): y = +0, the pool untouched. */
static void check_device_slots(const gpu_batch *bt, const gdn_case *dc, void *d_y, const float *d_in, float *d_out,
                               const float *initial, const void *y_ref, const float *pool_ref, int *runs) {
    const case_cfg *g = &bt->cfg;
    const int64_t n = bt->cu[1];
    int uniform = !bt->noslot && g->gate_kind != GDN_GATE_VECTOR && n <= 8;
    for (int64_t b = 0; b < bt->B; ++b) uniform &= bt->cu[b + 1] - bt->cu[b] == n;
    if (!uniform) return;
    const size_t ny = (size_t)(bt->B * n * g->Hv * g->Dv) * (g->dtype == GDN_F32 ? 4 : 2);
    const size_t n_pool = (size_t)(bt->slots * g->Hv * g->Dk * g->Dv);
    void *y = malloc(ny), *zeros = calloc(ny, 1);
    float *pool = malloc(n_pool * 4);
    int32_t *d_slot = NULL, far[8];
    CHECK(y && zeros && pool && cudaMalloc((void **)&d_slot, sizeof far) == cudaSuccess, "allocations");
    static const char *const kernels[] = {NULL, "cuda_window", "cuda_decode", "cuda_decode:stream_sync",
                                          "cuda_decode:stream_ws", "cuda_decode:warp2", "cuda_rowsplit"};
    for (int pass = 0; y && zeros && pool && d_slot && pass < 2; ++pass) { /* pass 1: every slot out of range */
        for (int64_t b = 0; b < bt->B; ++b) far[b] = b % 2 ? -1 - (int32_t)b : (int32_t)bt->slots + (int32_t)b;
        CHECK(cudaMemcpy(d_slot, pass ? far : bt->slot, sizeof far, cudaMemcpyHostToDevice) == cudaSuccess);
        for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; ++i) {
            gdn_delta_args a = gpu_batch_args(bt, dc, d_y, d_in, d_out);
            a.backend = GDN_BACKEND_CUDA;
            a.B = bt->B, a.T = n, a.cu_seqlens = NULL, a.state_slot = NULL, a.state_slot_device = d_slot;
            a.kernel = kernels[i];
            const int takes = i < 5; /* the window and streamed decode kernels take slots on the device */
            int idx = -1;
            for (int w = 0; a.kernel && w < gdn_kernel_count(); ++w)
                if (strncmp(a.kernel, gdn_kernel_name(w), strlen(gdn_kernel_name(w))) == 0 &&
                    (a.kernel[strlen(gdn_kernel_name(w))] == 0 || a.kernel[strlen(gdn_kernel_name(w))] == ':'))
                    idx = w;
            if (a.kernel && !strchr(a.kernel, ':') && !gdn_kernel_eligible(idx, &a)) {
                CHECK(!takes || strcmp(a.kernel, "cuda_window") == 0, "%s: not eligible with slots on the device", a.kernel);
                continue;
            }
            const void *start = bt->mode == 1 ? NULL : initial;
            CHECK(cudaMemset(d_y, 0xff, ny) == cudaSuccess);
            CHECK(start ? cudaMemcpy(d_out, start, n_pool * 4, cudaMemcpyHostToDevice) == cudaSuccess
                        : cudaMemset(d_out, 0xff, n_pool * 4) == cudaSuccess);
            const gdn_status s = gdn_delta(&a);
            if (!takes) {
                CHECK(s == GDN_ERR_INELIGIBLE, "%s took slots on the device: %s", a.kernel, gdn_status_str(s));
                continue;
            }
            if (s == GDN_ERR_INELIGIBLE && a.kernel && strchr(a.kernel, ':')) continue; /* KV: no warp-specialized form */
            CHECK(s == GDN_OK, "%s with slots on the device: %s (%s)", a.kernel ? a.kernel : "(routed)", gdn_last_error(),
                  case_describe(g));
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            CHECK(cudaMemcpy(y, d_y, ny, cudaMemcpyDeviceToHost) == cudaSuccess &&
                  cudaMemcpy(pool, d_out, n_pool * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            const char *name = a.kernel ? a.kernel : "(routed)";
            if (!pass) {
                CHECK(memcmp(y, y_ref, ny) == 0, "%s: y with slots on the device differs from the CPU ref (%s)", name,
                      case_describe(g));
                CHECK(bt->mode == 2 || memcmp(pool, pool_ref, n_pool * 4) == 0,
                      "%s: the pool with slots on the device differs from the CPU ref (%s)", name, case_describe(g));
            } else {
                CHECK(memcmp(y, zeros, ny) == 0, "%s: a slot out of range did not give y = +0", name);
                CHECK(!start || memcmp(pool, initial, n_pool * 4) == 0, "%s: a slot out of range wrote the pool", name);
                CHECK(start || poisoned_count(pool, n_pool, 4) == n_pool, "%s: a slot out of range wrote the pool", name);
            }
            ++*runs;
        }
    }
    cudaFree(d_slot);
    free(y), free(zeros), free(pool);
}

/* The routed call and every eligible CUDA kernel against the CPU ref on one batch. */
static void check_gpu_batch(const gpu_batch *bt, int *runs) {
    const case_cfg *g = &bt->cfg;
    gdn_case c, dc;
    CHECK(case_init(&c, g));
    const size_t ny = c.n_v * c.dsize, n_pool = (size_t)(bt->slots * g->Hv * g->Dk * g->Dv);
    void *y_ref = malloc(ny), *y = malloc(ny);
    float *initial = malloc(n_pool * 4), *pool_ref = malloc(n_pool * 4), *pool = malloc(n_pool * 4);
    float *d_in = NULL, *d_out = NULL;
    void *d_y = NULL;
    int ok = y_ref && y && initial && pool_ref && pool && case_to_device(&dc, &c);
    harness_rng r = {g->seed + 9};
    for (size_t i = 0; initial && i < n_pool; ++i) initial[i] = 0.3f * rng_normal(&r);
    d_in = ok ? to_device(initial, n_pool * 4, &ok) : NULL;
    ok = ok && cudaMalloc((void **)&d_out, n_pool * 4) == cudaSuccess && cudaMalloc(&d_y, ny) == cudaSuccess;
    CHECK(ok, "allocations");
    if (ok) { /* the CPU ref's batch form */
        memcpy(pool_ref, initial, n_pool * 4);
        poison(y_ref, ny);
        if (bt->mode == 1) poison(pool_ref, n_pool * 4);
        gdn_delta_args a = gpu_batch_args(bt, &c, y_ref, initial, pool_ref);
        a.kernel = "ref";
        CHECK(gdn_delta(&a) == GDN_OK, "ref: %s", gdn_last_error());
    }
    for (int k = -1; ok && k < gdn_kernel_count(); ++k) { /* the chunked contract: test_chunked_cuda.c */
        if (k >= 0 && (gdn_kernel_backend(k) != GDN_BACKEND_CUDA || gdn_kernel_contract(k) != GDN_CONTRACT_EXACT)) continue;
        gdn_delta_args a = gpu_batch_args(bt, &dc, d_y, d_in, d_out);
        a.backend = GDN_BACKEND_CUDA;
        a.kernel = k < 0 ? NULL : gdn_kernel_name(k);
        const char *name = a.kernel ? a.kernel : "(routed)";
        if (k >= 0 && !gdn_kernel_eligible(k, &a)) continue;
        const void *start = bt->mode == 1 ? NULL : initial; /* separate pools: state_out poisoned */
        CHECK(cudaMemset(d_y, 0xff, ny) == cudaSuccess);
        CHECK(start ? cudaMemcpy(d_out, start, n_pool * 4, cudaMemcpyHostToDevice) == cudaSuccess
                    : cudaMemset(d_out, 0xff, n_pool * 4) == cudaSuccess);
        if (k < 0) { /* two or more uniform windows, every slot >= 0, a scalar gate: one launch, named cuda_decode */
            int uniform = g->gate_kind != GDN_GATE_VECTOR && bt->B >= 2;
            for (int64_t b = 0; b < bt->B; ++b)
                uniform &= bt->slot[b] >= 0 && bt->cu[b + 1] - bt->cu[b] == bt->cu[1] && bt->cu[1] <= 8;
            const char *routed = NULL;
            CHECK(gdn_route(&a, &routed) == GDN_OK && (!uniform || strcmp(routed, "cuda_decode") == 0),
                  "routed to %s (uniform %d)", routed ? routed : "?", uniform);
            int window = -1; /* a batch of one runs as its dense call: cuda_window where it takes it */
            for (int w = 0; w < gdn_kernel_count(); ++w)
                if (strcmp(gdn_kernel_name(w), "cuda_window") == 0) window = w;
            CHECK(bt->B != 1 || !gdn_kernel_eligible(window, &a) || (routed && strcmp(routed, "cuda_window") == 0),
                  "a batch of one routed to %s", routed ? routed : "?");
        }
        CHECK(gdn_delta(&a) == GDN_OK, "%s: %s (%s)", name, gdn_last_error(), case_describe(g));
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s", name);
        CHECK(cudaMemcpy(y, d_y, ny, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(pool, d_out, n_pool * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(memcmp(y, y_ref, ny) == 0, "%s: y differs from the CPU ref (%s, mode %d)", name, case_describe(g), bt->mode);
        CHECK(bt->mode == 2 || memcmp(pool, pool_ref, n_pool * 4) == 0, "%s: the pool differs from the CPU ref (%s)",
              name, case_describe(g));
        ++*runs;
    }
    if (ok) check_device_slots(bt, &dc, d_y, d_in, d_out, initial, y_ref, pool_ref, runs);
    cudaFree(d_in), cudaFree(d_out), cudaFree(d_y);
    if (ok) case_device_free(&dc);
    free(y_ref), free(y), free(initial), free(pool_ref), free(pool);
    case_free(&c);
}

TEST(batch_gpu_equals_cpu_ref) {
    if (gdn_device_count(GDN_BACKEND_CUDA) == 0) SKIP("no CUDA device");
    static const int32_t mixed[] = {1, 2, 7, 16, 33, 3}, mixed_slots[] = {5, 0, -1, 8, 2, 6};
    static const int32_t shared_slots[] = {5, 0, -1, 5, 2, 5};
    static const int32_t decode[] = {1, 1, 1, 2, 1, 1, 1, 1}, decode_slots[] = {7, 3, -1, 0, 9, 4, 1, 6};
    /* uniform windows, every sequence with a slot: the one-launch path of the routed call */
    static const int32_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1}, threes[] = {3, 3, 3, 3, 3, 3, 3, 3}, twos[] = {2, 2, 2, 2, 2, 2, 2, 2};
    static const int32_t permuted[] = {7, 3, 5, 0, 9, 4, 1, 6}, shared_all[] = {5, 0, 5, 8, 2, 5, 1, 1};
    static const int32_t serving[] = {1, 1, 1, 1, 1, 40, 3, 3}; /* decodes, a prompt, verify windows */
    static const int32_t identity[] = {0, 1, 2, 3, 4, 5, 6, 7};
    const case_cfg bf16_vk = {.Hk = 2, .Hv = 4, .Dk = 128, .Dv = 64, .dtype = GDN_BF16, .gate_kind = GDN_GATE_RAW,
                              .beta_kind = GDN_BETA_LOGIT, .layout = GDN_STATE_VK, .mask = 1, .seed = 61};
    const case_cfg f32_kv = {.Hk = 2, .Hv = 4, .Dk = 128, .Dv = 64, .dtype = GDN_F32, .gate_kind = GDN_GATE_DECAY,
                             .layout = GDN_STATE_KV, .seed = 62};
    const case_cfg vector = {.Hk = 1, .Hv = 2, .Dk = 64, .Dv = 32, .dtype = GDN_F16, .gate_kind = GDN_GATE_VECTOR,
                             .layout = GDN_STATE_VK, .mask = 1, .seed = 63};
    const gpu_batch batches[] = {gpu_batch_of(mixed, mixed_slots, 6, 9, 0, bf16_vk),
                                 gpu_batch_of(mixed, mixed_slots, 6, 9, 1, f32_kv),
                                 gpu_batch_of(decode, decode_slots, 8, 10, 0, bf16_vk),
                                 gpu_batch_of(decode, decode_slots, 8, 10, 1, f32_kv),
                                 gpu_batch_of(mixed, shared_slots, 6, 9, 2, vector),
                                 gpu_batch_of(ones, permuted, 8, 10, 0, bf16_vk),
                                 gpu_batch_of(threes, permuted, 8, 10, 1, f32_kv),
                                 gpu_batch_of(twos, shared_all, 8, 9, 2, bf16_vk),
                                 gpu_batch_of(serving, permuted, 8, 10, 0, bf16_vk),
                                 gpu_batch_of(serving, permuted, 8, 10, 1, f32_kv),
                                 without_slots(gpu_batch_of(serving, identity, 8, 8, 0, bf16_vk)),
                                 gpu_batch_of(ones, permuted, 1, 10, 0, bf16_vk), /* one decode at slot 7 */
                                 gpu_batch_of(threes + 1, permuted + 2, 1, 10, 1, f32_kv)};
    int runs = 0;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) check_gpu_batch(&batches[i], &runs);
    CHECK(runs >= 10, "only %d runs", runs);
}

#endif
