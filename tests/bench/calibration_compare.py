"""`amp-rewrite --calibrate` on the Done-when models (calibration_models.py), judged on held-out
inputs in amp-run and in ONNX Runtime against torch's float64 outputs, beside onnxconverter-common's
auto_convert_mixed_precision with the same tolerance and calibration data (README, "Numerics-driven
placement"). Prints two markdown tables (placements and errors; time); with --check, asserts the
Done-when conditions on the placements (never on time: figures are measured, not asserted).

The peer runs twice per model, through tests/ort/python_shim (a stand-in for Python onnxruntime):
  OCC/ORT      validating with ONNX Runtime's CPU provider, as its users do: one node process kept
               for all runs (its start-up paid once, before the clock starts, as Python pays
               `import onnxruntime` once); its time is reported raw and less the stand-in's own
               file I/O (writing each candidate model and its feeds, reading the outputs back);
  OCC/amp-run  the same search validating with amp-run (GPU-faithful fp16: every 16-bit value
               stored as a GPU stores it), so that its placement can be compared with ours under
               the same arithmetic.
--peer-per-process also times OCC/ORT starting node for every run, as the first version of this
comparison did, and prints that time less the start-up of a one-node model per run.

Usage: /usr/bin/python3 tests/bench/calibration_compare.py BUILD_DIR [--work DIR] [--check] [--no-occ]
       [--models resnet18,resnet18_rescaled,...] [--peer-per-process]
onnxconverter-common is read from /work/ext/onnxconverter-common (OCC_PATH overrides).
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


def occ(model_path, calib, tolerance, macs, out_path, amp_run_path=None, per_process=False):
    """auto_convert_mixed_precision with our metric as its validate_fn, validating through ONNX Runtime
    or (amp_run_path) amp-run; the node_block_list it settles on and what it cost."""
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

    ort_shim.amp_run, ort_shim.persistent = amp_run_path, not per_process
    ort_shim.stats.update(runs=0, seconds=0.0, shim_seconds=0.0)
    model = onnx.load(model_path)  # outside the clock, as amp-rewrite's loading is outside calibration's
    start = time.perf_counter()
    devnull = open(os.devnull, "w")
    stdout, sys.stdout = sys.stdout, devnull  # it prints every attempt
    try:
        converted = auto_mixed_precision.auto_convert_mixed_precision(model, calib, validate, keep_io_types=True)
        failure = None
    except Exception as e:  # noqa: BLE001 (a peer's failure is a result to report)
        converted, failure = None, str(e).splitlines()[0][:80]
    finally:
        sys.stdout = stdout
        auto_mixed_precision.float16.convert_float_to_float16 = convert
        ort_shim.amp_run, ort_shim.persistent = None, True
    seconds = time.perf_counter() - start
    if converted is not None:
        onnx.save(converted, out_path)
    kept = blocked.get("last", [])
    low = sum(m for n, m in macs.items() if n not in set(kept))
    return {"model": out_path if converted is not None else None, "seconds": seconds, "runs": ort_shim.stats["runs"],
            "runtime_seconds": ort_shim.stats["seconds"], "shim_seconds": ort_shim.stats["shim_seconds"],
            "macs_low": low, "kept": kept, "failure": failure}


def fp16_storage(build, work):
    """How each runtime computes fp16, on tiny models: three of fp16 Convs (input [1,3,1,1], weights
    of ones summing its 3 channels): a sum that passes 65504 only midway (60000 + 60000 - 60000), one
    whose result passes it (40000 + 40000 + 20000), and that result read by a second fp16 Conv
    (x 1/64, 1562.5); two of one fp16 node between Casts, as a placement writes it, on 1e5: a ReLU
    (no fp16 kernel in ORT's CPU provider) and an Identity. Returns one line per model."""
    from onnx import TensorProto, helper, numpy_helper
    lines = []
    for name, xs, chain in (("accumulation", [60000, 60000, -60000], False), ("overflowing result", [40000, 40000, 20000], False),
                            ("overflowing intermediate", [40000, 40000, 20000], True)):
        nodes = [helper.make_node("Conv", ["x", "w1"], ["y1"], name="conv1")]
        inits = [numpy_helper.from_array(np.ones((1, 3, 1, 1), np.float16), "w1")]
        if chain:
            nodes.append(helper.make_node("Conv", ["y1", "w2"], ["y2"], name="conv2"))
            inits.append(numpy_helper.from_array(np.full((1, 1, 1, 1), 1 / 64, np.float16), "w2"))
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 1, 1])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT16, [1, 1, 1, 1])], inits)
        path = os.path.join(work, "fp16_%s.onnx" % name.replace(" ", "_"))
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        x = np.array(xs, np.float16).reshape(1, 3, 1, 1)
        np.savez(path + ".npz", x=x)
        got = {"ORT": float(ort_run(path, {"x": x})[nodes[-1].output[0]].ravel()[0]),
               "amp-run": float(list(amp_run(build, path, path + ".npz", work).values())[0].ravel()[0])}
        lines.append("%s: exact %g; %s" % (name, sum(xs) / (64 if chain else 1),
                                           ", ".join("%s %g" % (k, v) for k, v in got.items())))
    # What a placement's Casts around one fp16 node do: x (fp32) -> Cast fp16 -> OP -> Cast fp32, x = 1e5.
    for op in ("Relu", "Identity"):
        nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), helper.make_node(op, ["h"], ["r"]),
                 helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
        g = helper.make_graph(nodes, op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        path = os.path.join(work, "fp16_cast_%s.onnx" % op)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        x = np.full(1, 1e5, np.float32)
        np.savez(path + ".npz", x=x)
        lines.append("fp32 1e5 -> Cast fp16 -> %s -> Cast fp32: ORT %g, amp-run %g" % (
            op, float(ort_run(path, {"x": x})["y"][0]), float(amp_run(build, path, path + ".npz", work)["y"][0])))
    return lines


def judge(res, key, model, build, ref, heldout, feeds, work):
    """Errors of `model` on the held-out inputs in amp-run and in ONNX Runtime."""
    res[key + "_amp_run"] = error(ref, amp_run(build, model, heldout, work)) if model else float("nan")
    res[key + "_ort"] = error(ref, ort_run(model, feeds)) if model else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--work")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-occ", action="store_true")
    ap.add_argument("--peer-per-process", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="calibration_compare_")
    os.makedirs(work, exist_ok=True)
    models = a.models.split(",")
    run(["/usr/bin/python3", os.path.join(HERE, "calibration_models.py"), work, str(a.batch)])
    server_start = ort_shim.start_server()
    startup = ort_shim.measure_startup() if a.peer_per_process else None
    load_before = os.getloadavg()
    results, failures = {}, []
    for name in models:
        m = os.path.join(work, name + ".onnx")
        heldout = os.path.join(work, name + ".heldout.npz")
        ref = {k: v.astype(np.float64) for k, v in load_npz(os.path.join(work, name + ".heldout_ref.npz")).items()}
        feeds = load_npz(heldout)
        calib = os.path.join(work, name + ".calib.npz")
        run([os.path.join(a.build, "amp-rewrite"), m, "-o", os.path.join(work, name + ".oplist.onnx"), "--force"])
        start = time.perf_counter()
        run([os.path.join(a.build, "amp-rewrite"), m, "-o", os.path.join(work, name + ".cal.onnx"), "--force",
             "--calibrate", calib, "--report", os.path.join(work, name + ".json")])
        wall = time.perf_counter() - start
        cal = json.load(open(os.path.join(work, name + ".json")))["calibration"]
        macs = {x["node"]: x["macs"] for x in cal["measured"] if x["macs"]}
        total = cal["macs"]["total"]
        res = {"share_oplist": cal["macs"]["low_op_list"] / total, "share_cal": cal["macs"]["low_calibrated"] / total,
               "kept": [k["node"] for k in cal["kept"]], "target": float(cal["target"]), "seconds": cal["seconds"],
               "phases": cal["seconds_by_phase"], "wall": wall, "evaluations": cal["evaluations"]}
        res["fp32_amp_run"] = error(ref, amp_run(a.build, m, heldout, work))
        judge(res, "oplist", os.path.join(work, name + ".oplist.onnx"), a.build, ref, heldout, feeds, work)
        judge(res, "cal", os.path.join(work, name + ".cal.onnx"), a.build, ref, heldout, feeds, work)
        results[name] = res
        if a.no_occ:
            continue
        calib_feeds = load_npz(calib)
        for runtime, path in (("ort", None), ("amp_run", os.path.join(a.build, "amp-run"))):
            o = occ(m, calib_feeds, res["target"], macs, os.path.join(work, "%s.occ_%s.onnx" % (name, runtime)), path)
            o["share"] = o["macs_low"] / total
            judge(o, "err", o["model"], a.build, ref, heldout, feeds, work)
            res["occ_" + runtime] = o
        if a.peer_per_process:
            o = occ(m, calib_feeds, res["target"], macs, os.path.join(work, name + ".occ_process.onnx"),
                    per_process=True)
            res["occ_process"] = o
    load_after = os.getloadavg()

    def occ_cells(o):
        if o["failure"]:
            return [o["failure"], "-", "-"]
        return [fmt(o["err_amp_run"]) + " / " + fmt(o["err_ort"]), "%.1f%%" % (100 * o["share"]),
                "%d: %s" % (len(o["kept"]), ", ".join(o["kept"]) or "-")]

    head = ["model", "E", "error, op lists (amp-run / ORT)", "ours: error (amp-run / ORT)", "ours: MACs in fp16",
            "ours: kept fp32", "OCC/ORT: error (amp-run / ORT)", "OCC/ORT: MACs in fp16", "OCC/ORT: kept fp32",
            "OCC/amp-run: error (amp-run / ORT)", "OCC/amp-run: MACs in fp16", "OCC/amp-run: kept fp32"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, res in results.items():
        row = [name, "%.3g" % res["target"], fmt(res["oplist_amp_run"]) + " / " + fmt(res["oplist_ort"]),
               fmt(res["cal_amp_run"]) + " / " + fmt(res["cal_ort"]),
               "%.1f%% (op lists %.1f%%)" % (100 * res["share_cal"], 100 * res["share_oplist"]),
               "%d: %s" % (len(res["kept"]), ", ".join(res["kept"]) or "-")]
        for runtime in ("ort", "amp_run"):
            row += occ_cells(res["occ_" + runtime]) if "occ_" + runtime in res else ["-"] * 3
        print("| " + " | ".join(row) + " |")

    print()
    head = ["model", "ours: calibration (evaluations)", "ours: amp-rewrite command", "ours: seconds by phase",
            "OCC/ORT: raw (runs)", "OCC/ORT: in ORT", "OCC/ORT: stand-in file I/O", "OCC/ORT: less file I/O",
            "speed-up (OCC/ORT less file I/O over ours)", "OCC/amp-run: raw (runs)"]
    if a.peer_per_process:
        head += ["OCC/ORT, node per run: raw", "less %.2f s start-up per run" % startup]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, res in results.items():
        row = [name, "%.3f s (%d)" % (res["seconds"], res["evaluations"]), "%.2f s" % res["wall"],
               ", ".join("%s %.3f" % (k, v) for k, v in res["phases"].items())]
        o = res.get("occ_ort")
        if o:
            adjusted = o["seconds"] - o["shim_seconds"]
            row += ["%.2f s (%d)" % (o["seconds"], o["runs"]), "%.2f s" % o["runtime_seconds"],
                    "%.2f s" % o["shim_seconds"], "%.2f s" % adjusted, "%.1fx" % (adjusted / res["seconds"])]
            p = res["occ_amp_run"]
            row += ["%.2f s (%d)" % (p["seconds"], p["runs"])]
        else:
            row += ["-"] * 6
        if a.peer_per_process:
            p = res["occ_process"]
            row += ["%.2f s (%d)" % (p["seconds"], p["runs"]), "%.2f s" % (p["seconds"] - p["runs"] * startup)]
        print("| " + " | ".join(row) + " |")
    print("\nerrors: max |y - torch float64| / max |torch float64| on %d held-out inputs, worst output; "
          "load average %.1f before, %.1f after (1 minute; %d cores); node start-up with onnxruntime-node %.2f s, "
          "once, before the clock" % (a.batch, load_before[0], load_after[0], os.cpu_count(), server_start))
    for name, res in results.items():
        print("%s: fp32 amp-run error %s" % (name, fmt(res["fp32_amp_run"])))
    print("fp16 in ONNX Runtime's CPU provider and in amp-run (GPU-faithful):")
    for line in fp16_storage(a.build, work):
        print("  " + line)
    if not a.check:
        return
    own = {name: results[UNMODIFIED.get(name, name)] for name in results if UNMODIFIED.get(name, name) in results}
    for name, res in results.items():
        if name not in own:
            continue
        base = UNMODIFIED.get(name, name)
        for where in ("amp_run", "ort"):
            if not (res["cal_" + where] <= own[name]["oplist_" + where]):
                failures.append("%s: calibrated error in %s %s is beyond %s's own fp16 error %s" % (
                    name, where, fmt(res["cal_" + where]), base, fmt(own[name]["oplist_" + where])))
        if name in UNMODIFIED and np.isfinite(res["oplist_amp_run"]) and res["oplist_amp_run"] < 1:
            failures.append("%s: the op-list rewrite did not break (%s): the model does not test calibration" % (
                name, fmt(res["oplist_amp_run"])))
        # No more multiply-adds in fp32 than any placement of the peer's that is valid by the same
        # judgement: finite and within the unmodified model's own fp16 error in amp-run and in ORT.
        for runtime in ("ort", "amp_run"):
            o = res.get("occ_" + runtime)
            if not o or o["failure"]:
                continue
            valid = all(o["err_" + w] <= own[name]["oplist_" + w] for w in ("amp_run", "ort"))
            if valid and o["share"] > res["share_cal"]:
                failures.append("%s: OCC/%s keeps %.1f%% of multiply-adds in fp16 with a valid placement, ours %.1f%%" % (
                    name, runtime, 100 * o["share"], 100 * res["share_cal"]))
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
