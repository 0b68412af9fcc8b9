#!/usr/bin/python3
"""Opset 18's ops that amp-rewrite, which writes opset 17, writes as other ops: the bitwise ops (no
bitwise op in opset 17), Col2Im (a ScatterElements add), ScatterElements and ScatterND with
reduction max / min (a comparison of the indices with every row), DeformConv (its bilinear sampling
as GatherElements, then a MatMul).

    newer_ops_rewrite_check.py make DIR       DIR/bitwise.onnx (project_models.bitwise: all eight
                                              integer types on their extremes) with DIR/bitwise_in/
                                              (n: int32 extremes, -1, 0, 1, alternating bits), and
                                              DIR/col2im.onnx (project_models.col2im: 2-D) and
                                              DIR/col2im_nd.onnx (1-D, 3-D), DIR/scatter.onnx
                                              (project_models.scatter_extremes), DIR/deform.onnx
                                              (project_models.deform_conv), inputs in
                                              DIR/*_in/ (normal draws)
    newer_ops_rewrite_check.py compare A B [T]  every output_K.pb of folder A against B's: integers
                                              bit for bit, floats within T (default 1e-6) of the
                                              largest magnitude (sums differ in order)
    newer_ops_rewrite_check.py col2im DIR OUT  DIR/col2im.onnx's outputs in OUT against numpy's
                                              computation of ONNX's definition, within 1e-6

The C++ test runs ONNX Runtime on each model as published (its own kernels) and on the rewrite,
and compares them; ONNX Runtime's own Col2Im is wrong for images that are not 2-D
(microsoft/onnxruntime#18156), so the 1-D and 3-D cases (DIR/col2im_nd.onnx) are compared with numpy.
"""
import glob
import itertools
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
import project_models  # noqa: E402


def save_inputs(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, (name, a) in enumerate(arrays):
        onnx.save_tensor(numpy_helper.from_array(a, name), os.path.join(folder, "input_%d.pb" % k))


def make(d):
    project_models.bitwise(os.path.join(d, "bitwise.onnx"))
    i = np.iinfo(np.int32)
    n = np.array([[i.min, i.max, -1, 0, 1, 0x55555555, -0x55555556, 7],
                  [i.min + 1, i.max - 1, -2, 2, 3, 0x0F0F0F0F, -0x10000, 1 << 30],
                  [-(1 << 30), 12345, -12345, 255, -256, 65535, -65536, 42]], np.int32)
    save_inputs(os.path.join(d, "bitwise_in"), [("n", n)])
    rng = np.random.default_rng(0)
    for name, make_model in (("scatter", project_models.scatter_extremes), ("deform", project_models.deform_conv)):
        make_model(os.path.join(d, name + ".onnx"))
        m = onnx.load(os.path.join(d, name + ".onnx"))
        # offsets of a few pixels either way: samples fall inside, across and outside the border
        save_inputs(os.path.join(d, name + "_in"),
                    [(v.name, (rng.standard_normal([x.dim_value for x in v.type.tensor_type.shape.dim]) *
                               (2.0 if v.name.startswith("offset") else 1.0)).astype(np.float32))
                     for v in m.graph.input])
    for name, cases in (("col2im", project_models.COL2IM_2D), ("col2im_nd", project_models.COL2IM_OTHER_RANKS)):
        project_models.col2im(os.path.join(d, name + ".onnx"), cases)
        m = onnx.load(os.path.join(d, name + ".onnx"))
        save_inputs(os.path.join(d, name + "_in"),
                    [(v.name, rng.standard_normal([x.dim_value for x in v.type.tensor_type.shape.dim]).astype(np.float32))
                     for v in m.graph.input])


def col2im_reference(x, image, block, dilations, pads, strides):
    """ONNX's definition: each column entry (channel c, block offset k, window l) added into the
    zero-padded image at l's window start + k's dilated offset; the pads cut off."""
    r = len(image)
    n, ck, _ = x.shape
    k_total = int(np.prod(block))
    padded = [image[i] + pads[i] + pads[i + r] for i in range(r)]
    grid = [(padded[i] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1 for i in range(r)]
    out = np.zeros([n, ck // k_total] + padded)
    for c in range(ck // k_total):
        for k, at in enumerate(itertools.product(*[range(b) for b in block])):
            for l, window in enumerate(itertools.product(*[range(g) for g in grid])):
                pos = tuple(window[i] * strides[i] + at[i] * dilations[i] for i in range(r))
                out[(slice(None), c) + pos] += x[:, c * k_total + k, l]
    return out[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(r))]


def check_col2im(d, outputs):
    m = onnx.load(os.path.join(d, "col2im_nd.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    feeds = {}
    for f in glob.glob(os.path.join(d, "col2im_nd_in", "*.pb")):
        t = onnx.load_tensor(f)
        feeds[t.name] = numpy_helper.to_array(t)
    for k, n in enumerate(m.graph.node):
        attrs = {a.name: list(a.ints) for a in n.attribute}
        want = col2im_reference(feeds[n.input[0]].astype(np.float64), list(inits[n.input[1]]), list(inits[n.input[2]]),
                                attrs["dilations"], attrs["pads"], attrs["strides"])
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(outputs, "output_%d.pb" % k)))
        assert got.shape == want.shape, "%s: shape %s, want %s" % (n.output[0], got.shape, want.shape)
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err <= 1e-6, "%s: %.2e of the largest magnitude" % (n.output[0], err)
    print("%d outputs as numpy computes them" % len(m.graph.node))


def compare(a, b, tolerance=1e-6):
    files = sorted(glob.glob(os.path.join(a, "output_*.pb")))
    assert files, "no outputs in " + a
    for f in files:
        want = numpy_helper.to_array(onnx.load_tensor(f))
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(b, os.path.basename(f))))
        assert want.dtype == got.dtype and want.shape == got.shape, "%s: %s %s against %s %s" % (
            os.path.basename(f), want.dtype, want.shape, got.dtype, got.shape)
        if np.issubdtype(want.dtype, np.floating):
            err = np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30)
            assert err <= tolerance, "%s: %.2e of the largest magnitude" % (os.path.basename(f), err)
        else:
            assert np.array_equal(want, got), "%s: %s\n  want %s\n  got  %s" % (os.path.basename(f), want.dtype,
                                                                               want.ravel(), got.ravel())
    print("%d outputs equal" % len(files))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "col2im":
        check_col2im(sys.argv[2], sys.argv[3])
    else:
        compare(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1e-6)
