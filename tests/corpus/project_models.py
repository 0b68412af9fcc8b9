#!/usr/bin/python3
"""Models this project can make itself, for the corpus harness (corpus_check.py --project).

    /usr/bin/python3 tests/corpus/project_models.py OUT_DIR [--zoo NAME ...]

Writes OUT_DIR/NAME.onnx for each model below (torch 1.13's exporter, eval mode, as users export
for inference), and copies the shipped demo models (models/{mlp,cnn,gpt}.onnx). With --zoo, also
tests/zoo/zoo_reference.py's eval export of each named torchvision / transformer model
(zoo_NAME.onnx; about 5-20 s each).

The torch exports are the patterns the corpus's third-party files showed, made small:
  linear_bn       Linear (no bias) then BatchNorm1d in eval mode: MatMul + BatchNormalization, the
                  pair ONNX Runtime's MatMul+BN fusion folds; with fp16 data and fp32 parameters it
                  refused to load the fp16 rewrite. Then a Linear with bias (Gemm) + BatchNorm1d.
  linear_bn_3d    a weight times [N, C, L] activations (MatMul) then BatchNorm1d over C.
  lstm, gru, rnn  nn.LSTM / nn.GRU / nn.RNN, two layers, batch_first, opset 14.
  bilstm          a bidirectional LSTM with initial states as inputs (the byte-level LSTM's form).
  prelu_conv      Conv2d + PReLU (per-channel slope), mean pooling, Linear.
  softmax11_axis1 opset 11, written with onnx.helper (torch exports softmax(dim=1) as Transpose,
                  Softmax on the last axis, Transpose): Softmax and LogSoftmax with axis 1 of a
                  [2, 3, 4] tensor, which at opset 11 flatten to [2, 12]; what the upgrade to opset
                  17 must keep.
  ort_norms       opset 14, written as ONNX Runtime's transformer optimizer writes them: its
                  LayerNormalization and SimplifiedLayerNormalization (RMS norm) in the default
                  domain, which ONNX defines only from opset 17 (LayerNormalization) or not at all.
  loop_ops        opset 14, onnx.helper: a Loop (3 trips) whose body runs issue 31's ops on the
                  carried values (Sum, PRelu, LRN, ReduceProd, an LSTM whose initial state is
                  carried), reads a value the main graph computes, and stacks scan outputs.
  while_if        opset 13, onnx.helper: a while loop (cond computed by the body from the data) with
                  an If in its body whose else branch reads the main graph's input, two levels
                  out; and an If on the data in the main graph.
  opset18 .. opset22 onnx.helper, at the opsets newer than ONNX 1.12's 17 (torch 2's exporters and
                  current converters write them): each changed op in its new form (Reduce axes as
                  an input, Split's num_outputs, Pad's axes, Resize's axes, Mish, GroupNormalization
                  per group (18) and per channel (21), Cast's saturate, AveragePool's dilations,
                  Gelu in both forms, QuantizeLinear's output_dtype) with the IR version each
                  opset came with; what the import reads through its opset-17 form.
  classical_ml    onnx.helper: ai.onnx.ml's Scaler, ArrayFeatureExtractor, OneHotEncoder and
                  FeatureVectorizer over float, double and int64 tensors, the edge cases of each
                  (1-D inputs, cut and padded features, values of no category).
  opset18_bitwise onnx.helper, opset 18: BitwiseAnd, Or, Xor and Not in all eight integer types on
                  each type's extremes, -1, 0, 1 and alternating bits, broadcast; what amp-run runs
                  by its kernels and the rewrite writes as opset-17 arithmetic on the bits.
  opset18_col2im  onnx.helper, opset 18: Col2Im 2-D (dilations, asymmetric pads, strides; a 1x1
                  block); the rewrite writes it as a ScatterElements add.
  opset18_scatter_extremes  onnx.helper, opset 18: ScatterElements and ScatterND with reduction max
                  and min (repeated and negative indices, float and integer data); the rewrite
                  compares the indices with every row.
  opset19_deform_conv  onnx.helper, opset 19: DeformConv with groups, offset groups, mask, bias,
                  stride, dilation and pads, and a plain one; the rewrite samples with
                  GatherElements.
  opset23, opset24  onnx.helper: ONNX's Attention (3-D with grouped key/value heads, a past cache and
                  the present state, causal; 4-D with a bool mask, softcap, softmax_precision and the
                  scores output; an integer mask; nonpad_kv_seqlen with the causal frontier per
                  batch), RMSNormalization, RotaryEmbedding (interleaved with position ids; partial,
                  without), Swish, TensorScatter (linear and circular), TopK: what the import
                  lowers to opset-17 ops.
  ms_qlinear      opset 13 + com.microsoft, as ONNX Runtime's quantizer writes the QOperator format: a
                  chain of its contrib QLinearSigmoid, QLinearLeakyRelu, QLinearAdd, QLinearMul,
                  QLinearConcat, QLinearAveragePool (channels_last) and QLinearGlobalAveragePool
                  between a QuantizeLinear and a DequantizeLinear.
  ms_transformer  opset 14 + com.microsoft, as ONNX Runtime's transformer optimizer writes a block:
                  SkipLayerNormalization (with bias and its sum output), FusedMatMul (transB,
                  alpha), FastGelu with bias, BiasGelu, Gelu, QuickGelu, SkipSimplifiedLayerNormalization.
  ms_bert         opset 14 + com.microsoft, the optimizer's BERT ops: EmbedLayerNormalization (its
                  mask_index from a mask computed from the ids), Attention with those [B] end
                  positions, Attention with a raw [B, T] mask and unidirectional, SkipLayerNormalization.
  ms_attention    opset 14 + com.microsoft, the optimizer's Attention in its other forms: past keys and
                  values (a GPT-2 decoding step: [2, B, N, L, H] in, the present state out) with a
                  raw [B, L + S] mask of values other than 0 and 1 and unidirectional; q, k and v of
                  different widths (qkv_hidden_sizes) with [2B] end and start positions; a
                  [B, S, T] mask with a relative position bias; [B] end positions, unidirectional,
                  with the present state and no past.
  local_functions opset 18, IR 9, as torch 2's dynamo exporter and onnxscript write models: calls of
                  model-local functions (one calling another twice), attribute references given by
                  the call or defaulted (IR 9's attribute_proto), bodies using opset-18 forms.
The files are deterministic (fixed seeds).
"""
import argparse
import os
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class LinearBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32, bias=False)
        self.bn = torch.nn.BatchNorm1d(32)
        self.fc2 = torch.nn.Linear(32, 8)
        self.bn2 = torch.nn.BatchNorm1d(8)
        self.out = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.out(torch.relu(self.bn2(self.fc2(torch.relu(self.bn(self.fc(x)))))))


