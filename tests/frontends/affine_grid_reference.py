#!/usr/bin/python3
"""The opset-20 AffineGrid models of amp_run_test.cc, and their grids by PyTorch's
torch.nn.functional.affine_grid.

    affine_grid_reference.py DIR

Writes, per case, DIR/CASE.onnx (one AffineGrid node; onnx 1.12's helper writes opset 20 without
checking it), DIR/CASE.in.npz (theta, and size where it is a graph input rather than an
initializer), DIR/CASE.ref.npz (grid) and DIR/CASE.grad.npz (a gradient of the grid, dgrid, and
theta's by PyTorch's autograd, dtheta), and prints the case names: 2-D and 3-D, align_corners 0
and 1, float32 and float64, an extent of 1 (where torch's coordinate is 0).
"""
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

# name: (size, align_corners, dtype, size as a graph input)
CASES = {
    "affine_grid_2d": ([2, 3, 5, 7], 0, np.float32, False),
    "affine_grid_2d_align_corners": ([2, 1, 4, 6], 1, np.float32, False),
    "affine_grid_2d_align_corners_one_row": ([3, 2, 1, 5], 1, np.float64, True),
    "affine_grid_3d": ([2, 2, 3, 4, 5], 0, np.float64, True),
    "affine_grid_3d_align_corners": ([1, 1, 4, 3, 2], 1, np.float32, False),
}


def main():
    folder = sys.argv[1]
    rng = np.random.default_rng(20)
    for name, (size, align, dtype, size_input) in CASES.items():
        r = len(size) - 2
        theta = rng.uniform(-1.5, 1.5, (size[0], r, r + 1)).astype(dtype)
        elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
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
        feeds = {"theta": theta}
        if size_input:
            feeds["size"] = size_array
        np.savez("%s/%s.in.npz" % (folder, name), **feeds)
        theta_t = torch.from_numpy(theta).requires_grad_()
        grid = F.affine_grid(theta_t, size, align_corners=bool(align))
        np.savez("%s/%s.ref.npz" % (folder, name), grid=grid.detach().numpy())
        dgrid = rng.uniform(-1, 1, grid.shape).astype(dtype)
        grid.backward(torch.from_numpy(dgrid))
        np.savez("%s/%s.grad.npz" % (folder, name), dgrid=dgrid, dtheta=theta_t.grad.numpy())
        print(name)


if __name__ == "__main__":
    main()
