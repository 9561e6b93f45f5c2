#!/usr/bin/env python3
"""Shared-memory wavefronts of the chunked prep kernel's L / decay buffer (`lp` in src/delta/cuda/chunked.cu),
unswizzled (`at_kernel`) and with the kernel's swizzle (`at_swizzled`), by a model of the banks (32 banks of 4 bytes; a warp access takes as many
wavefronts as the most distinct words one bank serves).

lp holds a [C, C] float matrix by row parity: unswizzled, at(i, j) = (i & 1) P + 32 j + (i >> 1), P = C^2 / 2 + 4. The accesses
modelled, per block (4 warps; warp w's strip of rows 16 w .., its tiles nt < 2 w + 2 of 16 x 8, lane 4 g + t holding
rows 16 w + g (+ 8), columns 8 nt + 2 t (+ 1)):
  - the decays d_ij stored (j < i), the L pass's loads of them and its stores of L's diagonal blocks (one access per
    element of a C fragment's four);
  - the substitution's float4 reads of the diagonal blocks (rows 16 w + 2 k + p of column 16 w + m, k = k4 .. k4 + 3),
    which every layout must keep contiguous and 16-byte aligned.
Unswizzled, a row's four t lanes share a bank (the column stride is 32 words): 4-way conflicts. The kernel's swizzle
at(i, j) = (i & 1) P + 32 j + ((i >> 1) ^ 4 (j & 7)) moves bits 2 .. 4 of the row index by the column and keeps the
float4 runs whole. With the unswizzled layout the H200 measured (ncu) 784 bank conflicts a block at B = 1, T = 2048
(0.80M of the prep's 3.18M shared-memory wavefronts; 13.7M of 51.7M on varlen 16 x 2048, where its L1 data pipe is
72.7% busy).

    python3 dev/chunk_prep_banks.py
"""
C = 64
P = C * C // 2 + 4


def at_kernel(i, j):
    return (i & 1) * P + j * 32 + (i >> 1)


def at_swizzled(i, j):
    return (i & 1) * P + j * 32 + ((i >> 1) ^ (4 * (j & 7)))


def wavefronts(words):
    banks = {}
    for a in words:
        banks.setdefault(a % 32, set()).add(a)
    return max((len(v) for v in banks.values()), default=0)


def model(at):
    assert len({at(i, j) for i in range(C) for j in range(C)}) == C * C, "a bijection"
    waves = accesses = 0
    for w in range(4):
        for nt in range(2 * w + 2):
            for half in range(2):
                for e in range(2):
                    rows = [(16 * w + g + 8 * half, 8 * nt + 2 * t + e) for g in range(8) for t in range(4)]
                    stores = [(i, j) for i, j in rows if j < i]
                    # the decays' stores, the L pass's loads, and its stores of the diagonal blocks' L
                    for lanes in (stores, rows) + ((stores,) if nt >= 2 * w else ()):
                        if lanes:
                            waves += wavefronts([at(i, j) for i, j in lanes])
                            accesses += 1
    sub = 0
    for w in range(4):
        for m in range(16):
            for k4 in range((m // 2) & ~3, 8, 4):
                words = []
                for p in range(2):
                    run = [at(2 * (8 * w + k4 + u) + p, 16 * w + m) for u in range(4)]
                    assert run == list(range(run[0], run[0] + 4)) and run[0] % 4 == 0, "a float4 run"
                    words += run
                sub += wavefronts(words)
    return waves, accesses, sub


for name, at in (("kernel", at_kernel), ("swizzled", at_swizzled)):
    waves, accesses, sub = model(at)
    print("%-8s decays and L: %4d wavefronts for %d accesses (%d conflicts a block); substitution reads: "
          "%d wavefronts" % (name, waves, accesses, waves - accesses, sub))
