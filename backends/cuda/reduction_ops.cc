// ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd / ReduceL1 / ReduceL2 / ReduceSumSquare /
// ReduceLogSum, GlobalAveragePool, GlobalMaxPool and the project's SumToShape
// (the gradient of a broadcast) as ReducePlans (reduce.cuh), ReduceLogSumExp as a block per output
// (log_sum_exp.cuh): which axes are reduced is settled while planning, from attributes or from
// operands known on the host.
#include <algorithm>

#include "backends/cuda/channels_last_operands.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/log_sum_exp.cuh"
#include "backends/cuda/reduce.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

std::unique_ptr<PreparedOp> reduction(const TensorDesc& x, const std::vector<bool>& reduced, ReduceKind kind,
                                      const DeviceContext& ctx) {
  auto plan = std::make_shared<ReducePlan>(x.dtype, x.dims, reduced, kind, ctx.sm_count());
  return std::make_unique<PreparedFunction>(
      [plan](const OpBuffers& b, DeviceContext& c) { plan->enqueue(b.in[0], b.out[0], b.workspace, c.stream()); },
      plan->workspace_bytes());
}

// True when every reduced axis has extent 1: the reduction moves no element.
bool only_unit_axes(const TensorDesc& x, const std::vector<bool>& reduced) {
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d] && x.dims[d] != 1) return false;
  return true;
}

class Reduce final : public CudaOp {
 public:
  Reduce(const Node& n, int64_t opset)
      : kind_(n.op_type() == "ReduceMean" ? ReduceKind::kMean
              : n.op_type() == "ReduceMax" ? ReduceKind::kMax
              : n.op_type() == "ReduceMin" ? ReduceKind::kMin
              : n.op_type() == "ReduceProd" ? ReduceKind::kProd
              : n.op_type() == "ReduceL1" ? ReduceKind::kL1
              : n.op_type() == "ReduceL2" ? ReduceKind::kL2
              : n.op_type() == "ReduceSumSquare" ? ReduceKind::kSumSquare
              : n.op_type() == "ReduceLogSum" ? ReduceKind::kLogSum
                                            : ReduceKind::kSum),
        log_sum_exp_(n.op_type() == "ReduceLogSumExp"),
        axes_attr_(n.attr_ints("axes")),
        // ReduceSum takes axes as an input from opset 13, the others from opset 18.
        axes_input_(n.op_type() == "ReduceSum" ? opset >= 13 : opset >= 18),
        noop_with_empty_axes_(n.attr_int("noop_with_empty_axes", 0) != 0) {}

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (log_sum_exp_) {
      const TensorDesc& x = *s.in[0];
      if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16)
        throw InputError("ReduceLogSumExp on cuda takes float, float16 or bfloat16, not " +
                         std::string(dtype_name(x.dtype)));
      const AxisGroups groups = axis_groups(x.dims, reduced_axes(s));
      const DType t = x.dtype;
      return std::make_unique<PreparedFunction>([groups, t](const OpBuffers& b, DeviceContext& c) {
        reduce_log_sum_exp(t, groups, b.in[0], b.out[0], c.sm_count(), c.stream());
      });
    }
    return reduction(*s.in[0], reduced_axes(s), kind_, ctx);
  }
  // Over axes of extent 1 sum, mean, max, min and product are the identity (a mean divides by 1);
  // the norm-like kinds are not (|x|, x^2, log x), nor is LogSumExp at -0 (-0 + log 1 is +0).
  bool aliases_input(const OpShapes& s) const override {
    const bool identity = !log_sum_exp_ && (kind_ == ReduceKind::kSum || kind_ == ReduceKind::kMean ||
                                            kind_ == ReduceKind::kMax || kind_ == ReduceKind::kMin ||
                                            kind_ == ReduceKind::kProd);
    return identity && only_unit_axes(*s.in[0], reduced_axes(s));
  }

 private:
  std::vector<bool> reduced_axes(const OpShapes& s) const {
    const TensorDesc& x = *s.in[0];
    std::vector<int64_t> axes = axes_attr_;
    if (axes_input_ && s.has_in(1)) {
      if (!s.host[1]) throw InputError("axes must be known before the run");
      axes.clear();
      for (int64_t k = 0; k < s.host[1]->numel(); ++k) axes.push_back(static_cast<int64_t>(s.host[1]->element(k)));
    }
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    std::vector<bool> reduced(x.dims.size(), axes.empty() && !noop_with_empty_axes_);
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) throw InputError("axis " + std::to_string(a) + " is out of range");
      reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    }
    return reduced;
  }

  ReduceKind kind_;
  bool log_sum_exp_;
  std::vector<int64_t> axes_attr_;
  bool axes_input_, noop_with_empty_axes_;
};

