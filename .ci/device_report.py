#!/usr/bin/env python3
"""The device capability report of a GPU run, for gpu_run.sh's summary: what this device's cuBLASLt
and cuDNN accepted and what fell back, and why, per model step.

Reads DIR/*.jsonl, one file per model step, each the device report (AMP_CUDA_REPORT,
backends/cuda/device_report.h) of one command run with --device cuda. Prints, per step: the
products by the epilogue they wanted and the one they ran with, with what ran after them and why
cuBLASLt's better ones were not taken; heuristic results cuBLASLt refused when run; per
convolution shape and direction the algorithm that ran (cuDNN's measured fastest, or the
heuristic's first where nothing was measured), a 16-bit weight gradient's fp32-or-16-bit decision,
the ones cuDNN refused when run and the ones skipped before; fused convolutions accepted or
refused; the cuDNN graphs of convolutions with a BatchNorm's work built fused or not, and why; the attention units
(cuDNN's fused flash attention with its engine, or the fallback kernels and why); the time cuDNN's measurements, its graph builds and the generated kernels' compilations took, and the plan's preparation with its slowest units; and once for the run, the ReLU-mask probe's answer per
type; and where the run was timed unit by unit (AMP_CUDA_UNIT_TIMES, unit_times.py), its slowest
units and its time by kind. Identical lines are counted, not repeated.

Usage: device_report.py DIR
"""
import collections
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unit_times  # noqa: E402  (beside this file)


def load(path):
    lines = []
    with open(path) as f:
        for n, text in enumerate(f, 1):
            text = text.strip()
            if not text:
                continue
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError as e:
                lines.append({"event": "unreadable", "why": f"line {n}: {e}"})
    return lines


def counted(items):
    """'text' or 'text (x N)' per distinct item, in first-seen order."""
    counts = collections.Counter(items)
    return [t if counts[t] == 1 else f"{t} (x {counts[t]})" for t in dict.fromkeys(items)]


