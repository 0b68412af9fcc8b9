#!/usr/bin/python3
"""PyTorch reference for amp-train parity: the same model, weights, batches and optimizer.

    /usr/bin/python3 tests/frontends/train_reference.py {mlp,cnn} OUT_DIR
        --optimizer {sgd,adamw} --steps N --batch B --lr LR [--momentum M] [--weight-decay WD]
        [--dtype {fp32,bf16}]

Writes to OUT_DIR:
  model.onnx   models/<name>.train.onnx with Dropout's ratio set to 0 (a dropout mask cannot be
               matched across two random number generators; ratio 0 keeps the training-mode path)
  data.npz     "input" float32 [N*B,1,28,28] and "labels" int64 [N*B]: the first N*B Fashion-MNIST
               training images in [0,1], in order (amp-train --no-shuffle reads them batch by batch)
  losses.json  the loss of each of the N steps, computed before that step's update

The PyTorch model is models/torch_models.py's class with every parameter and buffer loaded from
the ONNX initializers of the same name. bf16 runs forward and loss under CPU autocast, as
amp-train --dtype bf16 does (fp32 master weights, fp32 optimizer).
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import torch_models  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def model_without_dropout(name, out_path):
    m = onnx.load(os.path.join(HERE, "..", "..", "models", name + ".train.onnx"))
    ratios = {n.input[1] for n in m.graph.node if n.op_type == "Dropout" and len(n.input) > 1}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] in ratios:
            n.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(0.0, np.float32)))
    onnx.save(m, out_path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=["mlp", "cnn"])
    p.add_argument("out")
    p.add_argument("--optimizer", choices=["sgd", "adamw"], required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)

    weights = model_without_dropout(a.name, os.path.join(a.out, "model.onnx"))
    model = torch_models.SPECS[a.name][0]()
    state = {k: torch.from_numpy(np.array(v)) for k, v in weights.items()}
    missing = [k for k in model.state_dict() if k not in state and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("ONNX initializers missing for: %s" % missing)
    model.load_state_dict(state, strict=False)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()

    n = a.steps * a.batch
    images = read_idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz"))[:n]
    labels = read_idx(os.path.join(FASHION, "train-labels-idx1-ubyte.gz"))[:n].astype(np.int64)
    x_all = (images.astype(np.float32) / np.float32(255.0)).reshape(n, 1, 28, 28)
    np.savez(os.path.join(a.out, "data.npz"), input=x_all, labels=labels)

    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)

    losses = []
    for step in range(a.steps):
        x = torch.from_numpy(x_all[step * a.batch:(step + 1) * a.batch])
        y = torch.from_numpy(labels[step * a.batch:(step + 1) * a.batch])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(a.out, "losses.json"), "w") as f:
        json.dump(losses, f)


if __name__ == "__main__":
    main()
