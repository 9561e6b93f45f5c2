"""Float64 references written from docs/CONTRACT.md's definitions (torch, CPU), for tolerance checks."""
import torch


def delta_rule(q, k, v, g, beta, scale, state=None, vector_gate=False):
    """The gated delta rule per sequence, float64. q, k [B, T, Hk, Dk]; v [B, T, Hv, Dv]; g [B, T, Hv] decays (or
    [B, T, Hv, Dk] with vector_gate); beta [B, T, Hv]; state [B, Hv, Dk, Dv] (KV) or None. Per token:
    kv = S^T (g k) for the vector gate, else g S^T k; d = (v - kv) beta; S = g S + k d^T; y = scale S^T q.
    Returns (y [B, T, Hv, Dv], S [B, Hv, Dk, Dv])."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    r = Hv // Hk
    q, k = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)
    S = torch.zeros(B, Hv, Dk, Dv, dtype=torch.float64) if state is None else state.double().clone()
    y = torch.zeros(B, T, Hv, Dv, dtype=torch.float64)
    for t in range(T):
        gt = g[:, t]
        if vector_gate:
            S = S * gt[..., None]
        else:
            S = S * gt[..., None, None]
        kv = torch.einsum("bhij,bhi->bhj", S, k[:, t])
        d = (v[:, t] - kv) * beta[:, t, :, None]
        S = S + k[:, t, :, :, None] * d[:, :, None, :]
        y[:, t] = scale * torch.einsum("bhij,bhi->bhj", S, q[:, t])
    return y, S


def layer_step(qkv, z, alpha, beta, conv_w, dt_bias, A_log, gamma, state, hist, Hk, Dk, eps_l2=1e-6, eps_rms=1e-6):
    """One sequence through the layer step, float64: qkv [T, C], z [T, Hv, Dv], alpha, beta [T, Hv]; state
    [Hv, Dk, Dv] (KV), hist [C, 3] (oldest first). Returns (y [T, Hv, Dv], state, hist)."""
    qkv, z, alpha, beta, conv_w, dt_bias, A_log, gamma, hist = (
        x.double() for x in (qkv, z, alpha, beta, conv_w, dt_bias, A_log, gamma, hist))
    T, C = qkv.shape
    Hv, Dv = z.shape[1], z.shape[2]
    inputs = torch.cat([hist.T, qkv], dim=0)  # [3 + T, C]
    x = sum(conv_w[:, j] * inputs[j:j + T] for j in range(4))
    x = x * torch.sigmoid(x)
    q = x[:, :Hk * Dk].reshape(T, 1, Hk, Dk)
    k = x[:, Hk * Dk:2 * Hk * Dk].reshape(T, 1, Hk, Dk)
    v = x[:, 2 * Hk * Dk:].reshape(T, 1, Hv, Dv)
    q = (q / torch.sqrt((q * q).sum(-1, keepdim=True) + eps_l2)).transpose(0, 1)
    k = (k / torch.sqrt((k * k).sum(-1, keepdim=True) + eps_l2)).transpose(0, 1)
    g = torch.exp(torch.nn.functional.softplus(alpha + dt_bias) * -torch.exp(A_log))
    o, S = delta_rule(q, k, v.transpose(0, 1), g[None], torch.sigmoid(beta)[None], Dk ** -0.5, state[None])
    o = o[0]
    y = o * torch.rsqrt((o * o).mean(-1, keepdim=True) + eps_rms) * gamma * (z * torch.sigmoid(z))
    return y, S[0], inputs[-3:].T


def rel(a, b):
    """max |a - b| / max |b|."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()
