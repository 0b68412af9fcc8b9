#!/usr/bin/python3
"""The model zoo against PyTorch: amp-train on a torchvision model, checked against torch.

    /usr/bin/python3 tests/zoo/zoo_check.py --build BUILD [--work DIR] [--table] MODEL...

For each MODEL, zoo_reference.py exports it and records what torch does (see there); then each
check in CHECKS runs amp-train (BUILD/amp-train, fp32, --no-shuffle, one thread) and compares.

The reference is torch in float64 on the pieces amp-train's forward chose. These networks are
piecewise linear: at batch 4 some ReLU / ReLU6 input sits within fp32 rounding of 0, and which
side an fp32 forward puts it on moves the gradient by up to 1e-2 of the largest update
(mobilenet_v2 at 64x64: one element of features.17's ReLU6; torch fp32 misses float64 by 9.5e-3
there, amp-train by 2.7e-3, and each matches float64 on its own pieces to 3e-5). So the driver
asks amp-run for our forward's input to every Relu, Clip and MaxPool, and zoo_reference.py --replay runs
torch float64 with those decisions (Decisions in zoo_reference.py): the true gradient of the
function our forward evaluated. Each check also reports the plain float64 comparison and torch's
own fp32 error, so the conditioning of the model is in the table.

Every judged number is an error against that float64 reference, and passes when it is at most
max(bound, 2 x torch fp32's error against the same reference on the same pieces) (judge(); the
cell names which of the two decided). The bounds are what a well-conditioned model meets; on the
deepest networks fp32 storage and fp32 convolutions alone exceed them (tests/zoo/fp32_floor.py),
and a failure means more error than fp32 arithmetic explains.

  sgd       one step of plain SGD (lr 0.01): every parameter's update (the weights in amp-train's
            final --checkpoint minus the initial ones) against the reference's. The error of a
            parameter is its largest element difference divided by the largest update of any
            parameter in the model (an error relative to the parameter's own update would flag
            parameters whose true gradient is ~0, such as a BatchNorm bias whose shift the next
            BatchNorm removes). Bound 2e-4; names the parameters over the limit.
  steps     each of the first three steps of SGD with momentum 0.9 on its own: the gradient
            amp-train took (from its checkpointed momentum buffers) against the reference's
            gradient at amp-train's own weights before that step (bound 2e-4 of the largest), and
            the loss there (bound 5e-4 relative), each step judged against torch fp32's error at
            that step. Checks every step without the trajectory's chaos.
  momentum  the first three losses of that run against the reference's trajectory (bound 5e-4
            relative), on our pieces and on each trainer's own (see check_momentum): 3 steps at
            lr 0.01 with momentum already amplify rounding on some of these at batch 4.

With --amp, also (AMP_CHECKS; these need zoo_reference.py --eval's eval-mode export, made once):

  forward       the eval export's fp32 forward in amp-run against torch's float64 eval output on
                the first batch: max|diff| over max|output|, bound 1e-4 (judged as above).
  fp16 rewrite  amp-rewrite --dtype fp16 of the eval export: passes onnx.checker's full check,
  bf16 rewrite  rewriting it again changes no byte, runs in amp-run (fp16: and in ONNX Runtime);
                its error against torch fp32 is reported beside an emulated all-16-bit
                conversion's (see check_rewrite).
  memory        backend bytes (state + arena) of a training step at batch MEMORY_BATCH, fp16 and
                bf16 over fp32: must be below 1.
  train16       3 steps of fp16 and bf16 training stay finite; their losses' distance from fp32's
                is reported.
  cuda plan     the bf16 training step planned by the CUDA backend (amp-inspect --cuda-plan, no
                GPU needed): every op a device unit or a host step computed while planning.

--dtypes adds the older one-step bf16 / fp16 gradient columns; --only NAMES picks checks by name.

Prints one line per model (or, with --table, a Markdown table: model, parameters, one column per
check, seconds), and exits non-zero when a check fails. A check is a function (model dir, reference,
options) -> (True / False / None for "cannot judge", text); add one to CHECKS to extend the harness.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Models whose architecture needs a larger input than --size (a fixed position embedding, or too
# many stride-2 stages for 64x64).
# VGG's and AlexNet's adaptive pooling to 7x7 exports only where 7 divides the feature map.
MIN_SIZE = {"vit_b_16": 224, "vit_b_32": 224, "maxvit_t": 224, "inception_v3": 96, "alexnet": 224}
MIN_SIZE.update({v: 224 for v in ("vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn")})

SGD_THRESHOLD = 2e-4
SGD_LR = 0.01  # every amp-train run's --lr, and zoo_reference.py's default
LOSS_THRESHOLD = 5e-4


def judge(error, bound, torch32):
    """The zoo's verdict (issue 30): an error against float64 on our own pieces passes when it is at
    most max(bound, 2 x torch fp32's error against the same reference). The bounds (2e-4 of the
    largest update, 5e-4 of a loss, 1e-4 of an output) are what a well-conditioned model meets;
    on the deepest models fp32 storage and fp32 convolutions alone exceed them (fp32_floor.py:
    resnet152's gradient misses by 3.3e-4 with exact arithmetic inside every op), and then torch's
    own fp32 error on the same pieces is the floor to judge by. Returns (ok, text): the error, the
    limit and which of the two decided it."""
    if bound >= 2 * torch32:
        limit, decided = bound, "bound"
    else:
        limit, decided = 2 * torch32, "2x torch fp32"
    ok = error <= limit
    return ok, "%.1e %s %.1e (%s)" % (error, "<=" if ok else ">", limit, decided)


def run(cmd, env=None):
    """(exit status, output); the output's last line names the error when amp-train refuses.
    env: variables to add to this process's environment."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, **env) if env else None)
    return r.returncode, r.stdout


def last_error(out):
    lines = [l for l in out.strip().splitlines() if l.strip()]
    for l in reversed(lines):
        if "error" in l.lower():
            return l.strip()[-200:]
    return lines[-1].strip()[-200:] if lines else "no output"


def amp_train(o, d, extra):
    return run([os.path.join(o.build, "amp-train"), os.path.join(d, "model.onnx"), "--data",
                os.path.join(d, "data.npz"), "--loss", "cross_entropy", "--no-shuffle", "--batch-size", str(o.batch),
                "--threads", str(o.threads), "--lr", str(SGD_LR)] + extra)


def update_errors(state, initial, theirs):
    """Per parameter: the largest difference between our update and `theirs`, over the largest
    update in `theirs`."""
    largest = max(float(np.abs(theirs[k]).max()) for k in theirs.files)
    errors = {}
    for k in theirs.files:
        if k not in state.files:
            raise KeyError("no %s in the checkpoint" % k)
        ours = state[k].astype(np.float64) - initial[k].astype(np.float64)
        errors[k] = float(np.abs(ours - theirs[k]).max()) / largest
    return errors


def probe_model(d, ref):
    """model.onnx with our forward's input to every Relu, Clip and MaxPool as extra outputs, in
    torch's call order: (the onnx ModelProto, the names of those inputs). Raises RuntimeError when
    the export's kinks do not pair with torch's."""
    import onnx  # only here: the rest of the driver needs numpy alone
    m = onnx.load(os.path.join(d, "model.onnx"))
    names = [n.input[0] for n in m.graph.node if n.op_type in ("Relu", "Clip", "MaxPool")]
    shapes = ref["kink_shapes"]
    if len(shapes) != len(names):
        raise RuntimeError("%d ReLU/Clip/MaxPool calls in torch, %d such nodes in the export" % (len(shapes), len(names)))
    for n, dims in dict(zip(names, shapes)).items():
        m.graph.output.append(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, dims))
    return m, names


