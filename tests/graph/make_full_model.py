"""Writes full_model.onnx into argv[1]: a valid model that fills the ModelProto fields the
backend test data leaves empty (metadata, model-local functions, sparse initializers and
attributes, denotations, doc strings, an initializer listed as an input), for the lossless-import
test."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]

add_twice = helper.make_function(
    "custom", "AddTwice", ["a"], ["c"],
    [helper.make_node("Add", ["a", "a"], ["b"]), helper.make_node("Add", ["b", "a"], ["c"])],
    [helper.make_opsetid("", 17)])

x_type = helper.make_tensor_type_proto(TensorProto.FLOAT, ["N", 4])
x_type.denotation = "TENSOR"
x_type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
x = helper.make_value_info("x", x_type, doc_string="the input")
w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
w.doc_string = "a weight that is also a graph input"
sparse = helper.make_sparse_tensor(
    numpy_helper.from_array(np.array([1.5, -2.0], dtype=np.float32), "s"),
    numpy_helper.from_array(np.array([1, 3], dtype=np.int64), "s_indices"), [4])
const_sparse = helper.make_sparse_tensor(
    numpy_helper.from_array(np.array([7.0], dtype=np.float32), "cs"),
    numpy_helper.from_array(np.array([2], dtype=np.int64), "cs_indices"), [4])

nodes = [
    helper.make_node("AddTwice", ["x"], ["twice"], name="call", domain="custom", doc_string="a function call"),
    helper.make_node("Add", ["twice", "w"], ["plus_w"], name="add_w"),
    helper.make_node("Constant", [], ["dense"], name="sparse_const", sparse_value=const_sparse),
    helper.make_node("Add", ["plus_w", "dense"], ["y"], name="add_dense"),
    helper.make_node("Cast", ["y"], ["y_fp16"], name="cast", to=TensorProto.FLOAT16),
]
graph = helper.make_graph(
    nodes, "full", [x, helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("y_fp16", TensorProto.FLOAT16, ["N", 4])],
    initializer=[w], doc_string="graph doc",
    value_info=[helper.make_tensor_value_info("plus_w", TensorProto.FLOAT, ["N", 4])],
    sparse_initializer=[sparse])
model = helper.make_model(
    graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)], functions=[add_twice],
    producer_name="make_full_model", producer_version="1.0", domain="org.example", model_version=7,
    doc_string="model doc")
helper.set_model_props(model, {"author": "onnx-amp tests", "purpose": "lossless import"})
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(out, "full_model.onnx"))
