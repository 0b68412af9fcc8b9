"""onnx_amp.Trainer against amp-train: a Python loop over the same batches gives amp-train's
losses, loss scales, skipped steps, validation, checkpointed state and saved model, bit for bit;
state_dict() resumes exactly; Ctrl-C stops a long call cleanly."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import onnx_amp
from conftest import BUILD, error_line, model, tool

BATCH, STEPS, VAL = 8, 4, 20

# (model, amp-train flags, the same as Trainer keyword arguments)
CASES = [
    ("cnn.train.onnx", ["--dtype", "fp16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
     {"dtype": "fp16", "optimizer": "sgd", "lr": 0.05, "momentum": 0.9}),
    ("gpt.train.onnx", ["--dtype", "bf16", "--optimizer", "adamw", "--lr", "0.001", "--weight-decay", "0.01"],
     {"dtype": "bf16", "optimizer": "adamw", "lr": 0.001, "weight_decay": 0.01}),
    ("mlp.train.onnx", ["--dtype", "fp32", "--optimizer", "adam", "--lr", "0.01", "--schedule", "cosine", "--warmup", "1"],
     {"dtype": "fp32", "optimizer": "adam", "lr": 0.01, "schedule": "cosine", "warmup": 1, "total_steps": STEPS}),
]


def make_data(name, n, seed):
    g = np.random.default_rng(seed)
    if name.startswith("gpt"):
        tokens = g.integers(0, 64, (n, 32), dtype=np.int64)
        return {"tokens": tokens, "labels": np.roll(tokens, -1, axis=1)}
    return {"input": g.standard_normal((n, 1, 28, 28)).astype(np.float32),
            "labels": g.integers(0, 10, n, dtype=np.int64)}


def batches(data, size):
    n = len(next(iter(data.values())))
    return [{k: v[i:i + size] for k, v in data.items()} for i in range(0, n, size)]


def records(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


@pytest.mark.parametrize("name,flags,kwargs", CASES)
def test_python_loop_matches_amp_train_bit_for_bit(work, name, flags, kwargs):
    train, val = make_data(name, BATCH * STEPS, 1), make_data(name, VAL, 2)
    np.savez(os.path.join(work, "train.npz"), **train)
    np.savez(os.path.join(work, "val.npz"), **val)
    rc, out, err = tool("amp-train", model(name), "--data", os.path.join(work, "train.npz"), "--val",
                        os.path.join(work, "val.npz"), "--loss", "cross_entropy", "--no-shuffle", "--batch-size", BATCH,
                        "--steps", STEPS, "--seed", 3, "--threads", 2, "--metrics", os.path.join(work, "m.jsonl"),
                        "--save", os.path.join(work, "cmd.onnx"), "--checkpoint", os.path.join(work, "ck"), *flags)
    assert rc == 0, err
    got = records(os.path.join(work, "m.jsonl"))
    steps = [r for r in got if "loss" in r]
    validation = [r for r in got if "val_loss" in r]
    assert len(steps) == STEPS and len(validation) == 1

    t = onnx_amp.Trainer(model(name), loss="cross_entropy", seed=3, threads=2, **kwargs)
    losses = [t.step(b) for b in batches(train, BATCH)]
    assert losses == [r["loss"] for r in steps]
    scaled = kwargs["dtype"] == "fp16"
    assert [h["loss_scale"] for h in t.history] == [r["loss_scale"] if scaled else None for r in steps]
    assert [h["skipped"] for h in t.history] == [r["skipped"] for r in steps]
    assert t.skipped_steps == sum(r["skipped"] for r in steps)
    assert t.loss_scale == (steps[-1]["loss_scale"] if scaled else None)

    ev = t.evaluate(batches(val, BATCH))
    assert ev["loss"] == validation[0]["val_loss"] and ev["samples"] == VAL
    assert ev["accuracy"] == validation[0]["val_accuracy"]

    state = t.state_dict()["state"]
    saved = np.load(os.path.join(work, "ck", "checkpoint.npz"))
    tensors = [k for k in saved.files if k != "__position__"]
    assert sorted(state) == sorted(tensors)
    for k in state:
        assert state[k].dtype == saved[k].dtype and np.array_equal(state[k], saved[k]), k

    t.export(os.path.join(work, "py.onnx"))
    with open(os.path.join(work, "py.onnx"), "rb") as a, open(os.path.join(work, "cmd.onnx"), "rb") as b:
        assert a.read() == b.read()


def test_state_dict_resumes_exactly(work):
    """cnn.train has Dropout: the resumed trainer must continue the masks' stream as well."""
    data = batches(make_data("cnn", BATCH * 4, 5), BATCH)
    first = onnx_amp.Trainer(model("cnn.train.onnx"), dtype="fp16", optimizer="adamw", lr=1e-3, seed=7, threads=2)
    for b in data[:2]:
        first.step(b)
    state = first.state_dict()
    assert state["steps"] == 2 and state["backend_runs"] == 2
    assert any(k.endswith("loss_scale") or "scale" in k for k in state["state"]), list(state["state"])
    expect = [first.step(b) for b in data[2:]]

    second = onnx_amp.Trainer(model("cnn.train.onnx"), dtype="fp16", optimizer="adamw", lr=1e-3, seed=7, threads=2)
    second.load_state_dict(state)
    assert second.steps == 2
    assert [second.step(b) for b in data[2:]] == expect
    # Not by accident: a trainer that starts from the saved weights without the dropout stream's
    # position draws other masks.
    third = onnx_amp.Trainer(model("cnn.train.onnx"), dtype="fp16", optimizer="adamw", lr=1e-3, seed=7, threads=2)
    third.load_state_dict(dict(state, backend_runs=0))
    assert [third.step(b) for b in data[2:]] != expect


