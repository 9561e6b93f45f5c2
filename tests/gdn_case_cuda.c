/* The test cases' device copies (CUDA builds; see gdn_case.h). Named *cuda*.c, so it sees the CUDA runtime header
 * in a CUDA build (CMakeLists.txt) and is empty in others. */
#include "gdn_case.h"

#ifdef GDN_HAVE_CUDA
#include <cuda_runtime_api.h>

/* A device copy of `bytes` bytes of host memory (NULL for NULL); *ok cleared on failure. */
void *to_device(const void *host, size_t bytes, int *ok) {
    void *d = NULL;
    if (!host) return NULL;
    if (cudaMalloc(&d, bytes > 0 ? bytes : 1) != cudaSuccess || cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        *ok = 0;
    return d;
}

/* The case's inputs on the device, in a gdn_case of device pointers (the sizes as the host case's). */
int case_to_device(gdn_case *dev, const gdn_case *host) {
    int ok = 1;
    *dev = *host;
    dev->q = to_device(host->q, host->n_qk * host->dsize, &ok);
    dev->k = to_device(host->k, host->n_qk * host->dsize, &ok);
    dev->v = to_device(host->v, host->n_v * host->dsize, &ok);
    dev->gate = to_device(host->gate, host->n_gate * 4, &ok);
    dev->beta = to_device(host->beta, host->n_bt * 4, &ok);
    dev->mask = to_device(host->mask, (size_t)(host->cfg.B * host->cfg.T), &ok);
    dev->A_log = to_device(host->A_log, (size_t)host->cfg.Hv * 4, &ok);
    dev->dt_bias = to_device(host->dt_bias, (size_t)host->cfg.Hv * 4, &ok);
    dev->state_in = NULL;
    return ok;
}

void case_device_free(gdn_case *dev) {
    cudaFree(dev->q), cudaFree(dev->k), cudaFree(dev->v), cudaFree(dev->gate), cudaFree(dev->beta);
    cudaFree(dev->mask), cudaFree(dev->A_log), cudaFree(dev->dt_bias);
}
#endif
