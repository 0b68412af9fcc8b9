// LayerNormalization (and ai.onnx_amp LayerNormalizationGrad) on the hand-written kernels of
// layernorm.cu; training-mode BatchNormalization and BatchNormalizationGrad on the kernels of
// batch_norm_relu.cu without their ReLU (fp32 statistics whatever the data type, as cuDNN's);
// inference-mode BatchNormalization on cuDNN. The BatchNorms also compute channels-last
// (CudaOp::channels_last) for 16-bit [N, C, H, W] data, between the convolutions that store it
// so (cuDNN reads the layout from the descriptor's strides).
//
// cuDNN's training-mode calls (cudnnBatchNormalizationForwardTraining and Backward, SPATIAL) ran
// efficientnet_b0's row-major bf16 BatchNorms at batch 128 at 10-45 GB/s on an H200 (2026-11-28:
// 263 ms of its 348 ms step, PyTorch's whole step 44 ms); AMP_CUDA_CUDNN_BATCH_NORM=1 puts them
// back, for comparison.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/batch_norm_relu_fusion.h"
#include "backends/cuda/channels_last_operands.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/layernorm.cuh"
#include "backends/cuda/normalization_ops.h"
#include "backends/cuda/reduce.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

void split_rows(const std::vector<int64_t>& dims, int64_t axis_attr, int64_t* rows, int64_t* cols) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis_attr < -rank || axis_attr >= rank) throw InputError("axis " + std::to_string(axis_attr) + " is out of range");
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  *rows = 1;
  *cols = 1;
  for (size_t d = 0; d < dims.size(); ++d) (d < axis ? *rows : *cols) *= dims[d];
}

// The residual units' generated kernels (layer_norm_residual_fusion.h), where an operand broadcasts:
// a + b in sum_type and, unless `narrowed` is kUndefined, that sum narrowed to it as a second
// result; and x converted to another type.
ElementwiseProgram sum_program(DType a, DType b, DType sum_type, DType narrowed) {
  ElementwiseProgram p;
  const int sum = p.add_op(ElemOp::kAdd, {p.add_input(a), p.add_input(b)}, sum_type);
  p.outputs = {sum};
  if (narrowed != DType::kUndefined) p.outputs.push_back(p.add_op(ElemOp::kCast, {sum}, narrowed));
  p.check();
  return p;
}

ElementwiseProgram cast_program(DType from, DType to) {
  ElementwiseProgram p;
  p.outputs = {p.add_op(ElemOp::kCast, {p.add_input(from)}, to)};
  p.check();
  return p;
}

// program's generated kernel over operands `in` and results `out`, none read on the host.
std::shared_ptr<PreparedOp> generated(const ElementwiseProgram& program, std::vector<const TensorDesc*> in,
                                      std::vector<const TensorDesc*> out, DeviceContext& ctx) {
  OpShapes shapes;
  shapes.in = std::move(in);
  shapes.host.assign(shapes.in.size(), nullptr);
  shapes.out = std::move(out);
  return FusedElementwiseOp(program).prepare(shapes, ctx);
}

