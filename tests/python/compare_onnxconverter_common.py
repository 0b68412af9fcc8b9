#!/usr/bin/python3
"""onnx_amp.float16 against onnxconverter-common's own float16 module on the zoo: the same user
script run with each, its output checked by onnx.checker (full check), run in ONNX Runtime (node,
tests/ort) and compared with torch's fp32 output. onnxconverter-common is fetched code that CI
cannot install, so this is run by hand and its table kept in the README:

    PYTHONPATH=/path/to/onnxconverter-common /usr/bin/python3 tests/python/compare_onnxconverter_common.py \\
        --build build [MODEL ...]

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
"""
import argparse
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


def users_script(float16_module, model_path, out_path):
    model = onnx.load(model_path)
    model_fp16 = float16_module.convert_float_to_float16(model, keep_io_types=True)
    onnx.save(model_fp16, out_path)


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


def judge(float16_module, d, x, ref, work, tag):
    from zoo_check import ort_run
    out = os.path.join(work, tag + ".onnx")
    start = time.perf_counter()
    try:
        users_script(float16_module, os.path.join(d, "eval.onnx"), out)
    except Exception as e:  # the converter's own failure is a result here
        return "%.1f" % (time.perf_counter() - start), "-", "conversion failed: %s" % str(e).splitlines()[0][:80], "-"
    seconds = "%.1f" % (time.perf_counter() - start)
    try:
        onnx.checker.check_model(out, full_check=True)
        checker = "passes"
    except Exception as e:
        checker = "fails: " + str(e).strip().splitlines()[0][:60]
    try:
        got, why = ort_run(out, x, work)
        ort = "%.1e" % (float(np.abs(got - ref["fp32"]).max() / np.abs(ref["fp32"]).max())) if got is not None else why
        if got is not None and not np.isfinite(got).all():
            ort += " (NaN/inf in the output)"
    except RuntimeError as e:
        ort = "refused: " + str(e).replace("ONNX Runtime: ", "")[:90]
    return seconds, checker, ort, amp_run_error(out, x, ref, work)


def amp_run_error(path, x, ref, work):
    """The converted model in amp-run, whose CPU kernels round every float16 node's result to float16
    as a GPU does: the error of the model as written. ONNX Runtime's CPU provider runs the float16
    nodes it has no float16 kernel for in float32 (it inserts the Casts itself), so its error is
    that of a different, partly float32 model."""
    m = onnx.load(path, load_external_data=False)
    feeds = os.path.join(work, "amp_run_in.npz")
    np.savez(feeds, **{m.graph.input[0].name: x})
    try:
        got = zoo_check_amp_run(path, feeds, os.path.join(work, "amp_run_out.npz"))
    except RuntimeError as e:
        return "refused: " + str(e)[:80]
    return "%.1e" % (float(np.abs(got - ref["fp32"]).max() / np.abs(ref["fp32"]).max()))


def zoo_check_amp_run(model, inputs, outputs):
    import zoo_check

    class Options:
        build = BUILD
        threads = 2
    return zoo_check.amp_run(Options, model, inputs, outputs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=ZOO)
    p.add_argument("--build", required=True)
    p.add_argument("--work", default=None)
    p.add_argument("--inputs", type=int, default=16, help="inputs for the mean and largest error (0: none)")
    o = p.parse_args()
    global BUILD
    build = BUILD = os.path.abspath(o.build)
    sys.path.insert(0, os.path.join(build, "python"))
    from onnx_amp import float16 as ours
    from onnxconverter_common import float16 as theirs
    work = o.work or tempfile.mkdtemp(prefix="occ_compare_")
    over = (" | onnxconverter-common: mean / max ORT error over %d inputs | onnx_amp: the same" % o.inputs
            if o.inputs else "")
    print("| model | onnxconverter-common: s, checker, ORT error, amp-run error | "
          "onnx_amp.float16: s, checker, ORT error, amp-run error | "
          "whole-model fp16 (emulated)%s |" % over)
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
        cells = [", ".join(judge(m, d, x, ref, d, tag)) for m, tag in ((theirs, "occ"), (ours, "amp"))]
        naive = float(np.abs(ref["fp16"] - ref["fp32"]).max() / np.abs(ref["fp32"]).max())
        more = ""
        if o.inputs:
            paths = {tag: os.path.join(d, tag + ".onnx") for tag in ("eval", "occ", "amp")}
            if all(os.path.exists(p) for p in paths.values()):
                s = spread(paths, inputs(x, o.inputs), d)
                more = " %s | %s |" % (s["occ"], s["amp"])
            else:
                more = " - | - |"
        print("| %s | %s | %s | %.1e |%s" % (name, cells[0], cells[1], naive, more), flush=True)


if __name__ == "__main__":
    main()
