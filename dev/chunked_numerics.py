#!/usr/bin/env python3
"""Probe for issue 21: the chunked (WY) form of the gated delta rule in float32, against a float64 recurrence, with
ordinary, exactly-zero and huge decays; the gate handling a chunked kernel needs to stay finite and accurate.

Per head, chunk of C tokens from state S0 [Dk, Dv] (KV), g_t the log decays, G_t their sum from the chunk's start:
    U  = (I + A)^-1 (diag(beta) V - diag(beta e^G) K S0),  A_ts = beta_t e^(G_t - G_s) (k_t . k_s) for s < t
    O  = (diag(e^G) Q S0 + (Q K^T o M) U) scale,           M_ts = e^(G_t - G_s) for s <= t
    S1 = e^(G_C) S0 + (K o e^(G_C - G))^T U
Every exponent is a difference G_t - G_s <= 0 (no e^-G_s: huge decays overflow it). An exact zero decay
(g = -inf) would make G_t - G_s = -inf - (-inf) = NaN: "segments" restarts the sums at it, so that
e^(G_t - G_s) = [same segment] e^(L_t - L_s) and e^(G_t) = [t in the first segment] e^(L_t), L the in-segment sums
(the zero gate's own g counted as 0: its token's update survives the forgetting). "naive" subtracts the plain G;
"segments64" sums L in float64 (the differences and exps in float32): with huge decays L reaches -1600 in a chunk
and a float32 difference of two such sums loses 1e-4 of the exponent.

    python3 dev/chunked_numerics.py [--T 256 2048] [--C 64] [--heads 4] [--D 128]
"""
import argparse
import math

import torch


def inputs(T, H, D, gate, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(H, T, D, generator=gen, dtype=torch.float64), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(H, T, D, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(H, T, D, generator=gen, dtype=torch.float64)
    u = torch.rand(H, T, generator=gen, dtype=torch.float64)
    g = torch.log(0.9 + 0.1 * u) if gate != "huge" else -50.0 * u
    if gate == "zero":
        g[:, 5::97] = -math.inf
    beta = torch.sigmoid(torch.randn(H, T, generator=gen, dtype=torch.float64))
    S0 = 0.1 * torch.randn(H, D, D, generator=gen, dtype=torch.float64)
    return q, k, v, g, beta, S0


def recurrence(q, k, v, g, beta, S0, scale):
    """The contract's token loop (any dtype): S <- e^g S; d = beta (v - S^T k); S += k d^T; o = S^T q scale."""
    S, out = S0.clone(), torch.empty_like(v)
    for t in range(q.shape[1]):
        S = S * torch.exp(g[:, t])[:, None, None]
        d = beta[:, t, None] * (v[:, t] - torch.einsum("hij,hi->hj", S, k[:, t]))
        S = S + k[:, t, :, None] * d[:, None, :]
        out[:, t] = torch.einsum("hij,hi->hj", S, q[:, t]) * scale
    return out, S


def decays(g, mode):
    """(D [H, C, C] = e^(G_t - G_s) for s <= t else 0, e^G_t [H, C], e^(G_C - G_s) [H, C]) of one chunk's log decays."""
    C = g.shape[1]
    low = torch.tril(torch.ones(C, C, dtype=torch.bool))
    if mode == "naive":
        G = torch.cumsum(g, dim=1)
        diff = G[:, :, None] - G[:, None, :]
        return torch.where(low, torch.exp(diff), 0.0), torch.exp(G), torch.exp(G[:, -1:] - G)
    zero = torch.isinf(g) & (g < 0)
    seg = torch.cumsum(zero.to(torch.int64), dim=1)           # segment of each token; 0 = from the chunk's start
    wide = torch.float64 if mode == "segments64" else g.dtype  # the sums' precision; the exps stay in g's
    L = torch.zeros(g.shape, dtype=wide)
    for t in range(C):                                        # in-segment sums; a zero gate restarts at 0
        L[:, t] = torch.where(zero[:, t], 0.0, (L[:, t - 1] if t else 0.0) + torch.where(zero[:, t], 0.0, g[:, t].to(wide)))
    same = (seg[:, :, None] == seg[:, None, :]) & low
    ex = lambda d: torch.exp(d.to(g.dtype))
    Dm = torch.where(same, ex(torch.where(same, L[:, :, None] - L[:, None, :], 0.0)), 0.0)
    first = seg == 0
    eG = torch.where(first, ex(L), 0.0)
    last = seg == seg[:, -1:]
    eGC = torch.where(last, ex(torch.where(last, L[:, -1:] - L, 0.0)), 0.0)
    return Dm, eG, eGC


def chunked(q, k, v, g, beta, S0, scale, C, mode):
    """The chunked form in q's dtype, chunk by chunk."""
    H, T, D = q.shape
    S, out = S0.clone(), torch.empty_like(v)
    eye = torch.eye(C, dtype=q.dtype)
    for c0 in range(0, T, C):
        sl = slice(c0, min(c0 + C, T))
        qc, kc, vc, bc = q[:, sl], k[:, sl], v[:, sl], beta[:, sl]
        n = qc.shape[1]
        Dm, eG, eGC = decays(g[:, sl], mode)
        strict = torch.tril(torch.ones(n, n, dtype=torch.bool), -1)
        A = torch.where(strict, bc[:, :, None] * Dm * (kc @ kc.transpose(1, 2)), 0.0)
        rhs = bc[:, :, None] * vc - (bc * eG)[:, :, None] * (kc @ S)
        U = torch.linalg.solve_triangular(eye[:n, :n] + A, rhs, upper=False, unitriangular=True)
        out[:, sl] = (eG[:, :, None] * (qc @ S) + (torch.tril(qc @ kc.transpose(1, 2)) * Dm) @ U) * scale
        S = eG[:, -1, None, None] * S + (kc * eGC[:, :, None]).transpose(1, 2) @ U  # e^(G_C): 0 past a zero gate
    return out, S


def err(x, ref):
    x = x.double()
    if not bool(torch.isfinite(x).all()):
        return "NaN/inf"
    return "%.2e" % ((x - ref).abs().max() / ref.abs().max()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--C", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--D", type=int, default=128)
    opt = ap.parse_args()
    scale = opt.D ** -0.5
    print("%-8s %5s  %-24s %10s %10s" % ("gate", "T", "f32 implementation", "y err", "state err"))
    for gate in ("ordinary", "zero", "huge"):
        for T in opt.T:
            x64 = inputs(T, opt.heads, opt.D, gate, seed=T)
            y_ref, s_ref = recurrence(*x64, scale)
            x32 = [x.float() for x in x64]
            runs = [("token recurrence", lambda: recurrence(*x32, scale))]
            for mode in ("naive", "segments", "segments64"):
                runs.append(("chunked C=%d %s" % (opt.C, mode), lambda m=mode: chunked(*x32, scale, opt.C, m)))
            for name, fn in runs:
                y, s = fn()
                print("%-8s %5d  %-24s %10s %10s" % (gate, T, name, err(y, y_ref), err(s, s_ref)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