class LinearBN3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(32, 16) / 4)
        self.bn = torch.nn.BatchNorm1d(32)

    def forward(self, x):  # x [N, 16, L]
        return self.bn(torch.matmul(self.w, x))


class Recurrent(torch.nn.Module):
    def __init__(self, cell, bidirectional=False, states=False):
        super().__init__()
        self.rnn = cell(8, 12, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.head = torch.nn.Linear(24 if bidirectional else 12, 3)
        self.states = states

    def forward(self, x, *state):
        y, _ = self.rnn(x, tuple(state) if len(state) > 1 else (state[0] if state else None))
        return self.head(y)


class PReLUConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.act = torch.nn.PReLU(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.act(self.conv(x)).mean(dim=(2, 3)))


def softmax11_axis1(path):
    import onnx
    from onnx import helper
    nodes = [helper.make_node("Softmax", ["x"], ["softmax"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["log_softmax"], axis=1)]
    graph = helper.make_graph(nodes, "softmax11", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3, 4])
                               for n in ("softmax", "log_softmax")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="project_models.py"), path)


def ort_norms(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), n) for n in ("s1", "b1", "s2")]
    nodes = [helper.make_node("LayerNormalization", ["x", "s1", "b1"], ["ln"], axis=-1, epsilon=1e-6),
             helper.make_node("SimplifiedLayerNormalization", ["ln", "s2"], ["y"], axis=-1, epsilon=1e-6)]
    graph = helper.make_graph(nodes, "ort_norms", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 8])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="project_models.py")
    onnx.save(m, path)  # not onnx.checker-valid: ONNX knows neither op at opset 14 (ONNX Runtime does)


def loop_ops(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    T = onnx.TensorProto
    rng = np.random.default_rng(5)
    f32 = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go"),
             f32(2.0, "two"), f32(0.5, "half"), f32(rng.uniform(0.1, 0.5, (4, 1, 1)), "slope"),
             f32(np.zeros((1, 2, 4)), "h0"), f32(rng.standard_normal((1, 16, 4)) * 0.5, "W"),
             f32(rng.standard_normal((1, 16, 4)) * 0.5, "R"), f32(rng.standard_normal((1, 32)) * 0.1, "B"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "hw")]
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Sum", ["s", "xs", "s"], ["a"]),
         helper.make_node("PRelu", ["a", "slope"], ["b"]),
         helper.make_node("LRN", ["b"], ["l"], size=3, alpha=1e-2, beta=0.75, bias=1.0),
         helper.make_node("Mul", ["l", "half"], ["s_next"]),
         helper.make_node("ReduceProd", ["s_next"], ["p"], axes=[2, 3], keepdims=0),
         helper.make_node("LSTM", ["seq", "W", "R", "B", "", "h"], ["", "h_next"], hidden_size=4),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "loop_body",
        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("s", T.FLOAT, [2, 4, 3, 3]), vi("h", T.FLOAT, [1, 2, 4])],
        [vi("c_out", T.BOOL, []), vi("s_next", T.FLOAT, [2, 4, 3, 3]), vi("h_next", T.FLOAT, [1, 2, 4]),
         vi("p", T.FLOAT, [2, 4])])
    nodes = [helper.make_node("Mul", ["x", "two"], ["xs"]),
             helper.make_node("Loop", ["trips", "go", "x", "h0"], ["x_final", "h_final", "prods"], body=body)]
    graph = helper.make_graph(nodes, "loop_ops", [vi("x", T.FLOAT, [2, 4, 3, 3]), vi("seq", T.FLOAT, [5, 2, 4])],
                              [vi("x_final", T.FLOAT, [2, 4, 3, 3]), vi("h_final", T.FLOAT, [1, 2, 4]),
                               vi("prods", T.FLOAT, [3, 2, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="project_models.py"), path)


def while_if(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    T = onnx.TensorProto
    vi = helper.make_tensor_value_info
    scalar = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)
    inits = [numpy_helper.from_array(np.array(10, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go"),
             scalar(0.3, "big"), scalar(0.2, "small"), scalar(0.5, "half"), scalar(0.0, "zero")]
    then_branch = helper.make_graph([helper.make_node("Mul", ["s", "half"], ["t"])], "halve", [], [vi("t", T.FLOAT, [3, 4])])
    else_branch = helper.make_graph([helper.make_node("Add", ["s", "x"], ["e"])], "add_input", [], [vi("e", T.FLOAT, [3, 4])])
    body = helper.make_graph(
        [helper.make_node("Abs", ["s"], ["abs"]),
         helper.make_node("ReduceMean", ["abs"], ["m"], keepdims=0),
         helper.make_node("Greater", ["m", "big"], ["sel"]),
         helper.make_node("If", ["sel"], ["r"], then_branch=then_branch, else_branch=else_branch),
         helper.make_node("Abs", ["r"], ["abs_r"]),
         helper.make_node("ReduceMean", ["abs_r"], ["m_r"], keepdims=0),
         helper.make_node("Greater", ["m_r", "small"], ["c_out"]),
         helper.make_node("ReduceMean", ["r"], ["mean"], keepdims=0)],
        "while_body", [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("s", T.FLOAT, [3, 4])],
        [vi("c_out", T.BOOL, []), vi("r", T.FLOAT, [3, 4]), vi("mean", T.FLOAT, [])])
    sig = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["sg"])], "sigmoid", [], [vi("sg", T.FLOAT, [3, 4])])
    tanh = helper.make_graph([helper.make_node("Tanh", ["x"], ["th"])], "tanh", [], [vi("th", T.FLOAT, [3, 4])])
    nodes = [helper.make_node("Loop", ["trips", "go", "x"], ["s_final", "means"], body=body),
             helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["branch"], then_branch=sig, else_branch=tanh)]
    graph = helper.make_graph(nodes, "while_if", [vi("x", T.FLOAT, [3, 4])],
                              [vi("s_final", T.FLOAT, [3, 4]), vi("means", T.FLOAT, ["iterations"]), vi("branch", T.FLOAT, [3, 4])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="project_models.py"), path)


