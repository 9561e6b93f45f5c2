/* Routing: the kernel table, the router's choices and fallbacks, forcing kernels by name, the CUDA backend
 * without a device, and the GDN_PACKED=0 kill switch (checked in a child process, since the switch is read once). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gdn_case.h"
#include "harness.h"

static int has_avx512(void) {
#if defined(GDN_AVX512_EMULATED) /* as src/cpu/features.c */
    return 1;
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* The decode kernel the router takes at Dk = 128, T <= 2 where packed kernels are on */
static const char *decode_kernel(void) { return has_avx512() ? "packed_decode_avx512" : "packed_decode_avx2"; }

static int has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* The CPU kernels but ref are routed on calls of at least 128 state updates (gdn__cpu_call_is_big in
 * src/gdn_internal.h) */
static int big_call(const gdn_delta_args *a) { return (double)a->B * a->T * a->Hv * a->Dk * a->Dv >= 128.0; }

/* portable is routed where its fmaf is a vector fma (src/delta/cpu/portable.c: FMA3 on x86-64 with GCC's target
 * clones, elsewhere a one-instruction fmaf) on big calls; else ref is */
static int portable_routed(const gdn_delta_args *a) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    __builtin_cpu_init();
    const int fast = __builtin_cpu_supports("fma");
#elif defined(__FP_FAST_FMAF) || defined(__FMA__) || defined(__aarch64__)
    const int fast = 1;
#else
    const int fast = 0;
#endif
    return fast && big_call(a);
}

static int packed_switch_on(void) {
    const char *s = getenv("GDN_PACKED");
    return !(s && strcmp(s, "0") == 0);
}

/* A small valid problem with buffers sized for Dk up to 1024. */
typedef struct small {
    float q[2 * 1024], k[2 * 1024], v[2 * 128], y[2 * 128], gate[2 * 1024], beta[2];
    gdn_delta_args a;
} small;

static void small_init(small *s, int64_t Dk, int64_t Dv) {
    harness_rng r = {3};
    for (int i = 0; i < 2 * 1024; ++i) { s->q[i] = rng_normal(&r) * 0.03f; s->k[i] = rng_normal(&r) * 0.03f; s->gate[i] = 0.95f; }
    for (int i = 0; i < 2 * 128; ++i) s->v[i] = rng_normal(&r);
    s->beta[0] = s->beta[1] = 0.5f;
    s->a = (gdn_delta_args){.B = 1, .T = 2, .Hk = 1, .Hv = 1, .Dk = Dk, .Dv = Dv, .q = s->q, .k = s->k, .v = s->v,
                            .y = s->y, .gate = s->gate, .beta = s->beta, .scale = 1.0f};
}

/* The router's choice equals the first eligible CPU kernel of the table (packed ones skipped when switched off). */
static const char *first_eligible(const gdn_delta_args *a, int packed_on) {
    for (int i = 0; i < gdn_kernel_count(); ++i) {
        const char *name = gdn_kernel_name(i);
        const int packed = strstr(name, "packed") != NULL;
        if (strcmp(name, "portable") == 0 && !portable_routed(a)) continue;
        if (gdn_kernel_backend(i) == GDN_BACKEND_CPU && strcmp(name, "ref") != 0 && !big_call(a)) continue;
        if (gdn_kernel_backend(i) == a->backend && (packed_on || !packed) && gdn_kernel_eligible(i, a)) return name;
    }
    return NULL;
}

