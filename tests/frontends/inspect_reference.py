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
print(json.dumps({
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
