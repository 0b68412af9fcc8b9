#!/usr/bin/env bash
# The demo `bash setup.sh demo` runs: look at a model, rewrite it to fp16 with every decision
# explained, then train the CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) in fp16 mixed
# precision with FP32 master weights and dynamic loss scaling, and look at the training step.
set -euo pipefail
BUILD=${1:-build}
MODELS=$(cd "$(dirname "$0")" && pwd)
OUT=$BUILD/demo
FM=/usr/share/datasets/fashion-mnist
EPOCHS=${AMP_DEMO_EPOCHS:-1}
mkdir -p "$OUT"
step() { printf '\n=== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

step "What is in the model" "$BUILD/amp-inspect" "$MODELS/cnn.onnx"
step "Rewrite it to fp16 (decisions on stderr and in the report)" \
  "$BUILD/amp-rewrite" "$MODELS/cnn.onnx" -o "$OUT/cnn.fp16.onnx" --report "$OUT/cnn.fp16.report.json"
step "Each node's precision and why" "$BUILD/amp-inspect" --nodes "$OUT/cnn.fp16.onnx"
step "Why the first Conv runs in fp16" "$BUILD/amp-rewrite" "$MODELS/cnn.onnx" -o "$OUT/cnn.fp16.onnx" \
  --explain /conv1/Conv

step "Train the CNN on Fashion-MNIST in fp16 mixed precision" \
  "$BUILD/amp-train" "$MODELS/cnn.train.onnx" \
  --data "$FM/train-images-idx3-ubyte.gz,$FM/train-labels-idx1-ubyte.gz" \
  --val "$FM/t10k-images-idx3-ubyte.gz,$FM/t10k-labels-idx1-ubyte.gz" \
  --loss cross_entropy --epochs "$EPOCHS" --batch-size 64 --optimizer adamw --lr 0.003 \
  --dtype fp16 --seed 1 --metrics "$OUT/train.metrics.jsonl" \
  --save "$OUT/cnn.trained.onnx" --save-training-graph "$OUT/cnn.step.onnx"
step "The mixed-precision training step, saved as standard ONNX (training_info)" \
  "$BUILD/amp-inspect" --dot "$OUT/cnn.step.dot" "$OUT/cnn.step.onnx"
if command -v dot >/dev/null; then dot -Tsvg "$OUT/cnn.step.dot" -o "$OUT/cnn.step.svg"; fi
# Builds with the cuda backend (nvcc found) plan the step for a GPU without needing one.
plan=("$BUILD/amp-inspect" --cuda-plan --dim N=64 "$OUT/cnn.step.onnx")
if "${plan[@]}" >"$OUT/cnn.step.cuda-plan.txt" 2>&1; then
  printf '
=== What the cuda backend would run for this step (worked out here, no GPU needed)
$ %s
' "${plan[*]}"
  tail -n 4 "$OUT/cnn.step.cuda-plan.txt"
  printf '(every device unit in order: %s)
' "$OUT/cnn.step.cuda-plan.txt"
fi
printf '\nDemo outputs are in %s (trained model, report, metrics, training-step picture).\n' "$OUT"
