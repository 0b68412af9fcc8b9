#!/usr/bin/python3
"""Small blocks of real architectures as PyTorch exports them, with PyTorch's gradients.

    torch_exports.py NAME DIR

Writes DIR/model.onnx (torch.onnx.export in training mode, opset 17, batch dim N) and
DIR/reference.npz: the input "input", the "labels", PyTorch's cross-entropy "loss" and the gradient
"grad:<parameter>" of every parameter (float32), for one batch and the exported weights.

  channel_shuffle     ShuffleNet v2's block: torchvision's channel_shuffle reads x.size() and
                      reshapes to (b, groups, c // groups, h, w) and back, so the export computes both
                      targets from Shape/Gather/Div/Concat and ONNX's shape inference leaves every
                      value after the first Reshape without a rank, down to the head's ReduceMean
                      (shufflenet_v2's x.mean([2, 3])).
  mobilenet_v3_block  MobileNetV3's inverted residual with squeeze-and-excite: nn.Hardswish exports
                      as ONNX HardSwish, nn.Hardsigmoid as HardSigmoid(alpha 1/6).
  zoo_ops_block       Pad (reflect, constant, edge), Elu, Selu, Softplus and Resize (bilinear both
                      ways, nearest) between convolutions: issue 16's ops.
  indexing_block      pixel_shuffle, repeat, cumsum, topk, gather and scatter_add between
                      convolutions (DepthToSpace, Tile, CumSum, TopK, GatherElements,
                      ScatterElements): issue 31's ops.
  roi_align_block     torchvision.ops.roi_align (RoiAlign, aligned) of a convolution's map: with a
                      fixed sampling grid, and with an adaptive one at half scale, over regions on
                      both batch entries, one reaching past the map's edge.
  grid_sample_block   grid_sample (GridSample) of a convolution's map at a grid another convolution
                      predicts (a spatial transformer's sampler): bilinear with zeros padding,
                      bicubic with border and align_corners, nearest with reflection, so the
                      parameters' gradients pass through both X and the grid.
  norm_reduce_block   nn.InstanceNorm2d (affine: InstanceNormalization) and a head over three
                      per-channel summaries: torch.logsumexp (ReduceLogSumExp), torch.norm p=2
                      and p=1 (ReduceL2, ReduceL1).
  unet_block          A tiny U-Net: strided Conv down, ConvTranspose2d up (k3 s2 p1
                      output_padding 1; grouped k2 s2 dilated) with a skip concatenation.
  resnet_bottleneck   ResNet-50's layers in small: a stem (Conv, BatchNorm, ReLU), torchvision's
                      Bottleneck downsampling (stride 2, its shortcut a Conv and a BatchNorm) and
                      one plain Bottleneck, without biases, as resnet50 exports them.
  lstm, bilstm_h0, gru, gru_h0, rnn, rnn_relu
                      nn.LSTM / nn.GRU / nn.RNN over [N, 7, 5] sequences (batch_first, as torch
                      exports it: Transposes around ONNX's layout-0 layer) or [7, N, 5], one way or
                      both, with learned initial states (_h0) or none; the head reads the last
                      step's output and the final states, so every output of the layer carries a
                      gradient (RecurrentClassifier).
"""
import inspect
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


class ShuffleBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        b = torch.relu(self.bn(self.conv(torch.cat([b, b], 1))))[:, :4]
        return channel_shuffle(torch.cat([a, b], 1), 2)


class ChannelShuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = ShuffleBlock()
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.block(self.stem(x)).mean([2, 3]))


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(torch.relu(self.fc1(s))))


class MobileNetV3Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.Hardswish())
        self.se = SqueezeExcite(16, 8)
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.se(self.depthwise(self.expand(x))))
        return self.head(nn.functional.hardswish(x.mean([2, 3])))


