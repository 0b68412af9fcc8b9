// Models at default-domain opsets 18 to 24, newer than this build's ONNX library (1.12, which knows
// the ops up to opset 17): torch 2's exporters, ONNX Runtime's tools and current converters write
// them. Most ops did not change after 17, or changed only in the element types they accept (float8,
// int4, bfloat16 for more ops). The ones whose inputs or attributes changed are rewritten here into
// their opset-17 form, which computes the same, and the model's default opset becomes 17; every
// later step (checker, shape inference, import) then sees an opset-17 model. A node with no
// opset-17 form (Reduce axes computed in the graph, Pad's wrap mode, Resize's antialias, float8 or
// int4 types...) is refused in one line naming the file, node, op and opset, except the new ops
// this project computes (BitwiseAnd, DeformConv, ScatterElements' max reduction, ... : those whose
// schema graph/amp_ops.cc registers): they are carried into the ai.onnx_amp domain as they are.
// Opsets 23 and 24 added ops ONNX defines by function bodies (Attention, RMSNormalization,
// RotaryEmbedding, Swish, TensorScatter): they become those computations in opset-17 ops, with the
// dims ONNX's shape inference finds for their inputs (the attention recogniser then fuses the
// attention again).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace amp {

// The newest default-domain opset a model may import (its nodes are read as opset-17 nodes).
constexpr int64_t kNewestReadableOpset = 24;

// Rewrites a model whose default opset is 18..kNewestReadableOpset to opset 17. Returns
// one note per kind of change made ("ReduceMean: axes input -> attribute (3 nodes)"); throws
// InputError naming `path`, the node and its op for what has no opset-17 form.
std::vector<std::string> lower_to_opset_17(onnx::ModelProto& p, const std::string& path);

// Whether a node of this domain and op is one lower_to_opset_17 carried into ai.onnx_amp: a model
// that has one cannot be written back as opset 17 (amp-rewrite refuses it; amp-run runs it).
bool is_carried_newer_op(const std::string& domain, const std::string& op);

// Writes the nodes lower_to_opset_17 carried into ai.onnx_amp that opset-17 ops can compute, for a
// model written as opset 17: BitwiseAnd / Or / Xor / Not as arithmetic on their bits, Col2Im with
// constant shapes as a ScatterElements that adds the columns into the image, ScatterElements and
// ScatterND with reduction max / min and declared shapes as a comparison of the indices with every
// row. Returns how many.
// InputError naming `path`, the node and its op when a bitwise input's integer type is not declared.
int expand_carried_ops(onnx::ModelProto& p, const std::string& path);

// IR versions 9 and 10 (ONNX 1.14-1.17) added element types (float8, int4, uint4) and fields for
// model-local function overloads and metadata; a model that uses none of the types is read as IR
// 8, ONNX 1.12's. Returns whether the version changed; throws InputError naming `path` and the
// value of a type IR 8 lacks.
bool lower_ir_version(onnx::ModelProto& p, const std::string& path);

}  // namespace amp