def replay(d, o, r, steps, momentum, at=False):
    """zoo_reference.py --replay on the folder r (kinks.json, acts_S.npz for each step S, and with
    `at` weights_S.npz): torch's float64 steps on the pieces those activations chose. Returns
    (update npz over the steps, replay.json) or raises RuntimeError."""
    rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), o.name, d, "--size", str(o.size),
                   "--batch", str(o.batch), "--replay", r, "--replay-steps", str(steps), "--replay-momentum",
                   str(momentum)] + (["--replay-at"] if at else []))
    if rc != 0:
        raise RuntimeError("replay: " + last_error(out))
    with open(os.path.join(r, "replay.json")) as f:
        return np.load(os.path.join(r, "update.npz")), json.load(f)


def replay_decisions(d, ref, o, name, weights, momentum, at=False):
    """The reference on our forward's pieces: for each step s, our forward's inputs to every Relu
    and Clip (amp-run on the model with those as extra outputs, weights[s] as its initializers,
    batch s), then zoo_reference.py --replay: torch's float64 steps on the pieces our forward
    chose. Returns (update npz over the steps, replay.json) or raises RuntimeError."""
    from onnx import numpy_helper
    import onnx
    r = os.path.join(d, name)
    os.makedirs(r, exist_ok=True)
    m, names = probe_model(d, ref)
    with open(os.path.join(r, "kinks.json"), "w") as f:
        json.dump(names, f)
    data = np.load(os.path.join(d, "data.npz"))["input"]
    for s, w in enumerate(weights):
        if at:
            np.savez(os.path.join(r, "weights_%d.npz" % s), **{k: w[k] for k in w.files if k in ref_params(d)})
        for t in m.graph.initializer:
            if t.name in w:
                t.CopyFrom(numpy_helper.from_array(np.asarray(w[t.name], np.float32), t.name))
        onnx.save(m, os.path.join(r, "probe.onnx"))
        np.savez(os.path.join(r, "input.npz"), input=data[s * o.batch:(s + 1) * o.batch])
        rc, out = run([os.path.join(o.build, "amp-run"), os.path.join(r, "probe.onnx"), "--inputs",
                       os.path.join(r, "input.npz"), "--outputs", os.path.join(r, "acts_%d.npz" % s), "--threads",
                       str(o.threads)])
        if rc != 0:
            raise RuntimeError("amp-run: " + last_error(out))
    return replay(d, o, r, len(weights), momentum, at)


