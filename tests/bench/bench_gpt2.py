#!/usr/bin/env python3
"""GPT-2-small at T = 1024 on a GPU (issue 29): amp-train's bf16 and fp16 AdamW step against
PyTorch's eager autocast bf16 of the same module with scaled_dot_product_attention, and against
torch.compile of it, in one table. Two phases, because the GPU machine has no torch 1.13 exporter:

  prepare (here)  /usr/bin/python3 tests/bench/bench_gpt2.py prepare --out .gpu-gpt2 [--cpu-bin build]
      exports models/torch_models.py's GPT at GPT-2 small's sizes (12 layers, 768 wide, 12 heads,
      MLP 3072, vocabulary 50257, context 1024; its head untied: 163M parameters) in eval mode (it
      has no dropout), N and T symbolic, into OUT/model.onnx, its float parameters pointing into
      weights.bin, which does not travel: drawn from a seed with each tensor's initial mean and
      spread (tests/zoo/gpu_zoo.py draw_weights), again on the GPU machine, and checked there by
      SHA-256. meta.json keeps the draw, the module's sizes, which torch parameter each initializer
      is (the exporter folds Linear's transpose: PyTorch gets the same weights), and the loss
      check's batches (batch 1 x 256 tokens, 10 steps; tokens drawn from the seed). With --cpu-bin
      BUILD, the CPU backend's bf16 losses of that check are computed here, once (amp-train
      --device cpu on the drawn weights), and travel in meta.json: the device's lease is not spent
      on a CPU run.
  run (GPU)       python3 tests/bench/bench_gpt2.py run --bin KIT_BIN --gpt2 DIR --out OUT
                  [--device cuda] [--budget SECONDS]
      needs numpy and PyTorch (with CUDA for --device cuda). Rows at T = 1024 (--seq), the headline
      batch 16 first, then batch 8 (--batches):
        amp bf16 / amp fp16               amp-train --device cuda --optimizer adamw (lr 1e-4)
        torch autocast bf16 (sdpa)        eager, torch.autocast bf16, F.scaled_dot_product_attention
                                          (is_causal), fused AdamW, fp32 weights, TF32 off (a torch
                                          without sdpa, 1.13 here: the module's masked softmax, said)
        torch compile bf16 (sdpa)         torch.compile of the same module
      Columns: step ms (the median of --steps steps after the first and two more, as in
      bench_scale.py; amp-train's mean of every step after its first in the JSON), tokens/s, MFU
      (6 N + 12 L H d T FLOPs per token, N the parameters outside the two embedding tables; against
      the device's dense 16-bit peak, 989 TFLOP/s on an H100 SXM or H200), peak device memory
      (amp: cudaMemGetInfo polled every 20 ms while amp-train ran, beyond what the device held
      before, its CUDA context included; beside it amp-train's own state + arena; torch:
      max_memory_allocated, and max_memory_reserved beside), first step seconds. Then: the loss
      check (10 steps at 1 x 256 of amp-train --device cuda bf16 against the CPU backend's bf16 on
      the same weights and batches: every loss finite, the largest relative distance); where each
      amp bf16 row's second step went, unit by unit (the amp rows run with AMP_CUDA_UNIT_TIMES=2:
      .ci/unit_times.py; every unit in OUT/gpt2_logs/units_*.tsv); the
      kernels of amp bf16 at batch 8 under ncu (.ci/kernel_times.py's method, steps 2 and 1:
      one step's kernels); the device report of the amp rows (which attention unit ran, cuDNN's
      refusals: AMP_CUDA_REPORT, OUT/device_report/). Rows not reached within --budget are listed
      as such. Each command's output is kept in OUT/gpt2_logs/, OUT/gpt2.json holds the rows as
      they come, and the table (OUT/gpt2_table.md) is written last.

--device cpu with prepare's --tiny sizes runs the whole pipeline on the CPU, without PyTorch's CUDA,
memory polling or ncu: what tests/bench/bench_gpt2_pipeline.sh checks here.
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
import bench_scale  # noqa: E402  (numpy alone at import; its Run keeps the commands, logs and memory polling)
from bench_scale import gpu_zoo  # noqa: E402

# GPT-2's GELU is the tanh approximation (its gelu_new; llm.c's too), which cuBLASLt's epilogues
# compute with the fc product's bias forward (GELU_AUX_BIAS) and its gradient backward (DGELU).
GPT2_SMALL = dict(vocab=50257, ctx=1024, n_layer=12, n_head=12, d_model=768, d_hidden=3072, gelu="tanh")
TINY = dict(vocab=512, ctx=64, n_layer=2, n_head=4, d_model=64, d_hidden=256, gelu="tanh")  # the CPU pipeline check
SEED = 29
LOSS_BATCH, LOSS_SEQ, LOSS_STEPS = 1, 256, 10
LR = 1e-4


def build(sizes):
    """torch_models.GPT at these sizes, LayerNorm's ones and zeros drawn apart (the eval exporter
    merges equal-valued initializers, which would tie the layers' norms in the export)."""
    import torch
    import torch_models
    torch.manual_seed(SEED)
    m = torch_models.GPT(**sizes)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


