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
    again = float16.convert_float_to_float16(m, min_positive_val=1e-6, keep_io_types=True, op_block_list=["Conv"],
                                             node_block_list=[first_matmul])
    assert again.SerializeToString() == m.SerializeToString()
    path = os.path.join(work, "m.onnx")
    onnx.save(model, path)
    assert float16.convert_float_to_float16_model_path(path, keep_io_types=True).SerializeToString() == \
        float16.convert_float_to_float16(model, keep_io_types=True).SerializeToString()


def test_min_positive_val_keeps_tiny_weights_from_flushing_to_zero():
    """min_positive_val as onnxconverter-common documents it: a non-zero value whose magnitude is
    below it becomes +-min_positive_val, then float16 (so an epsilon does not flush to zero); zero
    stays zero; 0 turns it off (IEEE rounding: 1e-9 becomes 0)."""
    from onnx import helper, numpy_helper
    w = np.array([[1e-9, -3e-8, 0.0, 0.5], [-1e-12, 2e-7, -0.25, 7e-8]], np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 4])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])

    def stored(m):
        return numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "w"))

    for min_positive in (1e-7, 1e-6):
        expected = np.where((w > 0) & (w < min_positive), min_positive, w)
        expected = np.where((w < 0) & (w > -min_positive), -min_positive, expected).astype(np.float16)
        got = stored(float16.convert_float_to_float16(model, min_positive_val=min_positive, keep_io_types=True))
        assert got.dtype == np.float16 and np.array_equal(got, expected), (got, expected)
    got = stored(float16.convert_float_to_float16(model, min_positive_val=0, keep_io_types=True))
    assert np.array_equal(got, w.astype(np.float16)) and got[0, 0] == 0
    _, report = onnx_amp.rewrite(model, weights="lowp", min_magnitude=1e-7)
    assert sum(c["raised_to_min_magnitude"] for c in report["clamps"]) == 4, report["clamps"]


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


def convnext_stage_export(path):
    """torchvision's ConvNeXt pieces (its stem, CNBlock, LayerNorm2d + strided Conv downsampling),
    random weights with layer scale 1 so that every block counts, exported in eval mode as
    zoo_reference.py exports the zoo; returns an input image batch."""
    import torch
    from torchvision.models.convnext import CNBlock, LayerNorm2d
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 4, stride=4), LayerNorm2d(32),
        CNBlock(32, 1.0, 0.0), CNBlock(32, 1.0, 0.0),
        LayerNorm2d(32), torch.nn.Conv2d(32, 64, 2, stride=2),
        CNBlock(64, 1.0, 0.0), torch.nn.AdaptiveAvgPool2d(1), LayerNorm2d(64), torch.nn.Flatten(1),
        torch.nn.Linear(64, 10)).eval()
    x = torch.randn(2, 3, 64, 64)
    torch.onnx.export(net, x, path, input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.EVAL, opset_version=14)
    return x.numpy()


def test_casts_beside_compute_ops_round_nowhere_in_onnx_runtime(work):
    """ONNX Runtime's CPU provider computes a float16 model's arithmetic in float32: it casts around
    each node it has no float16 kernel for and removes the Cast pairs that meet, so what is left of
    a float16 model's error there is its weights and the values that pass through a node it does
    run in float16 (Transpose, Reshape) between Casts. With the Casts beside the ops that compute
    (cast_placement="compute", the default) the drop-in's ConvNeXt blocks (LayerNorm in fp32
    between Transposes) are, with ONNX Runtime's graph optimizations off (its Cast handling alone),
    as accurate as the float32 model with only its weights rounded to float16; with them at the
    consumers ("consumer", as autocast casts) the Transposes round. At ONNX Runtime's default level
    its MatMul + Add fusion puts float16 Reshapes of its own next to some Casts, and compute is
    still the more accurate. amp-run, which computes float16 nodes in float16, gives the same values
    for both placements (data movement and selection commute with rounding)."""
    from onnx import numpy_helper
    from zoo_check import ort_run
    src = os.path.join(work, "convnext_stage.onnx")
    x = convnext_stage_export(src)
    m = onnx.load(src)
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name))
    weights_only = os.path.join(work, "weights_only.onnx")
    onnx.save(m, weights_only)

    compute = os.path.join(work, "compute.onnx")
    users_script(float16, src, compute, keep_io_types=True)
    onnx.checker.check_model(compute, full_check=True)
    consumer = os.path.join(work, "consumer.onnx")
    onnx.save(onnx_amp.rewrite(src, dtype="fp16", weights="lowp", cast_placement="consumer")[0], consumer)
    moved = [n.op_type for n in onnx.load(compute).graph.node if n.doc_string.startswith("amp: fp32 next-to-fp32")]
    assert "Transpose" in moved, moved

    def error(path, level):
        got, why = ort_run(path, x, work, level)
        assert got is not None, why
        return relative(got, ort_run(src, x, work, level)[0])

    floor = error(weights_only, "disabled")
    err = {p: error(p, "disabled") for p in (compute, consumer)}
    assert err[compute] <= floor * 1.02 + 1e-7, "compute %.3e, weights-only %.3e" % (err[compute], floor)
    assert err[consumer] > err[compute] * 1.1, "consumer %.3e, compute %.3e" % (err[consumer], err[compute])
    assert error(compute, None) < error(consumer, None)

    runs = [onnx_amp.run(p, {"input": x})["logits"] for p in (compute, consumer)]
    assert np.array_equal(runs[0], runs[1])


