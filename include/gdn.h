/* libgdn — the Gated DeltaNet recurrence on CPU and NVIDIA GPU, with one arithmetic everywhere.
 *
 * The one public header. C11, usable from C++ (extern "C").
 *
 * Operation (per sequence b, value head h; key head hk = h / (Hv / Hk); state S is Dk x Dv, f32):
 *
 *     kv_j = sum_i S[i][j] k_i                      (vector gate: sum_i S[i][j] (g_i k_i))
 *     d_j  = (v_j - g * kv_j) * beta                (vector gate: (v_j - kv_j) * beta)
 *     S[i][j] <- fma(g, S[i][j], k_i * d_j)         (vector gate: g_i in place of g)
 *     y_j  = scale * sum_i S[i][j] q_i
 *
 * for each token t of the window in order. Every sum is the 32-lane tree of docs/CONTRACT.md, so every
 * f32 kernel on every backend returns the same bits (docs/CONTRACT.md is the definition).
 *
 * Tensors are dense, row-major (last index fastest), with these shapes:
 *     q, k          [B, T, Hk, Dk]       dtype `dtype`
 *     v, y          [B, T, Hv, Dv]       dtype `dtype`
 *     gate          GDN_GATE_DECAY, GDN_GATE_LOG_DECAY, GDN_GATE_RAW: [B, T, Hv] f32
 *                   GDN_GATE_VECTOR: [B, T, Hv, Dk] f32 (a decay per key row)
 *     A_log, dt_bias [Hv] f32 (GDN_GATE_RAW only)
 *     beta          [B, T, Hv] f32
 *     mask          [B, T] uint8 (nonzero: token is real) or NULL
 *     state_in/out  [B, Hv, Dv, Dk] (GDN_STATE_VK) or [B, Hv, Dk, Dv] (GDN_STATE_KV), f32
 *
 * Alignment: every tensor pointer is aligned to its element size: q, k, v, y to 4 bytes (f32) or 2 (f16, bf16);
 * gate, A_log, dt_bias, beta, state_in, state_out to 4; mask to 1. A misaligned pointer is GDN_ERR_ALIGNMENT.
 * (The CUDA kernels that load 16 bytes at a time are eligible for 16-byte aligned tensors only; the router
 * then picks cuda_generic.)
 *
 * Ownership: the library never keeps a pointer after a call returns and never frees caller memory.
 * Errors: every call returns a gdn_status; on any error nothing is written. Nothing aborts or prints.
 */
#ifndef GDN_H
#define GDN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDN_VERSION_MAJOR 0
#define GDN_VERSION_MINOR 2

typedef enum gdn_status {
    GDN_OK = 0,
    GDN_ERR_NULL_POINTER,   /* a required pointer is NULL */
    GDN_ERR_BAD_SIZE,       /* a size is zero, negative, or the tensor is too large to address */
    GDN_ERR_HEAD_RATIO,     /* Hv is not a multiple of Hk */
    GDN_ERR_BAD_ENUM,       /* an enum field holds an unknown value */
    GDN_ERR_OVERLAP,        /* an output overlaps an input or another output it must not overlap */
    GDN_ERR_UNKNOWN_KERNEL, /* the kernel named in `kernel` does not exist */
    GDN_ERR_INELIGIBLE,     /* the kernel named in `kernel` cannot run these arguments on this machine */
    GDN_ERR_NO_DEVICE,      /* GDN_BACKEND_CUDA asked for, but no CUDA device (or no CUDA build) */
    GDN_ERR_DEVICE,         /* the CUDA runtime reported an error */
    GDN_ERR_OUT_OF_MEMORY,  /* a workspace could not be allocated */
    GDN_ERR_ALIGNMENT,      /* a tensor pointer is not aligned to its element size */
    GDN_ERR_UNSUPPORTED,    /* valid arguments that no kernel of the requested backend can run (a launch limit) */
    GDN_ERR_NOT_DEVICE_MEMORY, /* GDN_CHECK_POINTERS=1: a pointer of a CUDA call is not device or managed memory */
    GDN_ERR_RESERVED          /* a reserved field of an args struct is not zero (built against a newer header?) */
} gdn_status;

/* Element type of q, k, v and y. Inputs convert exactly to f32; y is rounded to nearest even. */
typedef enum gdn_dtype { GDN_F32 = 0, GDN_F16 = 1, GDN_BF16 = 2 } gdn_dtype;

