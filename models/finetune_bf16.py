#!/usr/bin/python3
"""Trains an exported torchvision model from Python in bf16 mixed precision with onnx_amp, on
Fashion-MNIST (Debian's dataset-fashion-mnist), and plots the loss: a notebook's worth of code.

    /usr/bin/python3 models/finetune_bf16.py [--model resnet18] [--steps 60] [--batch 64] [--out DIR]

Writes to --out (default: the current folder): MODEL.train.onnx (the training-mode export),
MODEL.bf16.svg (loss per step and its running mean, the evaluations) and MODEL.trained.onnx (the
trained model, eval mode, fp32 as exported). torchvision's pretrained weights need a download, so
the model starts from torch's random initialisation; with pretrained weights loaded into the
torch model before the export, the same code fine-tunes them.
"""
import argparse
import gzip
import os
import warnings

import numpy as np
import torch
import torchvision

import onnx_amp

DATA = "/usr/share/datasets/fashion-mnist"


def fashion_mnist(split, n):
    """The first n images of a split as float32 [n, 3, 32, 32] (grey repeated, padded to 32, scaled
    to [0, 1]) and their labels as int64."""
    with gzip.open(os.path.join(DATA, split + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
    with gzip.open(os.path.join(DATA, split + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(np.int64)
    x = np.pad(images, ((0, 0), (2, 2), (2, 2))).astype(np.float32) / 255
    return np.repeat(x[:, None], 3, axis=1), labels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)

    # 1. Export for training: BatchNorm keeps its batch statistics, Dropout its training mode. The
    #    batch size is part of the exported shapes, so evaluation uses batches of the same size.
    warnings.filterwarnings("ignore")  # the exporter's notes on in-place BatchNorm counters
    torch.manual_seed(0)
    net = torchvision.models.get_model(a.model, weights=None, num_classes=10)
    exported = os.path.join(a.out, a.model + ".train.onnx")
    torch.onnx.export(net, torch.zeros(a.batch, 3, 32, 32), exported, input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=14)

    # 2. Train it in bf16 (fp32 master weights, AdamW, cosine schedule) from our own batches.
    x, y = fashion_mnist("train", a.steps * a.batch)
    vx, vy = fashion_mnist("t10k", 16 * a.batch)
    trainer = onnx_amp.Trainer(exported, loss="cross_entropy", optimizer="adamw", lr=2e-3, weight_decay=0.01,
                               schedule="cosine", warmup=10, total_steps=a.steps, dtype="bf16")
    val = [{"input": vx[i:i + a.batch], "labels": vy[i:i + a.batch]} for i in range(0, len(vx), a.batch)]
    for step in range(a.steps):
        rows = slice(step * a.batch, (step + 1) * a.batch)
        loss = trainer.step({"input": x[rows], "labels": y[rows]})
        if (step + 1) % 20 == 0 or step + 1 == a.steps:
            ev = trainer.evaluate(val)
            print("step %d: loss %.4f, val loss %.4f, val accuracy %.1f%%, %d skipped"
                  % (step + 1, loss, ev["loss"], 100 * ev["accuracy"], trainer.skipped_steps), flush=True)

    # 3. The picture and the trained model.
    trainer.plot(os.path.join(a.out, a.model + ".bf16.svg"), title=a.model + " on Fashion-MNIST, bf16", label="bf16")
    trainer.export(os.path.join(a.out, a.model + ".trained.onnx"))
    print("wrote", a.model + ".bf16.svg and", a.model + ".trained.onnx in", os.path.abspath(a.out))


if __name__ == "__main__":
    main()
