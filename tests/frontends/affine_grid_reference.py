#!/usr/bin/python3
"""The opset-20 AffineGrid models of amp_run_test.cc, and their grids by PyTorch's
torch.nn.functional.affine_grid.

    affine_grid_reference.py DIR

Writes, per case, DIR/CASE.onnx (one AffineGrid node; onnx 1.12's helper writes opset 20 without
checking it), DIR/CASE.in.npz (theta, and size where it is a graph input rather than an
initializer), DIR/CASE.ref.npz (grid; for float16 and bfloat16 computed from the widened theta in
float32 and rounded once) and, for float32 and float64, DIR/CASE.grad.npz (a gradient of the grid,
dgrid, and theta's by PyTorch's autograd, dtheta); prints the case names: 2-D and 3-D,
align_corners 0 and 1, the four float types, an extent of 1 (where torch's coordinate is 0).
"""
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

# name: (size, align_corners, element type, size as a graph input)
CASES = {
    "affine_grid_2d": ([2, 3, 5, 7], 0, "float32", False),
    "affine_grid_2d_align_corners": ([2, 1, 4, 6], 1, "float32", False),
    "affine_grid_2d_align_corners_one_row": ([3, 2, 1, 5], 1, "float64", True),
    "affine_grid_3d": ([2, 2, 3, 4, 5], 0, "float64", True),
    "affine_grid_3d_align_corners": ([1, 1, 4, 3, 2], 1, "float32", False),
    "affine_grid_2d_float16": ([2, 3, 6, 9], 0, "float16", False),
    "affine_grid_3d_bfloat16_align_corners": ([2, 1, 3, 5, 4], 1, "bfloat16", True),
}
ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16}


def stored(a, kind):
    """A float32 array rounded once to `kind`, as npz holds it: (key suffix, array); bf16 as its
    uint16 bits under a ".bf16" key (frontends/lib/npz.h)."""
    if kind == "bfloat16":
        bits = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16).view(torch.int16)
        return ".bf16", bits.numpy().view(np.uint16)
    return "", a.astype(kind)


def widened(a, kind):
    """What stored() wrote, as float32 (float64 stays)."""
    if kind == "bfloat16":
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return a.astype(np.float64 if kind == "float64" else np.float32)


def main():
    folder = sys.argv[1]
    rng = np.random.default_rng(20)
    for name, (size, align, kind, size_input) in CASES.items():
        r = len(size) - 2
        drawn = rng.uniform(-1.5, 1.5, (size[0], r, r + 1))
        suffix, theta = stored(drawn.astype(np.float64 if kind == "float64" else np.float32), kind)
        elem = ELEM[kind]
        inputs = [helper.make_tensor_value_info("theta", elem, list(theta.shape))]
        initializers = []
        size_array = np.array(size, dtype=np.int64)
        if size_input:
            inputs.append(helper.make_tensor_value_info("size", TensorProto.INT64, [len(size)]))
        else:
            initializers.append(numpy_helper.from_array(size_array, "size"))
        node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="affine_grid", align_corners=align)
        grid_shape = [size[0]] + size[2:] + [r]
        graph = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info("grid", elem, grid_shape)],
                                  initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        model.ir_version = 8
        onnx.save(model, "%s/%s.onnx" % (folder, name))
        feeds = {"theta" + suffix: theta}
        if size_input:
            feeds["size"] = size_array
        np.savez("%s/%s.in.npz" % (folder, name), **feeds)
        # 16-bit: as a GPU computes it, from the widened theta in float32, rounded once.
        theta_t = torch.from_numpy(widened(theta, kind)).requires_grad_()
        grid = F.affine_grid(theta_t, size, align_corners=bool(align))
        grid_suffix, grid_stored = stored(grid.detach().numpy(), kind)
        np.savez("%s/%s.ref.npz" % (folder, name), **{"grid" + grid_suffix: grid_stored})
        if kind in ("float32", "float64"):
            dgrid = rng.uniform(-1, 1, grid.shape).astype(kind)
            grid.backward(torch.from_numpy(dgrid))
            np.savez("%s/%s.grad.npz" % (folder, name), dgrid=dgrid, dtheta=theta_t.grad.numpy())
        print(name)


if __name__ == "__main__":
    main()
