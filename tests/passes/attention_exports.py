#!/usr/bin/python3
"""Attention as PyTorch 1.13 exports it, for recognize_attention_test.cc.

    attention_exports.py DIR

Writes DIR/<name>.onnx (torch.onnx.export, opset 17 unless named below) and DIR/<name>.npz with
the inputs ("x", and "tokens" where the model masks padding) and PyTorch's output "y" (float32).
MODELS says what the test expects of each: how many Attention nodes, how many of them causal and
how many with a mask input; 0 nodes for the near-misses, which must stay as they are. ONNX_ATTENTION
adds models with ONNX's own Attention op (opset 23, onnx.helper), their "y" computed by torch from
ONNX's definition.
"""
import math
import sys

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
D, HEADS = 16, 4


class Block(nn.Module):
    """GPT-style self-attention written by hand (models/torch_models.py's): q, k, v from one
    Linear, heads split by reshape and transpose; the scale on the scores, on Q, on K or on both
    Q and K; the causal mask a registered triu(1) bool buffer sliced to T (masked_fill with -inf),
    a constant -inf bias added, or none; optionally Dropout on the probabilities."""

    def __init__(self, ctx=160, scale_on="scores", mask="causal", p=0.0, fill=float("-inf"), softmax_dim=-1,
                 return_probs=False, scale_after_mask=False, per_head_scale=False):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.drop = nn.Dropout(p)
        self.scale_on, self.mask, self.fill, self.softmax_dim = scale_on, mask, fill, softmax_dim
        self.return_probs, self.scale_after_mask = return_probs, scale_after_mask
        self.register_buffer("hide", torch.ones(ctx, ctx, dtype=torch.bool).triu(1))
        self.register_buffer("bias", torch.full((ctx, ctx), float("-inf")).triu(1))
        self.head_scale = nn.Parameter(torch.rand(HEADS, 1, 1) + 0.5) if per_head_scale else None

    def forward(self, x):
        n, t = x.shape[0], x.shape[1]
        hd = D // HEADS
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.reshape(n, t, HEADS, hd).transpose(1, 2) for z in (q, k, v))
        s = 1.0 / math.sqrt(hd)
        if self.scale_on == "q":
            att = (q * s) @ k.transpose(-2, -1)
        elif self.scale_on == "k":
            att = q @ (k.transpose(-2, -1) * s)
        elif self.scale_on == "qk":
            att = (q * math.sqrt(s)) @ (k * math.sqrt(s)).transpose(-2, -1)
        else:
            att = q @ k.transpose(-2, -1)
            if not self.scale_after_mask:
                att = att * s
        if self.head_scale is not None:
            att = att * self.head_scale
        if self.mask == "causal":
            att = att.masked_fill(self.hide[:t, :t], self.fill)
        elif self.mask == "bias":
            att = att + self.bias
        if self.scale_after_mask:
            att = att * s
        probs = torch.softmax(att, dim=self.softmax_dim)
        y = self.drop(probs) @ v
        out = self.proj(y.transpose(1, 2).reshape(n, t, D))
        return (out, probs) if self.return_probs else out