// LayerNormalization(X, Scale, [B]) -> Y, [Mean], [InvStdDev]; with the residual stream's Add before
// it (layer_norm_residual_fusion.h), (X, Scale, [B], O) -> Y, [Mean], [InvStdDev], [X + O]: the
// rows normalized are X + O in fp32, stored as the fourth result where the graph reads the sum.
class LayerNorm final : public CudaOp {
 public:
  LayerNorm(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)), epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (s.has_in(3)) return prepare_residual(s, ctx);
    const TensorDesc& x = *s.in[0];
    int64_t rows, cols;
    split_rows(x.dims, axis_, &rows, &cols);
    if (s.has_in(2) && s.in[2]->dtype != s.in[1]->dtype) throw InputError("Scale and B must share one type on cuda");
    if (s.in[1]->numel() != cols) throw InputError("Scale must cover the normalized dims (broadcast scales are not supported on cuda)");
    for (size_t k = 1; k < 3; ++k)
      if (s.has_out(k) && s.out[k]->dtype != DType::kFloat)
        throw InputError("Mean and InvStdDev are kept in float (stash_type 1) on cuda");
    // X and Y are of Scale's type, or of any float type around float parameters (absorbed Casts).
    const DType t = s.in[1]->dtype, x_type = x.dtype, y_type = s.out[0]->dtype;
    if ((x_type != t || y_type != t) && t != DType::kFloat) throw InputError("X, Scale and Y must share one type on cuda");
    const float eps = epsilon_;
    const bool bias = s.has_in(2), mean = s.has_out(1), inv_std = s.has_out(2);
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
      layernorm_forward(t, x_type, y_type, b.in[0], b.in[1], bias ? b.in[2] : nullptr, b.out[0],
                        mean ? static_cast<float*>(b.out[1]) : nullptr, inv_std ? static_cast<float*>(b.out[2]) : nullptr,
                        rows, cols, eps, c.stream());
    });
  }
  bool reads_any_float(size_t input) const override { return input == 0; }
  bool writes_any_float(size_t output) const override { return output == 0; }

 private:
  // X + O summed in the kernel where both are X's shape and the rows fit its registers; else the
  // Add as a generated kernel (broadcasting as the graph's does) into the sum, then the LayerNorm.
  std::unique_ptr<PreparedOp> prepare_residual(const OpShapes& s, DeviceContext& ctx) const {
    const TensorDesc& x = *s.in[0];
    const TensorDesc& o = *s.in[3];
    const bool keep_sum = s.has_out(3);
    const TensorDesc sum_desc{DType::kFloat, keep_sum ? s.out[3]->dims : x.dims};
    if (keep_sum && s.out[3]->dtype != DType::kFloat) throw InputError("the residual's sum before a LayerNorm is float on cuda");
    OpShapes norm = s;  // the LayerNorm of the sum
    norm.in = {&sum_desc, s.in[1], s.has_in(2) ? s.in[2] : nullptr};
    norm.host = {nullptr, nullptr, nullptr};
    norm.out = {s.out[0], s.has_out(1) ? s.out[1] : nullptr, s.has_out(2) ? s.out[2] : nullptr};
    int64_t rows, cols;
    split_rows(x.dims, axis_, &rows, &cols);
    if (o.dims == x.dims && sum_desc.dims == x.dims && layernorm_forward_adds(cols)) {
      // The plain LayerNorm's checks and launch, reading x and o.
      if (s.in[1]->numel() != cols) throw InputError("Scale must cover the normalized dims (broadcast scales are not supported on cuda)");
      if (s.has_in(2) && s.in[2]->dtype != s.in[1]->dtype) throw InputError("Scale and B must share one type on cuda");
      const DType t = s.in[1]->dtype, x_type = x.dtype, y_type = s.out[0]->dtype, o_type = o.dtype;
      if (t != DType::kFloat) throw InputError("a LayerNorm after a float residual Add has float Scale on cuda");
      const float eps = epsilon_;
      const bool bias = s.has_in(2), mean = s.has_out(1), inv_std = s.has_out(2);
      return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
        layernorm_forward(t, x_type, y_type, b.in[0], b.in[1], bias ? b.in[2] : nullptr, b.out[0],
                          mean ? static_cast<float*>(b.out[1]) : nullptr, inv_std ? static_cast<float*>(b.out[2]) : nullptr,
                          rows, cols, eps, c.stream(), b.in[3], o_type, keep_sum ? static_cast<float*>(b.out[3]) : nullptr);
      });
    }
    std::shared_ptr<PreparedOp> adder =
        generated(sum_program(x.dtype, o.dtype, DType::kFloat, DType::kUndefined), {&x, &o}, {&sum_desc}, ctx);
    std::shared_ptr<PreparedOp> layer_norm = prepare(norm, ctx);  // norm has no O: the plain LayerNorm
    const size_t sum_at = workspace_aligned(layer_norm->workspace_bytes());
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          void* summed = keep_sum ? b.out[3] : static_cast<uint8_t*>(b.workspace) + sum_at;
          adder->enqueue(OpBuffers{{b.in[0], b.in[3]}, {summed}}, c);
          OpBuffers n{{summed, b.in[1], b.in[2]}, {b.out[0], b.out[1], b.out[2]}, b.workspace};
          layer_norm->enqueue(n, c);
        },
        keep_sum ? layer_norm->workspace_bytes() : sum_at + sum_desc.nbytes());
  }

  int64_t axis_;
  float epsilon_;
};

