#!/usr/bin/python3
"""PyTorch reference for the model zoo: a torchvision model exported for training, and what torch
does with it.

    /usr/bin/python3 tests/zoo/zoo_reference.py MODEL OUT_DIR [--size 64] [--batch 4] [--steps 3]
        [--lr 0.01] [--momentum 0.9] [--seed 0] [--eval | --export-only | --autocast]

MODEL is a torchvision 0.14 classification model (resnet18, mobilenet_v2, ...) or one of the
models in EXTRA below. It is built with random weights from --seed, num_classes=10, every dropout
and stochastic depth at 0, in training mode, and exported by torch.onnx.export with
TrainingMode.TRAINING (BatchNorm in training mode, its statistics as outputs).

Writes to OUT_DIR:
  model.onnx     the training-mode export; its initializers are torch's initial weights
  data.npz       "input" float32 [STEPS*BATCH,3,SIZE,SIZE] and "labels" int64 [STEPS*BATCH]:
                 random images (N(0,1)) and labels from --seed, in order (amp-train --no-shuffle
                 reads them batch by batch); for the models of token sequences in EXTRA
                 (tiny_gpt, tiny_attention, tiny_encoder, tiny_recurrent) "input" is int64 tokens [STEPS*BATCH,SEQ] and
                 "labels" their next tokens [STEPS*BATCH,SEQ] or classes (make_data)
  initial.npz    every parameter before training, by its ONNX initializer name
  sgd_update.npz every parameter's change after one step of plain SGD (--lr, no momentum, no
                 weight decay) on the first batch, computed by torch in float64
  reference.json {"params": number of parameter tensors, "numel": number of parameters,
                  "losses": the loss of each of STEPS steps of SGD with --momentum from the same
                  initial weights (each computed before its step's update), in float64,
                  "sgd_loss": the loss of the one-step run,
                  "kink_shapes": the input shape of each ReLU / ReLU6 / Hardtanh / MaxPool call, in order,
                  "torch_fp32": torch's own fp32 run measured the same way: "sgd_error" (its
                  largest update error relative to the model's largest update), "losses" and
                  "loss_error" (the largest relative loss error, the worst of its runs on
                  one and two threads and from initial weights one ulp away)}

Why float64: at batch 4 a BatchNorm whose channel barely varies over the batch (a 2x2 map gives
it 16 samples) amplifies the rounding of fp32 forward values into its input gradient. On such a
model torch's fp32 gradients miss the true ones by far more than 2e-4 (mobilenet_v2 at 64x64:
9.5e-3, the jump at one BatchNorm of features.17), so torch fp32 is no reference there; float64
is, and torch fp32's own error says how far any fp32 implementation can be expected to get.

With --eval, instead: the same model (same seed, same weights) in eval mode, its BatchNorm
running statistics calibrated on the batch (export_eval), exported by torch.onnx.export in eval
mode (TrainingMode.EVAL, constant folding on, as users export for inference), and what torch
computes on the first batch of the same data:
  eval.onnx      the eval export
  eval_input.npz "input": the first batch of data.npz's images (the same random draw)
  eval_ref.npz   "fp32": torch's fp32 eval output; "fp64": the same in float64; "fp16" and "bf16":
                 an emulated all-16-bit conversion (LowPrecision below)

With --autocast, instead: autocast.json {"bf16": the losses of --steps steps of SGD with
--momentum under torch.autocast("cpu", torch.bfloat16) (fp32 weights, bf16 where torch's CPU
autocast puts it) on OUT_DIR/data.npz's batches} or {"error": why torch cannot}: torch's own
bf16 mixed-precision trajectory, the reference for how far a bf16 run may drift from fp32.

With --export-only: model.onnx and data.npz alone (the training export at another --batch).

The loss is cross-entropy (mean over the batch, and over the positions of an LM's sequence) of
the model's only output against the labels, as amp-train --loss cross_entropy appends it (loss_of).
"""
import argparse
import collections
import json
import math
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F
import torchvision