def test_training_graph_export_continues(work):
    data = batches(make_data("mlp", BATCH * 3, 6), BATCH)
    t = onnx_amp.Trainer(model("mlp.train.onnx"), dtype="bf16", optimizer="sgd", lr=0.1, momentum=0.9, threads=2)
    t.step(data[0])
    t.export(os.path.join(work, "step.onnx"), training_graph=True)
    expect = [t.step(b) for b in data[1:]]
    again = onnx_amp.Trainer(os.path.join(work, "step.onnx"), lr=0.1, threads=2)
    assert [again.step(b) for b in data[1:]] == expect


def test_plot_and_errors(work):
    t = onnx_amp.Trainer(model("mlp.train.onnx"), dtype="bf16", threads=2)
    for b in batches(make_data("mlp", BATCH * 2, 4), BATCH):
        t.step(b)
    t.evaluate(make_data("mlp", 4, 9))
    t.plot(os.path.join(work, "loss.svg"), title="mlp")
    with open(os.path.join(work, "loss.svg")) as f:
        svg = f.read()
    assert svg.startswith("<svg") or "<svg" in svg[:200]
    assert "mlp" in svg and "training loss" in svg

    with pytest.raises(onnx_amp.InputError) as e:
        onnx_amp.Trainer(model("mlp.train.onnx"), optimizer="lion")
    rc, _, err = tool("amp-train", model("mlp.train.onnx"), "--data", os.path.join(work, "loss.svg"), "--optimizer",
                      "lion")
    assert rc == 2 and str(e.value) == error_line(err, "amp-train")
    with pytest.raises(onnx_amp.InputError, match="labels"):
        t.step({"input": np.zeros((2, 1, 28, 28), np.float32)})


CTRL_C = r"""
import sys, time
import numpy as np
import onnx_amp
t = onnx_amp.Trainer(sys.argv[1], dtype="bf16", threads=1)
batch = {"input": np.zeros((64, 1, 28, 28), np.float32), "labels": np.zeros(64, np.int64)}
t.step(batch)
print("started", flush=True)
start = time.time()
try:
    t.evaluate([batch] * 1000000)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted after %.1f s" % (time.time() - start), flush=True)
print("next step", t.step(batch) >= 0, flush=True)
"""


def test_ctrl_c_stops_a_long_call_cleanly():
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    p = subprocess.Popen(["/usr/bin/python3", "-c", CTRL_C, model("cnn.train.onnx")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "started"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted after"), out
    assert lines[1] == "next step True", out
