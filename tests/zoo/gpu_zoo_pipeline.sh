#!/bin/sh
# tests/zoo/gpu_zoo.py's three phases end to end on the CPU (run --device cpu), as the GPU session
# runs them, so that a device's one-shot run does not find a broken pipeline: prepare (a model
# whose parameters travel in the shared weights file, tiny_gpt, and one whose parameters are drawn
# from a seed, tiny_transformer, by a threshold lowered to 0.2 MiB), run on a copy of the prepared
# folder (as gpu_run.sh does; it draws the weights again and checks their SHA-256), then check:
# the one-step update against torch float64 on the run's own decisions, losses against the CPU
# backend's, memory. Exits non-zero when a phase fails or a judged check does.
#
#   tests/zoo/gpu_zoo_pipeline.sh BUILD WORK
set -eu
here=$(dirname "$0")
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$here/gpu_zoo.py" prepare --build "$build" --work "$work/ref" --out "$work/zoo" --draw-above-mib 0.2 \
  tiny_gpt tiny_transformer
grep -q '"drawn"' "$work/zoo/tiny_transformer/meta.json" || { echo "tiny_transformer was not drawn" >&2; exit 1; }
if grep -q '"drawn"' "$work/zoo/tiny_gpt/meta.json"; then echo "tiny_gpt was drawn" >&2; exit 1; fi
[ ! -e "$work/zoo/tiny_transformer/weights.bin" ] || { echo "a drawn model's weights would travel" >&2; exit 1; }
cp -r "$work/zoo" "$work/zoo-run"
/usr/bin/python3 "$here/gpu_zoo.py" run --bin "$build" --zoo "$work/zoo-run" --out "$work/out" --device cpu
/usr/bin/python3 "$here/gpu_zoo.py" check --build "$build" --work "$work/ref" --zoo "$work/zoo" "$work"/out/gpu_zoo_*.tar
