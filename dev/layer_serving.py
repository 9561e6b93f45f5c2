#!/usr/bin/env python3
"""gdn_layer (routed) on serving batches, decode steps and verify windows beside a prompt, at the Qwen3.6 heads (Hk 16,
Hv 32, D 128, bf16 activations, f32 state): the medians of back-to-back calls timed by CUDA events, and a checksum of
y and the pools, for an A/B of two builds in alternating processes (the package loads $GDN_LIBRARY).

    GDN_LIBRARY=old/libgdn.so python3 dev/layer_serving.py; GDN_LIBRARY=new/libgdn.so python3 dev/layer_serving.py
    (--cpu: a small run on the CPU, to try the script)
"""
import hashlib
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import libgdn  # noqa: E402

HK, HV, D = 16, 32, 128
BATCHES = {"127 decodes + a 2048-token prompt": [1] * 127 + [2048],
           "63 decodes + 32 verify windows of 4 + a 512-token prompt": [1] * 63 + [4] * 32 + [512]}


def case(lengths, dev):
    gen = torch.Generator(device="cpu").manual_seed(5)
    T, B, C = sum(lengths), len(lengths), 2 * HK * D + HV * D
    r = lambda *s: torch.randn(*s, generator=gen)
    x = dict(qkv=r(T, C).bfloat16(), z=r(T, HV, D).bfloat16(), alpha=r(T, HV).bfloat16(), beta=r(T, HV).bfloat16(),
             conv_w=0.25 * r(C, 4), dt_bias=torch.rand(HV, generator=gen), gamma=1 + 0.1 * r(D),
             A_log=torch.log(1 + 15 * torch.rand(HV, generator=gen)), state=0.1 * r(B, HV, D, D),
             hist_in=r(B, C, 3).bfloat16())
    x = {n: v.to(dev) for n, v in x.items()}
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    return x, cu


def main():
    cpu = "--cpu" in sys.argv
    dev = "cpu" if cpu else "cuda"
    for name, lengths in BATCHES.items():
        if cpu:
            lengths = [1] * 5 + [3] * 2 + [40]
        x, cu = case(lengths, dev)
        state0, hist0 = x["state"].clone(), x["hist_in"].clone()

        def call():
            return libgdn.layer(x["qkv"], x["z"], x["alpha"], x["beta"], x["conv_w"], x["dt_bias"], x["gamma"],
                                x["state"], x["hist_in"], A_log=x["A_log"], cu_seqlens=cu)
        y = call()
        digest = hashlib.sha256()
        for t in (y, x["state"], x["hist_in"]):
            digest.update(t.contiguous().view(torch.uint8).cpu().numpy().tobytes())
        times = []
        for _ in range(0 if cpu else 11):
            x["state"].copy_(state0), x["hist_in"].copy_(hist0)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 100.0)  # us a call
        us = statistics.median(times) if times else float("nan")
        print("%-58s %8.1f us  sha256 %s" % (name, us, digest.hexdigest()[:16]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
