#!/usr/bin/env bash
# The demo `bash setup.sh demo` runs: look at a model, rewrite it to fp16 with every decision
# explained, then train the CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) in fp32 and in
# fp16 mixed precision (FP32 master weights, dynamic loss scaling) side by side, draw both loss
# curves, and look at the training step. The commands run in build/demo as people type them.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
MODELS=$(cd "$(dirname "$0")" && pwd)
OUT=$BUILD/demo
FM=/usr/share/datasets/fashion-mnist
EPOCHS=${AMP_DEMO_EPOCHS:-1}
mkdir -p "$OUT"
cd "$OUT"
export PATH="$BUILD:$PATH"
cp "$MODELS/cnn.onnx" "$MODELS/cnn.train.onnx" .
rm -f cnn.amp.onnx  # amp-rewrite keeps an existing rewrite unless --force: start afresh
step() { printf '\n=== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

step "What is in the model" amp-inspect cnn.onnx
step "Rewrite it to fp16 (writes cnn.amp.onnx; decisions on stderr and in the report)" \
  amp-rewrite cnn.onnx --report cnn.amp.report.json
step "Each node's precision and why" amp-inspect --nodes cnn.amp.onnx
step "Why the first Conv runs in fp16 (--force: cnn.amp.onnx is there already)" \
  amp-rewrite cnn.onnx --force --explain /conv1/Conv

step "Train the CNN on Fashion-MNIST in fp32 and in fp16 mixed precision, and draw both" \
  amp-train cnn.train.onnx --data "$FM/train-images-idx3-ubyte.gz" --val "$FM/t10k-images-idx3-ubyte.gz" \
  --loss cross_entropy --epochs "$EPOCHS" --batch-size 128 --optimizer adamw --lr 0.003 --weight-decay 0.01 \
  --schedule cosine --warmup 50 --dtype fp16 --seed 0 --compare-fp32 --metrics train.metrics.jsonl \
  --plot fashion_mnist_fp32_vs_fp16.svg --save cnn.trained.onnx --save-training-graph cnn.step.onnx
step "The mixed-precision training step, saved as standard ONNX (training_info)" \
  amp-inspect --dot cnn.step.dot cnn.step.onnx
if command -v dot >/dev/null; then dot -Tsvg cnn.step.dot -o cnn.step.svg; fi
# Builds with the cuda backend (nvcc found) plan the step for a GPU without needing one.
plan=(amp-inspect --cuda-plan --dim N=64 cnn.step.onnx)
if "${plan[@]}" >cnn.step.cuda-plan.txt 2>&1; then
  printf '\n=== What the cuda backend would run for this step (worked out here, no GPU needed)\n$ %s\n' "${plan[*]}"
  tail -n 4 cnn.step.cuda-plan.txt
  printf '(every device unit in order: %s)\n' "$OUT/cnn.step.cuda-plan.txt"
fi
printf '\nDemo outputs are in %s: the loss curves (fashion_mnist_fp32_vs_fp16.svg), the trained model, the\n' "$OUT"
printf 'rewrite report, the metrics and the training-step picture.\n'
