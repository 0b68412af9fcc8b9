"""A 3-D Conv + ConvTranspose3d model for conv3d_training_test.cc: exports it for training (opset 17,
no constant folding, so the ONNX initializers are torch's weights), writes one batch, and writes
torch's losses of 3 plain-SGD steps on it, in float32 and float64.

    /usr/bin/python3 conv3d_training_reference.py DIR
"""
import json
import sys

import numpy as np
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 4, 3, stride=(1, 2, 1), padding=1)
        self.up = torch.nn.ConvTranspose3d(4, 3, 2, stride=2)
        self.head = torch.nn.Linear(3, 5)

    def forward(self, x):
        y = self.up(torch.relu(self.conv(x)))
        return self.head(y.mean(dim=(2, 3, 4)))


def losses(model, x, labels, dtype):
    m = Model().to(dtype)
    m.load_state_dict({k: v.to(dtype) for k, v in model.state_dict().items()})
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    out = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x.to(dtype)), labels)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def main():
    folder = sys.argv[1]
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(8, 2, 4, 6, 4)
    labels = torch.randint(0, 5, (8,))
    torch.onnx.export(model, x, folder + "/model.onnx", input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=17)
    np.savez(folder + "/data.npz", x=x.numpy(), labels=labels.numpy())
    with open(folder + "/losses.json", "w") as f:
        json.dump({"fp32": losses(model, x, labels, torch.float32), "fp64": losses(model, x, labels, torch.float64)}, f)


if __name__ == "__main__":
    main()