def build(name):
    """The model by name: num_classes=10, dropout 0 (every nn.Dropout and StochasticDepth is set to
    p=0 after construction, so architectures whose constructor has no dropout argument are covered)."""
    kw = {"num_classes": 10}
    if name == "googlenet":
        kw.update(aux_logits=False, transform_input=False, init_weights=True)
    if name == "inception_v3":
        kw.update(aux_logits=False, transform_input=False, init_weights=True)
    if name in EXTRA:
        m = EXTRA[name]()
    else:
        m = torchvision.models.get_model(name, weights=None, **kw)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
        if isinstance(mod, torchvision.ops.StochasticDepth):
            mod.p = 0.0
        # ViT zero-initialises its head: every output would be 0 (nothing for the forward checks
        # to compare) and the first step's gradient would reach the head alone. Drawn as the
        # other Linear layers of these models are.
        if isinstance(mod, torch.nn.Linear) and not mod.weight.detach().any():
            torch.nn.init.normal_(mod.weight, std=0.02)
    return m


class TinyTransformer(torch.nn.Module):
    """A transformer classifier from torch modules: patch embedding (a strided convolution),
    nn.TransformerEncoder (pre-LN, GELU), mean pooling, a linear head."""

    def __init__(self, dim=64, heads=4, layers=2, patch=8):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, dim, patch, stride=patch)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = self.encoder(x)
        return self.head(self.norm(x).mean(dim=1))


class TinyGPT(torch.nn.Module):
    """A GPT-style decoder from torch modules: token embedding plus learned positions,
    nn.TransformerDecoder (post-LN, GELU) with a causal mask, a linear LM head over the vocabulary:
    next-token logits [batch, SEQ, VOCAB]. nn.TransformerDecoder takes a memory (its
    cross-attention's keys and values); a decoder-only model has none, so the memory is the embedded
    input itself and the cross-attention takes the same causal mask (memory_mask), which keeps every
    position blind to later tokens. The mask is built in forward as torch's own
    nn.Transformer.generate_square_subsequent_mask builds it (-inf above the diagonal): the
    training export computes it (ConstantOfShape, Trilu), the eval export holds it as a constant
    with -inf."""

    VOCAB, SEQ = 32, 12
    tokens = True

    def __init__(self, dim=32, heads=4, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(self.VOCAB, dim)
        # GPT-2's initialisation of the embeddings: N(0, 0.02), not nn.Embedding's N(0, 1). With
        # N(0, 1) the one-step sgd check measures fp32's storage of the weights, not the gradient:
        # an entry near 4 rounds by 2.4e-7, 2.3e-4 of the model's largest update at lr 0.01 (torch's
        # own fp32 step misses float64 by exactly that).
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        self.pos = torch.nn.Parameter(torch.randn(1, self.SEQ, dim) * 0.02)
        layer = torch.nn.TransformerDecoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu",
                                                 batch_first=True)
        self.decoder = torch.nn.TransformerDecoder(layer, layers)
        self.head = torch.nn.Linear(dim, self.VOCAB)

    def forward(self, x):
        h = self.embed(x) + self.pos[:, :x.shape[1]]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.head(self.decoder(h, h, tgt_mask=mask, memory_mask=mask))

    @classmethod
    def data(cls, n, g):
        """Random token sequences and, as labels, each position's next token (the last position's a
        random one)."""
        seq = torch.randint(0, cls.VOCAB, (n, cls.SEQ + 1), generator=g)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


