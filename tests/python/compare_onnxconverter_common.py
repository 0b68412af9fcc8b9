#!/usr/bin/python3
"""onnx_amp.float16 against onnxconverter-common's own float16 module on the zoo: the same user
script run with each, its output checked by onnx.checker (full check), run in ONNX Runtime (node,
tests/ort) and compared with torch's fp32 output. onnxconverter-common is fetched code that CI
cannot install, so this is run by hand and its table kept in the README:

    PYTHONPATH=/path/to/onnxconverter-common /usr/bin/python3 tests/python/compare_onnxconverter_common.py \\
        --build build [--work DIR] [--inputs N] [--auto [--rtol R] [--atol A]] [MODEL ...]

--build names a folder with amp-run and python/onnx_amp (a build, or links to an installed
snapshot's files). The zoo exports are made in --work (default: a new temporary folder) unless
already there.

Columns per converter: the conversion's seconds, whether onnx.checker's full check passes,
ONNX Runtime's error against torch fp32 (max|diff| over max|output|) or why it did not run, and
amp-run's (which executes every float16 node in float16, where ONNX Runtime's CPU provider runs
those it has no float16 kernel for in float32). The
emulated whole-model float16 forward's error (zoo_reference.py) is given for scale.

One input's error is one draw: on tiny_encoder the two converters' errors on the export's input
are 2.9e-4 and 3.2e-4 and their order flips from input to input. --inputs N (default 16) also
runs N inputs (the export's, then N-1 drawn: tokens uniform over the export's range, images
standard normal) through both conversions and through the float32 export in ONNX Runtime, the
reference for the drawn ones, and gives each converter's mean and largest error over them.

--auto compares auto_convert_mixed_precision instead: the user script

    model_fp16 = auto_mixed_precision.auto_convert_mixed_precision(model, {input: x}, rtol=RTOL, atol=ATOL,
                                                                    keep_io_types=True)

with x the export's input and --rtol / --atol (default 0.01 / 0.001, onnxconverter-common's
example) for both. onnxconverter-common's validates every attempt in ONNX Runtime, through
tests/ort/python_shim (a stand-in for the Python onnxruntime package over onnxruntime-node, one
node process kept for the whole run, its start-up paid before the clock); onnx_amp's in amp-run's
CPU backend. Each converter's cells also give the share of the converted model's nodes (Casts
left out) and of its Conv / ConvTranspose / MatMul / Gemm multiply-adds that compute in float16
(from the converted model's own types and shapes), and how many model runs its search made
(onnxconverter-common: the stand-in's count of ONNX Runtime runs, with the seconds they took;
onnx_amp: the search's attempts).
"""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = None  # --build
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))

ZOO = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5",
       "efficientnet_b0", "densenet121", "regnet_y_400mf", "squeezenet1_0", "googlenet", "convnext_tiny",
       "vit_b_16", "swin_t", "tiny_transformer", "tiny_gpt", "tiny_attention", "tiny_encoder", "tiny_unet"]


AUTO = None  # --auto: {"rtol", "atol", "feed": {input name: x}, "ORT" / "amp-run": the fp32 export's output there}


def users_script(module, model_path, out_path):
    model = onnx.load(model_path)
    if AUTO is None:
        model_fp16 = module.convert_float_to_float16(model, keep_io_types=True)
    else:
        with contextlib.redirect_stdout(io.StringIO()):  # onnxconverter-common prints every attempt
            model_fp16 = module.auto_convert_mixed_precision(model, AUTO["feed"], rtol=AUTO["rtol"], atol=AUTO["atol"],
                                                             keep_io_types=True)
    onnx.save(model_fp16, out_path)


