"""Writes typed_tensors.onnx into argv[1]: one initializer per element type, stored the way
onnx.helper.make_tensor stores it (the typed fields: float_data, int32_data with 8/16-bit and
fp16/bf16 packing, int64_data, uint64_data, double_data, string_data), and for each numeric one
<name>.bin with the little-endian bytes it should import as, computed here with numpy."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
values = [0.0, 1.5, -2.25, 65504.0, 1e-3, -0.0]
cases = {
    "f32": (TensorProto.FLOAT, values, np.float32),
    "f64": (TensorProto.DOUBLE, values, np.float64),
    "f16": (TensorProto.FLOAT16, values, np.float16),
    "i8": (TensorProto.INT8, [-128, -1, 0, 1, 2, 127], np.int8),
    "u8": (TensorProto.UINT8, [0, 1, 2, 128, 254, 255], np.uint8),
    "i16": (TensorProto.INT16, [-32768, -1, 0, 1, 2, 32767], np.int16),
    "u16": (TensorProto.UINT16, [0, 1, 2, 32768, 65534, 65535], np.uint16),
    "i32": (TensorProto.INT32, [-2**31, -1, 0, 1, 2, 2**31 - 1], np.int32),
    "u32": (TensorProto.UINT32, [0, 1, 2, 2**31, 2**32 - 2, 2**32 - 1], np.uint32),
    "i64": (TensorProto.INT64, [-2**63, -1, 0, 1, 2, 2**63 - 1], np.int64),
    "u64": (TensorProto.UINT64, [0, 1, 2, 2**63, 2**64 - 2, 2**64 - 1], np.uint64),
    "bool": (TensorProto.BOOL, [True, False, True, True, False, False], np.bool_),
    "c64": (TensorProto.COMPLEX64, [1 + 2j, -3.5j, 0, 4, 5 - 1j, 2j], np.complex64),
    "c128": (TensorProto.COMPLEX128, [1 + 2j, -3.5j, 0, 4, 5 - 1j, 2j], np.complex128),
}
initializers = []
for name, (dtype, vals, np_type) in cases.items():
    tensor = helper.make_tensor(name, dtype, [2, 3], vals)
    assert not tensor.HasField("raw_data"), name  # the typed fields are what is under test
    initializers.append(tensor)
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(np.array(vals, dtype=np_type).astype(np_type).tobytes())

# bfloat16: make_tensor keeps the upper 16 bits of each float32 (values chosen exact in bf16).
bf16_values = [1.0, -2.0, 0.5, 2.0**100, -0.0, 1.5]
initializers.append(helper.make_tensor("bf16", TensorProto.BFLOAT16, [2, 3], bf16_values))
with open(os.path.join(out, "bf16.bin"), "wb") as f:
    f.write((np.array(bf16_values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes())
initializers.append(helper.make_tensor("str", TensorProto.STRING, [3], [b"a", b"", b"bc"]))

graph = helper.make_graph(
    [helper.make_node("Identity", ["f32"], ["y"])], "typed", [],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], initializer=initializers)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "typed_tensors.onnx"))
