// Under CastPlacement::kCompute (amp-rewrite's default), a linear layer as PyTorch exports it for
// batched input — MatMul(A, W) of an A of rank 3 or more with a 2-D weight W [K, N], then Add of a
// bias [N] — whose A comes from an fp32 op while the product runs low is rewritten on 2-D rows:
//   A -> Flatten(axis=-1) -> MatMul(., W) -> Add(., bias) -> Reshape(A's leading dims + [N])
// so that the rewrite's Cast of A lands between the fp32 Flatten and the product.
//
// Why: ONNX Runtime fuses MatMul + Add into one Gemm, and for an A of rank 3 or more it inserts
// Reshapes of its own around it; its CPU provider computes float16 nodes in float32 and removes the
// Cast pairs that meet, but a float16 Reshape between the rewrite's Cast to float16 and the Gemm
// keeps that Cast's rounding (a LayerNorm's output rounded before every MLP and projection, which
// onnxconverter-common's all-float16 graph, with no Cast there, does not have). Flattened first, the
// Cast meets ONNX Runtime's Cast and both go. Every value is the same in a runtime that computes
// float16 ops in float16 (the rows are multiplied alone either way; Flatten and Reshape move data).
//
// Decided from a preliminary colouring with the same policy: the MatMul and the Add run low and A's
// producer is not low (an fp32 op, or an fp32 graph input under keep_io_types). A of rank 2 (or
// below) is left alone; an unknown rank is flattened (Flatten of a 2-D A changes nothing). The
// leading dims come from an initializer when A's shape knows them, else from Shape(A, end=-1). Main
// graph only; the MatMul's product and the Add's result must have no other reader and not be graph
// outputs. Needs opset 15 (Shape's end; the import brings models to 17).
#pragma once

#include "passes/amp/amp_policy.h"
#include "passes/pass.h"

namespace amp {

class FlattenLinearPass : public Pass {
 public:
  explicit FlattenLinearPass(const AmpPolicy& policy) : policy_(policy) {}
  std::string name() const override { return "flatten-linear"; }
  std::string summary() const override {
    return "run batched MatMul + bias on 2-D rows where a Cast to the low type lands on the input (cast "
           "placement 'compute')";
  }
  bool run(Model& m) override;

 private:
  const AmpPolicy& policy_;
};

}  // namespace amp
