"""onnx_amp.run / Runner against amp-run on the same models and inputs: the same outputs, bit for
bit (the same backend runs both); the same error lines; the GIL released while it runs."""
import os
import threading
import time

import numpy as np
import pytest

import onnx_amp
from conftest import error_line, model, tool

MODELS = ["mlp", "cnn", "gpt"]


def amp_run(path, inputs, work, *flags):
    rc, _, err = tool("amp-run", path, "--inputs", inputs, "--outputs", os.path.join(work, "out.npz"), *flags)
    assert rc == 0, err
    return dict(np.load(os.path.join(work, "out.npz")))


def sample(name):
    """The graph inputs of models/NAME.sample.npz (it also holds torch's outputs)."""
    got = np.load(model(name + ".sample.npz"))
    key = "tokens" if name == "gpt" else "input"
    return {key: got[key]}


@pytest.mark.parametrize("name", MODELS)
def test_same_outputs_as_amp_run(work, name):
    inputs = os.path.join(work, "in.npz")
    np.savez(inputs, **sample(name))
    theirs = amp_run(model(name + ".onnx"), inputs, work)
    ours = onnx_amp.run(model(name + ".onnx"), sample(name))
    assert list(ours) == list(theirs)
    for k in ours:
        assert ours[k].dtype == theirs[k].dtype and ours[k].tobytes() == theirs[k].tobytes(), k


def test_bf16_outputs_come_back_as_float32(work):
    """A bf16 rewrite without keep_io_types has bf16 outputs: amp-run writes their bits under
    "NAME.bf16", run() returns them widened to float32 (exact)."""
    rewritten = os.path.join(work, "mlp.bf16.onnx")
    onnx_amp.rewrite(model("mlp.onnx"), dtype="bf16", keep_io_types=False, output=rewritten)
    inputs = os.path.join(work, "in.npz")
    x = sample("mlp")["input"]
    # The bf16 input takes float32 (rounded) here and its bits in the .npz.
    bits = ((x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16).astype(np.uint16)
    np.savez(inputs, **{"input.bf16": bits})
    theirs = amp_run(rewritten, inputs, work)
    ours = onnx_amp.run(rewritten, {"input": x})
    assert ours["logits"].dtype == np.float32
    assert np.array_equal(ours["logits"], (theirs["logits.bf16"].astype(np.uint32) << 16).view(np.float32))
    assert np.array_equal(onnx_amp.run(rewritten, {"input": bits})["logits"], ours["logits"])


def test_model_proto_and_runner(work):
    import onnx
    x = sample("cnn")
    runner = onnx_amp.Runner(onnx.load(model("cnn.onnx")))
    assert runner.inputs == [("input", "float[N,1,28,28]")] and runner.device == "cpu"
    first, second = runner.run(x), runner.run(x)
    assert np.array_equal(first["logits"], second["logits"])
    assert np.array_equal(first["logits"], onnx_amp.run(model("cnn.onnx"), x)["logits"])


def test_non_contiguous_inputs(work):
    x = sample("mlp")["input"]
    reversed_rows = x[::-1]
    fortran = np.asfortranarray(x)
    expect = onnx_amp.run(model("mlp.onnx"), {"input": np.ascontiguousarray(reversed_rows)})["logits"]
    assert np.array_equal(onnx_amp.run(model("mlp.onnx"), {"input": reversed_rows})["logits"], expect)
    assert np.array_equal(onnx_amp.run(model("mlp.onnx"), {"input": fortran})["logits"],
                          onnx_amp.run(model("mlp.onnx"), {"input": x})["logits"])
    out = onnx_amp.run(model("mlp.onnx"), {"input": x})["logits"]
    out += 1  # the outputs are the caller's to write


def test_device_auto_and_cuda(work):
    """auto loads the CUDA backend's module to ask for a device (its symbols must resolve against
    this extension's) and runs on the CPU without one; cuda names why not, as amp-run does."""
    x = sample("cnn")
    runner = onnx_amp.Runner(model("cnn.onnx"), device="auto")
    assert np.array_equal(runner.run(x)["logits"], onnx_amp.run(model("cnn.onnx"), x)["logits"])
    inputs = os.path.join(work, "in.npz")
    np.savez(inputs, **x)
    rc, _, err = tool("amp-run", model("cnn.onnx"), "--inputs", inputs, "--outputs", os.path.join(work, "o.npz"),
                      "--device", "cuda")
    if runner.device == "cuda":
        assert rc == 0
        return
    assert rc == 2, err
    with pytest.raises(onnx_amp.InputError) as e:
        onnx_amp.run(model("cnn.onnx"), x, device="cuda")
    assert str(e.value) == error_line(err, "amp-run")


def test_errors(work):
    with pytest.raises(onnx_amp.InputError) as e:
        onnx_amp.run(model("cnn.onnx"), {"tokens": np.zeros((1, 4), np.int64)})
    assert str(e.value) == "inputs: no array 'input' for graph input input (float[N,1,28,28])"
    with pytest.raises(onnx_amp.InputError, match="input"):
        onnx_amp.run(model("cnn.onnx"), {"input": np.zeros((2, 1, 28, 28), np.float64)})
    inputs = os.path.join(work, "in.npz")
    np.savez(inputs, input=np.zeros((2, 1, 28, 28), np.float64))
    rc, _, err = tool("amp-run", model("cnn.onnx"), "--inputs", inputs, "--outputs", os.path.join(work, "o.npz"))
    assert rc == 2
    with pytest.raises(onnx_amp.InputError) as e:
        onnx_amp.run(model("cnn.onnx"), {"input": np.zeros((2, 1, 28, 28), np.float64)})
    assert str(e.value) == error_line(err, "amp-run")


def test_gil_is_released_while_it_runs():
    """A Python thread keeps stamping the time while run() computes: with the GIL held for the
    whole call, its stamps would stop for the call's length."""
    runner = onnx_amp.Runner(model("cnn.onnx"), threads=1)
    # A batch large enough for a call of a few tenths of a second on this machine, whatever its speed.
    batch = 256
    while True:
        x = {"input": np.random.default_rng(0).standard_normal((batch, 1, 28, 28)).astype(np.float32)}
        runner.run(x)  # plans the shapes
        t0 = time.perf_counter()
        runner.run(x)
        if time.perf_counter() - t0 > 0.2 or batch >= 16384:
            break
        batch *= 4
    stamps, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    runner.run(x)
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [s for s in stamps if t0 <= s <= t1]
    gaps = np.diff([t0] + inside + [t1])
    assert t1 - t0 > 0.05, "the call is too short to tell (%.3f s)" % (t1 - t0)
    assert gaps.max() < (t1 - t0) / 2, (gaps.max(), t1 - t0, len(inside))
