"""Independent figures for amp-inspect --json, computed with python3-onnx from the file itself."""
import json
import sys
from collections import Counter

import numpy as np
import onnx

# Bytes per element by TensorProto.DataType, from the ONNX spec (numpy has no bfloat16).
ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2}
model = onnx.load(sys.argv[1])
g = model.graph
init_names = {t.name for t in g.initializer}
ops = Counter((n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in g.node)
params = 0
nbytes = 0
for t in g.initializer:
    n = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    params += n
    if t.data_type != onnx.TensorProto.STRING:
        nbytes += n * ITEMSIZE[t.data_type]
# Per-node precision: the element type of the node's first floating output, after ONNX's own
# shape inference, named as ONNX names types.
inferred = onnx.shape_inference.infer_shapes(model)
types = {v.name: v.type.tensor_type.elem_type for v in
         list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
FLOAT_NAMES = {1: "float", 10: "float16", 11: "double", 16: "bfloat16"}
precisions = Counter()
for n in g.node:
    for o in n.output:
        if types.get(o) in FLOAT_NAMES:
            precisions[FLOAT_NAMES[types[o]]] += 1
            break

print(json.dumps({
    "node_precisions": dict(precisions),
    "nodes": len(g.node),
    "ops": dict(ops),
    "parameters": params,
    "parameter_bytes": nbytes,
    "inputs": [i.name for i in g.input if i.name not in init_names],
    "outputs": [o.name for o in g.output],
    "casts": sum(1 for n in g.node if n.op_type == "Cast" and n.domain in ("", "ai.onnx")),
    "ir_version": model.ir_version,
    "opsets": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
}))
