"""Small models for the calibration tests (calibrate_test.cc), written into OUT_DIR with their data.

  healthy.onnx   x[N,16] -> fc1 (MatMul) -> fc1_bias (Add) -> relu1 -> fc2 -> relu2 -> fc3 -> y[N,8]
  overflow.onnx  the same function with fc2's weights x2^17 and fc3's /2^17: fc2 and relu2 hold values
                 up to ~1e6, beyond fp16's 65504, and fc3 reads them (powers of two: the same fp32
                 function exactly). Calibration must keep fc2, relu2 and fc3 in fp32 and nothing else.
  ill.onnx       y = x0 - x1 with x0, x1 near 1000: fp16's spacing there is 0.5, so rounding the input
                 alone moves y (~0.1) by up to 0.25.
  calib.npz / heldout.npz           x for the MLPs (different seeds)
  heldout_ref.npz                   y of the MLP on heldout.npz in float64 (numpy)
  ill_calib.npz, ill_floor.json     x for ill.onnx and its input-rounding floor computed in numpy
"""
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)
W1 = (rng.standard_normal((16, 32)) / 4).astype(np.float32)
B1 = (rng.standard_normal(32) / 4).astype(np.float32)
W2 = (rng.standard_normal((32, 32)) / 4).astype(np.float32)
W3 = (rng.standard_normal((32, 8)) / 4).astype(np.float32)
SCALE = np.float32(2.0 ** 17)


def mlp(name, w2, w3):
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "B1"], ["h1b"], name="fc1_bias"),
        helper.make_node("Relu", ["h1b"], ["a1"], name="relu1"),
        helper.make_node("MatMul", ["a1", "W2"], ["h2"], name="fc2"),
        helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
        helper.make_node("MatMul", ["a2", "W3"], ["y"], name="fc3"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((W1, "W1"), (B1, "B1"), (w2, "W2"), (w3, "W3"))]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="calibration_models.py")
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/{name}.onnx")


mlp("healthy", W2, W3)
mlp("overflow", W2 * SCALE, W3 / SCALE)

# Inputs that put fc2's outputs (x2^17) beyond 65504: |h2| reaches a few units.
calib = (rng.standard_normal((64, 16)) * 2).astype(np.float32)
heldout = (rng.standard_normal((64, 16)) * 2).astype(np.float32)
np.savez(f"{out}/calib.npz", x=calib)
np.savez(f"{out}/heldout.npz", x=heldout)


def mlp64(x):
    a1 = np.maximum(x.astype(np.float64) @ W1.astype(np.float64) + B1.astype(np.float64), 0)
    return np.maximum(a1 @ W2.astype(np.float64), 0) @ W3.astype(np.float64)


np.savez(f"{out}/heldout_ref.npz", y=mlp64(heldout))
h2 = np.maximum(calib @ W1 + B1, 0) @ (W2 * SCALE)
assert np.abs(h2).max() > 65504 and np.abs(np.maximum(calib @ W1 + B1, 0) @ W2).max() < 65504 / 16

# ill.onnx: y = x @ [[1], [-1]]
D = np.array([[1.0], [-1.0]], np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["x", "D"], ["y"], name="difference")], "ill",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
                      [numpy_helper.from_array(D, "D")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="calibration_models.py")
onnx.checker.check_model(m)
onnx.save(m, f"{out}/ill.onnx")
base = 1000 + rng.uniform(0, 1, (32, 1))
x_ill = np.concatenate([base + rng.uniform(0.05, 0.15, (32, 1)), base], axis=1).astype(np.float32)
np.savez(f"{out}/ill_calib.npz", x=x_ill)
y = x_ill.astype(np.float64) @ D.astype(np.float64)
# 1000 + small is inside fp16's range: rounding changes the precision only.
y16 = x_ill.astype(np.float16).astype(np.float64) @ D.astype(np.float64)
json.dump({"floor_inputs": float(np.abs(y16 - y).max() / np.abs(y).max())}, open(f"{out}/ill_floor.json", "w"))
