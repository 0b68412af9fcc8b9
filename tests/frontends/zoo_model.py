#!/usr/bin/python3
"""Models for tests/frontends/zoo_commands_test.cc, written with onnx.helper (ONNX's checker passes).

zoo_model.py missing DIR   DIR/missing.onnx: Conv -> Shrink -> Relu, a valid ONNX model with an op
                            (Shrink, node 'the_gap') this project has no kernel or gradient for;
                            DIR/missing_in.npz and DIR/missing_train.npz to feed it.
zoo_model.py check DIR/step.onnx
                            ONNX's shape inference on a saved training step, then one line per
                            product ("Conv BFLOAT16 BFLOAT16", main graph and algorithm graph,
                            ConvGrad and Gemm included): the element types ONNX infers for their
                            first two inputs.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def missing(folder):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 1, 1], [0.1] * 9)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Shrink", ["c"], ["r"], name="the_gap"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, folder + "/missing.onnx")
    np.savez(folder + "/missing_in.npz", x=np.ones((1, 3, 4, 4), np.float32))
    np.savez(folder + "/missing_train.npz", x=np.ones((8, 3, 4, 4), np.float32), labels=np.zeros((8,), np.int64))


def check(path):
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    known = {}
    for g in [m.graph] + [t.algorithm for t in m.training_info]:
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            known.setdefault(vi.name, vi.type.tensor_type.elem_type)
        for init in g.initializer:
            known.setdefault(init.name, init.data_type)
    for g in [m.graph] + [t.algorithm for t in m.training_info]:
        for n in g.node:
            if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm", "ConvGrad"):
                print(n.op_type, *[TensorProto.DataType.Name(known.get(i, 0)) for i in n.input[:2]])


if __name__ == "__main__":
    {"missing": missing, "check": check}[sys.argv[1]](sys.argv[2])