// ai.onnx_amp LayerNormalizationGrad(dY, X, Scale) -> dX, [dScale], [dB]; with the residual
// stream's gradient (layer_norm_residual_fusion.h), (dY, X, Scale, R) -> dX + R, [dScale], [dB],
// [(dX + R) narrowed to 16 bits].
class LayerNormGrad final : public CudaOp {
 public:
  LayerNormGrad(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)), epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& x = *s.in[1];
    int64_t rows, cols;
    split_rows(x.dims, axis_, &rows, &cols);
    // dY and dX are of X's type, or of any float type around float X and Scale (absorbed Casts).
    const DType t = x.dtype, dy_type = s.in[0]->dtype, dx_type = s.out[0]->dtype;
    if (s.in[2]->dtype != t || ((dy_type != t || dx_type != t) && t != DType::kFloat))
      throw InputError("dY, X, Scale and dX must share one type on cuda");
    // The kernel reads scale[c] for every c < cols: a smaller (broadcast) Scale would be read past its end.
    if (s.in[2]->numel() != cols) throw InputError("Scale must cover the normalized dims (broadcast scales are not supported on cuda)");
    const float eps = epsilon_;
    const bool dscale = s.has_out(1), dbias = s.has_out(2);
    const size_t workspace = layernorm_backward_workspace(rows, cols, ctx.sm_count());
    if (!s.has_in(3))
      return std::make_unique<PreparedFunction>(
          [=](const OpBuffers& b, DeviceContext& c) {
            layernorm_backward(t, dy_type, dx_type, b.in[0], b.in[1], b.in[2], b.out[0], dscale ? b.out[1] : nullptr,
                               dbias ? b.out[2] : nullptr, rows, cols, eps, b.workspace, c.sm_count(), c.stream());
          },
          workspace);
    // The residual's sum in the kernel where it is dX's shape in fp32; else dX into scratch and
    // the Add (and its Cast) as a generated kernel, broadcasting as the graph's Add does.
    const TensorDesc& r = *s.in[3];
    const bool narrowed = s.has_out(3);
    const DType narrowed_type = narrowed ? s.out[3]->dtype : DType::kUndefined;
    const bool narrowed_as_sum = !narrowed || s.out[3]->dims == s.out[0]->dims;
    if (dx_type == DType::kFloat && r.dtype == DType::kFloat && r.dims == x.dims && s.out[0]->dims == x.dims &&
        narrowed_as_sum)
      return std::make_unique<PreparedFunction>(
          [=](const OpBuffers& b, DeviceContext& c) {
            layernorm_backward(t, dy_type, dx_type, b.in[0], b.in[1], b.in[2], b.out[0], dscale ? b.out[1] : nullptr,
                               dbias ? b.out[2] : nullptr, rows, cols, eps, b.workspace, c.sm_count(), c.stream(),
                               static_cast<const float*>(b.in[3]), narrowed ? b.out[3] : nullptr, narrowed_type);
          },
          workspace);
    const bool narrow_in_kernel = narrowed && narrowed_as_sum;
    const TensorDesc dx_desc{dx_type, x.dims};
    std::vector<const TensorDesc*> results = {s.out[0]};
    if (narrow_in_kernel) results.push_back(s.out[3]);
    std::shared_ptr<PreparedOp> kernel =
        generated(sum_program(dx_type, r.dtype, s.out[0]->dtype, narrow_in_kernel ? narrowed_type : DType::kUndefined),
                  {&dx_desc, &r}, results, ctx);
    const size_t dx_at = workspace_aligned(workspace);
    size_t bytes = dx_at + dx_desc.nbytes();
    // A narrowed copy of another shape: the absorbed SumToShape sums the broadcast dims (in fp32,
    // into scratch), then the Cast narrows.
    std::shared_ptr<ReducePlan> reduce;
    std::shared_ptr<PreparedOp> narrow;
    size_t summed_at = 0;
    if (narrowed && !narrowed_as_sum) {
      const std::vector<int64_t>& from = s.out[0]->dims;
      std::vector<int64_t> to = s.out[3]->dims;
      while (to.size() < from.size()) to.insert(to.begin(), 1);
      std::vector<bool> reduced(from.size());
      for (size_t d = 0; d < from.size(); ++d) {
        if (to[d] != from[d] && to[d] != 1) throw InputError("SumToShape's target does not broadcast to the sum");
        reduced[d] = to[d] != from[d];
      }
      reduce = std::make_shared<ReducePlan>(s.out[0]->dtype, from, reduced, ReduceKind::kSum, ctx.sm_count());
      const TensorDesc summed{s.out[0]->dtype, s.out[3]->dims};
      narrow = generated(cast_program(s.out[0]->dtype, narrowed_type), {&summed}, {s.out[3]}, ctx);
      summed_at = workspace_aligned(std::max(bytes, reduce->workspace_bytes()));
      bytes = summed_at + summed.nbytes();
    }
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          void* dx = static_cast<uint8_t*>(b.workspace) + dx_at;
          layernorm_backward(t, dy_type, dx_type, b.in[0], b.in[1], b.in[2], dx, dscale ? b.out[1] : nullptr,
                             dbias ? b.out[2] : nullptr, rows, cols, eps, b.workspace, c.sm_count(), c.stream());
          OpBuffers k{{dx, b.in[3]}, {b.out[0]}};
          if (narrowed && !reduce) k.out.push_back(b.out[3]);
          kernel->enqueue(k, c);
          if (reduce) {
            void* summed = static_cast<uint8_t*>(b.workspace) + summed_at;
            reduce->enqueue(b.out[0], summed, b.workspace, c.stream());
            narrow->enqueue(OpBuffers{{summed}, {b.out[3]}}, c);
          }
        },
        bytes);
  }
  bool reads_any_float(size_t input) const override { return input == 0; }
  bool writes_any_float(size_t output) const override { return output == 0; }

 private:
  int64_t axis_;
  float epsilon_;
};

