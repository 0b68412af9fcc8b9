// What a CUDA op is: an object made once per node (or per fused group) at compile time, asked per
// plan — one input-shape signature — for a PreparedOp that holds everything shape-dependent
// (cuBLASLt descriptors and algorithm, cuDNN descriptors, the NVRTC kernel, launch dims) and
// enqueues the work on the device's stream with the plan's fixed buffer addresses. Fixed
// addresses and no host synchronisation inside enqueue are what let a whole step be captured
// into one CUDA Graph. Each op family's file lists its ops in a CudaOpEntry table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/device_context.h"
#include "backends/cuda/layout_strides.h"
#include "backends/cuda/strided_copy.cuh"
#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/node.h"
#include "graph/tensor.h"

namespace amp::cuda {

struct TensorDesc {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  // Bytes on the device of a value whose unit stores it in a layout of its own rather than as
  // numel() elements of dtype (CudaOp::packed_output_bytes): a product's ReLU bitmask. 0 for all
  // others. Only the units that know the layout read such a value; it is never fetched or viewed.
  size_t packed_bytes = 0;
  // Stored channels-last: N, spatial..., C in memory (NHWC for 4-D), dims still in ONNX's order
  // N, C, spatial... (channels_last.h decides it per plan). False: row-major in dims' order.
  bool channels_last = false;
  // Stored with padded rows (row_pitch.h): row r of the last dim starts at element r * row_pitch,
  // row_pitch > dims.back(), and the elements between a row's end and the next row hold zeros.
  // 0: rows follow each other. Only the units that take such an operand read or write it.
  int64_t row_pitch = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  // Elements the value takes on the device: numel(), or its rows at row_pitch apart.
  int64_t stored_elements() const {
    if (!row_pitch || dims.empty() || dims.back() == 0) return numel();
    return numel() / dims.back() * row_pitch;
  }
  // What the value takes on the device.
  size_t nbytes() const {
    return packed_bytes ? packed_bytes : static_cast<size_t>(stored_elements()) * dtype_size(dtype);
  }
  // Per dim in dims' order, the distance in elements between neighbours as stored.
  std::vector<int64_t> strides() const {
    std::vector<int64_t> s = layout_strides(dims, channels_last);
    if (row_pitch && !channels_last && dims.size() >= 2) {
      int64_t step = row_pitch;
      for (size_t d = dims.size() - 1; d-- > 0;) {
        s[d] = step;
        step *= dims[d];
      }
    }
    return s;
  }
};

// The operands an op reads and writes channels-last (TensorDesc::channels_last) when it computes
// so for some shapes (CudaOp::channels_last): per input and per output, in OpShapes' order.
struct ChannelsLastOperands {
  std::vector<bool> in, out;
  bool any() const {
    for (bool b : in)
      if (b) return true;
    for (bool b : out)
      if (b) return true;
    return false;
  }
};

// bytes rounded up to the 256 that the buffers an op lays out in its workspace start at (the
// arena's and cudaMalloc's alignment, which every vector access and library call takes).
inline size_t workspace_aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Types and dims of an op's operands in this plan (null for an absent optional one), and the
// contents of inputs known on the host while planning (shape inputs, constants), else null.
struct OpShapes {
  std::vector<const TensorDesc*> in, out;
  std::vector<const Tensor*> host;  // per input
  bool tf32 = false;  // fp32 products and convolutions may use TF32 (CompileOptions::tf32)
  std::shared_ptr<const void> keep;  // owns descriptors the pointers above may point into
  bool has_in(size_t i) const { return i < in.size() && in[i]; }
  bool has_out(size_t i) const { return i < out.size() && out[i]; }
};

// One element copy an op makes for some shapes: from its input `input` to its output `output`.
struct OperandCopy {
  StridedCopy copy;
  size_t input = 0, output = 0;
};

// Device addresses of the operands and of the plan's shared scratch (workspace_bytes() of it).
struct OpBuffers {
  std::vector<const void*> in;
  std::vector<void*> out;
  void* workspace = nullptr;
  // This run's random seed, in device memory so a captured graph reads a new one every replay.
  const unsigned long long* seed = nullptr;
};

class PreparedOp {
 public:
  virtual ~PreparedOp() = default;
  virtual size_t workspace_bytes() const { return 0; }
  // Enqueues on ctx.stream(); never synchronises with the host.
  virtual void enqueue(const OpBuffers& buffers, DeviceContext& ctx) const = 0;
  // An event recorded when the op's work is done, for an op that leaves that work running on a
  // stream of its own after enqueue (the AllReduce on NCCL's stream): the step's stream waits for
  // it before the first unit that reads an output of the op, and before the step ends, and the
  // op's inputs and outputs keep their buffers until then. Null for work on ctx.stream().
  virtual cudaEvent_t completion() const { return nullptr; }
};

// A PreparedOp that is one function: most ops need nothing but their shapes captured.
class PreparedFunction final : public PreparedOp {
 public:
  using Fn = std::function<void(const OpBuffers&, DeviceContext&)>;
  explicit PreparedFunction(Fn fn, size_t workspace = 0) : fn_(std::move(fn)), workspace_(workspace) {}
  size_t workspace_bytes() const override { return workspace_; }
  void enqueue(const OpBuffers& b, DeviceContext& ctx) const override { fn_(b, ctx); }

