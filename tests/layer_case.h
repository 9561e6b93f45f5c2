/* Test problems for gdn_layer: a configuration (heads, dtype, windows), its inputs and pools filled
 * deterministically from a seed, and runs on copies of the pools with y poisoned first (0xFF bytes: NaN in every
 * dtype). */
#ifndef GDN_LAYER_CASE_H
#define GDN_LAYER_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "gdn.h"

#define LCASE_MAX_SEQ 300

typedef struct lcase_cfg {
    int64_t Hk, Hv, Dk, Dv;
    gdn_dtype dtype;
    int64_t B;
    int32_t len[LCASE_MAX_SEQ];   /* each window's tokens */
    int64_t slots;                /* 0: B + 3 */
    gdn_state_layout layout;
    gdn_out_gate out_gate;
    int bias, A_log;              /* 1: a conv bias; 1: A_log instead of A */
    int planes;                   /* 1: y's planes too (Dv % 16 == 0) */
    gdn_head_map head_map;        /* GDN_HEADS_GROUPED (0) or GDN_HEADS_TILED */
    uint64_t seed;
} lcase_cfg;

typedef struct lcase {
    lcase_cfg cfg;
    int64_t C, T, slots;
    size_t ds;
    int32_t cu[LCASE_MAX_SEQ + 1], slot[LCASE_MAX_SEQ], commit[LCASE_MAX_SEQ];
    uint8_t fresh[LCASE_MAX_SEQ];
    gdn_layer_checkpoint ck[8];    /* the first n_ck are passed */
    int n_ck;
    void *qkv, *z, *alpha, *beta;  /* dtype */
    float *conv_w, *conv_bias, *dt_bias, *A, *A_log, *gamma;
    float *state;                  /* the initial pools */
    void *hist;
    size_t n_y, n_state, n_hist;   /* elements */
    size_t n_planes;               /* f32 elements: 49 n_y / 16, or 0 */
} lcase;

/* Allocates and fills a case (slot[b] = b + 1, commit all, no fresh); 0 on allocation failure. */
int lcase_init(lcase *c, const lcase_cfg *cfg);
void lcase_free(lcase *c);

/* The outputs of one run: y and the pools after it. */
typedef struct lrun {
    void *y;
    float *state;
    void *hist_in, *hist_out; /* hist_out == hist_in in place */
    float *planes;            /* NULL without cfg.planes */
} lrun;

/* The case's args for a run's buffers. */
gdn_layer_args lcase_args(const lcase *c, const lrun *r);
/* Fresh copies of the case's pools (hist_out separate when `separate`), y and the planes poisoned; 0 on failure. */
int lrun_init(lrun *r, const lcase *c, int separate);
void lrun_free(lrun *r);
/* Runs `kernel` (NULL: routed) on the CPU with `threads`; the status. */
gdn_status lcase_run(const lcase *c, lrun *r, const char *kernel, int threads);
/* 1 when y, the planes, the state pool and the history written are the same bits in both runs. */
int lrun_equal(const lcase *c, const lrun *x, const lrun *y);

#endif
