"""The Done-when models of `amp-rewrite --calibrate` (README "Numerics-driven placement"), exported
with torch 1.13 into OUT_DIR, each with calibration inputs and other, held-out inputs:

  resnet18.onnx           torchvision ResNet-18 (random weights, BatchNorm statistics gathered on
                          random images so activations are of order 1), 64x64 inputs
  resnet18_rescaled.onnx  the same function with layer1[0]'s activations x65536: bn1's scale and
                          shift x65536, conv2's weights /65536 (ReLU is positively homogeneous, the
                          factors are powers of two: the same fp32 function); fp16 overflows there
  ssd_heads_plain.onnx    a small SSD-style detector: a backbone, an extra layer, box and class heads
                          on two feature maps, flattened and concatenated (softmax over classes)
  ssd_heads.onnx          the same function with the extra layer's activations x65536 (its heads /65536): a backbone, an un-normalised extra layer whose
                          activations reach ~1e5 (beyond fp16's 65504), as in detectors converted
                          from TensorFlow whose last convolutions reach 1e7-1e8

For each NAME: NAME.onnx, NAME.calib.npz, NAME.heldout.npz (key "input"), NAME.heldout_ref.npz (the
outputs in float64, by torch). Usage: /usr/bin/python3 calibration_models.py OUT_DIR [BATCH]
"""
import sys

import numpy as np
import torch
import torchvision

out = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 8
SIZE = 64
torch.manual_seed(0)


def gather_bn_statistics(model):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(16, 3, SIZE, SIZE))
    model.eval()


def largest_activation(model, module):
    seen = []
    handle = module.register_forward_hook(lambda m, i, o: seen.append(o.abs().max().item()))
    with torch.no_grad():
        model(torch.randn(batch, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1)))
    handle.remove()
    return seen[0]


def export(model, name, output_names):
    model.eval()
    x = torch.randn(batch, 3, SIZE, SIZE)
    torch.onnx.export(model, x, f"{out}/{name}.onnx", opset_version=17, input_names=["input"],
                      output_names=output_names, dynamic_axes={"input": {0: "N"}})
    g = torch.Generator().manual_seed(1)
    calib = torch.randn(batch, 3, SIZE, SIZE, generator=g)
    heldout = torch.randn(batch, 3, SIZE, SIZE, generator=g)
    np.savez(f"{out}/{name}.calib.npz", input=calib.numpy())
    np.savez(f"{out}/{name}.heldout.npz", input=heldout.numpy())
    with torch.no_grad():
        ref = model.double()(heldout.double())
    model.float()
    ref = ref if isinstance(ref, tuple) else (ref,)
    np.savez(f"{out}/{name}.heldout_ref.npz", **{n: r.numpy() for n, r in zip(output_names, ref)})


resnet = torchvision.models.resnet18(num_classes=1000)
gather_bn_statistics(resnet)
export(resnet, "resnet18", ["logits"])
block = resnet.layer1[0]
with torch.no_grad():
    block.bn1.weight *= 65536
    block.bn1.bias *= 65536
    block.conv2.weight /= 65536
export(resnet, "resnet18_rescaled", ["logits"])
print("resnet18_rescaled: layer1[0].relu reaches", largest_activation(resnet, block.relu))
assert largest_activation(resnet, block.relu) > 65504


class SSDHeads(torch.nn.Module):
    """Two feature maps (8x8 and 4x4), 4 anchors each, 4 box offsets and 8 class logits per anchor."""

    def __init__(self, anchors=4, classes=8):
        super().__init__()
        self.classes = classes
        conv = lambda i, o, s: torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, s, 1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
        self.backbone = torch.nn.Sequential(conv(3, 16, 2), conv(16, 32, 2), conv(32, 64, 2))
        self.extra = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, 2, 1), torch.nn.ReLU())
        self.loc = torch.nn.ModuleList([torch.nn.Conv2d(64, anchors * 4, 3, 1, 1) for _ in range(2)])
        self.conf = torch.nn.ModuleList([torch.nn.Conv2d(64, anchors * classes, 3, 1, 1) for _ in range(2)])

    def rescale(self, scale):
        """The extra layer un-normalised: its activations x scale, its heads' weights / scale."""
        with torch.no_grad():
            self.extra[0].weight *= scale
            self.extra[0].bias *= scale
            for head in (self.loc[1], self.conf[1]):
                head.weight /= scale

    def forward(self, x):
        f1 = self.backbone(x)
        f2 = self.extra(f1)
        locs, confs = [], []
        for f, loc, conf in zip((f1, f2), self.loc, self.conf):
            n = f.shape[0]
            locs.append(loc(f).permute(0, 2, 3, 1).reshape(n, -1, 4))
            confs.append(conf(f).permute(0, 2, 3, 1).reshape(n, -1, self.classes))
        return torch.cat(locs, 1), torch.softmax(torch.cat(confs, 1), -1)


torch.manual_seed(2)
ssd = SSDHeads()
gather_bn_statistics(ssd)
export(ssd, "ssd_heads_plain", ["boxes", "scores"])
ssd.rescale(65536)
export(ssd, "ssd_heads", ["boxes", "scores"])
print("ssd_heads: the extra layer reaches", largest_activation(ssd, ssd.extra))
assert largest_activation(ssd, ssd.extra) > 65504
