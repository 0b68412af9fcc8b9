// The project's own ONNX domain, "ai.onnx_amp": the gradient ops that standard ONNX has no op for
// (ConvGrad, MaxPoolGrad, ...), AllFinite / AllFiniteScaled, the one inf/NaN reduction of a
// mixed-precision step, Gelu (ONNX has it only from opset 20), Attention (opset 23), DeformConv
// (opset 19) and Col2Im (opset 18) with their gradients, and AllReduce,
// the gradient average of data-parallel training.
// Their schemas are registered with ONNX's OpSchemaRegistry (with type and shape inference), so a
// saved training graph passes onnx::checker and shape inference like any standard model.
#pragma once

namespace amp {

inline constexpr const char* kAmpDomain = "ai.onnx_amp";
inline constexpr int kAmpDomainVersion = 1;

// Registers the domain and every schema of it; safe to call any number of times from any thread.
// Call before checking or shape-inferring a model that may use the domain.
void register_amp_op_schemas();

}  // namespace amp
