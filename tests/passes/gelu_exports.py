#!/usr/bin/python3
"""GELU as PyTorch exports it, for recognize_gelu_test.cc.

    gelu_exports.py DIR

Writes DIR/<name>.onnx (torch.onnx.export, opset 17) for each model below and DIR/<name>.npz with
the input "x" and PyTorch's output "y" (float32). The names say what the test expects of each.
"""
import math
import sys

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def with_linear(act):
    return nn.Sequential(nn.Linear(8, 16), act)


MODELS = {
    # PyTorch's own modules: x * (1 + erf(x / sqrt 2)) * 0.5, and the tanh form.
    "exact_nn_gelu": with_linear(nn.GELU()),
    "tanh_nn_gelu": with_linear(nn.GELU(approximate="tanh")),
    # GPT-2's gelu_new as Hugging Face writes it: Pow, 0.5 applied to x first.
    "tanh_gelu_new": with_linear(Lambda(lambda x: 0.5 * x * (1.0 + torch.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))))),
    # Multiplying by 1/sqrt 2, and 0.5 applied to (1 + erf).
    "exact_mul_half_last": Lambda(lambda x: x * ((1.0 + torch.erf(x * (1.0 / math.sqrt(2.0)))) * 0.5)),
    # Not GELU: another constant; and GELU whose erf is also an output.
    "not_gelu_constant": Lambda(lambda x: x * (1.0 + torch.erf(x / 1.5)) * 0.5),
}


class SharedErf(nn.Module):
    def forward(self, x):
        e = torch.erf(x / math.sqrt(2.0))
        return x * (1.0 + e) * 0.5, e


def main():
    out = sys.argv[1]
    x = torch.randn(4, 8) * 2
    models = dict(MODELS)
    models["not_gelu_shared_erf"] = SharedErf()
    for name, model in models.items():
        model.eval()
        with torch.no_grad():
            y = model(x)
        y = y[0] if isinstance(y, tuple) else y
        outputs = ["y", "e"] if name == "not_gelu_shared_erf" else ["y"]
        torch.onnx.export(model, (x,), "%s/%s.onnx" % (out, name), opset_version=17, input_names=["x"],
                          output_names=outputs)
        np.savez("%s/%s.npz" % (out, name), x=x.numpy(), y=y.numpy())


if __name__ == "__main__":
    main()
