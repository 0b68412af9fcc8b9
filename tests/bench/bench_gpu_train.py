#!/usr/bin/env python3
"""Training-step speed on a GPU: PyTorch against this project's CUDA backend, one table.

The same three demo models (models/torch_models.py: mlp, cnn, gpt) with the same batches
(mlp 256 images, cnn 128 images, gpt 16 sequences of 32 tokens), AdamW (lr 1e-3, weight
decay 0.01) and cross entropy, trained on random in-memory data:

  torch fp32        eager, TF32 off (what "fp32" means on the amp side too)
  torch amp fp16    eager, autocast(float16) + GradScaler
  torch amp bf16    eager, autocast(bfloat16)
  torch compile     torch.compile(model) under autocast(float16) + GradScaler
  amp fp32/fp16/bf16  build/tests/bench_cuda_train_step: the step graph amp-train builds
                    (build_training_step), compiled by the cuda backend, CUDA Graph replays

Columns: median step time, samples/s (tokens/s for gpt), MFU for gpt (model FLOPs of a
step, 6 N per token + attention, nanoGPT's estimate, over the GPU's dense peak for the
precision), and peak device memory (PyTorch: max_memory_allocated; amp: plan arena +
resident state).

  python3 tests/bench/bench_gpu_train.py --build build [--steps 200] [--models gpt]
      [--bench-bin PATH] [--json FILE] [--zoo DIR]

--zoo DIR adds torchvision models: DIR/NAME/bench.onnx and meta.json from tests/zoo/gpu_zoo.py
prepare (training exports of torchvision 0.14's NAME, 10 classes, dropout 0, batch 32 of 3xSxS
images). torch builds the same architecture from this machine's torchvision (random weights,
the same dropout), both sides train with SGD (momentum 0.9, lr 0.01) on random in-memory images,
and torch compile is left out (minutes of compilation per model). Models that are not
torchvision's (gpu_zoo.py's tiny_*) are skipped.

--bench-bin names the bench_cuda_train_step executable when it is not in BUILD/tests (the GPU
session kit's, see .ci/gpu_run.sh); --json also writes the rows to FILE (rewritten after each row,
so an interrupted run keeps what it measured).

Needs a CUDA GPU, PyTorch with CUDA, and the bench_cuda_train_step target built with nvcc.
Not run on the development machine (no GPU there): its numbers are unverified.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a clear line, not a traceback
    sys.exit(f"bench_gpu_train.py needs PyTorch with CUDA: {e}")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import torch_models  # noqa: E402

BATCH = {"mlp": 256, "cnn": 128, "gpt": 16}
CONTEXT = 32  # gpt sequence length: the model's context

# Dense peaks in FLOP/s: (16-bit tensor, tf32 tensor, fp32 SIMT), from NVIDIA's data sheets.
PEAKS = {
    "H200": (989.4e12, 494.7e12, 66.9e12),
    "H100 PCIe": (756.0e12, 378.0e12, 51.2e12),
    "H100": (989.4e12, 494.7e12, 66.9e12),
    "A100": (312.0e12, 156.0e12, 19.5e12),
}


def peak_flops(precision):
    name = torch.cuda.get_device_name()
    for key, peaks in PEAKS.items():
        if key in name:
            return peaks[0] if precision in ("fp16", "bf16") else peaks[2]
    return float("nan")


def gpt_flops_per_step(model, batch):
    """nanoGPT's estimate: 6 N per token (N without the position embedding) plus attention."""
    n = sum(p.numel() for p in model.parameters()) - model.pos_emb.weight.numel()
    layers, heads = len(model.blocks), model.blocks[0].attn.n_head
    head_dim = model.blocks[0].attn.head_dim
    per_token = 6 * n + 12 * layers * heads * head_dim * CONTEXT
    return per_token * batch * CONTEXT


ZOO = {}  # name: (batch, image size), from --zoo


def zoo_models(folder):
    """{name: (batch, size)} of the torchvision models gpu_zoo.py prepared in folder."""
    import torchvision
    known = set(torchvision.models.list_models()) if hasattr(torchvision.models, "list_models") else None
    found = {}
    for name in sorted(os.listdir(folder)):
        meta = os.path.join(folder, name, "meta.json")
        if not os.path.exists(os.path.join(folder, name, "bench.onnx")) or not os.path.exists(meta):
            continue
        if known is not None and name not in known:
            print(f"{name}: not a torchvision model here, skipped", flush=True)
            continue
        with open(meta) as f:
            m = json.load(f)
        found[name] = (m["bench_batch"], m["size"])
    return found


def build_zoo(name):
    """torchvision's NAME as zoo_reference.py builds it: 10 classes, no dropout or stochastic depth."""
    import torchvision
    kw = {"num_classes": 10}
    if name in ("googlenet", "inception_v3"):
        kw.update(aux_logits=False, transform_input=False, init_weights=True)
    m = torchvision.models.get_model(name, weights=None, **kw)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout) or isinstance(mod, torchvision.ops.StochasticDepth):
            mod.p = 0.0
    return m


