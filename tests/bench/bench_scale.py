#!/usr/bin/env python3
"""ResNet-50 at ImageNet size on a GPU (issue 28): amp-train's training step against PyTorch's on
the same device, in one table. Two phases, because the GPU machine has no torch 1.13 exporter:

  prepare (here)  /usr/bin/python3 tests/bench/bench_scale.py prepare --out .gpu-scale [--size 224]
                  [--models resnet50 efficientnet_b0 convnext_tiny]
      exports each torchvision model (1000 classes, dropout and stochastic depth 0, training mode,
      the batch dim symbolic) into OUT/NAME/model.onnx, its parameters pointing into weights.bin,
      which does not travel: drawn from a seed with torch's initial mean and spread per tensor
      (tests/zoo/gpu_zoo.py draw_weights), again on the GPU machine, and checked by SHA-256 there
      (the loss check's 8 images are drawn there too). Also meta.json: the training FLOPs of one image,
      counted once from the graph (Conv, Gemm and MatMul forward, 2 FLOPs a multiply-add, times 3
      for the backward's two products; ResNet-50 at 224: 3 x 8.2 GFLOP).
  run (GPU)       python3 tests/bench/bench_scale.py run --bin KIT_BIN --scale DIR --out OUT
                  [--device cuda] [--budget SECONDS]
      needs numpy and PyTorch (with CUDA for --device cuda). Rows, resnet50 at batch 128:
        amp fp32 / fp32 tf32 / fp16 / bf16   amp-train --device cuda (SGD, momentum 0.9), TF32 off
                                             unless named; the step as amp-train runs it
        torch fp32                           eager, TF32 off
        torch autocast fp16 / bf16 (CL)      eager torch.autocast, channels_last (fp16 with GradScaler)
        torch compile bf16 (CL)              torch.compile of the autocast bf16 channels_last model
      then resnet50 bf16 at batch 256 (amp and torch), and efficientnet_b0 and convnext_tiny at
      batch 128 in bf16 (amp and torch). Columns: step ms (the median of --steps steps after
      the first and WARMUP (2) more, amp-train's from its --metrics file and PyTorch's timed between
      device syncs; amp-train's mean of every step after its first in the JSON), images/s, MFU (the FLOPs above over the device's dense peak for the
      precision), peak device memory (amp: what the device held beyond what it held before,
      cudaMemGetInfo polled every 20 ms while amp-train ran, its CUDA context included; beside
      it amp-train's own count of state + arena; torch: max_memory_reserved, and allocated), and
      the first step's seconds. Then: the first step of amp bf16 at batch 128 with a cold kernel
      cache (a new AMP_KERNEL_CACHE_DIR) and again warm; where the second step of the slowest amp
      row and of resnet50's amp bf16 went, unit by unit (every amp row runs with
      AMP_CUDA_UNIT_TIMES=2: .ci/unit_times.py; every unit in scale_logs/units_*.tsv); the kernels
      of resnet50's amp bf16 row under ncu (.ci/kernel_times.py's method: 4 steps minus 2;
      --kernels-of picks another); 10 steps at batch 8 (images drawn from the model's seed) of
      amp-train --device cuda against --device cpu (same weights and batches, bf16): every loss
      finite, and the largest relative distance. Rows not reached within --budget are listed as
      such. Every command's output is kept in OUT/scale_logs/; OUT/scale.json holds the rows as
      they come; the table (OUT/scale_table.md) is written last.

--device cpu with a small --size (prepare --size 32) runs the whole pipeline on the CPU, without
PyTorch's CUDA, memory polling or ncu: what tests/bench/bench_scale_pipeline.sh checks here.
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
sys.path.insert(0, os.path.join(ROOT, ".ci"))
import gpu_zoo  # noqa: E402  (numpy alone)

MODELS = ("resnet50", "efficientnet_b0", "convnext_tiny")
CLASSES = 1000
LOSS_BATCH, LOSS_STEPS = 8, 10
# Untimed steps after the first, for amp-train (its third step captures the CUDA Graph that later
# steps replay) and PyTorch (cuDNN's benchmark, the compiler's guards) alike.
WARMUP = 2
# Dense peaks in FLOP/s (16-bit Tensor Cores, TF32, fp32 without Tensor Cores), from NVIDIA's data sheets.
PEAKS = {"H200": (989.4e12, 494.7e12, 66.9e12), "H100 PCIe": (756.0e12, 378.0e12, 51.2e12),
         "H100": (989.4e12, 494.7e12, 66.9e12), "A100": (312.0e12, 156.0e12, 19.5e12)}


def build(name):
    """torchvision's NAME with 1000 classes, no dropout or stochastic depth (as the zoo's models)."""
    import torch
    import torchvision
    m = getattr(torchvision.models, name)(num_classes=CLASSES)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout) or type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0
    return m


# --- prepare (here) ----------------------------------------------------------------------------

def forward_flops(path):
    """FLOPs of one sample's forward: 2 per multiply-add of every Conv, Gemm and MatMul."""
    import onnx
    m = onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    dims = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims[v.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in v.type.tensor_type.shape.dim]
    for t in m.graph.initializer:
        dims[t.name] = list(t.dims)
    total = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            w, y = dims[n.input[1]], dims[n.output[0]]
            total += 2 * int(np.prod(y[1:])) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            a, y = dims[n.input[0]], dims[n.output[0]]
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            k = a[-2] if trans_a else a[-1]
            total += 2 * int(np.prod(y)) * k
    return total


