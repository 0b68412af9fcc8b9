#!/usr/bin/python3
"""PyTorch side of amp-train's --save test.

    saved_model_reference.py TRAINED.onnx ORIGINAL.onnx DIR   writes DIR/in/input_0.pb (a random
        batch) and DIR/torch_logits.npy: the eval-mode models/torch_models.py CNN or MLP with every
        parameter and BatchNorm statistic loaded from TRAINED.onnx. Fails when TRAINED.onnx does
        not pass onnx.checker or holds the same weights as ORIGINAL.onnx (nothing was trained).
    saved_model_reference.py --compare DIR   compares DIR/ort/output_0.pb (ONNX Runtime's logits)
        with DIR/torch_logits.npy.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import torch_models  # noqa: E402


def weights(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def reference(trained, original, out):
    onnx.checker.check_model(onnx.load(trained))
    w, w0 = weights(trained), weights(original)
    changed = [k for k in w0 if k in w and not np.array_equal(w[k], w0[k])]
    if not changed:
        sys.exit("the saved model holds the original weights")
    name = "cnn" if "conv1.weight" in w else "mlp"
    model = torch_models.SPECS[name][0]()
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in w.items() if k in model.state_dict()},
                          strict=False)
    model.eval()
    x = np.random.RandomState(3).rand(4, 1, 28, 28).astype(np.float32)
    with torch.no_grad():
        logits = model(torch.from_numpy(x)).numpy()
    os.makedirs(os.path.join(out, "in"), exist_ok=True)
    with open(os.path.join(out, "in", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "input").SerializeToString())
    np.save(os.path.join(out, "torch_logits.npy"), logits)


def compare(out):
    t = onnx.TensorProto()
    with open(os.path.join(out, "ort", "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    ort = numpy_helper.to_array(t)
    ref = np.load(os.path.join(out, "torch_logits.npy"))
    err = np.abs(ort - ref).max()
    print("max |ORT - PyTorch| = %.3g" % err)
    if not err <= 1e-4 * max(1.0, np.abs(ref).max()):
        sys.exit("ONNX Runtime's logits differ from PyTorch's")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2])
    else:
        reference(*sys.argv[1:4])
