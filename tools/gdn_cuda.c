/* The CUDA side of the CLI: device copies of a case, one checked call, timed rotations with CUDA events, and
 * the device's floors. Compiled with -DGDN_HAVE_CUDA in a CUDA build; otherwise every entry reports no device. */
#include <stdlib.h>
#include <string.h>

#include "gdn_tool.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>

int tool_cuda_devices(void) { return gdn_device_count(GDN_BACKEND_CUDA); }

const char *tool_cuda_device_name(void) {
    static char name[256] = "unknown CUDA device";
    struct cudaDeviceProp prop;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        memcpy(name, prop.name, sizeof name < sizeof prop.name ? sizeof name : sizeof prop.name);
        name[sizeof name - 1] = '\0';
    }
    return name;
}

/* SMs x FP32 lanes per SM x 2 flops x clock. */
double tool_cuda_peak_gflops(void) {
    int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0.0;
    const int lanes = major < 8 || (major == 8 && minor == 0) ? 64 : 128;
    return (double)sms * lanes * 2.0 * (double)khz * 1e-6;
}

/* Best of a few device-to-device copies of 1 GiB, bytes read + written. */
double tool_cuda_copy_gbps(void) {
    const size_t bytes = (size_t)1 << 30;
    void *src = NULL, *dst = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = 0.0;
    if (cudaMalloc(&src, bytes) == cudaSuccess && cudaMalloc(&dst, bytes) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemset(src, 1, bytes) == cudaSuccess && cudaMemset(dst, 2, bytes) == cudaSuccess) {
        for (int trial = 0; trial < 6; ++trial) {
            float ms = 0.0f;
            if (cudaEventRecord(e0, 0) != cudaSuccess || cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0) != cudaSuccess ||
                cudaEventRecord(e1, 0) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
                break;
            const double gbps = 2.0 * (double)bytes / ((double)ms * 1e-3) * 1e-9;
            if (trial > 0 && gbps > best) best = gbps; /* trial 0 warms up */
        }
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(src);
    cudaFree(dst);
    return best;
}

/* One device slot: q, k, v, y, gate, beta, mask, state at 256-byte aligned offsets of one allocation. */
typedef struct dev_slot {
    char *base;
    void *q, *k, *v, *y;
    float *gate, *beta, *state;
    uint8_t *mask;
} dev_slot;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t slot_bytes(const tool_case *c) {
    return 2 * align256(c->qk_bytes) + 2 * align256(c->v_bytes) + align256(c->gate_bytes) + align256(c->beta_bytes) +
           align256(c->mask_bytes) + align256(c->state_bytes);
}

static void slot_carve(dev_slot *s, const tool_case *c) {
    char *p = s->base;
    s->q = p, p += align256(c->qk_bytes);
    s->k = p, p += align256(c->qk_bytes);
    s->v = p, p += align256(c->v_bytes);
    s->y = p, p += align256(c->v_bytes);
    s->gate = (float *)p, p += align256(c->gate_bytes);
    s->beta = (float *)p, p += align256(c->beta_bytes);
    s->mask = c->mask ? (uint8_t *)p : NULL, p += align256(c->mask_bytes);
    s->state = (float *)p;
}

static gdn_delta_args slot_args(const tool_case *c, const dev_slot *s, const float *A_log, const float *dt_bias,
                                cudaStream_t stream, const char *name) {
    gdn_delta_args a = c->a;
    a.q = s->q;
    a.k = s->k;
    a.v = s->v;
    a.y = s->y;
    a.gate = s->gate;
    a.beta = s->beta;
    a.A_log = A_log;
    a.dt_bias = dt_bias;
    a.mask = s->mask;
    a.state_in = s->state;
    a.state_out = s->state;
    a.backend = GDN_BACKEND_CUDA;
    a.stream = stream;
    a.kernel = name;
    return a;
}

gdn_status tool_cuda_run(const tool_case *c, const char *name, int reps, void *y_out, float *state_out,
                         double *ms_median, int *slots_out) {
    enum { MAX_SLOTS = 256 };
    int dev = 0, l2 = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
        return GDN_ERR_DEVICE;
    if (reps < 0) reps = 0;
    const size_t per_slot = slot_bytes(c);
    const size_t want = reps == 0 ? 1 : (4 * (size_t)l2 + per_slot - 1) / per_slot;
    const int n_slots = want < 1 ? 1 : want > MAX_SLOTS ? MAX_SLOTS : (int)want;
    const size_t param_bytes = sizeof(float) * (size_t)c->a.Hv;

    gdn_status st = GDN_ERR_DEVICE;
    dev_slot slots[MAX_SLOTS];
    memset(slots, 0, sizeof slots);
    float *params = NULL, *check_state = NULL;
    double *times = malloc(sizeof(double) * (size_t)(reps + 1));
    cudaStream_t stream = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (!times) {
        st = GDN_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (cudaStreamCreate(&stream) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
        cudaMalloc((void **)&params, 2 * param_bytes) != cudaSuccess ||
        cudaMalloc((void **)&check_state, c->state_bytes) != cudaSuccess)
        goto done;
    for (int s = 0; s < n_slots; ++s) {
        if (cudaMalloc((void **)&slots[s].base, per_slot) != cudaSuccess) goto done;
        slot_carve(&slots[s], c);
    }
    /* slot 0 from the host, the others copies of it */
    const dev_slot *s0 = &slots[0];
    if (cudaMemcpy(s0->q, c->q, c->qk_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(s0->k, c->k, c->qk_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(s0->v, c->v, c->v_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(s0->gate, c->gate, c->gate_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(s0->beta, c->beta, c->beta_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        (c->mask && cudaMemcpy(s0->mask, c->mask, c->mask_bytes, cudaMemcpyHostToDevice) != cudaSuccess) ||
        cudaMemcpy(s0->state, c->state, c->state_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(params, c->A_log, param_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(params + c->a.Hv, c->dt_bias, param_bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        goto done;
    for (int s = 1; s < n_slots; ++s)
        if (cudaMemcpy(slots[s].base, s0->base, per_slot, cudaMemcpyDeviceToDevice) != cudaSuccess) goto done;

    /* the checked call: slot 0's state (or none) in, a separate state out (or in place on a copy) */
    gdn_delta_args a = slot_args(c, s0, params, params + c->a.Hv, stream, name);
    a.state_in = c->a.state_in ? s0->state : NULL;
    a.state_out = check_state;
    if (c->spec.in_place) {
        if (cudaMemcpy(check_state, s0->state, c->state_bytes, cudaMemcpyDeviceToDevice) != cudaSuccess) goto done;
        a.state_in = check_state;
    }
    st = gdn_delta(&a);
    if (st != GDN_OK) goto done;
    st = GDN_ERR_DEVICE;
    if (cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpy(y_out, s0->y, c->v_bytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(state_out, check_state, c->state_bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;

    /* timed: one warm-up rotation, then `reps` rotations of in-place calls, one slot after another */
    for (int r = reps > 0 ? -1 : 0; r < reps; ++r) {
        if (cudaEventRecord(e0, stream) != cudaSuccess) goto done;
        for (int s = 0; s < n_slots; ++s) {
            const gdn_delta_args as = slot_args(c, &slots[s], params, params + c->a.Hv, stream, name);
            const gdn_status ls = gdn_delta(&as);
            if (ls != GDN_OK) {
                st = ls;
                goto done;
            }
        }
        float ms = 0.0f;
        if (cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            goto done;
        if (r >= 0) times[r] = (double)ms / n_slots;
    }
    *ms_median = reps > 0 ? tool_median(times, reps) : 0.0;
    *slots_out = n_slots;
    st = GDN_OK;
done:
    for (int s = 0; s < n_slots; ++s) cudaFree(slots[s].base);
    cudaFree(params);
    cudaFree(check_state);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (stream) cudaStreamDestroy(stream);
    free(times);
    return st;
}

#else

int tool_cuda_devices(void) { return 0; }
const char *tool_cuda_device_name(void) { return "no CUDA device (built without CUDA)"; }
double tool_cuda_peak_gflops(void) { return 0.0; }
double tool_cuda_copy_gbps(void) { return 0.0; }

gdn_status tool_cuda_run(const tool_case *c, const char *name, int reps, void *y_out, float *state_out,
                         double *ms_median, int *slots_out) {
    (void)c, (void)name, (void)reps, (void)y_out, (void)state_out, (void)ms_median, (void)slots_out;
    return GDN_ERR_NO_DEVICE;
}

#endif
