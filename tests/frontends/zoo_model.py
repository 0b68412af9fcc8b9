#!/usr/bin/python3
"""Models for tests/frontends/zoo_commands_test.cc, written with onnx.helper (ONNX's checker passes).

zoo_model.py missing DIR   DIR/missing.onnx: Conv -> LpNormalization -> Relu, a valid ONNX model
                            with an op (LpNormalization, node 'the_gap') this project has no kernel or
                            gradient for; DIR/missing_in.npz and DIR/missing_train.npz to feed it.
zoo_model.py check DIR/step.onnx
                            ONNX's shape inference on a saved training step, then one line per
                            product ("Conv BFLOAT16 BFLOAT16", main graph and algorithm graph,
                            ConvGrad and Gemm included): the element types ONNX infers for their
                            first two inputs.
zoo_model.py upsample DIR  DIR/model.onnx: an upsampling head as torch 1.13 exports it (eval) —
                            Conv, F.interpolate bilinear x2 (align_corners False), Conv, nearest
                            to a size, bilinear align_corners True, Conv; DIR/in/input_0.pb and
                            DIR/input.npz (the same input), DIR/reference.npz (torch's output).
zoo_model.py resize DIR/model.amp.onnx DIR/out.npz|DIR/ort/output_0.pb TOLERANCE
                            checks a rewrite: ONNX's full check passes, every Resize's scales input
                            is float32 and its data fp32; the output is within TOLERANCE * max|y|
                            of torch's (DIR/reference.npz).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def missing(folder):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 1, 1], [0.1] * 9)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("LpNormalization", ["c"], ["r"], name="the_gap"),
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


def upsample(folder):
    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.c = torch.nn.Conv2d(8, 4, 1)

        def forward(self, x):
            x = F.interpolate(torch.relu(self.a(x)), scale_factor=2, mode="bilinear", align_corners=False)
            x = F.interpolate(torch.relu(self.b(x)), size=(37, 29), mode="nearest")
            return self.c(F.interpolate(x, size=(40, 40), mode="bilinear", align_corners=True))

    torch.manual_seed(0)
    net = Head().eval()
    x = torch.randn(2, 3, 12, 10)
    torch.onnx.export(net, x, folder + "/model.onnx", opset_version=17, input_names=["input"], output_names=["output"])
    with torch.no_grad():
        y = net(x)
    os.makedirs(folder + "/in", exist_ok=True)
    t = numpy_helper.from_array(x.numpy(), "input")
    with open(folder + "/in/input_0.pb", "wb") as f:
        f.write(t.SerializeToString())
    np.savez(folder + "/input.npz", input=x.numpy())
    np.savez(folder + "/reference.npz", output=y.numpy())


def resize(path, output, tolerance):
    from onnx import numpy_helper
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    onnx.checker.check_model(m, full_check=True)
    known = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.input)}
    known.update({i.name: i.data_type for i in m.graph.initializer})
    resizes = [n for n in m.graph.node if n.op_type == "Resize"]
    assert len(resizes) == 3, resizes
    for n in resizes:
        assert known.get(n.input[0]) == TensorProto.FLOAT, (n.name, "data", known.get(n.input[0]))
        if len(n.input) > 2 and n.input[2]:
            assert known.get(n.input[2]) == TensorProto.FLOAT, (n.name, "scales", known.get(n.input[2]))
    folder = os.path.dirname(path)
    if output.endswith(".pb"):
        got = numpy_helper.to_array(onnx.load_tensor(output))
    else:
        got = np.load(output)["output"]
    want = np.load(folder + "/reference.npz")["output"]
    err = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
    print("max|diff|/max|y| = %.3g" % err)
    assert err <= float(tolerance), err


if __name__ == "__main__":
    if sys.argv[1] == "resize":
        resize(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        {"missing": missing, "check": check, "upsample": upsample}[sys.argv[1]](sys.argv[2])
