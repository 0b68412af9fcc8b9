// Softmax, LogSoftmax and the fused softmax cross-entropy loss with its gradient (softmax.cuh,
// cross_entropy.cuh).
#include "backends/cuda/softmax_loss_ops.h"

#include "backends/cuda/cross_entropy.cuh"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/softmax.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

int64_t normalize_axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) throw InputError("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

class Softmax final : public CudaOp {
 public:
  // Before opset 13 the default axis is 1 and the softmax runs over the flattened dims from the
  // axis on (one row of all of them), as the CPU backend's softmax.cc does.
  Softmax(const Node& n, int64_t opset)
      : flatten_(opset < 13), axis_(n.attr_int("axis", opset < 13 ? 1 : -1)), log_(n.op_type() == "LogSoftmax") {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in[0];
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, x.dims.size()));
    int64_t outer = 1, inner = 1, len = 1;
    for (size_t d = 0; d < axis; ++d) outer *= x.dims[d];
    for (size_t d = axis; d < x.dims.size(); ++d) (flatten_ || d == axis ? len : inner) *= x.dims[d];
    const DType x_type = x.dtype, y_type = s.out[0]->dtype;
    const bool copy = s.has_out(1);  // the narrowed copy (writes_narrowed_copy)
    const DType copy_type = copy ? s.out[1]->dtype : DType::kUndefined;
    const bool log = log_;
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& ctx) {
      softmax_forward(x_type, y_type, b.in[0], b.out[0], outer, len, inner, log, ctx.stream(), copy ? b.out[1] : nullptr,
                      copy_type);
    });
  }
  bool reads_any_float(size_t input) const override { return input == 0; }
  bool writes_any_float(size_t output) const override { return output == 0; }
  bool writes_narrowed_copy(size_t output) const override { return output == 0; }

 private:
  bool flatten_;
  int64_t axis_;
  bool log_;
};

// ai.onnx_amp SoftmaxGrad(dY, Y) -> dX, along one axis as opset-13 Softmax.
class SoftmaxGrad final : public CudaOp {
 public:
  SoftmaxGrad(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& y = *s.in[1];
    if (s.in[0]->dims != y.dims) throw InputError("dY and Y differ in shape");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, y.dims.size()));
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= y.dims[d];
    for (size_t d = axis + 1; d < y.dims.size(); ++d) inner *= y.dims[d];
    const int64_t len = y.dims.empty() ? 1 : y.dims[axis];
    const DType y_type = y.dtype, dy_type = s.in[0]->dtype, dx_type = s.out[0]->dtype;
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& ctx) {
      softmax_backward(y_type, dy_type, dx_type, b.in[0], b.in[1], b.out[0], outer, len, inner, ctx.stream());
    });
  }
  bool reads_any_float(size_t input) const override { return input == 0; }
  bool writes_any_float(size_t output) const override { return output == 0; }

 private:
  int64_t axis_;
};

CrossEntropyShape loss_shape(const Node& n) {
  CrossEntropyShape s;
  const std::string r = n.attr_string("reduction", "mean");
  if (r == "none") s.reduction = LossReduction::kNone;
  else if (r == "sum") s.reduction = LossReduction::kSum;
  else if (r == "mean") s.reduction = LossReduction::kMean;
  else throw InputError("reduction '" + r + "' is not none, sum or mean");
  if (n.attr("ignore_index")) s.ignore_index = n.attr_int("ignore_index", 0);
  return s;
}

// type: the loss's (and weights', dloss's) type; the scores may be stored in another (an absorbed
// widening Cast: CudaOp::reads_any_float).
void fill_dims(CrossEntropyShape& s, const TensorDesc& scores, const TensorDesc& labels, DType type) {
  if (scores.dims.size() < 2) throw InputError("scores need a class axis: [N, C, ...]");
  s.type = type;
  s.score_type = scores.dtype;
  s.label_type = labels.dtype;
  s.n = scores.dims[0];
  s.classes = scores.dims[1];
  s.inner = 1;
  for (size_t d = 2; d < scores.dims.size(); ++d) s.inner *= scores.dims[d];
  s.score_pitch = scores.row_pitch;
  if (s.score_pitch && scores.dims.size() != 2) throw Error("internal: padded rows of scores with dims after the classes");
}

