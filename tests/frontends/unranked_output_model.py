#!/usr/bin/python3
"""A model whose graph output ONNX's shape inference cannot rank: y = Reshape(Relu(Flatten(x)),
Shape(x)) * w with y declared as float and nothing more (ONNX 1.12 gives a Reshape to a computed
shape no rank, and so everything after it).

    unranked_output_model.py make OUT.onnx      writes it (and shows onnx's inference leaves y unranked)
    unranked_output_model.py check OUT.onnx     the rewrite: onnx.checker's full check, y's dims
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(path):
    w = numpy_helper.from_array(np.linspace(0.5, 2.0, 4, dtype=np.float32).reshape(1, 4, 1, 1), "w")
    nodes = [helper.make_node("Flatten", ["x"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["act"]),
             helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Reshape", ["act", "x_shape"], ["back"]),
             helper.make_node("Mul", ["back", "w"], ["y"])]
    g = helper.make_graph(nodes, "unranked_output", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m)
    y = [o for o in inferred.graph.output if o.name == "y"][0]
    assert not y.type.tensor_type.HasField("shape"), "onnx's inference ranks y: the model no longer tests anything"
    onnx.save(m, path)


def check(path):
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    y = [o for o in m.graph.output if o.name == "y"][0]
    print([d.dim_value if d.HasField("dim_value") else d.dim_param for d in y.type.tensor_type.shape.dim])


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