def ref_params(d):
    return set(np.load(os.path.join(d, "initial.npz")).files)


def check_sgd(d, ref, o):
    ck = os.path.join(d, "sgd")
    rc, out = amp_train(o, d, ["--steps", "1", "--checkpoint", ck])
    if rc != 0:
        return False, "amp-train: " + last_error(out)
    state = np.load(os.path.join(ck, "checkpoint.npz"))
    initial = np.load(os.path.join(d, "initial.npz"))
    try:
        plain = max(update_errors(state, initial, np.load(os.path.join(d, "sgd_update.npz"))).values())
        replayed, info = replay_decisions(d, ref, o, "replay_sgd", [initial], 0.0)
        flips = info["flips"]
        errors = update_errors(state, initial, replayed)
        r = os.path.join(d, "replay_sgd")
        u32 = np.load(os.path.join(r, "update32.npz"))
        largest = max(float(np.abs(replayed[k]).max()) for k in replayed.files)
        torch32_same = max(float(np.abs(u32[k] - replayed[k]).max()) for k in replayed.files) / largest
    except (KeyError, RuntimeError) as e:
        return False, str(e)
    worst_e, worst_k = max((e, k) for k, e in errors.items())
    ok, verdict = judge(worst_e, SGD_THRESHOLD, torch32_same)
    context = "torch fp32 on the same pieces %.1e; %d ReLU/MaxPool decisions differ from fp64's; plain fp64 %.1e; torch fp32 %.1e" % (
        torch32_same, flips, plain, ref["torch_fp32"]["sgd_error"])
    if not ok:
        limit = max(SGD_THRESHOLD, 2 * torch32_same)
        off = sorted((e, k) for k, e in errors.items() if not e <= limit)
        names = ", ".join(k for _, k in sorted(off, reverse=True)[:3])
        return False, "%s, %d/%d off (%s%s); %s" % (verdict, len(off), len(errors), names,
                                                    ", ..." if len(off) > 3 else "", context)
    return True, "%s `%s`; %s" % (verdict, worst_k, context)


def momentum_run(d, o, steps):
    """amp-train with momentum 0.9 for 1..steps steps: (losses of the longest run, the checkpoint
    after each k steps), or raises RuntimeError."""
    cks = []
    for k in range(1, steps + 1):
        m = os.path.join(d, "metrics_%d.jsonl" % k)
        ck = os.path.join(d, "momentum_%d" % k)
        if not os.path.exists(os.path.join(ck, "checkpoint.npz")) or not os.path.exists(m):
            rc, out = amp_train(o, d, ["--steps", str(k), "--momentum", "0.9", "--metrics", m, "--checkpoint", ck])
            if rc != 0:
                raise RuntimeError("amp-train: " + last_error(out))
        cks.append(np.load(os.path.join(ck, "checkpoint.npz")))
    ours = [json.loads(l)["loss"] for l in open(m) if '"loss"' in l]
    if len(ours) != steps:
        raise RuntimeError("%d losses, not %d" % (len(ours), steps))
    return ours, cks


def check_steps(d, ref, o):
    """Each of the momentum run's steps on its own: the gradient amp-train took at step s (from its
    momentum buffers: g_s = buf_s - 0.9 buf_s-1) against torch's float64 gradient at amp-train's
    own weights before step s, on the pieces amp-train's forward chose; and the loss there."""
    steps = len(ref["losses"])
    try:
        ours, cks = momentum_run(d, o, steps)
        weights = [np.load(os.path.join(d, "initial.npz"))] + cks[:-1]
        _, info = replay_decisions(d, ref, o, "replay_steps", weights, 0.0, at=True)
    except RuntimeError as e:
        return False, str(e)
    r = os.path.join(d, "replay_steps")
    # Each step is judged on its own (judge: its own torch fp32 error on the same pieces); the cell
    # shows the step that came closest to its limit, for the gradient and for the loss.
    grad, loss = [], []
    for s in range(steps):
        theirs = np.load(os.path.join(r, "grad_%d.npz" % s))
        torch32 = np.load(os.path.join(r, "grad32_%d.npz" % s))
        largest = max(float(np.abs(theirs[k]).max()) for k in theirs.files)
        worst, worst32 = (0.0, ""), 0.0
        for k in theirs.files:
            buf = cks[s][k + ".momentum_buffer"].astype(np.float64)
            prev = cks[s - 1][k + ".momentum_buffer"].astype(np.float64) if s else 0.0
            worst = max(worst, (float(np.abs(buf - 0.9 * prev - theirs[k]).max()) / largest, k))
            worst32 = max(worst32, float(np.abs(torch32[k] - theirs[k]).max()) / largest)
        grad.append((worst[0] / max(SGD_THRESHOLD, 2 * worst32), s + 1, worst[1], judge(worst[0], SGD_THRESHOLD, worst32)))
        ref64, ref32 = info["losses"][s], info["losses32"][s]
        e, e32 = abs(ours[s] - ref64) / abs(ref64), abs(ref32 - ref64) / abs(ref64)
        loss.append((e / max(LOSS_THRESHOLD, 2 * e32), s + 1, judge(e, LOSS_THRESHOLD, e32)))
    ok = all(g[3][0] for g in grad) and all(l[2][0] for l in loss)
    g, l = max(grad), max(loss)
    return ok, "gradient %s `%s` (step %d); loss %s (step %d)" % (g[3][1], g[2], g[1], l[2][1], l[1])