def use_sdpa(model):
    """The module's attention through F.scaled_dot_product_attention (PyTorch's fused kernels),
    is_causal in place of the masked fill; False where this torch has none (1.13)."""
    import torch.nn.functional as F
    if not hasattr(F, "scaled_dot_product_attention"):
        return False

    def forward(self, x, hide):
        n, t = x.shape[0], x.shape[1]
        c, h, hd = self.d_model, self.n_head, self.head_dim
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(n, t, h, hd).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(n, t, c))
    for block in model.blocks:
        block.attn.forward = forward.__get__(block.attn, type(block.attn))
    return True


def flops_per_token(sizes, params, seq):
    """6 N + 12 L H d T (PaLM's appendix B): N the parameters that multiply (all but the two
    embedding tables, which are looked up), the attention's two products forward and backward."""
    embeddings = sizes["vocab"] * sizes["d_model"] + sizes["ctx"] * sizes["d_model"]
    return 6 * (params - embeddings) + 12 * sizes["n_layer"] * sizes["d_model"] * seq


def tokens(seed, batch, seq, vocab):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, vocab, size=(batch, seq + 1)).astype(np.int64)
    return t[:, :-1], t[:, 1:]


# --- prepare (here) ----------------------------------------------------------------------------

def parameter_map(model, proto):
    """{initializer name: [parameter name, transposed]} by value: the exporter names the folded
    Linear weights onnx::MatMul_N and stores them transposed."""
    from onnx import numpy_helper
    params = {k: v.detach().numpy() for k, v in model.state_dict().items() if v.dtype.is_floating_point}

    def same(p, v):  # a few elements first: most candidates of one shape differ there
        return p.shape == v.shape and np.array_equal(p.flat[:8], v.flat[:8]) and np.array_equal(p, v)
    out = {}
    for t in proto.graph.initializer:
        if t.data_type != 1:
            continue
        v = numpy_helper.to_array(t)
        hit = next(([k, False] for k, p in params.items() if same(p, v)), None)
        if hit is None and v.ndim == 2:
            hit = next(([k, True] for k, p in params.items() if same(p, np.ascontiguousarray(v.T))), None)
        if hit is None:
            sys.exit("bench_gpt2: initializer %s is none of the module's parameters" % t.name)
        out[t.name] = hit
    missing = set(k for k in params if "causal_mask" not in k) - set(k for k, _ in out.values())
    if missing:
        sys.exit("bench_gpt2: parameters without an initializer: %s" % ", ".join(sorted(missing)))
    return out


