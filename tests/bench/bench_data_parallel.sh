#!/usr/bin/env bash
# Data-parallel training throughput of amp-train on the CPU: the models/ MLP, CNN and gpt, each
# with one process, with one process under mpirun (the step then averages its gradients with
# AllReduce nodes over a world of one: the cost of the machinery alone) and with two processes,
# one thread each and the same batch per process (as PyTorch DDP: two processes train a global
# batch twice as large). Scaling efficiency = samples/s of two / (2 x samples/s of one).
#
#   bash tests/bench/bench_data_parallel.sh BUILD [STEPS] [DTYPE]     (default 40 steps, fp32)
#
# samples/s is amp-train's own figure (global batch over the mean step time, first step left out).
# Two processes need two free cores: on a machine whose cores are busy with other work the
# efficiency says more about the load than about the transport (say so when quoting it).
set -euo pipefail
BUILD=${1:?usage: bench_data_parallel.sh BUILD [STEPS] [DTYPE]}
STEPS=${2:-40}
DTYPE=${3:-fp32}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN=$(cd "$BUILD" && pwd)/amp-train
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

/usr/bin/python3 - "$WORK" <<'PY'
import sys
import numpy as np
rng = np.random.RandomState(0)
out = sys.argv[1]
images = rng.rand(4096, 1, 28, 28).astype(np.float32)
np.savez(f"{out}/images.npz", input=images, labels=rng.randint(0, 10, 4096).astype(np.int64))
np.savez(f"{out}/tokens.npz", tokens=rng.randint(0, 64, (1024, 32)).astype(np.int64),
         labels=rng.randint(0, 64, (1024, 32)).astype(np.int64))
PY

rate() {  # rate LAUNCH...: amp-train's samples/s
  "$@" 2>/dev/null | sed -n 's/^train: .* \([0-9.]*\) samples\/s.*/\1/p'
}

printf '%-5s %-6s %12s %14s %14s %10s\n' model batch "1 process" "mpirun -np 1" "mpirun -np 2" efficiency
for spec in mlp:256:images cnn:128:images gpt:16:tokens; do
  IFS=: read -r model batch data <<<"$spec"
  args=("$ROOT/models/$model.train.onnx" --data "$WORK/$data.npz" --loss cross_entropy --optimizer adamw --lr 1e-3
        --batch-size "$batch" --steps "$STEPS" --threads 1 --dtype "$DTYPE" --seed 1)
  one=$(rate "$TRAIN" "${args[@]}")
  world1=$(rate "${MPIRUN[@]}" -np 1 "$TRAIN" "${args[@]}")
  two=$(rate "${MPIRUN[@]}" -np 2 "$TRAIN" "${args[@]}")
  eff=$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.0f%%", 100 * b / (2 * a) }')
  printf '%-5s %-6s %12s %14s %14s %10s\n' "$model" "$batch" "$one" "$world1" "$two" "$eff"
done
