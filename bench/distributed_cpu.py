#!/usr/bin/env python3
"""Context-parallel prefill (python/libgdn/distributed.py) on the CPU over gloo: accuracy and communication.

    torchrun --standalone --nproc_per_node 4 bench/distributed_cpu.py [--T 4096] [--small] [--out FILE.json]

Every rank builds the same whole prompt from a seed and takes its segment (segment_bounds); gdn_delta and the layer
step run context parallel (outputs gathered on every rank). Rank 0 also runs the single-rank call, the float64
oracle (python/tests/reference.py) and, for gdn_delta, transformers' chunked torch fallback
(torch_chunk_gated_delta_rule, float32, chunks of 64; skipped without transformers) on the same inputs.

Shapes: Qwen3-Next's GDN heads (Hk 16, Hv 32, Dk = Dv = 128; --small: Hk 2, Hv 4, D 32), f32 activations.
gdn_delta: unit q, k; log-decay gate g = log(0.9 + 0.1 u) (decays 0.9 .. 1, bench/chunk_accuracy.py's ordinary
gate: a segment's M stays far from 0), direct beta = sigmoid(N(0, 1)), initial state 0.1 N(0, 1). Layer step: the
projections of random hidden states through a GatedDeltaNetLayer with A = -exp(A_log) in [-0.05, -0.005].
Errors: max |x - x64| / max |x64| of y and the final state. Bytes: per rank, what it receives from the others by
collective (the payload, libgdn.distributed's stats) and what the process wrote to its sockets during the call
(/proc/self/io wchar: gloo's TCP sends, headers included; Linux only).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "python", "tests")]
import libgdn  # noqa: E402
from libgdn import distributed as D  # noqa: E402
from reference import delta_rule, layer_step, rel  # noqa: E402


def written():
    """Bytes this process has written (write, writev: gloo's sends), or None where /proc/self/io is absent."""
    try:
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("wchar:")).split()[1])
    except OSError:
        return None


def measured(fn):
    """(fn's result, seconds, bytes written) between two barriers."""
    dist.barrier()
    w0, t0 = written(), time.perf_counter()
    out = fn()
    t, w1 = time.perf_counter() - t0, written()
    dist.barrier()
    return out, t, None if w0 is None else w1 - w0


def chunked(q, k, v, g, beta, S0, r):
    """transformers' torch_chunk_gated_delta_rule (f32), or None without transformers."""
    try:
        import inspect
        from transformers.models.qwen3_next import modeling_qwen3_next as m
    except ImportError:
        return None
    fn = inspect.unwrap(m.torch_chunk_gated_delta_rule)
    y, S = fn(q.repeat_interleave(r, 2), k.repeat_interleave(r, 2), v, g, beta, initial_state=S0.clone(),
              output_final_state=True)
    return y, S