TEST(routing_kernel_table) {
    const int n = gdn_kernel_count();
    CHECK(n >= 3);
    for (int i = 0; i < n; ++i) {
        CHECK(gdn_kernel_name(i) != NULL && gdn_kernel_name(i)[0] != '\0');
        for (int j = 0; j < i; ++j) CHECK(strcmp(gdn_kernel_name(i), gdn_kernel_name(j)) != 0, "duplicate name %s", gdn_kernel_name(i));
        CHECK(gdn_kernel_backend(i) == (strncmp(gdn_kernel_name(i), "cuda_", 5) == 0 ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU),
              "backend of %s", gdn_kernel_name(i));
    }
    CHECK(gdn_kernel_name(-1) == NULL && gdn_kernel_name(n) == NULL);
    /* one kernel of the chunked contract, cuda_chunked; the rest keep the exact one */
    for (int i = 0; i < n; ++i)
        CHECK(gdn_kernel_contract(i) == (strcmp(gdn_kernel_name(i), "cuda_chunked") == 0 ? GDN_CONTRACT_CHUNKED : GDN_CONTRACT_EXACT),
              "contract of %s", gdn_kernel_name(i));
    CHECK(gdn_kernel_contract(-1) == GDN_CONTRACT_EXACT && gdn_kernel_contract(n) == GDN_CONTRACT_EXACT);
    CHECK(kernel_index("ref") >= 0 && kernel_index("portable") >= 0 && kernel_index("packed_avx2") >= 0);
    /* in routing order, on the CPU: packed before portable before ref (ref last: it takes anything) */
    CHECK(kernel_index("packed_avx2") < kernel_index("portable") && kernel_index("portable") < kernel_index("ref"));
    small s;
    small_init(&s, 128, 64);
    CHECK(gdn_kernel_eligible(-1, &s.a) == 0 && gdn_kernel_eligible(n, &s.a) == 0);
    CHECK(gdn_kernel_eligible(kernel_index("ref"), NULL) == 0);
    CHECK(gdn_kernel_eligible(kernel_index("ref"), &s.a) == 1);
    CHECK(gdn_kernel_eligible(kernel_index("portable"), &s.a) == 1);
    CHECK(gdn_kernel_eligible(kernel_index("packed_avx2"), &s.a) == has_avx2_fma());
    CHECK(gdn_kernel_eligible(kernel_index("packed_avx512"), &s.a) == has_avx512());
    /* the AVX-512 kernels before the AVX2 ones */
    CHECK(kernel_index("packed_avx512") < kernel_index("packed_avx2"));
    CHECK(kernel_index("packed_decode_avx512") < kernel_index("packed_decode_avx2"));
    for (int i = 0; i < n; ++i)
        if (gdn_kernel_backend(i) == GDN_BACKEND_CUDA) CHECK(gdn_kernel_eligible(i, &s.a) == 0, "%s eligible for a CPU call", gdn_kernel_name(i));
    s.a.Hk = 3; /* arguments gdn_delta would reject: nothing is eligible */
    for (int i = 0; i < n; ++i) CHECK(gdn_kernel_eligible(i, &s.a) == 0);
}

TEST(routing_choices_and_fallbacks) {
    const int packed = packed_switch_on() && has_avx2_fma();
    small s;
    /* the plain Qwen-like shapes go to the AVX2 packed kernel on this machine (without AVX2: portable, or ref where
     * portable has no vector fma) */
    const int64_t dks[] = {32, 64, 128, 256}, dvs[] = {64, 32, 128, 64};
    for (int i = 0; i < 4; ++i)
        for (int d = GDN_F32; d <= GDN_BF16; ++d) {
            small_init(&s, dks[i], dvs[i]);
            s.a.dtype = (gdn_dtype)d;
            const char *name = NULL;
            CHECK(gdn_route(&s.a, &name) == GDN_OK && name != NULL);
            /* Dk = 128 with T <= 2 (this small case): the decode kernel */
            const char *want = !packed                     ? (portable_routed(&s.a) ? "portable" : "ref")
                               : dks[i] == 128                ? decode_kernel()
                               : has_avx512() ? "packed_avx512" : "packed_avx2";
            CHECK(name && strcmp(name, want) == 0, "Dk=%lld dtype %d routed to %s", (long long)dks[i], d,
                  name ? name : "(null)");
            /* the KV layout too: the decode kernel at Dk = 128 with T <= 2 */
            s.a.state_layout = GDN_STATE_KV;
            CHECK(gdn_route(&s.a, &name) == GDN_OK && name && strcmp(name, want) == 0, "Dk=%lld dtype %d KV routed to %s",
                  (long long)dks[i], d, name ? name : "(null)");
        }
    /* any shape: the router's choice is the first eligible kernel, and routing is repeatable */
    const int64_t odd_dk[] = {1, 2, 31, 33, 48, 100, 200, 511, 512}, odd_dv[] = {1, 3, 7, 8, 9, 100, 64, 5, 2};
    for (int i = 0; i < 9; ++i)
        for (int g = GDN_GATE_DECAY; g <= GDN_GATE_VECTOR; ++g) {
            small_init(&s, odd_dk[i], odd_dv[i]);
            s.a.gate_kind = (gdn_gate_kind)g;
            s.a.mask = i % 2 ? (const uint8_t *)"\1\0" : NULL;
            s.a.state_layout = (gdn_state_layout)(i % 2);
            const char *name = NULL, *again = NULL;
            CHECK(gdn_route(&s.a, &name) == GDN_OK && gdn_route(&s.a, &again) == GDN_OK && name == again);
            const char *expect = first_eligible(&s.a, packed_switch_on());
            CHECK(name && expect && strcmp(name, expect) == 0, "Dk=%lld Dv=%lld gate %d: routed to %s, first eligible %s",
                  (long long)odd_dk[i], (long long)odd_dv[i], g, name ? name : "(null)", expect ? expect : "(null)");
        }
    /* Dk > 512: only ref; forcing the others is refused and writes nothing */
    for (int64_t dk = 513; dk <= 1024; dk += 511) {
        small_init(&s, dk, 16);
        const char *name = NULL;
        CHECK(gdn_route(&s.a, &name) == GDN_OK && name && strcmp(name, "ref") == 0, "Dk=%lld routed to %s", (long long)dk,
              name ? name : "(null)");
        CHECK(gdn_kernel_eligible(kernel_index("packed_avx2"), &s.a) == 0 && gdn_kernel_eligible(kernel_index("portable"), &s.a) == 0);
        const char *refused[] = {"packed_avx2", "portable", "packed_avx512"};
        for (int i = 0; i < 3; ++i) {
            s.a.kernel = refused[i];
            poison(s.y, sizeof s.y);
            CHECK(gdn_delta(&s.a) == GDN_ERR_INELIGIBLE, "forcing %s at Dk=%lld", refused[i], (long long)dk);
            CHECK(gdn_route(&s.a, &name) == GDN_ERR_INELIGIBLE);
            CHECK(poisoned_count(s.y, sizeof s.y / 4, 4) == sizeof s.y / 4, "forcing %s wrote y", refused[i]);
        }
        s.a.kernel = NULL;
        CHECK(gdn_delta(&s.a) == GDN_OK);
        CHECK(poisoned_count(s.y, (size_t)(2 * 16), 4) == 0);
    }
}

