// Elementwise work on the device: a fused group (or a single elementwise node, a group of one)
// runs as the kernel elementwise_codegen.h generates for its program and its inputs' broadcast,
// compiled by NVRTC when the plan is made. There are no hand-written elementwise kernels: every
// Add, Relu, Cast and Where goes through this one path, and the CPU evaluation of the same
// program (evaluate_elementwise_program) is its reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/elementwise_codegen.h"
#include "graph/ops/elementwise_program.h"

namespace amp::cuda {

// How one fused group is launched, apart from any device: its kernel, how it reads each input,
// and its by-value arguments. prepare() launches exactly this; tests run the same kernel source
// and arguments on the host (tests/backends/cuda_codegen_host_test.cc).
struct FusedLaunch {
  GeneratedKernel kernel;
  std::vector<InputIndexing> indexing;  // per input
  long long n = 0;                      // elements of the iteration space
  FusedDims dims{};
  std::vector<FusedStrides> strides;    // per input; the kernel takes those of kBroadcast inputs
  // cudaLaunchKernel's argument array, in the generated signature's order: &n, &dims, then per
  // input &ins[k] (and &strides[k] when broadcast), then per output &outs[k]. It points into this
  // object, ins and outs, which must outlive it.
  std::vector<void*> args(const std::vector<const void*>& ins, const std::vector<void*>& outs) const;
};
// The launch over the outputs' dims (all alike) of inputs of dims in_dims. InputError for more
// than kFusedMaxRank dims or inputs that broadcast beyond the outputs' dims.
FusedLaunch plan_fused_launch(const ElementwiseProgram& program, const std::vector<std::vector<int64_t>>& in_dims,
                              const std::vector<std::vector<int64_t>>& out_dims);
// The same over operands stored in their own layouts (TensorDesc::channels_last): the iteration
// space walks the outputs' storage order (all outputs stored alike), and an input stored
// otherwise is read through its strides, so a kernel at a channels-last region's edge transposes
// as it computes.
FusedLaunch plan_fused_launch(const ElementwiseProgram& program, const std::vector<const TensorDesc*>& in,
                              const std::vector<const TensorDesc*>& out);

// How one multi-tensor launch runs groups (MultiTensorFusedOp below), apart from any device.
struct MultiTensorLaunch {
  MultiTensorKernel mt;
  std::vector<std::vector<InputIndexing>> indexing;  // per program: how its groups read each input
  std::vector<size_t> in_at, out_at;  // where each group's operands start; groups + 1 entries
  std::vector<int64_t> counts;        // per group, its elements
  std::vector<int> variant_of_group;
  int64_t largest = 0;                // the most elements of a group: the grid covers these
  size_t groups() const { return counts.size(); }
  // The FusedTaskList argument of the launch of groups [first, first + capacity): capacity slots
  // of 8-byte words, then the count of the slots used. ins/outs: every group's operands in turn.
  std::vector<uint64_t> task_list(size_t first, const std::vector<const void*>& ins,
                                  const std::vector<void*>& outs) const;
};
MultiTensorLaunch plan_multi_tensor_launch(const std::vector<ElementwiseProgram>& programs,
                                           const std::vector<int>& variant_of_group,
                                           const std::vector<std::vector<int64_t>>& in_dims,
                                           const std::vector<std::vector<int64_t>>& out_dims);

class FusedElementwiseOp final : public CudaOp {
 public:
  explicit FusedElementwiseOp(ElementwiseProgram program) : program_(std::move(program)) {}
  // The iteration space is the outputs' dims (all outputs share them); every input must
  // broadcast into it. InputError for more than kFusedMaxRank dims.
  std::unique_ptr<PreparedOp> prepare(const OpShapes& shapes, DeviceContext& ctx) const override;
  bool any_layout() const override { return true; }
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
