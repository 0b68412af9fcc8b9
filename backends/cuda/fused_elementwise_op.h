// Elementwise work on the device: a fused group (or a single elementwise node, a group of one)
// runs as the kernel elementwise_codegen.h generates for its program and its inputs' broadcast,
// compiled by NVRTC when the plan is made. There are no hand-written elementwise kernels: every
// Add, Relu, Cast and Where goes through this one path, and the CPU evaluation of the same
// program (evaluate_elementwise_program) is its reference.
#pragma once

#include <string>

#include "backends/cuda/cuda_op.h"
#include "passes/fusion/elementwise_program.h"

namespace amp::cuda {

class FusedElementwiseOp final : public CudaOp {
 public:
  explicit FusedElementwiseOp(ElementwiseProgram program) : program_(std::move(program)) {}
  // The iteration space is the outputs' dims (all outputs share them); every input must
  // broadcast into it. InputError for more than kFusedMaxRank dims.
  std::unique_ptr<PreparedOp> prepare(const OpShapes& shapes, DeviceContext& ctx) const override;
  const ElementwiseProgram& program() const { return program_; }

 private:
  ElementwiseProgram program_;
};

// Groups with one program as one launch (generate_multi_tensor_kernel): the AdamW update of every
// parameter, say. Operands are the groups' operands in turn: the inputs of group 0, of group 1,
// ..., then the outputs likewise. Every input of every group is read at the element's index or is
// a scalar; the schedule batches only such groups.
class MultiTensorFusedOp final : public CudaOp {
 public:
  MultiTensorFusedOp(ElementwiseProgram program, int groups) : program_(std::move(program)), groups_(groups) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& shapes, DeviceContext& ctx) const override;
  const ElementwiseProgram& program() const { return program_; }
  int groups() const { return groups_; }

 private:
  ElementwiseProgram program_;
  int groups_;
};

}  // namespace amp::cuda