def newer_opsets(out_dir):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(5)

    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    def save(name, opset, ir, nodes, inputs, outputs, inits):
        graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(o, F, shape) for o, shape in outputs],
                                  inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="project_models.py")
        m.ir_version = ir
        onnx.save(m, os.path.join(out_dir, name + ".onnx"))  # ONNX 1.12's checker knows none of these opsets

    x = helper.make_tensor_value_info("x", F, [2, 6, 4, 4])
    y = helper.make_tensor_value_info("y", F, [2, 7])
    z = helper.make_tensor_value_info("z", F, ["seq", 5])
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes23"], ["mean23"], keepdims=1),
        helper.make_node("ReduceMax", ["x"], ["max_all"], keepdims=0),
        helper.make_node("Constant", [], ["no_axes"], value=const("no_axes_value", np.zeros(0, np.int64))),
        helper.make_node("ReduceMin", ["x", "no_axes"], ["min_noop"], noop_with_empty_axes=1),
        helper.make_node("ReduceProd", ["x", "axes1"], ["prod1"], keepdims=0),
        helper.make_node("Split", ["y"], ["y0", "y1", "y2"], axis=1, num_outputs=3),
        helper.make_node("Split", ["z"], ["z0", "z1"], axis=0, num_outputs=2),
        helper.make_node("Pad", ["x", "pads", "pad_value", "axes23"], ["padded"], mode="constant"),
        helper.make_node("Resize", ["x", "", "scales"], ["resized"], mode="nearest", axes=[2, 3]),
        helper.make_node("Mish", ["x"], ["mish"]),
        helper.make_node("GroupNormalization", ["x", "gscale", "gbias"], ["group_norm"], num_groups=3, epsilon=1e-5),
    ]
    inits = [const("axes23", np.array([2, 3], np.int64)), const("axes1", np.array([1], np.int64)),
             const("pads", np.array([1, 2, 0, 1], np.int64)), const("pad_value", np.array(0.5, np.float32)),
             const("scales", np.array([2.0, 1.5], np.float32)),
             const("gscale", rng.standard_normal(3).astype(np.float32)),
             const("gbias", rng.standard_normal(3).astype(np.float32))]
    x_shape = [2, 6, 4, 4]
    save("opset18", 18, 8, nodes, [x, y, z],
         [("mean23", [2, 6, 1, 1]), ("max_all", []), ("min_noop", x_shape), ("prod1", [2, 4, 4]), ("y0", [2, 3]),
          ("y1", [2, 3]), ("y2", [2, 1]), ("z0", [None, 5]), ("z1", [None, 5]), ("padded", [2, 6, 5, 7]),
          ("resized", [2, 6, 8, 6]), ("mish", x_shape), ("group_norm", x_shape)], inits)

    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=onnx.TensorProto.FLOAT16, saturate=1),
        helper.make_node("Cast", ["x16"], ["x32"], to=F),
        helper.make_node("AveragePool", ["x32"], ["pooled"], kernel_shape=[2, 2], dilations=[1, 1], strides=[2, 2]),
        helper.make_node("Gelu", ["x"], ["gelu"]),
        helper.make_node("Gelu", ["x"], ["gelu_tanh"], approximate="tanh"),
        helper.make_node("ReduceMax", ["gelu", "axes1"], ["gelu_max"], keepdims=1),
    ]
    save("opset20", 20, 9, nodes, [x], [("pooled", [2, 6, 2, 2]), ("gelu", x_shape), ("gelu_tanh", x_shape),
                                         ("gelu_max", [2, 1, 4, 4])], [const("axes1", np.array([1], np.int64))])

    nodes = [
        helper.make_node("QuantizeLinear", ["x", "qscale"], ["q"], output_dtype=onnx.TensorProto.UINT8),
        helper.make_node("DequantizeLinear", ["q", "qscale"], ["dq"]),
        helper.make_node("GroupNormalization", ["x", "cscale", "cbias"], ["group_norm"], num_groups=2, epsilon=1e-5),
    ]
    save("opset21", 21, 10, nodes, [x], [("dq", x_shape), ("group_norm", x_shape)],
         [const("qscale", np.array(0.05, np.float32)), const("cscale", rng.standard_normal(6).astype(np.float32)),
          const("cbias", rng.standard_normal(6).astype(np.float32))])

    w = rng.standard_normal((8, 6, 3, 3)).astype(np.float32) * 0.2
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Gelu", ["conv"], ["act"]),
        helper.make_node("ReduceMean", ["act", "axes23"], ["pooled"], keepdims=0),
        helper.make_node("Gemm", ["pooled", "fc", "fcb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    save("opset22", 22, 10, nodes, [x], [("probs", [2, 5])],
         [const("w", w), const("b", rng.standard_normal(8).astype(np.float32)),
          const("axes23", np.array([2, 3], np.int64)), const("fc", rng.standard_normal((5, 8)).astype(np.float32)),
          const("fcb", rng.standard_normal(5).astype(np.float32))])

    # Opset 23: ONNX's Attention in its forms (3-D inputs with grouped key/value heads, a past
    # cache, causal, the present state out; 4-D with a bool mask hiding all keys of a query, softcap,
    # softmax_precision and the scores out; an integer mask; a float mask with a row of -inf, causal
    # with more keys than queries), RMSNormalization and RotaryEmbedding.
    B, T, P, D = 2, 5, 3, 4
    q3 = helper.make_tensor_value_info("q3", F, [B, T, 4 * D])
    kv3 = helper.make_tensor_value_info("kv3", F, [B, T, 2 * D])
    q4 = helper.make_tensor_value_info("q4", F, [B, 2, T, D])
    k4 = helper.make_tensor_value_info("k4", F, [B, 2, T + 1, D])
    h = helper.make_tensor_value_info("h", F, [B, T, 3 * 2 * D])
    hidden = [B, T, 3 * 2 * D]
    nodes = [
        helper.make_node("Attention", ["q3", "kv3", "kv3", "", "past_k", "past_v"], ["gqa", "present_k", "present_v"],
                         q_num_heads=4, kv_num_heads=2, is_causal=1),
        helper.make_node("Attention", ["q4", "k4", "k4", "bool_mask"], ["masked", "", "", "scores"], softcap=2.0,
                         qk_matmul_output_mode=1, softmax_precision=F, scale=0.3),
        # (mode 2 with the bool mask: ONNX Runtime writes -FLT_MAX where ONNX's definition adds -inf)
        helper.make_node("Attention", ["q4", "k4", "k4", "int_mask"], ["int_masked", "", "", "int_scores"],
                         qk_matmul_output_mode=2),
        helper.make_node("Attention", ["q4", "k4", "k4", "float_mask"], ["float_masked"], is_causal=1),
        helper.make_node("RMSNormalization", ["h", "rms_scale"], ["rms"], epsilon=1e-5),
        helper.make_node("RMSNormalization", ["h", "rms_scale_2d"], ["rms_axis1"], axis=1),
        helper.make_node("RotaryEmbedding", ["h", "cos", "sin", "position_ids"], ["rope_interleaved"], interleaved=1,
                         num_heads=3),
        helper.make_node("RotaryEmbedding", ["q4", "cos_b", "sin_b"], ["rope_partial"], rotary_embedding_dim=2),
    ]
    angles = rng.uniform(0, 6.3, (8, D)).astype(np.float32)
    angles_b = rng.uniform(0, 6.3, (B, T, 1)).astype(np.float32)
    mask = rng.uniform(size=(B, 1, T, T + 1)) > 0.3
    mask[0, 0, 1, :] = False  # a query that sees no key: a zero row (ONNX's errata; ONNX Runtime agrees)
    float_mask = rng.standard_normal((T, T + 1)).astype(np.float32)
    float_mask[2, :] = -np.inf
    inits = [const("past_k", rng.standard_normal((B, 2, P, D)).astype(np.float32)),
             const("past_v", rng.standard_normal((B, 2, P, D)).astype(np.float32)),
             const("bool_mask", mask),
             const("int_mask", rng.integers(-2, 2, (T, T + 1)).astype(np.int64)), const("float_mask", float_mask),
             const("rms_scale", rng.standard_normal(hidden[-1]).astype(np.float32)),
             const("rms_scale_2d", rng.standard_normal(hidden[1:]).astype(np.float32)),
             const("cos", np.cos(angles)), const("sin", np.sin(angles)),
             const("position_ids", rng.integers(0, 8, (B, T)).astype(np.int64)),
             const("cos_b", np.cos(angles_b)), const("sin_b", np.sin(angles_b))]
    save("opset23", 23, 11, nodes, [q3, kv3, q4, k4, h],
         [("gqa", [B, T, 4 * D]), ("present_k", [B, 2, P + T, D]), ("present_v", [B, 2, P + T, D]),
          ("masked", [B, 2, T, D]), ("scores", [B, 2, T, T + 1]), ("int_masked", [B, 2, T, D]),
          ("int_scores", [B, 2, T, T + 1]), ("float_masked", [B, 2, T, D]), ("rms", hidden),
          ("rms_axis1", hidden), ("rope_interleaved", hidden), ("rope_partial", [B, 2, T, D])], inits)

    # Opset 24: Attention with nonpad_kv_seqlen (an external cache: the causal frontier offset per
    # batch), Swish, TensorScatter (linear with write indices, circular), TopK.
    cache = helper.make_tensor_value_info("cache", F, [B, 2, 6, D])
    upd = helper.make_tensor_value_info("upd", F, [B, 2, 2, D])
    nodes = [
        helper.make_node("Attention", ["q4", "cache", "cache", "", "", "", "nonpad"], ["external"], is_causal=1),
        helper.make_node("Swish", ["q4"], ["swish"], alpha=0.5),
        helper.make_node("TensorScatter", ["cache", "upd", "writes"], ["scattered"]),
        helper.make_node("TensorScatter", ["cache", "upd", "writes_wrap"], ["wrapped"], mode="circular", axis=2),
        helper.make_node("TopK", ["q4", "k2"], ["top", "top_i"]),
        helper.make_node("Cast", ["top_i"], ["top_f"], to=F),
    ]
    save("opset24", 24, 11, nodes, [q4, cache, upd],
         [("external", [B, 2, T, D]), ("swish", [B, 2, T, D]), ("scattered", [B, 2, 6, D]), ("wrapped", [B, 2, 6, D]),
          ("top", [B, 2, T, 2]), ("top_f", [B, 2, T, 2])],
         [const("nonpad", np.array([6, 5], np.int64)), const("writes", np.array([1, 4], np.int64)),
          const("writes_wrap", np.array([5, 2], np.int64)), const("k2", np.array([2], np.int64))])

    bitwise(os.path.join(out_dir, "opset18_bitwise.onnx"))
    col2im(os.path.join(out_dir, "opset18_col2im.onnx"))
    scatter_extremes(os.path.join(out_dir, "opset18_scatter_extremes.onnx"))
    deform_conv(os.path.join(out_dir, "opset19_deform_conv.onnx"))


def bitwise(path):
    """Opset 18's bitwise ops in all eight integer types, on each type's extremes, -1, 0, 1 and
    alternating bits (constants, [2, 8] against [8], broadcast), and on the int32 input n [3, 8]:
    ONNX Runtime runs them as ONNX defines them, amp-run by its own kernels, and the rewrite,
    written as opset 17, by the arithmetic on their bits it becomes (also
    tests/frontends/newer_ops_rewrite_check.py)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    nodes, inits, outputs = [], [], []
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(t)
        row = [info.min, info.max, info.max // 3, info.min + 1 if info.min else 1, 0, 1, info.max - 1, 5]
        a = np.array([row, [-1 if info.min else info.max >> 1] + row[:7]], dtype=t)
        b = np.array([info.max, info.min, 0x55 % (int(info.max) + 1), -1 if info.min else info.max, 1, info.max // 2,
                      info.min + 2 if info.min else 6, 12], dtype=t)
        name = np.dtype(t).name
        inits += [const("bits_a_" + name, a), const("bits_b_" + name, b)]
        for op in ("And", "Or", "Xor"):
            nodes.append(helper.make_node("Bitwise" + op, ["bits_a_" + name, "bits_b_" + name], [op.lower() + "_" + name]))
            outputs.append((op.lower() + "_" + name, t, [2, 8]))
        nodes.append(helper.make_node("BitwiseNot", ["bits_a_" + name], ["not_" + name]))
        outputs.append(("not_" + name, t, [2, 8]))
    nodes += [helper.make_node("BitwiseXor", ["n", "bits_b_int32"], ["xor_input"]),
              helper.make_node("BitwiseNot", ["n"], ["not_input"])]
    outputs += [("xor_input", np.int32, [3, 8]), ("not_input", np.int32, [3, 8])]
    graph = helper.make_graph(
        nodes, "opset18_bitwise", [helper.make_tensor_value_info("n", onnx.TensorProto.INT32, [3, 8])],
        [helper.make_tensor_value_info(o, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(t)], shape) for o, t, shape in outputs],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="project_models.py")
    m.ir_version = 8
    onnx.save(m, path)


COL2IM_2D = [  # name, image, block, dilations, pads, strides
    ("c2d", [7, 9], [3, 2], [2, 1], [1, 0, 2, 1], [2, 3]),
    ("c2d_1x1", [4, 5], [1, 1], [1, 1], [0, 0, 0, 0], [1, 1]),
]
# ONNX Runtime's Col2Im computes other ranks wrongly (microsoft/onnxruntime#18156, seen in 1.30):
# these are checked against numpy in tests/frontends/newer_ops_rewrite_check.py, not in the harness.
COL2IM_OTHER_RANKS = [
    ("c1d", [10], [3], [2], [1, 2], [2]),
    ("c3d", [4, 3, 5], [2, 2, 2], [1, 1, 2], [0, 1, 0, 1, 0, 1], [2, 1, 1]),
]


def col2im(path, cases=COL2IM_2D):
    """Opset 18's Col2Im, one node per case (2-D with dilations, asymmetric pads and strides, 2-D
    with a 1x1 block): amp-run's kernel; the rewrite, written as opset 17, adds the columns into the
    padded image with ScatterElements (also tests/frontends/newer_ops_rewrite_check.py, with 1-D and
    3-D images)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    nodes, inputs, outputs, inits = [], [], [], []
    for name, image, block, dil, pads, strides in cases:
        r = len(image)
        grid = [(image[d] + pads[d] + pads[d + r] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(r)]
        k, positions = int(np.prod(block)), int(np.prod(grid))
        inputs.append(helper.make_tensor_value_info(name + "_x", F, [2, 3 * k, positions]))
        inits += [numpy_helper.from_array(np.array(image, np.int64), name + "_image"),
                  numpy_helper.from_array(np.array(block, np.int64), name + "_block")]
        nodes.append(helper.make_node("Col2Im", [name + "_x", name + "_image", name + "_block"], [name], dilations=dil,
                                      pads=pads, strides=strides))
        outputs.append(helper.make_tensor_value_info(name, F, [2, 3] + image))
    m = helper.make_model(helper.make_graph(nodes, "opset18_col2im", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 18)], producer_name="project_models.py")
    m.ir_version = 8
    onnx.save(m, path)