std::vector<int64_t> nchw(const std::vector<int64_t>& dims) {
  if (dims.size() < 2) throw InputError("BatchNormalization needs [N, C, ...] input");
  std::vector<int64_t> d = {dims[0], dims[1], 1, 1};
  for (size_t k = 2; k < dims.size(); ++k) d[2] *= dims[k];
  return d;
}

struct BnDescriptors {
  std::shared_ptr<CudnnTensor> x, params;
};

// x's descriptor: [N, C, the rest as one dim, 1], or (channels-last, 4-D only) [N, C, H, W] with
// NHWC's strides. The data operands (x, y; dY, dX) share it: the plan hands them in one layout.
BnDescriptors bn_descriptors(const TensorDesc& x, const TensorDesc& scale) {
  if (scale.dtype != DType::kFloat)
    throw InputError("BatchNormalization's scale, bias and statistics must be float on cuda (cuDNN keeps them in fp32)");
  const std::vector<int64_t> d = nchw(x.dims);
  if (x.channels_last && x.dims.size() != 4) throw InputError("channels-last BatchNormalization takes [N, C, H, W] data");
  auto params = std::make_shared<CudnnTensor>(DType::kFloat, std::vector<int64_t>{1, d[1], 1, 1});
  if (x.channels_last) return {std::make_shared<CudnnTensor>(x.dtype, x.dims, true), params};
  return {std::make_shared<CudnnTensor>(x.dtype, d), params};
}

// Whether training-mode BatchNorms and their gradients run on cuDNN (AMP_CUDA_CUDNN_BATCH_NORM=1)
// instead of batch_norm_relu.cu's kernels.
bool cudnn_batch_norm() {
  return env_flag("AMP_CUDA_CUDNN_BATCH_NORM");
}

// The data operands listed channels-last for 16-bit [N, C, H, W] x (per-channel ones never are).
ChannelsLastOperands bn_channels_last(const OpShapes& s, const TensorDesc& x, std::initializer_list<size_t> inputs) {
  return channels_last_case(x) ? listed_operands(s, inputs, {0}) : ChannelsLastOperands{};
}

