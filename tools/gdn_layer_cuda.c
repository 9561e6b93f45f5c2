/* The CUDA side of `gdn layer`: a device copy of a layer case (its pools whole, every rotation set), one checked
 * call on set 0, timed calls with CUDA events. Compiled with -DGDN_HAVE_CUDA in a CUDA build; otherwise it reports
 * no device. */
#include <stdlib.h>
#include <string.h>

#include "gdn_tool.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>

static void *upload(const void *src, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) return NULL;
    if (src && cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

gdn_status tool_layer_cuda_run(tool_layer_case *c, const char *kernel, int reps, void *y, float *state, void *hist,
                               double *us_median) {
    const gdn_layer_args *h = &c->a;
    const int64_t C = 2 * h->Hk * h->Dk + h->Hv * h->Dv, ds = h->dtype == GDN_F32 ? 4 : 2;
    gdn_layer_args a = *h;
    a.backend = GDN_BACKEND_CUDA;
    a.kernel = kernel;
    a.qkv = upload(h->qkv, (size_t)(c->T * C * ds));
    a.z = upload(h->z, c->y_bytes);
    a.alpha = upload(h->alpha, (size_t)(c->T * h->Hv * ds));
    a.beta = upload(h->beta, (size_t)(c->T * h->Hv * ds));
    a.conv_w = upload(h->conv_w, (size_t)(C * 16));
    a.A_log = upload(h->A_log, (size_t)h->Hv * 4);
    a.dt_bias = upload(h->dt_bias, (size_t)h->Hv * 4);
    a.gamma = upload(h->gamma, (size_t)h->Dv * 4);
    a.state = upload(h->state, c->state_bytes);
    a.hist_in = a.hist_out = upload(h->hist_in, c->hist_bytes);
    a.y = upload(NULL, c->y_bytes);
    void *bufs[] = {(void *)a.qkv, (void *)a.z, (void *)a.alpha, (void *)a.beta, (void *)a.conv_w, (void *)a.A_log,
                    (void *)a.dt_bias, (void *)a.gamma, a.state, a.hist_out, a.y};
    cudaEvent_t e0 = NULL, e1 = NULL;
    double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
    gdn_status s = GDN_ERR_OUT_OF_MEMORY;
    int ok = t != NULL;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) ok &= bufs[i] != NULL;
    if (!ok || cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) goto done;
    tool_layer_case_set(c, 0);
    s = gdn_layer(&a);
    if (s != GDN_OK) goto done;
    s = GDN_ERR_DEVICE;
    if (cudaDeviceSynchronize() != cudaSuccess) goto done;
    if ((y && cudaMemcpy(y, a.y, c->y_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (state && cudaMemcpy(state, a.state, c->set_state_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (hist && cudaMemcpy(hist, a.hist_in, c->set_hist_bytes, cudaMemcpyDeviceToHost) != cudaSuccess))
        goto done;
    /* timed: a batch of calls per sample, rotating over the sets (one call per sample at most a few ms) */
    for (int r = -1; r < reps; ++r) {
        const int per = c->sets > 1 ? (int)c->sets : 4;
        if (cudaEventRecord(e0, 0) != cudaSuccess) goto done;
        for (int i = 0; i < per; ++i) {
            tool_layer_case_set(c, i + 1);
            if (gdn_layer(&a) != GDN_OK) goto done;
        }
        float ms = 0.0f;
        if (cudaEventRecord(e1, 0) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            goto done;
        if (r >= 0) t[r] = (double)ms * 1e3 / per;
    }
    tool_layer_case_set(c, 0);
    *us_median = reps > 0 ? tool_median(t, reps) : 0.0;
    s = GDN_OK;
done:
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) cudaFree(bufs[i]);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    free(t);
    return s;
}

#else

gdn_status tool_layer_cuda_run(tool_layer_case *c, const char *kernel, int reps, void *y, float *state, void *hist,
                               double *us_median) {
    (void)c, (void)kernel, (void)reps, (void)y, (void)state, (void)hist, (void)us_median;
    return GDN_ERR_NO_DEVICE;
}

#endif