def check_momentum(d, ref, o):
    """The first losses of the momentum run against torch's float64 trajectory, judged two ways; it
    passes when either does. On our pieces: against float64 replaying our forward's decisions at
    each step, limit 2x torch fp32's trajectory on the same pieces. On each one's own pieces:
    against float64's own trajectory, limit 2x torch fp32's own distance from it. The first is the
    sharper reference while the trajectories stay together; once momentum has carried float64's
    weights away from ours, our decisions no longer belong to its weights (resnet50 at batch 4:
    114,970 of them differ from float64's own by step 3) and the replay evaluates a function
    neither trainer computed, so there each fp32 trainer is compared on its own pieces."""
    steps = len(ref["losses"])
    try:
        ours, cks = momentum_run(d, o, steps)
        weights = [np.load(os.path.join(d, "initial.npz"))] + cks[:-1]
        _, info = replay_decisions(d, ref, o, "replay_momentum", weights, 0.9)
    except RuntimeError as e:
        return False, str(e)
    rel = [abs(a - b) / abs(b) for a, b in zip(ours, info["losses"])]
    rel32 = [abs(a - b) / abs(b) for a, b in zip(info["losses32"], info["losses"])]
    plain = [abs(a - b) / abs(b) for a, b in zip(ours, ref["losses"])]
    ok_same, same = judge(max(rel), LOSS_THRESHOLD, max(rel32))
    ok_own, own = judge(max(plain), LOSS_THRESHOLD, ref["torch_fp32"]["loss_error"])
    return ok_same or ok_own, "our pieces %s (step %d); own pieces %s (step %d); %d ReLU/MaxPool decisions differ from fp64's" % (
        same, rel.index(max(rel)) + 1, own, plain.index(max(plain)) + 1, info["flips"])


def check_dtype(dtype):
    """One SGD step in `dtype` (amp-train --dtype, fp32 master weights, dynamic loss scaling for
    fp16): the first step that is not skipped (a skipped step leaves the weights as they were, so
    step k's update is the gradient at the initial weights on batch k) against the float64
    gradient there, relative to the largest. Reported, not judged: what a 16-bit forward and
    backward may miss by has no bound here yet."""

    def check(d, ref, o):
        initial = np.load(os.path.join(d, "initial.npz"))
        steps = len(ref["losses"])
        for k in range(1, steps + 1):
            ck = os.path.join(d, "%s_%d" % (dtype, k))
            m = os.path.join(d, "%s_%d.jsonl" % (dtype, k))
            rc, out = amp_train(o, d, ["--steps", str(k), "--dtype", dtype, "--checkpoint", ck, "--metrics", m])
            if rc != 0:
                return False, "amp-train: " + last_error(out)
            records = [json.loads(l) for l in open(m) if '"loss"' in l]
            if not records[-1]["skipped"]:
                break
        else:
            return None, "all %d steps skipped" % steps
        skipped = sum(1 for r in records if r["skipped"])
        try:
            _, _ = replay_decisions(d, ref, o, "replay_" + dtype, [initial] * k, 0.0, at=True)
        except RuntimeError as e:
            return False, str(e)
        theirs = np.load(os.path.join(d, "replay_" + dtype, "grad_%d.npz" % (k - 1)))
        state = np.load(os.path.join(ck, "checkpoint.npz"))
        largest = max(float(np.abs(theirs[n]).max()) for n in theirs.files)
        worst = max((float(np.abs((state[n].astype(np.float64) - initial[n]) / -SGD_LR - theirs[n]).max()) / largest, n)
                    for n in theirs.files)
        return None, "worst %.1e `%s` at step %d (%d skipped before, loss scale %g)" % (
            worst[0], worst[1], k, skipped, records[-1]["loss_scale"])

    return check


FORWARD_THRESHOLD = 1e-4


def eval_export(d, o):
    """zoo_reference.py --eval once per model (see there): raises RuntimeError when torch cannot
    export the model in eval mode."""
    if not os.path.exists(os.path.join(d, "eval_ref.npz")):
        rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), o.name, d, "--size", str(o.size),
                       "--batch", str(o.batch), "--eval"])
        if rc != 0:
            raise RuntimeError("eval export: " + last_error(out))
    return np.load(os.path.join(d, "eval_ref.npz"))


def amp_run(o, model, inputs, outputs):
    rc, out = run([os.path.join(o.build, "amp-run"), model, "--inputs", inputs, "--outputs", outputs, "--threads",
                   str(o.threads)])
    if rc != 0:
        raise RuntimeError("amp-run: " + last_error(out))
    got = np.load(outputs)
    return np.asarray(got[got.files[0]], np.float64)


