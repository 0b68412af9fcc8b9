#!/usr/bin/env python3
"""Where a step's device time went, unit by unit: the "unit_time" and "unit_times" lines an
amp-train run with AMP_CUDA_UNIT_TIMES=K and AMP_CUDA_REPORT=FILE wrote (backends/cuda/unit_times.h:
the K-th run of each plan, launched unit by unit between CUDA events; each line the unit's first
node, kind, milliseconds, the bytes its operands hold and the bandwidth that makes).

  python3 .ci/unit_times.py REPORT.jsonl [--top N] [--tsv FILE]

prints the run's totals, the units by time with their share, GB/s and node, and the same summed by
kind (a generated kernel's kind is "fused Add+Relu", a product's "MatMul+Add", ...); --tsv writes
every unit. bench_scale.py, bench_gpt2.py and device_report.py call summary() on their reports.
Several timed runs in one report (several plans, e.g. a training and an evaluation step) are told
apart by their totals line: each is summarised on its own.
"""
import argparse
import collections
import json
import sys


def runs_of(lines):
    """[(totals, units)] per timed run among the report's parsed lines, in order: totals is the
    "unit_times" line, units its "unit_time" lines, each with float "ms" and int "bytes"."""
    out, pending = [], []
    for line in lines:
        if line.get("event") == "unit_time":
            pending.append(dict(line, ms=float(line.get("ms", 0)), bytes=int(line.get("bytes", 0))))
        elif line.get("event") == "unit_times":
            out.append((line, pending))
            pending = []
    return out


def runs(path):
    """runs_of the report file at path (a line that does not parse is skipped)."""
    lines = []
    with open(path) as f:
        for text in f:
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
    return runs_of(lines)


def short_kind(kind):
    """A kind as the by-kind sums name it: itself, cut at 60 characters (a multi-tensor kernel's
    kind lists every program it runs)."""
    return kind if len(kind) <= 60 else kind[:57] + "..."


def summary(totals, units, top=15):
    """Text lines: the run's totals, the `top` slowest units, then time by kind."""
    step = float(totals.get("step ms", 0))
    summed = sum(u["ms"] for u in units)
    moved = sum(u["bytes"] for u in units)
    lines = ["units of run %s (launched one by one between events): %d units, %.2f ms of units, %.2f ms step, "
             "%.1f GB moved (%.0f GB/s over the units)" % (totals.get("run"), len(units), summed, step, moved / 1e9,
                                                           moved / (summed * 1e6) if summed > 0 else 0.0)]
    for u in sorted(units, key=lambda u: -u["ms"])[:top]:
        lines.append("  %8.3f ms %5.1f%% %8s GB/s %8.1f MB  %s [%s]%s" % (
            u["ms"], 100 * u["ms"] / max(summed, 1e-9), u.get("GB/s", "-"), u["bytes"] / 1e6, u.get("kind", ""),
            u.get("unit", ""), " (beside)" if u.get("beside") else ""))
    by_kind = collections.defaultdict(lambda: [0.0, 0, 0])
    for u in units:
        k = by_kind[short_kind(u.get("kind", ""))]
        k[0] += u["ms"]
        k[1] += 1
        k[2] += u["bytes"]
    lines.append("  by kind:")
    for kind, (ms, n, b) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append("  %8.3f ms %5.1f%% %5dx %8.0f GB/s  %s" % (ms, 100 * ms / max(summed, 1e-9), n,
                                                               b / (ms * 1e6) if ms > 0 else 0.0, kind))
    return lines


def write_tsv(units, path):
    with open(path, "w") as f:
        f.write("position\tms\tbytes\tGB/s\tkind\tunit\tbeside\n")
        for u in units:
            f.write("%s\t%.4f\t%d\t%s\t%s\t%s\t%s\n" % (u.get("position"), u["ms"], u["bytes"], u.get("GB/s", "-"),
                                                        u.get("kind", ""), u.get("unit", ""), u.get("beside", "")))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("report")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--tsv")
    a = p.parse_args()
    found = runs(a.report)
    if not found:
        sys.exit("unit_times: %s has no unit_times line (run with AMP_CUDA_UNIT_TIMES=K and AMP_CUDA_REPORT)" % a.report)
    for totals, units in found:
        print("\n".join(summary(totals, units, a.top)))
    if a.tsv:
        write_tsv(found[-1][1], a.tsv)


if __name__ == "__main__":
    main()
