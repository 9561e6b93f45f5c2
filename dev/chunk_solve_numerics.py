#!/usr/bin/env python3
"""Probe: does a tensor-core solve of cuda_chunked's A = (I + L)^-1 diag(beta) keep the accuracy of the prep
kernel's binary32 forward substitution (src/delta/cuda/chunked.cu, gdn_chunk_prep)?

Per (chunk, head), C = 64 tokens, from bf16 keys k (Dk = 128, L2-normalized then rounded), beta in (0, 1) (binary32)
and log decays l_i, as the prep kernel forms them:
    r_i  = binary64 sums of l over the token's segment (an exact zero gate, l = -inf, starts one and counts 0)
    d_ij = expf((float)(r_i - r_j)) for j <= i in one segment, else 0
    L_ij = (beta_i d_ij) (k_i . k_j) for j < i, binary32 (k_i . k_j of the bf16 keys, f32 accumulation)
and from that same binary32 L (and beta) A = T diag(beta), T = (I + L)^-1, six ways:
    (a) float64: the reference A64 (the measure is the solve's error, not that of L);
    (b) kernel: binary32 right-looking forward substitution, for m: x[rows > m] = fmaf(-L[rows][m], x[m], x[rows]);
        then A = fl(T beta_j);
    (c) blocked: the four 16 x 16 diagonal blocks T_ii by (b)'s substitution, then, block row by block row,
        T_ij = -T_ii (sum_{k=j}^{i-1} L_ik T_kj), every product "tc": the tensor cores' split product
        X Y = Xh Yh + Xh Yl + Xl Yh (Xh = bf16(X), Xl = bf16(X - Xh), lo lo dropped), each a binary32 matmul;
    (d) doubling: T = (I - L)(I + L^2)(I + L^4)(I + L^8)(I + L^16)(I + L^32) (exact: L^64 = 0), the squarings and
        the running product P <- P + P L^2k by tc products, P's own term entering through the f32 accumulator;
    (e) blocked as (c), plain binary32 products (what the split costs against what the blocking costs);
    (f) blocked as (c), the identity's terms through the f32 accumulator (mma's C operand), only the corrections split:
        T_kk = I + N_kk, s = L_ij + L_ij N_jj + sum_{k>j} L_ik T_kj, T_ij = -s - N_ii s.
Each A is also measured as the kernel stores it, hi + lo = bf16(A) + bf16(A - bf16(A)) (~16 bits), and carried
downstream as the scan uses it: U = A X for a random X [64, 32] (normal, binary32), by a tc product of A's planes
and X's planes, against U64 = A64 X in float64; the row "(a) A64" puts the exact A64 through that product: U's floor.
Error of a chunk: max |A - A64| / max |A64| (U likewise); the table gives the maximum and the median over the chunks.
Gates: "ordinary" l = log(0.9 + 0.1 u); "zero" the same with l = -inf at tokens 5, 102, ... (every 97th of one
sequence cut into the chunks: about two chunks in three have a segment start); "huge" l = -50 u; u uniform [0, 1),
beta = sigmoid(normal). fmaf is emulated as float32(float64(a) float64(b) + float64(c)): the product is exact, the
sum is rounded twice (to binary64, then binary32), which differs from fmaf only in rare ties. numpy's float32 matmul
accumulates in binary32, in its own order (not the mma's). numpy only, CPU.

    python3 dev/chunk_solve_numerics.py [--chunks 200] [--seed 1]

Found (200 chunks a gate, seed 1; "lower": the error over the strictly lower part against max |A64| there, A's
diagonal being beta exactly in every method; each cell max/median over the chunks):
    gate     method                         A f32     A f32 lower         A hi+lo   A hi+lo lower         U = A X
    -------------------------------------------------------------------------------------------------------------
    ordinary (a) A64 (U's floor)                -               -               -               - 1.5e-05/8.5e-06
    ordinary (b) kernel subst     2.7e-08/1.1e-08 2.7e-07/9.8e-08 4.6e-06/4.0e-06 6.8e-06/3.7e-06 1.5e-05/8.5e-06
    ordinary (c) blocked 16, tc   9.9e-07/4.2e-07 8.5e-06/3.7e-06 4.6e-06/4.0e-06 1.2e-05/4.8e-06 1.4e-05/8.4e-06
    ordinary (d) doubling, tc     1.9e-07/9.0e-08 1.6e-06/7.9e-07 4.6e-06/4.0e-06 6.8e-06/3.7e-06 1.5e-05/8.5e-06
    ordinary (e) blocked 16, f32  2.1e-08/9.2e-09 1.7e-07/8.0e-08 4.6e-06/4.0e-06 6.8e-06/3.7e-06 1.5e-05/8.5e-06
    ordinary (f) blocked 16, tc+I 1.8e-07/6.7e-08 1.6e-06/6.0e-07 4.6e-06/4.0e-06 6.8e-06/3.7e-06 1.5e-05/8.5e-06
             max|A64| median 0.911; max|A64 lower| median 0.105, range 0.065 .. 0.21
    zero     (a) A64 (U's floor)                -               -               -               - 2.0e-05/8.3e-06
    zero     (b) kernel subst     2.0e-08/1.0e-08 1.9e-07/8.7e-08 4.6e-06/4.0e-06 5.9e-06/3.6e-06 2.0e-05/8.3e-06
    zero     (c) blocked 16, tc   1.0e-06/3.9e-07 9.0e-06/3.4e-06 4.6e-06/4.0e-06 1.0e-05/4.4e-06 2.0e-05/8.3e-06
    zero     (d) doubling, tc     2.9e-07/9.0e-08 1.8e-06/7.6e-07 4.6e-06/4.0e-06 5.9e-06/3.6e-06 2.0e-05/8.3e-06
    zero     (e) blocked 16, f32  1.9e-08/8.6e-09 1.9e-07/7.3e-08 4.6e-06/4.0e-06 5.9e-06/3.6e-06 2.0e-05/8.3e-06
    zero     (f) blocked 16, tc+I 2.6e-07/6.8e-08 2.0e-06/5.8e-07 4.6e-06/4.0e-06 5.9e-06/3.6e-06 2.0e-05/8.3e-06
             max|A64| median 0.906; max|A64 lower| median 0.104, range 0.065 .. 0.2
    huge     (a) A64 (U's floor)                -               -               -               - 1.4e-05/8.0e-06
    huge     (b) kernel subst     3.8e-09/2.3e-10 5.8e-08/2.6e-08 4.4e-06/4.0e-06 6.0e-06/1.8e-06 1.4e-05/8.0e-06
    huge     (c) blocked 16, tc   6.3e-08/2.9e-10 5.6e-06/2.9e-08 4.4e-06/4.0e-06 6.0e-06/1.8e-06 1.4e-05/8.0e-06
    huge     (d) doubling, tc     5.2e-09/2.3e-10 1.1e-07/2.6e-08 4.4e-06/4.0e-06 6.0e-06/1.8e-06 1.4e-05/8.0e-06
    huge     (e) blocked 16, f32  3.8e-09/2.3e-10 5.8e-08/2.6e-08 4.4e-06/4.0e-06 6.0e-06/1.8e-06 1.4e-05/8.0e-06
    huge     (f) blocked 16, tc+I 3.8e-09/2.3e-10 5.8e-08/2.6e-08 4.4e-06/4.0e-06 6.0e-06/1.8e-06 1.4e-05/8.0e-06
             max|A64| median 0.912; max|A64 lower| median 0.00995, range 0.00016 .. 0.08
What the scan uses, A's stored planes and U, is set by the 16-bit split, not by the solve: the kernel's own A has
4.6e-6 (whole) / 6.8e-6 (lower) stored against 2.7e-8 / 2.7e-7 in binary32, and U = A X is 1.5e-5 even from the
exact A64. Doubling (d) and blocked with the identity in the accumulator (f) are 6-14x the kernel in binary32
(1.6-2.0e-6 lower), still under the split: their stored A and U equal the kernel's to two digits (also at
--chunks 1000 --seed 2). Plain blocked tc (c) puts the first-order terms L_ij through the split: 8.5-9.0e-6 lower in
binary32 (30-50x), 1.0-1.2e-5 stored (1.7x the kernel's; 1.4e-5, 2.0x, at 1000 chunks seed 2), U unchanged. Blocked
binary32 (e) equals the kernel: the blocking costs nothing, the split of first-order terms is what costs. Huge
decays: the same picture, smaller (L is near 0 off its first subdiagonals). The prep kernel runs (f), in place of (b)
(the H200's state errors over bench/chunk_accuracy.py's cases within 3% of (b)'s).
"""
import argparse

