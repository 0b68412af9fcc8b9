#!/usr/bin/python3
"""A small transformer encoder as PyTorch 1.13 exports it, for amp_rewrite_layer_norm_test.cc.

    transformer_encoder_export.py DIR

Writes DIR/encoder.onnx: a Linear(16, 32), then nn.TransformerEncoderLayer(d_model 32, 4 heads,
feed-forward 64, batch_first, pre-LN, no dropout) exported at opset 14, where PyTorch spells its two nn.LayerNorms as
ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add; their weights are the fresh ones and
zeros, which the export shares through Identity nodes. DIR/inputs/input_0.pb holds the input "x"
(batch 2, sequence 6) and DIR/expected/output_0.pb PyTorch's float32 output, as ONNX TensorProtos
(tests/ort/run_model.js's format).
"""
import os
import sys

import onnx.numpy_helper
import torch
from torch import nn

torch.manual_seed(0)


def main():
    out = sys.argv[1]
    # A Linear in front (a token embedding): the first LayerNorm reads an fp16 product, through the
    # one Cast to fp32 that ORT's LayerNormFusion swallowed.
    model = nn.Sequential(nn.Linear(16, 32), nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                                        dropout=0.0, batch_first=True,
                                                                        norm_first=True))
    model.eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(out, "encoder.onnx"), opset_version=14, input_names=["x"],
                      output_names=["y"])
    for folder, name, t in (("inputs", "input_0.pb", ("x", x)), ("expected", "output_0.pb", ("y", y))):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        with open(os.path.join(out, folder, name), "wb") as f:
            f.write(onnx.numpy_helper.from_array(t[1].numpy(), t[0]).SerializeToString())


if __name__ == "__main__":
    main()
