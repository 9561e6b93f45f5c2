#!/usr/bin/env python3
"""The blocked CPU kernel's hot loop, statically: instruction mix and llvm-mca's port-bound cycles.

Compiles src/delta/cpu/packed_<isa>.c to assembly with the flags CMakeLists.txt gives it (GDN_C_FLAGS and the
file's ISA flags), takes blk_steps_c4 (Dk = 128: c = 4 rows per tree lane, scalar gate), finds its group loop (the
back-edge loop with the most FMAs: one group of 4 tree lanes x 4 rows = 16 key rows of a block, the binary-counter
merge inside it counted once) and the per-(token, block) code around it (every path of its branches, so an upper
bound), counts both by kind, and runs llvm-mca on each for the given CPU models. The fraction of the FMA peak is

    flops the bench counts (7 per state element: k d, g S + ., S q, S kn) / (cycles x 2 FMA pipes x lanes x 2)

per group and per block-token (8 groups + the code around them). Needs llvm-mca 16 or later for the icelake-server
and sapphirerapids models (Debian: apt-get install llvm-19). Run from the repository root:

    python3 dev/cpu_loop_mca.py [--isa avx512|avx2] [--mca llvm-mca-19] [--cpus skylake-avx512,icelake-server,...]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

GDN_C_FLAGS = ["-std=c11", "-O2", "-ffp-contract=off", "-fno-fast-math", "-pthread"]  # CMakeLists.txt (less -g, -W*)
ISA = {
    # isa: (file, flags, floats per vector, vectors per row, default llvm-mca CPUs)
    "avx512": ("src/delta/cpu/packed_avx512.c", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"], 16,
               2, "skylake-avx512,icelake-server,sapphirerapids"),
    "avx2": ("src/delta/cpu/packed_avx2.c", ["-mavx2", "-mfma"], 8, 2, "znver3,skylake"),
}
ROWS_PER_GROUP, GROUPS, DK = 16, 8, 128  # c = 4 rows x 4 lanes per group; 8 groups make the 32-lane tree of Dk = 128
FLOPS_PER_ELEMENT = 7


def function_lines(asm, name):
    lines = asm.splitlines()
    start = lines.index(name + ":")
    end = next(i for i in range(start, len(lines)) if lines[i].strip().startswith(".size\t" + name))
    return lines[start:end]


def loops(lines):
    """(label line, back-edge line) of every backward jump to a label."""
    labels = {l[:-1]: i for i, l in enumerate(lines) if re.match(r"^\.L\w+:$", l)}
    out = []
    for i, l in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.L\w+)$", l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            out.append((labels[m.group(1)], i))
    return out


def body(lines):
    """Instructions only: no labels, directives or branches."""
    keep = []
    for l in lines:
        s = l.strip()
        if not s or s.endswith(":") or s.startswith(".") or s.startswith("#") or re.match(r"^j\w+\s", s):
            continue
        keep.append("\t" + s)
    return keep


def mix(instrs):
    kinds = {"FMA": 0, "mul": 0, "add/sub": 0, "other vector ALU": 0, "broadcast load": 0, "vector load": 0,
             "vector store": 0, "vector reg-reg move": 0, "scalar/other": 0}
    mem_fp = 0
    for ins in instrs:
        op, args = (re.split(r"\s+", ins.strip(), maxsplit=1) + [""])[:2]  # inline asm: a space, not a tab
        is_mem = "(" in args
        vec = "%zmm" in args or "%ymm" in args or "%xmm" in args
        if op.startswith("vfmadd") or op.startswith("vfnmadd") or op.startswith("vfmsub"):
            kinds["FMA"] += 1
            mem_fp += is_mem
        elif op.startswith("vmulp"):
            kinds["mul"] += 1
            mem_fp += is_mem
        elif op.startswith("vaddp") or op.startswith("vsubp"):
            kinds["add/sub"] += 1
            mem_fp += is_mem
        elif op.startswith("vbroadcast"):
            kinds["broadcast load"] += 1
        elif op.startswith("vmov") and vec:
            src, _, dst = args.rpartition(",")
            if "(" in dst:
                kinds["vector store"] += 1
            elif "(" in src:
                kinds["vector load"] += 1
            elif src.strip().startswith("%") and dst.strip().startswith("%") and ("mm" in src and "mm" in dst):
                kinds["vector reg-reg move"] += 1
            else:
                kinds["scalar/other"] += 1
        elif op.startswith("v") and vec:
            kinds["other vector ALU"] += 1
        else:
            kinds["scalar/other"] += 1
    return kinds, mem_fp


def mca(tool, cpu, instrs, iters):
    with tempfile.NamedTemporaryFile("w", suffix=".s", delete=False) as f:
        f.write("\n".join(instrs) + "\n")
        path = f.name
    try:
        out = subprocess.run([tool, "-mcpu=" + cpu, "-iterations=%d" % iters, "-resource-pressure", path],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    cyc = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / iters
    rt = float(re.search(r"Block RThroughput:\s+([\d.]+)", out).group(1))
    res = re.findall(r"^\[(\d+)\]\s+-\s+(\S+)$", out, re.M)
    m = re.search(r"Resource pressure per iteration:\n(.*)\n(.*)\n", out)
    press = dict(zip([n for _, n in res], m.group(2).split())) if m else {}
    busy = {k: v for k, v in press.items() if v != "-" and float(v) >= 8.0}
    return cyc, rt, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--isa", choices=sorted(ISA), default="avx512")
    ap.add_argument("--mca", default=shutil.which("llvm-mca-19") or "llvm-mca")
    ap.add_argument("--cpus", default=None)
    ap.add_argument("--cc", default=os.environ.get("CC", "gcc"))
    ap.add_argument("--iterations", type=int, default=500)
    a = ap.parse_args()
    src, flags, vw, nv, cpus = ISA[a.isa]
    cols = vw * nv
    asm = subprocess.run([a.cc] + GDN_C_FLAGS + flags + ["-Iinclude", "-Isrc", "-S", "-o", "-", src],
                         capture_output=True, text=True, check=True).stdout
    fn = function_lines(asm, "blk_steps_c4")
    lp = loops(fn)

    def nfma(rng):
        return sum(1 for l in fn[rng[0]:rng[1]] if re.match(r"^\s+vfmadd", l))

    group = max(lp, key=lambda r: (nfma(r), -(r[1] - r[0])))
    around = min((r for r in lp if r[0] < group[0] and r[1] > group[1]), key=lambda r: r[1] - r[0])
    g_ins = body(fn[group[0]:group[1] + 1])
    o_ins = body(fn[around[0]:group[0]] + fn[group[1] + 1:around[1] + 1])
    print("%s: %s, %s; blk_steps_c4 (Dk = 128), %d columns per block" % (a.isa, src, " ".join(GDN_C_FLAGS + flags), cols))
    for name, ins, note in (("group loop", g_ins, "16 key rows x %d columns" % cols),
                            ("per (token, block) around it", o_ins, "every branch's path")):
        kinds, mem_fp = mix(ins)
        print("\n%s (%s): %d instructions" % (name, note, len(ins)))
        for k, v in kinds.items():
            if v:
                print("  %-22s %4d" % (k, v))
        print("  (FP ops with a memory operand: %d, also loads)" % mem_fp)
    flops_group = ROWS_PER_GROUP * cols * FLOPS_PER_ELEMENT
    flops_token = DK * cols * FLOPS_PER_ELEMENT
    peak = 2 * vw * 2  # flops per cycle: 2 FMA pipes x lanes x 2
    print("\nflops counted per group %d, per block-token %d; the FMA peak does %d per cycle: %.0f and %.0f cycles"
          % (flops_group, flops_token, peak, flops_group / peak, flops_token / peak))
    # the instruction stream the contract needs: per element 1 mul (k d) + 3 FMA; per token 2 trees of 31 adds
    # per vector; d = (v - g kv) beta and y = o scale per vector
    fp_need = DK * nv * 4 + 2 * 31 * nv + 3 * nv + nv
    print("contract's FP ops per block-token: %d (%d mul+FMA, %d tree adds, %d d and y) -> at least %.0f cycles on 2 "
          "pipes = %.1f%% of the peak at most" % (fp_need, DK * nv * 4, 2 * 31 * nv, 4 * nv, fp_need / 2,
                                                  100 * flops_token / peak / (fp_need / 2)))
    print("\n%-16s %12s %10s %12s %14s %9s  busiest ports per group iteration" %
          ("llvm-mca -mcpu", "group cyc", "RThru", "% peak", "token cyc", "% peak"))
    for cpu in (a.cpus or cpus).split(","):
        gc, rt, busy = mca(a.mca, cpu, g_ins, a.iterations)
        oc, _, _ = mca(a.mca, cpu, o_ins, a.iterations)
        tc = GROUPS * gc + oc
        print("%-16s %12.1f %10.1f %11.1f%% %14.0f %8.1f%%  %s" %
              (cpu, gc, rt, 100 * flops_group / peak / gc, tc, 100 * flops_token / peak / tc,
               " ".join("%s=%s" % kv for kv in busy.items())))
    print("\n(%% peak against 2 FMA pipes of %d lanes; LLVM's icelake-server and sapphirerapids models give 512-bit "
          "FMA and mul one port (p0), the client cores' layout, so they halve a 2-FMA Xeon's rate)" % vw)


if __name__ == "__main__":
    sys.exit(main())
