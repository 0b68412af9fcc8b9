"""Checks a model written by save_model with the onnx Python package: onnx.load (external data
included), onnx.checker.check_model(full_check=True), and optionally compares initializers with
raw float32 files (NAME=FILE) and the number of training_info entries (--training-info N)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

path, *checks = sys.argv[1:]
model = onnx.load(path)
onnx.checker.check_model(model, full_check=True)
initializers = {t.name: t for t in model.graph.initializer}
for check in checks:
    if check.startswith("--training-info="):
        want = int(check.split("=", 1)[1])
        assert len(model.training_info) == want, f"{len(model.training_info)} training_info entries, want {want}"
        continue
    name, expected_file = check.split("=", 1)
    actual = numpy_helper.to_array(initializers[name]).ravel()
    expected = np.fromfile(expected_file, dtype=actual.dtype)
    assert actual.shape == expected.shape and np.array_equal(actual, expected), f"initializer {name} differs"
print("ok")