// BatchNormalization(X, scale, B, input_mean, input_var) -> Y, [running_mean, running_var]
class BatchNorm final : public CudaOp {
 public:
  BatchNorm(const Node& n, int64_t)
      : epsilon_(n.attr_float("epsilon", 1e-5f)),
        momentum_(n.attr_float("momentum", 0.9f)),
        training_(n.attr_int("training_mode", 0) != 0) {}
  // X and Y.
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    return bn_channels_last(s, *s.in[0], {0});
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    one_layout(s, {0}, {0}, "BatchNormalization");
    const BnDescriptors d = bn_descriptors(*s.in[0], *s.in[1]);
    for (size_t i = 2; i < 5; ++i)
      if (s.in[i]->dtype != DType::kFloat)
        throw InputError("BatchNormalization's scale, bias and statistics must be float on cuda (cuDNN keeps them in fp32)");
    const double eps = epsilon_;
    const size_t stat_bytes = s.in[3]->nbytes();
    if (!training_)
      return std::make_unique<PreparedFunction>([d, eps](const OpBuffers& b, DeviceContext& c) {
        const float one = 1.0f, zero = 0.0f;
        AMP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x->get(),
                                                                b.in[0], d.x->get(), b.out[0], d.params->get(), b.in[1],
                                                                b.in[2], b.in[3], b.in[4], eps));
      });
    if (!s.has_out(1) || !s.has_out(2))
      throw InputError("training-mode BatchNormalization needs its running_mean and running_var outputs on cuda");
    if (s.out[0]->dtype != s.in[0]->dtype || s.out[0]->dims != s.in[0]->dims)
      throw InputError("BatchNormalization's X and Y must share one type and shape on cuda");
    for (size_t i = 1; i < 5; ++i)
      if (s.in[i]->numel() != s.in[0]->dims[1])
        throw InputError("BatchNormalization's scale, bias and statistics must have one value per channel");
    if (!cudnn_batch_norm()) {
      // y = bn(x) with the batch's statistics, the running ones blended by ONNX's rule (with the
      // biased variance): batch_norm_relu_forward without its ReLU.
      BatchNormReluForward a;
      a.t = s.in[0]->dtype;
      a.g = channel_geometry(*s.in[0]);
      a.epsilon = epsilon_;
      a.momentum = momentum_;
      a.relu = false;
      const int sm = ctx.sm_count();
      return std::make_unique<PreparedFunction>(
          [a, sm](const OpBuffers& b, DeviceContext& c) {
            batch_norm_relu_forward(bound_batch_norm(a, b, true, true), b.workspace, sm, c.stream());
          },
          batch_norm_relu_workspace(a.g, sm));
    }
    // ONNX (and the CPU backend): running = input * momentum + batch * (1 - momentum), with the
    // biased batch variance (sum / m over the m = N*H*W values of a channel). cuDNN's running
    // variance takes the unbiased one (sum / (m - 1), PyTorch's running_var): 3% off for a
    // BatchNorm1d over 32 rows. So cuDNN writes the batch statistics alone (factor 1, into zeroed
    // outputs: 0 * garbage could be NaN) and two cudnnAddTensor blends make the running ones,
    // the variance's batch term scaled back by (m - 1) / m. Y is normalized with the biased
    // variance either way.
    const std::vector<int64_t> x4 = nchw(s.in[0]->dims);
    const double m = static_cast<double>(x4[0] * x4[2]);
    const float keep = momentum_, take_mean = static_cast<float>(1.0 - static_cast<double>(momentum_)),
                take_var = m > 1 ? static_cast<float>((1.0 - static_cast<double>(momentum_)) * (m - 1) / m) : 0.0f;
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
      const float one = 1.0f, zero = 0.0f;
      AMP_CUDA_CHECK(cudaMemsetAsync(b.out[1], 0, stat_bytes, c.stream()));
      AMP_CUDA_CHECK(cudaMemsetAsync(b.out[2], 0, stat_bytes, c.stream()));
      AMP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x->get(),
                                                             b.in[0], d.x->get(), b.out[0], d.params->get(), b.in[1],
                                                             b.in[2], 1.0, b.out[1], b.out[2], eps, nullptr, nullptr));
      AMP_CUDNN_CHECK(cudnnAddTensor(c.cudnn(), &keep, d.params->get(), b.in[3], &take_mean, d.params->get(), b.out[1]));
      AMP_CUDNN_CHECK(cudnnAddTensor(c.cudnn(), &keep, d.params->get(), b.in[4], &take_var, d.params->get(), b.out[2]));
    });
  }

 private:
  float epsilon_, momentum_;
  bool training_;
};