class ZooOpsBlock(nn.Module):
    """The ops issue 16 added, as PyTorch exports them: F.pad reflect / constant / replicate (Pad
    reflect, constant, edge), ELU, SELU, Softplus, F.interpolate bilinear (align_corners False and
    True) and nearest (Resize)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.conv3 = nn.Conv2d(8, 8, 3)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        F = nn.functional
        x = self.stem(x)
        x = F.elu(self.conv1(F.pad(x, (1, 2, 2, 1), mode="reflect")))
        x = F.selu(self.conv2(F.pad(x, (1, 1, 1, 1), value=0.5)))
        x = F.softplus(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False))
        x = F.interpolate(x, size=(13, 11), mode="bilinear", align_corners=True)
        x = self.conv3(F.pad(F.interpolate(x, scale_factor=2, mode="nearest"), (2, 0, 1, 3), mode="replicate"))
        return self.head(x.mean([2, 3]))


class IndexingBlock(nn.Module):
    """Issue 31's data movement and indexing ops between convolutions, as PyTorch exports them:
    pixel_shuffle (DepthToSpace CRD), repeat (Tile), cumsum (CumSum), topk (TopK values and
    indices), gather (GatherElements) and scatter_add (ScatterElements, reduction add) at TopK's
    indices."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, stride=2)
        self.up = nn.Conv2d(2, 4, 3, padding=1, stride=2)
        self.head = nn.Linear(8 * 5 * 2 + 8 * 8, 10)

    def forward(self, x):
        F = nn.functional
        y = F.pixel_shuffle(self.stem(x), 2)  # [N, 2, 16, 16]
        y = self.up(y).repeat(1, 2, 1, 1)  # [N, 8, 8, 8]
        y = torch.cumsum(y, dim=3) / 4
        rows = y.mean(2)  # [N, 8, 8]
        v, i = torch.topk(rows, 5, dim=2)
        g = torch.gather(y.mean(3), 2, i)
        s = torch.zeros_like(rows).scatter_add(2, i, v * g)
        return self.head(torch.cat([v.flatten(1), g.flatten(1), s.flatten(1)], 1))


class RoiAlignBlock(nn.Module):
    """torchvision's roi_align (RoiAlign) between a convolution and the head."""

    def __init__(self):
        super().__init__()
        import torchvision  # here: imported while tracing, it fails
        self.roi_align = torchvision.ops.roi_align
        self.stem = nn.Conv2d(3, 6, 3, padding=1)
        self.head = nn.Linear(6 * 2 * 3 + 6 * 3 * 3, 10)

    def forward(self, x):
        f = torch.tanh(self.stem(x))  # [N, 6, 16, 16]
        boxes = torch.tensor([[0, 1.5, 2.0, 11.0, 9.5], [1, 4.0, 0.5, 15.5, 12.0], [1, -2.0, 6.0, 7.0, 18.0]])
        a = self.roi_align(f, boxes, output_size=(2, 3), spatial_scale=1.0, sampling_ratio=2, aligned=True)
        # torchvision 0.14 exports roi_align without coordinate_transformation_mode, which opset 16 on
        # reads as half_pixel: aligned=True; aligned=False would export the same node
        b = self.roi_align(f, boxes, output_size=(3, 3), spatial_scale=0.5, sampling_ratio=0, aligned=True)
        # one row per image: the regions' features summed onto their batch entries
        feats = torch.cat([a.flatten(1), b.flatten(1)], 1)  # [3, 90]
        return self.head(torch.stack([feats[0], feats[1] + feats[2]]))


class GridSampleBlock(nn.Module):
    """grid_sample (GridSample) at a predicted grid between convolutions and the head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.where = nn.Conv2d(3, 2, 3, stride=2, padding=1)
        self.head = nn.Linear(12, 10)

    def forward(self, x):
        f = torch.tanh(self.stem(x))  # [N, 4, 16, 16]
        grid = 1.2 * torch.tanh(self.where(x)).permute(0, 2, 3, 1)  # [N, 8, 8, 2], past the map's edges too
        a = nn.functional.grid_sample(f, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        b = nn.functional.grid_sample(f, 0.9 * grid, mode="bicubic", padding_mode="border", align_corners=True)
        c = nn.functional.grid_sample(f, grid, mode="nearest", padding_mode="reflection", align_corners=False)
        return self.head(torch.cat([a.mean([2, 3]), b.mean([2, 3]), c.mean([2, 3])], 1))


class NormReduceBlock(nn.Module):
    """InstanceNormalization and the norm-like reductions as PyTorch exports them."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.InstanceNorm2d(8, affine=True)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = self.norm(self.stem(x))
        soft = torch.logsumexp(x, dim=(2, 3))
        l2 = torch.norm(x, p=2, dim=(2, 3))
        l1 = torch.norm(x, p=1, dim=(2, 3))
        return self.head(torch.cat([soft, l2 / 16, l1 / 256], 1))


