#!/usr/bin/env python3
"""The real model's gate against the bench's: B=1 windows of T = 1 and 7 (both layouts) with GDN_GATE_RAW +
GDN_BETA_LOGIT (Qwen3.x: A_log, dt_bias, raw gate and beta logits) and with the log-decay gate + direct beta of
bench/gpu_compare.py, routed calls, then decode B=256 (log-decay); medians of CUDA-graph replays (bench/gpu_compare.py's
timing and inputs). Other builds of the library (name=path/to/libgdn.so) alternate with this checkout's ("new") in
the same process, three rounds, so that builds are compared on one machine in one run.

    python3 dev/gpu_gate.py [name=path ...]        (writes $OUT/h200_rawgate.json; OUT defaults to /tmp)
"""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import gpu_compare as G  # noqa: E402

gdn = G.gdn


def calls(lib, sets, B, T, layout, raw, head):
    """One routed call per input set; raw: the real model's gate and beta kinds on the set's raw values."""
    y = torch.empty(B, T, G.HV, G.D, dtype=torch.bfloat16, device="cuda")
    st = torch.empty(B, G.HV, G.D, G.D, dtype=torch.float32, device="cuda")
    fns = []
    for s in sets:
        a = G.our_args(s, B, T, layout, y, st)
        if raw:
            a.gate_kind, a.gate, a.A_log, a.dt_bias = gdn.GATE_RAW, s["graw"].data_ptr(), head[0].data_ptr(), head[1].data_ptr()
            a.beta_kind, a.beta = gdn.BETA_LOGIT, s["braw"].data_ptr()

        def fn(a=a, y=y, st=st):
            a.stream = torch.cuda.current_stream().cuda_stream
            gdn.delta(lib, a)
        fns.append(fn)
    return fns


def main():
    libs = {"new": gdn.load()}
    for spec in sys.argv[1:]:
        name, path = spec.split("=", 1)
        libs[name] = gdn.load(path)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    head = (torch.log(torch.rand(G.HV, device="cuda", generator=gen) * 15 + 1).float(),   # A_log
            (torch.rand(G.HV, device="cuda", generator=gen) - 0.5).float())               # dt_bias
    cases = [(1, T, layout, raw) for T in (1, 7) for layout in ("vk", "kv") for raw in (False, True)]
    cases += [(256, 1, "vk", False)]
    out = []
    for B, T, lname, raw in cases:
        sets = [G.make_set(B, T, gen) for _ in range(16 if B == 1 else 4)]
        for s in sets:
            s["graw"] = torch.randn(B, T, G.HV, device="cuda", generator=gen).float()
            s["braw"] = torch.randn(B, T, G.HV, device="cuda", generator=gen).float()
        layout = gdn.STATE_VK if lname == "vk" else gdn.STATE_KV
        fns = {name: calls(lib, sets, B, T, layout, raw, head) for name, lib in libs.items()}
        times = {name: [] for name in libs}
        for _ in range(3):
            for name in libs:
                times[name].append(G.time_calls(fns[name])[0] * 1e6)
        gate = "raw+logit" if raw else "log_decay+direct"
        for name, ts in times.items():
            m = statistics.median(ts)
            print("B=%-3d T=%d %s %-6s %-16s %s -> %.2f us" % (B, T, lname, name, gate, " ".join("%.2f" % x for x in ts), m),
                  flush=True)
            out.append(dict(B=B, T=T, layout=lname, build=name, gate=gate, median_us=m, runs_us=ts))
    path = os.path.join(os.environ.get("OUT", "/tmp"), "h200_rawgate.json")
    with open(path, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0), results=out), f, indent=1)


if __name__ == "__main__":
    main()
