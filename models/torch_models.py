"""PyTorch definitions of the demo models, shared by export_models.py and make_inputs.py.

Module attribute names become ONNX initializer names ("fc1.weight", ...), so renaming
an attribute renames the exported tensor.
"""
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

SEED = 0


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.flatten(x)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ResidualBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + x)


class CNN(nn.Module):
    """Small ResNet-ish classifier for 1x28x28 Fashion-MNIST images."""

    def __init__(self):
        super().__init__()
        # Convs feeding a BatchNorm carry no bias: BN's shift makes it redundant.
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.block = ResidualBlock(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.block(x)
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.flatten(self.gap(x))
        return self.fc(self.dropout(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.d_model = d_model
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, hide):
        # Python ints for the static dims keep them out of the traced shape arithmetic;
        # only N and T come from Shape.
        n, t = x.shape[0], x.shape[1]
        c, h, hd = self.d_model, self.n_head, self.head_dim
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.reshape(n, t, h, hd).transpose(1, 2)
        k = k.reshape(n, t, h, hd).transpose(1, 2)
        v = v.reshape(n, t, h, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(hide, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(n, t, c))


class FeedForward(nn.Module):
    def __init__(self, d_model, d_hidden, gelu="none"):
        super().__init__()
        self.fc = nn.Linear(d_model, d_hidden)
        self.gelu = nn.GELU(approximate=gelu)
        self.proj = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_head, d_hidden, gelu="none"):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_hidden, gelu)

    def forward(self, x, hide):
        x = x + self.attn(self.ln1(x), hide)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Character-level decoder-only transformer; tokens [N,T] int64 -> logits [N,T,vocab]."""

    # The MLP is 2x wide rather than GPT's usual 4x to keep the committed .onnx files small.
    # gelu: nn.GELU's approximate, "none" (the committed models) or "tanh" (GPT-2's own gelu_new).
    def __init__(self, vocab=64, ctx=32, n_layer=2, n_head=4, d_model=64, d_hidden=128, gelu="none"):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(ctx, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, d_hidden, gelu) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        # True above the diagonal = positions to hide, so export needs no Not. One buffer
        # shared by all layers, sliced once; persistent so it exports as a named initializer.
        self.register_buffer("causal_mask", torch.ones(ctx, ctx, dtype=torch.bool).triu(1))

    def forward(self, tokens):
        t = tokens.shape[1]
        # arange over the traced length exports as Range, keeping T dynamic.
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(t, device=tokens.device))
        hide = self.causal_mask[:t, :t]
        for block in self.blocks:
            x = block(x, hide)
        return self.head(self.ln_f(x))


# name -> (class, {graph input name: dynamic axes}, output names, output dynamic axes)
SPECS = {
    "mlp": (MLP, {"input": {0: "N"}}, ["logits"], {"logits": {0: "N"}}),
    "cnn": (CNN, {"input": {0: "N"}}, ["logits"], {"logits": {0: "N"}}),
    "gpt": (GPT, {"tokens": {0: "N", 1: "T"}}, ["logits"], {"logits": {0: "N", 1: "T"}}),
}


def build(name):
    """Freshly seeded model, so every caller gets identical weights."""
    torch.manual_seed(SEED)
    model = SPECS[name][0]()
    # Fresh norm layers are (nearly) the identity, which would hide folding or precision
    # bugs downstream; their equal-valued ones/zeros would also be merged by the eval
    # exporter's by-value initializer dedup into Identity-aliased tensors.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return model


def example_inputs(name):
    """Deterministic sample inputs as numpy arrays keyed by graph input name."""
    rng = np.random.RandomState(SEED)
    if name == "gpt":
        return {"tokens": rng.randint(0, 64, size=(2, 16)).astype(np.int64)}
    return {"input": rng.rand(4, 1, 28, 28).astype(np.float32)}
