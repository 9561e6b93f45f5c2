/* A call that cannot get its memory returns GDN_ERR_OUT_OF_MEMORY having written nothing: for every n up to the
 * number of allocations a call makes, the call with its n-th allocation failing (gdn__alloc_fail_at, GDN_TESTING
 * builds) leaves y, the planes and the pools byte for byte as they were; with none failing it gives ref's bits. Every
 * CPU layer kernel over batches mixing decode steps, verify windows, partial commits, prefills, fresh and skipped
 * sequences and checkpoints; gdn_delta's dense and batch forms on every CPU kernel; the pool's thread starts. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gdn_case.h"
#include "gdn_testing.h"
#include "harness.h"
#include "layer_case.h"

#if GDN_TESTING

/* One call under test: run it, put its outputs back as they were before it, and judge them. */
typedef struct target {
    gdn_status (*call)(void *ctx);
    void (*reset)(void *ctx);     /* the outputs as before the call (poisoned y, the initial pools) */
    int (*unchanged)(void *ctx);  /* 1: the outputs are as reset left them */
    int (*right)(void *ctx);      /* 1: the outputs are the wanted bits */
    void *ctx;
    const char *what;
} target;

/* The call's allocations counted with none failing (the decode kernels make none), then each one failing in turn,
 * then one more than there are. The
 * workspaces kept between calls are released first, so that every call allocates the same; the pool is started by a
 * first call, so that its thread starts are not counted. */
static void every_allocation(const target *t) {
    t->reset(t->ctx);
    (void)t->call(t->ctx);
    t->reset(t->ctx);
    gdn_cpu_release();
    gdn__alloc_fail_at(0);
    gdn_status s = t->call(t->ctx);
    const int64_t count = gdn__alloc_count();
    CHECK(s == GDN_OK && t->right(t->ctx), "%s: status %d (%s) with every allocation made", t->what, (int)s,
          gdn_last_error());
    if (harness_verbose) printf("    %s: %lld allocations\n", t->what, (long long)count);
    int bad = 0;
    for (int64_t n = 1; n <= count + 1; ++n) {
        t->reset(t->ctx);
        gdn_cpu_release();
        gdn__alloc_fail_at(n);
        s = t->call(t->ctx);
        const int64_t made = gdn__alloc_count();
        gdn__alloc_fail_at(0);
        const int ok = n <= count ? s == GDN_ERR_OUT_OF_MEMORY && t->unchanged(t->ctx) && gdn_last_error()[0] != '\0'
                                  : s == GDN_OK && made == count && t->right(t->ctx);
        if (!ok && bad++ < 3)
            CHECK(0, "%s: allocation %lld of %lld failing: status %d (%s), outputs %s", t->what, (long long)n,
                  (long long)count, (int)s, gdn_last_error(),
                  n > count ? (t->right(t->ctx) ? "right" : "wrong") : t->unchanged(t->ctx) ? "unchanged" : "written");
    }
    CHECK(bad == 0, "%s: %d of %lld runs wrong", t->what, bad, (long long)count + 1);
}

/* ---- gdn_layer ---- */

typedef struct layer_ctx {
    lcase c;
    lrun want, got;
    const char *kernel;
    int threads;
} layer_ctx;

static gdn_status layer_call(void *ctx) {
    layer_ctx *x = ctx;
    return lcase_run(&x->c, &x->got, x->kernel, x->threads);
}

static void layer_reset(void *ctx) {
    layer_ctx *x = ctx;
    memset(x->got.y, 0xFF, x->c.n_y * x->c.ds);
    if (x->got.planes) memset(x->got.planes, 0xFF, x->c.n_planes * sizeof(float));
    memcpy(x->got.state, x->c.state, x->c.n_state * sizeof(float));
    memcpy(x->got.hist_in, x->c.hist, x->c.n_hist * x->c.ds);
    if (x->got.hist_out != x->got.hist_in) memcpy(x->got.hist_out, x->c.hist, x->c.n_hist * x->c.ds);
}

