"""Writes a model (argv[1]) whose external data file holds one 1 MB weight while the model file
itself holds 1.5 MB of small inline constants (1500 Adds of 1000-byte vectors, under the 1024-byte
threshold for external data): a file-size limit between the two lets a save write the data file
and fail on the model file."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits = [], []
x = "x"
for i in range(1500):
    inits.append(numpy_helper.from_array(rng.standard_normal(250).astype(np.float32), f"c{i}"))
    nodes.append(helper.make_node("Add", [x, f"c{i}"], [f"a{i}"], name=f"add{i}"))
    x = f"a{i}"
inits.append(numpy_helper.from_array(rng.standard_normal((250, 1000)).astype(np.float32), "w"))
nodes.append(helper.make_node("MatMul", [x, "w"], ["y"], name="matmul"))
graph = helper.make_graph(nodes, "external_heavy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 250])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True,
          location=sys.argv[1].rsplit("/", 1)[-1] + ".data", size_threshold=1024)
