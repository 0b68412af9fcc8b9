#!/usr/bin/env bash
# The CUDA plan of GPT-2-small's bf16 AdamW training step at batch 8 and T = 256, 512, 1024
# (issue 29's checkable criteria: at T = 1024 at most 40 GB moved, the arena at most 2.2x T = 512's),
# worked out without a GPU: the ctx-1024 model of tests/bench/gpt2_memory.py, its step saved by
# amp-train after one bf16 step of batch 1 on the CPU, then `amp-inspect --cuda-plan` per T.
#
#   bash tests/bench/gpt2_cuda_plan.sh BUILD [KEEP_DIR]
#
# Needs about 10 GB of memory and 5 GB of disk (the step is saved with its state inline).
set -euo pipefail
BUILD=$(cd "${1:?usage: gpt2_cuda_plan.sh BUILD [KEEP_DIR]}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${2:-$(mktemp -d)}
[ -n "${2:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
[ -f "$WORK/gpt2.onnx" ] || /usr/bin/python3 "$ROOT/tests/bench/gpt2_memory.py" export "$WORK" --ctx 1024 2>&1 | grep -v -i warn || true
"$BUILD/amp-train" "$WORK/gpt2.onnx" --data "$WORK/tokens.npz" --loss cross_entropy --optimizer adamw --lr 1e-4 \
  --dtype bf16 --steps 1 --batch-size 1 --threads 2 --save-training-graph "$WORK/step.onnx" >"$WORK/save.log" 2>&1
printf '%-6s %12s %14s\n' T "arena MiB" "traffic MiB"
for T in 256 512 1024; do
  "$BUILD/amp-inspect" "$WORK/step.onnx" --cuda-plan --dim N=8 --dim T=$T >"$WORK/plan_$T.txt" 2>&1
  arena=$(sed -n 's/^memory: *arena \([0-9.e+]*\) MiB.*/\1/p' "$WORK/plan_$T.txt")
  traffic=$(sed -n 's/^traffic: *\([0-9.e+]*\) MiB.*/\1/p' "$WORK/plan_$T.txt")
  printf '%-6s %12.0f %14.0f\n' "$T" "$arena" "$traffic"
done
grep -c 'Attention' "$WORK/plan_1024.txt" | sed 's/^/plan lines naming Attention at T=1024: /'