def delta_case(T, Hk, Hv, Dk, Dv, rank, world, out):
    gen = torch.Generator().manual_seed(0)
    unit = lambda x: torch.nn.functional.normalize(x, dim=-1)
    q, k = unit(torch.randn(1, T, Hk, Dk, generator=gen)), unit(torch.randn(1, T, Hk, Dk, generator=gen))
    v = torch.randn(1, T, Hv, Dv, generator=gen)
    g = torch.log(0.9 + 0.1 * torch.rand(1, T, Hv, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, Hv, generator=gen))
    S0 = 0.1 * torch.randn(1, Hv, Dk, Dv, generator=gen)
    b = D.segment_bounds(T, world)
    seg = lambda x: x[:, b[rank]:b[rank + 1]].contiguous()
    kw = dict(gate_kind="log_decay", state_layout="kv")
    stats = {}
    (y, S), t, wire = measured(lambda: D.context_parallel_delta(seg(q), seg(k), seg(v), seg(g), seg(beta),
                                                                 state_in=S0 if rank == 0 else None, stats=stats,
                                                                 **kw))
    out["delta"] = dict(seconds=t, received=stats, received_total=sum(stats.values()), wrote=wire)
    if rank == 0:
        S1 = torch.empty_like(S0)
        t0 = time.perf_counter()
        y1 = libgdn.delta(q, k, v, g, beta, state_in=S0, state_out=S1, **kw)
        out["delta"]["single_seconds"] = time.perf_counter() - t0
        y64, S64 = delta_rule(q, k, v, g.double().exp(), beta, Dk ** -0.5, S0)
        e = {"cp": (rel(y, y64), rel(S, S64)), "single": (rel(y1, y64), rel(S1, S64)),
             "cp/single": (rel(y, y1), rel(S, S1))}
        c = chunked(q, k, v, g, beta, S0, Hv // Hk)
        if c is not None:
            e["transformers chunked"] = (rel(c[0], y64), rel(c[1], S64))
        out["delta"]["errors"] = e


def layer_case(T, Hk, Hv, Dk, Dv, rank, world, out):
    torch.manual_seed(0)
    layer = libgdn.GatedDeltaNetLayer(64 if Dk < 128 else 2048, Hk, Hv, Dk, Dv)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        layer.dt_bias.uniform_(0.5, 1.5)
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.A_log.copy_(torch.empty(Hv).uniform_(0.005, 0.05, generator=gen).log())
        qkv, z, a, bt = layer.project(torch.randn(1, T, layer.hidden_size, generator=gen))
    b = D.segment_bounds(T, world)
    seg = lambda x: x[b[rank]:b[rank + 1]].contiguous()
    stats = {}
    with torch.no_grad():
        (y, S, h), t, wire = measured(lambda: D.context_parallel_step(layer, seg(qkv), seg(z), seg(a), seg(bt),
                                                                       stats=stats))
    out["layer"] = dict(seconds=t, received=stats, received_total=sum(stats.values()), wrote=wire)
    if rank == 0:
        pools = libgdn.GatedDeltaNetCache(1, Hk, Hv, Dk, Dv)
        pools.set_batch(slot=[0], fresh=[1])
        t0 = time.perf_counter()
        with torch.no_grad():
            y1 = layer.step(qkv, z, a, bt, pools)
        out["layer"]["single_seconds"] = time.perf_counter() - t0
        y64, S64, _ = layer_step(qkv, z, a, bt, layer.conv1d.weight.detach().reshape(-1, 4), layer.dt_bias.detach(),
                                 layer.A_log.detach(), layer.norm.weight.detach(), torch.zeros(Hv, Dk, Dv),
                                 torch.zeros(layer.conv_dim, 3), Hk, Dk)
        S1 = pools.states[0][0]
        out["layer"]["errors"] = {"cp": (rel(y, y64), rel(S, S64)), "single": (rel(y1, y64), rel(S1, S64)),
                                  "cp/single": (rel(y, y1), rel(S, S1))}
        out["layer"]["history_equal"] = torch.equal(h, pools.histories[0][0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--small", action="store_true", help="Hk 2, Hv 4, D 32")
    ap.add_argument("--out", help="a JSON file: this world size's results merged into it (rank 0)")
    opt = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    heads = (2, 4, 32, 32) if opt.small else (16, 32, 128, 128)
    x = torch.zeros(1, 1, 1, 8)
    libgdn.delta(x, x, x, torch.ones(1, 1, 1), torch.ones(1, 1, 1))  # the first torch op call's imports, untimed
    mine = {}
    delta_case(opt.T, *heads, rank, world, mine)
    layer_case(opt.T, *heads, rank, world, mine)
    every = [None] * world
    dist.all_gather_object(every, {k: {n: v[n] for n in ("received", "received_total", "wrote", "seconds")}
                                   for k, v in mine.items()})
    if rank == 0:
        res = dict(T=opt.T, heads=dict(zip(("Hk", "Hv", "Dk", "Dv"), heads)), world=world,
                   torch=torch.__version__, ranks=every,
                   errors={k: v["errors"] for k, v in mine.items()},
                   single_seconds={k: v["single_seconds"] for k, v in mine.items()},
                   layer_history_equal=mine["layer"]["history_equal"])
        for k in ("delta", "layer"):
            print("%s, T %d, world %d: %s" % (k, opt.T, world, ", ".join(
                "%s y %.1e state %.1e" % (n, *e) for n, e in res["errors"][k].items())))
            for r, x in enumerate(every):
                print("  rank %d: received %d bytes %s; wrote %s bytes; %.3f s (one rank %.3f s)"
                      % (r, x[k]["received_total"], x[k]["received"], x[k]["wrote"], x[k]["seconds"],
                         res["single_seconds"][k]))
        if opt.out:
            old = json.load(open(opt.out)) if os.path.exists(opt.out) else {}
            old["%s T=%d world=%d" % ("small" if opt.small else "qwen3next", opt.T, world)] = res
            with open(opt.out, "w") as f:
                json.dump(old, f, indent=1, sort_keys=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
