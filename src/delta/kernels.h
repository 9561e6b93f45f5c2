/* The recurrence's kernels, declared once, in routing order: for a call the router takes the first kernel of
 * its backend whose routing predicate holds (GDN_PACKED=0 skips the packed ones); a kernel named in the call
 * runs wherever it is eligible.
 *
 *     X(name, backend, packed)
 *
 * name     the public name; the kernel lives in src/delta/cpu/<name>.c (ref: src/delta/ref.c, beside the oracle)
 *          or src/delta/cuda/<name without "cuda_">.cu, which defines
 *              int gdn__delta_<name>_eligible(const gdn__problem *p);  can run these arguments on this machine
 *              int gdn__delta_<name>_routed(const gdn__problem *p);    the router takes it (implies eligible)
 *              gdn_status gdn__delta_<name>(const gdn__problem *p, const gdn__variant *v);  v NULL: the routed form
 *              const gdn__variant gdn__delta_<name>_variants[];        its named variants, {NULL} last
 * backend  CPU or CUDA (GDN_BACKEND_<backend>); a build without CUDA gets stubs of the CUDA kernels from this list
 * packed   1: a fast path that GDN_PACKED=0 routes around (the seed's kill switch)
 *
 * Adding a kernel: its file, and its line here (docs/ADDING_A_KERNEL.md). The routing table, the declarations,
 * the stubs, the bitwise tests' kernel lists and the benchmarks' kernel loops all expand from this list. */
#define GDN_DELTA_KERNELS(X)          \
    X(cuda_window, CUDA, 0)           \
    X(cuda_decode, CUDA, 0)           \
    X(cuda_rowsplit, CUDA, 1)         \
    X(cuda_packed, CUDA, 1)           \
    X(cuda_generic, CUDA, 0)          \
    X(packed_decode_avx512, CPU, 1)   \
    X(packed_decode_avx2, CPU, 1)     \
    X(packed_avx512, CPU, 1)          \
    X(packed_avx2, CPU, 1)            \
    X(portable, CPU, 0)               \
    X(ref, CPU, 0)
