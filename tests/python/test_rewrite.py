"""onnx_amp.rewrite against amp-rewrite on the same models and options: the same bytes, the same
report (pass timings aside), the same error lines."""
import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import onnx
import pytest

import onnx_amp
from conftest import ROOT, error_line, model, tool

# (model, amp-rewrite flags, the same as keyword arguments)
CASES = [
    ("cnn.onnx", [], {}),
    ("gpt.onnx", ["--dtype", "bf16", "--weights", "lowp"], {"dtype": "bf16", "weights": "lowp"}),
    ("mlp.onnx", ["--no-keep-io-types", "--weights", "lowp"], {"keep_io_types": False, "weights": "lowp"}),
    ("gpt.onnx", ["--block-node", ".*attn.*", "--allow=-Gemm"], {"block_nodes": [".*attn.*"], "allow": ["-Gemm"]}),
    ("cnn.onnx", ["--deny", "Relu", "--dtype", "bf16"], {"deny": "Relu", "dtype": "bf16"}),
    ("gpt.onnx", ["--cast-placement", "consumer", "--weights", "lowp", "--min-magnitude", "1e-7"],
     {"cast_placement": "consumer", "weights": "lowp", "min_magnitude": 1e-7}),
]


def provenance_as_the_command(model_bytes):
    """The bytes with the provenance of list edits that decision records carry ("put on the deny
    list (keyword arguments)") spelled as amp-rewrite spells its own ("(command line)"): the one
    difference between the two rewrites of the same options."""
    m = onnx.ModelProto.FromString(model_bytes)
    for n in m.graph.node:
        n.doc_string = n.doc_string.replace("(keyword arguments)", "(command line)")
    return m.SerializeToString()


def without_timings(report):
    for p in report["passes"]:
        p.pop("seconds")
    return report


def amp_rewrite(path, out, flags):
    rc, _, err = tool("amp-rewrite", path, "-o", out, "--report", out + ".json", *flags)
    assert rc == 0, err
    with open(out, "rb") as f, open(out + ".json") as r:
        return f.read(), json.load(r)


@pytest.mark.parametrize("name,flags,kwargs", CASES)
def test_same_bytes_and_report_as_amp_rewrite(work, name, flags, kwargs):
    path = model(name)
    theirs, their_report = amp_rewrite(path, os.path.join(work, "cmd.onnx"), flags)

    edits = any(k in kwargs for k in ("allow", "deny", "infer", "clear"))
    same = provenance_as_the_command if edits else (lambda b: b)

    ours, report = onnx_amp.rewrite(path, **kwargs)
    assert isinstance(ours, onnx.ModelProto)
    assert same(ours.SerializeToString()) == theirs
    their_report["output"] = ""
    assert json.loads(json.dumps(without_timings(report)).replace("(keyword arguments)", "(command line)")) == \
        without_timings(dict(their_report))

    # From a ModelProto: the same model out.
    again, _ = onnx_amp.rewrite(onnx.load(path), **kwargs)
    assert same(again.SerializeToString()) == theirs

    # Written to a file, as -o writes it.
    out = os.path.join(work, "py.onnx")
    written, report = onnx_amp.rewrite(path, output=out, **kwargs)
    with open(out, "rb") as f:
        assert same(f.read()) == theirs
    assert same(written.SerializeToString()) == theirs
    assert report["output"] == out


def test_external_data_written_as_amp_rewrite_writes_it(work):
    """A model whose weight lies in external data: the rewrite keeps it external, the same bytes in
    both files as amp-rewrite's (each in its own folder, so the files' names match)."""
    src = os.path.join(work, "big.onnx")
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "frontends", "external_heavy_model.py"), src],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    for d in ("cmd", "py"):
        os.makedirs(os.path.join(work, d))
    theirs, _ = amp_rewrite(src, os.path.join(work, "cmd", "out.onnx"), ["--weights", "lowp"])
    _, report = onnx_amp.rewrite(src, weights="lowp", output=os.path.join(work, "py", "out.onnx"))
    with open(os.path.join(work, "py", "out.onnx"), "rb") as f:
        assert f.read() == theirs
    data = [open(os.path.join(work, d, "out.onnx.data"), "rb").read() for d in ("cmd", "py")]
    assert data[0] == data[1] and len(data[0]) == 500000  # the 250x1000 weight in fp16
    assert report["external_data"] == os.path.join(work, "py", "out.onnx.data")
    # Without output= the weights come back inline, in one ModelProto.
    inline, _ = onnx_amp.rewrite(src, weights="lowp")
    w = [t for t in inline.graph.initializer if t.name == "w"][0]
    assert w.data_type == onnx.TensorProto.FLOAT16 and len(w.raw_data) == 500000 and not w.external_data


