/* The streamed kernel of cuda_decode (decode_stream.cu), as decode.cu calls it. */
#ifndef GDN_DELTA_CUDA_DECODE_STREAM_CUH
#define GDN_DELTA_CUDA_DECODE_STREAM_CUH

#include "cuda/gdn_cuda.cuh"

#ifndef GDN_TESTING
#define GDN_TESTING 0 /* 1 in the test build: test-only modes exist */
#endif

/* How the streamed kernel runs (gdn__variant.mode) */
enum {
    GDN__DECODE_AUTO = 0,     /* warp-specialized where a block walks enough items, else block-synchronous */
    GDN__DECODE_SYNC = 1,     /* block-synchronous: cp.async in, stores from registers */
    GDN__DECODE_WS = 2,       /* warp-specialized (VK): a filling warp's bulk copies in, bulk stores out */
    GDN__DECODE_WS_PAUSES = 3 /* the same with pseudo-random pauses at the mbarrier hand-offs (GDN_TESTING only) */
};

extern "C" {
/* T <= 8, Dk in {32, 64, 128, 256}, Dv % 32 == 0, the copied tensors 16-byte aligned, the grid within limits. */
int gdn__cuda_decode_stream_eligible(const gdn__problem *p);
/* stages: the ring's depth (2 .. 4; 0: the default); blocks: a cap on the grid (0: none); mode: GDN__DECODE_* */
gdn_status gdn__cuda_decode_stream(const gdn__problem *p, int stages, int blocks, int mode);
}

#endif
