#!/usr/bin/env bash
# Peak resident memory of one AdamW training run of a GPT-2-small-shaped model (12 layers, 768
# wide, vocabulary 50257, context 64; tests/bench/gpt2_memory.py), amp-train against PyTorch with
# the same model, data, batch, optimizer and threads, each measured by /usr/bin/time -f %M; then
# amp-train's --memory-report, and the backend's bytes (state + arena) in fp32, fp16 and bf16 at
# an activation-heavy batch (BIG_BATCH 0: not).
#
#   bash tests/bench/gpt2_memory.sh BUILD [BATCH] [STEPS] [THREADS] [BIG_BATCH] [CTX]   (default 4 3 2 16 64)
#
# Needs about 4 GB of memory free and, on 2 cores, about 20 s a step at batch 4; the model's
# 650 MB of external data goes to a temporary folder removed at the end. GPT-2's own context:
# `bash tests/bench/gpt2_memory.sh build 2 3 2 0 1024` (batch 2 x 1024 tokens).
set -euo pipefail
BUILD=${1:?usage: gpt2_memory.sh BUILD [BATCH] [STEPS] [THREADS] [BIG_BATCH]}
BATCH=${2:-4}
STEPS=${3:-3}
THREADS=${4:-2}
BIG=${5:-16}
CTX=${6:-64}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN=$(cd "$BUILD" && pwd)/amp-train
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

/usr/bin/python3 "$ROOT/tests/bench/gpt2_memory.py" export "$WORK" --ctx "$CTX" 2>&1 | grep -v -i warn || true

peak() {  # peak LOG: the MiB of /usr/bin/time's "peak KB" line
  sed -n 's/^peak \([0-9]*\) KB$/\1/p' "$1" | awk '{ printf "%.0f", $1 / 1024 }'
}
args=("$WORK/gpt2.onnx" --data "$WORK/tokens.npz" --loss cross_entropy --optimizer adamw --lr 1e-4
      --threads "$THREADS" --seed 1)

/usr/bin/time -f "peak %M KB" "$TRAIN" "${args[@]}" --steps "$STEPS" --batch-size "$BATCH" --memory-report >"$WORK/ours.log" 2>&1
/usr/bin/time -f "peak %M KB" /usr/bin/python3 "$ROOT/tests/bench/gpt2_memory.py" torch "$WORK" \
  --batch-size "$BATCH" --steps "$STEPS" --threads "$THREADS" --ctx "$CTX" >"$WORK/torch.log" 2>&1
ms() { sed -n 's/^train: .*, \([0-9.]*\) ms\/step.*/\1/p' "$1" | awk '{ printf "%.0f", $1 }'; }
tms() { sed -n 's/^torch: .*, \([0-9.]*\) ms\/step/\1/p' "$1"; }

echo "AdamW, batch $BATCH x $CTX tokens, $THREADS threads, $STEPS steps; peak resident memory (/usr/bin/time %M)"
printf '%-10s %12s %10s\n' "" "peak MiB" "ms/step"
printf '%-10s %12s %10s\n' amp-train "$(peak "$WORK/ours.log")" "$(ms "$WORK/ours.log")"
printf '%-10s %12s %10s\n' PyTorch "$(peak "$WORK/torch.log")" "$(tms "$WORK/torch.log")"
echo
sed -n '/^train memory:/,/^  peak RSS/p' "$WORK/ours.log"
grep '^info: step' "$WORK/ours.log" || true   # the losses, to compare runs
grep '^torch step' "$WORK/torch.log" || true
echo
[ "$BIG" -gt 0 ] || exit 0

echo "batch $BIG x $CTX tokens: backend bytes (state + arena) and the arena at its peak"
printf '%-6s %14s %10s %12s %12s %12s %10s\n' dtype "backend MiB" "arena" "gradients" "activations" "lp weights" "peak MiB"
for dtype in fp32 fp16 bf16; do
  "$TRAIN" "${args[@]}" --batch-size "$BIG" --steps 2 --dtype "$dtype" --memory-report >"$WORK/$dtype.log" 2>&1
  part() { sed -n "s/^ *$1 *\([0-9.]*\) MiB$/\1/p" "$WORK/$dtype.log" | head -1; }
  backend=$(sed -n 's/.*backend state + arena \([0-9.]*\) MiB.*/\1/p' "$WORK/$dtype.log")
  printf '%-6s %14s %10s %12s %12s %12s %10s\n' "$dtype" "$backend" "$(part arena)" \
    "$(part 'gradients and backward temporaries (peak)')" "$(part 'activations (at its peak)')" \
    "$(part 'low-precision weight copies (at its peak)')" "$(part 'peak RSS')"
done