def relative(got, ref):
    """max|got - ref| over max|ref|."""
    return float(np.abs(np.asarray(got, np.float64) - ref).max()) / float(np.abs(ref).max())


def check_forward(d, ref, o):
    """fp32 forward of the eval export in amp-run against torch's float64 eval output on the same
    batch, judged by judge(): max|diff| over max|output| at most max(1e-4, 2 x torch fp32's own
    distance from float64). The forward needs no replay of our pieces: ReLU, ReLU6 and MaxPool are
    continuous, so which side of a kink rounding puts an input moves the output by no more than the
    rounding itself (only gradients jump there). Also shown: the distance from torch fp32's output."""
    try:
        r = eval_export(d, o)
        ours = amp_run(o, os.path.join(d, "eval.onnx"), os.path.join(d, "eval_input.npz"), os.path.join(d, "eval_fp32.npz"))
    except RuntimeError as e:
        return False, str(e)
    if ours.shape != r["fp32"].shape:
        return False, "output shape %s, torch's %s" % (ours.shape, r["fp32"].shape)
    ok, verdict = judge(relative(ours, r["fp64"]), FORWARD_THRESHOLD, relative(r["fp32"], r["fp64"]))
    return ok, "%s; vs torch fp32 %.1e" % (verdict, relative(ours, r["fp32"]))


def ort_run(model, x, work, optimization=None):
    """The model in ONNX Runtime (tests/ort/run_model.js, onnxruntime-node) at its default graph
    optimization level, or `optimization`: its first output, or None and why when ONNX Runtime is
    not installed here; raises RuntimeError when it refuses."""
    from onnx import numpy_helper
    ort = os.path.join(os.path.dirname(HERE), "ort")
    if not os.path.isdir(os.path.join(ort, "node_modules", "onnxruntime-node")):
        return None, "ONNX Runtime not installed (tests/ort/node_modules)"
    if shutil.which("node") is None:
        return None, "node is not on PATH"
    ins, outs = os.path.join(work, "ort_in"), os.path.join(work, "ort_out")
    shutil.rmtree(outs, ignore_errors=True)
    os.makedirs(ins, exist_ok=True)
    os.makedirs(outs, exist_ok=True)
    with open(os.path.join(ins, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "input").SerializeToString())
    env = dict(os.environ, ORT_GRAPH_OPTIMIZATION=optimization) if optimization else None
    r = subprocess.run(["node", os.path.join(ort, "run_model.js"), model, ins, outs], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("ONNX Runtime: " + last_error(r.stdout.replace(model, os.path.basename(model))))
    from onnx import TensorProto
    t = TensorProto()
    with open(os.path.join(outs, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).astype(np.float64), ""


def check_rewrite(dtype):
    """amp-rewrite --dtype DTYPE of the eval export: the output passes onnx.checker (full check,
    python3-onnx), rewriting it again gives the same bytes and inserts no cast (idempotent), it
    runs in amp-run (and, for fp16, in ONNX Runtime). Judged on those; the error against torch's
    fp32 eval output (max|diff| over max|output|) is reported beside the error of an emulated
    all-16-bit conversion of the same model on the same batch (zoo_reference.py LowPrecision:
    weights, input and every op's result rounded to DTYPE, fp32 arithmetic inside each op) - the
    error a naive whole-model conversion makes. Also reported: ops the target opset's schema keeps
    out of DTYPE, as the rewrite's summary says."""

    def check(d, ref, o):
        import onnx
        try:
            r = eval_export(d, o)
        except RuntimeError as e:
            return False, str(e)
        once, twice = os.path.join(d, "eval.%s.onnx" % dtype), os.path.join(d, "eval.%s.again.onnx" % dtype)
        tool = os.path.join(o.build, "amp-rewrite")
        rc, out = run([tool, os.path.join(d, "eval.onnx"), "--dtype", dtype, "-o", once, "--force"])
        if rc != 0:
            return False, "amp-rewrite: " + last_error(out)
        summary = out
        try:
            onnx.checker.check_model(once, full_check=True)
        except Exception as e:  # onnx.checker.ValidationError, shape inference errors
            return False, "onnx.checker: " + str(e).strip().splitlines()[0][:200]
        rc, out = run([tool, once, "--dtype", dtype, "-o", twice, "--force"])
        if rc != 0:
            return False, "amp-rewrite of the rewrite: " + last_error(out)
        with open(once, "rb") as f1, open(twice, "rb") as f2:
            same = f1.read() == f2.read()
        if not same or "casts: 0 inserted, 0 retargeted, 0 removed" not in out:
            return False, "not idempotent: rewriting the rewrite changes it (%s)" % last_error(out)
        try:
            ours = relative(amp_run(o, once, os.path.join(d, "eval_input.npz"), os.path.join(d, "eval_%s.npz" % dtype)),
                            r["fp32"])
            text = "amp-run %.1e" % ours
        except RuntimeError as e:
            return False, str(e)
        if dtype == "fp16":
            x = np.load(os.path.join(d, "eval_input.npz"))["input"]
            try:
                got, why = ort_run(once, x, d)
            except RuntimeError as e:
                # Whether the model or one of ONNX Runtime's graph fusions is what it refuses.
                try:
                    ort_run(once, x, d, "disabled")
                    plain = "runs with its graph optimizations disabled"
                except RuntimeError:
                    plain = "also with its graph optimizations disabled"
                return False, "%s; %s (%s)" % (str(e)[:300], plain, text)
            text += ", ORT %.1e" % relative(got, r["fp32"]) if got is not None else ", ORT n/a (%s)" % why
        text += "; all-%s reference %.1e" % (dtype, relative(r[dtype], r["fp32"]))
        kept = [l.strip() for l in summary.splitlines() if "stay fp32" in l]
        if kept:  # "warning: 56 allow-listed ops (56 Conv) stay fp32: the model's opset does not allow ..."
            text += "; " + kept[0].split(": the model's opset")[0].replace("warning: ", "") + " (opset)"
        return True, text

    return check


# The memory check's batch: at the harness's batch of 4 a model's backend bytes are mostly its
# state (fp32 weights, gradients, momentum: the same in every precision), so the activations that
# mixed precision halves barely show (mobilenet_v3_small at batch 4: 1.00); at 32 they are the
# larger part on the small models (resnet18, 11M parameters, still shows 0.96).
MEMORY_BATCH = 32


def backend_bytes(out):
    """(fp32 MiB, low-precision MiB) from amp-train --compare-fp32's "backend bytes" row, or None."""
    row = [l[14:].split() for l in out.splitlines() if l.startswith("backend bytes")]
    return (float(row[0][0]), float(row[0][2])) if row else None  # "12.3 MiB 8.1 MiB"


def check_memory(d, ref, o):
    """Backend bytes (the backend's state plus the plan's arena, as amp-train --compare-fp32 prints
    them, in MiB to 0.1) of one training step (SGD with momentum) in fp16 and in bf16 against fp32,
    on the training export at batch MEMORY_BATCH (zoo_reference.py --export-only, in memory/):
    mixed precision must use less. Shows DTYPE/fp32 for each, and fp32's bytes."""
    m = os.path.join(d, "memory")
    if not os.path.exists(os.path.join(m, "data.npz")):
        rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), o.name, m, "--size", str(o.size),
                       "--batch", str(MEMORY_BATCH), "--steps", "1", "--export-only"])
        if rc != 0:
            return False, "export at batch %d: %s" % (MEMORY_BATCH, last_error(out))
    cells, ok = [], True
    for dtype in ("fp16", "bf16"):
        rc, out = run([os.path.join(o.build, "amp-train"), os.path.join(m, "model.onnx"), "--data",
                       os.path.join(m, "data.npz"), "--loss", "cross_entropy", "--batch-size", str(MEMORY_BATCH),
                       "--steps", "1", "--momentum", "0.9", "--threads", str(o.threads), "--dtype", dtype,
                       "--compare-fp32"])
        if rc != 0:
            return False, "amp-train --dtype %s --compare-fp32: %s" % (dtype, last_error(out))
        both = backend_bytes(out)
        if not both:
            return False, "amp-train --compare-fp32 printed no backend bytes"
        fp32, low = both
        ok = ok and low < fp32
        cells.append("%s %.2f" % (dtype, low / fp32))
    return ok, "%s of fp32's %.1f MiB (batch %d)" % (", ".join(cells), fp32, MEMORY_BATCH)


