#!/usr/bin/python3
"""A ShuffleNet-style block as PyTorch exports it, for complete_shapes_test.cc.

    channel_shuffle_reference.py DIR

torchvision's channel_shuffle reads x.size() and reshapes to (b, groups, c // groups, h, w) and back,
so with a dynamic batch the export computes both targets from Shape/Gather/Div/Concat and ONNX's
shape inference leaves every value after the first Reshape without a rank, down to the ReduceMean
of the head (shufflenet_v2's x.mean([2, 3])). Writes DIR/shuffle.onnx (training-mode export,
opset 17, batch dim N) and DIR/reference.npz: the input "input", the "labels", PyTorch's
cross-entropy "loss" and the gradient "grad:<parameter>" of every parameter (float32).
"""
import sys

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        b = torch.relu(self.bn(self.conv(torch.cat([b, b], 1))))[:, :4]
        return channel_shuffle(torch.cat([a, b], 1), 2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = Block()
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.block(self.stem(x)).mean([2, 3]))


def main():
    out = sys.argv[1]
    net = Net().train()
    x = torch.randn(2, 3, 16, 16)
    labels = torch.tensor([3, 7])
    torch.onnx.export(net, x, out + "/shuffle.onnx", opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    # The export ran the model once, which moved BatchNorm's running statistics but no parameter;
    # in training mode the batch's own statistics normalise, so the loss is the exported model's.
    net.zero_grad()
    loss = nn.functional.cross_entropy(net(x), labels)
    loss.backward()
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss": loss.detach().numpy()}
    for name, p in net.named_parameters():
        arrays["grad:" + name] = p.grad.numpy()
    np.savez(out + "/reference.npz", **arrays)


if __name__ == "__main__":
    main()
