#!/bin/sh
# tests/bench/bench_gpt2.py's two phases end to end on the CPU, so that the GPU session's one run of
# it (.ci/gpu_run.sh, GPU_RUN_STEPS=gpt2) does not find a broken script: prepare the tiny GPT (2
# layers, 64 wide, context 64; the weights drawn, not carried) with the CPU backend's bf16 losses of
# the loss check (3 steps), then run --device cpu at T = 32, batches 2 and 4, without the weights
# (drawn again and checked), and check the table's amp and torch rows and the loss check against
# prepare's losses. torch 1.13 has neither scaled_dot_product_attention nor torch.compile: its rows
# run the module's masked softmax (and say so) and the compile rows are reported as failed, which
# the check allows.
#
#   tests/bench/bench_gpt2_pipeline.sh BUILD WORK
set -eu
here=$(dirname "$0")
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$here/bench_gpt2.py" prepare --out "$work/gpt2" --tiny --loss-steps 3 --cpu-bin "$build"
[ ! -e "$work/gpt2/weights.bin" ] || { echo "the drawn weights would travel" >&2; exit 1; }
/usr/bin/python3 "$here/bench_gpt2.py" run --bin "$build" --gpt2 "$work/gpt2" --out "$work/out" --device cpu \
  --seq 32 --batches 2 4 --steps 2 --budget 600 --amp-env AMP_CUDA_DGELU_BGRAD=1 || true
table=$work/out/gpt2_table.md
for row in "| 4 | amp bf16 |" "| 4 | amp fp16 |" "| 2 | amp bf16 |" "| 2 | amp fp16 |" \
           "| 4 | amp bf16 (AMP_CUDA_DGELU_BGRAD=1) |" \
           "| 4 | torch autocast bf16 (masked softmax" "| 2 | torch autocast bf16 (masked softmax"; do
  grep -F "$row" "$table" | grep -qv 'not run\|Error\|FAILED' || { echo "no row '$row' in $table" >&2; exit 1; }
done
grep -q "loss check, bf16 at batch 1 x 64 tokens, 3 steps: every loss finite; against the CPU backend's (prepare's): largest relative distance 0.00e+00" "$table" ||
  { echo "no loss check (the CPU against prepare's CPU losses: identical) in $table" >&2; exit 1; }
grep -q "^- batch 4, amp bf16 / torch autocast bf16 (masked softmax: torch [^)]* has no sdpa): [0-9.]*x tokens/s" "$table" || { echo "no ratio in $table" >&2; exit 1; }
echo "bench_gpt2 pipeline: ok"
