// ONNX Runtime's contrib ops (its com.microsoft domain) that its own tools write into the models
// users bring: the quantizer's QOperator format and the transformer optimizer's fused ops. Each
// becomes, on load, the standard ONNX nodes that compute what ONNX Runtime defines it to compute
// (its ContribOperators documentation), so every pass and backend here reads them as ordinary
// nodes and amp-rewrite writes a model of standard ops:
//   QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearAveragePool,
//   QLinearGlobalAveragePool (channels_last forms too): DequantizeLinear of each quantized input,
//   the float op, QuantizeLinear of the result (a missing zero point is 0; uint8 for an output);
//   Gelu, BiasGelu, FastGelu (tanh form, optional bias), QuickGelu: their formulas;
//   SkipLayerNormalization, SkipSimplifiedLayerNormalization: the sum of input, skip and bias,
//   then LayerNormalization (or RMS normalization) over the last axis, the sum as the optional
//   fourth output;
//   FusedMatMul: alpha * op(A) x op(B), transA / transB on the last two axes.
// Another com.microsoft op stays and is refused later by name, as before.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace amp {

// Rewrites every such node of the model (subgraphs included); returns how many, by kind
// ("QLinearAdd x3, SkipLayerNormalization x2"), empty when none. The com.microsoft import goes
// when nothing reads it any more; a default-domain import is added (opset 17) when the model had
// none. Throws InputError naming `path` and the node for a form this does not read (FusedMatMul's
// transBatch, a rank it needs and cannot find).
std::string expand_onnx_runtime_contrib_ops(onnx::ModelProto& p, const std::string& path);

}  // namespace amp
