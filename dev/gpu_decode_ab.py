#!/usr/bin/env python3
"""Builds of the library and kernel variants (cuda_decode's by default) alternating in one process (three rounds of
bench/gpu_compare.py's CUDA-graph timing, medians), each checked bitwise (y and the state) against the first.

    python3 dev/gpu_decode_ab.py [name=path/to/libgdn.so ...] build:[kernel:]variant ... [B=1,8,64,256] [T=1,7]
                                   [layout=vk|kv]

Build "new" is this checkout's build/pic/libgdn.so; variant 0 is the routed call, else a named variant of `kernel`
(default cuda_decode: warp1 .. warp8, stream, stream_stages2 .. 4, stream_sync, stream_ws; `gdn list` and
gdn_kernel_variant_name list every kernel's, e.g. new:cuda_packed:l8p1w8_tile).
Writes $OUT/decode_ab.json (OUT defaults to /tmp).
"""
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import gpu_compare as G  # noqa: E402

gdn = G.gdn


def main():
    libs = {"new": gdn.load()}
    combos, batches, windows, layout = [], [1, 8, 64, 256], [1], gdn.STATE_VK
    for arg in sys.argv[1:]:
        if arg.startswith("B="):
            batches = [int(x) for x in arg[2:].split(",")]
        elif arg.startswith("T="):
            windows = [int(x) for x in arg[2:].split(",")]
        elif arg.startswith("layout="):
            layout = gdn.STATE_KV if arg[7:] == "kv" else gdn.STATE_VK
        elif "=" in arg:
            name, path = arg.split("=", 1)
            libs[name] = gdn.load(path)
        else:
            parts = arg.split(":")
            combos.append((parts[0], parts[1] if len(parts) == 3 else "cuda_decode", parts[-1]))
    out = []
    lname = "kv" if layout == gdn.STATE_KV else "vk"
    for T in windows:
        for B in batches:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(7)
            probe = G.make_set(B, T, gen)
            set_bytes = sum(t.numel() * t.element_size() for t in probe.values()) + B * T * G.HV * G.D * 2
            sets = [probe] + [G.make_set(B, T, gen) for _ in range(max(1, min(16, math.ceil(4 * G.L2_BYTES / set_bytes))) - 1)]
            y = torch.empty(B, T, G.HV, G.D, dtype=torch.bfloat16, device="cuda")
            st = torch.empty(B, G.HV, G.D, G.D, dtype=torch.float32, device="cuda")
            state_bytes = 2 * B * G.HV * G.D * G.D * 4
            bw = G.copy_bandwidth_tbps()

            def run(name, kernel, var, a):
                if var == "0":
                    gdn.delta(libs[name], a)
                else:
                    gdn.run_variant(libs[name], a, kernel, var)

            def fns_for(name, kernel, var):
                fns = []
                for s in sets:
                    a = G.our_args(s, B, T, layout, y, st)

                    def fn(a=a):
                        a.stream = torch.cuda.current_stream().cuda_stream
                        run(name, kernel, var, a)
                    fns.append(fn)
                return fns

            first = None
            for name, kernel, var in combos:
                y.fill_(float("nan"))
                st.fill_(float("nan"))
                run(name, kernel, var, G.our_args(probe, B, T, layout, y, st))
                torch.cuda.synchronize()
                got = (y.clone().view(torch.int16), st.clone().view(torch.int32))
                first = first or got
                print("B=%d T=%d %s %s:%s:%d == first: y %s state %s" % (B, T, lname, name, kernel, var, torch.equal(first[0], got[0]),
                                                                   torch.equal(first[1], got[1])), flush=True)
            times = {c: [] for c in combos}
            for _ in range(3):
                for c in combos:
                    times[c].append(G.time_calls(fns_for(*c))[0] * 1e6)
            for (name, kernel, var), ts in times.items():
                m = statistics.median(ts)
                print("B=%3d T=%d %s %s:%s:%-4d %s us -> median %.2f us, %.3f TB/s of state, %.1f%% of copy (%.3f TB/s)"
                      % (B, T, lname, name, kernel, var, " ".join("%.2f" % x for x in ts), m, state_bytes / m / 1e6,
                         100 * state_bytes / m / 1e6 / bw, bw), flush=True)
                out.append(dict(B=B, T=T, layout=lname, build=name, kernel=kernel, variant=var, us=ts, median_us=m, state_tbps=state_bytes / m / 1e6,
                                copy_tbps=bw))
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "decode_ab.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
