"""A stand-in for the Python `onnxruntime` package over ONNX Runtime for Node (tests/ort/run_model.js),
for peers that import it (onnxconverter-common's auto_convert_mixed_precision) on machines that
have no Python onnxruntime. Put this folder first on PYTHONPATH.

It provides what auto_convert_mixed_precision uses: InferenceSession(model bytes or path,
sess_options, providers), get_inputs(), get_outputs() and run(output_names or None, feeds), on
ONNX Runtime's CPU provider. Every run() starts node and a new ONNX Runtime session (the model is
loaded again), so each call costs a start-up that Python onnxruntime pays once per session;
`stats` counts the calls and their wall time so that a comparison can report both and subtract
the start-up (measure_startup()).
"""
import os
import subprocess
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

RUN_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run_model.js")
stats = {"runs": 0, "seconds": 0.0}


class SessionOptions:
    pass


class _Arg:
    def __init__(self, value_info):
        t = value_info.type.tensor_type
        self.name = value_info.name
        self.type = "tensor(%s)" % onnx.TensorProto.DataType.Name(t.elem_type or 1).lower()
        self.shape = [d.dim_param or d.dim_value for d in t.shape.dim] if t.HasField("shape") else None


class InferenceSession:
    def __init__(self, model, sess_options=None, providers=None, **kwargs):
        self._dir = tempfile.TemporaryDirectory(prefix="ort_shim_")
        self._path = os.path.join(self._dir.name, "model.onnx")
        if isinstance(model, (bytes, bytearray)):
            with open(self._path, "wb") as f:
                f.write(model)
        else:
            self._path = str(model)
        self._model = onnx.load(self._path, load_external_data=False)
        initializers = {i.name for i in self._model.graph.initializer}
        self._inputs = [_Arg(v) for v in self._model.graph.input if v.name not in initializers]
        self._outputs = [_Arg(v) for v in self._model.graph.output]

    def get_inputs(self):
        return self._inputs

    def get_outputs(self):
        return self._outputs

    def get_providers(self):
        return ["CPUExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        with tempfile.TemporaryDirectory(prefix="ort_run_", dir=self._dir.name) as d:
            ins, outs = os.path.join(d, "in"), os.path.join(d, "out")
            os.makedirs(ins)
            os.makedirs(outs)
            for k, (name, value) in enumerate(input_feed.items()):
                with open(os.path.join(ins, "input_%d.pb" % k), "wb") as f:
                    f.write(numpy_helper.from_array(np.ascontiguousarray(value), name).SerializeToString())
            start = time.perf_counter()
            r = subprocess.run(["node", RUN_MODEL, self._path, ins, outs], capture_output=True, text=True)
            stats["seconds"] += time.perf_counter() - start
            stats["runs"] += 1
            if r.returncode != 0:
                err = os.path.join(outs, "error.txt")
                raise RuntimeError(open(err).read() if os.path.exists(err) else r.stdout + r.stderr)
            results = {}
            for k in range(len(self._outputs)):
                t = onnx.TensorProto()
                with open(os.path.join(outs, "output_%d.pb" % k), "rb") as f:
                    t.ParseFromString(f.read())
                results[t.name] = numpy_helper.to_array(t)
        names = output_names or [o.name for o in self._outputs]
        return [results[n] for n in names]


def measure_startup(repeats=3):
    """Seconds one run() of a one-node model takes: node's start, loading onnxruntime-node, a session."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    g = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "startup", [x], [y])
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    session = InferenceSession(model.SerializeToString())
    before = dict(stats)
    for _ in range(repeats):
        session.run(None, {"x": np.zeros(1, np.float32)})
    seconds = (stats["seconds"] - before["seconds"]) / repeats
    stats.update(before)
    return seconds
