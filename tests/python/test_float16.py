"""The onnxconverter-common drop-ins on the model zoo (tests/zoo/zoo_reference.py's eval exports of
torchvision models and the transformers built from torch modules): a script written against
onnxconverter-common runs with only its import changed, and its output passes onnx.checker's full
check, runs in ONNX Runtime (node, tests/ort) and is at least as accurate as a whole-model float16
conversion of the same model (zoo_reference.py's emulated all-float16 forward: every weight,
input and op result rounded to float16, what onnxconverter-common's conversion computes). The
comparison with onnxconverter-common itself, which CI cannot install, is
tests/python/compare_onnxconverter_common.py (its table is in the README)."""
import os
import subprocess

import numpy as np
import onnx
import pytest

from conftest import BUILD, ROOT
from onnx_amp import auto_mixed_precision, float16
import onnx_amp

ZOO = ["resnet18", "mobilenet_v2", "shufflenet_v2_x0_5", "tiny_transformer", "tiny_gpt", "tiny_attention", "tiny_encoder"]
CACHE = os.path.join(BUILD, "tests", "python", "zoo")


def eval_export(name):
    """zoo_reference.py NAME --eval, once per build: eval.onnx, eval_input.npz, eval_ref.npz."""
    d = os.path.join(CACHE, name)
    if not os.path.exists(os.path.join(d, "eval_ref.npz")):
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "zoo", "zoo_reference.py"), name, d,
                            "--eval"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert r.returncode == 0, r.stdout[-2000:]
    return d, np.load(os.path.join(d, "eval_input.npz"))["input"], np.load(os.path.join(d, "eval_ref.npz"))


def relative(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def users_script(float16_module, model_path, out_path, keep_io_types):
    """What a user of onnxconverter-common writes; only the module passed in differs."""
    model = onnx.load(model_path)
    model_fp16 = float16_module.convert_float_to_float16(model, keep_io_types=keep_io_types)
    onnx.save(model_fp16, out_path)
    return model_fp16


def ort(path, x, work):
    from zoo_check import ort_run
    got, why = ort_run(path, x, work)
    assert got is not None, why
    return got


@pytest.mark.parametrize("name", ZOO)
def test_drop_in_on_the_zoo(work, name):
    d, x, ref = eval_export(name)
    out = os.path.join(work, "fp16.onnx")
    users_script(float16, os.path.join(d, "eval.onnx"), out, keep_io_types=True)
    onnx.checker.check_model(out, full_check=True)
    ours = relative(ort(out, x, work), ref["fp32"])
    naive = relative(ref["fp16"], ref["fp32"])
    assert ours <= naive, "ONNX Runtime error %.2e, a whole-model float16 conversion's %.2e" % (ours, naive)

    # keep_io_types=False (onnxconverter-common's default): the script feeds float16 where the
    # model asks for it. The float16 output adds one rounding of its own (at most half an ulp of
    # the largest output, 2**-11 relative), which the emulated conversion's float32 output lacks.
    m = users_script(float16, os.path.join(d, "eval.onnx"), out, keep_io_types=False)
    onnx.checker.check_model(out, full_check=True)
    elem = m.graph.input[0].type.tensor_type.elem_type
    feed = x.astype(np.float16) if elem == onnx.TensorProto.FLOAT16 else x
    assert x.dtype != np.float32 or elem == onnx.TensorProto.FLOAT16, "a float image input stays float32"
    assert m.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    ours = relative(ort(out, feed, work), ref["fp32"])
    assert ours <= max(naive, 2.0 ** -11), "ONNX Runtime error %.2e, a whole-model float16 conversion's %.2e" % (ours, naive)


def test_arguments_of_onnxconverter_common(work):
    """op_block_list and node_block_list keep those nodes in float32; the clamping arguments are
    accepted; the weights are stored in float16."""
    d, x, ref = eval_export("tiny_transformer")
    model = onnx.load(os.path.join(d, "eval.onnx"))
    first_matmul = [n.name for n in model.graph.node if n.op_type == "MatMul"][0]
    m = float16.convert_float_to_float16(model, min_positive_val=1e-6, max_finite_val=6e4, keep_io_types=True,
                                         disable_shape_infer=True, op_block_list=["Conv"],
                                         node_block_list=[first_matmul], check_fp16_ready=False)
    decisions = {n.name: n.doc_string for n in m.graph.node}
    assert decisions[first_matmul].startswith("amp: fp32 blocked"), decisions[first_matmul]
    conv = [n for n in m.graph.node if n.op_type == "Conv"][0]
    assert conv.doc_string.startswith("amp: fp32"), conv.doc_string
    weights = {t.name: t.data_type for t in m.graph.initializer}
    assert onnx.TensorProto.FLOAT16 in weights.values()
    # Converting the converted model again changes nothing (onnxconverter-common refuses, since
    # for it a second conversion breaks the model).
    again = float16.convert_float_to_float16(m, keep_io_types=True, op_block_list=["Conv"],
                                             node_block_list=[first_matmul])
    assert again.SerializeToString() == m.SerializeToString()
    path = os.path.join(work, "m.onnx")
    onnx.save(model, path)
    assert float16.convert_float_to_float16_model_path(path, keep_io_types=True).SerializeToString() == \
        float16.convert_float_to_float16(model, keep_io_types=True).SerializeToString()


def test_auto_mixed_precision(work):
    d, x, ref = eval_export("tiny_transformer")
    model = onnx.load(os.path.join(d, "eval.onnx"))
    feed = {"input": x}
    m = auto_mixed_precision.auto_convert_mixed_precision(model, feed, rtol=0.01, atol=0.001, keep_io_types=True)
    path = os.path.join(work, "auto.onnx")
    onnx.save(m, path)
    onnx.checker.check_model(path, full_check=True)
    fp32 = onnx_amp.run(model, feed)
    got = onnx_amp.run(m, feed)
    for k in fp32:
        assert np.allclose(fp32[k], got[k], rtol=0.01, atol=0.001)
    assert relative(ort(path, x, work), ref["fp32"]) < 0.05

    with pytest.raises(ValueError, match="cannot both be"):
        auto_mixed_precision.auto_convert_mixed_precision(model, feed)


def test_auto_mixed_precision_keeps_the_failing_nodes_in_fp32(work):
    """A check the plain rewrite fails: the bisection keeps nodes in float32 until it passes, and
    the validate_fn sees the fp32 and float16 outputs."""
    seen = []

    def validate(res1, res2):
        seen.append((res1[0].dtype, res2[0].dtype))
        return True

    x = np.load(os.path.join(ROOT, "models", "mlp.sample.npz"))["input"]
    model = onnx.load(os.path.join(ROOT, "models", "mlp.onnx"))
    m = auto_mixed_precision.auto_convert_mixed_precision(model, {"input": x}, validate, rtol=1e-5, atol=1e-6,
                                                          keep_io_types=False)
    fp32 = onnx_amp.run(model, {"input": x})["logits"]
    elem = m.graph.input[0].type.tensor_type.elem_type
    got = onnx_amp.run(m, {"input": x.astype(np.float16) if elem == onnx.TensorProto.FLOAT16 else x})["logits"]
    assert np.allclose(fp32, got.astype(np.float32), rtol=1e-5, atol=1e-6)
    kept = [n for n in m.graph.node if n.doc_string.startswith("amp: fp32 blocked")]
    assert kept, [n.doc_string for n in m.graph.node]
    assert seen and seen[0] == (np.float32, np.float32)