static int all_ff(const void *p, size_t bytes) {
    const unsigned char *b = p;
    for (size_t i = 0; i < bytes; ++i)
        if (b[i] != 0xFF) return 0;
    return 1;
}

static int layer_unchanged(void *ctx) {
    const layer_ctx *x = ctx;
    return all_ff(x->got.y, x->c.n_y * x->c.ds) && (!x->got.planes || all_ff(x->got.planes, x->c.n_planes * sizeof(float))) &&
           memcmp(x->got.state, x->c.state, x->c.n_state * sizeof(float)) == 0 &&
           memcmp(x->got.hist_in, x->c.hist, x->c.n_hist * x->c.ds) == 0 &&
           memcmp(x->got.hist_out, x->c.hist, x->c.n_hist * x->c.ds) == 0;
}

static int layer_right(void *ctx) {
    const layer_ctx *x = ctx;
    return lrun_equal(&x->c, &x->want, &x->got);
}

/* Batch 0: decode steps in a run (one batch-form gdn_delta over the pool), a run of verify windows, a prefill with
 * a partial commit and three checkpoints (two at one position), a fresh and a skipped sequence; Dk = 128 takes the
 * decode kernels and the blocked ones. Batch 1: a partial commit, a fresh prefill with a checkpoint past its commit,
 * a verify, a skipped one; odd sizes, the KV layout, f32, separate histories. */
TEST(alloc_failure_layer_writes_nothing) {
    static const struct {
        int64_t Hk, Hv, Dk, Dv;
        gdn_dtype dtype;
        int64_t B;
        int32_t len[8];
    } batches[2] = {{1, 2, 128, 32, GDN_BF16, 8, {1, 1, 1, 7, 7, 40, 2, 3}}, {2, 4, 40, 16, GDN_F32, 4, {3, 1, 17, 2}}};
    for (int bi = 0; bi < 2; ++bi)
        for (int k = 0; k < gdn_layer_kernel_count(); ++k) {
            const char *name = gdn_layer_kernel_name(k);
            if (strncmp(name, "cuda", 4) == 0) continue;
            for (int threads = 0; threads < 2; ++threads) {
                lcase_cfg g;
                memset(&g, 0, sizeof g);
                g.Hk = batches[bi].Hk, g.Hv = batches[bi].Hv, g.Dk = batches[bi].Dk, g.Dv = batches[bi].Dv;
                g.dtype = batches[bi].dtype, g.B = batches[bi].B, g.slots = g.B + 6, g.seed = 300 + (uint64_t)bi;
                g.layout = (gdn_state_layout)bi, g.bias = 1, g.planes = g.Dv % 16 == 0;
                for (int64_t b = 0; b < g.B; ++b) g.len[b] = batches[bi].len[b];
                layer_ctx x;
                memset(&x, 0, sizeof x);
                x.kernel = name, x.threads = threads;
                if (!lcase_init(&x.c, &g) || !lrun_init(&x.want, &x.c, bi) || !lrun_init(&x.got, &x.c, bi)) {
                    CHECK(0, "allocation");
                    return;
                }
                lcase *c = &x.c;
                if (bi == 0) {
                    c->commit[3] = c->commit[4] = 0, c->commit[5] = 30, c->fresh[6] = 1, c->slot[7] = -1;
                    c->ck[0] = (gdn_layer_checkpoint){5, 10, 9}, c->ck[1] = (gdn_layer_checkpoint){5, 20, 10};
                    c->ck[2] = (gdn_layer_checkpoint){5, 20, 11}, c->ck[3] = (gdn_layer_checkpoint){6, 1, 12};
                    c->n_ck = 4;
                } else {
                    c->commit[0] = 2, c->commit[2] = 5, c->fresh[2] = 1, c->commit[1] = 0, c->slot[3] = -1;
                    c->ck[0] = (gdn_layer_checkpoint){2, 9, 6}, c->ck[1] = (gdn_layer_checkpoint){0, 1, 7};
                    c->n_ck = 2;
                }
                CHECK(lcase_run(c, &x.want, "ref", 1) == GDN_OK, "%s", gdn_last_error());
                char what[96];
                snprintf(what, sizeof what, "gdn_layer, batch %d, %s, threads %d", bi, name, threads);
                const target t = {layer_call, layer_reset, layer_unchanged, layer_right, &x, what};
                every_allocation(&t);
                lrun_free(&x.want), lrun_free(&x.got);
                lcase_free(&x.c);
            }
        }
}

