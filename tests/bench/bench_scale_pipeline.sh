#!/bin/sh
# tests/bench/bench_scale.py's two phases end to end on the CPU, so that the GPU session's one run
# of it (.ci/gpu_run.sh, GPU_RUN_STEPS=scale) does not find a broken script: prepare resnet50 at
# 16x16 (the weights drawn, not carried), then run --device cpu at batch 2 (3 loss-check steps)
# without the weights (drawn again and checked), and check the table's amp and torch rows (one
# with two --amp-env settings, as the GPU session's runs give them), the first steps and the loss
# check. torch 1.13 has neither torch.compile nor fp16 autocast on the
# CPU: those rows are reported as failed, which the check allows.
#
#   tests/bench/bench_scale_pipeline.sh BUILD WORK
set -eu
here=$(dirname "$0")
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$here/bench_scale.py" prepare --out "$work/scale" --size 16 --models resnet50
[ ! -e "$work/scale/resnet50/weights.bin" ] || { echo "the drawn weights would travel" >&2; exit 1; }
/usr/bin/python3 "$here/bench_scale.py" run --bin "$build" --scale "$work/scale" --out "$work/out" --device cpu \
  --batch 2 --steps 2 --loss-steps 3 --budget 800 --amp-env AMP_CUDNN_FIND=top,AMP_CUDNN_GRAPH_TUNE=1 || true
table=$work/out/scale_table.md
for row in "| resnet50 | 2 | amp fp32 |" "| resnet50 | 2 | amp fp16 |" "| resnet50 | 2 | amp bf16 |" \
           "| resnet50 | 4 | amp bf16 |" "| resnet50 | 2 | torch fp32 |" "| resnet50 | 2 | torch autocast bf16 (CL) |" \
           "| resnet50 | 2 | amp bf16 (AMP_CUDNN_FIND=top) (AMP_CUDNN_GRAPH_TUNE=1) |"; do
  grep -F "$row" "$table" | grep -qv 'not run\|Error\|FAILED' || { echo "no row '$row' in $table" >&2; exit 1; }
done
grep -q "loss check, resnet50 bf16 at batch 8, 3 steps: every loss finite" "$table" || { echo "no loss check in $table" >&2; exit 1; }
grep -q "first step of amp bf16, resnet50 at batch 2, warm caches: [0-9.]* s" "$table" || { echo "no warm first step" >&2; exit 1; }
echo "bench_scale pipeline: ok"