def test_report_is_the_decisions_as_python_data():
    _, report = onnx_amp.rewrite(model("cnn.onnx"))
    convs = [n for n in report["nodes"] if n["op"] == "Conv"]
    assert convs and all(n["precision"] == "fp16" and n["rule"] == "allow-list" for n in convs), convs


def bad_models(work):
    truncated = os.path.join(work, "truncated.onnx")
    with open(model("cnn.onnx"), "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    return [truncated, model("cnn.train.onnx.missing"), os.path.join(ROOT, "models", "README.md")]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_errors_are_the_commands_lines(work, which):
    path = bad_models(work)[which]
    rc, _, err = tool("amp-rewrite", path, "-o", os.path.join(work, "out.onnx"))
    assert rc == 2
    with pytest.raises(onnx_amp.InputError) as e:
        onnx_amp.rewrite(path)
    assert str(e.value) == error_line(err, "amp-rewrite")
    assert isinstance(e.value, ValueError) and isinstance(e.value, onnx_amp.Error)


def test_bad_settings_are_input_errors():
    with pytest.raises(onnx_amp.InputError, match="'NotAnOp' on the deny list .keyword arguments. is not an ONNX op"):
        onnx_amp.rewrite(model("mlp.onnx"), deny=["NotAnOp"])
    with pytest.raises(onnx_amp.InputError, match="unknown low-precision type 'fp8'"):
        onnx_amp.rewrite(model("mlp.onnx"), dtype="fp8")


def calibration_models(work):
    rc = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "frontends", "calibration_models.py"), work])
    assert rc.returncode == 0
    return os.path.join(work, "overflow.onnx"), dict(np.load(os.path.join(work, "calib.npz")))


def test_calibrate_keeps_what_amp_rewrite_keeps(work):
    """calibrate= is amp-rewrite --calibrate: on a model whose fc2 overflows fp16 on the data, the
    same bytes (the same nodes kept fp32 with the same measurements in their records) and the same
    calibration report, timings aside."""
    path, feeds = calibration_models(work)
    out = os.path.join(work, "cmd.onnx")
    rc, _, err = tool("amp-rewrite", path, "-o", out, "--report", out + ".json", "--calibrate",
                      os.path.join(work, "calib.npz"))
    assert rc == 0, err
    ours, report = onnx_amp.rewrite(path, calibrate=feeds)
    with open(out, "rb") as f, open(out + ".json") as r:
        assert ours.SerializeToString() == f.read()
        theirs = json.load(r)["calibration"]
    kept = sorted(k["node"] for k in report["calibration"]["kept"])
    assert kept == sorted(k["node"] for k in theirs["kept"]) == ["fc2", "fc3", "relu2"]
    assert report["calibration"]["error_calibrated"] == theirs["error_calibrated"]
    fc2 = next(n for n in report["nodes"] if n["node"].split(" ")[0] == "fc2")
    assert fc2["rule"] == "calibration" and fc2["measurements"]["own_error"] == "inf"


def test_calibrate_below_the_floor_is_an_input_error(work):
    path, feeds = calibration_models(work)
    with pytest.raises(onnx_amp.InputError, match="floor"):
        onnx_amp.rewrite(path, calibrate=feeds, max_error=1e-12)
    _, report = onnx_amp.rewrite(path, calibrate=feeds, max_error=1e-12, write_unmet=True)
    assert report["calibration"]["kept"]
