"""Writes a copy of an ONNX model whose Dropout nodes drop nothing (ratio 0).

A dropout mask is a random draw per process and per run, so two process layouts (two ranks, or
one process accumulating two micro-batches) never draw the same masks; with ratio 0 they compute
the same thing, which the data-parallel tests compare. Usage: without_dropout.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model = onnx.load(sys.argv[1])
constants = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
changed = 0
for node in model.graph.node:
    if node.op_type != "Dropout" or len(node.input) < 2 or not node.input[1]:
        continue
    ratio = constants[node.input[1]]  # torch.onnx.export writes the ratio as a Constant
    value = next(a for a in ratio.attribute if a.name == "value")
    dtype = numpy_helper.to_array(value.t).dtype
    value.t.CopyFrom(numpy_helper.from_array(np.array(0, dtype=dtype), value.t.name))
    changed += 1
assert changed, "no Dropout with a ratio input"
onnx.save(model, sys.argv[2])