import numpy as np

C, DK, DV = 64, 128, 32
F32 = np.float32


def bf16(x):
    """x (float32) rounded to bf16, to nearest even, as float32."""
    u = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    u = (u + (((u >> 16) & 1) + np.uint32(0x7FFF))) & np.uint32(0xFFFF0000)
    return u.view(F32)


def split(x):
    hi = bf16(x)
    return hi, bf16((x - hi).astype(F32))


def tc(x, y, acc=None):
    """x @ y as the tensor cores do it on bf16 hi + lo planes: xh yh + xh yl + xl yh, binary32; acc added first."""
    xh, xl = split(x.astype(F32))
    yh, yl = split(y.astype(F32))
    s = np.matmul(xh, yh) if acc is None else (acc.astype(F32) + np.matmul(xh, yh)).astype(F32)
    s = (s + np.matmul(xh, yl)).astype(F32)
    return (s + np.matmul(xl, yh)).astype(F32)


def f32mm(x, y, acc=None):
    s = np.matmul(x.astype(F32), y.astype(F32))
    return s if acc is None else (acc + s).astype(F32)


def fmaf(a, b, c):
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(F32)


def inputs(n_chunks, gate, seed):
    """(L [N, C, C], beta [N, C], binary32) of n_chunks chunks of one sequence, as the prep kernel forms them."""
    rng = np.random.default_rng(seed)
    T = n_chunks * C
    k = rng.standard_normal((T, DK))
    k = bf16((k / np.linalg.norm(k, axis=1, keepdims=True)).astype(F32)).reshape(n_chunks, C, DK)
    u = rng.random(T)
    l = np.log(0.9 + 0.1 * u) if gate != "huge" else -50.0 * u
    if gate == "zero":
        l[5::97] = -np.inf
    beta = (1.0 / (1.0 + np.exp(-rng.standard_normal(T)))).astype(F32).reshape(n_chunks, C)
    l = l.reshape(n_chunks, C)
    zero = np.isneginf(l)
    seg = np.cumsum(zero, axis=1)                        # segment of each token; 0 from the chunk's start
    r = np.zeros((n_chunks, C))
    for i in range(C):                                   # binary64 in-segment sums, restarted (at 0) by a zero gate
        prev = r[:, i - 1] if i else 0.0
        r[:, i] = np.where(zero[:, i], 0.0, prev + np.where(zero[:, i], 0.0, l[:, i]))
    strict = np.tril(np.ones((C, C), dtype=bool), -1)
    same = (seg[:, :, None] == seg[:, None, :]) & strict
    diff = np.where(same, r[:, :, None] - r[:, None, :], 0.0).astype(F32)
    d = np.where(same, np.exp(diff), F32(0)).astype(F32)  # expf of the binary32 difference
    kk = np.matmul(k, k.transpose(0, 2, 1)).astype(F32)   # bf16 keys, f32 accumulation
    L = np.where(strict, ((beta[:, :, None] * d).astype(F32) * kk).astype(F32), F32(0)).astype(F32)
    return L, beta


