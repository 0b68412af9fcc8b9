#!/usr/bin/python3
"""Write deterministic sample inputs (and optionally PyTorch reference outputs) as .npz.

    /usr/bin/python3 models/make_inputs.py mlp [cnn gpt] [--out models/] [--torch-outputs]

Writes <out>/<name>.sample.npz with one array per graph input ("input" float32
[4,1,28,28] in [0,1), or "tokens" int64 [2,16] in [0,64)). --torch-outputs adds the
eval-mode PyTorch outputs ("logits") of the same seeded model that export_models.py
exports, as the golden values for <name>.onnx.
"""
import argparse
import io
import os
import sys
import tempfile
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def reference_outputs(name, inputs):
    model = torch_models.build(name).eval()
    with torch.no_grad():
        out = model(*(torch.from_numpy(v) for v in inputs.values()))
    out_names = torch_models.SPECS[name][2]
    return dict(zip(out_names, [out] if torch.is_tensor(out) else out))


def write_npz(path, arrays):
    # np.savez stamps the current time into the zip; a fixed stamp makes reruns
    # byte-identical, so regenerating leaves git clean.
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".npz", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
            for key, arr in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
                info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, buf.getvalue())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="+", choices=sorted(torch_models.SPECS))
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--torch-outputs", action="store_true",
                    help="also store the eval-mode PyTorch outputs under the graph output names")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        arrays = torch_models.example_inputs(name)
        if args.torch_outputs:
            arrays.update((k, v.numpy()) for k, v in reference_outputs(name, arrays).items())
        path = os.path.join(args.out, name + ".sample.npz")
        write_npz(path, arrays)
        print("%s: %s" % (path, ", ".join("%s %s%s" % (k, v.dtype, list(v.shape)) for k, v in arrays.items())))


if __name__ == "__main__":
    main()