/* ---- gdn_delta ---- */

typedef struct delta_ctx {
    gdn_delta_args a;
    void *y, *want_y;
    float *state, *want_state, *initial; /* state: the call's output pool (in place: also its input) */
    size_t y_bytes, state_bytes;
} delta_ctx;

static gdn_status delta_call(void *ctx) { return gdn_delta(&((delta_ctx *)ctx)->a); }

static void delta_reset(void *ctx) {
    delta_ctx *x = ctx;
    memset(x->y, 0xFF, x->y_bytes);
    if (x->a.state_in == x->state) memcpy(x->state, x->initial, x->state_bytes);
    else memset(x->state, 0xFF, x->state_bytes);
}

static int delta_unchanged(void *ctx) {
    const delta_ctx *x = ctx;
    return all_ff(x->y, x->y_bytes) &&
           (x->a.state_in == x->state ? memcmp(x->state, x->initial, x->state_bytes) == 0 : all_ff(x->state, x->state_bytes));
}

static int delta_right(void *ctx) {
    const delta_ctx *x = ctx;
    return memcmp(x->y, x->want_y, x->y_bytes) == 0 && memcmp(x->state, x->want_state, x->state_bytes) == 0;
}

/* Runs `x` as set up (kernel, form, state mode) against the same call on ref at one thread. */
static void delta_every_allocation(delta_ctx *x, const char *what) {
    const char *kernel = x->a.kernel;
    const int threads = x->a.threads;
    x->a.kernel = "ref", x->a.threads = 1;
    delta_reset(x);
    const gdn_status s = gdn_delta(&x->a);
    CHECK(s == GDN_OK, "%s: ref: %s", what, gdn_last_error());
    memcpy(x->want_y, x->y, x->y_bytes);
    memcpy(x->want_state, x->state, x->state_bytes);
    x->a.kernel = kernel, x->a.threads = threads;
    const target t = {delta_call, delta_reset, delta_unchanged, delta_right, x, what};
    every_allocation(&t);
}

/* Every CPU kernel that takes the call (and the router), dense B = 3 windows of 2 and of 9 tokens, and the batch form
 * over a pool: windows of 1, 2, 9, 1 and 40 tokens, one skipped; the pool in place and separate. */
TEST(alloc_failure_delta_writes_nothing) {
    const int32_t len[5] = {1, 2, 9, 1, 40}, slot[5] = {3, -1, 0, 5, 2};
    for (int form = 0; form < 3; ++form) { /* 0, 1: dense T = 2, 9; 2: the batch form */
        case_cfg g;
        memset(&g, 0, sizeof g);
        g.B = form < 2 ? 3 : 6, g.T = form == 0 ? 2 : form == 1 ? 9 : 9, g.Hk = 1, g.Hv = 2, g.Dk = 128, g.Dv = 32;
        g.dtype = form == 1 ? GDN_F16 : GDN_BF16, g.gate_kind = GDN_GATE_RAW, g.beta_kind = GDN_BETA_LOGIT;
        g.layout = (gdn_state_layout)(form & 1), g.state_in = 1, g.seed = 400 + (uint64_t)form;
        gdn_case c;
        if (!case_init(&c, &g)) { CHECK(0, "allocation"); return; }
        delta_ctx x;
        memset(&x, 0, sizeof x);
        x.a = case_args(&c);
        int32_t cu[6] = {0};
        if (form == 2) { /* the case's B T = 54 tokens as one packed batch of 53, its B states as the pool */
            for (int b = 0; b < 5; ++b) cu[b + 1] = cu[b] + len[b];
            x.a.B = 5, x.a.T = 0, x.a.cu_seqlens = cu, x.a.state_slot = slot, x.a.slots = g.B;
        }
        x.y_bytes = c.n_v * c.dsize, x.state_bytes = c.n_state * sizeof(float);
        x.y = malloc(x.y_bytes), x.want_y = malloc(x.y_bytes);
        x.state = malloc(x.state_bytes), x.want_state = malloc(x.state_bytes), x.initial = c.state_in;
        if (!x.y || !x.want_y || !x.state || !x.want_state) { CHECK(0, "allocation"); return; }
        x.a.y = x.y;
        for (int in_place = 0; in_place < 2; ++in_place) {
            x.a.state_in = in_place ? x.state : c.state_in;
            x.a.state_out = x.state;
            for (int k = -1; k < gdn_kernel_count(); ++k) {
                x.a.kernel = k < 0 ? NULL : gdn_kernel_name(k);
                if (k >= 0 && (gdn_kernel_backend(k) != GDN_BACKEND_CPU || !gdn_kernel_eligible(k, &x.a))) continue;
                x.a.threads = k < 0 ? 0 : 2;
                char what[96];
                snprintf(what, sizeof what, "gdn_delta, form %d, %s, %s", form, x.a.kernel ? x.a.kernel : "routed",
                         in_place ? "in place" : "separate");
                delta_every_allocation(&x, what);
            }
        }
        free(x.y), free(x.want_y), free(x.state), free(x.want_state);
        case_free(&c);
    }
}

