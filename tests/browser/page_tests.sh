#!/usr/bin/env bash
# The --html page in headless Chromium (page_test.js) for one case:
#   bash tests/browser/page_tests.sh BUILD CASE
# CASE: cnn-fp16 / gpt-bf16 (the demo models rewritten by amp-rewrite --html), mlp (amp-inspect
# --html of a model without decision records), resnet18-fp16 (torchvision's, exported by torch
# 1.13, rewritten), gpt-step-bf16 (amp-train's saved bf16 training step of the demo GPT, through
# amp-inspect --html). Writes its page and screenshot under BUILD/tests/browser/CASE/.
set -euo pipefail
BUILD=$(cd "${1:?usage: page_tests.sh BUILD CASE}" && pwd)
CASE=${2:?usage: page_tests.sh BUILD CASE}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$BUILD/tests/browser/$CASE
rm -rf "$OUT" && mkdir -p "$OUT"
test -x /usr/bin/chromium || { echo "FAIL: /usr/bin/chromium is missing (bash setup.sh deps installs Debian's chromium)"; exit 1; }
test -d "$ROOT/tests/browser/node_modules/playwright-core" ||
  { echo "FAIL: tests/browser/node_modules is missing (bash setup.sh deps installs playwright-core)"; exit 1; }
check() {  # check PAGE MODEL SEARCH [EXPECT_RECORDS]
  node "$ROOT/tests/browser/page_test.js" --page "$1" --model "$2" --inspect "$BUILD/amp-inspect" \
    --screenshot "$OUT/$CASE.png" --search "$3" --expect-records "${4:-yes}"
}
rewrite() {  # rewrite MODEL DTYPE SEARCH
  "$BUILD/amp-rewrite" "$1" -o "$OUT/model.onnx" --dtype "$2" --html "$OUT/page.html" >"$OUT/rewrite.log" 2>&1 ||
    { cat "$OUT/rewrite.log"; exit 1; }
  check "$OUT/page.html" "$OUT/model.onnx" "$3"
}
case "$CASE" in
  cnn-fp16) rewrite "$ROOT/models/cnn.onnx" fp16 Conv ;;
  gpt-bf16) rewrite "$ROOT/models/gpt.onnx" bf16 MatMul ;;
  mlp)
    "$BUILD/amp-inspect" "$ROOT/models/mlp.onnx" --html "$OUT/page.html"
    check "$OUT/page.html" "$ROOT/models/mlp.onnx" Gemm no ;;
  resnet18-fp16)
    /usr/bin/python3 "$ROOT/tests/browser/export_torchvision.py" resnet18 "$OUT/resnet18.onnx" 2>/dev/null
    rewrite "$OUT/resnet18.onnx" fp16 Relu ;;
  gpt-step-bf16)
    /usr/bin/python3 -c "
import numpy as np
t = np.random.RandomState(0).randint(0, 64, size=(8, 17)).astype(np.int64)
np.savez('$OUT/tokens.npz', tokens=t[:, :-1], labels=t[:, 1:])"
    "$BUILD/amp-train" "$ROOT/models/gpt.train.onnx" --data "$OUT/tokens.npz" --loss cross_entropy --steps 1 \
      --batch-size 4 --dtype bf16 --save-training-graph "$OUT/step.onnx" >"$OUT/train.log" 2>&1 ||
      { cat "$OUT/train.log"; exit 1; }
    "$BUILD/amp-inspect" "$OUT/step.onnx" --html "$OUT/page.html"
    check "$OUT/page.html" "$OUT/step.onnx" Where ;;
  *) echo "page_tests.sh: unknown case '$CASE'" >&2; exit 2 ;;
esac
