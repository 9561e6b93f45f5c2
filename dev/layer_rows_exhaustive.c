/* Every float through each SIMD table of the CPU layer rows (src/layer/cpu/rows.h) that this CPU runs, SiLU and
 * sigmoid, against the scalar table (gdn_siluf / gdn_sigmoidf) bit for bit; a NaN against a NaN counts as equal (the
 * payload is outside the contract). The test suite samples the same comparison (tests/core/test_math.c); this runs
 * all 2^32 inputs, about a minute a table and function on one core.
 *
 *     make all && cc -std=c11 -O2 -Isrc -Iinclude dev/layer_rows_exhaustive.c build/libgdn.a -lm -pthread \
 *         -o /tmp/layer_rows_exhaustive && /tmp/layer_rows_exhaustive */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_testing.h"

int main(void) {
    enum { N = 1 << 20 };
    static const char *const names[] = {"scalar", "AVX2", "AVX-512"};
    float *x = malloc(N * sizeof *x), *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    if (!x || !want || !got) return 1;
    int status = 0;
    for (int table = 1; table < 3; ++table)
        for (int sigmoid = 0; sigmoid < 2; ++sigmoid) {
            if (!gdn__layer_gate_rows(table, NULL, NULL, 0, sigmoid)) continue;
            long differ = 0;
            for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += N) {
                for (uint32_t i = 0; i < N; ++i) {
                    const uint32_t u = (uint32_t)(base + i);
                    memcpy(&x[i], &u, sizeof u);
                }
                gdn__layer_gate_rows(0, want, x, N, sigmoid);
                gdn__layer_gate_rows(table, got, x, N, sigmoid);
                for (uint32_t i = 0; i < N; ++i)
                    differ += memcmp(&want[i], &got[i], sizeof got[i]) != 0 && !(want[i] != want[i] && got[i] != got[i]);
            }
            printf("%-7s %-7s: %ld of 2^32 floats differ from the scalar rows\n", names[table],
                   sigmoid ? "sigmoid" : "SiLU", differ);
            status |= differ != 0;
        }
    free(x), free(want), free(got);
    return status;
}
