#!/bin/sh
# The plan of ResNet-50's bf16 training step at ImageNet size, worked out without a device (issue
# 28's criterion): torchvision's resnet50 (1000 classes, random weights) exported by torch 1.13 in
# training mode at 224x224 with the batch dim N symbolic (opset 17), its bf16 training step (SGD
# with momentum 0.9) saved by one amp-train step on the CPU at batch 2, then
# `amp-inspect --cuda-plan --dim N=128` of that step: the device units, the arena and the bytes
# the units move. Prints the plan's last lines; WORK/plan.txt and WORK/plan.json keep the rest.
#
#   tests/bench/resnet50_plan.sh BUILD WORK        (about a minute and 1.2 GiB of memory)
set -eu
build=$1
work=$2
mkdir -p "$work"
/usr/bin/python3 - "$work" <<'PY'
import os, sys, warnings
import numpy as np
import torch, torchvision
work = sys.argv[1]
torch.manual_seed(0)
m = torchvision.models.resnet50().train()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(m, torch.randn(2, 3, 224, 224), os.path.join(work, "resnet50.train.onnx"), input_names=["input"],
                      output_names=["logits"], opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
rng = np.random.default_rng(0)
np.savez(os.path.join(work, "batch.npz"), input=rng.random((2, 3, 224, 224), dtype=np.float32),
         labels=rng.integers(0, 1000, 2).astype(np.int64))
PY
"$build/amp-train" "$work/resnet50.train.onnx" --data "$work/batch.npz" --loss cross_entropy --steps 1 --batch-size 2 \
  --momentum 0.9 --lr 0.01 --dtype bf16 --save-training-graph "$work/resnet50.bf16.step.onnx" >"$work/train.log" 2>&1
"$build/amp-inspect" "$work/resnet50.bf16.step.onnx" --cuda-plan --dim N=128 >"$work/plan.txt"
"$build/amp-inspect" "$work/resnet50.bf16.step.onnx" --cuda-plan --dim N=128 --json >"$work/plan.json"
tail -5 "$work/plan.txt"
/usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["cuda_plan"]["memory"]
print("exact: arena %d bytes, moved %d bytes a step" % (m["arena_bytes"], m["moved_bytes"]))' "$work/plan.json"