def subst(L):
    """T = (I + L)^-1 of unit-lower blocks [N, n, n] by the kernel's binary32 right-looking substitution."""
    n = L.shape[-1]
    X = np.broadcast_to(np.eye(n, dtype=F32), L.shape).copy()
    for m in range(n - 1):
        X[:, m + 1:, :] = fmaf(-L[:, m + 1:, m, None], X[:, None, m, :], X[:, m + 1:, :])
    return X


def blocked(L, mm, b=16):
    nb = C // b
    T = np.zeros_like(L)
    blk = lambda M, i, j: M[:, b * i:b * (i + 1), b * j:b * (j + 1)]
    for i in range(nb):
        T[:, b * i:b * (i + 1), b * i:b * (i + 1)] = subst(blk(L, i, i))
    for i in range(1, nb):
        for j in range(i):
            s = None
            for k in range(j, i):                        # one f32 accumulator over the k blocks
                s = mm(blk(L, i, k), blk(T, k, j), s)
            T[:, b * i:b * (i + 1), b * j:b * (j + 1)] = -mm(blk(T, i, i), s)
    return T


def blocked_acc(L, b=16):
    """(c) with the identity's terms in the f32 accumulator: T_kk = I + N_kk,
    s = L_ij + L_ij N_jj + sum_{k>j} L_ik T_kj, T_ij = -s - N_ii s; only the corrections go through the split."""
    nb = C // b
    T = np.zeros_like(L)
    blk = lambda M, i, j: M[:, b * i:b * (i + 1), b * j:b * (j + 1)]
    eye = np.eye(b, dtype=F32)
    for i in range(nb):
        T[:, b * i:b * (i + 1), b * i:b * (i + 1)] = subst(blk(L, i, i))
    for i in range(1, nb):
        for j in range(i):
            s = tc(blk(L, i, j), blk(T, j, j) - eye, blk(L, i, j))
            for k in range(j + 1, i):
                s = tc(blk(L, i, k), blk(T, k, j), s)
            T[:, b * i:b * (i + 1), b * j:b * (j + 1)] = tc(-(blk(T, i, i) - eye), s, -s)
    return T


