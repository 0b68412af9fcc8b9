#!/bin/sh
# CPU training step time and peak memory: amp-train against PyTorch (Debian's python3-torch) on the
# same models, initial weights, batch, thread count and optimizer, in the same run.
#
#   tests/bench/compare_torch_train.sh BUILD_DIR [--models resnet18,mobilenet_v2,cnn,gpt]
#       [--dtypes fp32,bf16] [--threads 1,2] [--warmup 3] [--steps 10] [--repeat 1] [--batch 32] [--quick] [--keep DIR]
#
# For each model, tests/bench/torch_train_peer.py seeds and builds the PyTorch module (torchvision
# resnet18 and mobilenet_v2 with 10 classes on 3x32x32, models/ cnn on 1x28x28 and gpt on 32
# tokens; Dropout set to p=0), exports it in training mode without constant folding (so the ONNX
# initializers are the torch weights) and writes one synthetic batch as .npz. Then every
# (model, dtype, threads) case trains W+S plain SGD steps (lr 0.01, cross entropy, the same batch
# each step) twice, each in its own process: PyTorch (bf16: torch.autocast('cpu', bfloat16) around
# forward and loss) and BUILD_DIR/amp-train (--dtype; fp16 has no PyTorch CPU peer and shows '—').
# Step time is the median of the S steps after the W warm-up steps (PyTorch: perf_counter around
# zero_grad, forward, loss, backward, step; amp-train: its --metrics samples_per_second). Peak
# memory is each process's maximum resident set from /usr/bin/time, so it includes the runtime
# itself (the Python interpreter and libtorch, or amp-train with the model's compilation).
# torch.set_num_threads(n) / amp-train --threads n, with OMP_NUM_THREADS=n for both; any other
# environment (OMP_WAIT_POLICY, ...) is passed to both unchanged.
#
# The first step's loss of both is printed: with the same weights and batch it must agree (1e-3
# relative in fp32, 3e-2 in 16 bits); a larger difference is reported as a WARNING and the script
# exits 1, as it does when a case fails. Nothing here asserts on time.
#
# --repeat R: each case's two processes alternate R times and each side's median run is shown (its
# runs' times too, in the kept JSON): on a shared machine a slow spell then hits both sides.
# --quick: 1 warm-up step, 2 timed steps, 1 thread (flags after it still apply), for a smoke test.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEER="$ROOT/tests/bench/torch_train_peer.py"
PY=/usr/bin/python3
usage() { sed -n '5,6p' "$0" | sed 's/^#  *//' >&2; exit 2; }
[ $# -ge 1 ] || usage
case $1 in -*) usage ;; esac
BUILD=$(cd "$1" && pwd)
shift
AMP=$BUILD/amp-train
MODELS=resnet18,mobilenet_v2,cnn,gpt DTYPES=fp32,bf16 THREADS=1,2 WARMUP=3 STEPS=10 REPEAT=1 BATCH=32 KEEP=
while [ $# -gt 0 ]; do
  case $1 in
    --models) MODELS=$2; shift 2 ;;
    --dtypes) DTYPES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --quick) WARMUP=1 STEPS=2 THREADS=1; shift ;;
    *) echo "compare_torch_train.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[ -x "$AMP" ] || { echo "compare_torch_train.sh: $AMP not found: build the amp-train target" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "compare_torch_train.sh: /usr/bin/time not found (Debian package 'time')" >&2; exit 2; }
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
  { echo "compare_torch_train.sh: $PY lacks torch/torchvision (Debian python3-torch, python3-torchvision)" >&2; exit 2; }
for d in $(echo "$DTYPES" | tr , ' '); do
  case $d in fp32|bf16|fp16) ;; *) echo "compare_torch_train.sh: --dtypes takes fp32, bf16, fp16, not '$d'" >&2; exit 2 ;; esac
done
if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"
  DIR=$(cd "$KEEP" && pwd)
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
: >"$DIR/cases"

for model in $(echo "$MODELS" | tr , ' '); do
  "$PY" "$PEER" prepare "$model" "$DIR" --batch "$BATCH" >"$DIR/$model.prepare.log" 2>&1 ||
    { echo "compare_torch_train.sh: exporting $model failed:" >&2; tail -5 "$DIR/$model.prepare.log" >&2; exit 1; }
  for dtype in $(echo "$DTYPES" | tr , ' '); do
    for threads in $(echo "$THREADS" | tr , ' '); do
      case=$model.$dtype.$threads
      echo "$model $dtype $threads" >>"$DIR/cases"
      echo "  $case ..." >&2
      # --repeat R: torch and amp-train alternate R times, so a slow spell on a shared machine hits
      # both; each side's median run is the one shown.
      r=1
      while [ "$r" -le "$REPEAT" ]; do
        if [ "$dtype" != fp16 ]; then
          OMP_NUM_THREADS=$threads /usr/bin/time -f %M -o "$DIR/$case.torch.rss" \
            "$PY" "$PEER" train "$model" "$DIR" --dtype "$dtype" --threads "$threads" --warmup "$WARMUP" \
            --steps "$STEPS" >"$DIR/$case.torch.$r.json" 2>"$DIR/$case.torch.log" || : >"$DIR/$case.torch.$r.json"
        fi
        rm -f "$DIR/$case.amp.jsonl"
        if OMP_NUM_THREADS=$threads /usr/bin/time -f %M -o "$DIR/$case.amp.rss" \
            "$AMP" "$DIR/$model.onnx" --data "$DIR/$model.npz" --loss cross_entropy --batch-size "$BATCH" \
            --steps $((WARMUP + STEPS)) --no-shuffle --optimizer sgd --lr 0.01 --dtype "$dtype" --threads "$threads" \
            --metrics "$DIR/$case.amp.jsonl" >"$DIR/$case.amp.log" 2>&1; then
          "$PY" "$PEER" amp-result "$DIR/$case.amp.jsonl" --batch "$BATCH" --warmup "$WARMUP" >"$DIR/$case.amp.$r.json" \
            2>>"$DIR/$case.amp.log" || : >"$DIR/$case.amp.$r.json"
        else
          : >"$DIR/$case.amp.$r.json"
        fi
        r=$((r + 1))
      done
      for side in torch amp; do
        [ "$side" = torch ] && [ "$dtype" = fp16 ] && continue
        # shellcheck disable=SC2046
        "$PY" "$PEER" median $(seq -f "$DIR/$case.$side.%g.json" 1 "$REPEAT") >"$DIR/$case.$side.json" ||
          : >"$DIR/$case.$side.json"
      done
    done
  done
done

echo "amp-train ($AMP) against PyTorch $("$PY" -c 'import torch; print(torch.__version__)'): batch $BATCH," \
  "plain SGD lr 0.01, median of $STEPS steps after $WARMUP warm-up; peak = max resident set (/usr/bin/time)"
status=0
"$PY" "$PEER" table "$DIR" || status=$?
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores;" \
  "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$KEEP" ] || echo "files kept in $DIR"
exit $status