// GlobalAveragePool and GlobalMaxPool: a mean or max over every dim after N and C. A 16-bit
// [N, C, H, W] input may be channels-last (channels_last.h: the last block of an image model,
// pooled into its head): it is reduced as the [N, H, W, C] it is stored as, over H and W, and
// the [N, C, 1, 1] result is the same bytes in either layout.
class GlobalPool final : public CudaOp {
 public:
  GlobalPool(const Node& n, int64_t) : kind_(n.op_type() == "GlobalMaxPool" ? ReduceKind::kMax : ReduceKind::kMean) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& x = *s.in[0];
    if (x.channels_last) return reduction(TensorDesc{x.dtype, stored_dims(x)}, {false, true, true, false}, kind_, ctx);
    std::vector<bool> reduced(x.dims.size(), true);
    reduced[0] = false;
    if (reduced.size() > 1) reduced[1] = false;
    return reduction(x, reduced, kind_, ctx);
  }
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    return channels_last_case(*s.in[0]) ? listed_operands(s, {0}, {0}) : ChannelsLastOperands{};
  }

 private:
  ReduceKind kind_;
};

// ai.onnx_amp SumToShape(X, shape): X summed over the axes a tensor of `shape` was broadcast along.
// Autodiff puts one after every op that may broadcast; most broadcast nothing at run time, and
// those are the same bytes (aliases_input), not a launch.
class SumToShape final : public CudaOp {
 public:
  SumToShape(const Node&, int64_t) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    return reduction(*s.in[0], reduced_axes(s), ReduceKind::kSum, ctx);
  }
  bool aliases_input(const OpShapes& s) const override { return only_unit_axes(*s.in[0], reduced_axes(s)); }

 private:
  static std::vector<bool> reduced_axes(const OpShapes& s) {
    const TensorDesc& x = *s.in[0];
    const std::vector<int64_t>& target = s.out[0]->dims;
    if (target.size() > x.dims.size()) throw InputError("SumToShape: the target has more dims than X");
    std::vector<bool> reduced(x.dims.size(), false);
    const size_t lead = x.dims.size() - target.size();
    for (size_t d = 0; d < x.dims.size(); ++d)
      reduced[d] = d < lead || (target[d - lead] == 1 && x.dims[d] != 1);
    return reduced;
  }
};

}  // namespace

const std::vector<CudaOpEntry>& reduction_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "ReduceSum", make_op<Reduce>},
      {"", "ReduceMean", make_op<Reduce>},
      {"", "ReduceMax", make_op<Reduce>},
      {"", "ReduceMin", make_op<Reduce>},
      {"", "ReduceProd", make_op<Reduce>},  // keras2onnx's Tensordot: the product of a shape's dims
      {"", "ReduceL1", make_op<Reduce>},
      {"", "ReduceL2", make_op<Reduce>},
      {"", "ReduceSumSquare", make_op<Reduce>},
      {"", "ReduceLogSum", make_op<Reduce>},
      {"", "ReduceLogSumExp", make_op<Reduce>},
      {"", "GlobalAveragePool", make_op<GlobalPool>},
      {"", "GlobalMaxPool", make_op<GlobalPool>},
      {kAmpDomain, "SumToShape", make_op<SumToShape>},
  };
  return ops;
}

}  // namespace amp::cuda
