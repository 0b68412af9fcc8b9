#!/usr/bin/python3
"""ONNX models from every exporter through ONNX Runtime, amp-run and amp-rewrite.

    /usr/bin/python3 tests/corpus/corpus_check.py --build BUILD [--work DIR] [--corpus DIR ...]
        [--project] [--zoo NAME ...] [--only NAME ...] [--known FILE] [--table]

Models: every .onnx file of each --corpus folder (default /work/shared/corpus: third-party files, see its
README.md and SOURCES.tsv) and, with --project, the models this project makes itself
(project_models.py: torch 1.13 eval exports with MatMul + BatchNormalization, LSTM / GRU / RNN,
PReLU, the shipped demo models; --zoo adds zoo_reference.py's eval exports by name).

Inputs are drawn once per model from its graph inputs (seed 0): floats N(0,1); integers 1 for
inputs named like a mask, else 0 or 1 (valid token, segment and position ids for any vocabulary);
booleans true. A symbolic dim is 1, or 4 when its name says sequence (SEQUENCE_DIMS).

Checks of each model, in order (one table column each):
  ort      ONNX Runtime (tests/ort/run_model.js) on the model as published: "ok" or its message.
  run      amp-run on the same inputs against ONNX Runtime: max|diff| / max|ref| over every output
           (integers exactly), ok at <= 1e-4. Where ONNX Runtime's own results at its default level
           and with its graph optimizations disabled are further apart than that (quantized models:
           its integer kernels and its float path round ties apart, and 50 requantizing layers
           amplify each flip to whole quantization steps), amp-run must be within that spread of
           the nearer of the two; the cell then shows the spread.
  fp16     amp-rewrite --dtype fp16: exit 0 and ONNX's full checker (check_model(full_check=True))
  bf16     on the output; bf16 the same.
  ort16    the fp16 rewrite in ONNX Runtime with its default graph optimizations, and with
  ort16all ORT_ENABLE_ALL named explicitly: "ok" (its error against ONNX Runtime's fp32 output
           shown, not judged: ONNX Runtime's CPU computes fp16 nodes in fp32) or its message.

Every command must end with exit 0, or exit 2 and one line "<tool>: error: ..." naming the model
file (a refusal); anything else (exit 1, "internal error", a signal, a second error line) fails the
model whatever the rest says. Then the issue's rule: a model ONNX Runtime runs as published must
pass run, fp16, bf16, ort16 and ort16all; a model it does not run must be refused cleanly (or run).

--known FILE (known_failures.tsv beside this script in CI): lines "MODEL<TAB>CHECK<TAB>why" for
failures that are understood and not fixed yet; the harness fails on a failure not listed there,
and on a listed one that no longer fails (so the list only shrinks). Exit 0 when every model passes.
"""
import argparse
import glob
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
ORT_DIR = os.path.join(ROOT, "tests", "ort")

RUN_THRESHOLD = 1e-4
SEQUENCE_DIMS = re.compile(r"seq|sequence|len|time", re.I)
CHECKS = ["ort", "run", "fp16", "bf16", "ort16", "ort16all"]


def sh(cmd, timeout=600):
    """(exit status, stdout + stderr). A timeout counts as a failure of its own (status -999)."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                           errors="replace")
    except subprocess.TimeoutExpired:
        return -999, "timed out after %d s" % timeout
    return r.returncode, r.stdout


def make_inputs(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            else:
                dims.append(4 if SEQUENCE_DIMS.search(d.dim_param or "") else 1)
        dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type]
        if tt.elem_type == onnx.TensorProto.STRING:  # words, for the string ops this project refuses
            feeds[vi.name] = np.array([b"onnx"] * int(np.prod(dims)), dtype=object).reshape(dims)
        elif dtype == np.bool_:
            feeds[vi.name] = np.ones(dims, np.bool_)
        elif np.issubdtype(dtype, np.integer):
            if "mask" in vi.name.lower():
                feeds[vi.name] = np.ones(dims, dtype)
            else:
                feeds[vi.name] = rng.integers(0, 2, size=dims).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def write_pb_dir(feeds, d):
    from onnx import numpy_helper
    os.makedirs(d, exist_ok=True)
    for k, (name, a) in enumerate(feeds.items()):
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())


def read_pb_dir(d):
    """ONNX Runtime's outputs in graph order, or its error message."""
    from onnx import TensorProto, numpy_helper
    if os.path.exists(os.path.join(d, "error.txt")):
        return None, open(os.path.join(d, "error.txt")).read().strip()
    outs = []
    for k in range(10000):
        p = os.path.join(d, "output_%d.pb" % k)
        if not os.path.exists(p):
            break
        t = TensorProto()
        t.ParseFromString(open(p, "rb").read())
        if t.data_type == TensorProto.FLOAT16:  # raw bits
            outs.append(np.frombuffer(t.raw_data, np.float16).reshape(t.dims))
        else:
            outs.append(numpy_helper.to_array(t))
    return outs, ""