def prepare(a):
    import onnx
    import torch
    os.makedirs(a.out, exist_ok=True)
    for name in a.models:
        g = os.path.join(a.out, name)
        shutil.rmtree(g, ignore_errors=True)
        os.makedirs(g)
        torch.manual_seed(0)
        model = build(name).train()
        x = torch.randn(2, 3, a.size, a.size)
        raw = os.path.join(g, "export.onnx")
        torch.onnx.export(model, x, raw, input_names=["input"], output_names=["logits"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        m = onnx.load(raw)
        os.remove(raw)
        from onnx import numpy_helper
        specs = []
        for t in m.graph.initializer:
            if t.data_type == onnx.TensorProto.FLOAT:
                v = numpy_helper.to_array(t)
                specs.append([t.name, list(v.shape), float(v.mean()), float(v.std())])
        seed = sum(map(ord, name))
        where, digest = gpu_zoo.write_weights(gpu_zoo.draw_weights(specs, seed), [s[0] for s in specs],
                                              os.path.join(g, "weights.bin"))
        gpu_zoo.point_at(m, where, "weights.bin")
        onnx.save_model(m, os.path.join(g, "model.onnx"))
        if not a.keep_weights:
            os.remove(os.path.join(g, "weights.bin"))
        meta = {"name": name, "size": a.size, "classes": CLASSES, "drawn": {"seed": seed, "specs": specs, "sha256": digest},
                "train_flops_per_image": 3 * forward_flops(os.path.join(g, "model.onnx"))}
        with open(os.path.join(g, "meta.json"), "w") as f:
            json.dump(meta, f)
        print("%s: %s, %.2f GFLOP per image trained (%.1f MiB to carry)" % (
            name, g, meta["train_flops_per_image"] / 1e9,
            sum(os.path.getsize(os.path.join(g, n)) for n in os.listdir(g)) / 2**20), flush=True)


# --- run (on the GPU machine) --------------------------------------------------------------------

class Run:
    def __init__(self, a):
        self.a = a
        self.logs = os.path.join(a.out, "scale_logs")
        os.makedirs(self.logs, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="bench-scale-")
        self.deadline = time.time() + a.budget
        self.cuda = a.device == "cuda"
        self.rows, self.notes = [], []
        self.device_name = "cpu"
        self.peaks = (float("nan"),) * 3
        if self.cuda:
            import torch
            torch.cuda.init()
            self.device_name = torch.cuda.get_device_name()
            self.peaks = next((p for k, p in PEAKS.items() if k in self.device_name), self.peaks)
        self.cache = os.path.join(self.tmp, "kernel-cache")  # AMP_KERNEL_CACHE_DIR of the timed rows
        self.reports = {}  # (model, batch, variant) of an amp row -> its device report

    def left(self):
        return self.deadline - time.time()

    def peak(self, precision):
        return self.peaks[0] if precision in ("fp16", "bf16") else self.peaks[1] if precision == "tf32" else self.peaks[2]

    def save(self):
        with open(os.path.join(self.a.out, "scale.json"), "w") as f:
            json.dump({"device": self.device_name, "rows": self.rows, "notes": self.notes}, f, indent=1)

    def meta(self, name):
        with open(os.path.join(self.a.scale, name, "meta.json")) as f:
            return json.load(f)

    def data(self, name, batch):
        """A .npz of `batch` random images of the model's size (made once per model and batch)."""
        path = os.path.join(self.tmp, "%s_%d.npz" % (name, batch))
        if not os.path.exists(path):
            size = self.meta(name)["size"]
            rng = np.random.default_rng(batch)
            np.savez(path, input=rng.standard_normal((batch, 3, size, size), dtype=np.float32),
                     labels=rng.integers(0, CLASSES, batch).astype(np.int64))
        return path

    def loss_data(self, name):
        """The loss check's LOSS_BATCH images and labels, drawn here from the model's seed: both of
        its runs (device and CPU) read the same file, so nothing of it needs to travel."""
        path = os.path.join(self.tmp, "%s_loss.npz" % name)
        if not os.path.exists(path):
            size = self.meta(name)["size"]
            rng = np.random.default_rng(self.meta(name)["drawn"]["seed"])
            np.savez(path, input=rng.standard_normal((LOSS_BATCH, 3, size, size), dtype=np.float32),
                     labels=rng.integers(0, CLASSES, LOSS_BATCH).astype(np.int64))
        return path

    def command(self, tag, cmd, env=None, timeout=None):
        """(exit status, output) of cmd, its output kept in scale_logs/TAG.log; with CUDA, the most
        device memory it held (MiB) beside."""
        timeout = max(5.0, min(timeout or self.left(), self.left()))
        held = [0]
        stop = threading.Event()
        poll = None
        if self.cuda:
            import torch
            base = torch.cuda.mem_get_info()[0]

            def watch():
                while not stop.is_set():
                    held[0] = max(held[0], base - torch.cuda.mem_get_info()[0])
                    stop.wait(0.02)
            poll = threading.Thread(target=watch, daemon=True)
            poll.start()
        t = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = 124, ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")) + \
                "\n(timed out after %.0f s)" % timeout
        stop.set()
        if poll:
            poll.join()
        with open(os.path.join(self.logs, tag + ".log"), "w") as f:
            f.write("$ %s\n%s\n(exit %d, %.1f s)\n" % (" ".join(cmd), out, rc, time.time() - t))
        return rc, out, held[0] / 2**20

    def amp_train(self, name, batch, dtype, steps, extra=(), data=None):
        return [os.path.join(self.a.bin, "amp-train"), os.path.join(self.a.scale, name, "model.onnx"), "--data",
                data or self.data(name, batch), "--loss", "cross_entropy", "--steps", str(steps), "--batch-size", str(batch),
                "--no-shuffle", "--seed", "0", "--momentum", "0.9", "--lr", "0.01", "--dtype", dtype, "--device",
                self.a.device] + list(extra)

    def row(self, **r):
        self.rows.append(r)
        self.save()
        print("  " + ", ".join("%s %s" % (k, v) for k, v in r.items()), flush=True)

    def amp_row(self, name, batch, dtype, tf32=False, extra_env=None):
        """extra_env: {VARIABLE: value} for this row alone (--amp-env), named in its label."""
        label = "amp %s%s" % (dtype, " tf32" if tf32 else "")
        label += "".join(" (%s=%s)" % kv for kv in (extra_env or {}).items())
        if self.left() < 30:
            return self.row(model=name, batch=batch, variant=label, error="not run: the time budget is spent")
        tag = "%s_%d_%s%s%s" % (name, batch, dtype, "_tf32" if tf32 else "",
                                "".join("_%s_%s" % kv for kv in (extra_env or {}).items()))
        env = {"AMP_KERNEL_CACHE_DIR": self.cache, **(extra_env or {})}
        if self.cuda:  # what cuBLASLt and cuDNN took (backends/cuda/device_report.h), kept with the log,
            env["AMP_CUDA_REPORT"] = os.path.join(self.logs, tag + ".jsonl")
            # and where the second step's time went, unit by unit (a warm-up step: not timed here)
            env["AMP_CUDA_UNIT_TIMES"] = "2"
            self.reports[(name, batch, label)] = env["AMP_CUDA_REPORT"]
        metrics = os.path.join(self.logs, tag + ".metrics.jsonl")
        rc, out, held = self.command(tag, self.amp_train(name, batch, dtype, self.amp_steps(),
                                                         (["--tf32"] if tf32 else []) + ["--metrics", metrics]), env)
        if self.cuda and dtype in ("fp16", "bf16"):
            self.graph_note(label, name, batch, env["AMP_CUDA_REPORT"])
        m = re.search(r"([\d.]+) ms/step \(the first ([\d.]+) s.*backend state \+ arena ([\d.]+) MiB", out)
        timed = self.steady_ms(metrics, batch) if rc == 0 and m else None
        if not timed:
            return self.row(model=name, batch=batch, variant=label, error=gpu_zoo.zoo_check.last_error(out))
        ms, mean_ms, device_ms = timed
        first, planned = float(m.group(2)), float(m.group(3))
        self.row(model=name, batch=batch, variant=label, step_ms=ms, images_per_s=batch / ms * 1e3,
                 mfu=self.meta(name)["train_flops_per_image"] * batch / (ms / 1e3) / self.peak("tf32" if tf32 else dtype),
                 device_MiB=held if self.cuda else None, planned_MiB=planned, first_step_s=first, mean_ms=mean_ms,
                 device_ms=device_ms)

    def amp_steps(self):
        """amp-train's --steps for a timed row: the first step, WARMUP more, then --steps timed ones,
        as timed_steps runs PyTorch's."""
        return 1 + WARMUP + self.a.steps

    @staticmethod
    def steady_ms(metrics, samples):
        """(median, mean, device median) ms of amp-train's steps from its --metrics file (each
        step's samples_per_second, timed by amp-train between the step's start and its fetched
        results): the median of the steps after the first and WARMUP more, as timed_steps takes
        PyTorch's, and the mean of every step after the first, which amp-train's own ms/step line
        prints; beside them the median of the same steps' device_ms (what the device worked of
        each, CUDA events around its run), None where the backend does not measure it. None when
        the file has too few steps."""
        try:
            with open(metrics) as f:
                records = [json.loads(l) for l in f if '"samples_per_second"' in l]
            rates = [r["samples_per_second"] for r in records]
        except (OSError, ValueError, KeyError):
            return None
        ms = [samples / r * 1e3 for r in rates if r > 0]
        if len(ms) != len(rates) or len(ms) < 2 + WARMUP:
            return None
        device = [r["device_ms"] for r in records[1 + WARMUP:] if "device_ms" in r]
        return (statistics.median(ms[1 + WARMUP:]), statistics.fmean(ms[1:]),
                statistics.median(device) if device and len(device) == len(ms) - 1 - WARMUP else None)

    def graph_note(self, label, name, batch, report):
        """A note of how many of the step's cuDNN convolution graphs (a BatchNorm + ReLU inside the
        convolutions around it, backends/cuda/conv_batch_norm_fusion.h) cuDNN took fused, and why it
        took the others unfused: the plan's traffic counts them fused."""
        if not os.path.exists(report):
            return
        graphs = []
        with open(report) as f:
            for text in f:
                with contextlib.suppress(json.JSONDecodeError):
                    line = json.loads(text)
                    if line.get("event") == "convolution_graph":
                        graphs.append(line)
        fused = sum(1 for g in graphs if g.get("result") == "fused")
        why = {}
        for g in graphs:
            if g.get("result") != "fused":
                key = "%s: %s" % (g.get("graph"), g.get("why"))
                why[key] = why.get(key, 0) + 1
        self.notes.append("cuDNN convolution graphs, %s %s at batch %d: %d of %d built fused%s" % (
            label, name, batch, fused, len(graphs),
            "; unfused: " + "; ".join("%s (x %d)" % kv for kv in why.items()) if why else ""))

    def torch_row(self, name, batch, variant):
        if self.left() < 30:
            return self.row(model=name, batch=batch, variant=variant, error="not run: the time budget is spent")
        import torch
        import torch.nn.functional as F
        device = "cuda" if self.cuda else "cpu"
        dtype = torch.bfloat16 if "bf16" in variant else torch.float16 if "fp16" in variant else None
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = True
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            torch.manual_seed(0)
            model = build(name).to(device).train()
            x = torch.randn(batch, 3, self.meta(name)["size"], self.meta(name)["size"], device=device)
            y = torch.randint(0, CLASSES, (batch,), device=device)
            if dtype is not None:
                model = model.to(memory_format=torch.channels_last)
                x = x.contiguous(memory_format=torch.channels_last)
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            scaler = torch.cuda.amp.GradScaler(enabled=dtype == torch.float16 and self.cuda)
            forward = torch.compile(model) if "compile" in variant else model

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext():
                    loss = F.cross_entropy(forward(x).float(), y)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()

            first, ms = self.timed_steps(torch, step, warmup=WARMUP)
            precision = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")
            r = dict(model=name, batch=batch, variant=variant, step_ms=ms, images_per_s=batch / ms * 1e3,
                     mfu=self.meta(name)["train_flops_per_image"] * batch / (ms / 1e3) / self.peak(precision),
                     device_MiB=torch.cuda.max_memory_reserved() / 2**20 if self.cuda else None,
                     planned_MiB=torch.cuda.max_memory_allocated() / 2**20 if self.cuda else None, first_step_s=first)
        except Exception as e:  # torch.compile without a compiler, out of memory: the other rows still count
            r = dict(model=name, batch=batch, variant=variant, error="%s: %s" % (type(e).__name__, str(e).strip()[:200]))
        with open(os.path.join(self.logs, "torch_%s_%d_%s.log" % (name, batch, variant.replace(" ", "_"))), "w") as f:
            json.dump(r, f)
        model = opt = forward = None  # noqa: F841  (the next row's memory is its own)
        if self.cuda:
            torch.cuda.empty_cache()
        self.row(**r)

    def timed_steps(self, torch, step, warmup):
        """Seconds of the first step, then `warmup` untimed steps, then the median of up to
        --steps timed steps in ms (fewer when the budget runs low), each between device syncs."""
        def sync():
            if self.cuda:
                torch.cuda.synchronize()
        t = time.time()
        step()
        sync()
        first = time.time() - t
        for _ in range(warmup):
            step()
        times = []
        for _ in range(self.a.steps):
            sync()
            t = time.time()
            step()
            sync()
            times.append(time.time() - t)
            if self.left() < 10:
                break
        return first, statistics.median(times) * 1e3

    def first_steps(self, name, batch, dtype, extra_env=None):
        """The first step with a cold kernel cache, then warm (the same cache folder); extra_env:
        {VARIABLE: value} for both (a new cache of their own), named in the note."""
        tag = "".join("_%s_%s" % kv for kv in (extra_env or {}).items())
        label = "".join(" (%s=%s)" % kv for kv in (extra_env or {}).items())
        cache = os.path.join(self.tmp, "cold-cache" + tag)
        for state in ("cold", "warm"):
            if self.left() < 30:
                self.notes.append("first step%s %s: not run, the time budget is spent" % (label, state))
                continue
            env = {"AMP_KERNEL_CACHE_DIR": cache, **(extra_env or {})}
            if self.cuda:  # where the first step's time went (the plan's preparation, cuDNN's measurements, NVRTC)
                env["AMP_CUDA_REPORT"] = os.path.join(self.logs, "first_step_%s%s.jsonl" % (state, tag))
            rc, out, _ = self.command("first_step_%s%s" % (state, tag), self.amp_train(name, batch, dtype, 2), env)
            m = re.search(r"the first ([\d.]+) s", out)
            self.notes.append("first step of amp %s%s, %s at batch %d, %s caches: %s%s" % (
                dtype, label, name, batch, state, "%s s" % m.group(1) if rc == 0 and m else "FAILED: " +
                gpu_zoo.zoo_check.last_error(out), self.start_up(env.get("AMP_CUDA_REPORT"))))
            self.save()

    @staticmethod
    def start_up(report):
        """"" or "; of it: ..." from a first step's device report: the plan's preparation, cuDNN's
        algorithm rankings (heuristic and workspace queries) and measurements, its graph builds and
        NVRTC's compilations, each in seconds."""
        import device_report
        if not report or not os.path.exists(report):
            return ""
        plan, finds, ranks, builds, nvrtc = 0.0, [], [], [], []
        for l in device_report.load(report):
            if l.get("event") == "plan":
                plan += float(l.get("prepare ms", 0))
            if "find ms" in l:
                finds.append(float(l["find ms"]))
            if "rank ms" in l:
                ranks.append(float(l["rank ms"]))
            if l.get("event") == "convolution_graph" and "build ms" in l:
                builds.append(float(l["build ms"]))
            if l.get("event") == "kernel_image" and l.get("from") == "NVRTC":
                nvrtc.append(float(l.get("ms", 0)))
        return ("; of it: plan prepared in %.2f s, cuDNN's rankings %.2f s (%d) and measurements %.2f s (%d), graph builds "
                "%.2f s (%d), NVRTC %.2f s (%d)" % (plan / 1e3, sum(ranks) / 1e3, len(ranks), sum(finds) / 1e3, len(finds),
                                                    sum(builds) / 1e3, len(builds), sum(nvrtc) / 1e3, len(nvrtc)))

    def unit_profile(self, row):
        """A note of where `row`'s (an amp row's) second step went, unit by unit, from its device
        report (AMP_CUDA_UNIT_TIMES=2), and every unit in scale_logs/units_*.tsv."""
        import unit_times
        report = self.reports.get((row["model"], row["batch"], row["variant"]))
        found = unit_times.runs(report) if report and os.path.exists(report) else []
        if not found:
            self.notes.append("unit times of %s %s at batch %d: none recorded" % (row["model"], row["variant"], row["batch"]))
            return
        totals, units = max(found, key=lambda f: len(f[1]))  # the training step's plan
        lines = unit_times.summary(totals, units, top=20)
        lines[0] = "%s %s at batch %d, %s" % (row["model"], row["variant"], row["batch"], lines[0])
        self.notes.append("\n".join(lines))
        unit_times.write_tsv(units, os.path.join(self.logs, "units_%s_%d_%s.tsv" % (
            row["model"], row["batch"], re.sub(r"[^\w.=-]+", "_", row["variant"]))))
        self.save()

    def kernels(self, slow=None):
        """Where the slowest amp row's step goes (`slow`: a row's model, batch and variant, run here
        first when no row has): unit by unit from its device report, and the resnet50 bf16 row's
        too; then the kernels of `slow`, else of the resnet50 bf16 row, under ncu (kernel_times.py's
        4 steps minus 2) if the budget allows."""
        import kernel_times
        amp = [r for r in self.rows if r["variant"].startswith("amp") and "images_per_s" in r]
        if slow and self.cuda and (slow["model"], slow["batch"], slow["variant"]) not in self.reports:
            self.amp_row(slow["model"], slow["batch"], slow["variant"].split()[1])
        # The headline row: resnet50's amp bf16 at --batch.
        headline = [r for r in amp if r["model"] == "resnet50" and r["variant"] == "amp bf16" and r["batch"] == self.a.batch]
        if self.cuda:
            detailed = [slow or min(amp, key=lambda r: r["images_per_s"])] if (slow or amp) else []
            detailed += [r for r in headline if r not in detailed]
            for row in detailed:
                self.unit_profile(row)
        ncu = kernel_times.find_ncu()
        if not (amp or slow) or not ncu or not self.cuda or self.left() < 60:
            self.notes.append("kernel profile: not run (%s)" % ("no amp row" if not (amp or slow) else "no ncu" if not ncu
                                                                 else "no GPU" if not self.cuda else "the time budget is spent"))
            return
        # ncu replays every kernel alone: efficientnet_b0's step (thousands of kernels) did not end
        # within 46 s on the H200 of 2026-11-28, so without --kernels-of it profiles the headline
        # row, resnet50's amp bf16, and the unit times above cover the slowest.
        slow = slow or (headline[0] if headline else min(amp, key=lambda r: r["images_per_s"]))
        dtype = slow["variant"].split()[1]
        extra = ["--tf32"] if slow["variant"].endswith("tf32") else []
        runs = []
        # The algorithms the timed row ran: cuDNN's measured choices, read from the rows' kernel
        # cache (a first run outside ncu measures them when no row has), not measured under ncu.
        if not any(r["variant"].startswith("amp") for r in self.rows):
            self.command("kernels_warmup", self.amp_train(slow["model"], slow["batch"], dtype, 1, extra),
                         {"AMP_KERNEL_CACHE_DIR": self.cache})
        try:
            for steps in (2, 4):
                cmd = self.amp_train(slow["model"], slow["batch"], dtype, steps, extra)
                runs.append(kernel_times.kernel_sums(ncu, cmd, self.tmp, "ncu_%d" % steps, True, max(10.0, self.left()),
                                                     {"AMP_KERNEL_CACHE_DIR": self.cache}))
        except (RuntimeError, OSError) as e:
            self.notes.append("kernel profile: FAILED: %s" % str(e)[:300])
            return
        rows = kernel_times.step_rows(*runs, 2)
        total = sum(ns for ns, _, _ in rows)
        lines = ["kernels of %s %s at batch %d (ncu, cuDNN's measured choices): %.1f ms of kernels a step" % (
            slow["model"], slow["variant"], slow["batch"], total / 1e6)]
        lines += ["  %9.1f us %5.1f%% %6.1fx  %s" % (ns / 1e3, 100 * ns / max(total, 1), c, k[:100]) for ns, c, k in rows[:25]]
        self.notes.append("\n".join(lines))
        # Every kernel, full names, in scale_logs/ (more.tar.xz): the note keeps the first 25.
        with open(os.path.join(self.logs, "kernels_%s_%s.tsv" % (slow["model"], slow["variant"].replace(" ", "_"))), "w") as f:
            f.write("us a step\tcalls a step\tkernel\n")
            f.writelines("%.1f\t%.1f\t%s\n" % (ns / 1e3, c, k) for ns, c, k in rows)
        self.save()

    def losses(self, name, dtype):
        """--loss-steps (10) steps at batch 8 on the device and on the CPU: finite, and how far apart."""
        got = {}
        for device in ([self.a.device, "cpu"] if self.a.device != "cpu" else ["cpu"]):
            if self.left() < 20:
                self.notes.append("loss check %s: not run, the time budget is spent" % device)
                return
            metrics = os.path.join(self.tmp, "loss_%s_%s.jsonl" % (dtype, device))
            cmd = self.amp_train(name, LOSS_BATCH, dtype, self.a.loss_steps, ["--metrics", metrics], self.loss_data(name))
            cmd[cmd.index("--device") + 1] = device
            rc, out, _ = self.command("loss_%s_%s" % (dtype, device), cmd)
            if rc != 0:
                self.notes.append("loss check on %s: FAILED: %s" % (device, gpu_zoo.zoo_check.last_error(out)))
                return
            with open(metrics) as f:
                got[device] = [json.loads(l)["loss"] for l in f if '"loss"' in l]
        ours = got[self.a.device]
        theirs = got["cpu"]
        finite = len(ours) == self.a.loss_steps and all(np.isfinite(ours))
        distance = max(abs(x - y) / abs(y) for x, y in zip(ours, theirs)) if len(ours) == len(theirs) else float("nan")
        self.notes.append("loss check, %s %s at batch %d, %d steps: %s; %s against the CPU backend's: largest relative "
                          "distance %.2e (%s: %s; cpu: %s)" % (
                              name, dtype, LOSS_BATCH, self.a.loss_steps, "every loss finite" if finite else "NOT FINITE",
                              self.a.device, distance, self.a.device, " ".join("%.4f" % v for v in ours),
                              " ".join("%.4f" % v for v in theirs)))
        self.save()

    def table(self):
        cols = ["model", "batch", "variant", "step ms", "images/s", "MFU", "device MiB", "planned / allocated MiB",
                "first step s"]
        lines = ["# %s (%s)" % (self.device_name, "amp-train --device %s, torch %s" % (self.a.device, torch_version())),
                 "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.rows:
            if "error" in r:
                lines.append("| %s | %d | %s | %s |" % (r["model"], r["batch"], r["variant"], r["error"]) + " |" * (len(cols) - 4))
                continue
            num = lambda v, f: "-" if v is None or (isinstance(v, float) and v != v) else f % v  # noqa: E731
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["batch"], r["variant"], num(r["step_ms"], "%.2f"), num(r["images_per_s"], "%.4g"),
                num(100 * r["mfu"], "%.1f%%"), num(r["device_MiB"], "%.0f"), num(r["planned_MiB"], "%.0f"),
                num(r["first_step_s"], "%.2f")))
        by = {(r["model"], r["batch"], r["variant"]): r.get("images_per_s") for r in self.rows}
        ratios = []
        for num_v, den_v in (("amp bf16", "amp fp32"), ("amp fp16", "amp fp32"), ("amp bf16", "torch autocast bf16 (CL)"),
                             ("amp bf16", "torch compile bf16 (CL)")):
            a, b = by.get(("resnet50", self.a.batch, num_v)), by.get(("resnet50", self.a.batch, den_v))
            if a and b:
                ratios.append("%s / %s: %.2fx" % (num_v, den_v, a / b))
        mem = {(r["model"], r["batch"], r["variant"]): r.get("device_MiB") for r in self.rows}
        a, b = mem.get(("resnet50", self.a.batch, "amp bf16")), mem.get(("resnet50", self.a.batch, "torch autocast bf16 (CL)"))
        if a and b:
            ratios.append("device memory amp bf16 / torch autocast bf16 (CL): %.2f" % (a / b))
        lines += ["", "resnet50 at batch %d, images/s: %s" % (self.a.batch, "; ".join(ratios) or "-"), ""]
        busy = ["%s %s at %d: %.2f of %.2f ms" % (r["model"], r["variant"], r["batch"], r["device_ms"], r["step_ms"])
                for r in self.rows if r.get("device_ms") is not None]
        if busy:  # the rest of each step is the host's: between one step's results and the next one's launch
            lines += ["device time of each amp step (the median over the timed steps; CUDA events around each run): "
                      + "; ".join(busy), ""]
        lines += self.notes
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.a.out, "scale_table.md"), "w") as f:
            f.write(text)
        print(text, flush=True)