# fp16 training's loss scale in the train16 check. The default dynamic scale starts at 2^16 and
# halves after each overflow, so the first steps of a fresh model are skipped while it searches
# (shufflenet_v2_x0_5 at batch 4: 65536, 32768 and 16384 all overflow) and 3 steps would test
# nothing. 1024 leaves 2^6 of headroom under fp16's 65504 for gradients up to 64 and still lifts
# them 2^10 above the subnormal floor; a step that overflows anyway is counted as skipped.
FP16_LOSS_SCALE = 1024


def fp16_loss_scale(d):
    """The static fp16 loss scale for the model in d: FP16_LOSS_SCALE, or the power of two that
    keeps 8 times the largest first-step weight gradient (torch float64's) within fp16's 65504 —
    what dynamic loss scaling settles on after backing off. Random-init networks at batch 4 reach
    weight gradients of 300-400 (mnasnet0_5 377, resnet101 315): at 1024 every fp16 step of theirs
    overflows and is skipped, and 3 skipped steps say nothing about fp16 training."""
    update = np.load(os.path.join(d, "sgd_update.npz"))
    largest = max(float(np.abs(update[k]).max()) for k in update.files) / SGD_LR
    scale = FP16_LOSS_SCALE
    while scale > 1 and 8 * largest * scale > 65504:
        scale //= 2
    return scale