def fp16_share(path):
    """(share of the nodes, share of the Conv / ConvTranspose / MatMul / Gemm multiply-adds) that
    compute in float16, read from the model's types and shapes after shape inference; Casts and
    nodes with no float output are not counted."""
    from onnx import TensorProto
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    g = m.graph
    types, shapes = {}, {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        t = v.type.tensor_type
        types[v.name] = t.elem_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[v.name] = [d.dim_value for d in t.shape.dim]
    for i in g.initializer:
        types[i.name], shapes[i.name] = i.data_type, list(i.dims)
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    nodes = low_nodes = macs = low_macs = 0
    for n in g.node:
        t = types.get(n.output[0]) if n.output else None
        if n.op_type == "Cast" or t not in floats:
            continue
        low = t == TensorProto.FLOAT16
        nodes += 1
        low_nodes += low
        out = shapes.get(n.output[0])
        a, b = (shapes.get(n.input[0]), shapes.get(n.input[1])) if len(n.input) > 1 else (None, None)
        if out is None or a is None or b is None:
            continue
        k = 0
        if n.op_type == "Conv":
            k = int(np.prod(b[1:]))
        elif n.op_type == "ConvTranspose":
            k = int(np.prod(a)) * int(np.prod(b[1:])) // max(int(np.prod(out)), 1)  # in x kernel per output
        elif n.op_type == "MatMul":
            k = a[-1]
        elif n.op_type == "Gemm":
            trans_a = any(x.name == "transA" and x.i for x in n.attribute)
            k = a[0] if trans_a else a[-1]
        count = int(np.prod(out)) * k
        macs += count
        low_macs += count if low else 0
    return low_nodes / max(nodes, 1), (low_macs / macs if macs else float("nan"))


def inputs(x0, n):
    """The export's input, then n-1 drawn like it."""
    rng = np.random.default_rng(0)
    out = [x0]
    for _ in range(n - 1):
        if np.issubdtype(x0.dtype, np.integer):
            out.append(rng.integers(x0.min(), x0.max() + 1, size=x0.shape).astype(x0.dtype))
        else:
            out.append(rng.standard_normal(x0.shape).astype(x0.dtype))
    return out


def spread(paths, xs, work):
    """Per converted model, (mean, max) of its error over xs against the float32 export in ONNX
    Runtime (or why not)."""
    from zoo_check import ort_run
    errors = {tag: [] for tag in paths if tag != "eval"}
    for x in xs:
        ref, why = ort_run(paths["eval"], x, work)
        if ref is None:
            return {tag: why for tag in errors}
        for tag in errors:
            try:
                got, _ = ort_run(paths[tag], x, work)
            except RuntimeError:
                return {tag: "-" for tag in errors}
            errors[tag].append(float(np.abs(got - ref).max() / np.abs(ref).max()))
    return {tag: "%.1e / %.1e" % (np.mean(e), np.max(e)) for tag, e in errors.items()}


def judge(module, d, x, ref, work, tag):
    from zoo_check import ort_run
    out = os.path.join(work, tag + ".onnx")
    if os.path.exists(out):
        os.remove(out)  # a failed conversion leaves no earlier run's model behind for --inputs
    runs = search_counter(module)
    start = time.perf_counter()
    try:
        users_script(module, os.path.join(d, "eval.onnx"), out)
    except Exception as e:  # the converter's own failure is a result here
        failed = ("%.1f" % (time.perf_counter() - start), "-", "conversion failed: %s" % str(e).splitlines()[0][:200], "-")
        return failed + (("-", "-", runs()) if AUTO else ())
    seconds = "%.1f" % (time.perf_counter() - start)
    try:
        onnx.checker.check_model(out, full_check=True)
        checker = "passes"
    except Exception as e:
        checker = "fails: " + str(e).strip().splitlines()[0][:60]
    got = {}
    try:
        got["ORT"], why = ort_run(out, x, work)
        ort = "%.1e" % (float(np.abs(got["ORT"] - ref["fp32"]).max() / np.abs(ref["fp32"]).max())) if got["ORT"] is not None else why
        if got["ORT"] is not None and not np.isfinite(got["ORT"]).all():
            ort += " (NaN/inf in the output)"
    except RuntimeError as e:
        ort = "refused: " + str(e).replace("ONNX Runtime: ", "")[:90]
    try:
        got["amp-run"] = amp_run_output(out, x, work)
        amp = "%.1e" % (float(np.abs(got["amp-run"] - ref["fp32"]).max() / np.abs(ref["fp32"]).max()))
    except RuntimeError as e:
        amp = "refused: " + str(e)[:80]
    cells = (seconds, checker, ort, amp)
    if AUTO:
        try:
            cells += ("fp16 %.0f%% of nodes, %.0f%% of MACs" % tuple(100 * v for v in fp16_share(out)),)
        except Exception as e:  # shape inference refusing the model is a result too
            cells += ("fp16 share: " + str(e).strip().splitlines()[0][:60],)
        cells += ("the check %s" % " / ".join(
            "%s in %s" % (("passes" if np.allclose(AUTO[where], got[where], AUTO["rtol"], AUTO["atol"]) else "fails")
                          if got.get(where) is not None and AUTO.get(where) is not None else "-", where)
            for where in ("ORT", "amp-run")), runs())
    return cells


def search_counter(module):
    """For --auto: a function that returns, after the search, how many model runs it made (text)."""
    if AUTO is None:
        return lambda: ""
    import onnxruntime as shim  # tests/ort/python_shim
    if module.__name__.startswith("onnxconverter_common"):
        shim.stats.update(runs=0, seconds=0.0, shim_seconds=0.0)
        return lambda: "%d ORT runs (%.1f s in ORT, %.1f s the stand-in's file I/O)" % (
            shim.stats["runs"], shim.stats["seconds"], shim.stats["shim_seconds"])
    from onnx_amp import _core
    search, attempts = _core.search_fp32_nodes, []

    def counting(*args, **kwargs):
        result = search(*args, **kwargs)
        attempts.append(result[2])
        return result
    _core.search_fp32_nodes = counting  # the drop-in calls it as _core.search_fp32_nodes

    def count():
        _core.search_fp32_nodes = search
        return "%s amp-run attempts" % (attempts[0] if attempts else "-")
    return count


def amp_run_output(path, x, work):
    """The converted model's output in amp-run, whose CPU kernels round every float16 node's result
    to float16 as a GPU does: that of the model as written (raises RuntimeError when amp-run
    refuses). ONNX Runtime's CPU provider runs the float16 nodes it has no float16 kernel for in
    float32 (it inserts the Casts itself), so its error is that of a different, partly float32
    model."""
    m = onnx.load(path, load_external_data=False)
    feeds = os.path.join(work, "amp_run_in.npz")
    np.savez(feeds, **{m.graph.input[0].name: x})
    return zoo_check_amp_run(path, feeds, os.path.join(work, "amp_run_out.npz"))


def zoo_check_amp_run(model, inputs, outputs):
    import zoo_check

    class Options:
        build = BUILD
        threads = 2
    return zoo_check.amp_run(Options, model, inputs, outputs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=ZOO)
    p.add_argument("--build", required=True, help="a build folder (amp-run, python/onnx_amp)")
    p.add_argument("--work", default=None)
    p.add_argument("--inputs", type=int, default=16, help="inputs for the mean and largest error (0: none)")
    p.add_argument("--auto", action="store_true", help="compare auto_convert_mixed_precision (see above)")
    p.add_argument("--rtol", type=float, default=0.01, help="--auto: both searches' rtol")
    p.add_argument("--atol", type=float, default=0.001, help="--auto: both searches' atol")
    o = p.parse_args()
    global BUILD, AUTO
    build = BUILD = os.path.abspath(o.build)
    sys.path.insert(0, os.path.join(build, "python"))
    if o.auto:
        sys.path.insert(0, os.path.join(ROOT, "tests", "ort", "python_shim"))
        import onnxruntime as shim  # the stand-in, for onnxconverter-common's import inside its search
        import warnings
        warnings.filterwarnings("ignore")  # onnxconverter-common's float16 warns per clamped constant per attempt
        startup = shim.start_server()
        from onnx_amp import auto_mixed_precision as ours
        from onnxconverter_common import auto_mixed_precision as theirs
        what = "auto_convert_mixed_precision(rtol=%g, atol=%g, keep_io_types=True)" % (o.rtol, o.atol)
        per = ("s, checker, ORT error, amp-run error, fp16 share, whether the output passes the search's check "
               "(allclose to the fp32 export's output, rtol, atol) in ORT / in amp-run, runs")
        label = "onnx_amp.auto_mixed_precision"
    else:
        from onnx_amp import float16 as ours
        from onnxconverter_common import float16 as theirs
        what = "float16.convert_float_to_float16(keep_io_types=True)"
        per = "s, checker, ORT error, amp-run error"
        label = "onnx_amp.float16"
    work = o.work or tempfile.mkdtemp(prefix="occ_compare_")
    over = (" | onnxconverter-common: mean / max ORT error over %d inputs | onnx_amp: the same" % o.inputs
            if o.inputs else "")
    print("%s; load average %.1f (1 minute)%s" % (what, os.getloadavg()[0], (
        "; node with onnxruntime-node started in %.1f s before the clock" % startup) if o.auto else ""))
    print("| model | onnxconverter-common: %s | %s: %s | whole-model fp16 (emulated)%s |" % (per, label, per, over))
    print("|---|---|---|---|%s" % ("---|---|" if o.inputs else ""))
    for name in o.models:
        d = os.path.join(work, name)
        if not os.path.exists(os.path.join(d, "eval_ref.npz")):
            from zoo_check import MIN_SIZE  # ViT, MaxViT, AlexNet and VGG take 224x224, Inception v3 96x96
            r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "zoo", "zoo_reference.py"), name, d,
                                "--eval", "--size", str(MIN_SIZE.get(name, 64))],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                print("| %s | export failed | | |" % name, flush=True)
                continue
        x = np.load(os.path.join(d, "eval_input.npz"))["input"]
        ref = np.load(os.path.join(d, "eval_ref.npz"))
        if o.auto:
            model_input = onnx.load(os.path.join(d, "eval.onnx"), load_external_data=False).graph.input[0].name
            AUTO = {"rtol": o.rtol, "atol": o.atol, "feed": {model_input: x}}
            from zoo_check import ort_run
            AUTO["ORT"] = ort_run(os.path.join(d, "eval.onnx"), x, d)[0]
            AUTO["amp-run"] = amp_run_output(os.path.join(d, "eval.onnx"), x, d)
        tags = ("occ_auto", "amp_auto") if o.auto else ("occ", "amp")
        cells = [", ".join(judge(m, d, x, ref, d, tag)) for m, tag in zip((theirs, ours), tags)]
        naive = float(np.abs(ref["fp16"] - ref["fp32"]).max() / np.abs(ref["fp32"]).max())
        more = ""
        if o.inputs:
            paths = dict(zip(("eval", "occ", "amp"), (os.path.join(d, t + ".onnx") for t in ("eval",) + tags)))
            if all(os.path.exists(p) for p in paths.values()):
                s = spread(paths, inputs(x, o.inputs), d)
                more = " %s | %s |" % (s["occ"], s["amp"])
            else:
                more = " - | - |"
        print("| %s | %s | %s | %.1e |%s" % (name, cells[0], cells[1], naive, more), flush=True)


if __name__ == "__main__":
    main()
