#!/usr/bin/env python3
"""Where a training step's GPU time goes, kernel by kernel, from Nsight Compute (ncu).

  python3 .ci/kernel_times.py --bin KIT_BIN --models models --data DIR [--configs cnn:fp32,cnn:fp16]
      [--ld-library-path LDP] [--out FILE]

For each model:dtype it runs `amp-train --device cuda` twice under
`ncu --metrics gpu__time_duration.sum` (--steps 2 and --steps 6, CUDA Graphs off so that every
kernel launch is its own record) and takes the difference over 4: what one steady training step
launches, without the set-up (probes, cuDNN's algorithm tries, the first step's uploads). The
convolutions run cuDNN's heuristic choices (AMP_CUDNN_FIND=0) unless --find: under ncu cuDNN's
own timing of the algorithms is distorted. Prints,
per configuration, the kernels by total time a step (calls a step, microseconds a step, share), and
writes the same to --out. Each kernel runs alone under ncu (serialised, clocks left alone:
--clock-control none), so the total is the sum of kernel times, not the step's wall time.

DIR holds img.npz (input [N,1,28,28], labels) and tok.npz (tokens, labels), as .ci/gpu_run.sh's
smoke step writes them. With --zoo ZOO, a configuration zoo/NAME:dtype profiles ZOO/NAME/bench.onnx
(tests/zoo/gpu_zoo.py prepare: a torchvision model's training export at batch 32) on 32 of
ZOO/NAME/data.npz's samples drawn with replacement, with SGD (momentum 0.9, lr 0.01) and, for fp16,
the model's static loss scale (meta.json), as the zoo trains it. Run by .ci/gpu_run.sh on the GPU
machine; needs ncu (Nsight Compute).
"""
import argparse
import collections
import csv
import glob
import io
import os
import shutil
import subprocess
import sys
import tempfile

RUNS = {  # model -> (data file, batch)
    "mlp": ("img.npz", 256),
    "cnn": ("img.npz", 128),
    "gpt": ("tok.npz", 16),
}
FEW, MANY = 2, 6


def find_ncu():
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def kernel_sums(ncu, cmd, tmp, tag, find, timeout=None, env=None):
    """{kernel name: (launches, total ns)} of one profiled run (RuntimeError past timeout seconds);
    env: variables set for this run beside the process's own."""
    log = os.path.join(tmp, tag + ".csv")
    # cuDNN's measured ranking (AMP_CUDNN_FIND) would time algorithms with ncu's per-kernel cost
    # added and may choose otherwise than a run without ncu: the profile is of the heuristic's
    # order unless --find (or AMP_CUDNN_FIND in the environment) says otherwise.
    env = {"AMP_CUDNN_FIND": "1" if find else "0", **os.environ, **(env or {}), "AMP_CUDA_GRAPHS": "0"}
    try:
        proc = subprocess.run([ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
                               "--print-units", "base", "--log-file", log] + cmd,
                              capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"amp-train ({tag}) under ncu did not end within {timeout:.0f} s")
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"amp-train ({tag}) under ncu exited with {proc.returncode}:\n{tail}")
    with open(log) as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise RuntimeError(f"no CSV table in ncu's log {log}: " + " | ".join(lines[-5:]))
    sums = collections.defaultdict(lambda: [0, 0.0])
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        entry = sums[row["Kernel Name"]]
        entry[0] += 1
        entry[1] += float(row["Metric Value"].replace(",", ""))
    return sums


def zoo_run(args, name, dtype, tmp):
    """(model file, data file, batch, training options) of a zoo/NAME configuration."""
    import json
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "zoo"))
    import gpu_zoo  # numpy alone
    folder = os.path.join(args.zoo, name)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    batch = meta["bench_batch"]
    data = os.path.join(tmp, name + ".npz")
    gpu_zoo.resample(os.path.join(folder, "data.npz"), batch, data)
    options = ["--momentum", "0.9", "--lr", "0.01"]
    if dtype == "fp16":
        options += ["--loss-scale", str(meta["fp16_scale"])]
    return os.path.join(folder, "bench.onnx"), data, batch, options


