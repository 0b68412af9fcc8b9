// Chains of element copies composed while planning, and copies that run back to back batched into
// one launch.
//
// Transpose, Slice, Split, Concat and Expand are each strided copies (CudaOp::element_copies), and
// an attention layer chains them. Its forward splits the qkv product's [N,T,3C] output into q, k
// and v and transposes each into heads ([N,H,T,D], k as [N,H,D,T]); its backward transposes the
// three gradients back and concatenates them into [N,T,3C]. Each copy is a launch and a full write
// and read of its tensor: at N = T = 32, C = 64 in fp16, 4 launches moving 1.5 MiB per layer each
// way. With the shapes known, the plan composes such chains: a copy that reads another copy's
// output reads that copy's source instead, with composed strides and offset (read_through), so
// the transposes read q, k and v out of qkv, and the Concat's copies read the three gradients
// where the transposes did. A copy output left without a reader (that is no target) is not made
// and gets no buffer: the Split does not run, nor do the backward transposes. Copies then back to
// back in the run order and independent of each other run as one launch (strided_copies): per
// layer each way, 1 launch moving 0.75 MiB.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/strided_copy.cuh"

namespace amp::cuda {

struct Schedule;
struct ShapePlan;

// What `reader` copies when its source is the output of `producer` (which writes all of it, row
// by row), read from the producer's source directly: one copy, simplified. Nullopt where no single
// copy does it: a dim of the reader that steps across the producer's dims unevenly (a walk of 3
// elements 2 apart over a dim of 3 carries into the next), a producer that writes its output
// strided, element sizes that differ, or more than kMaxCopyDims dims.
std::optional<StridedCopy> read_through(const StridedCopy& reader, const StridedCopy& producer);

// The launch of copies between an op's operands: strided_copies over all of them.
std::unique_ptr<PreparedOp> prepare_copies(std::vector<OperandCopy> copies);

// The op of a copy unit the plan made: its copies, between the unit's operands.
class CopiesOp final : public CudaOp {
 public:
  explicit CopiesOp(std::vector<OperandCopy> copies) : copies_(std::move(copies)) {}
  std::vector<OperandCopy> element_copies(const OpShapes&) const override { return copies_; }
  std::unique_ptr<PreparedOp> prepare(const OpShapes&, DeviceContext&) const override {
    return prepare_copies(copies_);
  }

 private:
  std::vector<OperandCopy> copies_;
};

// Over a plan's run order (after choose_views): composes every copy that reads a copy's output
// when all readers of that output can, which then is neither made nor kept (a target, state or a
// value anything but a copy reads stays as it is); then merges copy units next to each other in
// the order, none reading what another writes, into one. Units, views and steps that no longer
// run leave the plan; new units live in p.copies. Their operands are the buffers they read and
// write: a unit may write several disjoint parts of one value (a Concat's output).
void fuse_copies(const Schedule& s, ShapePlan& p, const std::vector<int>& targets);

}  // namespace amp::cuda
