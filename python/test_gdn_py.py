#!/usr/bin/env python3
"""The layer binding of python/gdn.py, without torch or transformers: python3 python/test_gdn_py.py [libgdn.so]

1. LayerArgs, LayerCheckpoint and DeltaArgs against the C compiler: a C program generated from the ctypes field lists
   prints sizeof and offsetof of every field (cc, or $CC, must exist); without a compiler, against the LP64 table
   below, which is that program's output on x86-64 Linux (gcc and clang agree).
2. gdn_layer through layer() on ctypes arrays (and on numpy arrays where numpy imports): a varlen batch of two
   sequences with slots, a fresh one, a partial commit and a checkpoint, routed (the CPU's `staged`) and each CPU
   layer kernel forced, against kernel="ref" bit for bit (y, the state pool, the history pool); GDN_STATE_VK against
   GDN_STATE_KV (the same y bits, the transposed state); the errors (a RuntimeError with gdn_last_error()).
Exits 0 and prints 'N passed, 0 failed' when all hold.
"""
import ctypes
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gdn  # noqa: E402

# offsetof on LP64 (x86-64 Linux, gcc 14 and clang): the generated program's output, kept for machines without cc
LP64 = {
    "gdn_layer_args": (344, {"B": 0, "Hk": 8, "Hv": 16, "Dk": 24, "Dv": 32, "cu_seqlens": 40, "dtype": 48, "qkv": 56,
                             "z": 64, "alpha": 72, "beta": 80, "y": 88, "conv_w": 96, "conv_bias": 104,
                             "dt_bias": 112, "A": 120, "A_log": 128, "gamma": 136, "eps_l2": 144, "eps_rms": 148,
                             "scale": 152, "out_gate": 156, "slots": 160, "state_layout": 168, "state": 176,
                             "hist_in": 184, "hist_out": 192, "slot": 200, "commit": 208, "fresh": 216,
                             "checkpoints": 224, "n_checkpoints": 232, "backend": 240, "stream": 248, "kernel": 256,
                             "threads": 264, "cpu_runner": 272, "planes": 280, "reserved": 288}),
    "gdn_layer_checkpoint": (12, {"seq": 0, "after": 4, "slot": 8}),
}
STRUCTS = [("gdn_layer_args", gdn.LayerArgs), ("gdn_layer_checkpoint", gdn.LayerCheckpoint),
           ("gdn_delta_args", gdn.DeltaArgs)]

passed, failed = 0, 0


