#!/usr/bin/python3
"""Export the demo models to ONNX (opset 17), each in an eval and a training variant.

    /usr/bin/python3 models/export_models.py --out models/ [--only mlp]

<name>.onnx        eval mode, constant-folded (Dropout removed, BatchNorm folded into Conv)
<name>.train.onnx  training mode, unfolded (Dropout keeps training_mode, BatchNorm
                   emits running_mean/running_var outputs)
"""
import argparse
import collections
import os
import sys
import tempfile
import warnings

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

OPSET = 17

# Eval-mode constant folding creates initializers with unstable names like
# "onnx::MatMul_264"; name them after the consuming module instead. Suffixes say how
# they differ from the same-named module's parameters in the .train.onnx file.
FOLDED_SUFFIX = {
    ("Conv", 1): "weight_bnfold",  # BatchNorm folded into the conv
    ("Conv", 2): "bias_bnfold",
    ("MatMul", 1): "weight_t",  # nn.Linear on rank>2 input exports MatMul(x, W^T)
}


def tidy_initializers(graph):
    inits = {t.name for t in graph.initializer}
    rename = {}
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            # The eval exporter dedups equal-valued initializers; aliased tensors would
            # tie parameters that are independent in the PyTorch model.
            raise RuntimeError("exporter merged initializer %s into %s" % (node.output[0], node.input[0]))
        for slot, name in enumerate(node.input):
            if name in inits and name.startswith("onnx::") and name not in rename:
                suffix = FOLDED_SUFFIX.get((node.op_type, slot))
                if suffix is None:
                    raise RuntimeError("no name rule for %s feeding %s input %d" % (name, node.name, slot))
                module = ".".join(node.name.strip("/").split("/")[:-1])
                rename[name] = module + "." + suffix
    if len(set(rename.values())) != len(rename) or set(rename.values()) & inits:
        raise RuntimeError("folded initializer names collide: %s" % rename)
    for t in list(graph.initializer) + list(graph.input) + list(graph.value_info):
        t.name = rename.get(t.name, t.name)
    for node in graph.node:
        node.input[:] = [rename.get(n, n) for n in node.input]


def export(name, out_dir, training):
    model = torch_models.build(name)
    model.train(training)
    _, in_axes, out_names, out_axes = torch_models.SPECS[name]
    inputs = {k: torch.from_numpy(v) for k, v in torch_models.example_inputs(name).items()}
    path = os.path.join(out_dir, name + (".train.onnx" if training else ".onnx"))

    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix="." + name, suffix=".tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            # Train-mode BatchNorm bumps num_batches_tracked, which the exporter drops with a
            # warning; the counter only matters for momentum=None, which these models don't use.
            warnings.filterwarnings("ignore", message=".*num_batches_tracked", category=UserWarning)
            torch.onnx.export(
                model,
                tuple(inputs.values()),
                tmp,
                export_params=True,
                opset_version=OPSET,
                training=torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL,
                do_constant_folding=not training,
                input_names=list(inputs),
                output_names=out_names,
                dynamic_axes={**in_axes, **out_axes},
            )
        proto = onnx.load(tmp)
        tidy_initializers(proto.graph)
        onnx.checker.check_model(proto, full_check=True)
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
        onnx.save(proto, tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def describe(path):
    proto = onnx.load(path)
    g = proto.graph

    def shape(vi):
        dims = vi.type.tensor_type.shape.dim
        elem = onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type).lower()
        return "%s %s[%s]" % (vi.name, elem, ",".join(d.dim_param or str(d.dim_value) for d in dims))

    ops = collections.Counter(n.op_type for n in g.node)
    hist = " ".join("%s:%d" % kv for kv in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
    print("%-16s %8d B  %3d nodes  %3d inits" % (os.path.basename(path), os.path.getsize(path),
                                                   len(g.node), len(g.initializer)))
    print("    in:  " + "; ".join(shape(v) for v in g.input))
    print("    out: " + "; ".join(shape(v) for v in g.output))
    print("    ops: " + hist)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", choices=sorted(torch_models.SPECS), action="append",
                    help="export just this model (repeatable)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or list(torch_models.SPECS):
        for training in (False, True):
            describe(export(name, args.out, training))


if __name__ == "__main__":
    main()
