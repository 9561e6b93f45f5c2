/* The layer step's kernels, in routing order: the router takes the first of the call's backend whose routing
 * predicate holds; a kernel named in the call runs wherever it is eligible.
 *
 *     X(name, backend)
 *
 * name     the public name; the kernel lives in src/layer/cpu/<name>.c (ref: src/layer/ref.c) or
 *          src/layer/cuda/<name without "cuda_">.cu, which defines
 *              int gdn__layer_<name>_eligible(const gdn__layer_problem *p);
 *              int gdn__layer_<name>_routed(const gdn__layer_problem *p);   implies eligible
 *              gdn_status gdn__layer_<name>(const gdn__layer_problem *p);
 * backend  CPU or CUDA; a build without CUDA gets stubs of the CUDA kernels from this list (src/cuda/absent.c) */
#define GDN_LAYER_KERNELS(X) \
    X(cuda_fused, CUDA)      \
    X(cuda_staged, CUDA)     \
    X(staged, CPU)           \
    X(ref, CPU)