class UNetBlock(nn.Module):
    """Down with strided convolutions, up with transposed ones (ONNX ConvTranspose), a skip."""

    def __init__(self):
        super().__init__()
        self.down1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.down2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(16, 6, 2, stride=2, groups=2, bias=False)
        self.up3 = nn.ConvTranspose2d(6, 4, 3, padding=2, dilation=2)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        d1 = torch.relu(self.down1(x))
        d2 = torch.relu(self.down2(d1))
        u1 = torch.relu(self.up1(d2))
        u2 = torch.relu(self.up2(torch.cat([u1, d1], 1)))
        return self.head(self.up3(u2).mean([2, 3]))


class ResNetBottleneck(nn.Module):
    def __init__(self):
        super().__init__()
        from torchvision.models.resnet import Bottleneck
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        shortcut = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
        self.layer = nn.Sequential(Bottleneck(16, 8, stride=2, downsample=shortcut), Bottleneck(32, 8))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.layer(self.stem(x)).mean([2, 3]))


class RecurrentClassifier(nn.Module):
    """A recurrent layer (kind LSTM, GRU or RNN) and a linear head over its last output and final
    states. Learned initial states are parameters expanded over the batch."""

    def __init__(self, kind, bidirectional, initial_state, batch_first, nonlinearity="tanh"):
        super().__init__()
        extra = {"nonlinearity": nonlinearity} if kind == "RNN" else {}
        self.kind, self.batch_first, self.dirs = kind, batch_first, 2 if bidirectional else 1
        self.rnn = getattr(nn, kind)(5, 6, batch_first=batch_first, bidirectional=bidirectional, **extra)
        states = 2 if kind == "LSTM" else 1
        self.h0 = nn.Parameter(torch.randn(states, self.dirs, 1, 6) * 0.5) if initial_state else None
        self.head = nn.Linear(6 * self.dirs * (1 + states), 10)

    def example_input(self):
        return torch.randn(2, 7, 5) if self.batch_first else torch.randn(7, 2, 5)

    def forward(self, x):
        n = x.shape[0 if self.batch_first else 1]
        init = None
        if self.h0 is not None:
            init = [s.expand(self.dirs, n, 6).contiguous() for s in self.h0]
            init = tuple(init) if self.kind == "LSTM" else init[0]
        y, state = self.rnn(x, init)
        states = list(state) if self.kind == "LSTM" else [state]
        last = y[:, -1] if self.batch_first else y[-1]
        finals = [s.transpose(0, 1).reshape(n, -1) for s in states]
        return self.head(torch.cat([last] + finals, 1))


def recurrent(*args, **kw):
    return lambda: RecurrentClassifier(*args, **kw)


MODELS = {"channel_shuffle": ChannelShuffle, "mobilenet_v3_block": MobileNetV3Block, "zoo_ops_block": ZooOpsBlock,
          "indexing_block": IndexingBlock, "roi_align_block": RoiAlignBlock,
          "grid_sample_block": GridSampleBlock,
          "norm_reduce_block": NormReduceBlock,
          "unet_block": UNetBlock, "resnet_bottleneck": ResNetBottleneck,
          "lstm": recurrent("LSTM", False, False, True), "bilstm_h0": recurrent("LSTM", True, True, False),
          "gru": recurrent("GRU", True, False, True), "gru_h0": recurrent("GRU", False, True, False),
          "rnn": recurrent("RNN", True, True, True), "rnn_relu": recurrent("RNN", False, False, False, "relu")}


def main():
    name, out = sys.argv[1], sys.argv[2]
    net = MODELS[name]().train()
    # Inputs spread over [-6, 6), so the activations see every piece of HardSwish and HardSigmoid.
    x = net.example_input() if hasattr(net, "example_input") else torch.randn(2, 3, 16, 16) * 3
    batch_axis = 1 if getattr(net, "batch_first", True) is False else 0
    labels = torch.tensor([3, 7])
    # A newer torch (2.9 on: the GPU machine's) exports through dynamo by default, at opset 18 whatever
    # opset_version says; the TorchScript exporter keeps 17.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(net, x, out + "/model.onnx", opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {batch_axis: "N"}, "logits": {0: "N"}}, **legacy)
    # The export ran the model once, which moved BatchNorm's running statistics but no parameter;
    # in training mode the batch's own statistics normalise, so the loss is the exported model's.
    net.zero_grad()
    loss = nn.functional.cross_entropy(net(x), labels)
    loss.backward()
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss": loss.detach().numpy()}
    for param, p in net.named_parameters():
        arrays["grad:" + param] = p.grad.numpy()
    np.savez(out + "/reference.npz", **arrays)


if __name__ == "__main__":
    main()
