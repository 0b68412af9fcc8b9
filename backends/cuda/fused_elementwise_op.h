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

// Groups as one launch (generate_multi_tensor_kernel): the AdamW update of every parameter, say.
// Each group runs one of the programs (its variant): the groups sharing a program are alike in
// types and in how they read each input. Operands are the groups' operands in turn: the inputs of
// group 0, of group 1, ..., then the outputs likewise, each group with its program's counts. Every
// input of every group is read at the element's index or is a scalar; the schedule batches only
// such groups.
class MultiTensorFusedOp final : public CudaOp {
 public:
  MultiTensorFusedOp(std::vector<ElementwiseProgram> programs, std::vector<int> variant_of_group)
      : programs_(std::move(programs)), variant_of_group_(std::move(variant_of_group)) {}
  MultiTensorFusedOp(ElementwiseProgram program, int groups)
      : programs_{std::move(program)}, variant_of_group_(static_cast<size_t>(groups), 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& shapes, DeviceContext& ctx) const override;
  const std::vector<ElementwiseProgram>& programs() const { return programs_; }
  const std::vector<int>& variant_of_group() const { return variant_of_group_; }
  int groups() const { return static_cast<int>(variant_of_group_.size()); }

 private:
  std::vector<ElementwiseProgram> programs_;
  std::vector<int> variant_of_group_;
};

}  // namespace amp::cuda