def train16_losses(o, d, dtype, scale=None):
    """(losses, skipped steps) of 3 steps of SGD with momentum 0.9 in DTYPE (fp16 with the static
    loss scale `scale`) on the harness's batches. Raises RuntimeError."""
    m = os.path.join(d, "train16_%s.jsonl" % dtype)
    if not os.path.exists(m):
        extra = ["--loss-scale", str(scale)] if dtype == "fp16" else []
        rc, out = amp_train(o, d, ["--steps", "3", "--momentum", "0.9", "--dtype", dtype, "--metrics", m] + extra)
        if rc != 0:
            raise RuntimeError("amp-train --dtype %s: %s" % (dtype, last_error(out)))
    records = [json.loads(l) for l in open(m) if '"loss"' in l]
    return [r["loss"] for r in records], sum(1 for r in records if r.get("skipped"))


def torch_autocast(d, ref, o):
    """The largest relative difference of torch's CPU bf16 autocast losses from torch fp32's, or
    "n/a" and why."""
    path = os.path.join(d, "autocast.json")
    if not os.path.exists(path):
        rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), o.name, d, "--size", str(o.size),
                       "--batch", str(o.batch), "--autocast"])
        if rc != 0:
            return "n/a: " + last_error(out)
    with open(path) as f:
        info = json.load(f)
    if "error" in info:
        return "n/a: " + info["error"]
    fp32 = ref["torch_fp32"]["losses"]
    return "%.1e" % max(abs(a - b) / abs(b) for a, b in zip(info["bf16"], fp32))


def check_train16(d, ref, o):
    """fp16 and bf16 training (amp-train --dtype, fp32 master weights; fp16 with the static loss
    scale of fp16_loss_scale; 3 steps of SGD with momentum 0.9 on the same batches as the other
    checks): every loss is finite. Reported: the largest relative difference of the 3 losses from
    amp-train fp32's on the same run, the steps skipped for overflow; beside bf16's, the same
    distance of torch's own CPU bf16 autocast run from torch fp32 (zoo_reference.py --autocast;
    torch 1.13 has no CPU fp16 autocast); and for scale how far fp32's losses and torch fp32's are
    from torch's float64 trajectory (several of these models amplify rounding within 3 steps: the
    momentum check). Judged on finiteness only: 3 steps are too few, and these models at batch 4
    too chaotic (torch's own autocast drifts by percents), for a bound."""
    try:
        fp32, _ = train16_losses(o, d, "fp32")
    except RuntimeError as e:
        return False, str(e)
    cells, ok = [], True
    scale = fp16_loss_scale(d)  # reads the first step's update once (1 GB for a VGG)
    for dtype in ("fp16", "bf16"):
        try:
            losses, skipped = train16_losses(o, d, dtype, scale)
        except RuntimeError as e:
            return False, str(e)
        finite = len(losses) == len(fp32) and all(np.isfinite(losses))
        ok = ok and finite
        if not finite:
            cells.append("%s not finite: %s" % (dtype, losses))
            continue
        diff = max(abs(a - b) / abs(b) for a, b in zip(losses, fp32))
        fitted = dtype == "fp16" and scale != FP16_LOSS_SCALE
        cells.append("%s %.1e%s%s" % (dtype, diff, " (scale %d)" % scale if fitted else "",
                                      " (%d skipped)" % skipped if skipped else ""))
        if dtype == "bf16":
            cells[-1] += " (torch autocast %s)" % torch_autocast(d, ref, o)
    f64 = max(abs(a - b) / abs(b) for a, b in zip(fp32, ref["losses"]))
    return ok, "loss vs fp32: %s; fp32 vs torch fp64 %.1e, torch fp32 %.1e" % (", ".join(cells), f64,
                                                                              ref["torch_fp32"]["loss_error"])

