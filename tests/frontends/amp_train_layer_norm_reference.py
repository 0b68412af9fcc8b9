#!/usr/bin/python3
"""PyTorch reference for amp_train_layer_norm_test.cc: a transformer exported before opset 17
(torch spells each nn.LayerNorm as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add)
and what torch's training of it gives.

    amp_train_layer_norm_reference.py export DIR   writes DIR/model.onnx, DIR/data.npz, DIR/losses.json
    amp_train_layer_norm_reference.py ops STEP     prints {op type: count} of STEP.onnx, the forward graph
                                                   and its training_info algorithm graphs together

The model: Linear(16, 32), nn.TransformerEncoder of 2 pre-LN layers (4 heads, feed-forward 64,
GELU, batch_first, no dropout), a final nn.LayerNorm, mean over the sequence, Linear(32, 10): five
LayerNorms. Exported by torch.onnx.export in TrainingMode.TRAINING at opset 14 without constant
folding, as tests/zoo exports. data.npz: "input" float32 [STEPS*BATCH, 6, 16] (N(0,1)) and
"labels" int64 [STEPS*BATCH] from seed 0. losses.json: {"fp64": the loss of each of STEPS steps of
SGD (lr 0.01, momentum 0.9) from the export's weights on those batches in order, computed before
the step's update, by torch in float64; "fp32": the same run in torch fp32}.
"""
import collections
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

STEPS, BATCH, SEQ, FEATURES = 5, 4, 6, 16


class Encoder(torch.nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = torch.nn.Linear(FEATURES, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, 4, dim * 2, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.norm(self.encoder(self.embed(x))).mean(dim=1))


def export(out):
    warnings.filterwarnings("ignore")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Encoder().train()
    init = collections.OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS * BATCH, SEQ, FEATURES, generator=g)
    y = torch.randint(0, 10, (STEPS * BATCH,), generator=g)
    np.savez(os.path.join(out, "data.npz"), input=x.numpy(), labels=y.numpy())
    torch.onnx.export(model, x[:BATCH], os.path.join(out, "model.onnx"), input_names=["input"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=14)
    losses = {}
    for name, dtype in (("fp64", torch.float64), ("fp32", torch.float32)):
        model.load_state_dict(init)
        model.to(dtype)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        losses[name] = []
        for s in range(STEPS):
            loss = F.cross_entropy(model(x[s * BATCH:(s + 1) * BATCH].to(dtype)), y[s * BATCH:(s + 1) * BATCH])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump(losses, f)


def ops(path):
    import onnx
    m = onnx.load(path)
    count = collections.Counter(n.op_type for n in m.graph.node)
    for t in m.training_info:
        count.update(n.op_type for n in t.algorithm.node)
    print(json.dumps(dict(count)))


if __name__ == "__main__":
    {"export": export, "ops": ops}[sys.argv[1]](sys.argv[2])