TEST(routing_forced_names) {
    small s;
    small_init(&s, 64, 32);
    const char *name = NULL;
    /* unknown names, exact match only */
    const char *unknown[] = {"nope", "", "REF", "ref ", "packed", "packed_avx", "packed_avx2x", "oracle"};
    for (int i = 0; i < 8; ++i) {
        s.a.kernel = unknown[i];
        poison(s.y, sizeof s.y);
        CHECK(gdn_delta(&s.a) == GDN_ERR_UNKNOWN_KERNEL, "kernel \"%s\"", unknown[i]);
        CHECK(gdn_route(&s.a, &name) == GDN_ERR_UNKNOWN_KERNEL, "route \"%s\"", unknown[i]);
        CHECK(poisoned_count(s.y, sizeof s.y / 4, 4) == sizeof s.y / 4, "kernel \"%s\" wrote y", unknown[i]);
    }
    /* a CUDA kernel forced on a CPU call is ineligible */
    for (int i = 0; i < gdn_kernel_count(); ++i) {
        if (gdn_kernel_backend(i) != GDN_BACKEND_CUDA) continue;
        s.a.kernel = gdn_kernel_name(i);
        poison(s.y, sizeof s.y);
        CHECK(gdn_delta(&s.a) == GDN_ERR_INELIGIBLE, "forcing %s on the CPU", s.a.kernel);
        CHECK(poisoned_count(s.y, sizeof s.y / 4, 4) == sizeof s.y / 4);
    }
    /* every eligible CPU kernel runs when named, and gdn_route names it back */
    for (int i = 0; i < gdn_kernel_count(); ++i) {
        if (gdn_kernel_backend(i) != GDN_BACKEND_CPU) continue;
        s.a.kernel = gdn_kernel_name(i);
        const int eligible = gdn_kernel_eligible(i, &s.a);
        CHECK(gdn_delta(&s.a) == (eligible ? GDN_OK : GDN_ERR_INELIGIBLE), "forcing %s", s.a.kernel);
        CHECK(gdn_route(&s.a, &name) == (eligible ? GDN_OK : GDN_ERR_INELIGIBLE) && (!eligible || name == gdn_kernel_name(i)));
    }
    /* "fastest" on the CPU, where no kernel has the chunked contract: the router's choice, the same bits */
    s.a.kernel = NULL;
    const char *routed = NULL, *fastest = NULL;
    float y_routed[2 * 32]; /* T = 2 tokens of Dv = 32 */
    CHECK(gdn_route(&s.a, &routed) == GDN_OK && gdn_delta(&s.a) == GDN_OK);
    memcpy(y_routed, s.y, sizeof y_routed);
    s.a.kernel = "fastest";
    poison(s.y, sizeof s.y);
    CHECK(gdn_route(&s.a, &fastest) == GDN_OK && fastest == routed && gdn_delta(&s.a) == GDN_OK);
    CHECK(memcmp(y_routed, s.y, sizeof y_routed) == 0, "fastest on the CPU differs from the router's choice");
    s.a.kernel = NULL;
    CHECK(gdn_route(&s.a, NULL) == GDN_ERR_NULL_POINTER);
    CHECK(gdn_route(NULL, &name) == GDN_ERR_NULL_POINTER);
    s.a.Hv = 3;
    s.a.Hk = 2;
    CHECK(gdn_route(&s.a, &name) == GDN_ERR_HEAD_RATIO);
}