// ai.onnx_amp BatchNormalizationGrad(dY, X, scale) -> dX, [dScale], [dBias]; batch statistics
// recomputed from X (cuDNN does so when no saved mean is passed).
class BatchNormGrad final : public CudaOp {
 public:
  BatchNormGrad(const Node& n, int64_t) : epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  // dY, X and dX.
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    return bn_channels_last(s, *s.in[1], {0, 1});
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    one_layout(s, {0, 1}, {0}, "BatchNormalizationGrad");
    const BnDescriptors d = bn_descriptors(*s.in[1], *s.in[2]);
    const double eps = epsilon_;
    const size_t param_bytes = s.in[2]->nbytes();
    const bool dscale = s.has_out(1), dbias = s.has_out(2);
    const TensorDesc& x = *s.in[1];
    for (const TensorDesc* t : {s.in[0], s.out[0]})
      if (t->dtype != x.dtype || t->dims != x.dims)
        throw InputError("BatchNormalizationGrad's dY, X and dX must share one type and shape on cuda");
    for (size_t k : {1, 2})
      if (s.has_out(k) && s.out[k]->dtype != DType::kFloat)
        throw InputError("BatchNormalizationGrad's parameter gradients must be float on cuda");
    if (s.in[2]->numel() != x.dims[1]) throw InputError("BatchNormalizationGrad's scale must have one value per channel");
    if (!cudnn_batch_norm()) {
      // batch_norm_relu_backward without a mask: g = dY.
      BatchNormReluBackward a;
      a.t = x.dtype;
      a.g = channel_geometry(x);
      a.epsilon = epsilon_;
      const int sm = ctx.sm_count();
      return std::make_unique<PreparedFunction>(
          [a, dscale, dbias, sm](const OpBuffers& b, DeviceContext& c) {
            BatchNormReluBackward run = a;
            run.dy = b.in[0];
            run.x = b.in[1];
            run.scale = static_cast<const float*>(b.in[2]);
            run.dx = b.out[0];
            run.dscale = dscale ? static_cast<float*>(b.out[1]) : nullptr;
            run.dbias = dbias ? static_cast<float*>(b.out[2]) : nullptr;
            batch_norm_relu_backward(run, b.workspace, sm, c.stream());
          },
          batch_norm_relu_workspace(a.g, sm));
    }
    // cuDNN always writes both parameter gradients; absent ones land in the workspace.
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          const float one = 1.0f, zero = 0.0f;
          void* ds = dscale ? b.out[1] : b.workspace;
          void* db = dbias ? b.out[2] : static_cast<uint8_t*>(b.workspace) + param_bytes;
          AMP_CUDNN_CHECK(cudnnBatchNormalizationBackward(c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                          d.x->get(), b.in[1], d.x->get(), b.in[0], d.x->get(), b.out[0],
                                                          d.params->get(), b.in[2], ds, db, eps, nullptr, nullptr));
        },
        2 * param_bytes);
  }

 private:
  float epsilon_;
};

}  // namespace

std::unique_ptr<CudaOp> make_layer_norm_grad(const Node& grad) { return std::make_unique<LayerNormGrad>(grad, 0); }
std::unique_ptr<CudaOp> make_layer_norm(const Node& norm) { return std::make_unique<LayerNorm>(norm, 0); }

const std::vector<CudaOpEntry>& normalization_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "LayerNormalization", make_op<LayerNorm>},
      {kAmpDomain, "LayerNormalizationGrad", make_op<LayerNormGrad>},
      {"", "BatchNormalization", make_op<BatchNorm>},
      {kAmpDomain, "BatchNormalizationGrad", make_op<BatchNormGrad>},
  };
  return ops;
}

}  // namespace amp::cuda