def scatter_extremes(path):
    """Opset 18's ScatterElements and ScatterND with reduction max and min: repeated and negative
    indices, a middle axis, float and integer data, ScatterND addressing one and two leading dims
    (amp-run's kernels; the rewrite, written as opset 17, compares the indices with every row; also
    tests/frontends/newer_ops_rewrite_check.py)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F, I32, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64

    def c(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    inits = [
        c("e_idx", np.array([[[0, -1, 2, 0], [3, 3, -4, 1]], [[1, 1, 1, 1], [0, 2, 3, -1]]], np.int64)),  # [2, 2, 4]
        c("e_idx0", np.array([[0, 1, 1], [2, 0, 1]], np.int64)),  # [2, 3] into axis 0 of [3, 3]
        c("e_upd0", np.array([[5, -7, 9], [-2, 100, -100]], np.int32)),
        c("e_data0", np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.int32)),
        c("nd_idx1", np.array([[1], [3], [1], [-1]], np.int64)),  # into [5, 3]
        c("nd_idx2", np.array([[[0, 1], [2, 0]], [[0, 1], [-1, -2]]], np.int64)),  # [2, 2, 2] into [3, 2, 4]
        c("nd_upd2", np.arange(16, dtype=np.int64).reshape(2, 2, 4) * 37 % 11 - 5),
        c("nd_data2", (np.arange(24, dtype=np.int64).reshape(3, 2, 4) * 7) % 13 - 6),
    ]
    nodes = [
        helper.make_node("ScatterElements", ["e_data", "e_idx", "e_upd"], ["elements_max"], axis=1, reduction="max"),
        helper.make_node("ScatterElements", ["e_data", "e_idx", "e_upd"], ["elements_min"], axis=1, reduction="min"),
        helper.make_node("ScatterElements", ["e_data0", "e_idx0", "e_upd0"], ["elements_int_max"], axis=0, reduction="max"),
        helper.make_node("ScatterElements", ["e_data0", "e_idx0", "e_upd0"], ["elements_int_min"], axis=0, reduction="min"),
        helper.make_node("ScatterND", ["nd_data1", "nd_idx1", "nd_upd1"], ["nd_max"], reduction="max"),
        helper.make_node("ScatterND", ["nd_data1", "nd_idx1", "nd_upd1"], ["nd_min"], reduction="min"),
        helper.make_node("ScatterND", ["nd_data2", "nd_idx2", "nd_upd2"], ["nd_int_max"], reduction="max"),
        helper.make_node("ScatterND", ["nd_data2", "nd_idx2", "nd_upd2"], ["nd_int_min"], reduction="min"),
    ]
    inputs = [helper.make_tensor_value_info("e_data", F, [2, 5, 4]), helper.make_tensor_value_info("e_upd", F, [2, 2, 4]),
              helper.make_tensor_value_info("nd_data1", F, [5, 3]), helper.make_tensor_value_info("nd_upd1", F, [4, 3])]
    outputs = [helper.make_tensor_value_info(o, t, sh) for o, t, sh in (
        ("elements_max", F, [2, 5, 4]), ("elements_min", F, [2, 5, 4]), ("elements_int_max", I32, [3, 3]),
        ("elements_int_min", I32, [3, 3]), ("nd_max", F, [5, 3]), ("nd_min", F, [5, 3]), ("nd_int_max", I64, [3, 2, 4]),
        ("nd_int_min", I64, [3, 2, 4]))]
    m = helper.make_model(helper.make_graph(nodes, "opset18_scatter_extremes", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 18)], producer_name="project_models.py")
    m.ir_version = 8
    onnx.save(m, path)


def deform_conv(path):
    """Opset 19's DeformConv: two conv groups and two offset groups with a mask, bias, stride 2,
    dilation and asymmetric pads; one group without mask or bias (amp-run's kernel; the rewrite,
    written as opset 17, samples with GatherElements and multiplies with MatMul; also
    tests/frontends/newer_ops_rewrite_check.py)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(19)

    def c(name, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), name)

    # X [2, 4, 7, 6]; W [6, 2, 3, 2] (group 2); out [2, 6, 4, 3] with stride 2, dilation (1, 2), pads (1, 0, 2, 1)
    inits = [c("w", rng.standard_normal([6, 2, 3, 2]) * 0.5), c("b", rng.standard_normal(6)),
             c("w1", rng.standard_normal([3, 4, 2, 2]) * 0.5)]
    nodes = [helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"], group=2, offset_group=2,
                              strides=[2, 2], dilations=[1, 2], pads=[1, 0, 2, 1], kernel_shape=[3, 2]),
             helper.make_node("DeformConv", ["x", "w1", "offset1"], ["y1"])]
    inputs = [helper.make_tensor_value_info("x", F, [2, 4, 7, 6]),
              helper.make_tensor_value_info("offset", F, [2, 2 * 2 * 6, 4, 3]),
              helper.make_tensor_value_info("mask", F, [2, 2 * 6, 4, 3]),
              helper.make_tensor_value_info("offset1", F, [2, 2 * 4, 6, 5])]
    outputs = [helper.make_tensor_value_info("y", F, [2, 6, 4, 3]), helper.make_tensor_value_info("y1", F, [2, 3, 6, 5])]
    m = helper.make_model(helper.make_graph(nodes, "opset19_deform_conv", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 19)], producer_name="project_models.py")
    m.ir_version = 9
    onnx.save(m, path)