def torch_version():
    try:
        import torch
        return torch.__version__
    except ImportError:
        return "absent"


def run(a):
    r = Run(a)
    names = [n for n in MODELS if os.path.exists(os.path.join(a.scale, n, "model.onnx"))]
    if "resnet50" not in names:
        sys.exit("bench_scale: %s has no resnet50/model.onnx (bench_scale.py prepare makes it)" % a.scale)
    if a.kernels_of:
        if a.kernels_model not in names:
            sys.exit("bench_scale: %s has no %s/model.onnx" % (a.scale, a.kernels_model))
        names = [a.kernels_model]
    for name in names:
        g = os.path.join(a.scale, name)
        if not os.path.exists(os.path.join(g, "weights.bin")):
            gpu_zoo.regenerate(g, r.meta(name))
    print("# %s: rows as they come" % r.device_name, flush=True)
    b = a.batch
    if a.kernels_of:  # the profile alone, of one amp row (when one lease has already measured the table)
        r.kernels({"model": a.kernels_model, "batch": b, "variant": "amp " + a.kernels_of})
        r.table()
        shutil.rmtree(r.tmp, ignore_errors=True)
        sys.exit(0)
    for dtype, tf32 in (("fp32", False), ("fp32", True), ("fp16", False), ("bf16", False)):
        r.amp_row("resnet50", b, dtype, tf32)
    for variant in ("torch fp32", "torch autocast fp16 (CL)", "torch autocast bf16 (CL)", "torch compile bf16 (CL)"):
        r.torch_row("resnet50", b, variant)
    settings = [env_setting(s, "--amp-env") for s in a.amp_env]
    for setting in settings:  # the same bf16 step under one setting each (AMP_CUDNN_WORKSPACE_MIB=1024, ...)
        r.amp_row("resnet50", b, "bf16", extra_env=setting)
    r.first_steps("resnet50", b, "bf16")
    for setting in settings:  # and its first steps, cold and warm
        r.first_steps("resnet50", b, "bf16", setting)
    r.losses("resnet50", "bf16")
    r.amp_row("resnet50", 2 * b, "bf16")
    r.torch_row("resnet50", 2 * b, "torch autocast bf16 (CL)")
    # efficientnet_b0's and convnext_tiny's bf16 step under a setting each
    others = [env_setting(s, "--others-env") for s in a.others_env]
    for name in names:
        if name != "resnet50":
            r.amp_row(name, b, "bf16")
            r.torch_row(name, b, "torch autocast bf16 (CL)")
            for setting in others:
                r.amp_row(name, b, "bf16", extra_env=setting)
    r.kernels()
    r.table()
    shutil.rmtree(r.tmp, ignore_errors=True)
    sys.exit(0 if all("error" not in x for x in r.rows) else 1)


