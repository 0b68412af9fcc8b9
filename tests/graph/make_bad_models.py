"""Writes the malformed models of import_errors_test into the folder given as argv[1], built with
onnx.helper so that the files do not depend on the code under test."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]


def save(model, *path):
    full = os.path.join(out, *path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(model.SerializeToString())


def model_with(nodes, opsets, initializers=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


save(model_with([helper.make_node("FooBar", ["x"], ["y"], name="mystery")], [("", 17)]), "unknown_op.onnx")
save(model_with([helper.make_node("Relu", ["x"], ["y"], name="elsewhere", domain="com.example")], [("", 17)]),
     "unknown_domain.onnx")
save(model_with([helper.make_node("Frob", ["x"], ["y"], name="custom", domain="com.example")],
                [("", 17), ("com.example", 1)]), "custom_op.onnx")
save(model_with([helper.make_node("Relu", ["x"], ["y"], name="new")], [("", 25)]), "opset25.onnx")
save(model_with([helper.make_node("Relu", ["nowhere"], ["y"], name="dangling")], [("", 17)]), "undefined_input.onnx")
save(model_with([helper.make_node("Cast", ["x"], ["y"], name="untyped")], [("", 17)]), "missing_attribute.onnx")


def external_model(folder, location, offset=0, length=None, data_bytes=16):
    """x + w where w (4 floats) lives in an external file named by `location`."""
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, str(value)
    save(model_with([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [("", 17)], [w]), folder, "model.onnx")
    if data_bytes is not None:
        with open(os.path.join(out, folder, "weights.bin"), "wb") as f:
            f.write(np.arange(data_bytes // 4, dtype=np.float32).tobytes())


with open(os.path.join(out, "outside.bin"), "wb") as f:
    f.write(np.arange(4, dtype=np.float32).tobytes())
external_model("ext_ok", "weights.bin")
external_model("ext_missing", "weights.bin", data_bytes=None)
external_model("ext_absolute", os.path.join(out, "outside.bin"))
external_model("ext_dotdot", "../outside.bin")
external_model("ext_symlink", "link.bin")
os.symlink(os.path.join(out, "outside.bin"), os.path.join(out, "ext_symlink", "link.bin"))
external_model("ext_short", "weights.bin", data_bytes=8)
external_model("ext_offset", "weights.bin", offset=64)
external_model("ext_length", "weights.bin", length=12)
