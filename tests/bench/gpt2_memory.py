"""A GPT-2-small-shaped model for tests/bench/gpt2_memory.sh: 12 layers, 768 wide, 12 heads,
4x MLP, vocabulary 50257, context 64 (--ctx: GPT-2's own is 1024) (models/torch_models.py's GPT at
GPT-2 small's sizes; its head is a separate nn.Linear, not tied to the token embedding: 162M
parameters, 163M at context 1024).

    /usr/bin/python3 tests/bench/gpt2_memory.py export DIR [--ctx T]   # DIR/gpt2.onnx(+.data), DIR/tokens.npz
    /usr/bin/python3 tests/bench/gpt2_memory.py torch DIR --batch-size 4 --steps 3 --threads 2 [--ctx T]

`export` writes the model in eval mode with its weights in external data, and 64 samples of
random tokens and next-token labels. `torch` trains the same model (same seed, so the same
initial weights) with AdamW on the same data, batch and threads: the peer whose peak resident
memory gpt2_memory.sh prints beside amp-train's.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import torch_models  # noqa: E402

SIZES = dict(vocab=50257, ctx=64, n_layer=12, n_head=12, d_model=768, d_hidden=3072)
SAMPLES = 64


def build(ctx):
    torch.manual_seed(0)
    return torch_models.GPT(**dict(SIZES, ctx=ctx))


def export(out, ctx):
    import onnx

    os.makedirs(out, exist_ok=True)
    model = build(ctx).eval()
    rng = np.random.RandomState(0)
    tokens = rng.randint(0, SIZES["vocab"], size=(SAMPLES, ctx + 1)).astype(np.int64)
    np.savez(os.path.join(out, "tokens.npz"), tokens=tokens[:, :-1], labels=tokens[:, 1:])
    tmp = os.path.join(out, "gpt2.export.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(tokens[:2, :-1]),), tmp, export_params=True, opset_version=17,
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True,
                          input_names=["tokens"], output_names=["logits"],
                          dynamic_axes={"tokens": {0: "N", 1: "T"}, "logits": {0: "N", 1: "T"}})
    del model
    proto = onnx.load(tmp)
    for f in os.listdir(out):  # the exporter's own external files (models over 2 GB), if any
        if f not in ("tokens.npz", "gpt2.export.onnx"):
            os.remove(os.path.join(out, f))
    os.remove(tmp)
    onnx.save(proto, os.path.join(out, "gpt2.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="gpt2.onnx.data", size_threshold=1024)
    params = sum(int(np.prod(t.dims)) for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    print(f"{out}/gpt2.onnx: {params / 1e6:.1f}M fp32 parameters in external data; {out}/tokens.npz: {SAMPLES} samples")


def train(out, batch_size, steps, threads, ctx):
    torch.set_num_threads(threads)
    data = np.load(os.path.join(out, "tokens.npz"))
    tokens, labels = torch.from_numpy(data["tokens"]), torch.from_numpy(data["labels"])
    model = build(ctx).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for step in range(steps):
        at = (step * batch_size) % SAMPLES
        x, y = tokens[at:at + batch_size], labels[at:at + batch_size]
        start = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        print(f"torch step {step + 1}: loss {loss.item():.4f} {times[-1] * 1e3:.0f} ms")
    params = sum(p.numel() for p in model.parameters())
    print(f"torch: {params / 1e6:.1f}M parameters, {np.median(times[1:] or times) * 1e3:.0f} ms/step")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["export", "torch"])
    p.add_argument("dir")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=SIZES["ctx"], help="context length: position table and tokens")
    a = p.parse_args()
    if a.what == "export":
        export(a.dir, a.ctx)
    else:
        train(a.dir, a.batch_size, a.steps, a.threads, a.ctx)


if __name__ == "__main__":
    main()