typedef enum gdn_gate_kind {
    GDN_GATE_DECAY = 0,     /* g = gate[b,t,h] */
    GDN_GATE_LOG_DECAY = 1, /* g = exp(gate[b,t,h]) */
    GDN_GATE_VECTOR = 2,    /* g_i = gate[b,t,h,i], one decay per key row */
    GDN_GATE_RAW = 3        /* g = exp(-exp(A_log[h]) * softplus(gate[b,t,h] + dt_bias[h])), softplus threshold 20 */
} gdn_gate_kind;

typedef enum gdn_beta_kind {
    GDN_BETA_DIRECT = 0, /* beta = beta[b,t,h] */
    GDN_BETA_LOGIT = 1   /* beta = sigmoid(beta[b,t,h]) */
} gdn_beta_kind;

typedef enum gdn_state_layout {
    GDN_STATE_VK = 0, /* [B, Hv, Dv, Dk]: each value column's Dk keys contiguous (mlx-lm, ggml) */
    GDN_STATE_KV = 1  /* [B, Hv, Dk, Dv]: each key row's Dv values contiguous (flash-linear-attention) */
} gdn_state_layout;

/* How value heads map onto key heads when Hk < Hv (G = Hv / Hk): value head h reads q/k head */
typedef enum gdn_head_map {
    GDN_HEADS_GROUPED = 0, /* h / G: each key head's G value heads adjacent (transformers, fla, FlashInfer, vLLM) */
    GDN_HEADS_TILED = 1    /* h % Hk: the key heads tiled G times (ggml / llama.cpp) */
} gdn_head_map;

typedef enum gdn_backend {
    GDN_BACKEND_CPU = 0, /* every pointer is host memory */
    GDN_BACKEND_CUDA = 1 /* every pointer is device memory of the current CUDA device; runs on `stream` */
} gdn_backend;

/* An engine's own CPU threads. The library's parallel work is a set of independent items; a runner given in the
 * args runs them instead of the library's pool: parallel_for(user, n, fn, task) must call fn(task, i, worker)
 * once for every i in [0, n), from any of its threads, with `worker` in [0, workers) and no two concurrent calls
 * sharing a worker id, and return when all have returned. The results are bitwise the same as on the pool at
 * any thread count. */
typedef void (*gdn_task_fn)(void *task, int64_t item, int worker);
typedef struct gdn_cpu_runner {
    void (*parallel_for)(void *user, int64_t n, gdn_task_fn fn, void *task);
    void *user;
    int workers; /* the most worker ids the runner uses (>= 1): the library keeps scratch for that many */
    void *reserved[4]; /* must be NULL: room for later fields */
} gdn_cpu_runner;

/* The arguments of one call. Zero-initialize, then fill in: fields left zero take their documented default. */
typedef struct gdn_delta_args {
    int64_t B, T, Hk, Hv, Dk, Dv; /* all >= 1; Hv % Hk == 0 */
    gdn_dtype dtype;              /* of q, k, v, y */
    const void *q, *k, *v;
    void *y;
    gdn_gate_kind gate_kind;
    const float *gate;
    const float *A_log, *dt_bias; /* GDN_GATE_RAW only; ignored otherwise */
    gdn_beta_kind beta_kind;
    const float *beta;
    const uint8_t *mask;          /* NULL: every token is real. A masked token leaves S as is and writes y = 0 */
    gdn_state_layout state_layout;
    const float *state_in;        /* NULL: start from S = 0 */
    float *state_out;             /* NULL: the final state is not written. May equal state_in (in place) */
    float scale;                  /* multiplies the readout; 0 is taken literally (use 1 for none) */
    gdn_backend backend;
    void *stream;                 /* the backend's stream (CUDA: a cudaStream_t); NULL: its default stream */
    const char *kernel;           /* NULL: the router chooses. Else a name from gdn_kernel_name(), optionally
                                   * with one of its variants: "name:variant" (gdn_kernel_variant_name); or
                                   * "fastest": a chunked-contract kernel for windows of 64 tokens or more where
                                   * one is eligible, else the router's choice */
    int threads;                  /* CPU: at most this many pool threads; 0: the whole pool (ignored with a runner) */
    const gdn_cpu_runner *cpu_runner; /* CPU: NULL runs on the library's pool; else on the engine's threads */
    /* The batch form (below); all zero: the dense form above. */
    const int32_t *cu_seqlens;    /* NULL: dense [B, T, ...] tensors. Else [B + 1], host: the varlen batch form */
    const int32_t *state_slot;    /* NULL: sequence b's state is entry b. Else [B], host: its slot in the pools */
    int64_t slots;                /* with state_slot or state_slot_device: the pools' first dimension (>= 1); else 0 */
    const int32_t *state_slot_device; /* CUDA: NULL, or [B] int32 in device memory, read by the kernel (below) */
    gdn_dtype state_dtype;        /* of state_in and state_out; GDN_F32 (0) */
    gdn_head_map head_map;        /* GDN_HEADS_GROUPED (0) or GDN_HEADS_TILED */
    uint64_t reserved[6];         /* must be zero: room for fields of later versions */
} gdn_delta_args;

