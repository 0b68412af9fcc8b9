"""Independent reading of an amp-rewrite output with python3-onnx: ONNX's full check, the Cast
count, graph input/output and initializer types, and per node its decision record (doc_string line
"amp: <precision> <rule>: <reason>") next to the element types ONNX's shape inference gives its
floating outputs."""
import json
import sys

import onnx

TYPE_NAMES = {1: "float", 10: "float16", 11: "double", 16: "bfloat16"}
model = onnx.load(sys.argv[1])
try:
    onnx.checker.check_model(model, full_check=True)
    check = ""
except Exception as e:  # noqa: BLE001 - the message is the result
    check = str(e)
inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
g = inferred.graph
types = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.output) + list(g.input)}
types.update({t.name: t.data_type for t in g.initializer})
nodes = {}
for n in g.node:
    record = [line for line in n.doc_string.split("\n") if line.startswith("amp: ")]
    floats = sorted({TYPE_NAMES[types[o]] for o in n.output if types.get(o) in TYPE_NAMES})
    nodes[n.name] = {"op": n.op_type, "record": record[0] if record else "", "float_outputs": floats}
print(json.dumps({
    "check": check,
    "casts": sum(n.op_type == "Cast" for n in g.node),
    "inputs": {v.name: v.type.tensor_type.elem_type for v in g.input},
    "outputs": {v.name: v.type.tensor_type.elem_type for v in g.output},
    "initializer_types": sorted({TYPE_NAMES.get(t.data_type, str(t.data_type)) for t in g.initializer}),
    "metadata": {p.key: p.value for p in model.metadata_props},
    "nodes": nodes,
}))
