#!/usr/bin/env python3
"""Checks that every hand-written kernel (backends/cuda/*.cu), as compiled for each architecture
the build targets, fits the blocks it may be launched with: a launch whose threads need more
registers than an SM has fails with cudaErrorLaunchOutOfResources, on a GPU only.

Reads, per source and architecture, the PTX (`.entry NAME` ... `.maxntid X, Y, Z`: the kernel's
__launch_bounds__) and ptxas's report of it (`ptxas -v`: "Used N registers"), made at build time
(tests/CMakeLists.txt), no GPU needed. A kernel with bounds may be launched with that many threads,
one without them with up to 1024 (CUDA's most per block): its registers, allocated per warp in
units of 256, times its warps must fit the 65536 registers of an SM of sm_80 and sm_90 (64 a
thread at 1024 threads). Prints one line per kernel; exits 1 naming each kernel that does not fit,
or when there is nothing to check.

Usage: kernel_resources.py DIR   (DIR holds NAME.smXX.ptx and NAME.smXX.ptxas.txt pairs)
"""
import glob
import os
import re
import sys

REGISTERS_PER_SM = 65536
ALLOCATION_UNIT = 256  # registers, per warp
MAX_BLOCK = 1024


def bounds_of(ptx_text):
    """Per entry: the product of its .maxntid, or None without one."""
    bounds = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\)\s*(.*?)\{", ptx_text, re.S):
        nt = re.search(r"\.maxntid\s+(\d+)\s*(?:,\s*(\d+))?\s*(?:,\s*(\d+))?", m.group(3))
        bounds[m.group(1)] = None if not nt else int(nt.group(1)) * int(nt.group(2) or 1) * int(nt.group(3) or 1)
    return bounds


def usage_of(log_text):
    """Per entry: (registers, spill stores + loads in bytes), from ptxas -v."""
    usage, current, spills = {}, None, 0
    for line in log_text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current, spills = m.group(1), 0
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            spills = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            usage[current] = (int(m.group(1)), spills)
            current = None
    return usage


def registers_needed(registers, threads):
    per_warp = -(-registers * 32 // ALLOCATION_UNIT) * ALLOCATION_UNIT
    return per_warp * -(-threads // 32)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad, checked = [], 0
    for ptx in sorted(glob.glob(os.path.join(sys.argv[1], "*.ptx"))):
        log = ptx[: -len(".ptx")] + ".ptxas.txt"
        source = os.path.basename(ptx)[: -len(".ptx")]
        bounds = bounds_of(open(ptx).read())
        usage = usage_of(open(log).read())
        if set(bounds) != set(usage):
            bad.append(f"{source}: the PTX's kernels and ptxas's report differ")
            continue
        for entry, (registers, spills) in sorted(usage.items()):
            threads = bounds[entry] or MAX_BLOCK
            needed = registers_needed(registers, threads)
            checked += 1
            verdict = "ok" if needed <= REGISTERS_PER_SM else "DOES NOT FIT"
            print(f"{source}: {entry}: {registers} registers x {threads} threads"
                  f"{' (__launch_bounds__)' if bounds[entry] else ' (no bounds: up to 1024)'}"
                  f" -> {needed} of {REGISTERS_PER_SM}, {spills} bytes spilled: {verdict}")
            if needed > REGISTERS_PER_SM:
                bad.append(f"{source}: {entry} needs {needed} registers for {threads} threads"
                           + ("" if bounds[entry] else ": give it __launch_bounds__ of the block it is launched with"))
    if checked == 0:
        bad.append(f"no kernel found in {sys.argv[1]}")
    for b in bad:
        print("FAIL", b)
    print(f"{checked} kernels checked, {len(bad)} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
