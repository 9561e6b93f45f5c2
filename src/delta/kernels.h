/* The recurrence's kernels, declared once, in routing order: for a call the router takes the first kernel of
 * its backend whose routing predicate holds (GDN_PACKED=0 skips the packed ones); a kernel named in the call
 * runs wherever it is eligible.
 *
 *     X(name, backend, packed, contract)
 *
 * name     the public name; the kernel lives in src/delta/cpu/<name>.c (ref: src/delta/ref.c, beside the oracle)
 *          or src/delta/cuda/<name without "cuda_">.cu, which defines
 *              int gdn__delta_<name>_eligible(const gdn__problem *p);  can run these arguments on this machine
 *              int gdn__delta_<name>_routed(const gdn__problem *p);    the router takes it (implies eligible)
 *              gdn_status gdn__delta_<name>(const gdn__problem *p, const gdn__variant *v);  v NULL: the routed form
 *              const gdn__variant gdn__delta_<name>_variants[];        its named variants, {NULL} last
 *              int64_t gdn__delta_<name>_workspace(const gdn__problem *p);  CPU only: the host workspace bytes its
 *                                                      run takes in p->ws (it allocates nothing); -1: too many
 * backend  CPU or CUDA (GDN_BACKEND_<backend>); a build without CUDA gets stubs of the CUDA kernels from this list
 * packed   1: a fast path that GDN_PACKED=0 routes around (the switch that turns them all off)
 * contract EXACT: the contract's bits (docs/CONTRACT.md), bitwise equal to ref; CHUNKED: the chunked contract
 *          (deterministic, batch- and split-invariant, within the float64 oracle's tolerance): never routed, run
 *          when the call names it or asks for "fastest" (GDN_CONTRACT_<contract>)
 *
 * Adding a kernel: its file, and its line here (docs/ADDING_A_KERNEL.md). The routing table, the declarations,
 * the stubs, the bitwise tests' kernel lists and the benchmarks' kernel loops all expand from this list. */
#define GDN_DELTA_KERNELS(X)               \
    X(cuda_chunked, CUDA, 0, CHUNKED)      \
    X(cuda_window, CUDA, 0, EXACT)         \
    X(cuda_decode, CUDA, 0, EXACT)         \
    X(cuda_rowsplit, CUDA, 1, EXACT)       \
    X(cuda_packed, CUDA, 1, EXACT)         \
    X(cuda_generic, CUDA, 0, EXACT)        \
    X(packed_decode_avx512, CPU, 1, EXACT) \
    X(packed_decode_avx2, CPU, 1, EXACT)   \
    X(packed_avx512, CPU, 1, EXACT)        \
    X(packed_avx2, CPU, 1, EXACT)          \
    X(portable, CPU, 0, EXACT)             \
    X(ref, CPU, 0, EXACT)
