#!/usr/bin/python3
"""The model zoo on a GPU: amp-train --device cuda on torchvision models, checked against torch
float64 and against the CPU backend. Three phases, because the GPU machine has neither torch 1.13
(whose exporter made the zoo's models) nor the time to run references:

  prepare (here)   /usr/bin/python3 tests/zoo/gpu_zoo.py prepare --build BUILD --out DIR MODEL...
                   zoo_reference.py's training export, data and float64 reference for each MODEL
                   (into BUILD/zoo-gpu/MODEL), and in DIR/MODEL what the GPU machine needs:
                   model.onnx and probe.onnx (the same graph with our forward's input to every
                   Relu, Clip and MaxPool as extra outputs, zoo_check.probe_model) and bench.onnx
                   (the training export at batch 32, for the memory check and
                   bench_cuda_train_step --zoo), sharing one external weights file; data.npz,
                   input0.npz (the first batch) and meta.json.
  run (GPU)        python3 gpu_zoo.py run --bin KIT/bin --zoo DIR --out OUT [--device cuda] [--models M...]
                   needs numpy only. Per model: amp-run of probe.onnx (the device's forward
                   decisions at the initial weights), one SGD step (lr 0.01) with a checkpoint,
                   3 steps of SGD with momentum 0.9 in fp32, fp16 (the harness's static loss scale,
                   in meta.json) and bf16, and backend memory at batch 32 in each precision. Writes
                   OUT/gpu_zoo_N.tar (each under 15 MiB: the device tool brings back 8 files of
                   16 MiB at most) and prints what ran.
  check (here)     /usr/bin/python3 tests/zoo/gpu_zoo.py check --build BUILD --zoo DIR TAR...
                   unpacks the results and, per model, prints one table row:
     sgd           the device's one-step update against torch float64 replaying the device's own
                   forward decisions (zoo_check's sgd check, judged as zoo_check.judge: 2e-4 of
                   the largest update or twice torch fp32's error on the same pieces).
     vs cpu        the same update against amp-train --device cpu's (reported).
     momentum      the 3 fp32 momentum losses: against CPU's (reported) and torch float64's
                   trajectory (zoo_check.judge: 5e-4 relative or twice torch fp32's own
                   distance from that trajectory).
     fp16 / bf16   3 steps finite (judged). Reported: the first loss (forward only, before any
                   update) against the CPU backend's in the same precision, beside the CPU's own
                   distance from its fp32 first loss (what rounding to that precision moves this
                   model's loss by: on an H200 the two bf16 forwards of mnasnet0_5 differed by
                   7.9e-2 where bf16 moved the CPU's by 4.8e-2 and the GPU's by 3.5e-2, so no fixed
                   bound separates a fault from rounding on these batch-4 networks); the 3 losses
                   against fp32's on the device.
     memory        backend bytes (arena + state) of a training step at batch 32, fp16 and bf16 over
                   fp32 on the device: must be below 1.
                   Exits non-zero when a judged check fails.

Models whose parameters exceed DRAW_ABOVE (8 MiB; prepare --draw-above-mib) travel without them:
prepare draws them from a seed (torch's initial mean and spread per tensor, draw_weights) and run
draws them again on the GPU machine, checked by SHA-256. They have no float64 reference and no
probe (sgd: n/a); their first fp32 loss (the forward alone) must be within 1e-4 of the CPU
backend's on the same drawn weights, and the rest is as above against the CPU's runs. prepare and
check take --work for the exports and references (default BUILD/zoo-gpu).
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tarfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo_check  # noqa: E402  (numpy alone at import)

BATCH = 4
MEMORY_BATCH = zoo_check.MEMORY_BATCH
PART_BYTES = 15 << 20
# Models whose parameters take more than this travel without them (the device tool carries 64 MiB
# in all): their parameters are drawn from a seed instead (draw_weights), here and again on the
# GPU machine, and checked there by their SHA-256.
DRAW_ABOVE = 8 << 20
ALIGN = 64


def draw_weights(specs, seed):
    """{name: float32 array} for specs [(name, shape, mean, std)]: normal(mean, std) from numpy's
    PCG64 stream of `seed`, in spec order (std 0: mean everywhere, as BatchNorm's ones and zeros)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, mean, std in specs:
        shape = tuple(shape)
        out[name] = (np.full(shape, mean) if std == 0 else mean + std * rng.standard_normal(shape)).astype(np.float32)
    return out


def write_weights(arrays, names, path):
    """Writes arrays[name] for names, in order, each at a multiple of ALIGN bytes, into path; returns
    {name: (offset, length)} and the file's SHA-256."""
    import hashlib
    where, offset, h = {}, 0, hashlib.sha256()
    with open(path, "wb") as f:
        for n in names:
            pad = (-offset) % ALIGN
            f.write(b"\0" * pad)
            h.update(b"\0" * pad)
            offset += pad
            data = np.ascontiguousarray(arrays[n], dtype="<f4").tobytes()
            f.write(data)
            h.update(data)
            where[n] = (offset, len(data))
            offset += len(data)
    return where, h.hexdigest()


def point_at(m, where, location):
    """The initializers of the ModelProto m named in `where` read from `location` at its offsets."""
    import onnx
    for t in m.graph.initializer:
        if t.name not in where:
            continue
        if t.data_type != onnx.TensorProto.FLOAT:
            sys.exit("%s: a drawn weight must be float, not type %d" % (t.name, t.data_type))
        offset, length = where[t.name]
        t.ClearField("raw_data")
        t.ClearField("float_data")
        del t.external_data[:]
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        t.data_location = onnx.TensorProto.EXTERNAL


def regenerate(g, meta):
    """g/weights.bin of a drawn model, made again from meta.json and checked by its SHA-256."""
    drawn = meta["drawn"]
    specs = drawn["specs"]
    _, digest = write_weights(draw_weights(specs, drawn["seed"]), [s[0] for s in specs], os.path.join(g, "weights.bin"))
    if digest != drawn["sha256"]:
        os.remove(os.path.join(g, "weights.bin"))  # no run on other weights: they fail for want of it
        raise RuntimeError("the drawn weights differ from the ones made by prepare (SHA-256 %s, not %s): this "
                           "numpy draws another stream" % (digest[:12], drawn["sha256"][:12]))


def run(cmd, log=None, report=None):
    """(exit status, output) of cmd, logged with its time; with `report`, the device report
    (AMP_CUDA_REPORT) goes there."""
    t = time.time()
    rc, out = zoo_check.run(cmd, {"AMP_CUDA_REPORT": report} if report else None)
    if log is not None:
        log.write("$ %s\n%s(exit %d, %.1f s%s)\n" % (" ".join(cmd), out, rc, time.time() - t, find_seconds(report)))
    return rc, out


def find_seconds(report):
    """", of which cuDNN's algorithm measurements N s (K), NVRTC M s (J)" from a device report, or
    ""."""
    if not report or not os.path.exists(report):
        return ""
    lines = [json.loads(l) for l in open(report) if l.strip()]
    find = [float(l["find ms"]) for l in lines if "find ms" in l]
    nvrtc = [float(l["ms"]) for l in lines if l.get("event") == "kernel_image" and l.get("from") == "NVRTC"]
    parts = ["cuDNN's algorithm measurements %.1f s (%d)" % (sum(find) / 1e3, len(find))] if find else []
    parts += ["NVRTC %.1f s (%d kernels)" % (sum(nvrtc) / 1e3, len(nvrtc))] if nvrtc else []
    return ", of which " + ", ".join(parts) if parts else ""


# --- prepare (here) ----------------------------------------------------------------------------

def prepare(a):
    import onnx
    os.makedirs(a.out, exist_ok=True)
    for name in a.models:
        d = os.path.join(a.work, name)
        size = max(a.size, zoo_check.MIN_SIZE.get(name, 0))
        if not os.path.exists(os.path.join(d, "reference.json")):
            rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), name, d, "--size", str(size),
                           "--batch", str(BATCH)])
            if rc != 0:
                sys.exit("%s: export: %s" % (name, zoo_check.last_error(out)))
        with open(os.path.join(d, "reference.json")) as f:
            ref = json.load(f)
        g = os.path.join(a.out, name)
        shutil.rmtree(g, ignore_errors=True)
        os.makedirs(g)
        # The training export at batch 32 (memory, and the benchmark's step), the same weights:
        # its initializers point into weights.bin too.
        big = os.path.join(d, "batch%d" % MEMORY_BATCH)
        if not os.path.exists(os.path.join(big, "model.onnx")):
            rc, out = run(["/usr/bin/python3", os.path.join(HERE, "zoo_reference.py"), name, big, "--size", str(size),
                           "--batch", str(MEMORY_BATCH), "--steps", "1", "--export-only"])
            if rc != 0:
                sys.exit("%s: export at batch %d: %s" % (name, MEMORY_BATCH, zoo_check.last_error(out)))
        initial = np.load(os.path.join(d, "initial.npz"))
        meta = {"name": name, "size": size, "fp16_scale": zoo_check.fp16_loss_scale(d), "params": ref["params"],
                "numel": ref["numel"], "bench_batch": MEMORY_BATCH}
        if sum(initial[k].nbytes for k in initial.files) > a.draw_above_mib * 2**20:
            # Parameters drawn from a seed with torch's initial mean and spread, per tensor: the
            # float64 reference (torch's weights) no longer applies, the CPU backend's runs on the
            # same drawn weights do (check). No probe: its activations would not travel back either.
            m = onnx.load(os.path.join(d, "model.onnx"))
            names = [t.name for t in m.graph.initializer if t.name in initial.files]
            specs = [[n, list(initial[n].shape), float(initial[n].mean()), float(initial[n].std())] for n in names]
            seed = sum(map(ord, name))
            arrays = draw_weights(specs, seed)
            local = os.path.join(d, "drawn")
            os.makedirs(local, exist_ok=True)
            where, digest = write_weights(arrays, names, os.path.join(local, "weights.bin"))
            point_at(m, where, "weights.bin")
            onnx.save_model(m, os.path.join(local, "model.onnx"))
            shutil.copy(os.path.join(d, "data.npz"), os.path.join(local, "data.npz"))
            onnx.save_model(m, os.path.join(g, "model.onnx"))
            b = onnx.load(os.path.join(big, "model.onnx"))
            point_at(b, where, "weights.bin")
            onnx.save_model(b, os.path.join(g, "bench.onnx"))
            meta["drawn"] = {"seed": seed, "specs": specs, "sha256": digest}
        else:
            m, kinks = zoo_check.probe_model(d, ref)
            # probe.onnx writes the weights once; model.onnx is the same graph without the extra
            # outputs, pointing at the same file.
            onnx.save_model(m, os.path.join(g, "probe.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                            location="weights.bin", size_threshold=0)
            p = onnx.load(os.path.join(g, "probe.onnx"), load_external_data=False)
            del p.graph.output[len(p.graph.output) - len(set(kinks)):]
            onnx.save_model(p, os.path.join(g, "model.onnx"))
            share_weights(onnx.load(os.path.join(big, "model.onnx")), p, g, "bench.onnx")
            meta["kinks"] = kinks
        shutil.copy(os.path.join(d, "data.npz"), os.path.join(g, "data.npz"))
        x = np.load(os.path.join(d, "data.npz"))["input"]
        np.savez(os.path.join(g, "input0.npz"), input=x[:BATCH])
        with open(os.path.join(g, "meta.json"), "w") as f:
            json.dump(meta, f)
        print("%s: %s (%.1f MiB)" % (name, g, sum(os.path.getsize(os.path.join(g, n)) for n in os.listdir(g)) / 2**20))


def share_weights(m, external, g, name):
    """Saves the ModelProto m as g/name with each initializer that `external` (a model loaded with
    load_external_data=False whose weights are in g) holds with the same name and the same bytes
    pointing at external's copy instead. The others stay inline: BatchNorm's running statistics,
    which the export's traced training-mode forward updated on a batch of another size."""
    import onnx
    from onnx import numpy_helper
    theirs = {t.name: t for t in external.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    for t in m.graph.initializer:
        e = theirs.get(t.name)
        if e is not None and np.array_equal(numpy_helper.to_array(e, base_dir=g), numpy_helper.to_array(t)):
            t.CopyFrom(e)
    onnx.save_model(m, os.path.join(g, name))


# --- run (on the GPU machine) --------------------------------------------------------------------

def resample(data, n, out):
    """Writes to out n samples of the .npz data (input and labels: images or token sequences),
    drawn with replacement by a fixed seed: a batch of another size from a model's few samples."""
    x = np.load(data)
    pick = np.random.default_rng(0).integers(0, len(x["labels"]), n)
    np.savez(out, input=x["input"][pick], labels=x["labels"][pick])


def train_cmd(a, g, extra):
    return [os.path.join(a.bin, "amp-train"), os.path.join(g, "model.onnx"), "--data", os.path.join(g, "data.npz"),
            "--loss", "cross_entropy", "--no-shuffle", "--batch-size", str(BATCH), "--lr", str(zoo_check.SGD_LR),
            "--device", a.device] + extra


def run_model(a, g, r):
    """Every device run of one model into r; returns a line of what happened."""
    with open(os.path.join(g, "meta.json")) as f:
        meta = json.load(f)
    os.makedirs(r, exist_ok=True)
    failures = []
    with open(os.path.join(r, "log.txt"), "w") as log:
        def go(what, cmd):
            rc, out = run(cmd, log, os.path.join(r, "report_%s.jsonl" % what.replace(" ", "_")))
            if rc != 0:
                failures.append("%s: %s" % (what, zoo_check.last_error(out)))
            return rc == 0, out
        # A drawn model (prepare) has no float64 reference here: no probe, no one-step update.
        ok = False
        if "drawn" not in meta:
            go("amp-run probe", [os.path.join(a.bin, "amp-run"), os.path.join(g, "probe.onnx"), "--inputs",
                                 os.path.join(g, "input0.npz"), "--outputs", os.path.join(r, "acts_0.npz"), "--device",
                                 a.device])
            ok, _ = go("sgd", train_cmd(a, g, ["--steps", "1", "--checkpoint", os.path.join(r, "sgd")]))
        if ok:  # the parameters alone: the checkpoint's other entries are the optimizer's
            ck = np.load(os.path.join(r, "sgd", "checkpoint.npz"))
            np.savez(os.path.join(r, "sgd.npz"), **{k: ck[k] for k in ck.files if not k.endswith("_buffer")})
            shutil.rmtree(os.path.join(r, "sgd"))
        for dtype in ("fp32", "fp16", "bf16"):
            extra = ["--loss-scale", str(meta["fp16_scale"])] if dtype == "fp16" else []
            go("momentum %s" % dtype, train_cmd(a, g, ["--steps", "3", "--momentum", "0.9", "--dtype", dtype, "--metrics",
                                                     os.path.join(r, "momentum_%s.jsonl" % dtype)] + extra))
        # Memory at batch 32.
        big = os.path.join(r, "memory_data.npz")
        resample(os.path.join(g, "data.npz"), MEMORY_BATCH, big)
        memory = {}
        for dtype in ("fp16", "bf16"):
            ok, out = go("memory %s" % dtype, [os.path.join(a.bin, "amp-train"), os.path.join(g, "bench.onnx"),
                                               "--data", big,
                                               "--loss", "cross_entropy", "--batch-size", str(MEMORY_BATCH), "--steps", "1",
                                               "--momentum", "0.9", "--dtype", dtype, "--compare-fp32", "--device", a.device])
            both = zoo_check.backend_bytes(out)
            if ok and both:
                memory[dtype] = both
        os.remove(big)
        with open(os.path.join(r, "memory.json"), "w") as f:
            json.dump(memory, f)
    return failures


def run_all(a):
    res = os.path.join(a.out, "gpu_zoo")
    shutil.rmtree(res, ignore_errors=True)
    os.makedirs(res)
    # --models in their order (what the budget reaches first), else torchvision's models first: when
    # the budget runs out, the small transformers are what is left.
    here = [n for n in os.listdir(a.zoo) if os.path.exists(os.path.join(a.zoo, n, "model.onnx"))]
    if a.models:
        missing = [n for n in a.models if n not in here]
        if missing:
            sys.exit("gpu_zoo: not prepared in %s: %s" % (a.zoo, ", ".join(missing)))
        names = list(a.models)
    else:
        names = sorted(here, key=lambda n: (n.startswith("tiny_"), n))
    failed = 0
    deadline = time.time() + a.budget
    # The drawn models' weights first (seconds): the benchmark after this step reads them too.
    for name in names:
        with open(os.path.join(a.zoo, name, "meta.json")) as f:
            meta = json.load(f)
        if "drawn" in meta:
            try:
                regenerate(os.path.join(a.zoo, name), meta)
            except RuntimeError as e:
                print("%s: %s" % (name, e), flush=True)
                failed += 1
    for name in names:
        if time.time() > deadline:
            print("%s: NOT RUN, the time budget is spent" % name, flush=True)
            failed += 1
            continue
        t = time.time()
        failures = run_model(a, os.path.join(a.zoo, name), os.path.join(res, name))
        failed += bool(failures)
        print("%s: %s (%.0f s)" % (name, "; ".join(failures) if failures else "every run ok", time.time() - t), flush=True)
    # Parts of at most PART_BYTES: the files, largest first, each into the first part it fits.
    files = sorted(glob.glob(os.path.join(res, "*", "*")), key=os.path.getsize, reverse=True)
    parts = []  # [bytes, [files]]
    for f in files:
        size = os.path.getsize(f)
        fit = next((p for p in parts if p[0] + size <= PART_BYTES), None)
        if fit is None:
            fit = [0, []]
            parts.append(fit)
        fit[0] += size
        fit[1].append(f)
    for n, (_, members) in enumerate(parts, 1):
        with tarfile.open(os.path.join(a.out, "gpu_zoo_%d.tar" % n), "w") as t:
            for f in members:
                t.add(f, arcname=os.path.relpath(f, res))
    n = len(parts)
    shutil.rmtree(res)
    print("gpu_zoo: %d part(s) in %s" % (n, a.out))
    sys.exit(1 if failed else 0)


# --- check (here) ------------------------------------------------------------------------------

def losses(path):
    if not os.path.exists(path):
        return None
    return [json.loads(l) for l in open(path) if '"loss"' in l]


def rel(xs, ys):
    return max(abs(x - y) / abs(y) for x, y in zip(xs, ys))


def check_model(a, name, r):
    """(row cells, failed?) for one model's device results in r."""
    g = os.path.join(a.zoo, name)
    d = os.path.join(a.work, name)
    with open(os.path.join(g, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    o = argparse.Namespace(build=a.build, name=name, size=meta["size"], batch=BATCH, threads=a.threads)
    cells, failed = [], False
    initial = np.load(os.path.join(d, "initial.npz"))
    drawn = "drawn" in meta
    # The CPU backend's runs: on the drawn weights (prepare kept them in d/drawn) where drawn.
    cpu_dir = os.path.join(d, "drawn") if drawn else d

    # sgd: against torch float64 on the device's pieces.
    if drawn:
        cells += ["n/a: drawn weights (%.1f MiB of parameters do not travel)" % (
            sum(initial[k].nbytes for k in initial.files) / 2**20), "-"]
    elif not (os.path.exists(os.path.join(r, "sgd.npz")) and os.path.exists(os.path.join(r, "acts_0.npz"))):
        cells += ["FAIL: no device run (see log.txt)", "-"]
        failed = True
    else:
        state = np.load(os.path.join(r, "sgd.npz"))
        rp = os.path.join(r, "replay")
        os.makedirs(rp, exist_ok=True)
        with open(os.path.join(rp, "kinks.json"), "w") as f:
            json.dump(meta["kinks"], f)
        shutil.copy(os.path.join(r, "acts_0.npz"), os.path.join(rp, "acts_0.npz"))
        try:
            replayed, info = zoo_check.replay(d, o, rp, 1, 0.0)
            errors = zoo_check.update_errors(state, initial, replayed)
            u32 = np.load(os.path.join(rp, "update32.npz"))
            largest = max(float(np.abs(replayed[k]).max()) for k in replayed.files)
            torch32 = max(float(np.abs(u32[k] - replayed[k]).max()) for k in replayed.files) / largest
            worst_e, worst_k = max((e, k) for k, e in errors.items())
            ok, verdict = zoo_check.judge(worst_e, zoo_check.SGD_THRESHOLD, torch32)
            failed |= not ok
            cells.append("%s %s `%s` (torch fp32 on the same pieces %.1e)" % (
                "ok" if ok else "FAIL", verdict, worst_k, torch32))
        except (KeyError, RuntimeError) as e:
            cells.append("FAIL: %s" % e)
            failed = True
            largest = None
        # The CPU backend's update from the same weights and batch.
        ck = os.path.join(r, "cpu_sgd")
        rc, out = zoo_check.amp_train(o, d, ["--steps", "1", "--checkpoint", ck])
        if rc == 0 and largest:
            cpu = np.load(os.path.join(ck, "checkpoint.npz"))
            diff = max(float(np.abs(state[k].astype(np.float64) - cpu[k]).max()) for k in replayed.files) / largest
            cells.append("%.1e" % diff)
        else:
            cells.append("n/a (%s)" % (zoo_check.last_error(out) if rc else "no reference"))

    # Momentum, fp16, bf16: the device's losses against the CPU backend's and torch float64's.
    device = {dt: losses(os.path.join(r, "momentum_%s.jsonl" % dt)) for dt in ("fp32", "fp16", "bf16")}
    cpu = {}
    for dt in ("fp32", "fp16", "bf16"):
        m = os.path.join(r, "cpu_momentum_%s.jsonl" % dt)
        extra = ["--loss-scale", str(meta["fp16_scale"])] if dt == "fp16" else []
        rc, out = zoo_check.amp_train(o, cpu_dir, ["--steps", "3", "--momentum", "0.9", "--dtype", dt, "--metrics", m] + extra)
        cpu[dt] = losses(m) if rc == 0 else None
    f32 = device["fp32"]
    if not f32 or len(f32) != 3:
        cells.append("FAIL: no fp32 run")
        failed = True
    elif drawn:
        # No float64 trajectory for these weights: the first loss (the forward alone) against the
        # CPU backend's, within FORWARD_THRESHOLD, and the three losses reported.
        ours = [x["loss"] for x in f32]
        if not cpu["fp32"]:
            cells.append("FAIL: the CPU run failed")
            failed = True
        else:
            theirs = [x["loss"] for x in cpu["fp32"]]
            first = abs(ours[0] - theirs[0]) / abs(theirs[0])
            ok = first <= zoo_check.FORWARD_THRESHOLD
            failed |= not ok
            cells.append("%s first loss vs cpu %.1e; 3 losses vs cpu %.1e" % ("ok" if ok else "FAIL", first, rel(ours, theirs)))
    else:
        ours = [x["loss"] for x in f32]
        # No replay of the device's pieces for the trajectory (it would take a probe run a step):
        # both sides are measured against torch float64's own trajectory.
        ok, verdict = zoo_check.judge(rel(ours, ref["losses"]), zoo_check.LOSS_THRESHOLD, ref["torch_fp32"]["loss_error"])
        failed |= not ok
        cpu_text = "%.1e" % rel(ours, [x["loss"] for x in cpu["fp32"]]) if cpu["fp32"] else "n/a"
        cells.append("%s %s; vs cpu %s" % ("ok" if ok else "FAIL", verdict, cpu_text))
    for dt in ("fp16", "bf16"):
        got = device[dt]
        if not got or len(got) != 3 or not all(np.isfinite([x["loss"] for x in got])):
            cells.append("FAIL: %s" % ("no run" if not got else "not finite: %s" % [x["loss"] for x in got]))
            failed = True
            continue
        ls = [x["loss"] for x in got]
        skipped = sum(1 for x in got if x.get("skipped"))
        if cpu[dt] and cpu["fp32"]:
            text = "first loss vs cpu %.1e (cpu %s vs fp32 %.1e)" % (
                abs(ls[0] - cpu[dt][0]["loss"]) / abs(cpu[dt][0]["loss"]), dt,
                abs(cpu[dt][0]["loss"] - cpu["fp32"][0]["loss"]) / abs(cpu["fp32"][0]["loss"]))
        else:
            text = "no cpu run"
        if f32 and len(f32) == 3:
            text += ", 3 losses vs fp32 %.1e" % rel(ls, [x["loss"] for x in f32])
        if skipped:
            text += " (%d skipped)" % skipped
        cells.append("ok " + text)
    mem_path = os.path.join(r, "memory.json")
    mem = json.load(open(mem_path)) if os.path.exists(mem_path) else {}
    if set(mem) != {"fp16", "bf16"}:
        cells.append("FAIL: no memory figures")
        failed = True
    else:
        ok = all(low < f32b for f32b, low in mem.values())
        failed |= not ok
        cells.append("%s %.2f, %.2f (%.1f MiB)" % ("ok" if ok else "FAIL", mem["fp16"][1] / mem["fp16"][0],
                                                   mem["bf16"][1] / mem["bf16"][0], mem["fp16"][0]))
    return cells, failed


def check(a):
    res = os.path.join(a.work, "results")
    shutil.rmtree(res, ignore_errors=True)
    os.makedirs(res)
    for t in a.tars:
        with tarfile.open(t) as f:
            f.extractall(res)
    names = sorted(os.listdir(res))
    cols = ["sgd vs fp64 (device's pieces)", "sgd vs cpu", "momentum: 3 losses vs fp64 (drawn: vs cpu)", "fp16",
            "bf16", "memory fp16, bf16 (of fp32)"]
    print("| model | parameters | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    failed = 0
    for name in names:
        with open(os.path.join(a.zoo, name, "meta.json")) as f:
            meta = json.load(f)
        cells, bad = check_model(a, name, os.path.join(res, name))
        failed += bad
        print("| %s | %d (%.1fM) | %s |" % (name, meta["params"], meta["numel"] / 1e6, " | ".join(cells)), flush=True)
    sys.exit(1 if failed else 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="phase", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("models", nargs="+")
    q.add_argument("--build", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--size", type=int, default=64)
    q.add_argument("--work", help="the exports and references (default BUILD/zoo-gpu)")
    q.add_argument("--draw-above-mib", type=float, default=DRAW_ABOVE / 2**20,
                   help="models with more MiB of parameters travel without them (drawn from a seed)")
    q = sub.add_parser("run")
    q.add_argument("--bin", required=True, help="the folder with amp-run and amp-train")
    q.add_argument("--zoo", required=True, help="prepare's --out")
    q.add_argument("--out", required=True)
    q.add_argument("--device", default="cuda")
    q.add_argument("--budget", type=float, default=300, help="seconds; models not started by then are not run")
    q.add_argument("--models", nargs="*", help="these prepared models, in this order (default: all)")
    q = sub.add_parser("check")
    q.add_argument("tars", nargs="+")
    q.add_argument("--build", required=True)
    q.add_argument("--zoo", required=True, help="prepare's --out")
    q.add_argument("--work", help="prepare's --work (default BUILD/zoo-gpu)")
    q.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if hasattr(a, "work") and a.build:
        a.work = a.work or os.path.join(a.build, "zoo-gpu")
    for k in ("build", "out", "zoo", "bin", "work"):
        if getattr(a, k, None):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    {"prepare": prepare, "run": run_all, "check": check}[a.phase](a)


if __name__ == "__main__":
    main()