 private:
  Fn fn_;
  size_t workspace_;
};

class CudaOp {
 public:
  virtual ~CudaOp() = default;
  // Throws InputError for shapes or types the op cannot take (the caller prefixes the node).
  virtual std::unique_ptr<PreparedOp> prepare(const OpShapes& shapes, DeviceContext& ctx) const = 0;
  // True when, for these shapes, output 0 is input 0's bytes unchanged (a reshape, a sum over
  // axes of extent 1): the plan then gives both values one buffer and launches nothing.
  virtual bool aliases_input(const OpShapes& /*shapes*/) const { return false; }
  // For an op that only moves elements (Transpose, Slice, Split, Concat, Expand), the copies it is
  // for these shapes, simplified, and nothing else runs: the plan composes a chain of such copies
  // into one and batches copies into one launch (copy_fusion.h). Empty for every other op.
  virtual std::vector<OperandCopy> element_copies(const OpShapes& /*shapes*/) const { return {}; }
  // Operands the op's kernels read or write in any float type (fp32, fp16, bf16), computing in
  // fp32 either way. The schedule lets the op absorb a Cast that widens such an input from
  // fp16/bf16, or one that narrows such an fp32 output: the kernel converts once where the Cast
  // would have, so the result is the same and one launch and one tensor's traffic are saved.
  virtual bool reads_any_float(size_t /*input*/) const { return false; }
  virtual bool writes_any_float(size_t /*output*/) const { return false; }
  // An fp32 output the kernel can also store narrowed to fp16/bf16 in the same pass: read both as
  // it is and through a narrowing Cast, it is then written once each way and never read back to
  // be converted. The copy is an extra result after the op's own (OpShapes::out, OpBuffers::out).
  virtual bool writes_narrowed_copy(size_t /*output*/) const { return false; }
  // The bytes of an output the op stores in a layout of its own for these shapes (a ReLU's bool
  // mask as cuBLASLt's bitmask: 1 bit per element), 0 for one stored as its type; and those of
  // an input it reads in such a layout. The plan sizes the value's buffer by the writer's
  // (TensorDesc::packed_bytes) and refuses a reader that does not expect exactly them: nothing
  // reads the bits as the value's type.
  virtual size_t packed_output_bytes(const OpShapes& /*shapes*/, size_t /*output*/) const { return 0; }
  virtual size_t packed_input_bytes(const OpShapes& /*shapes*/, size_t /*input*/) const { return 0; }
  // Channels-last (channels_last.h). The operands the op can take stored channels-last for these
  // shapes (all of them at once: prepare then sees exactly those with TensorDesc::channels_last
  // set, and computes so); nothing for an op that computes only in ONNX's layout, whose operands
  // prepare always sees row-major. A packed operand listed here is stored in the element order of
  // the layout its writer computes in, and is read only by units computing in the same one.
  virtual ChannelsLastOperands channels_last(const OpShapes& /*shapes*/) const { return {}; }
  // True for an op that reads and writes each operand in whatever layout it is stored, one
  // operand channels-last and the next not (the generated elementwise kernels index each operand
  // through its strides): the plan never converts an operand for it.
  virtual bool any_layout() const { return false; }
  // Padded rows (row_pitch.h): whether the op takes this input (or writes this output) stored
  // with TensorDesc::row_pitch set, as it is set in `shapes`, for these shapes. An output so
  // stored gets zeros in its padding from the op; an input so stored has them. False for every
  // op but the few that index rows themselves.
  virtual bool takes_row_pitch(const OpShapes& /*shapes*/, bool /*output*/, size_t /*operand*/) const { return false; }
};

using CudaOpFactory = std::unique_ptr<CudaOp> (*)(const Node& node, int64_t opset);

struct CudaOpEntry {
  std::string_view domain;  // "" for ONNX, "ai.onnx_amp" for the project's gradient ops
  std::string_view op;
  CudaOpFactory make;
  // Inputs the op reads on the host while planning although no shape depends on them (CumSum's
  // axis): the schedule treats them as it treats shape inputs (Schedule::shape_value), so their
  // contents are known in OpShapes::host, a new plan is made when a fed one changes, and an
  // initializer read so is a constant rather than device state.
  std::vector<int> host_inputs = {};
};

// Every op the CUDA backend runs on the device. Elementwise ops run as generated kernels
// (fused_elementwise_op.h), alone or fused; the comparisons listed here (int_compare_ops.cc) take
// only the integer operands those kernels' fp32 registers cannot hold exactly, and Mean, BitShift
// (broadcast_ops.cc), IsNaN and IsInf (float_class_ops.cc), which are not rows of the elementwise
// table, have hand-written kernels.
const std::vector<CudaOpEntry>& cuda_op_table();
const CudaOpEntry* find_cuda_op(std::string_view domain, std::string_view op);

// The family tables cuda_op_table() joins, one per op file.
const std::vector<CudaOpEntry>& matmul_ops();
const std::vector<CudaOpEntry>& data_movement_ops();
const std::vector<CudaOpEntry>& normalization_ops();
const std::vector<CudaOpEntry>& softmax_loss_ops();
const std::vector<CudaOpEntry>& reduction_ops();
const std::vector<CudaOpEntry>& convolution_ops();
const std::vector<CudaOpEntry>& training_ops();
const std::vector<CudaOpEntry>& collective_ops();
const std::vector<CudaOpEntry>& pad_ops();     // pad_ops.cc
const std::vector<CudaOpEntry>& resize_ops();  // resize_ops.cc
const std::vector<CudaOpEntry>& scatter_nd_ops();  // scatter_nd_ops.cc
const std::vector<CudaOpEntry>& einsum_ops();      // einsum_ops.cc
const std::vector<CudaOpEntry>& attention_ops();   // attention_ops.cc
const std::vector<CudaOpEntry>& int_compare_ops();  // int_compare_ops.cc
const std::vector<CudaOpEntry>& arg_extremum_ops();  // arg_extremum_ops.cc
const std::vector<CudaOpEntry>& lrn_ops();          // lrn_ops.cc
const std::vector<CudaOpEntry>& quantize_ops();     // quantize_ops.cc
const std::vector<CudaOpEntry>& cast_ops();         // cast_ops.cc
const std::vector<CudaOpEntry>& instance_norm_ops();  // instance_norm_ops.cc
const std::vector<CudaOpEntry>& top_k_ops();          // top_k_ops.cc
const std::vector<CudaOpEntry>& max_unpool_ops();     // max_unpool_ops.cc
const std::vector<CudaOpEntry>& roi_align_ops();      // roi_align_ops.cc
const std::vector<CudaOpEntry>& deform_conv_ops();    // deform_conv_ops.cc
const std::vector<CudaOpEntry>& grid_sample_ops();    // grid_sample_ops.cc
const std::vector<CudaOpEntry>& indexing_ops();     // indexing_ops.cc
const std::vector<CudaOpEntry>& float_class_ops();  // float_class_ops.cc
const std::vector<CudaOpEntry>& broadcast_ops();    // broadcast_ops.cc

template <class Op>
std::unique_ptr<CudaOp> make_op(const Node& node, int64_t opset) {
  return std::make_unique<Op>(node, opset);
}

// Runs fn; an Error it throws gets `where` (file and node) in front and keeps its kind.
template <class F>
auto at_node(const std::string& where, F&& fn) {
  try {
    return fn();
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

// Launch geometry for a grid-stride loop over n elements: enough blocks to fill the device a few
// times over, never more than the work needs.
unsigned grid_for(int64_t n, int block, const DeviceContext& ctx);

}  // namespace amp::cuda