def prepare(a):
    import onnx
    import torch
    from onnx import numpy_helper
    sizes = dict(TINY if a.tiny else GPT2_SMALL)
    os.makedirs(a.out, exist_ok=True)
    for f in ("model.onnx", "weights.bin", "meta.json", "loss.npz"):
        if os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    model = build(sizes).eval()
    raw = os.path.join(a.out, "export.onnx")
    example = torch.zeros(2, min(16, sizes["ctx"]), dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(model, (example,), raw, export_params=True, opset_version=17,
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True,
                          input_names=["tokens"], output_names=["logits"],
                          dynamic_axes={"tokens": {0: "N", 1: "T"}, "logits": {0: "N", 1: "T"}})
    m = onnx.load(raw)
    for f in os.listdir(a.out):  # export.onnx and the exporter's own external files (models over 2 GB), if any
        os.remove(os.path.join(a.out, f))
    where = parameter_map(model, m)
    params = sum(p.numel() for p in model.parameters())
    specs = []
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            v = numpy_helper.to_array(t)
            specs.append([t.name, list(v.shape), float(v.mean()), float(v.std())])
    del model
    placed, digest = gpu_zoo.write_weights(gpu_zoo.draw_weights(specs, SEED), [s[0] for s in specs],
                                           os.path.join(a.out, "weights.bin"))
    gpu_zoo.point_at(m, placed, "weights.bin")
    onnx.save_model(m, os.path.join(a.out, "model.onnx"))
    loss_seq = min(LOSS_SEQ, sizes["ctx"])
    x, y = tokens(SEED + 1, LOSS_BATCH * a.loss_steps, loss_seq, sizes["vocab"])
    np.savez(os.path.join(a.out, "loss.npz"), tokens=x, labels=y)
    meta = {"sizes": sizes, "params": params, "drawn": {"seed": SEED, "specs": specs, "sha256": digest},
            "torch_names": where, "loss": {"batch": LOSS_BATCH, "seq": loss_seq, "steps": a.loss_steps}}
    if a.cpu_bin:
        metrics = os.path.join(a.out, "cpu_losses.jsonl")
        cmd = amp_train_cmd(a.cpu_bin, a.out, os.path.join(a.out, "loss.npz"), LOSS_BATCH, "bf16", a.loss_steps, "cpu",
                            ["--metrics", metrics])
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("bench_gpt2: the CPU loss run failed:\n%s" % (p.stdout + p.stderr)[-2000:])
        with open(metrics) as f:
            meta["loss"]["cpu_bf16"] = [json.loads(l)["loss"] for l in f if '"loss"' in l]
        os.remove(metrics)
        print("cpu bf16 losses (%.0f s): %s" % (time.time() - t, " ".join("%.4f" % v for v in meta["loss"]["cpu_bf16"])))
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f)
    if not a.keep_weights:
        os.remove(os.path.join(a.out, "weights.bin"))
    print("%s: %.1fM parameters, %.0f MFLOP per token trained at T = %d (%.1f MiB to carry)" % (
        a.out, params / 1e6, flops_per_token(sizes, params, sizes["ctx"]) / 1e6, sizes["ctx"],
        sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out)) / 2**20), flush=True)


def amp_train_cmd(bin_dir, gpt2, data, batch, dtype, steps, device, extra=()):
    return [os.path.join(bin_dir, "amp-train"), os.path.join(gpt2, "model.onnx"), "--data", data, "--loss",
            "cross_entropy", "--optimizer", "adamw", "--lr", str(LR), "--steps", str(steps), "--batch-size", str(batch),
            "--no-shuffle", "--seed", "0", "--dtype", dtype, "--device", device] + list(extra)


# --- run (on the GPU machine) --------------------------------------------------------------------