/* The batch form: a serving engine's varlen batch over a pool of states (flash-linear-attention's cu_seqlens and
 * ssm_state_indices).
 *   cu_seqlens  [B + 1] int32, host: 0, then strictly increasing. Sequence b is tokens cu_seqlens[b] ..
 *               cu_seqlens[b+1] - 1 of tensors packed token-major: q, k [T, Hk, Dk]; v, y [T, Hv, Dv]; gate [T, Hv]
 *               ([T, Hv, Dk] for GDN_GATE_VECTOR); beta [T, Hv]; mask [T], with T = cu_seqlens[B]. The field T
 *               must then be 0 or cu_seqlens[B].
 *   state_slot  [B] int32, host (with or without cu_seqlens): sequence b reads state_in[state_slot[b]] and writes
 *               state_out[state_slot[b]] of pools [slots, Hv, ...]; a negative slot skips the sequence (its y rows
 *               are +0, no state read or written). Slots at or above `slots` are GDN_ERR_BAD_SIZE; two sequences
 *               may name one slot only when state_out is NULL (else GDN_ERR_OVERLAP).
 * The call runs as one dense B = 1 call per sequence, in order, each on its own kernel: the named one (which must
 * be eligible for every sequence's window) or the router's choice for that window. gdn_route names the longest
 * window's kernel (the first of the longest); gdn_kernel_eligible is 1 when the kernel takes every window. All is
 * validated, and the call's workspace allocated, before anything is written; only a CUDA launch failure can follow
 * earlier sequences' writes.
 *
 * Slots on the device (CUDA graphs, vLLM's ssm_state_indices): state_slot_device [B] int32 in device memory, with the
 * dense [B, T] tensors (cu_seqlens and state_slot NULL), T <= 8, a scalar gate and pools [slots, Hv, ...]. The kernel
 * reads sequence b's slot when it runs, so a captured graph replays with the slots written before each replay. A slot
 * < 0 or >= slots skips the sequence (y rows +0, no state written): a slot on the device cannot be reported, so one
 * out of range is skipped, never followed. Two sequences must not write one slot (not checked: it is on the device).
 * Kernels: cuda_window and cuda_decode's streamed kernel; the bits are those of the same call with host slots. */

/* Runs the recurrence over the window. CPU calls return when done; CUDA calls are asynchronous on the
 * stream (arguments are validated, and launch errors reported, before returning). */
gdn_status gdn_delta(const gdn_delta_args *args);

/* The kernel the router would choose for these arguments on this machine (a static string), or an error
 * status for arguments that gdn_delta would reject. Pure: depends on the arguments, the hardware, and
 * GDN_PACKED (read once). */
gdn_status gdn_route(const gdn_delta_args *args, const char **kernel_name);

/* The arithmetic a kernel keeps (docs/CONTRACT.md). */
typedef enum gdn_contract {
    GDN_CONTRACT_EXACT = 0,  /* the contract's bits: bitwise equal to ref on every backend; the router's only kind */
    GDN_CONTRACT_CHUNKED = 1 /* the chunked contract: bitwise run to run, whatever the batch around a sequence and
                              * however its window is split at multiples of 64 tokens; within the float64 oracle's
                              * tolerance, not ref's bits. Runs only when named, or for kernel = "fastest" */
} gdn_contract;

