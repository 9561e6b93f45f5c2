#!/usr/bin/env python3
"""The C API through ctypes (libgdn.capi, python/libgdn/capi.py), with nothing beyond the standard library:
python3 python/test_gdn_py.py [libgdn.so]

1. LayerArgs, LayerCheckpoint and DeltaArgs against the C compiler: a C program generated from the ctypes field lists
   prints sizeof and offsetof of every field (cc, or $CC, must exist); without a compiler, against the LP64 table
   below, which is that program's output on x86-64 Linux (gcc and clang agree).
2. gdn_layer and gdn_delta through capi's raw calls on ctypes arrays: a varlen layer batch (two sequences on slots,
   a fresh one, a partial commit, a checkpoint) routed (the CPU's `staged`) and each CPU layer kernel forced against
   kernel="ref" bit for bit (y and both pools); gdn_delta routed against ref; a refused call (ValueError naming
   the field) that writes nothing. The array-level package (numpy, torch) has its tests in python/tests/.
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
from libgdn import capi  # noqa: E402

# offsetof on LP64 (x86-64 Linux, gcc 14 and clang): the generated program's output, kept for machines without cc
LP64 = {
    "gdn_layer_args": (344, {"B": 0, "Hk": 8, "Hv": 16, "Dk": 24, "Dv": 32, "cu_seqlens": 40, "dtype": 48, "qkv": 56,
                             "z": 64, "alpha": 72, "beta": 80, "y": 88, "conv_w": 96, "conv_bias": 104,
                             "dt_bias": 112, "A": 120, "A_log": 128, "gamma": 136, "eps_l2": 144, "eps_rms": 148,
                             "scale": 152, "out_gate": 156, "slots": 160, "state_layout": 168, "state": 176,
                             "hist_in": 184, "hist_out": 192, "slot": 200, "commit": 208, "fresh": 216,
                             "checkpoints": 224, "n_checkpoints": 232, "backend": 240, "stream": 248, "kernel": 256,
                             "threads": 264, "cpu_runner": 272, "planes": 280, "state_dtype": 288,
                             "head_map": 292, "reserved": 296}),
    "gdn_layer_checkpoint": (12, {"seq": 0, "after": 4, "slot": 8}),
}
STRUCTS = [("gdn_layer_args", capi.LayerArgs), ("gdn_layer_checkpoint", capi.LayerCheckpoint),
           ("gdn_delta_args", capi.DeltaArgs)]

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


# ---- a small batch: Hk = 2, Hv = 4 (two value heads a key head), Dk = 16, Dv = 8 ----
HK, HV, DK, DV = 2, 4, 16, 8
C = 2 * HK * DK + HV * DV
SLOTS, LENS = 4, [5, 3]
T = sum(LENS)


def floats(rng, n, lo=-1.0, hi=1.0):
    return (ctypes.c_float * n)(*[rng.uniform(lo, hi) for _ in range(n)])


def ints(ctype, values):
    return (ctype * len(values))(*values)


def addr(x):
    return ctypes.addressof(x)


def layer_run(lib, x, pools, kernel=None, commit=(5, 2)):
    """gdn_layer over fresh copies of the pools: (y, state, hist) as bytes; raises as capi.check does."""
    p = {n: (v._type_ * len(v)).from_buffer_copy(v) for n, v in pools.items()}
    y = (ctypes.c_float * (T * HV * DV))()
    keep = dict(cu=ints(ctypes.c_int32, [0, LENS[0], T]), slot=ints(ctypes.c_int32, [2, 0]),
                commit=ints(ctypes.c_int32, list(commit)), fresh=ints(ctypes.c_uint8, [1, 0]),
                cp=(capi.LayerCheckpoint * 1)(capi.LayerCheckpoint(0, 3, 1)))
    a = capi.layer_args(B=2, Hk=HK, Hv=HV, Dk=DK, Dv=DV, cu_seqlens=addr(keep["cu"]), dtype=capi.F32,
                        qkv=addr(x["qkv"]), z=addr(x["z"]), alpha=addr(x["alpha"]), beta=addr(x["beta"]), y=addr(y),
                        conv_w=addr(x["conv_w"]), dt_bias=addr(x["dt_bias"]), A_log=addr(x["A_log"]),
                        gamma=addr(x["gamma"]), slots=SLOTS, state_layout=capi.STATE_KV, state=addr(p["state"]),
                        hist_in=addr(p["hist"]), hist_out=addr(p["hist"]), slot=addr(keep["slot"]),
                        commit=addr(keep["commit"]), fresh=addr(keep["fresh"]), checkpoints=addr(keep["cp"]),
                        n_checkpoints=1, kernel=kernel)
    route = capi.layer_route(lib, a)
    capi.layer_call(lib, a)
    return route, (bytes(y), bytes(p["state"]), bytes(p["hist"]))


def test_layer(lib):
    rng = random.Random(1)
    x = dict(qkv=floats(rng, T * C), z=floats(rng, T * HV * DV), alpha=floats(rng, T * HV, -2, 2),
             beta=floats(rng, T * HV, -2, 2), conv_w=floats(rng, C * 4, -0.5, 0.5), dt_bias=floats(rng, HV, 0.5, 1.5),
             A_log=floats(rng, HV, -1, 2), gamma=floats(rng, DV, 0.5, 1.5))
    pools = dict(state=floats(rng, SLOTS * HV * DK * DV, -0.3, 0.3), hist=floats(rng, SLOTS * C * 3))
    kernels = capi.layer_kernels(lib)
    expect(kernels[-1] == "ref" and "staged" in kernels, "layer kernels %s: staged and ref among them" % kernels)
    _, ref = layer_run(lib, x, pools, "ref")
    expect(ref[1] != bytes(pools["state"]) and ref[2] != bytes(pools["hist"]), "the call wrote both pools")
    for kernel in [None] + [k for k in kernels if not k.startswith("cuda")]:
        route, got = layer_run(lib, x, pools, kernel)
        expect(kernel is not None or route == "staged", "the CPU router picks staged, not %s" % route)
        for name, g, r in zip(("y", "state", "hist"), got, ref):
            expect(g == r, "kernel %s: %s bitwise equal to ref's" % (kernel or "routed", name))
    try:
        layer_run(lib, x, pools, commit=(6, 2))
        expect(False, "commit 6 of 5 tokens: refused")
    except ValueError as e:
        expect("commit[0]" in str(e), "the refusal names commit[0]: %s" % e)
    # gdn_delta on the dense form, routed against ref
    n = 2 * 7 * HV
    d = dict(q=floats(rng, 2 * 7 * HK * DK), k=floats(rng, 2 * 7 * HK * DK), v=floats(rng, n * DV),
             gate=floats(rng, n, 0.5, 1), beta=floats(rng, n, 0, 1))
    outs = {}
    for kernel in (None, "ref"):
        y, s = (ctypes.c_float * (n * DV))(), (ctypes.c_float * (2 * HV * DK * DV))()
        a = capi.args(B=2, T=7, Hk=HK, Hv=HV, Dk=DK, Dv=DV, q=addr(d["q"]), k=addr(d["k"]), v=addr(d["v"]), y=addr(y),
                      gate=addr(d["gate"]), beta=addr(d["beta"]), state_out=addr(s), scale=0.25, kernel=kernel)
        capi.delta(lib, a)
        outs[kernel] = (bytes(y), bytes(s), capi.route(lib, a))
    expect(outs[None][:2] == outs["ref"][:2], "gdn_delta routed (%s): ref's bits" % outs[None][2])


def main():
    lib = capi.load(sys.argv[1] if len(sys.argv) > 1 else None)
    test_layout()
    test_layer(lib)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
