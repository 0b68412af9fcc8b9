#!/usr/bin/python3
"""Valid models on which ONNX 1.12's version converter fails, one per case of
graph/onnx_converter_limits.h, each with its node named "n".

    converter_cases.py OUT_DIR

Writes OUT_DIR/<case>.onnx. Every model passes onnx.checker at its own opset; the case names say
the op, the opset step and what trips the converter.
"""
import os
import sys

import onnx
from onnx import TensorProto as T
from onnx import helper as h

vi = h.make_tensor_value_info


def model(nodes, inputs, outputs, opset):
    g = h.make_graph(nodes, "case", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="converter_cases.py")
    m.ir_version = 3
    onnx.checker.check_model(m)
    return m


def node(op, ins, outs, **attrs):
    return h.make_node(op, ins, outs, name="n", **attrs)


def floats(*specs):
    return [vi(name, T.FLOAT, dims) for name, dims in specs]


bn_inputs = floats(("x", [2, 3]), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3]))
CASES = {
    "equal_6_no_adapter": model([node("Equal", ["a", "b"], ["y"])], [vi("a", T.INT32, [2]), vi("b", T.INT32, [2])],
                                [vi("y", T.BOOL, [2])], 6),
    "lstm_6_no_adapter": model([node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2)],
                               floats(("x", [1, 1, 2]), ("w", [1, 8, 2]), ("r", [1, 8, 2])), floats(("y", [1, 1, 1, 2])), 6),
    "cast_5_no_adapter": model([node("Cast", ["x"], ["y"], to="INT32")], floats(("x", [2])), [vi("y", T.INT32, [2])], 5),
    "add_6_broadcast_symbolic": model([node("Add", ["a", "b"], ["y"], broadcast=1)], floats(("a", ["N", 3]), ("b", [3])),
                                      floats(("y", ["N", 3])), 6),
    "mul_6_symbolic_against_number": model([node("Mul", ["a", "b"], ["y"])], floats(("a", ["N", 3]), ("b", [2, 3])),
                                           floats(("y", [2, 3])), 6),
    "gemm_6_symbolic": model([node("Gemm", ["a", "b", "c"], ["y"], broadcast=1)],
                             floats(("a", ["N", 3]), ("b", [3, 4]), ("c", [4])), floats(("y", ["N", 4])), 6),
    "batchnorm_6_training": model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=0)], bn_inputs,
                                  floats(("y", [2, 3])), 6),
    "dropout_6_training": model([node("Dropout", ["x"], ["y"], is_test=0)], floats(("x", [2])), floats(("y", [2])), 6),
    "batchnorm_8_spatial0": model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0)],
                                  floats(("x", [2, 3]), ("s", [2, 3]), ("b", [2, 3]), ("m", [2, 3]), ("v", [2, 3])),
                                  floats(("y", [2, 3])), 8),
    "batchnorm_12_saved_outputs_read": model(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])], bn_inputs,
        floats(("y", [2, 3]), ("sm", [3])), 12),
    # The input's rank comes out of a Reshape to a shape the graph is given: unknown.
    "upsample_6_rank_unknown": model([h.make_node("Reshape", ["x", "shape"], ["r"]),
                                      node("Upsample", ["r"], ["y"], width_scale=2.0, height_scale=2.0)],
                                     floats(("x", [1, 2, 3, 4])) + [vi("shape", T.INT64, [4])], floats(("y", [1, 2, 6, 8])), 6),
    "scan_8": model([node("Scan", ["", "s0", "xs"], ["s", "ys"], num_scan_inputs=1,
                          body=h.make_graph([h.make_node("Add", ["si", "xi"], ["so"]), h.make_node("Identity", ["so"], ["yo"])],
                                            "body", floats(("si", [2]), ("xi", [2])), floats(("so", [2]), ("yo", [2]))))],
                    floats(("s0", [1, 2]), ("xs", [1, 3, 2])), floats(("s", [1, 2]), ("ys", [1, 3, 2])), 8),
    # What this project adapts itself: the saved mean and variance unread, so dropped.
    "batchnorm_12_saved_outputs_unread": model(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])], bn_inputs,
        floats(("y", [2, 3])), 12),
}

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, m in CASES.items():
        onnx.save(m, os.path.join(out, name + ".onnx"))