// [N, C] scores (classes the last axis, one row a block) may be stored with padded rows, and so
// may their gradient (row_pitch.h): GPT-2's [tokens, 50257] scores.
bool rows_of_classes(const TensorDesc* scores) { return scores && scores->dims.size() == 2; }

// SoftmaxCrossEntropyLoss(scores, labels, [weights]) -> loss, [log_prob]; merged with an ArgMax
// over the same [N, C] scores' classes (loss_argmax_fusion.h), also -> the ArgMax's indices.
class CrossEntropy final : public CudaOp {
 public:
  CrossEntropy(const Node& n, int64_t) : base_(loss_shape(n)) {}
  CrossEntropy(const Node& loss, const Node& argmax) : base_(loss_shape(loss)), argmax_(true) {
    base_.argmax_last = argmax.attr_int("select_last_index", 0) != 0;
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    CrossEntropyShape shape = base_;
    fill_dims(shape, *s.in[0], *s.in[1], s.out[0]->dtype);
    const bool weighted = s.has_in(2), log_prob = s.has_out(1);
    const bool argmax = argmax_;
    if (argmax) {
      if (!s.has_out(2) || s.out[2]->dtype != DType::kInt64 || s.out[2]->numel() != shape.n || shape.inner != 1)
        throw Error("internal: the loss's ArgMax needs [N, C] scores and N int64 indices");
    }
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& ctx) {
          cross_entropy_forward(shape, b.in[0], b.in[1], weighted ? b.in[2] : nullptr, b.out[0],
                                log_prob ? b.out[1] : nullptr, b.workspace, ctx.stream(),
                                argmax ? static_cast<int64_t*>(b.out[2]) : nullptr);
        },
        cross_entropy_workspace(shape));
  }
  // A step's 16-bit scores are widened for the loss (mixed precision keeps it fp32); the kernel
  // widens them as it reads, so a GPT-2 step's [tokens, 50257] scores are not stored again in fp32.
  bool reads_any_float(size_t input) const override { return input == 0; }
  bool takes_row_pitch(const OpShapes& s, bool output, size_t operand) const override {
    return !output && operand == 0 && rows_of_classes(s.in.at(0));
  }

 private:
  CrossEntropyShape base_;
  bool argmax_ = false;
};

// ai.onnx_amp SoftmaxCrossEntropyLossGrad(dLoss, scores, labels, [weights]) -> dScores
class CrossEntropyGrad final : public CudaOp {
 public:
  CrossEntropyGrad(const Node& n, int64_t) : base_(loss_shape(n)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    CrossEntropyShape shape = base_;
    fill_dims(shape, *s.in[1], *s.in[2], s.in[0]->dtype);
    if (shape.score_type != shape.type && shape.type != DType::kFloat)
      throw InputError("dLoss and scores differ in type");
    shape.grad_type = s.out[0]->dtype;
    shape.grad_pitch = s.out[0]->row_pitch;
    if (shape.grad_pitch && s.out[0]->dims.size() != 2) throw Error("internal: padded rows of dScores with dims after the classes");
    const bool weighted = s.has_in(3);
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& ctx) {
          cross_entropy_backward(shape, b.in[0], b.in[1], b.in[2], weighted ? b.in[3] : nullptr, b.out[0], b.workspace,
                                 ctx.stream());
        },
        cross_entropy_workspace(shape));
  }
  bool writes_any_float(size_t output) const override { return output == 0; }
  bool reads_any_float(size_t input) const override { return input == 1; }
  bool takes_row_pitch(const OpShapes& s, bool output, size_t operand) const override {
    return operand == (output ? 0u : 1u) && rows_of_classes(s.in.at(1));
  }

 private:
  CrossEntropyShape base_;
};

}  // namespace

std::unique_ptr<CudaOp> make_cross_entropy_with_argmax(const Node& loss, const Node& argmax) {
  return std::make_unique<CrossEntropy>(loss, argmax);
}

const std::vector<CudaOpEntry>& softmax_loss_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "Softmax", make_op<Softmax>},
      {"", "LogSoftmax", make_op<Softmax>},
      {"", "SoftmaxCrossEntropyLoss", make_op<CrossEntropy>},
      {kAmpDomain, "SoftmaxCrossEntropyLossGrad", make_op<CrossEntropyGrad>},
      {kAmpDomain, "SoftmaxGrad", make_op<SoftmaxGrad>},
  };
  return ops;
}

}  // namespace amp::cuda