def per_step(ncu, args, model, dtype, tmp):
    if model.startswith("zoo/"):
        if not args.zoo:
            raise RuntimeError("%s needs --zoo" % model)
        path, data, batch, options = zoo_run(args, model[4:], dtype, tmp)
    else:
        data, batch = RUNS[model]
        path, data = os.path.join(args.models, model + ".train.onnx"), os.path.join(args.data, data)
        options = ["--optimizer", "adamw", "--lr", "0.001"]
    runs = []
    for steps in (FEW, MANY):
        cmd = (["env", "LD_LIBRARY_PATH=" + args.ld_library_path] if args.ld_library_path else []) + [
               os.path.join(args.bin, "amp-train"), path, "--data", data, "--loss", "cross_entropy", "--steps",
               str(steps), "--batch-size", str(batch), "--no-shuffle", "--seed", "0", "--dtype", dtype,
               "--device", "cuda"] + options
        runs.append(kernel_sums(ncu, cmd, tmp, f"{model}.{dtype}.{steps}", args.find))
    return step_rows(*runs, MANY - FEW)


def step_rows(few, many, steps):
    """(ns, calls, kernel) of one step, largest first: two runs' kernel_sums that differ by `steps`
    steps, subtracted (what runs once, planning and the first step's setup, cancels)."""
    rows = []
    for name in set(few) | set(many):
        calls = (many.get(name, [0, 0.0])[0] - few.get(name, [0, 0.0])[0]) / steps
        ns = (many.get(name, [0, 0.0])[1] - few.get(name, [0, 0.0])[1]) / steps
        if calls > 0:
            rows.append((ns, calls, name))
    rows.sort(reverse=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder with amp-train")
    ap.add_argument("--models", required=True, help="the repository's models/ folder")
    ap.add_argument("--data", required=True, help="folder with img.npz and tok.npz")
    ap.add_argument("--zoo", help="tests/zoo/gpu_zoo.py prepare's folder, for zoo/NAME configurations")
    ap.add_argument("--configs", default="cnn:fp32,cnn:fp16,cnn:bf16,gpt:fp32,gpt:bf16",
                    help="comma-separated model:dtype (models: mlp, cnn, gpt, zoo/NAME; dtypes: fp32, fp16, bf16)")
    ap.add_argument("--ld-library-path", help="LD_LIBRARY_PATH for amp-train alone (not for ncu)")
    ap.add_argument("--find", action="store_true",
                    help="let cuDNN measure the convolution algorithms under ncu (default: the heuristic's order)")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per configuration")
    ap.add_argument("--out", help="also write the tables to this file")
    args = ap.parse_args()
    ncu = find_ncu()
    if not ncu:
        sys.exit("kernel_times.py: ncu (Nsight Compute) not found on PATH, in /usr/local/cuda*/bin or /opt/nvidia")
    order = "measured" if args.find or os.environ.get("AMP_CUDNN_FIND", "0") != "0" else "the heuristic's order"
    text = [f"# GPU time of one training step by kernel (ncu {ncu}; steps {MANY} minus steps {FEW}, over {MANY - FEW}; "
            f"convolution algorithms: {order})"]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs.split(","):
            model, dtype = config.split(":")
            try:
                rows = per_step(ncu, args, model, dtype, tmp)
            except (RuntimeError, OSError) as e:
                text.append(f"{model} {dtype}: FAILED: {e}")
                failed = True
                print(text[-1], flush=True)
                continue
            total = sum(ns for ns, _, _ in rows)
            calls = sum(c for _, c, _ in rows)
            block = [f"{model} {dtype}: {total / 1e3:.1f} us of kernels a step, {calls:.0f} launches"]
            for ns, c, name in rows[:args.top]:
                block.append(f"  {ns / 1e3:9.1f} us {100 * ns / max(total, 1):5.1f}%  {c:5.1f}x  {name[:110]}")
            text.extend(block)
            print("\n".join(block), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(text) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