def classical_ml(path):
    """ai.onnx.ml's preprocessing ops as converters write them (CoreML's OneHotEncoder pipeline, in
    third_party, is the model that brought them): Scaler per feature on the float input, with one
    scale on int64 and per feature on a 1-D double; ArrayFeatureExtractor on the input, on a 1-D
    tensor ([1, k] out) and on a 3-D int64 one with 2-D indices; OneHotEncoder of the float input
    (truncated to int64, values off its categories give zero rows) and of int64 values, some of
    no category; FeatureVectorizer cutting (a 3-D input's rows of 24 to 10) and padding with zeros
    (4 to 6), and of 1-D double inputs (one row)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    inits = [numpy_helper.from_array(np.array([3, 0, 3], np.int64), "afe_idx"),
             numpy_helper.from_array(np.array([[4, 1]], np.int64), "afe_idx2"),
             numpy_helper.from_array(np.array([5, 0], np.int64), "afe_idx1d"),
             numpy_helper.from_array(np.array([[3, -2, 7], [0, 11, 5]], np.int64), "ints"),
             numpy_helper.from_array(np.linspace(-1.5, 2.5, 5), "doubles"),
             numpy_helper.from_array(np.arange(6, dtype=np.float32) * 0.5 - 1, "flat"),
             numpy_helper.from_array(np.arange(20, dtype=np.int64).reshape(2, 2, 5) - 7, "cube"),
             numpy_helper.from_array(np.array([7, 3, 5, 9, 3], np.int64), "labels"),
             numpy_helper.from_array(np.array([0.25, -4.0], np.float64), "pair")]
    ml = "ai.onnx.ml"
    nodes = [
        helper.make_node("Scaler", ["x"], ["scaled"], domain=ml, scale=[2.0, -1.0, 0.5, 4.0], offset=[0.5, 0.0, -1.0, 2.0]),
        helper.make_node("Scaler", ["ints"], ["scaled_ints"], domain=ml, scale=[0.25], offset=[1.0]),
        helper.make_node("Scaler", ["doubles"], ["scaled_doubles"], domain=ml, scale=[1.0, 2.0, 3.0, 4.0, 5.0],
                         offset=[0.1, 0.2, 0.3, 0.4, 0.5]),
        helper.make_node("ArrayFeatureExtractor", ["x", "afe_idx"], ["picked"], domain=ml),
        helper.make_node("ArrayFeatureExtractor", ["flat", "afe_idx1d"], ["picked_flat"], domain=ml),
        helper.make_node("ArrayFeatureExtractor", ["cube", "afe_idx2"], ["picked_cube"], domain=ml),
        helper.make_node("OneHotEncoder", ["x"], ["onehot_x"], domain=ml, cats_int64s=[-2, -1, 0, 1, 2, 3]),
        helper.make_node("OneHotEncoder", ["labels"], ["onehot_labels"], domain=ml, cats_int64s=[3, 5, 6], zeros=1),
        helper.make_node("FeatureVectorizer", ["scaled", "onehot_x", "x"], ["features"], domain=ml,
                         inputdimensions=[4, 10, 6]),
        helper.make_node("FeatureVectorizer", ["doubles", "pair"], ["features_1d"], domain=ml,
                         inputdimensions=[3, 4]),
    ]
    f = onnx.TensorProto.FLOAT
    outputs = [("scaled", f, [3, 4]), ("scaled_ints", f, [2, 3]), ("scaled_doubles", f, [5]),
               ("picked", f, [3, 3]), ("picked_flat", f, [1, 2]), ("picked_cube", onnx.TensorProto.INT64, [2, 2, 2]),
               ("onehot_x", f, [3, 4, 6]), ("onehot_labels", f, [5, 3]), ("features", f, [3, 20]),
               ("features_1d", f, [1, 7])]
    graph = helper.make_graph(nodes, "classical_ml", [helper.make_tensor_value_info("x", f, [3, 4])],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ml, 1)],
                          producer_name="project_models.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def ms_qlinear(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    U8 = onnx.TensorProto.UINT8

    def q(name, scale, zero):
        return [numpy_helper.from_array(np.array(scale, np.float32), name + "_scale"),
                numpy_helper.from_array(np.array(zero, np.uint8), name + "_zp")]

    inits = q("x", 0.03, 128) + q("s", 1 / 255.0, 0) + q("l", 0.01, 10) + q("a", 0.02, 20) + q("m", 0.0004, 5) + \
        q("c", 0.02, 20) + q("p", 0.015, 15) + q("g", 0.012, 12)

    def ms(op, inputs, output, **attrs):
        return helper.make_node(op, inputs, [output], domain="com.microsoft", **attrs)

    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        ms("QLinearSigmoid", ["xq", "x_scale", "x_zp", "s_scale", "s_zp"], "sq"),
        ms("QLinearLeakyRelu", ["xq", "x_scale", "x_zp", "l_scale", "l_zp"], "lq", alpha=0.1),
        ms("QLinearAdd", ["sq", "s_scale", "s_zp", "lq", "l_scale", "l_zp", "a_scale", "a_zp"], "aq"),
        ms("QLinearMul", ["aq", "a_scale", "a_zp", "sq", "s_scale", "s_zp", "m_scale", "m_zp"], "mq"),
        ms("QLinearConcat", ["c_scale", "c_zp", "aq", "a_scale", "a_zp", "mq", "m_scale", "m_zp"], "cq", axis=1),
        helper.make_node("Transpose", ["cq"], ["cq_nhwc"], perm=[0, 2, 3, 1]),
        ms("QLinearAveragePool", ["cq_nhwc", "c_scale", "c_zp", "p_scale", "p_zp"], "pq_nhwc", kernel_shape=[2, 2],
           strides=[2, 2], channels_last=1),
        helper.make_node("Transpose", ["pq_nhwc"], ["pq"], perm=[0, 3, 1, 2]),
        ms("QLinearGlobalAveragePool", ["pq", "p_scale", "p_zp", "g_scale", "g_zp"], "gq", channels_last=0),
        helper.make_node("DequantizeLinear", ["gq", "g_scale", "g_zp"], ["y"]),
        helper.make_node("DequantizeLinear", ["pq", "p_scale", "p_zp"], ["pooled"]),
    ]
    graph = helper.make_graph(nodes, "ms_qlinear", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8, 1, 1]),
                               helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, [1, 8, 3, 3])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="project_models.py")
    onnx.save(m, path)


def ms_transformer(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(11)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def ms(op, inputs, outputs, **attrs):
        return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)

    inits = [w("gamma", 16, scale=1.0), w("beta", 16), w("bias", 16), w("w1", 32, 16), w("b1", 32), w("w2", 32, 16),
             w("gamma2", 16, scale=1.0), w("bias2", 16)]
    nodes = [
        ms("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["ln", "", "", "sum"], epsilon=1e-5),
        ms("FusedMatMul", ["ln", "w1"], ["h"], transB=1, alpha=0.5),
        ms("FastGelu", ["h", "b1"], ["a1"]),
        ms("BiasGelu", ["h", "b1"], ["a2"]),
        ms("Gelu", ["a1"], ["a3"]),
        ms("QuickGelu", ["a2"], ["a4"], alpha=1.5),
        helper.make_node("Add", ["a3", "a4"], ["a"]),
        helper.make_node("MatMul", ["a", "w2"], ["o"]),
        ms("SkipSimplifiedLayerNormalization", ["o", "sum", "gamma2", "bias2"], ["y"], epsilon=1e-6),
    ]
    graph = helper.make_graph(nodes, "ms_transformer", [helper.make_tensor_value_info("x", F, [2, 5, 16]),
                                                        helper.make_tensor_value_info("skip", F, [2, 5, 16])],
                              [helper.make_tensor_value_info("y", F, [2, 5, 16]),
                               helper.make_tensor_value_info("sum", F, [2, 5, 16])], inits,
                              value_info=[helper.make_tensor_value_info("ln", F, [2, 5, 16])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="project_models.py")
    onnx.save(m, path)


def ms_bert(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F, I32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32
    rng = np.random.default_rng(13)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def ms(op, inputs, outputs, **attrs):
        return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)

    inits = [w("word", 30, 16), w("pos", 16, 16), w("seg", 2, 16), w("gamma", 16, scale=1.0), w("beta", 16),
             w("qkv_w", 16, 48), w("qkv_b", 48), w("qkv_w2", 16, 48), w("qkv_b2", 48), w("bias", 16),
             numpy_helper.from_array(np.array(0, np.int32), "zero")]
    nodes = [
        helper.make_node("Equal", ["input_ids", "zero"], ["is_pad"]),
        helper.make_node("Not", ["is_pad"], ["keep"]),
        helper.make_node("Cast", ["keep"], ["mask"], to=I32),
        ms("EmbedLayerNormalization", ["input_ids", "segment_ids", "word", "pos", "seg", "gamma", "beta", "mask"],
           ["emb", "mask_index", "emb_sum"], epsilon=1e-5),
        ms("Attention", ["emb", "qkv_w", "qkv_b", "mask_index"], ["attn"], num_heads=4),
        ms("Attention", ["emb", "qkv_w2", "qkv_b2", "mask"], ["causal"], num_heads=2, unidirectional=1),
        helper.make_node("Add", ["attn", "causal"], ["both"]),
        ms("SkipLayerNormalization", ["both", "emb", "gamma", "beta", "bias"], ["y"], epsilon=1e-5),
    ]
    graph = helper.make_graph(nodes, "ms_bert", [helper.make_tensor_value_info("input_ids", I32, [2, 6]),
                                                 helper.make_tensor_value_info("segment_ids", I32, [2, 6])],
                              [helper.make_tensor_value_info("y", F, [2, 6, 16]),
                               helper.make_tensor_value_info("emb_sum", F, [2, 6, 16]),
                               helper.make_tensor_value_info("mask_index", I32, [2])], inits,
                              value_info=[helper.make_tensor_value_info("mask", I32, [2, 6]),
                                          helper.make_tensor_value_info("emb", F, [2, 6, 16])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="project_models.py")
    onnx.save(m, path)


def ms_attention(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F, I32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32
    rng = np.random.default_rng(19)
    B, S, E, N, H, L = 2, 3, 16, 4, 4, 5

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def i32(name, values):
        return numpy_helper.from_array(np.array(values, np.int32), name)

    def ms(op, inputs, outputs, **attrs):
        return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)

    inits = [w("w1", E, 3 * E), w("b1", 3 * E), w("w2", E, 2 * E + 8), w("b2", 2 * E + 8), w("w3", E, 3 * E),
             w("b3", 3 * E), w("w4", E, 3 * E), w("b4", 3 * E), w("rel_bias", 1, N, S, S, scale=1.0),
             # attended where > 0: 2 attends, 0 and -1 do not
             i32("raw_mask", [[1, 0, 2, 1, -1, 1, 1, 1], [0, 1, 1, 1, 1, 0, 1, 1]]),
             i32("ends_starts", [3, 2, 1, 0]),
             i32("mask3", [[[1, 1, 0], [0, 1, 1], [1, 0, 1]], [[1, 1, 1], [1, 0, 0], [0, 0, 1]]]),
             i32("ends", [2, 3])]
    nodes = [
        ms("Attention", ["x", "w1", "b1", "raw_mask", "past"], ["y1", "present"], num_heads=N, unidirectional=1),
        ms("Attention", ["x", "w2", "b2", "ends_starts"], ["y2"], num_heads=N, qkv_hidden_sizes=[E, E, 8]),
        ms("Attention", ["x", "w3", "b3", "mask3", "", "rel_bias"], ["y3"], num_heads=N, mask_filter_value=-5000.0),
        ms("Attention", ["x", "w4", "b4", "ends"], ["y4", "present4"], num_heads=N, unidirectional=1, scale=0.3),
    ]
    graph = helper.make_graph(nodes, "ms_attention", [helper.make_tensor_value_info("x", F, [B, S, E]),
                                                      helper.make_tensor_value_info("past", F, [2, B, N, L, H])],
                              [helper.make_tensor_value_info("y1", F, [B, S, E]),
                               helper.make_tensor_value_info("present", F, [2, B, N, L + S, H]),
                               helper.make_tensor_value_info("y2", F, [B, S, 8]),
                               helper.make_tensor_value_info("y3", F, [B, S, E]),
                               helper.make_tensor_value_info("y4", F, [B, S, E]),
                               helper.make_tensor_value_info("present4", F, [2, B, N, S, H])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="project_models.py")
    onnx.save(m, path)


def local_functions(path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(17)
    # LinearAct(x, w, b; alpha, reduce): LeakyRelu(x @ w + b, alpha) scaled by 1 + mean over the last
    # axis (opset 18's ReduceMean with an axes input) when reduce, Mish otherwise.
    alpha = helper.make_attribute("alpha", 0.0)
    alpha.ref_attr_name = "alpha"
    linear_act = helper.make_function(
        "pkg.test", "LinearAct", ["x", "w", "b"], ["y"],
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["h"]),
         onnx.NodeProto(),  # the LeakyRelu with a referenced attribute, below
         helper.make_node("Constant", [], ["last"], value=numpy_helper.from_array(np.array([-1], np.int64))),
         helper.make_node("ReduceMean", ["a", "last"], ["m"], keepdims=1),
         helper.make_node("Mish", ["m"], ["mm"]),
         helper.make_node("Add", ["a", "mm"], ["y"])],
        [helper.make_opsetid("", 18)], attributes=["alpha"])
    leaky = helper.make_node("LeakyRelu", ["h"], ["a"])
    leaky.attribute.append(alpha)
    linear_act.node[2].CopyFrom(leaky)
    # IR 9's default for alpha (FunctionProto.attribute_proto, field 11), which onnx 1.12's Python
    # cannot set: appended as the field's bytes.
    default = helper.make_attribute("alpha", 0.25).SerializeToString()
    size = len(default)
    varint = b""
    while True:
        byte = size & 0x7F
        size >>= 7
        varint += bytes([byte | (0x80 if size else 0)])
        if not size:
            break
    linear_act.MergeFromString(bytes([11 << 3 | 2]) + varint + default)
    block = helper.make_function(
        "pkg.test", "Block", ["x", "w1", "b1", "w2", "b2"], ["y"],
        [helper.make_node("LinearAct", ["x", "w1", "b1"], ["h"], domain="pkg.test", alpha=0.05),
         helper.make_node("LinearAct", ["h", "w2", "b2"], ["y"], domain="pkg.test")],
        [helper.make_opsetid("", 18), helper.make_opsetid("pkg.test", 1)])
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)
             for name, shape in (("w1", (8, 12)), ("b1", (12,)), ("w2", (12, 6)), ("b2", (6,)))]
    graph = helper.make_graph(
        [helper.make_node("Block", ["x", "w1", "b1", "w2", "b2"], ["y"], domain="pkg.test", name="block"),
         helper.make_node("LinearAct", ["x", "w1", "b1"], ["z"], domain="pkg.test", name="direct", alpha=0.5)],
        "local_functions", [helper.make_tensor_value_info("x", F, [3, 8])],
        [helper.make_tensor_value_info("y", F, [3, 6]), helper.make_tensor_value_info("z", F, [3, 12])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("pkg.test", 1)],
                          functions=[linear_act, block], producer_name="project_models.py")
    m.ir_version = 9
    onnx.save(m, path)


def calibrate(model, *inputs):
    """BatchNorm statistics from one training-mode batch, so eval mode normalises for real."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.momentum = None
    if norms:
        model.train()
        with torch.no_grad():
            model(*inputs)
    model.eval()