class Run(bench_scale.Run):
    """bench_scale's runner (budget, logged commands, device memory polling, rows as they come)
    with GPT-2's rows, loss check, kernel profile and table."""

    def __init__(self, a):
        a.scale = a.gpt2  # where bench_scale.Run reads meta.json from: meta("")
        super().__init__(a)
        with contextlib.suppress(OSError):
            os.rmdir(self.logs)  # bench_scale's folder, empty
        self.logs = os.path.join(a.out, "gpt2_logs")
        os.makedirs(self.logs, exist_ok=True)
        self.m = self.meta("")
        self.sizes = self.m["sizes"]
        self.reports = os.path.join(a.out, "device_report")

    def save(self):
        """The rows so far, as JSON and as the table: a step killed at its deadline leaves both."""
        with open(os.path.join(self.a.out, "gpt2.json"), "w") as f:
            json.dump({"device": self.device_name, "rows": self.rows, "notes": self.notes}, f, indent=1)
        self.table(quiet=True)

    def data(self, name, batch):
        """A .npz of 2 batches of random tokens at --seq (made once per batch)."""
        path = os.path.join(self.tmp, "tokens_%d.npz" % batch)
        if not os.path.exists(path):
            x, y = tokens(batch, 2 * batch, self.a.seq, self.sizes["vocab"])
            np.savez(path, tokens=x, labels=y)
        return path

    def flops(self):
        return flops_per_token(self.sizes, self.m["params"], self.a.seq)

    def amp_row(self, name, batch, dtype, tf32=False, extra_env=None):
        """extra_env: {VARIABLE: value} for this row alone (--amp-env), named in its label."""
        label = "amp %s" % dtype + "".join(" (%s=%s)" % kv for kv in (extra_env or {}).items())
        if self.left() < 30:
            return self.row(batch=batch, variant=label, error="not run: the time budget is spent")
        tag = "amp_%d_%s" % (batch, dtype) + "".join("_%s_%s" % kv for kv in (extra_env or {}).items())
        os.makedirs(self.reports, exist_ok=True)
        metrics = os.path.join(self.logs, tag + ".metrics.jsonl")
        cmd = amp_train_cmd(self.a.bin, self.a.gpt2, self.data(name, batch), batch, dtype, self.amp_steps(), self.a.device,
                            ["--metrics", metrics])
        # The device report, with the second step timed unit by unit (a warm-up step, not timed here).
        rc, out, held = self.command(tag, cmd, {"AMP_KERNEL_CACHE_DIR": self.cache, "AMP_CUDA_UNIT_TIMES": "2",
                                                "AMP_CUDA_REPORT": os.path.join(self.reports, "gpt2.%s.jsonl" % tag),
                                                **(extra_env or {})})
        got = re.search(r"([\d.]+) ms/step \(the first ([\d.]+) s.*backend state \+ arena ([\d.]+) MiB", out)
        timed = self.steady_ms(metrics, batch) if rc == 0 and got else None
        if not timed:
            return self.row(batch=batch, variant=label, error=gpu_zoo.zoo_check.last_error(out))
        first, planned = float(got.group(2)), float(got.group(3))
        self.timed_row(batch, label, timed[0], first, held if self.cuda else None, planned, mean_ms=timed[1],
                       device_ms=timed[2])

    def timed_row(self, batch, label, ms, first, device_mib, second_mib, **more):
        per_s = batch * self.a.seq / (ms / 1e3)
        self.row(batch=batch, variant=label, step_ms=ms, tokens_per_s=per_s, mfu=per_s * self.flops() / self.peaks[0],
                 device_MiB=device_mib, second_MiB=second_mib, first_step_s=first, **more)

    def torch_row(self, name, batch, variant):
        # torch.compile's first step compiles the forward and backward: about a minute on an H100.
        if self.left() < (150 if "compile" in variant else 30):
            return self.row(batch=batch, variant=variant, error="not run: the time budget is spent")
        import torch
        import torch.nn.functional as F
        device = "cuda" if self.cuda else "cpu"
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        model = opt = forward = None
        try:
            model = build(self.sizes)
            self.load_drawn(model)
            model = model.to(device).train()
            variant += " (sdpa)" if use_sdpa(model) else " (masked softmax: torch %s has no sdpa)" % torch.__version__
            d = np.load(self.data(name, batch))
            x, y = (torch.from_numpy(d[k][:batch]).to(device) for k in ("tokens", "labels"))
            opt = torch.optim.AdamW(model.parameters(), lr=LR, **({"fused": True} if self.cuda else {}))
            forward = torch.compile(model) if "compile" in variant else model
            vocab = self.sizes["vocab"]

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device, dtype=torch.bfloat16):
                    logits = forward(x)
                loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
                loss.backward()
                opt.step()

            first, ms = self.timed_steps(torch, step, warmup=bench_scale.WARMUP)
            r = None
        except Exception as e:  # torch.compile without a compiler, out of memory: the other rows still count
            r = dict(batch=batch, variant=variant, error="%s: %s" % (type(e).__name__, str(e).strip()[:200]))
        model = opt = forward = None  # noqa: F841  (the next row's memory is its own)
        if r is None:
            self.timed_row(batch, variant, ms, first, torch.cuda.max_memory_allocated() / 2**20 if self.cuda else None,
                           torch.cuda.max_memory_reserved() / 2**20 if self.cuda else None)
        else:
            self.row(**r)
        if self.cuda:
            torch.cuda.empty_cache()
        if "compile" in variant and hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
        with open(os.path.join(self.logs, "torch_%d_%s.log" % (batch, variant.split(",")[0].replace(" ", "_"))), "w") as f:
            json.dump(self.rows[-1], f)

    def load_drawn(self, model):
        """The drawn weights (weights.bin, as amp-train reads them) into the module's parameters."""
        import torch
        drawn = self.m["drawn"]
        arrays = gpu_zoo.draw_weights(drawn["specs"], drawn["seed"])
        state = model.state_dict()
        with torch.no_grad():
            for onnx_name, (param, transposed) in self.m["torch_names"].items():
                v = arrays[onnx_name].T if transposed else arrays[onnx_name]
                state[param].copy_(torch.from_numpy(np.ascontiguousarray(v)))

    def losses(self, name, dtype):
        """The loss check's steps at 1 x 256 on the device against the CPU backend's (prepare's, or
        run here when prepare made none): finite, and how far apart."""
        spec = self.m["loss"]
        data = os.path.join(self.a.gpt2, "loss.npz")
        prepared = spec.get("cpu_bf16")
        runs = [("ours", self.a.device)] + ([] if prepared else [("cpu", "cpu")])
        got = {}
        for who, device in runs:
            if self.left() < 20:
                self.notes.append("loss check %s: not run, the time budget is spent" % device)
                return
            metrics = os.path.join(self.tmp, "loss_%s.jsonl" % who)
            cmd = amp_train_cmd(self.a.bin, self.a.gpt2, data, spec["batch"], dtype, spec["steps"], device,
                                ["--metrics", metrics])
            rc, out, _ = self.command("loss_%s_%s" % (dtype, who), cmd,
                                      {"AMP_CUDA_REPORT": os.path.join(self.reports, "gpt2.loss_%s.jsonl" % device)}
                                      if device == "cuda" else None)
            if rc != 0:
                self.notes.append("loss check on %s: FAILED: %s" % (device, gpu_zoo.zoo_check.last_error(out)))
                return
            with open(metrics) as f:
                got[who] = [json.loads(l)["loss"] for l in f if '"loss"' in l]
        ours = got["ours"]
        theirs = prepared or got["cpu"]
        where = "prepare's" if prepared else "this run's"
        finite = len(ours) == spec["steps"] and all(np.isfinite(ours))
        distance = max(abs(p - q) / abs(q) for p, q in zip(ours, theirs)) if len(ours) == len(theirs) else float("nan")
        self.notes.append("loss check, %s at batch %d x %d tokens, %d steps: %s; against the CPU backend's (%s): largest "
                          "relative distance %.2e (%s: %s; the CPU's: %s)" % (
                              dtype, spec["batch"], spec["seq"], spec["steps"], "every loss finite" if finite else
                              "NOT FINITE", where, distance, self.a.device, " ".join("%.4f" % v for v in ours),
                              " ".join("%.4f" % v for v in theirs)))
        self.save()

    def unit_profiles(self):
        """Where each amp bf16 row's second step went, unit by unit (its device report's unit
        times, .ci/unit_times.py); every unit in gpt2_logs/units_*.tsv."""
        import unit_times
        for b in sorted(self.a.batches, reverse=True):
            report = os.path.join(self.reports, "gpt2.amp_%d_bf16.jsonl" % b)
            found = unit_times.runs(report) if self.cuda and os.path.exists(report) else []
            if not found:
                continue
            totals, units = max(found, key=lambda f: len(f[1]))
            lines = unit_times.summary(totals, units, top=20)
            lines[0] = "amp bf16 at batch %d x %d, %s" % (b, self.a.seq, lines[0])
            self.notes.append("\n".join(lines))
            unit_times.write_tsv(units, os.path.join(self.logs, "units_amp_bf16_%d.tsv" % b))
        self.save()

    def kernels(self):
        """amp bf16 at the smallest batch under ncu: steps 2 minus steps 1 (one step's kernels)."""
        import kernel_times
        ncu = kernel_times.find_ncu()
        batch = min(self.a.batches)
        if not ncu or not self.cuda or self.left() < 60:
            self.notes.append("kernel profile: not run (%s)" % ("no ncu" if not ncu else "no GPU" if not self.cuda
                                                                 else "the time budget is spent"))
            return
        runs = []
        try:
            for steps in (1, 2):
                cmd = amp_train_cmd(self.a.bin, self.a.gpt2, self.data("", batch), batch, "bf16", steps, self.a.device)
                runs.append(kernel_times.kernel_sums(ncu, cmd, self.tmp, "ncu_%d" % steps, False))
        except (RuntimeError, OSError) as e:
            self.notes.append("kernel profile: FAILED: %s" % str(e)[:300])
            return
        rows = kernel_times.step_rows(*runs, 1)
        total = sum(ns for ns, _, _ in rows)
        lines = ["kernels of amp bf16 at batch %d x %d (ncu, one step: 2 steps minus 1): %.1f ms of kernels" % (
            batch, self.a.seq, total / 1e6)]
        lines += ["  %9.1f us %5.1f%% %6.0fx  %s" % (ns / 1e3, 100 * ns / max(total, 1), c, k[:100]) for ns, c, k in rows[:20]]
        self.notes.append("\n".join(lines))
        # Every kernel, full names, in gpt2_logs/ (more.tar.xz): the note keeps the first 20.
        with open(os.path.join(self.logs, "kernels_amp_bf16_%d.tsv" % batch), "w") as f:
            f.write("us a step\tcalls a step\tkernel\n")
            f.writelines("%.1f\t%.0f\t%s\n" % (ns / 1e3, c, k) for ns, c, k in rows)
        self.save()

    def attention_units(self):
        """What the device report says ran for attention (cuDNN's fused unit, or the fallback and why)."""
        seen = {}
        for f in sorted(os.listdir(self.reports)) if os.path.isdir(self.reports) else []:
            with open(os.path.join(self.reports, f)) as fh:
                for line in fh:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if "attention" in e.get("event", ""):
                        key = " ".join("%s=%s" % (k, v) for k, v in e.items() if k not in ("unit",))
                        seen[key] = seen.get(key, 0) + 1
        self.notes.append("attention units (device report): " + ("; ".join("%s (x%d)" % kv for kv in sorted(seen.items()))
                                                                  or "none recorded"))

    def table(self, quiet=False):
        s = self.sizes
        cols = ["batch", "variant", "step ms", "tokens/s", "MFU", "device MiB", "planned / reserved MiB", "first step s"]
        lines = ["# GPT-2 (%d layers, %d wide, %d heads, vocabulary %d, %.1fM parameters) at T = %d on %s" % (
            s["n_layer"], s["d_model"], s["n_head"], s["vocab"], self.m["params"] / 1e6, self.a.seq, self.device_name),
            "", "amp-train --device %s, torch %s; %.0f MFLOP per token (6N + 12LHdT) against %.0f TFLOP/s; device MiB: "
            "amp cudaMemGetInfo beyond the start (planned: its state + arena), torch max_memory_allocated (reserved)" % (
                self.a.device, bench_scale.torch_version(), self.flops() / 1e6, self.peaks[0] / 1e12),
            "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        num = lambda v, f: "-" if v is None or (isinstance(v, float) and v != v) else f % v  # noqa: E731
        for r in self.rows:
            if "error" in r:
                lines.append("| %d | %s | %s |" % (r["batch"], r["variant"], r["error"]) + " |" * (len(cols) - 3))
                continue
            lines.append("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
                r["batch"], r["variant"], num(r["step_ms"], "%.1f"), num(r["tokens_per_s"], "%.0f"),
                num(100 * r["mfu"], "%.1f%%"), num(r["device_MiB"], "%.0f"), num(r["second_MiB"], "%.0f"),
                num(r["first_step_s"], "%.2f")))
        done = [r for r in self.rows if "error" not in r]
        ratios = []
        for b in self.a.batches:
            amp = next((r for r in done if r["batch"] == b and r["variant"] == "amp bf16"), None)
            peers = [next((r for r in done if r["batch"] == b and r["variant"].startswith(p)), None)
                     for p in ("torch autocast bf16", "torch compile bf16")]
            for peer in peers:
                if amp and peer:
                    ratios.append("batch %d, amp bf16 / %s: %.2fx tokens/s" % (b, peer["variant"], amp["tokens_per_s"] /
                                                                               peer["tokens_per_s"]))
            if amp and peers[0] and amp["device_MiB"] and peers[0]["device_MiB"]:
                ratios.append("batch %d, device memory amp bf16 / %s: %.2f" % (
                    b, peers[0]["variant"], amp["device_MiB"] / peers[0]["device_MiB"]))
            if amp and amp.get("device_ms") is not None:  # the rest of the step is the host's
                ratios.append("batch %d, amp bf16: the device worked %.1f of the step's %.1f ms (CUDA events around each "
                              "run, the median over the timed steps)" % (b, amp["device_ms"], amp["step_ms"]))
        lines += [""] + ["- " + r for r in ratios] + [""] + self.notes
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.a.out, "gpt2_table.md"), "w") as f:
            f.write(text)
        if not quiet:
            print(text, flush=True)


