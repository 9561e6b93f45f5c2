/* Isolation: what one call, one sequence or one process does stays there.
 *   - fork(): after the pool has run jobs, a forked child calls gdn_delta at every thread count and gets the
 *     parent's bits (the child's pool starts its own workers; without the atfork handling it would wait forever
 *     for workers that fork did not copy, so every child runs under an alarm).
 *   - NaN isolation (docs/API.md): a NaN in one sequence's input never reaches another sequence, another value
 *     head, or an earlier token of its own head; every CPU kernel, every thread count. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gdn_case.h"
#include "harness.h"

static const case_cfg fork_cfg = {.B = 3, .T = 33, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 64, .dtype = GDN_BF16,
                                  .gate_kind = GDN_GATE_RAW, .beta_kind = GDN_BETA_LOGIT, .mask = 1, .state_in = 1,
                                  .seed = 77};

/* In the child: every thread count and kernel against the parent's y and state; exit status = mismatches. */
static int child_calls(const gdn_case *c, const void *y_parent, const float *s_parent) {
    void *y = malloc(c->n_v * c->dsize);
    float *s = malloc(c->n_state * 4);
    int bad = !y || !s;
    static const char *const kernels[] = {NULL, "ref", "portable", "packed_avx2"};
    for (int threads = 0; !bad && threads <= 4; ++threads)
        for (int k = 0; k < 4; ++k) {
            const gdn_status st = case_run(c, kernels[k], threads, CASE_STATE_SEPARATE, y, s);
            if (st == GDN_ERR_INELIGIBLE) continue;
            bad += st != GDN_OK || memcmp(y, y_parent, c->n_v * c->dsize) != 0 || memcmp(s, s_parent, c->n_state * 4) != 0;
        }
    free(y);
    free(s);
    return bad > 100 ? 100 : bad;
}

TEST(fork_child_calls_at_every_thread_count) {
    gdn_case c;
    CHECK(case_init(&c, &fork_cfg));
    void *y = malloc(c.n_v * c.dsize);
    float *s = malloc(c.n_state * 4);
    CHECK(y && s);
    if (!y || !s) goto out;
    /* the parent's pool exists and has run jobs */
    CHECK(case_run(&c, NULL, 0, CASE_STATE_SEPARATE, y, s) == GDN_OK);
    for (int round = 0; round < 2; ++round) { /* a grandchild too: the child's own pool forks again */
        fflush(NULL);
        const pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(60); /* a deadlock ends as SIGALRM, a failure */
            int bad = child_calls(&c, y, s);
            if (round == 1 && bad == 0) {
                const pid_t grand = fork();
                if (grand == 0) {
                    alarm(60);
                    _exit(child_calls(&c, y, s));
                }
                int gs = 0;
                bad = grand < 0 || waitpid(grand, &gs, 0) != grand || !WIFEXITED(gs) || WEXITSTATUS(gs) != 0;
            }
            _exit(bad);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: child %s %d", round,
              WIFSIGNALED(status) ? "killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
out:
    free(y);
    free(s);
    case_free(&c);
}

/* element e of a q/k/v tensor set to a quiet NaN of its dtype */
static void set_nan(void *base, gdn_dtype dtype, size_t e) {
    if (dtype == GDN_F32) ((uint32_t *)base)[e] = 0x7fc00000u;
    else ((uint16_t *)base)[e] = dtype == GDN_F16 ? 0x7e00u : 0x7fc0u;
}

/* Element ranges of (b, t, h) in y [B, T, Hv, Dv] and of (b, h) in the state [B, Hv, ...]. */
static size_t y_at(const case_cfg *g, int64_t b, int64_t t, int64_t h) { return (size_t)(((b * g->T + t) * g->Hv + h) * g->Dv); }
static size_t s_at(const case_cfg *g, int64_t b, int64_t h) { return (size_t)((b * g->Hv + h) * g->Dk * g->Dv); }

TEST(nan_isolation) {
    case_cfg g = {.B = 3, .T = 12, .Hk = 2, .Hv = 4, .Dk = 128, .Dv = 32, .gate_kind = GDN_GATE_DECAY, .state_in = 1, .seed = 5};
    const int64_t nb = 1, nt = 5, nh = 2; /* the poisoned token: sequence 1, token 5, value head 2 */
    for (int dt = 0; dt < 3; ++dt)
        for (int where = 0; where < 3; ++where) { /* NaN in v, in k (its key head's rows), in beta */
            g.dtype = (gdn_dtype)dt;
            gdn_case c;
            CHECK(case_init(&c, &g));
            const size_t ny = c.n_v * c.dsize, ns = c.n_state * 4;
            void *y0 = malloc(ny), *y = malloc(ny);
            float *s0 = malloc(ns), *s = malloc(ns);
            CHECK(y0 && y && s0 && s);
            if (y0 && y && s0 && s && case_run(&c, "ref", 1, CASE_STATE_SEPARATE, y0, s0) == GDN_OK) {
                const int64_t hk = nh / (g.Hv / g.Hk);
                if (where == 0) set_nan(c.v, g.dtype, y_at(&g, nb, nt, nh) + 3);
                if (where == 1) set_nan(c.k, g.dtype, (size_t)(((nb * g.T + nt) * g.Hk + hk) * g.Dk + 7));
                if (where == 2) c.beta[(nb * g.T + nt) * g.Hv + nh] = NAN;
                for (int k = 0; k < gdn_kernel_count(); ++k) {
                    if (gdn_kernel_backend(k) != GDN_BACKEND_CPU) continue;
                    for (int threads = 1; threads <= 2; ++threads) {
                        const gdn_status st = case_run(&c, gdn_kernel_name(k), threads, CASE_STATE_SEPARATE, y, s);
                        if (st == GDN_ERR_INELIGIBLE) continue;
                        CHECK(st == GDN_OK);
                        int leaks = 0;
                        for (int64_t b = 0; b < g.B; ++b)
                            for (int64_t h = 0; h < g.Hv; ++h) {
                                /* tainted: the poisoned head's sequence, from the token on; a NaN in k taints every
                                 * value head of its key head */
                                const int head_hit = b == nb && (h == nh || (where == 1 && h / (g.Hv / g.Hk) == hk));
                                for (int64_t t = 0; t < g.T; ++t) {
                                    if (head_hit && t >= nt) continue;
                                    leaks += memcmp((char *)y + y_at(&g, b, t, h) * c.dsize,
                                                    (char *)y0 + y_at(&g, b, t, h) * c.dsize, (size_t)g.Dv * c.dsize) != 0;
                                }
                                if (!head_hit)
                                    leaks += memcmp(s + s_at(&g, b, h), s0 + s_at(&g, b, h), (size_t)(g.Dk * g.Dv) * 4) != 0;
                            }
                        CHECK(leaks == 0, "%s threads %d dtype %d nan in %s: %d rows or states changed",
                              gdn_kernel_name(k), threads, dt, where == 0 ? "v" : where == 1 ? "k" : "beta", leaks);
                    }
                }
            }
            free(y0);
            free(y);
            free(s0);
            free(s);
            case_free(&c);
        }
}
