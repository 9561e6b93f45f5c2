/* The environment switches' one parsing rule (core/env.h), GDN_PACKED and GDN_CHECK_POINTERS read once. The
 * report of how each switch was read: src/core/env_report.c. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "gdn_internal.h"

/* s without its leading and trailing ASCII whitespace, into buf (n bytes); 0 when it does not fit. */
static int trimmed(const char *s, char *buf, size_t n) {
    while (*s && isspace((unsigned char)*s)) ++s;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1])) --len;
    if (len >= n) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 1;
}

int64_t gdn__env_int(const char *name, int64_t lo, int64_t hi, int64_t fallback) {
    const char *raw = getenv(name);
    char buf[32], *end = NULL;
    if (!raw || !trimmed(raw, buf, sizeof buf) || !buf[0]) return fallback;
    errno = 0;
    const long long n = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0' || n < lo || n > hi) return fallback;
    return (int64_t)n;
}

int gdn__env_bool(const char *name, int fallback) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    const char *raw = getenv(name);
    char buf[8];
    if (!raw || !trimmed(raw, buf, sizeof buf)) return fallback;
    for (int i = 0; i < 4; ++i) {
        if (strcasecmp(buf, yes[i]) == 0) return 1;
        if (strcasecmp(buf, no[i]) == 0) return 0;
    }
    return fallback;
}

/* The library's switches, each read once. */
static int packed_enabled_value = 1, check_pointers_value = 0;
static pthread_once_t packed_once = PTHREAD_ONCE_INIT, check_once = PTHREAD_ONCE_INIT;

static void read_packed_switch(void) { packed_enabled_value = gdn__env_bool("GDN_PACKED", 1); }
static void read_check_switch(void) { check_pointers_value = gdn__env_bool("GDN_CHECK_POINTERS", 0); }

int gdn__packed_enabled(void) {
    pthread_once(&packed_once, read_packed_switch);
    return packed_enabled_value;
}

int gdn__check_pointers(void) {
    pthread_once(&check_once, read_check_switch);
    return check_pointers_value;
}
