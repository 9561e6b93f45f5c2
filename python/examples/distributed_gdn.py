#!/usr/bin/env python3
"""libgdn's GDN layer over several processes through torch.distributed: tensor parallel (heads sharded) and context
parallel prefill (one prompt split over the ranks), wired as an engine would. Run it with torchrun:

    torchrun --standalone --nproc_per_node 2 python/examples/distributed_gdn.py                  # CPU, gloo
    torchrun --standalone --nproc_per_node 8 python/examples/distributed_gdn.py --device cuda \\
        --shape qwen3next --T 65536                                                               # GPUs, NCCL

Every rank builds the same layer (random weights from one seed) and the same prompt, and runs the single-rank layer
beside each mode; rank 0 prints the comparison and PASS or FAIL per mode (exit status 1 on a FAIL).
docs/DISTRIBUTED.md explains both modes.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

try:
    import libgdn
except ImportError:  # a checkout: python/libgdn with build/pic/libgdn.so (make shared)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import libgdn
from libgdn import distributed as D

SHAPES = {"tiny": (64, 2, 4, 16, 16), "qwen3next": (2048, 16, 32, 128, 128)}  # hidden, Hk, Hv, Dk, Dv
DEVICE = torch.device("cpu")  # main() sets it: this rank's device


def rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def all_ranks(ok):
    """ok on every rank (a MIN all_reduce)."""
    flag = torch.tensor([int(ok)], device=DEVICE)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def tensor_parallel(whole, prompt, steps, rank, world):
    """Every rank holds its heads of the layer and of the pools, and runs the same batch: a prefill, then decode."""
    tp = D.TensorParallelGatedDeltaNet(whole)       # column-parallel projections, out_proj row-parallel + all_reduce
    g = tp.gdn
    cache = libgdn.GatedDeltaNetCache(1, g.num_k_heads, g.num_v_heads, g.head_k_dim, g.head_v_dim, device=DEVICE)
    ref = libgdn.GatedDeltaNetCache(1, whole.num_k_heads, whole.num_v_heads, g.head_k_dim, g.head_v_dim,
                                    device=DEVICE)
    _, vs = D.head_ranges(whole.num_k_heads, whole.num_v_heads, rank, world)
    gen = torch.Generator().manual_seed(2)
    x, worst, pools = prompt, 0.0, True
    for i in range(steps + 1):
        for c in (cache, ref):
            c.set_batch(slot=[0], fresh=[1] if i == 0 else None)
        out, want = tp(x, cache), whole(x, ref)
        worst = max(worst, rel(out, want))
        pools &= torch.equal(cache.states[0], ref.states[0][:, vs.start:vs.stop])  # the rank's heads, bit for bit
        x = torch.randn(1, 1, whole.hidden_size, generator=gen).to(DEVICE)
    ok = all_ranks(pools and worst <= 1e-5)
    if rank == 0:
        print("tensor parallel, %d ranks (%d of %d value heads each): prefill %d tokens + %d decode steps; output "
              "rel %.1e after the all_reduce, the rank's state pool %s: %s"
              % (world, g.num_v_heads, whole.num_v_heads, prompt.shape[1], steps, worst,
                 "bitwise" if pools else "DIFFERENT", "PASS" if ok else "FAIL"))
    return ok


def context_parallel(whole, prompt, rank, world):
    """Each rank holds its contiguous segment of one prompt; every rank ends with the prompt's outputs and the final
    state and conv history, which an engine writes into the sequence's cache slot."""
    b = D.segment_bounds(prompt.shape[1], world)
    stats = {}
    dist.barrier()
    t0 = time.perf_counter()
    out, state, hist = D.context_parallel_forward(whole, prompt[:, b[rank]:b[rank + 1]], stats=stats)
    t_cp = time.perf_counter() - t0
    ref = libgdn.GatedDeltaNetCache(1, whole.num_k_heads, whole.num_v_heads, whole.head_k_dim, whole.head_v_dim,
                                    device=DEVICE)
    ref.set_batch(slot=[0], fresh=[1])
    t0 = time.perf_counter()
    want = whole(prompt, ref)
    t_one = time.perf_counter() - t0
    errs = (rel(out, want), rel(state, ref.states[0][0]))
    ok = all_ranks(errs[0] <= 1e-5 and errs[1] <= 1e-5 and torch.equal(hist, ref.histories[0][0]))
    if rank == 0:
        print("context parallel, %d ranks (segments %s): output rel %.1e, final state rel %.1e against one rank, "
              "history %s; %.3f s (one rank %.3f s); bytes received by rank 0: %s: %s"
              % (world, [b[i + 1] - b[i] for i in range(world)], errs[0], errs[1],
                 "bitwise" if torch.equal(hist, ref.histories[0][0]) else "DIFFERENT", t_cp, t_one, stats,
                 "PASS" if ok else "FAIL"))
    return ok


def main():
    global DEVICE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["tp", "cp", "both"], default="both")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--T", type=int, default=256, help="prompt tokens (default 256)")
    ap.add_argument("--steps", type=int, default=8, help="decode steps after the TP prefill (default 8)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    opt = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if opt.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    DEVICE = torch.device(opt.device, int(os.environ["LOCAL_RANK"])) if opt.device == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if opt.device == "cuda" else "gloo")
    torch.manual_seed(0)
    whole = libgdn.GatedDeltaNetLayer(*SHAPES[opt.shape], device=DEVICE)
    with torch.no_grad():
        whole.dt_bias.uniform_(0.5, 1.5)
        whole.norm.weight.uniform_(0.5, 1.5)
        prompt = torch.randn(1, opt.T, whole.hidden_size, generator=torch.Generator().manual_seed(1)).to(DEVICE)
        ok = True
        if opt.mode in ("tp", "both"):
            ok &= tensor_parallel(whole, prompt, opt.steps, rank, world)
        if opt.mode in ("cp", "both"):
            ok &= context_parallel(whole, prompt, rank, world)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
