#!/bin/sh
# The unit-time profile (backends/cuda/unit_times.h) from the backend to the benchmarks' notes, on
# the CUDA stand-ins, so that a GPU session's bench_scale.py or bench_gpt2.py run does not find a
# broken script: the emulated backend's captured-graph test (the shipped GPT, four runs) run with
# AMP_CUDA_UNIT_TIMES=2 writes a device report; .ci/unit_times.py and .ci/device_report.py
# summarise it, and bench_scale.py's and bench_gpt2.py's unit notes read it as they read a GPU's.
#
#   tests/bench/unit_times_pipeline.sh EMULATED_TEST_BINARY WORK
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
emulated=$1
work=$2
rm -rf "$work"
mkdir -p "$work/reports"
report=$work/reports/gpt2.amp_8_bf16.jsonl
AMP_CUDA_UNIT_TIMES=2 AMP_CUDA_REPORT=$report "$emulated" \
  --gtest_filter=CudaBackendGpu.CapturedGraphReplaysGiveTheSameResults >"$work/emulated.log" 2>&1 ||
  { cat "$work/emulated.log" >&2; exit 1; }
/usr/bin/python3 "$root/.ci/unit_times.py" "$report" --top 5 --tsv "$work/units.tsv" >"$work/summary.txt"
/usr/bin/python3 "$root/.ci/device_report.py" "$work/reports" >"$work/device_report.txt"
/usr/bin/python3 - "$root" "$work" "$report" <<'PY'
import argparse, json, os, sys
root, work, report = sys.argv[1:4]
sys.path[:0] = [os.path.join(root, "tests", "bench"), os.path.join(root, ".ci")]
lines = [json.loads(l) for l in open(report)]
planned = int(next(l for l in lines if l["event"] == "plan")["units"])
timed = [l for l in lines if l["event"] == "unit_time"]
assert len(timed) == planned > 3, (len(timed), planned)
summary = open(os.path.join(work, "summary.txt")).read().splitlines()
assert summary[0].startswith("units of run 2 (launched one by one between events): %d units" % planned), summary[0]
slowest = [float(s.split()[0]) for s in summary[1:6]]
assert len(slowest) == 5 and slowest == sorted(slowest, reverse=True), summary[1:6]
assert abs(max(float(l["ms"]) for l in timed) - slowest[0]) < 6e-4
rows = open(os.path.join(work, "units.tsv")).read().splitlines()
assert len(rows) == planned + 1, len(rows)
assert "units of run 2" in open(os.path.join(work, "device_report.txt")).read()

import bench_scale, bench_gpt2
r = bench_scale.Run.__new__(bench_scale.Run)
r.reports, r.notes, r.logs, r.save = {("resnet50", 8, "amp bf16"): report}, [], work, lambda: None
r.unit_profile({"model": "resnet50", "batch": 8, "variant": "amp bf16"})
assert r.notes[0].startswith("resnet50 amp bf16 at batch 8, units of run 2"), r.notes[0][:200]
assert len(open(os.path.join(work, "units_resnet50_8_amp_bf16.tsv")).read().splitlines()) == planned + 1
g = bench_gpt2.Run.__new__(bench_gpt2.Run)
g.a, g.cuda, g.reports, g.logs, g.notes, g.save = argparse.Namespace(batches=[8], seq=1024), True, os.path.dirname(report), work, [], lambda: None
g.unit_profiles()
assert len(g.notes) == 1 and g.notes[0].startswith("amp bf16 at batch 8 x 1024, units of run 2"), g.notes
print("unit times pipeline: ok, %d units" % planned)
PY
