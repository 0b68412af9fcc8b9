#!/usr/bin/python3
"""LayerNorm as PyTorch exports it before opset 17, for recognize_layer_norm_test.cc.

    layer_norm_exports.py DIR

Writes DIR/<name>.onnx (torch.onnx.export at the opset named below, which spells nn.LayerNorm as
ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) and DIR/<name>.npz with the input "x"
and PyTorch's output "y" (float32). The names say what the test expects of each.
"""
import sys

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Manual(nn.Module):
    """LayerNorm written out by hand: mean over `axis`, d ** `exponent`; optionally the variance as
    a second output (an intermediate read outside the chain)."""

    def __init__(self, size, axis=-1, exponent=2.0, share_variance=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(size))
        self.bias = nn.Parameter(torch.randn(size))
        self.axis, self.exponent, self.share_variance = axis, exponent, share_variance

    def forward(self, x):
        d = x - x.mean(self.axis, keepdim=True)
        var = d.pow(self.exponent).mean(self.axis, keepdim=True)
        y = d / torch.sqrt(var + 1e-5) * self.weight + self.bias
        return (y, var) if self.share_variance else y


class TwiceInOneScope(Manual):
    """Two LayerNorms in one forward: their nodes share the module's scope."""

    def forward(self, x):
        return super().forward(super().forward(x))


class BertLayerNorm(nn.Module):
    """pytorch-pretrained-bert's BertLayerNorm (scale first, eps 1e-12). PyTorch 1.1 exported its two
    (x - u) as two Sub nodes, which ONNX Runtime's optimizer keeps (bert_toy_optimized.onnx);
    torch 1.13 merges them, so two_subs() splits them again after the export."""

    def __init__(self, size):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(size))
        self.bias = nn.Parameter(torch.randn(size))

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-12)
        return self.weight * x + self.bias


def two_subs(path):
    """The Div reads a second Sub computing the same x - u, as PyTorch 1.1's export wrote it."""
    import onnx
    m = onnx.load(path)
    nodes = list(m.graph.node)
    sub = next(n for n in nodes if n.op_type == "Sub")
    div = next(n for n in nodes if n.op_type == "Div")
    twin = onnx.helper.make_node("Sub", list(sub.input), [sub.output[0] + "_again"], name=sub.name + "_again")
    div.input[0] = twin.output[0]
    nodes.insert(nodes.index(div), twin)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.save(m, path)


def with_affine(ln):
    # Non-trivial scale and bias, so a swapped or dropped one shows in the outputs.
    with torch.no_grad():
        ln.weight.copy_(torch.randn_like(ln.weight))
        ln.bias.copy_(torch.randn_like(ln.bias))
    return ln


# name -> (model, input, opset)
MODELS = {
    # PyTorch's own module after a Linear, rank 2, opset 13; rank 3, opset 11; eps 1e-6, opset 16.
    "nn_layer_norm": (nn.Sequential(nn.Linear(8, 16), with_affine(nn.LayerNorm(16))), torch.randn(4, 8), 13),
    "nn_layer_norm_rank3": (with_affine(nn.LayerNorm(8)), torch.randn(2, 3, 8) * 3 + 1, 11),
    "nn_layer_norm_eps": (with_affine(nn.LayerNorm(8, eps=1e-6)), torch.randn(2, 5, 8), 16),
    # Every dim of x symbolic (dynamic_axes below): the scale's size is D.
    "nn_layer_norm_dynamic": (with_affine(nn.LayerNorm(8)), torch.randn(2, 5, 8), 14),
    # Two fresh nn.LayerNorms: their equal weights (ones) and biases (zeros) are one initializer
    # each, the second LayerNorm reading them through Identity nodes. Two LayerNorms in one module.
    "two_fresh_layer_norms": (nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.LayerNorm(8)), torch.randn(4, 8), 13),
    "twice_in_one_scope": (TwiceInOneScope(8), torch.randn(4, 8), 13),
    # The same chain by hand, last axis: recognised too.
    "manual_last_axis": (Manual(8), torch.randn(4, 8), 13),
    # BERT's LayerNorm with x - u computed twice (see BertLayerNorm), opset 11.
    "bert_two_subs": (BertLayerNorm(8), torch.randn(4, 8), 11),
    # Not LayerNorm over the last axis: the first axis; d ** 3; the variance also an output.
    "not_ln_other_axis": (Manual(8, axis=0), torch.randn(8, 8), 13),
    "not_ln_exponent": (Manual(8, exponent=3.0), torch.randn(4, 8), 13),
    "not_ln_shared_variance": (Manual(8, share_variance=True), torch.randn(4, 8), 13),
}


def main():
    out = sys.argv[1]
    for name, (model, x, opset) in MODELS.items():
        model.eval()
        with torch.no_grad():
            y = model(x)
        y = y[0] if isinstance(y, tuple) else y
        outputs = ["y", "var"] if name == "not_ln_shared_variance" else ["y"]
        dynamic = {"x": {0: "n", 1: "l", 2: "d"}} if name == "nn_layer_norm_dynamic" else None
        torch.onnx.export(model, (x,), "%s/%s.onnx" % (out, name), opset_version=opset, input_names=["x"],
                          output_names=outputs, dynamic_axes=dynamic)
        if name == "bert_two_subs":
            two_subs("%s/%s.onnx" % (out, name))
        np.savez("%s/%s.npz" % (out, name), x=x.numpy(), y=y.numpy())


if __name__ == "__main__":
    main()
