"""A stand-in for the Python `onnxruntime` package over ONNX Runtime for Node (tests/ort/run_model.js),
for peers that import it (onnxconverter-common's auto_convert_mixed_precision) on machines that
have no Python onnxruntime. Put this folder first on PYTHONPATH.

It provides what auto_convert_mixed_precision uses: InferenceSession(model bytes or path,
sess_options, providers), get_inputs(), get_outputs() and run(output_names or None, feeds), on
ONNX Runtime's CPU provider with one thread (run_model.js). Every run() creates an ONNX Runtime
session for the model (auto_convert_mixed_precision makes one session per run too), in one node
process started at the first run and kept (run_model.js --serve): node's start-up and loading
onnxruntime-node are paid once per Python process, as Python onnxruntime's import is.
`persistent = False` starts node for every run() instead (the cost measure_startup() measures).
`stats` counts the runs, their wall time, and the time this stand-in spends writing the model and
the feeds as files and reading the results back (what Python onnxruntime does in memory).

`amp_run = PATH` (this project's amp-run) runs every model with amp-run on one thread instead:
the CPU backend's fp16, which stores every 16-bit value as a GPU does. A peer validating through
this stand-in then searches with GPU-faithful arithmetic instead of ONNX Runtime's CPU provider,
which keeps values in fp32 between nodes it has no fp16 kernel for (calibration_compare.py).
"""
import atexit
import os
import subprocess
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

RUN_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run_model.js")
stats = {"runs": 0, "seconds": 0.0, "shim_seconds": 0.0}
persistent = True
amp_run = None
_server = None


def _serve(job):
    """One MODEL<TAB>IN<TAB>OUT job on the kept node process; True when it ran."""
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(["node", RUN_MODEL, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True, bufsize=1)
        atexit.register(_server.stdin.close)
    _server.stdin.write("\t".join(job) + "\n")
    _server.stdin.flush()
    status = _server.stdout.readline()
    if not status:
        raise RuntimeError("run_model.js --serve ended")
    return status.startswith("ok ")


def start_server():
    """Starts the kept node process (loading onnxruntime-node) and returns the seconds it took."""
    start = time.perf_counter()
    _run_identity(1)
    return time.perf_counter() - start


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
            start = time.perf_counter()
            with open(self._path, "wb") as f:
                f.write(model)
            stats["shim_seconds"] += time.perf_counter() - start
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
            start = time.perf_counter()
            if amp_run:
                np.savez(os.path.join(ins, "feeds.npz"), **input_feed)
            else:
                for k, (name, value) in enumerate(input_feed.items()):
                    with open(os.path.join(ins, "input_%d.pb" % k), "wb") as f:
                        f.write(numpy_helper.from_array(np.ascontiguousarray(value), name).SerializeToString())
            ran = time.perf_counter()
            stats["shim_seconds"] += ran - start
            ok, message = self._execute(ins, outs)
            read = time.perf_counter()
            stats["seconds"] += read - ran
            stats["runs"] += 1
            if not ok:
                err = os.path.join(outs, "error.txt")
                raise RuntimeError(open(err).read() if os.path.exists(err) else message)
            results = self._results(outs)
            stats["shim_seconds"] += time.perf_counter() - read
        names = output_names or [o.name for o in self._outputs]
        return [results[n] for n in names]

    def _execute(self, ins, outs):
        """Runs the model on IN's feeds into OUTS: (whether it ran, what it printed)."""
        if amp_run:
            r = subprocess.run([amp_run, self._path, "--inputs", os.path.join(ins, "feeds.npz"), "--outputs",
                                os.path.join(outs, "out.npz"), "--threads", "1"], capture_output=True, text=True)
            return r.returncode == 0, r.stdout + r.stderr
        if persistent:
            return _serve([self._path, ins, outs]), ""
        r = subprocess.run(["node", RUN_MODEL, self._path, ins, outs], capture_output=True, text=True)
        return r.returncode == 0, r.stdout + r.stderr

    def _results(self, outs):
        if amp_run:
            with np.load(os.path.join(outs, "out.npz")) as z:
                return {k: z[k] for k in z.files}
        results = {}
        for k in range(len(self._outputs)):
            t = onnx.TensorProto()
            with open(os.path.join(outs, "output_%d.pb" % k), "rb") as f:
                t.ParseFromString(f.read())
            results[t.name] = numpy_helper.to_array(t)
        return results


def _run_identity(repeats):
    """Wall seconds of run() on a one-node model, per run (stats left as they were)."""
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


def measure_startup(repeats=3):
    """Seconds one run() of a one-node model takes with persistent = False: node's start, loading
    onnxruntime-node, a session."""
    global persistent
    kept, persistent = persistent, False
    try:
        return _run_identity(repeats)
    finally:
        persistent = kept
