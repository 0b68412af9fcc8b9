#!/usr/bin/python3
"""A torchvision classifier as users export one for inference, for the --html page tests.

    /usr/bin/python3 tests/browser/export_torchvision.py resnet18 OUT.onnx

torchvision 0.14's model with random weights (seed 0), eval mode, exported by torch 1.13's
torch.onnx.export at opset 17 with constant folding (BatchNorm folded into the convolutions) and
a dynamic batch.
"""
import sys

import torch
import torchvision

name, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = getattr(torchvision.models, name)(weights=None).eval()
with torch.no_grad():
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), out, opset_version=17, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