def env_setting(text, option):
    """{VARIABLE: value, ...} of one --amp-env / --others-env: VARIABLE=VALUE, or several joined by
    commas (AMP_CUDNN_FIND=top,AMP_CUDNN_GRAPH_TUNE=1), one row with all of them."""
    setting = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not key or not eq:
            sys.exit("bench_scale: %s takes VARIABLE=VALUE[,VARIABLE=VALUE...], got %r" % (option, text))
        setting[key] = value
    return setting


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="phase", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("--out", required=True)
    q.add_argument("--size", type=int, default=224)
    q.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    q.add_argument("--keep-weights", action="store_true", help="keep weights.bin (to run here; it does not travel)")
    q = sub.add_parser("run")
    q.add_argument("--bin", required=True, help="the folder with amp-train")
    q.add_argument("--scale", required=True, help="prepare's --out")
    q.add_argument("--out", required=True)
    q.add_argument("--device", default="cuda")
    q.add_argument("--batch", type=int, default=128, help="the headline batch (twice it too, in bf16)")
    q.add_argument("--steps", type=int, default=12, help="timed steps per row")
    q.add_argument("--loss-steps", type=int, default=LOSS_STEPS, help="steps of the loss check at batch 8")
    q.add_argument("--budget", type=float, default=420, help="seconds; rows not started by then are not run")
    q.add_argument("--amp-env", action="append", default=[], metavar="VARIABLE=VALUE[,...]",
                   help="one more amp bf16 resnet50 row at --batch with this environment setting (several joined "
                   "by commas: one row with all), and its first steps with cold and warm caches (repeatable)")
    q.add_argument("--others-env", action="append", default=[], metavar="VARIABLE=VALUE[,...]",
                   help="one more amp bf16 row of each model but resnet50 at --batch with this environment setting "
                   "(repeatable; AMP_CUDA_CHANNELS_LAST_GROUPED=1: their depthwise convolutions channels-last)")
    q.add_argument("--kernels-of", metavar="DTYPE", help="only the kernel profile of amp-train --kernels-model at --batch "
                   "in DTYPE (fp32, fp16, bf16), no table rows")
    q.add_argument("--kernels-model", default="resnet50", choices=MODELS, help="the model --kernels-of profiles")
    a = p.parse_args()
    for k in ("out", "scale", "bin"):
        if getattr(a, k, None):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    {"prepare": prepare, "run": run}[a.phase](a)


if __name__ == "__main__":
    main()