def run(a):
    if not os.path.exists(os.path.join(a.gpt2, "model.onnx")):
        sys.exit("bench_gpt2: %s has no model.onnx (bench_gpt2.py prepare makes it)" % a.gpt2)
    r = Run(a)
    if not os.path.exists(os.path.join(a.gpt2, "weights.bin")):
        gpu_zoo.regenerate(a.gpt2, r.m)
    print("# %s: rows as they come" % r.device_name, flush=True)
    settings = [bench_scale.env_setting(s, "--amp-env") for s in a.amp_env]
    for b in sorted(a.batches, reverse=True):  # the headline batch first: what a short budget keeps
        r.amp_row("", b, "bf16")
        r.torch_row("", b, "torch autocast bf16")
        r.torch_row("", b, "torch compile bf16")
        r.amp_row("", b, "fp16")
        if b == max(a.batches):
            for setting in settings:  # the headline bf16 row under one setting each
                r.amp_row("", b, "bf16", extra_env=setting)
    r.losses("", "bf16")
    r.attention_units()
    r.unit_profiles()
    r.kernels()
    r.table()
    shutil.rmtree(r.tmp, ignore_errors=True)
    sys.exit(0 if all("error" not in x or "compile" in x["variant"] and not r.cuda for x in r.rows) else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="phase", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("--out", required=True)
    q.add_argument("--tiny", action="store_true", help="2 layers, 64 wide, vocabulary 512, context 64 (the CPU check)")
    q.add_argument("--cpu-bin", help="a build with amp-train: the CPU backend's bf16 losses of the loss check, made here")
    q.add_argument("--loss-steps", type=int, default=LOSS_STEPS)
    q.add_argument("--keep-weights", action="store_true", help="keep weights.bin (to run here; it does not travel)")
    q = sub.add_parser("run")
    q.add_argument("--bin", required=True, help="the folder with amp-train")
    q.add_argument("--gpt2", required=True, help="prepare's --out")
    q.add_argument("--out", required=True)
    q.add_argument("--device", default="cuda")
    q.add_argument("--seq", type=int, default=1024, help="tokens per sample (T)")
    q.add_argument("--batches", type=int, nargs="+", default=[8, 16])
    q.add_argument("--steps", type=int, default=10, help="timed steps per row")
    q.add_argument("--budget", type=float, default=400, help="seconds; rows not started by then are not run")
    q.add_argument("--amp-env", action="append", default=[], metavar="VARIABLE=VALUE[,...]",
                   help="one more amp bf16 row at the largest batch with this environment setting (several joined "
                   "by commas: one row with all; repeatable), e.g. AMP_CUDA_DGELU_BGRAD=1")
    a = p.parse_args()
    for k in ("out", "gpt2", "bin", "cpu_bin"):
        if getattr(a, k, None):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    {"prepare": prepare, "run": run}[a.phase](a)


if __name__ == "__main__":
    main()
