"""`amp-rewrite --calibrate` on the Done-when models (calibration_models.py), judged on held-out
inputs in amp-run and in ONNX Runtime against torch's float64 outputs, beside onnxconverter-common's
auto_convert_mixed_precision with the same tolerance and calibration data (README, "Numerics-driven
placement"). Prints one markdown table; with --check, asserts the Done-when conditions.

Usage: /usr/bin/python3 tests/bench/calibration_compare.py BUILD_DIR [--work DIR] [--check] [--no-occ]
       [--models resnet18,resnet18_rescaled,...]
onnxconverter-common is read from /work/ext/onnxconverter-common (OCC_PATH overrides); it needs
a Python onnxruntime, which tests/ort/python_shim provides over ONNX Runtime for Node.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "ort", "python_shim"))
import onnxruntime as ort_shim  # noqa: E402  (the shim)

MODELS = ["resnet18", "resnet18_rescaled", "ssd_heads_plain", "ssd_heads"]
# The unmodified model whose own op-list fp16 error a rescaled one must stay within.
UNMODIFIED = {"resnet18_rescaled": "resnet18", "ssd_heads": "ssd_heads_plain"}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def load_npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def error(ref, out):
    """max |y - ref| / max |ref| over every output (inf when y is not finite); the worst output."""
    worst = 0.0
    for name, r in ref.items():
        y = out[name].astype(np.float64)
        e = np.inf if not np.isfinite(y).all() else float(np.abs(y - r).max() / np.abs(r).max())
        worst = max(worst, e)
    return worst


def amp_run(build, model, inputs, work):
    out = os.path.join(work, os.path.basename(model) + ".out.npz")
    run([os.path.join(build, "amp-run"), model, "--inputs", inputs, "--outputs", out])
    return load_npz(out)


def ort_run(model, inputs):
    session = ort_shim.InferenceSession(model)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs)))


def fmt(e):
    return "inf/NaN" if not np.isfinite(e) else "%.2e" % e


def occ(model_path, calib, tolerance, macs, work):
    """auto_convert_mixed_precision with our metric as its validate_fn; the node_block_list it settles on."""
    sys.path.insert(0, os.environ.get("OCC_PATH", "/work/ext/onnxconverter-common"))
    from onnxconverter_common import auto_mixed_precision, float16

    blocked = {}
    convert = float16.convert_float_to_float16

    def remembering(model, **kw):
        blocked["last"] = list(kw.get("node_block_list") or [])
        return convert(model, **kw)

    auto_mixed_precision.float16.convert_float_to_float16 = remembering
    import warnings
    warnings.filterwarnings("ignore")  # float16.py warns for every clamped constant, at every attempt

    def validate(res1, res2):
        return all(np.isfinite(b).all() and np.abs(b.astype(np.float64) - a).max() <= tolerance * np.abs(a).max()
                   for a, b in zip(res1, res2))

    ort_shim.stats.update(runs=0, seconds=0.0)
    start = time.perf_counter()
    devnull = open(os.devnull, "w")
    stdout, sys.stdout = sys.stdout, devnull  # it prints every attempt
    try:
        converted = auto_mixed_precision.auto_convert_mixed_precision(onnx.load(model_path), calib, validate,
                                                                      keep_io_types=True)
        failure = None
    except Exception as e:  # noqa: BLE001 (a peer's failure is a result to report)
        converted, failure = None, str(e).splitlines()[0][:80]
    finally:
        sys.stdout = stdout
        auto_mixed_precision.float16.convert_float_to_float16 = convert
    seconds = time.perf_counter() - start
    out = None
    if converted is not None:
        out = os.path.join(work, os.path.basename(model_path) + ".occ.onnx")
        onnx.save(converted, out)
    low = sum(m for n, m in macs.items() if n not in set(blocked.get("last", [])))
    return {"model": out, "seconds": seconds, "runs": ort_shim.stats["runs"], "ort_seconds": ort_shim.stats["seconds"],
            "macs_low": low, "kept": len(blocked.get("last", [])), "failure": failure}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--work")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-occ", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="calibration_compare_")
    models = a.models.split(",")
    run(["/usr/bin/python3", os.path.join(HERE, "calibration_models.py"), work, str(a.batch)])
    startup = ort_shim.measure_startup()
    rows, results, failures = [], {}, []
    for name in models:
        m = os.path.join(work, name + ".onnx")
        heldout = os.path.join(work, name + ".heldout.npz")
        ref = {k: v.astype(np.float64) for k, v in load_npz(os.path.join(work, name + ".heldout_ref.npz")).items()}
        feeds = load_npz(heldout)
        run([os.path.join(a.build, "amp-rewrite"), m, "-o", os.path.join(work, name + ".oplist.onnx"), "--force"])
        start = time.perf_counter()
        r = run([os.path.join(a.build, "amp-rewrite"), m, "-o", os.path.join(work, name + ".cal.onnx"), "--force",
                 "--calibrate", os.path.join(work, name + ".calib.npz"), "--report", os.path.join(work, name + ".json")])
        wall = time.perf_counter() - start
        report = json.load(open(os.path.join(work, name + ".json")))
        cal = report["calibration"]
        macs = {x["node"]: x["macs"] for x in cal["measured"] if x["macs"]}
        res = {
            "fp32_amp_run": error(ref, amp_run(a.build, m, heldout, work)),
            "oplist_amp_run": error(ref, amp_run(a.build, os.path.join(work, name + ".oplist.onnx"), heldout, work)),
            "oplist_ort": error(ref, ort_run(os.path.join(work, name + ".oplist.onnx"), feeds)),
            "cal_amp_run": error(ref, amp_run(a.build, os.path.join(work, name + ".cal.onnx"), heldout, work)),
            "cal_ort": error(ref, ort_run(os.path.join(work, name + ".cal.onnx"), feeds)),
            "share_oplist": cal["macs"]["low_op_list"] / cal["macs"]["total"],
            "share_cal": cal["macs"]["low_calibrated"] / cal["macs"]["total"],
            "kept": [k["node"] for k in cal["kept"]],
            "target": cal["target"],
            "seconds": cal["seconds"], "wall": wall, "evaluations": cal["evaluations"],
        }
        results[name] = res
        o = None
        if not a.no_occ:
            o = occ(m, load_npz(os.path.join(work, name + ".calib.npz")), float(cal["target"]), macs, work)
            o["error"] = error(ref, ort_run(o["model"], feeds)) if o["model"] else float("nan")
            # ONNX Runtime's CPU provider has no fp16 Conv: it casts around it and computes in fp32, so
            # OCC's search (and ORT) cannot see a GPU's fp16 overflow; amp-run computes as a GPU does.
            o["error_amp_run"] = error(ref, amp_run(a.build, o["model"], heldout, work)) if o["model"] else float("nan")
            res["occ"] = o
        occ_cells = ["-"] * 4 if o is None else (
            [o["failure"], "-", "-", "%d runs, %.1f s" % (o["runs"], o["seconds"])] if o["failure"] else
            [fmt(o["error_amp_run"]) + " / " + fmt(o["error"]), "%.1f%%" % (100 * o["macs_low"] / cal["macs"]["total"]), str(o["kept"]),
             "%.1f s (%d runs; %.1f s less %.2f s start-up each)" % (
                 o["seconds"], o["runs"], max(o["seconds"] - o["runs"] * startup, 0), startup)])
        rows.append([name, fmt(res["oplist_amp_run"]) + " / " + fmt(res["oplist_ort"]),
                     fmt(res["cal_amp_run"]) + " / " + fmt(res["cal_ort"]), "%.3g" % float(cal["target"]),
                     "%.1f%% -> %.1f%%" % (100 * res["share_oplist"], 100 * res["share_cal"]), str(len(res["kept"])),
                     "%.2f s (%d evaluations; command %.2f s)" % (res["seconds"], res["evaluations"], wall)] + occ_cells)
    head = ["model", "error, op lists (amp-run / ORT)", "error, calibrated (amp-run / ORT)", "E (floor)",
            "MACs in fp16 (op lists -> calibrated)", "kept fp32", "calibration time",
            "OCC error (amp-run / ORT)", "OCC MACs in fp16", "OCC kept fp32", "OCC time"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\nerrors: max |y - torch float64| / max |torch float64| on %d held-out inputs, worst output; "
          "node start-up per ONNX Runtime call measured %.2f s" % (a.batch, startup))
    for name, res in results.items():
        print("%s: fp32 amp-run error %s; kept %s" % (name, fmt(res["fp32_amp_run"]), ", ".join(res["kept"]) or "-"))
    if not a.check:
        return
    for name, base in UNMODIFIED.items():
        if name not in results or base not in results:
            continue
        res, own = results[name], results[base]
        for where in ("amp_run", "ort"):
            if not (res["cal_" + where] <= own["oplist_" + where]):
                failures.append("%s: calibrated error in %s %s is beyond %s's own fp16 error %s" % (
                    name, where, fmt(res["cal_" + where]), base, fmt(own["oplist_" + where])))
        if np.isfinite(res["oplist_amp_run"]) and res["oplist_amp_run"] < 1:
            failures.append("%s: the op-list rewrite did not break (%s): the model does not test calibration" % (
                name, fmt(res["oplist_amp_run"])))
    # The rescaled block: its two convolutions and the ReLU between them, at least 85% of the
    # multiply-adds still fp16. The SSD heads: the extra layer, its ReLU and the two heads reading it.
    expected = {"resnet18_rescaled": {"/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu/Relu",
                                      "/layer1/layer1.0/conv2/Conv"},
                "ssd_heads": {"/extra/extra.0/Conv", "/extra/extra.1/Relu", "/loc.1/Conv", "/conf.1/Conv"}}
    for name, nodes in expected.items():
        if name in results and set(results[name]["kept"]) != nodes:
            failures.append("%s: kept %s, expected %s" % (name, sorted(results[name]["kept"]), sorted(nodes)))
    for name in ["resnet18_rescaled"]:
        res = results.get(name)
        if res and res["share_cal"] < 0.85:
            failures.append("%s: %.1f%% of multiply-adds left in fp16, under 85%%" % (name, 100 * res["share_cal"]))
    for base in set(UNMODIFIED.values()) & set(results):
        if results[base]["kept"]:
            failures.append("%s: calibration kept %s in a model that needs nothing" % (base, results[base]["kept"]))
    if failures:
        raise SystemExit("\n".join(failures))
    print("checks passed")


if __name__ == "__main__":
    main()
