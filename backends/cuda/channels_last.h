// Channels-last (NHWC) for 16-bit convolution chains, decided per plan without a device.
//
// cuDNN's 16-bit Tensor Core convolutions and its convolution + BatchNorm fusion engines take
// N, H, W, C data; ONNX's tensors are N, C, H, W. Run as they are, every 16-bit convolution has
// cuDNN transpose its operands inside (4.3 ms of the bf16 ResNet-50 step on an H100) and cuDNN
// builds none of the fused graphs. So a plan stores the values between such units channels-last
// (TensorDesc::channels_last) and converts only at the boundaries of these regions:
//
// - A unit whose op lists operands it takes channels-last for its shapes (CudaOp::channels_last:
//   the 16-bit convolutions, pools and BatchNorm units) is a candidate.
// - A value stays row-major (pinned) when anything needs its ONNX layout: it is fed, fetched, a
//   state update or state, known on the host, a view or a view's root, of fewer than 3 dims, or
//   read or written by a unit that is neither a candidate listing it nor an elementwise kernel
//   (CudaOp::any_layout, which reads and writes each operand in whatever layout it is stored).
// - Every other value a candidate lists is stored channels-last, and so is an elementwise
//   kernel's output when one of its inputs of the same dims is (a gradient summed between two
//   convolutions stays channels-last).
// - A candidate computes channels-last when one of the data operands it lists is stored so. An
//   operand stored in the other layout than its unit computes in is transposed around the unit
//   (into the plan's shared scratch before it runs, back out after): the boundaries, counted in
//   the plan (conversions()) and shown by `amp-inspect --cuda-plan`. A packed operand (a ReLU
//   mask's bits in memory order) cannot be transposed: its writer and readers then compute alike,
//   row-major where they disagree.
// - Elementwise kernels never convert: they index each operand through its own strides.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/schedule.h"

namespace amp::cuda {

// Sets p.desc[v].channels_last and p.channels_last (the units that compute so, with the operands
// they take so). targets: the values fetched or written to state; fed: per value, the tensor fed.
// Nothing changes when no unit is a candidate (every fp32 plan).
void decide_channels_last(const Schedule& s, ShapePlan& p, const std::vector<int>& targets,
                          const std::vector<const Tensor*>& fed);

// Per value, whether a unit of `units` would read or write it channels-last for these shapes (an
// operand its op lists in CudaOp::channels_last, whose two layouts are not the same bytes). While
// grouping, an elementwise group reading or writing such a value stays a kernel of its own, which
// reads and writes each operand in its own layout (a batched multi-tensor kernel takes ONNX's, so
// the unit at the other end would transpose): the Cast of an image model's input and of its 3x3
// filters, the optimizer's update of those filters. All false when the schedule keeps ONNX's
// layout.
std::vector<bool> touched_channels_last(const Schedule& s, const ShapePlan& p, const std::vector<const Unit*>& units);

// One operand of a unit stored in the other layout than the unit computes in.
struct LayoutConversion {
  bool output = false;  // an output: transposed out after the unit runs; an input: in before
  size_t operand = 0;   // its position among the unit's inputs or outputs
  int value = -1;
  bool unit_channels_last = false;  // the layout the unit takes it in (it is stored in the other)
  size_t bytes = 0;               // the operand's bytes: each conversion reads and writes them once
};

// The conversions around u in plan p, inputs first.
std::vector<LayoutConversion> conversions(const ShapePlan& p, const Unit& u);

// The operand descriptors u's op is prepared with: each listed operand in the layout the unit
// computes in (the stored layout for an elementwise kernel).
OpShapes compute_shapes(const ShapePlan& p, const Unit& u);

// u's op prepared for plan p: as the op prepares itself when nothing is converted, else wrapped
// so that the converted operands are transposed through the shared scratch around it.
std::unique_ptr<PreparedOp> prepare_unit(const ShapePlan& p, const Unit& u, bool tf32, DeviceContext& ctx);

}  // namespace amp::cuda