class TinyAttention(torch.nn.Module):
    """A sequence classifier on nn.MultiheadAttention itself: token embedding plus learned
    positions, one self-attention block (nn.MultiheadAttention, batch_first, with a key padding mask
    from the padding token 0), residual and LayerNorm, a ReLU MLP, residual and LayerNorm, mean
    pooling, a linear head over 10 classes. The sequences have random lengths from SEQ/2 to SEQ,
    padded with 0 (the first token is never padding, so no row is all masked)."""

    VOCAB, SEQ = 32, 12
    tokens = True

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.embed = torch.nn.Embedding(self.VOCAB, dim)
        self.pos = torch.nn.Parameter(torch.randn(1, self.SEQ, dim) * 0.02)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, dim * 2), torch.nn.ReLU(), torch.nn.Linear(dim * 2, dim))
        self.norm2 = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        h = self.embed(x) + self.pos[:, :x.shape[1]]
        a, _ = self.attn(h, h, h, key_padding_mask=x == 0, need_weights=False)
        h = self.norm1(h + a)
        h = self.norm2(h + self.mlp(h))
        return self.head(h.mean(dim=1))

    @classmethod
    def data(cls, n, g):
        tokens = torch.randint(1, cls.VOCAB, (n, cls.SEQ), generator=g)
        lengths = torch.randint(cls.SEQ // 2, cls.SEQ + 1, (n, 1), generator=g)
        tokens[torch.arange(cls.SEQ).expand(n, -1) >= lengths] = 0
        return tokens, torch.randint(0, 10, (n,), generator=g)


class TinyEncoder(torch.nn.Module):
    """nn.TransformerEncoder the other way from tiny_transformer: post-LN (torch's default), ReLU,
    on token sequences with a key padding mask (src_key_padding_mask from the padding token 0),
    mean pooling, a linear head over 10 classes. The data are TinyAttention's: random lengths from
    SEQ/2 to SEQ, never an all-padding row."""

    VOCAB, SEQ = 32, 12
    tokens = True

    def __init__(self, dim=32, heads=4, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(self.VOCAB, dim)
        self.pos = torch.nn.Parameter(torch.randn(1, self.SEQ, dim) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="relu",
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        h = self.embed(x) + self.pos[:, :x.shape[1]]
        return self.head(self.encoder(h, src_key_padding_mask=x == 0).mean(dim=1))

    data = classmethod(TinyAttention.data.__func__)


class TinyRecurrent(torch.nn.Module):
    """Recurrent layers as torch 1.13 exports them for training (issue 31): token embedding, a
    bidirectional nn.LSTM (batch_first, learned initial states expanded over the batch), an nn.GRU
    on its outputs, and a linear head over the mean of the GRU's outputs and its final state. ONNX
    LSTM and GRU with Transposes around them; the weights sliced and concatenated into ONNX's gate
    order by the export's own nodes."""

    VOCAB, SEQ = 32, 12
    tokens = True

    def __init__(self, dim=16, hidden=12):
        super().__init__()
        self.embed = torch.nn.Embedding(self.VOCAB, dim)
        self.lstm = torch.nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.h0 = torch.nn.Parameter(torch.randn(2, 2, 1, hidden) * 0.1)
        self.gru = torch.nn.GRU(2 * hidden, hidden, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, 10)

    def forward(self, x):
        n = x.shape[0]
        h0, c0 = (s.expand(2, n, s.shape[-1]).contiguous() for s in self.h0)
        y, _ = self.lstm(self.embed(x), (h0, c0))
        z, h = self.gru(y)
        return self.head(torch.cat([z.mean(dim=1), h[0]], 1))

    @classmethod
    def data(cls, n, g):
        return torch.randint(0, cls.VOCAB, (n, cls.SEQ), generator=g), torch.randint(0, 10, (n,), generator=g)


EXTRA = {"tiny_transformer": TinyTransformer, "tiny_gpt": TinyGPT, "tiny_attention": TinyAttention,
         "tiny_encoder": TinyEncoder, "tiny_recurrent": TinyRecurrent}


def make_data(name, n, size, g):
    """n samples and their labels drawn from generator g: random images N(0,1) [n,3,size,size] and
    classes [n], or, for a model of token sequences (EXTRA's with tokens = True), its own data()."""
    m = EXTRA.get(name)
    if getattr(m, "tokens", False):
        return m.data(n, g)
    x = torch.randn(n, 3, size, size, generator=g)
    return x, torch.randint(0, 10, (n,), generator=g)


def as_dtype(x, dtype):
    """x in dtype when it is floating (images); token indices stay int64."""
    return x.to(dtype) if x.is_floating_point() else x


def loss_of(out, y):
    """Cross-entropy, mean over every row of class scores along the last axis (as amp-train's
    --loss cross_entropy: an LM's [batch, seq, vocab] logits against [batch, seq] tokens)."""
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


class Decisions(torch.overrides.TorchFunctionMode):
    """Runs every ReLU / ReLU6 / Hardtanh / MaxPool2d of the model on the piece that `acts`
    (another implementation's inputs to the same calls, in call order) chose: where that input was
    inside (lo, hi) the output is x, elsewhere the bound, a constant; a max pool takes x at the
    positions that input's maxima were. Counts the elements whose piece differs from the one x
    itself would choose. With acts=None it records the input shapes instead."""

    KINKS = {F.relu: (0.0, math.inf), torch.relu: (0.0, math.inf), torch.relu_: (0.0, math.inf),
             torch.Tensor.relu: (0.0, math.inf), torch.Tensor.relu_: (0.0, math.inf), F.relu6: (0.0, 6.0)}

    def __init__(self, acts=None):
        super().__init__()
        self.acts, self.calls, self.flips, self.shapes = acts, 0, 0, []

    def next_theirs(self, x):
        if self.calls >= len(self.acts):
            raise RuntimeError("more ReLU/Clip/MaxPool calls than the ONNX graph has Relu/Clip/MaxPool nodes")
        theirs = torch.from_numpy(self.acts[self.calls]).to(x.dtype)
        if tuple(theirs.shape) != tuple(x.shape):
            raise RuntimeError("ReLU/Clip/MaxPool call %d: shape %s, the ONNX node's input %s" %
                               (self.calls, tuple(x.shape), tuple(theirs.shape)))
        self.calls += 1
        return theirs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.max_pool2d:
            # The window maxima that theirs picked (the first of equals, as torch and amp-train do).
            x = args[0]
            kw = dict(kwargs, return_indices=True)
            if self.acts is None:
                self.shapes.append(list(x.shape))
                return func(*args, **kwargs)
            theirs = self.next_theirs(x)
            _, at = func(theirs, *args[1:], **kw)
            _, own = func(x.detach(), *args[1:], **kw)
            self.flips += int((at != own).sum())
            return x.flatten(2).gather(2, at.flatten(2)).view(at.shape)
        if func in self.KINKS or func is F.hardtanh:
            x = args[0]
            if func is F.hardtanh:
                rest = list(args[1:3]) + [None, None]
                lo = kwargs.get("min_val", rest[0] if rest[0] is not None else -1.0)
                hi = kwargs.get("max_val", rest[1] if rest[1] is not None else 1.0)
            else:
                lo, hi = self.KINKS[func]
            if self.acts is None:  # recording: the shape of each call's input
                self.shapes.append(list(x.shape))
                return func(*args, **kwargs)
            theirs = self.next_theirs(x)
            inside = (theirs > lo) & (theirs < hi)
            self.flips += int((inside != ((x > lo) & (x < hi))).sum())
            const = torch.where(theirs <= lo, torch.full_like(x, lo), torch.full_like(x, hi if hi < math.inf else 0.0))
            return torch.where(inside, x, const.detach())
        return func(*args, **kwargs)


class LowPrecision(torch.overrides.TorchFunctionMode):
    """A reference all-fp16 (or all-bf16) conversion, emulated: torch 1.13 on the CPU has no half
    convolution, product or BatchNorm, so the model runs in fp32 with every floating tensor stored
    in the 16-bit type: the weights and buffers and the input rounded to it beforehand, and every
    torch function's floating result rounded to it (and back) as it is produced. That is what a
    conversion of every op to 16 bits computes on hardware that accumulates in fp32 (the kernels'
    own internals stay fp32; a Python-level function such as F.multi_head_attention_forward counts
    as one op). It is the error a naive whole-model conversion makes, beside which the rewrite's
    error (fp32 where autocast keeps it) is reported."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def round(self, r):
        if isinstance(r, torch.Tensor) and r.dtype in (torch.float32, torch.float64):
            return r.to(self.dtype).to(r.dtype)
        if isinstance(r, (tuple, list)) and not hasattr(r, "_fields"):
            return type(r)(self.round(v) for v in r)
        return r

    def __torch_function__(self, func, types, args=(), kwargs=None):
        r = func(*args, **(kwargs or {}))
        if args and r is args[0] and isinstance(r, torch.Tensor) and r.dtype in (torch.float32, torch.float64):
            return r.copy_(r.to(self.dtype))  # an in-place op: round in place, keep the identity
        return self.round(r)


# Images the eval export's BatchNorm statistics are calibrated on: enough that no channel of a
# 2x2 late-stage map has a near-zero variance from a handful of samples (calibrated on the 4
# images of the batch itself, shufflenet_v2_x0_5's fp32 forward misses float64 by 4e-5 of its
# output and an fp16 one by 1e-1).
CALIBRATION = 64


def export_eval(a, model):
    """--eval: the eval-mode export and torch's outputs on the first batch (see the docstring).

    Every BatchNorm's running mean and variance are first set to those of CALIBRATION other random
    images (one forward in training mode, cumulative average), as a trained model's describe its
    data. With the fresh
    statistics (mean 0, variance 1) the activations of these random-init networks shrink block by
    block: mobilenet_v2's and mobilenet_v3_small's outputs are ~1e-9, below fp16's smallest
    subnormal (6e-8), so every 16-bit conversion outputs 0 and the rewrite columns would say
    nothing about the rewrite."""
    g = torch.Generator().manual_seed(a.seed + 1)
    x = make_data(a.name, a.steps * a.batch, a.size, g)[0][:a.batch]
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # the cumulative average: after one forward, the batch's statistics
    if norms:
        model.train()
        with torch.no_grad():
            model(torch.randn(CALIBRATION, 3, a.size, a.size, generator=torch.Generator().manual_seed(a.seed + 2)))
    model.eval()
    np.savez(os.path.join(a.out, "eval_input.npz"), input=x.numpy())
    torch.onnx.export(model, x, os.path.join(a.out, "eval.onnx"), input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.EVAL, opset_version=14)
    ref = {}
    with torch.no_grad():
        ref["fp32"] = model(x).numpy()
        fp32_state = model.state_dict()
        state = collections.OrderedDict((k, v.clone()) for k, v in fp32_state.items())
        state._metadata = getattr(fp32_state, "_metadata", None)  # MNASNet's loader reads its version there
        ref["fp64"] = model.double()(as_dtype(x, torch.float64)).numpy()
        for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            model.float().load_state_dict(state)
            for t in list(model.parameters()) + list(model.buffers()):
                if t.dtype == torch.float32:
                    t.copy_(t.to(dt))
            with LowPrecision(dt):
                ref[name] = model(as_dtype(as_dtype(x, dt), torch.float32)).numpy()
    np.savez(os.path.join(a.out, "eval_ref.npz"), **ref)


def autocast_bf16(a, model):
    """--autocast: torch's CPU bf16 autocast trajectory (see the docstring)."""
    data = np.load(os.path.join(a.out, "data.npz"))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    losses = []
    try:
        for s in range(a.steps):
            x = torch.from_numpy(data["input"][s * a.batch:(s + 1) * a.batch])
            y = torch.from_numpy(data["labels"][s * a.batch:(s + 1) * a.batch])
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_of(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        info = {"bf16": losses}
    except RuntimeError as e:  # torch 1.13's CPU autocast lacks some mixed-type kernels (LayerNorm)
        info = {"error": str(e).strip().splitlines()[-1][:200]}
    with open(os.path.join(a.out, "autocast.json"), "w") as f:
        json.dump(info, f)


def replay(a, model, init_state):
    """--replay-steps steps of SGD (--lr, --replay-momentum) in float64 with every ReLU-like
    decision of step s taken from REPLAY/acts_s.npz: the inputs of the ONNX graph's Relu, Clip and MaxPool
    nodes (keyed as listed in REPLAY/kinks.json, in node order) in another implementation's
    forward of batch s with its weights before step s. Writes REPLAY/update.npz (every parameter's
    change over those steps) and REPLAY/replay.json {"flips": elements whose decision differs from
    float64's own, summed over the steps; "losses": the loss of each step}. With --replay-at, step s
    starts from REPLAY/weights_S.npz (that implementation's weights before step s) and writes its
    gradient to REPLAY/grad_S.npz instead: each step checked on its own, free of the trajectory.
    This is the true gradient of the piecewise-linear function that implementation's forward
    evaluated: the reference for its backward, free of which side of a kink fp32 rounding put an
    activation that sits on it. The same run in torch fp32 on the same pieces writes update32.npz,
    grad32_S.npz and "losses32": how close fp32 arithmetic itself gets."""
    with open(os.path.join(a.replay, "kinks.json")) as f:
        names = json.load(f)
    data = np.load(os.path.join(a.out, "data.npz"))
    info = {}
    for dtype, suffix in ((torch.float64, ""), (torch.float32, "32")):
        model.load_state_dict(init_state)
        model.to(dtype)
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.replay_momentum)
        flips, losses = 0, []
        params = dict(model.named_parameters())
        for s in range(a.replay_steps):
            if a.replay_at:
                w = np.load(os.path.join(a.replay, "weights_%d.npz" % s))
                with torch.no_grad():
                    for k, p in params.items():
                        p.copy_(torch.from_numpy(np.asarray(w[k])).to(dtype))
            acts_file = np.load(os.path.join(a.replay, "acts_%d.npz" % s))
            acts = [np.asarray(acts_file[n], np.float64) for n in names]
            x = as_dtype(torch.from_numpy(data["input"][s * a.batch:(s + 1) * a.batch]), dtype)
            y = torch.from_numpy(data["labels"][s * a.batch:(s + 1) * a.batch])
            mode = Decisions(acts)
            with mode:
                loss = loss_of(model(x), y)
            if mode.calls != len(acts):
                sys.exit("%d ReLU/Clip/MaxPool calls, the ONNX graph has %d Relu/Clip/MaxPool nodes" %
                         (mode.calls, len(acts)))
            flips += mode.flips
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            if a.replay_at:
                np.savez(os.path.join(a.replay, "grad%s_%d.npz" % (suffix, s)),
                         **{k: p.grad.double().numpy() for k, p in params.items()})
                continue
            opt.step()
        update = {k: v.detach().double().numpy() - init_state[k].double().numpy() for k, v in params.items()}
        np.savez(os.path.join(a.replay, "update%s.npz" % suffix), **update)
        if dtype == torch.float64:
            info = {"flips": flips, "losses": losses}
        else:
            info["losses32"] = losses
    with open(os.path.join(a.replay, "replay.json"), "w") as f:
        json.dump(info, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("out")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--replay", help="a folder with kinks.json and acts_S.npz: see replay()")
    p.add_argument("--replay-steps", type=int, default=1)
    p.add_argument("--replay-momentum", type=float, default=0.0)
    p.add_argument("--replay-at", action="store_true",
                   help="the gradient of each replayed step at REPLAY/weights_S.npz, not along torch's trajectory")
    p.add_argument("--eval", action="store_true", help="the eval export and torch's eval outputs instead (export_eval)")
    p.add_argument("--export-only", action="store_true", help="model.onnx and data.npz, no reference")
    p.add_argument("--autocast", action="store_true", help="torch's bf16 autocast trajectory instead (autocast_bf16)")
    a = p.parse_args()
    warnings.filterwarnings("ignore")  # the exporter's notes on in-place ops and training mode
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    model = build(a.name)
    model.train()
    state = model.state_dict()
    init_state = collections.OrderedDict((k, v.detach().clone()) for k, v in state.items())
    init_state._metadata = getattr(state, "_metadata", None)  # some models' loaders read versions there
    if a.replay:
        return replay(a, model, init_state)
    if a.eval:
        return export_eval(a, model)
    if a.autocast:
        return autocast_bf16(a, model)

    g = torch.Generator().manual_seed(a.seed + 1)
    n = a.steps * a.batch
    x_all, y_all = make_data(a.name, n, a.size, g)
    np.savez(os.path.join(a.out, "data.npz"), input=x_all.numpy(), labels=y_all.numpy())

    path = os.path.join(a.out, "model.onnx")
    torch.onnx.export(model, x_all[:a.batch], path, input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=14)
    if a.export_only:
        return
    # The export ran the model once in training mode (BatchNorm statistics moved): start again
    # from the initial state, which is also what the ONNX file holds.
    model.load_state_dict(init_state)
    onnx_model = onnx.load(path)
    inits = {t.name for t in onnx_model.graph.initializer}
    params = dict(model.named_parameters())
    missing = [k for k in params if k not in inits]
    if missing:
        sys.exit("%s: parameters without an ONNX initializer of the same name: %s" % (a.name, missing[:5]))
    for t in onnx_model.graph.initializer:
        if t.name in params and not np.array_equal(numpy_helper.to_array(t), params[t.name].detach().numpy()):
            sys.exit("%s: initializer %s differs from the torch parameter" % (a.name, t.name))
    np.savez(os.path.join(a.out, "initial.npz"), **{k: v.detach().numpy() for k, v in params.items()})
    recorder = Decisions()
    with torch.no_grad(), recorder:
        model(x_all[:a.batch])

    def run(steps, momentum, dtype):
        model.load_state_dict(init_state)
        model.to(dtype)
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=momentum)
        losses = []
        for s in range(steps):
            x = as_dtype(x_all[s * a.batch:(s + 1) * a.batch], dtype)
            y = y_all[s * a.batch:(s + 1) * a.batch]
            loss = loss_of(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        update = {k: v.detach().double().numpy() - init_state[k].double().numpy() for k, v in model.named_parameters()}
        return losses, update

    # The reference is torch in float64 (the initial weights and the batch are the fp32 ones,
    # widened): what an fp32 implementation should approach. torch's own fp32 run is measured
    # against it too, to show how well conditioned the model is at this size.
    sgd_loss, update = run(1, 0.0, torch.float64)
    np.savez(os.path.join(a.out, "sgd_update.npz"), **update)
    losses, _ = run(a.steps, a.momentum, torch.float64)
    sgd_loss32, update32 = run(1, 0.0, torch.float32)
    losses32, _ = run(a.steps, a.momentum, torch.float32)
    largest = max(np.abs(v).max() for v in update.values())
    torch32_sgd = max(np.abs(update32[k] - update[k]).max() for k in update) / largest
    # The trajectory's fp32 error is the worst of a few torch fp32 runs that fp32 cannot tell apart:
    # on one core and on two (another summation order), and from initial weights moved by one ulp
    # each (what storing them in fp32 already leaves open). Three steps with momentum on these
    # batch-4 networks amplify such differences by factors, so one run's error is one draw of a
    # spread (regnet_x_800mf: 1.4e-2 in one run, 3.0e-2 in another session's).
    def loss_error(ls):
        return max(abs(p - q) / abs(q) for p, q in zip(ls, losses))

    torch32_losses = loss_error(losses32)
    threads = torch.get_num_threads()
    for n in sorted({1, 2} - {threads}):
        torch.set_num_threads(n)
        torch32_losses = max(torch32_losses, loss_error(run(a.steps, a.momentum, torch.float32)[0]))
    torch.set_num_threads(threads)
    base = {k: v.clone() for k, v in init_state.items()}
    for seed in range(4):
        rng = np.random.RandomState(seed)
        for k, v in base.items():
            if v.dtype == torch.float32:
                w = v.numpy()
                towards = np.where(rng.randint(0, 2, w.shape) == 1, np.inf, -np.inf).astype(np.float32)
                init_state[k] = torch.from_numpy(np.nextafter(w, towards))
        torch32_losses = max(torch32_losses, loss_error(run(a.steps, a.momentum, torch.float32)[0]))
    init_state.update(base)
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump({"params": len(params), "numel": sum(v.numel() for v in params.values()), "losses": losses,
                   "sgd_loss": sgd_loss[0], "kink_shapes": recorder.shapes, "torch_fp32": {"losses": losses32, "sgd_error": float(torch32_sgd),
                                                          "loss_error": float(torch32_losses)}}, f)


class TinyUNet(torch.nn.Module):
    """A U-Net-style decoder (issue 16 item 4's upsampling networks): strided convolutions down,
    ConvTranspose2d up (k3 s2 p1 output_padding 1; grouped k2 s2), a skip concatenation, a linear head."""

    def __init__(self):
        super().__init__()
        self.down1 = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.BatchNorm2d(8),
                                         torch.nn.ReLU())
        self.down2 = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU())
        self.up1 = torch.nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.up2 = torch.nn.ConvTranspose2d(16, 8, 2, stride=2, groups=2)
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        d1 = self.down1(x)
        u1 = torch.relu(self.up1(self.down2(d1)))
        return self.head(torch.relu(self.up2(torch.cat([u1, d1], 1))).mean([2, 3]))


EXTRA["tiny_unet"] = TinyUNet


if __name__ == "__main__":
    main()