class Mha(nn.Module):
    """nn.MultiheadAttention (batch_first): no mask, a key padding mask from the padding token 0,
    or generate_square_subsequent_mask as attn_mask."""

    def __init__(self, mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.mask = mask

    def forward(self, x, tokens):
        am = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.mask == "causal" else None
        kpm = tokens == 0 if self.mask == "padding" else None
        return self.attn(x, x, x, key_padding_mask=kpm, attn_mask=am, need_weights=False)[0]


class Encoder(nn.Module):
    """nn.TransformerEncoder, two post-LN layers, with a key padding mask."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, tokens):
        return self.encoder(x, src_key_padding_mask=tokens == 0)


class Decoder(nn.Module):
    """nn.TransformerDecoder, two layers: causal self-attention and cross-attention to a memory."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(D, HEADS, 2 * D, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, 2)

    def forward(self, x, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.decoder(x, x.flip(1), tgt_mask=mask)


class BoolMask(Block):
    """A computed (non-causal) bool mask: keys whose token is 0 hidden with masked_fill."""

    def __init__(self):
        super().__init__(mask="none")

    def forward(self, x, tokens):
        n, t = x.shape[0], x.shape[1]
        hd = D // HEADS
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.reshape(n, t, HEADS, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill((tokens == 0)[:, None, None, :], float("-inf"))
        return torch.softmax(att, dim=-1) @ v


def tokens_for(n, t):
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(1, 5, (n, t), generator=g)
    tok[0, t - 3:] = 0  # padding at the end of the first sequence; the first token never padding
    tok[1, t // 2:] = 0
    return tok


# name -> (model, takes tokens, T, training-mode export, expected Attention nodes, causal, masked)
MODELS = {
    "gpt_causal_scores": (Block(), False, 10, False, 1, 1, 0),
    "gpt_causal_long": (Block(), False, 150, False, 1, 1, 0),  # 3 blocks of 64, the last partial
    "gpt_scale_on_q": (Block(scale_on="q", mask="none"), False, 10, False, 1, 0, 0),
    "gpt_scale_on_k": (Block(scale_on="k"), False, 10, False, 1, 1, 0),
    "gpt_scale_on_q_and_k": (Block(scale_on="qk"), False, 10, False, 1, 1, 0),
    "gpt_constant_bias": (Block(ctx=10, mask="bias"), False, 10, False, 1, 1, 0),
    "gpt_dropout_zero_training": (Block(p=0.0), False, 10, True, 1, 1, 0),
    "gpt_dropout_eval": (Block(p=0.1), False, 10, False, 1, 1, 0),
    "bool_mask": (BoolMask(), True, 10, False, 1, 0, 1),
    "mha": (Mha(), True, 10, False, 1, 0, 0),
    "mha_key_padding": (Mha("padding"), True, 10, False, 1, 0, 1),
    "mha_subsequent_mask": (Mha("causal"), True, 10, False, 1, 1, 0),
    # A training-mode export (no constant folding): baddbmm's factors stay Casts of constants,
    # the key padding mask's shape is computed.
    "mha_key_padding_training": (Mha("padding"), True, 10, True, 1, 0, 1),
    "encoder_key_padding": (Encoder(), True, 10, False, 2, 0, 2),
    "decoder_causal": (Decoder(), True, 10, False, 4, 2, 0),
    # Near-misses: must stay as exported.
    "not_softmax_other_axis": (Block(softmax_dim=-2), False, 10, False, 0, 0, 0),
    "not_probs_also_output": (Block(return_probs=True), False, 10, False, 0, 0, 0),
    "not_finite_fill": (Block(fill=-1e4), False, 10, False, 0, 0, 0),
    "not_scale_after_bias": (Block(ctx=10, mask="bias", scale_after_mask=True), False, 10, False, 0, 0, 0),
    "not_dropout_training": (Block(p=0.1), False, 10, True, 0, 0, 0),
    "not_per_head_scale": (Block(per_head_scale=True), False, 10, False, 0, 0, 0),
}


# ONNX's own Attention (opset 23), written with onnx.helper, as torch 2's exporters and current
# converters write it: the import lowers it to opset-17 ops (graph/onnx_newer_opsets.cc), which the
# recogniser must fuse again. name -> (q heads, kv heads, 3-D inputs, is_causal, scale or None,
# expected Attention nodes, causal, masked). T = 10.
ONNX_ATTENTION = {
    "onnx23_causal_3d": (4, 4, True, 1, None, 1, 1, 0),
    "onnx23_grouped_kv_causal": (4, 2, True, 1, None, 1, 1, 0),
    "onnx23_4d_scale": (4, 4, False, 0, 0.2, 1, 0, 0),
}


def onnx_attention(path, x, heads, kv_heads, three_d, causal, scale):
    """Writes the model and returns its output y [N, T, D] computed by torch from the definition."""
    import onnx
    from onnx import helper, numpy_helper
    F = onnx.TensorProto.FLOAT
    n, t, _ = x.shape
    hd = D // heads
    g = torch.Generator().manual_seed(7)
    wq = torch.randn(D, D, generator=g) / 4
    wk = torch.randn(D, kv_heads * hd, generator=g) / 4
    wv = torch.randn(D, kv_heads * hd, generator=g) / 4
    inits = [numpy_helper.from_array(w.numpy(), name) for w, name in ((wq, "wq"), (wk, "wk"), (wv, "wv"))]
    nodes = [helper.make_node("MatMul", ["x", w], [w[1]]) for w in ("wq", "wk", "wv")]
    attrs = {"is_causal": causal}
    if scale is not None:
        attrs["scale"] = scale
    if three_d:
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
        nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"], **attrs))
    else:
        for name, h in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
            inits.append(numpy_helper.from_array(np.array([n, t, h, hd], np.int64), name + "_shape"))
            nodes.append(helper.make_node("Reshape", [name, name + "_shape"], [name + "_split"]))
            nodes.append(helper.make_node("Transpose", [name + "_split"], [name + "4"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Attention", ["q4", "k4", "v4"], ["y4"], **attrs))
        nodes.append(helper.make_node("Transpose", ["y4"], ["y_heads"], perm=[0, 2, 1, 3]))
        inits.append(numpy_helper.from_array(np.array([n, t, D], np.int64), "y_shape"))
        nodes.append(helper.make_node("Reshape", ["y_heads", "y_shape"], ["y"]))
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", F, list(x.shape))],
                              [helper.make_tensor_value_info("y", F, list(x.shape))], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="attention_exports.py")
    m.ir_version = 11
    onnx.save(m, path)  # ONNX 1.12's checker does not know opset 23
    # The definition in torch: heads [N, H, T, d], each kv head serving heads / kv_heads query heads.
    split = lambda a, h: a.reshape(n, t, h, hd).transpose(1, 2)
    q, k, v = split(x @ wq, heads), split(x @ wk, kv_heads), split(x @ wv, kv_heads)
    k, v = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(hd))
    if causal:
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(n, t, D)


def main():
    out = sys.argv[1]
    for name, (model, takes_tokens, t, training, *_) in MODELS.items():
        x = torch.randn(2, t, D)
        args = (x, tokens_for(2, t)) if takes_tokens else (x,)
        names = ["x", "tokens"] if takes_tokens else ["x"]
        model.eval()
        with torch.no_grad():
            y = model(*args)
        y = y[0] if isinstance(y, tuple) else y
        outputs = ["y", "probs"] if name == "not_probs_also_output" else ["y"]
        dynamic = {"x": {1: "T"}} if name.startswith("gpt_causal") else None
        mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(model, args, "%s/%s.onnx" % (out, name), opset_version=17, input_names=names,
                          output_names=outputs, dynamic_axes=dynamic, training=mode, do_constant_folding=not training)
        arrays = {"x": x.numpy(), "y": y.numpy()}
        if takes_tokens:
            arrays["tokens"] = args[1].numpy()
        np.savez("%s/%s.npz" % (out, name), **arrays)
    for name, (heads, kv_heads, three_d, causal, scale, *_) in ONNX_ATTENTION.items():
        x = torch.randn(2, 10, D)
        with torch.no_grad():
            y = onnx_attention("%s/%s.onnx" % (out, name), x, heads, kv_heads, three_d, causal, scale)
        np.savez("%s/%s.npz" % (out, name), x=x.numpy(), y=y.numpy())
    with open("%s/expected.txt" % out, "w") as f:
        for name, (_, _, _, _, nodes, causal, masked) in MODELS.items():
            f.write("%s %d %d %d\n" % (name, nodes, causal, masked))
        for name, (*_, nodes, causal, masked) in ONNX_ATTENTION.items():
            f.write("%s %d %d %d\n" % (name, nodes, causal, masked))


if __name__ == "__main__":
    main()
