#!/usr/bin/python3
"""What ONNX Runtime's CPU provider computes when it runs a float16 model: does it run
onnxconverter-common's all-float16 graph nearly in float32, with only the weights rounded?

    PYTHONPATH=/path/to/onnxconverter-common /usr/bin/python3 tests/python/ort_fp16_evidence.py \\
        --build build --work DIR [--inputs 8] [--amp-run] MODEL...

For each zoo MODEL (its eval export in DIR/MODEL, made by compare_onnxconverter_common.py or
here), over the same inputs as compare_onnxconverter_common.py --inputs N (the export's, then
N-1 drawn) and against the same reference (the float32 export in ONNX Runtime at its default
optimization level), the mean / max of max|output - reference| / max|reference| of:

  weights-only       the float32 export with its float initializers rounded to float16 and back
                     (still a float32 model: only the stored weights lose precision)
  + constants        the same, and the float tensors of its Constant nodes rounded too (all the
                     values a float16 conversion stores in float16)
  occ / amp          onnxconverter-common's and onnx_amp's float16.convert_float_to_float16
                     (keep_io_types=True; written to DIR/MODEL/occ.onnx and amp.onnx each run) in
                     ONNX Runtime at its default level ("all") and with graph optimizations
                     disabled (run_model.js's ORT_GRAPH_OPTIMIZATION=disabled)
  amp-run            (--amp-run) the same two models in amp-run, which rounds every float16
                     node's result to float16 as a GPU does

on how many of the inputs amp's error in ONNX Runtime (default level) is at most occ's, and, from
the graph each ONNX Runtime session ran (run_model.js's ORT_OPTIMIZED_MODEL), how many
of its nodes compute in float16 (a float16 output; Casts not counted) and how many Casts it has.
If weights-only ~ occ in ONNX Runtime, ONNX Runtime ran onnxconverter-common's graph nearly in
float32.
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))

import compare_onnxconverter_common as compare  # noqa: E402  (users_script, inputs)
from zoo_check import ort_run  # noqa: E402

FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16)


def round_weights(src, dst, constants):
    """src with every float initializer (and, with constants, every float Constant value) rounded
    to float16 and back to float32."""
    m = onnx.load(src)

    def rounded(t):
        if t.data_type != TensorProto.FLOAT:
            return t
        r = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name)
        return r
    for i, t in enumerate(m.graph.initializer):
        m.graph.initializer[i].CopyFrom(rounded(t))
    if constants:
        for n in m.graph.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        a.t.CopyFrom(rounded(a.t))
    onnx.save(m, dst)


def ort_optimized_graph(model, work, level=None):
    """(the graph ONNX Runtime ran for `model` on the input last written to work/ort_in by
    zoo_check.ort_run, {value name: element type}, each node's element type in node order). Its saved graph has no types for most values
    (and contrib ops onnx cannot infer), so they are propagated here in node order: a Cast makes its
    'to', Shape / Size / ArgMax / ArgMin / NonZero int64, any other node the type of its first float
    input (else of its first input)."""
    path = os.path.join(work, "ort_optimized.onnx")
    env = dict(os.environ, ORT_OPTIMIZED_MODEL=path)
    if level:
        env["ORT_GRAPH_OPTIMIZATION"] = level
    ins, outs = os.path.join(work, "ort_in"), os.path.join(work, "ort_graph_out")
    shutil.rmtree(outs, ignore_errors=True)
    subprocess.run(["node", os.path.join(ROOT, "tests", "ort", "run_model.js"), model, ins, outs], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    g = onnx.load(path).graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.input) + list(g.value_info) + list(g.output)}
    types.update({i.name: i.data_type for i in g.initializer})
    node_types = []
    for n in g.node:
        if n.op_type == "Cast":
            t = next(a.i for a in n.attribute if a.name == "to")
        elif n.op_type in ("Shape", "Size", "ArgMax", "ArgMin", "NonZero"):
            t = TensorProto.INT64
        else:
            known = [types[i] for i in n.input if i in types]
            t = next((k for k in known if k in FLOATS), known[0] if known else None)
        node_types.append(t)
        for o in n.output:
            types.setdefault(o, t)
    return g, types, node_types


def rounding_sites(g, types):
    """The op types whose float32 results ONNX Runtime's graph `g` rounds to float16 and keeps
    rounded: a Cast to float16 of a float32 value read by something other than a Cast (a float16
    Reshape or Transpose it runs as it is), by producer op type."""
    producers = {o: n for n in g.node for o in n.output}
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    sites = collections.Counter()
    for n in g.node:
        if n.op_type == "Cast" and next(a.i for a in n.attribute if a.name == "to") == TensorProto.FLOAT16 and \
                types.get(n.input[0]) == TensorProto.FLOAT and \
                any(r.op_type != "Cast" for r in readers[n.output[0]]):
            p = producers.get(n.input[0])
            sites[p.op_type if p else "graph input"] += 1
    return sites


def ort_graph(model, work, level):
    """(float16 nodes, nodes with a float output, Casts, {op type: float16 nodes}) of the graph ONNX
    Runtime ran."""
    g, _, node_types = ort_optimized_graph(model, work, level)
    low = counted = casts = 0
    ops = collections.Counter()
    for n, t in zip(g.node, node_types):
        if n.op_type == "Cast":
            casts += 1
        elif t in FLOATS:
            counted += 1
            low += t == TensorProto.FLOAT16
            ops[n.op_type] += t == TensorProto.FLOAT16
    return low, counted, casts, {k: v for k, v in ops.most_common() if v}


def amp_run(build, model, name, x, work):
    feeds, out = os.path.join(work, "ev_in.npz"), os.path.join(work, "ev_out.npz")
    np.savez(feeds, **{name: x})
    subprocess.run([os.path.join(build, "amp-run"), model, "--inputs", feeds, "--outputs", out, "--threads", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with np.load(out) as z:
        return z[z.files[0]].astype(np.float64)


def cell(errors):
    return "%.2e / %.2e" % (np.mean(errors), np.max(errors))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--build", required=True, help="a folder with amp-run and python/onnx_amp")
    p.add_argument("--work", required=True, help="the zoo exports' folder (DIR/MODEL/eval.onnx ...)")
    p.add_argument("--inputs", type=int, default=8)
    p.add_argument("--amp-run", action="store_true", help="also the float16 models in amp-run")
    p.add_argument("--per-input", action="store_true",
                   help="also each input's errors in ONNX Runtime at its default level (weights-only, occ, amp)")
    o = p.parse_args()
    build = os.path.abspath(o.build)
    sys.path.insert(0, os.path.join(build, "python"))
    from onnx_amp import float16 as ours
    from onnxconverter_common import float16 as theirs
    cols = ["weights-only", "+ constants", "occ, ORT all", "occ, ORT disabled", "amp, ORT all", "amp, ORT disabled"]
    if o.amp_run:
        cols += ["occ, amp-run", "amp, amp-run"]
    print("mean / max over %d inputs of max|y - fp32 export in ORT| / max|fp32 export in ORT|" % o.inputs)
    print("| model | " + " | ".join(cols) + " | inputs where amp <= occ (ORT all) | ORT's graph: fp16 nodes / float "
          "nodes, Casts (occ all; occ disabled; amp all; amp disabled) |")
    print("|---|" + "---|" * (len(cols) + 2))
    notes = []
    for model in o.models:
        d = os.path.join(o.work, model)
        if not os.path.exists(os.path.join(d, "eval_ref.npz")):
            from zoo_check import MIN_SIZE
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "zoo", "zoo_reference.py"), model, d,
                            "--eval", "--size", str(MIN_SIZE.get(model, 64))], check=True, stdout=subprocess.DEVNULL)
        paths = {"eval": os.path.join(d, "eval.onnx")}
        for tag, module in (("occ", theirs), ("amp", ours)):
            paths[tag] = os.path.join(d, tag + ".onnx")
            with warnings.catch_warnings():  # converted each run: a model another build left is not measured
                warnings.simplefilter("ignore")
                compare.users_script(module, paths["eval"], paths[tag])
        for tag, constants in (("weights", False), ("weights_constants", True)):
            paths[tag] = os.path.join(d, tag + ".onnx")
            if not os.path.exists(paths[tag]):
                round_weights(paths["eval"], paths[tag], constants)
        x0 = np.load(os.path.join(d, "eval_input.npz"))["input"]
        name = onnx.load(paths["eval"], load_external_data=False).graph.input[0].name
        runs = [("weights", None), ("weights_constants", None), ("occ", None), ("occ", "disabled"), ("amp", None),
                ("amp", "disabled")]
        errors = {k: [] for k in range(len(runs) + (2 if o.amp_run else 0))}
        for x in compare.inputs(x0, o.inputs):
            ref, why = ort_run(paths["eval"], x, d)
            if ref is None:
                raise SystemExit(why)
            scale = np.abs(ref).max()
            for k, (tag, level) in enumerate(runs):
                got, _ = ort_run(paths[tag], x, d, level)
                errors[k].append(float(np.abs(got - ref).max() / scale))
            if o.amp_run:
                for k, tag in enumerate(("occ", "amp")):
                    errors[len(runs) + k].append(float(np.abs(amp_run(build, paths[tag], name, x, d) - ref).max() / scale))
        graphs = [ort_graph(paths[tag], d, level) for tag, level in runs[2:]]
        occ_all, amp_all = errors[2], errors[4]
        paired = sum(a <= b for a, b in zip(amp_all, occ_all))
        print("| %s | %s | %d of %d | %s |" % (model, " | ".join(cell(errors[k]) for k in sorted(errors)), paired,
                                              len(amp_all), "; ".join("%d / %d, %d" % g[:3] for g in graphs)), flush=True)
        if o.per_input:
            for i, (w, oc, am) in enumerate(zip(errors[0], errors[2], errors[4])):
                notes.append("%s input %d: weights-only %.3e, occ %.3e, amp %.3e" % (model, i, w, oc, am))
        notes.append("%s: the float16 nodes of ONNX Runtime's graph by op type: %s" % (model, "; ".join(
            "%s %s %s" % (tag, level or "all", ", ".join("%s %d" % kv for kv in g[3].items()) or "none")
            for (tag, level), g in zip(runs[2:], graphs))))
    print()
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