TEST(routing_cuda_without_device) {
    small s;
    small_init(&s, 128, 64);
    s.a.backend = GDN_BACKEND_CUDA;
    const char *name = NULL;
    if (gdn_device_count(GDN_BACKEND_CUDA) > 0) {
        /* a device is present (not the case on the CPU test machine): the router picks a CUDA kernel */
        CHECK(gdn_route(&s.a, &name) == GDN_OK && name && strncmp(name, "cuda_", 5) == 0);
        return;
    }
    CHECK(gdn_route(&s.a, &name) == GDN_ERR_NO_DEVICE);
    const char *names[] = {NULL, "ref", "cuda_packed", "nope"};
    for (int i = 0; i < 4; ++i) {
        s.a.kernel = names[i];
        poison(s.y, sizeof s.y);
        CHECK(gdn_delta(&s.a) == GDN_ERR_NO_DEVICE, "CUDA call with kernel %s", names[i] ? names[i] : "NULL");
        CHECK(poisoned_count(s.y, sizeof s.y / 4, 4) == sizeof s.y / 4);
    }
    for (int i = 0; i < gdn_kernel_count(); ++i) CHECK(gdn_kernel_eligible(i, &s.a) == 0, "%s eligible without a device", gdn_kernel_name(i));
}

/* Valid under any GDN_PACKED: the router skips packed kernels exactly when GDN_PACKED=0. The kill-switch test
 * below runs it in child processes with the switch set. */
TEST(routing_packed_env_child) {
    const int on = packed_switch_on();
    small s;
    const int64_t dks[] = {32, 64, 128, 256, 48, 513};
    for (int i = 0; i < 6; ++i)
        for (int d = GDN_F32; d <= GDN_BF16; ++d) {
            small_init(&s, dks[i], 32);
            s.a.dtype = (gdn_dtype)d;
            const char *name = NULL;
            CHECK(gdn_route(&s.a, &name) == GDN_OK && name);
            if (!name) continue;
            if (!on) CHECK(strstr(name, "packed") == NULL, "GDN_PACKED=0 but Dk=%lld routed to %s", (long long)dks[i], name);
            if (on && dks[i] == 128 && has_avx2_fma()) CHECK(strcmp(name, decode_kernel()) == 0, "routed to %s", name);
            CHECK(strcmp(name, first_eligible(&s.a, on)) == 0);
            /* the routed call runs and matches ref bitwise (f32: the buffers hold f32 data) */
            if (d != GDN_F32) continue;
            float y_ref[2 * 128];
            s.a.kernel = "ref";
            CHECK(gdn_delta(&s.a) == GDN_OK);
            memcpy(y_ref, s.y, sizeof y_ref);
            s.a.kernel = NULL;
            poison(s.y, sizeof s.y);
            CHECK(gdn_delta(&s.a) == GDN_OK);
            CHECK(memcmp(y_ref, s.y, (size_t)(2 * 32) * 4) == 0, "Dk=%lld: routed %s != ref", (long long)dks[i], name);
        }
    printf("     GDN_PACKED=%s: Dk=128 routes to ", getenv("GDN_PACKED") ? getenv("GDN_PACKED") : "(unset)");
    small_init(&s, 128, 32);
    const char *name = NULL;
    gdn_route(&s.a, &name);
    printf("%s\n", name ? name : "(null)");
}

/* Runs this binary with GDN_PACKED=value on the test above; 1 when it passed. `output` gets its stdout. */
static int run_child(const char *value, char *output, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return 0;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        setenv("GDN_PACKED", value, 1);
        char *const argv[] = {"test_gdn", "routing_packed_env_child", NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd[0], output + len, cap - 1 - len)) > 0) len += (size_t)got;
    output[len] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(routing_kill_switch_gdn_packed) {
    const char *values[] = {"0", "1"};
    for (int i = 0; i < 2; ++i) {
        char out[4096];
        const int ok = run_child(values[i], out, sizeof out);
        CHECK(ok && strstr(out, "1 passed, 0 failed") != NULL, "child with GDN_PACKED=%s:\n%s", values[i], out);
        const char *line = strstr(out, "GDN_PACKED=");
        if (line) printf("     child: %.*s\n", (int)strcspn(line, "\n"), line);
        small s;
        small_init(&s, 128, 32); /* the child's case */
        if (values[i][0] == '0')
            CHECK(line && strstr(line, portable_routed(&s.a) ? "routes to portable" : "routes to ref"),
                  "kill switch did not route around the packed kernels");
        else if (has_avx2_fma()) CHECK(line && strstr(line, decode_kernel()));
    }
}