def batch_for(name, device):
    g = torch.Generator(device="cpu").manual_seed(1)
    if name in ZOO:
        b, size = ZOO[name]
        x = torch.randn(b, 3, size, size, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
        return x.to(device), y.to(device)
    b = BATCH[name]
    if name == "gpt":
        x = torch.randint(0, 64, (b, CONTEXT), generator=g)
        y = torch.randint(0, 64, (b, CONTEXT), generator=g)
    else:
        x = torch.rand(b, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
    return x.to(device), y.to(device)


def time_torch(name, variant, steps, warmup):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = (build_zoo(name) if name in ZOO else torch_models.build(name)).cuda().train()
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if name in ZOO
           else torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01))
    x, y = batch_for(name, "cuda")
    dtype = {"torch amp fp16": torch.float16, "torch compile": torch.float16, "torch amp bf16": torch.bfloat16}.get(variant)
    # torch.amp.GradScaler("cuda") from PyTorch 2.3 on; torch.cuda.amp's before.
    scaler = (torch.amp.GradScaler("cuda", enabled=dtype == torch.float16) if hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(enabled=dtype == torch.float16))
    forward = torch.compile(model) if variant == "torch compile" else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = forward(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    precision = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")
    flops = gpt_flops_per_step(model, BATCH[name]) if name == "gpt" else None
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**20, precision, flops


def time_amp(binary, name, steps, zoo=None):
    """Runs bench_cuda_train_step for one model; returns {precision: (seconds, MiB)}.

    A failure (crash, unparsable output, a benchmark reporting an error) is printed and gives no
    rows for that model, so that the other models are still measured."""
    # The JSON goes to a file of its own: the backend's log lines (spdlog) share stdout.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        try:
            proc = subprocess.run(
                [binary, f"--benchmark_filter=BM_{'ZooStep' if zoo else 'TrainStep'}/{name}_", f"--benchmark_out={out}",
                 "--benchmark_out_format=json", f"--benchmark_min_time={max(1, steps // 100)}"]
                + (["--zoo", zoo] if zoo else []),
                capture_output=True, text=True, env={**os.environ, "AMP_SOURCE_DIR": ROOT})
        except OSError as e:
            print(f"amp {name}: cannot run {binary}: {e}", flush=True)
            return {}
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
            print(f"amp {name}: {binary} exited with {proc.returncode}:\n{tail}", flush=True)
            return {}
        try:
            with open(out) as f:
                benchmarks = json.load(f)["benchmarks"]
        except (OSError, ValueError, KeyError) as e:
            print(f"amp {name}: unreadable {out} from {binary} ({e}):\n{proc.stdout[-2000:]}", flush=True)
            return {}
    results = {}
    for b in benchmarks:
        if b.get("error_occurred"):
            print(f"amp: {b['name']}: {b['error_message']}", flush=True)
            continue
        # "BM_TrainStep/mlp_fp16/real_time" (UseRealTime() appends "/real_time")
        precision = b["name"].split("/")[1].split("_")[-1]
        seconds = b["real_time"] / {"ms": 1e3, "us": 1e6, "ns": 1e9, "s": 1}[b["time_unit"]]
        results[precision] = (seconds, b["arena_MiB"] + b["state_MiB"])
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build folder with bench_cuda_train_step")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per PyTorch variant")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first (torch.compile compiles here)")
    ap.add_argument("--models", nargs="*", default=["mlp", "cnn", "gpt"], choices=["mlp", "cnn", "gpt"])
    ap.add_argument("--skip-amp", action="store_true", help="PyTorch rows only")
    ap.add_argument("--bench-bin", help="the bench_cuda_train_step executable (default: BUILD/tests/bench_cuda_train_step)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--zoo", help="also the torchvision models gpu_zoo.py prepared in this folder")
    ap.add_argument("--zoo-models", nargs="*", help="only these of --zoo's models")
    args = ap.parse_args()
    bench_bin = args.bench_bin or os.path.join(args.build, "tests", "bench_cuda_train_step")
    if not args.skip_amp and not os.access(bench_bin, os.X_OK):
        sys.exit(f"{bench_bin} not found: build the bench_cuda_train_step target (needs nvcc) or pass --bench-bin")
    if not torch.cuda.is_available():
        sys.exit(f"no CUDA device visible to PyTorch (torch {torch.__version__}, built for CUDA {torch.version.cuda})")

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": args.steps, "rows": []}
    if args.zoo:
        ZOO.update({n: v for n, v in zoo_models(args.zoo).items() if not args.zoo_models or n in args.zoo_models})
        BATCH.update({name: b for name, (b, _) in ZOO.items()})
    print(f"{'model':18} {'variant':16} {'step ms':>9} {'samples/s':>11} {'tokens/s':>11} {'MFU':>7} {'peak MiB':>9}")

    def row(name, variant, seconds, mib, precision, flops):
        samples = BATCH[name] / seconds
        tokens = f"{samples * CONTEXT:11.0f}" if name == "gpt" else f"{'':11}"
        mfu = f"{100 * flops / seconds / peak_flops(precision):6.2f}%" if flops else f"{'':7}"
        print(f"{name:18} {variant:16} {1e3 * seconds:9.3f} {samples:11.0f} {tokens} {mfu} {mib:9.1f}", flush=True)
        if args.json:
            report["rows"].append({"model": name, "variant": variant, "step_ms": 1e3 * seconds, "samples_per_s": samples,
                                   "tokens_per_s": samples * CONTEXT if name == "gpt" else None,
                                   "mfu": flops / seconds / peak_flops(precision) if flops and not math.isnan(peak_flops(precision)) else None,
                                   "peak_MiB": mib})
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)

    for name in args.models + list(ZOO):
        flops = None
        variants = ("torch fp32", "torch amp fp16", "torch amp bf16") + (() if name in ZOO else ("torch compile",))
        for variant in variants:
            try:
                seconds, mib, precision, flops = time_torch(name, variant, args.steps, args.warmup)
            except Exception as e:  # e.g. torch.compile without a working compiler: the other rows still count
                print(f"{name:18} {variant:16} failed: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                      flush=True)
                continue
            row(name, variant, seconds, mib, precision, flops)
        if not args.skip_amp:
            zoo = args.zoo if name in ZOO else None
            for precision, (seconds, mib) in sorted(time_amp(bench_bin, name, args.steps, zoo).items()):
                row(name, f"amp {precision}", seconds, mib, precision, flops)


if __name__ == "__main__":
    main()