def doubling(L, mm=tc):
    P = (np.eye(C, dtype=F32) - L).astype(F32)
    Q = L
    for _ in range(5):                                   # L^2, L^4, .., L^32
        Q = mm(Q, Q)
        P = mm(P, Q, P)
    return P


def methods():
    return [
        ("(b) kernel subst", subst),
        ("(c) blocked 16, tc", lambda L: blocked(L, tc)),
        ("(d) doubling, tc", doubling),
        ("(e) blocked 16, f32", lambda L: blocked(L, f32mm)),
        ("(f) blocked 16, tc+I", blocked_acc),
    ]


def rel(x, ref, part=None):
    """Per chunk: max |x - ref| / max |ref|, over the whole matrix or over part (a mask)."""
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        return np.full(x.shape[0], np.inf)
    dx, r = np.abs(x - ref), np.abs(ref)
    if part is not None:
        dx, r = np.where(part, dx, 0.0), np.where(part, r, 0.0)
    return dx.max(axis=(1, 2)) / r.max(axis=(1, 2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    opt = ap.parse_args()
    print("%d chunks a gate, seed %d. Error of a chunk: max|A - A64| / max|A64| (U likewise); 'lower': the same over"
          " the strictly lower part (A's diagonal is beta, exact in every method). Each cell: max/median over chunks"
          % (opt.chunks, opt.seed))
    cols = ("A f32", "A f32 lower", "A hi+lo", "A hi+lo lower", "U = A X")
    row = lambda g, m, cells: "%-8s %-20s" % (g, m) + "".join(" %15s" % c for c in cells)
    print(row("gate", "method", cols))
    print("-" * len(row("", "", cols)))
    fmt = lambda e: "%.1e/%.1e" % (e.max(), np.median(e))
    strict = np.tril(np.ones((C, C), dtype=bool), -1)
    for gi, gate in enumerate(("ordinary", "zero", "huge")):
        L, beta = inputs(opt.chunks, gate, opt.seed + 1000 * gi)
        L64 = L.astype(np.float64)
        eye = np.eye(C)
        A64 = np.linalg.solve(eye + L64, np.broadcast_to(eye, L64.shape)) * beta.astype(np.float64)[:, None, :]
        X = np.random.default_rng(opt.seed + 1000 * gi + 7).standard_normal((opt.chunks, C, DV)).astype(F32)
        U64 = A64 @ X.astype(np.float64)
        print(row(gate, "(a) A64 (U's floor)", ("-",) * 4 + (fmt(rel(tc(A64.astype(F32), X), U64)),)))
        for name, fn in methods():
            A = (fn(L) * beta[:, None, :]).astype(F32)
            hi, lo = split(A)
            stored = hi.astype(np.float64) + lo.astype(np.float64)
            print(row(gate, name, (fmt(rel(A, A64)), fmt(rel(A, A64, strict)), fmt(rel(stored, A64)),
                                   fmt(rel(stored, A64, strict)), fmt(rel(tc(A, X), U64)))))
        m, ml = np.abs(A64).max(axis=(1, 2)), np.where(strict, np.abs(A64), 0.0).max(axis=(1, 2))
        print("%-8s max|A64| median %.3g; max|A64 lower| median %.3g, range %.2g .. %.2g" % (
            "", np.median(m), np.median(ml), ml.min(), ml.max()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
