#!/usr/bin/env python3
"""gdn_layer against Hugging Face transformers' Qwen3-Next GDN layer (its torch fallbacks), on CPU, f32.

    python check_transformers.py [--lib build/pic/libgdn.so] [--T 64] [--decode 1] [--shapes 2,4,32 16,32,128]

Needs torch and transformers (imported at run time; nothing of them is in this repository). For each shape
(Hk, Hv, D = Dk = Dv) a Qwen3NextGatedDeltaNet is built from a small Qwen3NextConfig (its conv1d, A_log, dt_bias
and gated RMSNorm, with random weights in place of its init where its init is a constant), and the part of its
forward after the input projections is run as the module runs it, from the mixed qkv, z, a and b:

    prefill (T tokens, no cache):  conv_state = F.pad(x, (4 - T, 0)); x = silu(conv1d(x)[..., :T]); split;
                                   beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias);
                                   chunk or recurrent fallback (use_qk_l2norm_in_kernel=True, initial_state None);
                                   norm(o, z)
    decode (1 token a step):       causal_conv1d_update(x, conv_state, w, None, "silu"); the same gates;
                                   the fallback from the previous state; norm(o, z)

once with torch_chunk_gated_delta_rule and once with torch_recurrent_gated_delta_rule (both for prefill and decode;
the module itself uses the chunked one for T > 1 and the recurrent one for a cached decode step). libgdn runs
gdn_layer (CPU, f32, GDN_STATE_KV, one slot) on the same inputs: the prefill with fresh=1, then each decode step on
the pools it left. Compared: y, the state [1, Hv, Dk, Dv] (the module's recurrent state is libgdn's GDN_STATE_KV
layout) and the conv history (the module keeps [B, C, 4], the last 4 inputs; its oldest column is never read by the
next step's width-4 conv, so libgdn's [slots, C, 3], oldest first, is conv_state[..., 1:]).

Errors are max |libgdn - transformers| (abs) and that over max |transformers| (rel, normwise). Bounds: rel <= 1e-4
for y and the state, the history bit for bit (it is a copy of inputs). Exits 1 if any bound fails.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE] + [HERE]  # an installed libgdn first
import hf_qwen3next  # noqa: E402
import libgdn  # noqa: E402  (pip install .'s package, else this checkout's python/libgdn with build/pic/libgdn.so)

BOUND_REL = 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=None, help="libgdn.so (default: the installed package's, else build/pic's)")
    ap.add_argument("--T", type=int, default=64, help="prefill tokens (default 64)")
    ap.add_argument("--decode", type=int, default=1, help="decode steps after the prefill (default 1)")
    ap.add_argument("--shapes", nargs="+", default=["2,4,32", "16,32,128"], help="Hk,Hv,D triples")
    ap.add_argument("--seed", type=int, default=0)
    opt = ap.parse_args()

    import torch
    import torch.nn.functional as F

    transformers, m, _ = hf_qwen3next.modeling()
    # the torch fallbacks themselves, unwrapped, so that an installed fla or causal_conv1d cannot take their place
    fallbacks, conv_update = hf_qwen3next.torch_fallbacks(m)
    if opt.lib:
        os.environ["GDN_LIBRARY"] = opt.lib
    print("transformers %s, torch %s, %s; T = %d prefill tokens, %d decode step(s), f32, CPU"
          % (transformers.__version__, torch.__version__, m.__file__, opt.T, opt.decode))
    torch.manual_seed(opt.seed)
    ok = True
    for shape in opt.shapes:
        Hk, Hv, D = (int(s) for s in shape.split(","))
        ok &= check_shape(torch, F, fallbacks, conv_update, Hk, Hv, D, opt.T, opt.decode)
    print("PASS" if ok else "FAIL", "(bounds: rel <= %g for y and state, history bit for bit)" % BOUND_REL)
    return 0 if ok else 1


def check_shape(torch, F, fallbacks, conv_update, Hk, Hv, D, T, steps):
    Dk = Dv = D
    _, mod = hf_qwen3next.build_module(Hk, Hv, D)  # f32, CPU; dt_bias and the norm weight random
    C, K = mod.conv_dim, mod.conv_kernel_size
    print("\nHk = %d, Hv = %d, Dk = Dv = %d (C = %d), A = exp(A_log) in [%.2f, %.2f]"
          % (Hk, Hv, D, C, mod.A_log.exp().min().item(), mod.A_log.exp().max().item()))
    n = T + steps
    qkv = torch.randn(1, n, C)
    z = torch.randn(1, n, Hv, Dv)
    a = torch.randn(1, n, Hv)
    b = torch.randn(1, n, Hv)

    def tf_step(fallback, x, zz, aa, bb, conv_state, state):
        """The module's forward after the projections, for tokens x [1, t, C]: (y [t, Hv*Dv], state, conv_state)."""
        t = x.shape[1]
        x = x.transpose(1, 2)
        if conv_state is None:  # prefill, no cache
            conv_state = F.pad(x, (K - t, 0))
            x = F.silu(mod.conv1d(x)[:, :, :t])
        else:  # a cached decode step: the conv state is updated in place
            conv_state = conv_state.clone()
            x = conv_update(x, conv_state, mod.conv1d.weight.squeeze(1), mod.conv1d.bias, mod.activation)
        x = x.transpose(1, 2)
        q, k, v = torch.split(x, [mod.key_dim, mod.key_dim, mod.value_dim], dim=-1)
        q, k = q.reshape(1, t, Hk, Dk), k.reshape(1, t, Hk, Dk)
        v = v.reshape(1, t, Hv, Dv)
        beta = bb.sigmoid()
        g = -mod.A_log.float().exp() * F.softplus(aa.float() + mod.dt_bias)
        if Hv // Hk > 1:  # older transformers repeat here, newer inside the fallback: a no-op there then
            q, k = q.repeat_interleave(Hv // Hk, dim=2), k.repeat_interleave(Hv // Hk, dim=2)
        o, state = fallbacks[fallback](q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True,
                                       use_qk_l2norm_in_kernel=True)
        y = mod.norm(o.reshape(-1, Dv), zz.reshape(-1, Dv)).reshape(t, Hv * Dv)
        return y, state, conv_state

    # libgdn: one slot, GDN_STATE_KV, the module's weights
    w = hf_qwen3next.weights(mod)
    state = torch.zeros(1, Hv, Dk, Dv)
    hist = torch.zeros(1, C, 3)

    def gdn_step(lo, hi, fresh):
        y = libgdn.layer(qkv[0, lo:hi].contiguous(), z[0, lo:hi].contiguous(), a[0, lo:hi].contiguous(),
                         b[0, lo:hi].contiguous(), w["conv_w"], w["dt_bias"], w["gamma"], state, hist,
                         A_log=w["A_log"], fresh=[1 if fresh else 0], eps_l2=1e-6, eps_rms=mod.norm.variance_epsilon,
                         state_layout="kv")
        return y.reshape(hi - lo, Hv * Dv), state.clone(), hist.clone()

    ok = True
    with torch.no_grad():
        ours = [gdn_step(0, T, True)] + [gdn_step(T + i, T + i + 1, False) for i in range(steps)]
        theirs = {}
        for fallback in fallbacks:
            steps_tf, st, cs = [], None, None
            for i, (lo, hi) in enumerate([(0, T)] + [(T + j, T + j + 1) for j in range(steps)]):
                y, st, cs = tf_step(fallback, qkv[:, lo:hi], z[:, lo:hi], a[:, lo:hi], b[:, lo:hi], cs, st)
                steps_tf.append((y, st[0].clone(), cs[0, :, 1:].clone()))
            theirs[fallback] = steps_tf
        for fallback, steps_tf in theirs.items():
            for i, ((y0, s0, h0), (y1, s1, h1)) in enumerate(zip(ours, steps_tf)):
                what = "prefill T=%d" % T if i == 0 else "decode %d" % i
                row = []
                for name, mine, ref, bound in (("y", y0, y1, BOUND_REL), ("state", s0[0], s1, BOUND_REL),
                                               ("hist", h0[0], h1, 0.0)):
                    err = (mine - ref).abs().max().item()
                    rel = err / max(ref.abs().max().item(), 1e-30)
                    good = rel <= bound
                    ok &= good
                    row.append("%s abs %.2e rel %.2e%s" % (name, err, rel, "" if good else " FAIL"))
                print("  %-9s %-12s %s" % (fallback, what, "  ".join(row)))
        # the two fallbacks against each other, for scale
        for i, ((yc, sc, _), (yr, sr, _)) in enumerate(zip(theirs["chunk"], theirs["recurrent"])):
            print("  chunk vs recurrent %-12s y rel %.2e  state rel %.2e"
                  % ("prefill" if i == 0 else "decode %d" % i, (yc - yr).abs().max().item() / yr.abs().max().item(),
                     (sc - sr).abs().max().item() / sr.abs().max().item()))
    return ok


if __name__ == "__main__":
    sys.exit(main())