def step_dims(step, d, o):
    """--dim NAME=VALUE for the symbolic dims of the saved step's data inputs (swin's exports name
    the labels' batch dim after the logits): the harness's batch for the first axis, the data's
    own extent for the others."""
    import onnx
    m = onnx.load(step, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    data = np.load(os.path.join(d, "data.npz"))
    dims = {}
    inputs = list(m.graph.input) + [v for t in m.training_info for v in t.algorithm.input]  # the labels are the step's
    for v in inputs:
        if v.name in inits or v.name not in data.files:
            continue
        for axis, dim in enumerate(v.type.tensor_type.shape.dim):
            if dim.dim_param:
                dims[dim.dim_param] = o.batch if axis == 0 else data[v.name].shape[axis]
    return sum((["--dim", "%s=%d" % kv] for kv in sorted(dims.items())), [])


def check_cuda_plan(d, ref, o):
    """The bf16 training step (amp-train --dtype bf16 --save-training-graph, SGD with momentum, one
    step on the harness's batch) planned by the CUDA backend: amp-inspect --cuda-plan --json, which
    needs no GPU. Passes when every step of it is a device unit or a host step that planning
    computes from constants and dims (an op without a CUDA kernel fails the plan by name, file and
    node). Shows the device units, generated kernels, arena, bytes moved and the host steps by op."""
    step = os.path.join(d, "step.bf16.onnx")
    if not os.path.exists(step):
        rc, out = amp_train(o, d, ["--steps", "1", "--momentum", "0.9", "--dtype", "bf16", "--save-training-graph", step])
        if rc != 0:
            return False, "amp-train --dtype bf16: " + last_error(out)
    r = subprocess.run([os.path.join(o.build, "amp-inspect"), step, "--cuda-plan", "--json"] + step_dims(step, d, o),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return False, last_error(r.stderr + r.stdout).replace(step, os.path.basename(step))
    plan = json.loads(r.stdout)["cuda_plan"]
    mem = plan["memory"]
    host = ", ".join("%s %d" % kv for kv in sorted(plan["host_step_ops"].items(), key=lambda kv: -kv[1]))
    return True, "%d units (%d generated), arena %.1f MiB, moved %.1f MiB; host steps %d%s" % (
        plan["device_units"], plan["fused_kernels"]["units"], mem["arena_bytes"] / 2**20, mem["moved_bytes"] / 2**20,
        plan["host_steps"], " (%s)" % host if host else "")


CHECKS = [("sgd", check_sgd), ("steps", check_steps), ("momentum", check_momentum)]
DTYPE_CHECKS = [("bf16", check_dtype("bf16")), ("fp16", check_dtype("fp16"))]
# The eval export's forward, the fp16/bf16 rewrites, and mixed-precision training (--amp).
AMP_CHECKS = [("forward", check_forward), ("fp16 rewrite", check_rewrite("fp16")), ("bf16 rewrite", check_rewrite("bf16")),
              ("memory", check_memory), ("train16", check_train16), ("cuda plan", check_cuda_plan)]
ALL_CHECKS = CHECKS + DTYPE_CHECKS + AMP_CHECKS


def check_model(name, o):
    d = os.path.join(o.work, name)
    o.name = name
    o.size = max(o.base_size, MIN_SIZE.get(name, 0))
    shutil.rmtree(d, ignore_errors=True)  # the checks reuse amp-train's runs within one model only
    start = time.time()
    rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), name, d, "--size", str(o.size), "--batch",
                   str(o.batch)])
    if rc != 0:
        return {"model": name, "params": "-", "results": [(False, "export: " + last_error(out))] * len(o.checks),
                "seconds": time.time() - start}
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    results = [fn(d, ref, o) for _, fn in o.checks]
    if not o.keep:
        # Checkpoints, gradients and replays take up to 14 GB a model (vit_b_16): the full zoo
        # would fill a disk. The table holds what the checks found.
        shutil.rmtree(d, ignore_errors=True)
    return {"model": name, "params": "%d (%.1fM)" % (ref["params"], ref["numel"] / 1e6), "results": results,
            "seconds": time.time() - start}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--build", required=True)
    p.add_argument("--work", default=None, help="where the exports go (default: BUILD/zoo)")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--table", action="store_true")
    p.add_argument("--dtypes", action="store_true", help="also the bf16 and fp16 one-step checks (reported, not judged)")
    p.add_argument("--amp", action="store_true",
                   help="also the eval forward, fp16/bf16 rewrite, memory and train16 checks")
    p.add_argument("--keep", action="store_true", help="keep each model's exports and runs (default: removed after its checks)")
    p.add_argument("--only", help="only these checks, comma-separated (the table's column names)")
    p.add_argument("--results", help="append each model's results to this file, one JSON line a model (the table's "
                                     "cells as data, so that runs in parts make one table)")
    o = p.parse_args()
    o.build = os.path.abspath(o.build)
    o.base_size = o.size
    o.checks = CHECKS + (DTYPE_CHECKS if o.dtypes else []) + (AMP_CHECKS if o.amp else [])
    if o.only:
        names = o.only.split(",")
        unknown = [n for n in names if n not in dict(ALL_CHECKS)]
        if unknown:
            p.error("no check named %s; the checks: %s" % (", ".join(unknown), ", ".join(n for n, _ in ALL_CHECKS)))
        o.checks = [(n, fn) for n, fn in ALL_CHECKS if n in names]
    o.work = os.path.abspath(o.work or os.path.join(o.build, "zoo"))
    if o.table:
        print("| model | parameters | " + " | ".join(n for n, _ in o.checks) + " | seconds |")
        print("|---|---|" + "---|" * len(o.checks) + "---|")
    failed = 0
    for name in o.models:
        r = check_model(name, o)
        cells = [{True: "ok, ", False: "FAIL: ", None: "n/a: "}[ok] + text for ok, text in r["results"]]
        failed += any(ok is False for ok, _ in r["results"])
        if o.results:
            with open(o.results, "a") as f:
                f.write(json.dumps({"model": r["model"], "params": r["params"], "seconds": round(r["seconds"]),
                                    "checks": {n: {"ok": ok, "text": text} for (n, _), (ok, text) in zip(o.checks, r["results"])}})
                        + "\n")
        if o.table:
            print("| %s | %s | %s | %.0f |" % (r["model"], r["params"], " | ".join(cells), r["seconds"]), flush=True)
        else:
            print("%s: %s  %s  (%.0f s)" % (r["model"], r["params"],
                                            "  ".join("%s %s" % (n, c) for (n, _), c in zip(o.checks, cells)),
                                            r["seconds"]), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