/* The registered kernels, in routing order: index 0 .. gdn_kernel_count() - 1. */
int gdn_kernel_count(void);
const char *gdn_kernel_name(int index);
gdn_backend gdn_kernel_backend(int index);
gdn_contract gdn_kernel_contract(int index); /* GDN_CONTRACT_EXACT for an index out of range */
/* 1 if the kernel can run these arguments on this machine, else 0. */
int gdn_kernel_eligible(int index, const gdn_delta_args *args);

/* The kernel's named variants (tests and benchmarks force them as "name:variant"): 0 .. count - 1. */
int gdn_kernel_variant_count(int index);
const char *gdn_kernel_variant_name(int index, int variant);

/* ---- The layer step: conv, norms, gates, the recurrence and the gated RMSNorm of one GDN layer ----
 *
 * A batch of B sequences, each a window of n_b >= 1 tokens, packed token-major: sequence b holds the tokens
 * cu_seqlens[b] .. cu_seqlens[b+1] - 1 of every [T, ...] tensor (T = cu_seqlens[B]). Channels
 * C = 2 Hk Dk + Hv Dv, in the order q heads, k heads, v heads. Per token t of sequence b, value head h
 * (key head hk = h / (Hv / Hk)), in this order (docs/CONTRACT.md, "The layer step", is the definition):
 *
 *     x_c   = silu(fma chain of the 4 taps over (hist_c[0], hist_c[1], hist_c[2], qkv[t, c]) + conv_bias_c)
 *     q, k  = the head's Dk channels, each times rsqrt(sum x^2 / Dk + eps_l2 / Dk), then times rsqrt(Dk)
 *     g     = exp(softplus(alpha[t, h] + dt_bias[h]) * A[h])      (A = -exp(A_log) when A_log is given)
 *     beta  = sigmoid(beta[t, h])
 *     o     = the recurrence of gdn_delta on (q, k, v, g, beta) with the sequence's state, times scale
 *     y_j   = rsqrt(sum o^2 / Dv + eps_rms) o_j gamma_j gate(z[t, h, j])        (gate: silu or sigmoid)
 *
 * and the history shifts by one input (the newest last). Every sum is the contract's 32-lane tree.
 *
 * Tensors (dtype `dtype` unless said otherwise; all dense, row-major):
 *     qkv            [T, C]          the mixed projection before the conv
 *     z              [T, Hv, Dv]     the output gate's input
 *     alpha, beta    [T, Hv]         raw (softplus and sigmoid are applied here)
 *     y              [T, Hv, Dv]
 *     conv_w         [C, 4] f32, tap 3 on the current token; conv_bias [C] f32 or NULL
 *     dt_bias, A or A_log  [Hv] f32 (exactly one of A and A_log); gamma [Dv] f32
 *     state          [slots, Hv, Dv, Dk] (GDN_STATE_VK) or [slots, Hv, Dk, Dv] (GDN_STATE_KV) f32, in place
 *     hist_in        [slots, C, 3]   the last three inputs of each channel, oldest first
 *     hist_out       [slots, C, 3]   where committed histories go: equal to hist_in (in place) or disjoint
 * Per sequence, in host memory (both backends):
 *     cu_seqlens     [B + 1] int32: 0, then strictly increasing
 *     slot           [B] int32: the sequence's slot in both pools; negative: skipped (its y rows are zero,
 *                    no pool is read or written); NULL: sequence b uses slot b
 *     commit         [B] int32: k in 0 .. n_b: the state and history after the first k tokens are written to the
 *                    slot (0: verify, nothing written); every one of the n_b outputs is computed either way.
 *                    NULL: k = n_b for every sequence
 *     fresh          [B] uint8: nonzero: the sequence starts from a zero state and a zero history instead of
 *                    its slot's (a new prompt); NULL: every sequence reads its slot
 *     checkpoints    [n_checkpoints] gdn_layer_checkpoint, host: the state and history of sequence `seq` after
 *                    its first `after` tokens (1 .. n_seq) also written to slot `slot` (prefix caching at block
 *                    boundaries, in the same pass); NULL with n_checkpoints 0: none
 * Two sequences may name one slot only if neither commits; a checkpoint's slot is named by no sequence and no
 * other checkpoint. On any error nothing is written. */
typedef struct gdn_layer_checkpoint {
    int32_t seq, after, slot;
} gdn_layer_checkpoint;

