#!/usr/bin/python3
"""PyTorch side of tests/bench/compare_torch_train.sh: the same models, weights and batch as amp-train.

    /usr/bin/python3 tests/bench/torch_train_peer.py prepare MODEL DIR
        seeds and builds MODEL, saves its weights (DIR/MODEL.pt), exports it in training mode
        without constant folding (DIR/MODEL.onnx: the initializers are the torch weights) and
        writes one synthetic batch (DIR/MODEL.npz: the graph input + int64 "labels")
    /usr/bin/python3 tests/bench/torch_train_peer.py train MODEL DIR --dtype fp32|bf16 --threads N
        --warmup W --steps S
        W + S plain-SGD steps (lr 0.01, cross entropy) on that batch; prints one JSON line:
        the first and last step's loss and the median ms of the S steps after the warm-up
    /usr/bin/python3 tests/bench/torch_train_peer.py amp-result METRICS.jsonl --batch B --warmup W
        the same JSON line from an amp-train --metrics file (ms = 1000 * B / samples_per_second)
    /usr/bin/python3 tests/bench/torch_train_peer.py table DIR
        the comparison table of compare_torch_train.sh from DIR/cases ("MODEL DTYPE THREADS" lines)
        and each case's files DIR/MODEL.DTYPE.THREADS.{torch,amp}.{json,rss,log}; exits 1 when a
        case failed or the first-step losses disagree

Models: resnet18 and mobilenet_v2 (torchvision, 10 classes, 3x32x32), cnn and gpt (models/
torch_models.py: 1x28x28, and 32 tokens of 64). Batch 32 unless --batch says otherwise. Dropout
is set to p=0 in both frameworks' copies, since the two would draw different masks and the
first-step losses could not be compared; BatchNorm runs in training mode (batch statistics) in both.
Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision).
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))

SEED = 0
LR = 0.01
MODELS = ("resnet18", "mobilenet_v2", "cnn", "gpt")


class Clamp6(nn.Module):
    """ReLU6 as clamp(x, 0, 6) for bf16 autocast: torch 1.13 has no bf16 CPU kernel for ReLU6's
    backward (hardtanh_backward: '"hardshrink_backward_cpu" not implemented for 'BFloat16''), while
    clamp's backward runs in bf16. Same function and export (Clip); the gradient differs only on
    inputs exactly at 0 or 6."""

    def forward(self, x):
        return torch.clamp(x, 0.0, 6.0)


def relu6_as_clamp(module):
    """Replaces every nn.ReLU6 under module by Clamp6; returns how many."""
    count = 0
    for name, child in module.named_children():
        if isinstance(child, nn.ReLU6):
            setattr(module, name, Clamp6())
            count += 1
        else:
            count += relu6_as_clamp(child)
    return count


def build(name):
    """The freshly seeded module; Dropout disabled (see the module doc)."""
    torch.manual_seed(SEED)
    if name in ("resnet18", "mobilenet_v2"):
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, num_classes=10)
    else:
        import torch_models

        model = torch_models.build(name)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model.train()


def batch(name, n):
    """(inputs keyed by graph input name, int64 labels) as numpy arrays, seeded."""
    rng = np.random.RandomState(SEED)
    if name == "gpt":
        tokens = rng.randint(0, 64, size=(n, 32)).astype(np.int64)
        return {"tokens": tokens}, rng.randint(0, 64, size=(n, 32)).astype(np.int64)
    shape = (n, 1, 28, 28) if name == "cnn" else (n, 3, 32, 32)
    return {"input": rng.standard_normal(shape).astype(np.float32)}, rng.randint(0, 10, size=(n,)).astype(np.int64)


def prepare(args):
    os.makedirs(args.dir, exist_ok=True)
    model = build(args.model)
    # Saved before the export: tracing in training mode runs a forward, which moves BatchNorm's
    # running statistics (they do not enter a training step's loss either way).
    torch.save(model.state_dict(), os.path.join(args.dir, args.model + ".pt"))
    inputs, labels = batch(args.model, args.batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            tuple(torch.from_numpy(v) for v in inputs.values()),
            os.path.join(args.dir, args.model + ".onnx"),
            export_params=True,
            opset_version=17,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            input_names=list(inputs),
            output_names=["logits"],
        )
    np.savez(os.path.join(args.dir, args.model + ".npz"), labels=labels, **inputs)


def peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def train(args):
    torch.set_num_threads(args.threads)
    model = build(args.model)
    model.load_state_dict(torch.load(os.path.join(args.dir, args.model + ".pt")))
    data = np.load(os.path.join(args.dir, args.model + ".npz"))
    inputs = [torch.from_numpy(data[k]) for k in data.files if k != "labels"]
    labels = torch.from_numpy(data["labels"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    bf16 = args.dtype == "bf16"
    clamped = relu6_as_clamp(model) if bf16 else 0

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(*inputs)
            # float(): autocast's cross entropy runs in fp32 anyway; amp-train's loss is fp32 too.
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    losses, ms = [], []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        t1 = time.perf_counter()
        if i >= args.warmup:
            ms.append((t1 - t0) * 1e3)
    print(json.dumps({"framework": "torch", "model": args.model, "dtype": args.dtype, "threads": args.threads,
                      "first_loss": losses[0], "last_loss": losses[-1], "losses": losses, "ms": statistics.median(ms),
                      "ms_all": ms, "getrusage_peak_mib": peak_rss_mib(),
                      "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                      "relu6_as_clamp": clamped}))


def amp_result(args):
    """amp-train's --metrics lines as the torch side's JSON line (losses, median ms after warm-up)."""
    records = []
    with open(args.metrics) as f:
        for line in f:
            r = json.loads(line)
            if "step" in r and "samples_per_second" in r:
                records.append(r)
    if len(records) <= args.warmup:
        sys.exit("%s: %d step records, need more than the %d warm-up steps" % (args.metrics, len(records), args.warmup))
    ms = [1e3 * args.batch / r["samples_per_second"] for r in records[args.warmup:]]
    print(json.dumps({"framework": "amp", "first_loss": records[0]["loss"], "last_loss": records[-1]["loss"],
                      "losses": [r["loss"] for r in records], "ms": statistics.median(ms), "ms_all": ms}))


# Relative difference of the first-step losses above which the two runs are not training the same
# thing: same weights and batch give the same loss up to summation order in fp32; 16-bit forwards
# round differently in the two frameworks (which products and sums run in bf16), so only a
# sanity bound there.
LOSS_TOLERANCE = {"fp32": 1e-3, "bf16": 3e-2, "fp16": 3e-2}


def load_case(results, case, side):
    """One side's result of one case: the JSON line, its peak RSS (/usr/bin/time %M, KiB) and, when it
    made no JSON line, the last line of its log as the error ('not run' for torch fp16)."""
    base = os.path.join(results, case + "." + side)
    res = {}
    if os.path.exists(base + ".json") and os.path.getsize(base + ".json"):
        with open(base + ".json") as f:
            res = json.loads(f.read().strip().splitlines()[-1])
    elif os.path.exists(base + ".log"):
        with open(base + ".log", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        res["error"] = lines[-1] if lines else "failed without output"
    if "error" not in res and os.path.exists(base + ".rss"):
        with open(base + ".rss") as f:
            kib = [line.strip() for line in f if line.strip().isdigit()]
        if kib:
            res["rss_mib"] = int(kib[-1]) / 1024.0
    return res


def table(args):
    rows = []
    with open(os.path.join(args.results, "cases")) as f:
        for line in f:
            if line.strip():
                model, dtype, threads = line.split()
                case = "%s.%s.%s" % (model, dtype, threads)
                rows.append({"model": model, "dtype": dtype, "threads": int(threads),
                             "torch": load_case(args.results, case, "torch"),
                             "amp": load_case(args.results, case, "amp")})

    def fmt(v, spec):
        return "—" if v is None else spec % v

    head = "%-13s %-5s %7s %10s %10s %9s %10s %10s %11s %11s" % (
        "model", "dtype", "threads", "torch ms", "amp ms", "amp/torch", "torch MiB", "amp MiB",
        "torch loss1", "amp loss1")
    print(head)
    print("-" * len(head))
    warnings_, notes = [], []
    for r in rows:
        t, a = r["torch"], r["amp"]
        tm, am = t.get("ms"), a.get("ms")
        ratio = am / tm if tm and am else None
        print("%-13s %-5s %7d %10s %10s %9s %10s %10s %11s %11s" % (
            r["model"], r["dtype"], r["threads"], fmt(tm, "%.1f"), fmt(am, "%.1f"), fmt(ratio, "%.2f"),
            fmt(t.get("rss_mib"), "%.0f"), fmt(a.get("rss_mib"), "%.0f"),
            fmt(t.get("first_loss"), "%.5f"), fmt(a.get("first_loss"), "%.5f")))
        for side, res in (("torch", t), ("amp-train", a)):
            if res.get("error"):
                warnings_.append("%s failed on %s %s, %d thread(s): %s" % (
                    side, r["model"], r["dtype"], r["threads"], res["error"]))
        if t.get("relu6_as_clamp"):
            notes.append("note: torch %s %s runs its ReLU6 as clamp(x, 0, 6): torch %s has no bf16 CPU ReLU6 backward" % (
                r["model"], r["dtype"], t.get("torch", "")))
        tl, al = t.get("first_loss"), a.get("first_loss")
        if tl is not None and al is not None:
            rel = abs(al - tl) / max(abs(tl), 1e-12)
            if rel > LOSS_TOLERANCE[r["dtype"]]:
                warnings_.append("WARNING: %s %s %d thread(s): first-step losses differ by %.2e relative (torch %.6f, "
                                 "amp %.6f; tolerance %.0e): the two runs do not train the same thing" % (
                                     r["model"], r["dtype"], r["threads"], rel, tl, al, LOSS_TOLERANCE[r["dtype"]]))
    print()
    # bf16 (and fp16) step against fp32's, per model and thread count, for both frameworks.
    by = {(r["model"], r["dtype"], r["threads"]): r for r in rows}
    for model in dict.fromkeys(r["model"] for r in rows):
        parts = []
        for low in ("bf16", "fp16"):
            for threads in sorted({r["threads"] for r in rows if r["model"] == model}):
                f, l = by.get((model, "fp32", threads)), by.get((model, low, threads))
                if not f or not l:
                    continue
                ratios = []
                for side in ("amp", "torch"):
                    fm, lm = (f.get(side) or {}).get("ms"), (l.get(side) or {}).get("ms")
                    if fm and lm:
                        ratios.append("%s %.2f" % (side, lm / fm))
                if ratios:
                    parts.append("%s/fp32 at %d thread%s: %s" % (low, threads, "" if threads == 1 else "s",
                                                                 ", ".join(ratios)))
        if parts:
            print("%-13s step time ratio, %s" % (model, "; ".join(parts)))
    for n in dict.fromkeys(notes):
        print(n)
    for w in warnings_:
        print(w)
    return 1 if warnings_ else 0


def pick_median(args):
    """Of several runs' JSON lines (one file each), the run whose step time is the median (the
    lower middle for an even count), with every run's time added as ms_runs; an empty or missing
    file (a failed run) makes the result empty too."""
    runs = []
    for path in args.runs:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            text = ""
        if not text:
            return 0
        runs.append(json.loads(text))
    runs.sort(key=lambda r: r["ms"])
    chosen = dict(runs[(len(runs) - 1) // 2])
    chosen["ms_runs"] = [r["ms"] for r in runs]
    print(json.dumps(chosen))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("model", choices=MODELS)
    p.add_argument("dir")
    p.add_argument("--batch", type=int, default=32)
    p.set_defaults(fn=prepare)
    t = sub.add_parser("train")
    t.add_argument("model", choices=MODELS)
    t.add_argument("dir")
    t.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--warmup", type=int, default=3)
    t.add_argument("--steps", type=int, default=10)
    t.set_defaults(fn=train)
    a = sub.add_parser("amp-result")
    a.add_argument("metrics")
    a.add_argument("--batch", type=int, required=True)
    a.add_argument("--warmup", type=int, default=3)
    a.set_defaults(fn=amp_result)
    m = sub.add_parser("median")
    m.add_argument("runs", nargs="+", help="one JSON-line file per run")
    m.set_defaults(fn=pick_median)
    tb = sub.add_parser("table")
    tb.add_argument("results", help="the folder compare_torch_train.sh filled")
    tb.set_defaults(fn=table)
    args = ap.parse_args()
    if getattr(args, "steps", 1) < 1 or getattr(args, "warmup", 0) < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    sys.exit(args.fn(args) or 0)


if __name__ == "__main__":
    main()