def patch_encoder_export(path):
    """A ViT-style encoder from torch modules (a strided Conv patch embedding, flattened and
    transposed into tokens; two pre-norm blocks of nn.MultiheadAttention and a GELU MLP on 3-D
    tokens; LayerNorm, mean over tokens, a head), random weights, exported at opset 17 as
    zoo_reference.py exports the zoo; returns an input image batch."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.attn = torch.nn.MultiheadAttention(d, 4, batch_first=True)
            self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    class Encoder(torch.nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.embed = torch.nn.Conv2d(3, d, 8, stride=8)
            self.blocks = torch.nn.Sequential(Block(d), Block(d))
            self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, 10)

        def forward(self, img):
            x = self.embed(img).flatten(2).transpose(1, 2)
            return self.head(self.ln(self.blocks(x)).mean(1))

    torch.manual_seed(0)
    net = Encoder().eval()
    x = torch.randn(2, 3, 64, 64)
    torch.onnx.export(net, x, path, input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.EVAL, opset_version=17)
    return x.numpy()


def test_onnx_runtime_rounds_only_what_the_float16_products_compute(work):
    """Where ONNX Runtime's CPU provider keeps a float16 rounding (a Cast to float16 read by a
    float16 Reshape or Transpose it runs as it is, see the test above), the drop-in's model leaves it
    only the products' results, which a float16 model computes in float16. Two placements make that
    so (cast_placement "compute"): the patch embedding's Reshape and Transpose, whose float16 values
    a LayerNorm reads beside the residual Add, run float32 with the Cast back to float16 beside the
    Add (colouring step 6); and each linear layer on 3-D tokens read from a LayerNorm is rewritten on
    2-D rows (flatten-linear), because ONNX Runtime's MatMul + Add fusion otherwise puts a float16
    Reshape of its own between the LayerNorm's Cast and the Gemm. With the Casts at the consumers
    ("consumer") the LayerNorms' and the embedding's outputs are rounded there. amp-run, which
    computes float16 nodes in float16, gives the same bits for both placements; the drop-in's model
    is the more accurate in ONNX Runtime, and a second conversion changes nothing."""
    from ort_fp16_evidence import ort_optimized_graph, rounding_sites
    from zoo_check import ort_run
    src = os.path.join(work, "encoder.onnx")
    x = patch_encoder_export(src)
    compute = os.path.join(work, "compute.onnx")
    m = users_script(float16, src, compute, keep_io_types=True)
    onnx.checker.check_model(compute, full_check=True)
    consumer = os.path.join(work, "consumer.onnx")
    onnx.save(onnx_amp.rewrite(src, dtype="fp16", weights="lowp", cast_placement="consumer")[0], consumer)

    ops = [n.op_type for n in m.graph.node]
    moved = [n.op_type for n in m.graph.node if n.doc_string.startswith("amp: fp32 next-to-fp32")]
    assert ops.count("Flatten") == 4, ops  # the attentions' input projections and the first MLP layers
    assert "Reshape" in moved and "Transpose" in moved, moved

    ref, why = ort_run(src, x, work)
    assert ref is not None, why
    errors = {}
    sites = {}
    for path in (compute, consumer):
        got, _ = ort_run(path, x, work)
        errors[path] = relative(got, ref)
        sites[path] = rounding_sites(*ort_optimized_graph(path, work)[:2])
    products = {"Gemm", "MatMul", "FusedMatMul"}
    assert sites[compute] and set(sites[compute]) <= products, sites[compute]
    assert sites[consumer]["LayerNormalization"] >= 4, sites[consumer]
    assert errors[compute] < errors[consumer], errors

    runs = [onnx_amp.run(p, {"input": x})["logits"] for p in (compute, consumer)]
    assert np.array_equal(runs[0], runs[1])
    assert float16.convert_float_to_float16(m, keep_io_types=True).SerializeToString() == m.SerializeToString()