typedef enum gdn_out_gate {
    GDN_OUT_GATE_SILU = 0,   /* y = rmsnorm(o) gamma silu(z): Qwen3-Next, Qwen3.5 */
    GDN_OUT_GATE_SIGMOID = 1 /* y = rmsnorm(o) gamma sigmoid(z) */
} gdn_out_gate;

typedef struct gdn_layer_args {
    int64_t B, Hk, Hv, Dk, Dv;    /* all >= 1; Hv % Hk == 0 */
    const int32_t *cu_seqlens;    /* [B + 1], host */
    gdn_dtype dtype;              /* of qkv, z, alpha, beta, y and the histories */
    const void *qkv, *z, *alpha, *beta;
    void *y;
    const float *conv_w, *conv_bias;
    const float *dt_bias, *A, *A_log, *gamma;
    float eps_l2, eps_rms;        /* 0: 1e-6 */
    float scale;                  /* of the readout; 0: 1 / sqrt(Dk) */
    gdn_out_gate out_gate;
    int64_t slots;                /* >= 1: the pools' first dimension */
    gdn_state_layout state_layout;
    float *state;
    const void *hist_in;
    void *hist_out;
    const int32_t *slot, *commit; /* [B], host; NULL: see above */
    const uint8_t *fresh;         /* [B], host; NULL: none */
    const gdn_layer_checkpoint *checkpoints; /* host; NULL: none */
    int64_t n_checkpoints;
    gdn_backend backend;
    void *stream;                 /* CUDA: a cudaStream_t; NULL: the default stream */
    const char *kernel;           /* NULL: routed; else one of gdn_layer_kernel_name(), or "fastest": routed, with
                                   * windows of 64 tokens or more on the chunked prefill (docs/API.md) */
    int threads;                  /* CPU: at most this many pool threads; 0: the whole pool */
    const gdn_cpu_runner *cpu_runner;
    float *planes;                /* NULL: none; else f32 [3, T, Hv Dv] then [T, Hv Dv / 16]: y pre-scaled for a
                                   * packed-weight matvec and its per-16 sums (docs/API.md, "Planes"); Dv % 16 == 0 */
    gdn_dtype state_dtype;        /* of the state pool; GDN_F32 (0) */
    gdn_head_map head_map;        /* GDN_HEADS_GROUPED (0) or GDN_HEADS_TILED */
    uint64_t reserved[6];         /* must be zero */
} gdn_layer_args;

/* Runs the layer step over the batch. CUDA calls are asynchronous on the stream; host arrays (cu_seqlens, slot,
 * commit, fresh) may be reused as soon as the call returns. */
gdn_status gdn_layer(const gdn_layer_args *args);

/* The layer kernel the router would choose (a static string), or the error gdn_layer would return. */
gdn_status gdn_layer_route(const gdn_layer_args *args, const char **kernel_name);

/* The layer kernels, in routing order: 0 .. gdn_layer_kernel_count() - 1. */
int gdn_layer_kernel_count(void);
const char *gdn_layer_kernel_name(int index);

/* A short English sentence for a status. Never NULL. */
const char *gdn_status_str(gdn_status status);

/* What the calling thread's last failed call found, naming the argument: for example
 * "args->Dv = 0: must be at least 1". Empty after a call that returned GDN_OK. Never NULL; valid
 * until the thread's next call into the library. */
const char *gdn_last_error(void);

/* Number of threads in the CPU pool: GDN_THREADS if set (read once), else the number of online cores. */
int gdn_cpu_threads(void);

/* Frees the workspaces the CPU kernels keep for their next calls: at most four buffers, the largest that of a layer
 * call, 8 T (Hk Dk + Hv Dv + Hv) bytes (101 MB after a 2048-token prefill at Hk 16, Hv 32, D 128). Safe at any
 * time, from any thread; a call running meanwhile keeps its own. */
void gdn_cpu_release(void);

/* How the environment switches were read (GDN_THREADS, GDN_PACKED, GDN_CHECK_POINTERS, GDN_CUDA_PDL, GDN_SPIN_US), a
 * line each: the raw value and its effect, or that it was not understood and the default applies. A static string;
 * never NULL. */
const char *gdn_env_report(void);

/* Number of devices of a backend usable by this build: 1 for GDN_BACKEND_CPU; for GDN_BACKEND_CUDA the CUDA
 * devices (0 without CUDA support or without a device); 0 for an unknown backend. */
int gdn_device_count(gdn_backend backend);

#ifdef __cplusplus
}
#endif
#endif