def ort_jobs(jobs, work, optimization=None):
    """jobs: [(model, in_dir, out_dir)]; each out_dir gets output_K.pb or error.txt."""
    path = os.path.join(work, "ort_jobs_%s.tsv" % (optimization or "default"))
    with open(path, "w") as f:
        for j in jobs:
            shutil.rmtree(j[2], ignore_errors=True)
            f.write("\t".join(j) + "\n")
    env = dict(os.environ)
    env.pop("ORT_GRAPH_OPTIMIZATION", None)
    if optimization:
        env["ORT_GRAPH_OPTIMIZATION"] = optimization
    subprocess.run(["node", os.path.join(ORT_DIR, "run_model.js"), "--jobs", path], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    for _, _, out in jobs:  # a job that ended the whole process wrote nothing
        if not os.path.isdir(out):
            os.makedirs(out)
            with open(os.path.join(out, "error.txt"), "w") as f:
                f.write("ONNX Runtime's process ended before this job\n")


def relative(got, ref):
    """max|got - ref| / max|ref| over all outputs (integers: 0 when equal, inf when not)."""
    worst = 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            return float("inf")
        if not np.issubdtype(r.dtype, np.floating):
            if not np.array_equal(g, r):
                return float("inf")
            continue
        g, r = g.astype(np.float64), r.astype(np.float64)
        scale = np.max(np.abs(r)) if r.size else 0.0
        diff = np.max(np.abs(g - r)) if r.size else 0.0
        if np.isnan(diff):
            nan_same = np.array_equal(np.isnan(g), np.isnan(r))
            diff = np.nanmax(np.abs(g - r)) if nan_same and not np.all(np.isnan(r)) else float("inf")
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


def tool_verdict(tool, rc, out, model_path):
    """None when the command behaved (exit 0, or exit 2 with one error line naming the file), else
    why not. A refusal's line is returned as second value."""
    lines = [l for l in out.splitlines() if l.strip()]
    errors = [l for l in lines if re.match(r"%s: (internal )?error:" % re.escape(tool), l)]
    if rc == 0:
        return None, ""
    if rc == 2 and len(errors) == 1 and not errors[0].startswith(tool + ": internal") \
            and os.path.basename(model_path) in errors[0]:
        return None, errors[0][len(tool) + len(": error: "):]
    if rc == -999:
        return "timed out", ""
    what = "exit %d" % rc if rc >= 0 else "signal %d" % -rc
    detail = errors[-1] if errors else (lines[-1] if lines else "no output")
    if rc == 2 and len(errors) > 1:
        what += ", %d error lines" % len(errors)
    elif rc == 2 and errors and os.path.basename(model_path) not in errors[0]:
        what += ", the error does not name the file"
    return "%s: %s" % (what, detail[:300]), ""


def short(text, n=70):
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= n else text[:n - 1] + "…"


def check_model(name, path, o):
    d = os.path.join(o.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    res = {"model": name, "path": path}
    feeds = make_inputs(path)
    np.savez(os.path.join(d, "inputs.npz"), **feeds)
    write_pb_dir(feeds, os.path.join(d, "in"))
    res["feeds"] = {k: list(v.shape) for k, v in feeds.items()}
    crashes = []
    t0 = time.time()
    rc, out = sh([os.path.join(o.build, "amp-run"), path, "--inputs", os.path.join(d, "inputs.npz"), "--outputs",
                  os.path.join(d, "run.npz"), "--threads", "1"])
    bad, refusal = tool_verdict("amp-run", rc, out, path)
    res["run_rc"], res["run_refusal"], res["run_bad"] = rc, refusal, bad
    if bad:
        crashes.append("amp-run " + bad)
    for dtype in ("fp16", "bf16"):
        dst = os.path.join(d, "rewrite_%s.onnx" % dtype)
        rc, out = sh([os.path.join(o.build, "amp-rewrite"), path, "-o", dst, "--force", "--dtype", dtype])
        bad, refusal = tool_verdict("amp-rewrite", rc, out, path)
        res[dtype + "_rc"], res[dtype + "_refusal"] = rc, refusal
        if bad:
            crashes.append("amp-rewrite --dtype %s %s" % (dtype, bad))
        res[dtype + "_checker"] = None
        if rc == 0:
            rc2, out2 = sh(["/usr/bin/python3", "-c", "import onnx,sys; onnx.checker.check_model(sys.argv[1], full_check=True)",
                            dst])
            res[dtype + "_checker"] = "" if rc2 == 0 else out2.strip().splitlines()[-1]
        res[dtype + "_warnings"] = [l for l in out.splitlines() if "warning" in l][:5]
    res["seconds_ours"] = time.time() - t0
    res["crashes"] = crashes
    return res


def judge(r):
    """Per check: (passed, cell text) by the issue's rule (see the docstring)."""
    cells = {}
    ort_ok = r["ort"] is not None
    cells["ort"] = (True, "ok" if ort_ok else "refuses: " + short(r["ort_error"], 50))
    if r["run_rc"] == 0:
        if ort_ok:
            err = r.get("run_error", float("inf"))
            spread = r.get("ort_spread") or 0.0
            if spread > RUN_THRESHOLD:
                cells["run"] = (err <= spread, "%.1e (ONNX Runtime's own levels differ by %.1e)" % (err, spread))
            else:
                cells["run"] = (err <= RUN_THRESHOLD, "%.1e" % err)
        else:
            cells["run"] = (True, "runs")
    else:
        cells["run"] = (not ort_ok and not r["run_bad"], "refused: " + short(r["run_refusal"] or r["run_bad"] or ""))
    for dtype in ("fp16", "bf16"):
        if r[dtype + "_rc"] == 0:
            ok = r[dtype + "_checker"] == ""
            cells[dtype] = (ok, "valid" if ok else "checker: " + short(r[dtype + "_checker"]))
        else:
            cells[dtype] = (not ort_ok and r[dtype + "_rc"] == 2,
                            "refused: " + short(r[dtype + "_refusal"] or "exit %d" % r[dtype + "_rc"]))
    for col in ("ort16", "ort16all"):
        if r["fp16_rc"] != 0:
            cells[col] = (not ort_ok, "-")
        elif r.get(col + "_error"):  # required only of models ONNX Runtime runs as published
            cells[col] = (not ort_ok, short(r[col + "_error"], 60))
        else:
            e = r.get(col + "_vs_fp32")
            cells[col] = (True, "ok" + (" (%.0e)" % e if e is not None and np.isfinite(e) else ""))
    return cells


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True)
    p.add_argument("--work", default=None)
    p.add_argument("--corpus", nargs="*", default=["/work/shared/corpus"],
                   help="folders of ONNX files (default: the shared corpus); tests/corpus/third_party holds more")
    p.add_argument("--project", action="store_true", help="also the models project_models.py makes")
    p.add_argument("--zoo", nargs="*", default=[], help="with --project: zoo_reference.py eval exports by name")
    p.add_argument("--only", nargs="*", default=None, help="model names (file names without .onnx)")
    p.add_argument("--known", default=None, help="known failures (MODEL<TAB>CHECK<TAB>why per line)")
    p.add_argument("--table", action="store_true", help="print a Markdown table")
    p.add_argument("--json", default=None, help="write every result to this file")
    o = p.parse_args()
    o.build = os.path.abspath(o.build)
    o.work = os.path.abspath(o.work or os.path.join(o.build, "corpus"))
    os.makedirs(o.work, exist_ok=True)

    models = []
    for folder in o.corpus:
        if os.path.isdir(folder):
            models += [(os.path.basename(f)[:-5], f) for f in sorted(glob.glob(os.path.join(folder, "*.onnx")))]
        else:
            print("corpus folder %s not found: its models are not checked" % folder)
    if o.project:
        pd = os.path.join(o.work, "project_models")
        rc, out = sh(["/usr/bin/python3", os.path.join(HERE, "project_models.py"), pd] + (["--zoo"] + o.zoo if o.zoo else []),
                     timeout=1200)
        if rc != 0:
            sys.exit("project_models.py failed: " + out.strip()[-500:])
        models += [("project/" + os.path.basename(f)[:-5], f) for f in sorted(glob.glob(os.path.join(pd, "*.onnx")))]
    if o.only:
        models = [(n, f) for n, f in models if n in o.only or n.split("/")[-1] in o.only]
    if not models:
        sys.exit("no models")

    start = time.time()
    results = []
    for name, path in models:
        results.append(check_model(name.replace("/", "__"), path, o))
        results[-1]["model"] = name
    # ONNX Runtime in three batches (one node process each): the published models, then the fp16
    # rewrites at the default and at the explicit ORT_ENABLE_ALL level.
    dirs = {r["model"]: os.path.join(o.work, r["model"].replace("/", "__")) for r in results}
    ort_jobs([(r["path"], os.path.join(dirs[r["model"]], "in"), os.path.join(dirs[r["model"]], "ort")) for r in results],
             o.work)
    ort_jobs([(r["path"], os.path.join(dirs[r["model"]], "in"), os.path.join(dirs[r["model"]], "ort_disabled"))
              for r in results], o.work, "disabled")
    rewritten = [r for r in results if r["fp16_rc"] == 0]
    for col, level in (("ort16", None), ("ort16all", "all")):
        ort_jobs([(os.path.join(dirs[r["model"]], "rewrite_fp16.onnx"), os.path.join(dirs[r["model"]], "in"),
                   os.path.join(dirs[r["model"]], col)) for r in rewritten], o.work, level)
    for r in results:
        d = dirs[r["model"]]
        r["ort"], r["ort_error"] = read_pb_dir(os.path.join(d, "ort"))
        unoptimized, _ = read_pb_dir(os.path.join(d, "ort_disabled"))
        if r["ort"] is not None and unoptimized is not None:
            r["ort_spread"] = relative(unoptimized, r["ort"])
        if r["ort"] is not None and r["run_rc"] == 0:
            got = np.load(os.path.join(d, "run.npz"))
            got = [got[k] for k in got.files]
            r["run_error"] = relative(got, r["ort"])
            if unoptimized is not None:
                r["run_error"] = min(r["run_error"], relative(got, unoptimized))
        for col in ("ort16", "ort16all"):
            if r["fp16_rc"] != 0:
                continue
            outs, err = read_pb_dir(os.path.join(d, col))
            r[col + "_error"] = err
            if outs is not None and r["ort"] is not None:
                r[col + "_vs_fp32"] = relative(outs, r["ort"])

    known = {}
    if o.known:
        for line in open(o.known):
            if line.strip() and not line.startswith("#"):
                parts = line.rstrip("\n").split("\t")
                known[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    failures, fixed, rows = [], [], []
    for r in results:
        cells = judge(r)
        row = [r["model"]]
        for c in CHECKS:
            passed, text = cells[c]
            listed = (r["model"], c) in known
            if not passed and not listed:
                failures.append("%s %s: %s" % (r["model"], c, text))
            if passed and listed:
                fixed.append("%s %s" % (r["model"], c))
            row.append(("" if passed else ("(known) " if listed else "**FAIL** ")) + text)
        for c in r["crashes"]:  # never excused by the known list
            failures.append("%s: %s" % (r["model"], c))
        rows.append(row)
    if o.table:
        print("| model | " + " | ".join(CHECKS) + " |")
        print("|---" * (len(CHECKS) + 1) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print("  ".join(row))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(results, f, indent=1, default=lambda x: None)
    ran = sum(1 for r in results if r["ort"] is not None)
    print("%d models, %d run by ONNX Runtime as published; %.0f s" % (len(results), ran, time.time() - start))
    for f in failures:
        print("FAIL " + f)
    for f in fixed:
        print("FIXED (remove from %s): %s" % (o.known, f))
    crashes = sum(len(r["crashes"]) for r in results)
    print("internal errors or crashes: %d" % crashes)
    return 1 if failures or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