/* ---- the pool ---- */

/* A pool thread that cannot be started shrinks the pool and changes no bits. In a child (whose pool starts anew on
 * its first parallel call), the n-th allocation failing for n = 1 .. 6: each call over the whole pool returns ref's
 * bits (or GDN_ERR_OUT_OF_MEMORY, nothing written, where n is the call's workspace), and a smaller pool for each of
 * the pool's thread starts. */
TEST(alloc_failure_pool_thread_start) {
    case_cfg g;
    memset(&g, 0, sizeof g);
    g.B = 4, g.T = 16, g.Hk = 2, g.Hv = 4, g.Dk = 64, g.Dv = 32, g.dtype = GDN_F32, g.state_in = 1, g.seed = 500;
    gdn_case c;
    if (!case_init(&c, &g)) { CHECK(0, "allocation"); return; }
    const size_t yb = c.n_v * c.dsize, sb = c.n_state * sizeof(float);
    void *y0 = malloc(yb), *y = malloc(yb);
    float *s0 = malloc(sb), *s = malloc(sb);
    if (!y0 || !y || !s0 || !s) { CHECK(0, "allocation"); return; }
    CHECK(case_run(&c, "ref", 1, CASE_STATE_SEPARATE, y0, s0) == GDN_OK, "%s", gdn_last_error());
    const int pool = gdn_cpu_threads();
    int shrunk = 0;
    for (int n = 1; n <= 6; ++n) {
        fflush(stdout), fflush(stderr);
        const pid_t pid = fork();
        if (pid == 0) { /* exit 0: ref's bits on the whole pool, 1: on a smaller one, 2: out of memory, nothing written */
            alarm(60);
            gdn_cpu_release();
            gdn__alloc_fail_at(n);
            const gdn_status st = case_run(&c, "ref", 0, CASE_STATE_SEPARATE, y, s);
            if (st == GDN_ERR_OUT_OF_MEMORY) _exit(all_ff(y, yb) && all_ff(s, sb) ? 2 : 3);
            if (st != GDN_OK || memcmp(y, y0, yb) != 0 || memcmp(s, s0, sb) != 0) _exit(3);
            _exit(gdn_cpu_threads() == pool ? 0 : 1);
        }
        int status = 0;
        const int done = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) <= 2;
        CHECK(done, "allocation %d failing: child %s %d", n, WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        shrunk += done && WEXITSTATUS(status) == 1;
    }
    CHECK(shrunk == pool - 1, "%d of the pool's %d thread starts failed and shrank it", shrunk, pool - 1);
    free(y0), free(y), free(s0), free(s);
    case_free(&c);
}

#endif