def expect(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def c_layout():
    """{struct: (sizeof, {field: offsetof})} from a C program compiled now, or None without a compiler."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "gdn.h"', "int main(void) {"]
    for cname, struct in STRUCTS:
        lines.append('    printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for field in struct._fields_:
            lines.append('    printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, field[0], cname, field[0]))
    lines += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([cc, "-std=c11", "-I", os.path.join(HERE, "..", "include"), src, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in out.splitlines():
        cname, field, value = line.split()
        size, offsets = layout.setdefault(cname, [None, {}])
        if field == "sizeof":
            layout[cname][0] = int(value)
        else:
            offsets[field] = int(value)
    return {k: (v[0], v[1]) for k, v in layout.items()}


def test_layout():
    layout = c_layout()
    if layout is None:
        print("no C compiler: LayerArgs against the hard-coded LP64 offsets")
        layout = LP64
    for cname, struct in STRUCTS:
        if cname not in layout:
            continue
        size, offsets = layout[cname]
        expect(ctypes.sizeof(struct) == size, "sizeof %s: ctypes %d, C %d" % (cname, ctypes.sizeof(struct), size))
        expect([f[0] for f in struct._fields_] == list(offsets), "%s: the same fields in the same order" % cname)
        for field, off in offsets.items():
            got = getattr(struct, field).offset
            expect(got == off, "offsetof(%s, %s): ctypes %d, C %d" % (cname, field, got, off))
    if ctypes.sizeof(ctypes.c_void_p) == 8:  # the table is LP64's
        for cname, (size, offsets) in LP64.items():
            expect(layout[cname] == (size, offsets), "%s: the C compiler agrees with the LP64 table" % cname)


# ---- a small batch: Hk = 2, Hv = 4 (two value heads a key head), Dk = 16, Dv = 8 (non-square: layouts differ) ----
HK, HV, DK, DV = 2, 4, 16, 8
C = 2 * HK * DK + HV * DV
SLOTS = 4
LENS = [5, 3]
T = sum(LENS)


def floats(rng, n, lo=-1.0, hi=1.0):
    return (ctypes.c_float * n)(*[rng.uniform(lo, hi) for _ in range(n)])


def copy(arr):
    out = (arr._type_ * len(arr))()
    ctypes.memmove(out, arr, ctypes.sizeof(arr))
    return out


def make_inputs(seed=1):
    rng = random.Random(seed)
    x = dict(qkv=floats(rng, T * C), z=floats(rng, T * HV * DV), alpha=floats(rng, T * HV, -2, 2),
             beta=floats(rng, T * HV, -2, 2), conv_w=floats(rng, C * 4, -0.5, 0.5), conv_bias=floats(rng, C, -0.1, 0.1),
             dt_bias=floats(rng, HV, 0.5, 1.5), A_log=floats(rng, HV, -1, 2), gamma=floats(rng, DV, 0.5, 1.5))
    pools = dict(state=floats(rng, SLOTS * HV * DK * DV, -0.3, 0.3), hist_in=floats(rng, SLOTS * C * 3))
    return x, pools


CALL = dict(Hk=HK, Hv=HV, Dk=DK, Dv=DV, cu_seqlens=[0, LENS[0], T], slot=[2, 0], commit=[5, 2], fresh=[1, 0],
            checkpoints=[(0, 3, 1)], state_layout=gdn.STATE_KV)


def run(lib, x, pools, kernel=None, **over):
    p = {k: copy(v) for k, v in pools.items()}
    kw = dict(CALL, **over)
    y = gdn.layer(lib, x["qkv"], x["z"], x["alpha"], x["beta"], x["conv_w"], x["dt_bias"], x["gamma"], p["state"],
                  p["hist_in"], A_log=x["A_log"], conv_bias=x["conv_bias"], kernel=kernel, **kw)
    return bytes(y), bytes(p["state"]), bytes(p["hist_in"])


def test_layer(lib):
    x, pools = make_inputs()
    kernels = gdn.layer_kernels(lib)
    expect(kernels[-1] == "ref" and "staged" in kernels, "layer kernels %s: staged and ref among them" % kernels)
    a, keep, _ = gdn.layer_struct(lib, x["qkv"], x["z"], x["alpha"], x["beta"], x["conv_w"], x["dt_bias"],
                                  x["gamma"], copy(pools["state"]), copy(pools["hist_in"]), A_log=x["A_log"], **CALL)
    expect(gdn.layer_route(lib, a) == "staged", "the CPU router picks staged")
    del keep
    ref = run(lib, x, pools, "ref")
    expect(ref[1] != bytes(pools["state"]) and ref[2] != bytes(pools["hist_in"]), "the call wrote both pools")
    for kernel in [None] + [k for k in kernels if not k.startswith("cuda")]:
        got = run(lib, x, pools, kernel)
        for name, g, r in zip(("y", "state", "hist"), got, ref):
            expect(g == r, "kernel %s: %s bitwise equal to ref's" % (kernel or "routed", name))
    # one thread against the pool's: the same bits
    expect(run(lib, x, pools, threads=1) == ref, "threads=1: ref's bits")
    # GDN_STATE_VK: the same y, the state transposed per head ([Dk, Dv] <-> [Dv, Dk])
    def transpose(state, rows, cols):
        out = (ctypes.c_float * len(state))()
        for m in range(len(state) // (rows * cols)):
            for i in range(rows):
                for j in range(cols):
                    out[m * rows * cols + j * rows + i] = state[m * rows * cols + i * cols + j]
        return out
    vk_pools = dict(pools, state=transpose(pools["state"], DK, DV))
    y, state, hist = run(lib, x, vk_pools, "ref", state_layout=gdn.STATE_VK)
    back = bytes(transpose((ctypes.c_float * len(pools["state"])).from_buffer_copy(state), DV, DK))
    expect((y, back, hist) == ref, "GDN_STATE_VK: y and history the same bits, the state transposed")
    # a checkpoint slot holds what a 3-token call leaves: sequence 0 alone over its first 3 tokens
    x3 = dict(x)
    for name, width in (("qkv", C), ("z", HV * DV), ("alpha", HV), ("beta", HV)):
        x3[name] = (ctypes.c_float * (3 * width)).from_buffer_copy(bytes(x[name])[:3 * width * 4])
    _, state3, hist3 = run(lib, x3, pools, "ref", cu_seqlens=[0, 3], slot=[1], commit=None, fresh=[1],
                           checkpoints=())
    n_s, n_h = HV * DK * DV * 4, C * 3 * 4
    expect(state3[n_s:2 * n_s] == ref[1][n_s:2 * n_s] and hist3[n_h:2 * n_h] == ref[2][n_h:2 * n_h],
           "checkpoint (0, 3, 1): slot 1 holds a 3-token call's state and history")
    # numpy arrays where numpy imports: the same bits as ctypes arrays
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        xn = {k: np.frombuffer(bytes(v), dtype=np.float32).copy() for k, v in x.items()}
        pn = {k: np.frombuffer(bytes(v), dtype=np.float32).copy().reshape(SLOTS, -1) for k, v in pools.items()}
        y = gdn.layer(lib, xn["qkv"].reshape(T, C), xn["z"].reshape(T, HV, DV), xn["alpha"], xn["beta"],
                      xn["conv_w"], xn["dt_bias"], xn["gamma"], pn["state"], pn["hist_in"], A_log=xn["A_log"],
                      conv_bias=xn["conv_bias"], kernel="ref", **CALL)
        expect((y.tobytes(), pn["state"].tobytes(), pn["hist_in"].tobytes()) == ref, "numpy arrays: ref's bits")
    # errors: gdn_layer's, with gdn_last_error(), and the helper's own checks
    def raises(exc, fn, needle):
        try:
            fn()
        except exc as e:
            expect(needle in str(e), "%s names %r: %s" % (exc.__name__, needle, e))
            return
        expect(False, "expected %s (%s)" % (exc.__name__, needle))
    p = {k: copy(v) for k, v in pools.items()}
    call = lambda **kw: gdn.layer(lib, x["qkv"], x["z"], x["alpha"], x["beta"], x["conv_w"], x["dt_bias"],
                                  x["gamma"], p["state"], p["hist_in"], **dict(CALL, **kw))
    raises(RuntimeError, lambda: call(), "A_log")  # neither A nor A_log
    raises(RuntimeError, lambda: call(A_log=x["A_log"], A=x["A_log"]), "args->A")  # both
    raises(RuntimeError, lambda: call(A_log=x["A_log"], commit=[6, 2]), "commit[0]")
    raises(RuntimeError, lambda: call(A_log=x["A_log"], kernel="nope"), "nope")
    raises(ValueError, lambda: call(A_log=x["A_log"], slot=[0]), "slot")
    raises(ValueError, lambda: call(A_log=x["A_log"], cu_seqlens=[0, 5, 9]), "qkv")
    expect(bytes(p["state"]) == bytes(pools["state"]) and bytes(p["hist_in"]) == bytes(pools["hist_in"]),
           "failed calls wrote nothing")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else None
    lib = gdn.load(path)
    test_layout()
    test_layer(lib)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