def export(model, inputs, names, path, opset=14):
    calibrate(model, *inputs)
    torch.onnx.export(model, inputs, path, input_names=names, output_names=["output"], opset_version=opset,
                      training=torch.onnx.TrainingMode.EVAL)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--zoo", nargs="*", default=[])
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    export(LinearBN(), (torch.randn(6, 16, generator=g),), ["x"], os.path.join(a.out, "linear_bn.onnx"))
    export(LinearBN3d(), (torch.randn(3, 16, 5, generator=g),), ["x"], os.path.join(a.out, "linear_bn_3d.onnx"))
    x = torch.randn(2, 7, 8, generator=g)
    export(Recurrent(torch.nn.LSTM), (x,), ["x"], os.path.join(a.out, "lstm.onnx"))
    export(Recurrent(torch.nn.GRU), (x,), ["x"], os.path.join(a.out, "gru.onnx"))
    export(Recurrent(torch.nn.RNN), (x,), ["x"], os.path.join(a.out, "rnn.onnx"))
    h0, c0 = torch.randn(4, 2, 12, generator=g), torch.randn(4, 2, 12, generator=g)
    export(Recurrent(torch.nn.LSTM, bidirectional=True), (x, h0, c0), ["x", "h0", "c0"],
           os.path.join(a.out, "bilstm.onnx"))
    export(PReLUConv(), (torch.randn(2, 3, 10, 10, generator=g),), ["x"], os.path.join(a.out, "prelu_conv.onnx"))
    softmax11_axis1(os.path.join(a.out, "softmax11_axis1.onnx"))
    ort_norms(os.path.join(a.out, "ort_norms.onnx"))
    loop_ops(os.path.join(a.out, "loop_ops.onnx"))
    while_if(os.path.join(a.out, "while_if.onnx"))
    newer_opsets(a.out)
    classical_ml(os.path.join(a.out, "classical_ml.onnx"))
    ms_qlinear(os.path.join(a.out, "ms_qlinear.onnx"))
    ms_transformer(os.path.join(a.out, "ms_transformer.onnx"))
    ms_bert(os.path.join(a.out, "ms_bert.onnx"))
    ms_attention(os.path.join(a.out, "ms_attention.onnx"))
    local_functions(os.path.join(a.out, "local_functions.onnx"))
    for name in ("mlp", "cnn", "gpt"):
        shutil.copyfile(os.path.join(ROOT, "models", name + ".onnx"), os.path.join(a.out, name + ".onnx"))
    for name in a.zoo:
        d = os.path.join(a.out, "zoo_" + name)
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "zoo", "zoo_reference.py"), name, d,
                            "--eval", "--size", "64", "--batch", "2"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit("zoo export of %s failed: %s" % (name, r.stdout.strip().splitlines()[-1:]))
        shutil.copyfile(os.path.join(d, "eval.onnx"), os.path.join(a.out, "zoo_" + name + ".onnx"))


if __name__ == "__main__":
    main()