def step_report(lines):
    out = []
    products = [l for l in lines if l.get("event") == "product"]
    as_wanted = [l for l in products if l.get("wanted") == l.get("chosen")]
    fell_back = [l for l in products if l.get("wanted") != l.get("chosen")]
    if products:
        wanted = counted([l.get("wanted", "?") for l in as_wanted])
        out.append(f"products: {len(products)}, {len(as_wanted)} with the epilogue they wanted"
                   + (f" ({', '.join(wanted)})" if wanted else ""))
        for t in counted([f"{l.get('wanted')} -> {l.get('chosen')} + {l.get('after')} [{l.get('unit')}]: "
                          f"{l.get('refused') or 'no reason recorded'}" for l in fell_back]):
            out.append(f"  fell back: {t}")
    by_status = collections.defaultdict(list)
    for l in lines:
        if l.get("event") == "gemm_algorithm_refused":
            by_status[f"heuristic result {l.get('algorithm')}: {l.get('status')}"].append(l.get("product"))
    for status, which in by_status.items():
        out.append(f"cuBLASLt refused when run, {status}: {len(which)} products, then the next result"
                   f" (first: {which[0]})")
    refused = collections.defaultdict(list)
    for l in lines:
        if l.get("event") == "convolution_algorithm_refused":
            refused[(l.get("direction"), l.get("shape"))].append(l)
    # The heuristic's first (convolution_algorithms) unless cuDNN's measurement ordered them
    # (convolution_algorithms_measured, after it), then the measured fastest.
    measured = {(l.get("direction"), l.get("shape")): l for l in lines if l.get("event") == "convolution_algorithms_measured"}
    widened = {l.get("shape"): l for l in lines if l.get("event") == "convolution_widened"}
    shown = set()
    for l in lines:
        if l.get("event") != "convolution_algorithms":
            continue
        key = (l.get("direction"), l.get("shape"))
        if key in shown:
            continue
        shown.add(key)
        r = refused.get(key, [])
        m = measured.get(key)
        ran = r[-1].get("next") if r else (m or l).get("chosen")
        line = f"{l.get('direction')} {l.get('shape')}: {ran}"
        line += f" (measured fastest: {m.get('measured')})" if m else " (the heuristic's first)"
        w = widened.get(l.get("shape")) if l.get("direction") == "backward-filter convolution" else None
        if w:
            line += f"; dW computed in {w.get('chosen')}" + (
                f" (16-bit {w.get('16-bit ms')} ms, fp32 {w.get('fp32 ms')} ms + casts {w.get('casts ms')} ms)"
                if w.get("16-bit ms") else f" ({w.get('why')})")
        if r:
            line += " after cuDNN refused " + ", ".join(counted([f"{x.get('algorithm')} ({x.get('status')})" for x in r]))
        if l.get("skipped"):
            line += f"; skipped before: {l.get('skipped')}"
        out.append(f"convolution: {line}")
    for t in counted([f"{l.get('result')}{' ' + l['status'] if l.get('status') else ''} with {l.get('algorithm')}: "
                      f"{l.get('shape')} [{l.get('unit')}]" for l in lines if l.get("event") == "fused_convolution"]):
        out.append(f"fused convolution {t}")
    for t in counted([f"{l.get('result')} {l.get('graph')} {l.get('shape')}"
                      + (f" by {l.get('engine')}" if l.get("engine") else "")
                      + (f": {l.get('why')}" if l.get("why") else "")
                      for l in lines if l.get("event") == "convolution_graph"]):
        out.append(f"cuDNN convolution graph {t}")
    for t in counted([f"{l.get('direction')}: {l.get('ran')}" + (f", {l.get('engine')}" if l.get("engine") else "")
                      + (f" ({l.get('why')})" if l.get("why") else "") for l in lines if l.get("event") == "attention"]):
        out.append(f"attention {t}")
    for source in ("NVRTC", "disk cache"):
        ms = [float(l["ms"]) for l in lines if l.get("event") == "kernel_image" and l.get("from") == source]
        if ms:
            out.append(f"generated kernels from {source}: {len(ms)}, {sum(ms) / 1e3:.2f} s in all, "
                       f"the slowest {max(ms):.0f} ms")
    builds = [float(l["build ms"]) for l in lines if l.get("event") == "convolution_graph" and "build ms" in l]
    if builds:
        out.append(f"cuDNN convolution graph builds: {len(builds)}, {sum(builds) / 1e3:.2f} s in all, "
                   f"the slowest {max(builds):.0f} ms")
    for l in lines:
        if l.get("event") == "plan":
            out.append(f"plan: {l.get('units')} units prepared in {float(l.get('prepare ms', 0)) / 1e3:.2f} s; "
                       f"the slowest: {l.get('slowest')}")
    finds = [float(l["find ms"]) for l in lines if "find ms" in l]
    if finds:
        out.append(f"cuDNN algorithm measurement: {len(finds)} convolutions, {sum(finds) / 1e3:.2f} s in all, "
                   f"the slowest {max(finds):.0f} ms")
    ranks = [float(l["rank ms"]) for l in lines if "rank ms" in l]
    if ranks:
        out.append(f"cuDNN algorithm ranking (heuristic and workspace queries): {len(ranks)} convolutions, "
                   f"{sum(ranks) / 1e3:.2f} s in all, the slowest {max(ranks):.0f} ms")
    for totals, units in unit_times.runs_of(lines):
        out.extend(unit_times.summary(totals, units, top=8))
    for l in lines:
        if l.get("event") == "unreadable":
            out.append(f"UNREADABLE {l['why']}")
    return out or ["nothing recorded (no product or convolution ran on the device)"]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl")))
    if not files:
        print("no device report was written")
        return
    probes = {}
    for path in files:
        lines = load(path)
        for l in lines:
            if l.get("event") == "relu_mask_probe":
                probes.setdefault(l.get("dtype"), l.get("found"))
        print(f"{os.path.basename(path)[:-len('.jsonl')]}:")
        for line in step_report(lines):
            print(f"  {line}")
    for dtype, found in sorted(probes.items()):
        print(f"ReLU-mask probe, {dtype}: {found}")
    if not probes:
        print("ReLU-mask probe: not run (no ReLU layer's product on the device)")


if __name__ == "__main__":
    main()
