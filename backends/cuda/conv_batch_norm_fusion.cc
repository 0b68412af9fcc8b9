#include "backends/cuda/conv_batch_norm_fusion.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/batch_norm_relu_fusion.h"
#include "backends/cuda/channels_last_operands.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/convolution_graph_tuning.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_convolution_graph.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/node_patterns.h"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// A Conv's window as written on the node, for 2 spatial dims, group 1, no auto_pad and symmetric
// pads (what the matcher lets through).
struct ConvWindow {
  std::vector<int64_t> pads, strides, dilations;
  bool operator==(const ConvWindow& o) const {
    return pads == o.pads && strides == o.strides && dilations == o.dilations;
  }
};

std::optional<ConvWindow> simple_window(const Node* conv) {
  if (conv->attr_string("auto_pad", "NOTSET") != "NOTSET" || conv->attr_int("group", 1) != 1) return std::nullopt;
  // ConvGrad's W is input 2, Conv's input 1.
  const Value* w = conv->input(conv->domain() == kAmpDomain ? 2 : 1);
  const std::vector<int64_t> kernel = conv->attr_ints("kernel_shape");
  const bool two_spatial = kernel.empty() ? w->type().shape && w->type().shape->rank() == 4 : kernel.size() == 2;
  if (!two_spatial) return std::nullopt;
  ConvWindow win;
  win.strides = conv->attr_ints("strides");
  win.dilations = conv->attr_ints("dilations");
  const std::vector<int64_t> pads = conv->attr_ints("pads");
  if (win.strides.empty()) win.strides = {1, 1};
  if (win.dilations.empty()) win.dilations = {1, 1};
  if (!pads.empty() && (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])) return std::nullopt;
  win.pads = pads.empty() ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{pads[0], pads[1]};
  if (win.strides.size() != 2 || win.dilations.size() != 2) return std::nullopt;
  return win;
}

bool no_bias(const Node* conv) { return conv->inputs().size() < 3 || !conv->input(2); }

// t's memory as the BatchNorm kernels see it (channel_geometry), for [N, C, H, W] only.
ChannelGeometry geometry(const TensorDesc& t) {
  if (t.dims.size() != 4) throw InputError("the fused convolution takes [N, C, H, W] tensors");
  return channel_geometry(t);
}

bool sixteen_bit(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Whether the legacy convolution op the unit falls back on (when cuDNN builds no graph for it)
// computes channels-last for `sub`, those of the unit's operands it is handed, with every one of
// them channels-last: the unit then hands them over as they are, in either layout.
bool legacy_takes(const CudaOp& op, const OpShapes& sub) {
  const ChannelsLastOperands cl = op.channels_last(sub);
  for (size_t i = 0; i < sub.in.size(); ++i)
    if (sub.in[i] && !(i < cl.in.size() && cl.in[i])) return false;
  for (size_t k = 0; k < sub.out.size(); ++k)
    if (sub.out[k] && !(k < cl.out.size() && cl.out[k])) return false;
  return true;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Off unless AMP_CUDNN_CONV_GRAPHS=1: every such unit runs unfused, as when cuDNN offers no engine
// (its plain convolution with our BatchNorm kernels beside it). Measured on an H200 (2026-11-28,
// cuDNN 9.19, ResNet-50's bf16 step at batch 128 in one bench_scale.py run): with the graphs (19
// of 51 built; the rest had no engine) 56.2 ms a step and a first step of 6.00 s with cold caches,
// 2.37 s with warm ones (cuDNN compiles its runtime-fusion engines' kernels in every process);
// without them 53.3 ms, 5.31 s and 1.16 s.
bool convolution_graphs_enabled() {
  return env_flag("AMP_CUDNN_CONV_GRAPHS");
}

// The graph for spec, built once per cuDNN handle and spec while a unit holds it (cuDNN compiles
// the kernels of runtime-fusion engines when a plan finalizes, and a ResNet stage's blocks repeat
// their shapes); null, with the reason in the device report, when cuDNN offers no engine for it.
std::shared_ptr<ConvolutionGraph> graph_for(const ConvolutionGraphSpec& spec, const std::string& what,
                                            DeviceContext& ctx) {
  // " nhwc" after the type for channels-last operands, as the legacy convolutions' keys say it.
  const std::string shape = std::string(dtype_name(spec.type)) + (spec.channels_last ? " nhwc" : "") + " x" +
                            list(spec.x) + " w" + list(spec.w) + " y" + list(spec.y) + " pads " + list(spec.pads) +
                            " strides " + list(spec.strides) + " dilations " + list(spec.dilations);
  const std::string key = what + " " + shape + (spec.statistics ? " statistics" : "") + " handle " +
                          std::to_string(reinterpret_cast<uintptr_t>(ctx.cudnn()));
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<ConvolutionGraph>> built;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<ConvolutionGraph> g = built[key].lock()) return g;
  std::string why, measured;
  const auto start = std::chrono::steady_clock::now();
  if (!convolution_graphs_enabled()) {
    ctx.report().record("convolution_graph", {{"graph", what + (spec.statistics ? " with statistics" : "")},
                                              {"shape", shape},
                                              {"result", "unfused"},
                                              {"why", "off: AMP_CUDNN_CONV_GRAPHS=1 builds them"}});
    return nullptr;
  }
  // Tuned (convolution_graph_tuning.h): the engine remembered for the shape, else every offered
  // engine timed and the fastest remembered.
  const bool tune = tune_convolution_graphs();
  const std::string remembered_key = "graph " + what + " " + shape + (spec.statistics ? " statistics" : "");
  const std::optional<int> remembered = tune ? ctx.remembered_algorithm(remembered_key) : std::nullopt;
  std::shared_ptr<ConvolutionGraph> g = ConvolutionGraph::build(
      spec, ctx.cudnn(), &why, remembered ? std::optional<int64_t>(*remembered) : std::nullopt, tune && !remembered);
  if (g && tune && !remembered) {
    if (g->candidates() > 1) measured = select_fastest_candidate(*g, ctx);
    ctx.remember_algorithm(remembered_key, static_cast<int>(g->rank()));
  }
  char ms[32];  // runtime-fusion engines compile their kernels here
  std::snprintf(ms, sizeof ms, "%.1f",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  if (g) built[key] = g;
  ctx.report().record("convolution_graph", {{"graph", what + (spec.statistics ? " with statistics" : "")},
                                            {"shape", shape},
                                            {"result", g ? "fused" : "unfused"},
                                            {"why", why},
                                            {"engine", g ? g->engine() : ""},
                                            {"engines measured", measured},
                                            {"remembered", remembered ? "yes" : "no"},
                                            {"build ms", ms}});
  return g;
}

// Operands: 0 X (with the prologue: the previous BatchNorm's input x), 1 W, 2 the previous
// BatchNorm's statistics (BatchNormSums), 3-6 its scale, B, input_mean, input_var (2-6 with the
// prologue only). Results: 0 Y, 1 Y's statistics (BatchNormSums; with `statistics` only), 2 and
// 3 the previous BatchNorm's running_mean and running_var (either may be absent).
class ConvBatchNorm final : public CudaOp {
 public:
  ConvBatchNorm(const Node& conv, ConvWindow window, const Node* bn, bool statistics)
      : window_(std::move(window)),
        prologue_(bn != nullptr),
        statistics_(statistics),
        epsilon_(bn ? bn->attr_float("epsilon", 1e-5f) : 0.0f),
        momentum_(bn ? bn->attr_float("momentum", 0.9f) : 0.0f),
        unfused_(find_cuda_op("", "Conv")->make(conv, 0)) {}

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc &x = *s.in[0], &w = *s.in[1], &y = *s.out[0];
    if (!sixteen_bit(x.dtype) || w.dtype != x.dtype || y.dtype != x.dtype)
      throw InputError("the fused convolution takes one 16-bit type for X, W and Y");
    const bool channels_last = one_layout(s, {0, 1}, {0}, "the fused convolution");
    const ChannelGeometry gx = geometry(x), gy = geometry(y);
    ConvolutionGraphSpec spec;
    spec.channels_last = channels_last;
    spec.kind = ConvolutionGraphSpec::Kind::kForward;
    spec.type = x.dtype;
    spec.x = x.dims;
    spec.w = w.dims;
    spec.y = y.dims;
    spec.pads = window_.pads;
    spec.strides = window_.strides;
    spec.dilations = window_.dilations;
    spec.prologue = prologue_;
    spec.statistics = statistics_;
    std::shared_ptr<ConvolutionGraph> graph =
        graph_for(spec, prologue_ ? "scale-bias-relu-convolution" : "convolution", ctx);
    // Scratch: the prologue's affine, then the graph's workspace or, unfused, the applied X, the
    // legacy convolution's workspace and the sums' partials.
    const size_t affine_bytes = workspace_aligned(static_cast<size_t>(2 * gx.channels) * sizeof(float));
    std::shared_ptr<PreparedOp> unfused;
    size_t applied_bytes = 0, conv_bytes = 0, sums_bytes = 0;
    if (!graph) {
      OpShapes plain;
      plain.in = {s.in[0], s.in[1]};
      plain.out = {s.out[0]};
      plain.tf32 = s.tf32;
      unfused = unfused_->prepare(plain, ctx);
      applied_bytes = prologue_ ? workspace_aligned(x.nbytes()) : 0;
      conv_bytes = workspace_aligned(unfused->workspace_bytes());
      sums_bytes = statistics_ ? batch_norm_relu_workspace(gy, ctx.sm_count()) : 0;
    }
    BatchNormAffine affine;
    affine.channels = gx.channels;
    affine.m = static_cast<float>(gx.per_channel());
    affine.epsilon = epsilon_;
    affine.momentum = momentum_;
    const bool prologue = prologue_, statistics = statistics_, mean = s.has_out(2), var = s.has_out(3);
    const DType t = x.dtype;
    const int sm = ctx.sm_count();
    const int64_t k = gy.channels;
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          char* scratch = static_cast<char*>(b.workspace);
          float* applied_affine = reinterpret_cast<float*>(scratch);
          if (prologue) {
            BatchNormAffine run = affine;
            run.sums = static_cast<const float*>(b.in[2]);
            run.scale = static_cast<const float*>(b.in[3]);
            run.bias = static_cast<const float*>(b.in[4]);
            run.mean_in = static_cast<const float*>(b.in[5]);
            run.var_in = static_cast<const float*>(b.in[6]);
            run.affine = applied_affine;
            run.mean_out = mean ? static_cast<float*>(b.out[2]) : nullptr;
            run.var_out = var ? static_cast<float*>(b.out[3]) : nullptr;
            batch_norm_affine(run, sm, c.stream());
          }
          float* sums = statistics ? static_cast<float*>(b.out[1]) : nullptr;
          if (graph) {
            ConvolutionGraphOperands o;
            o.x = b.in[0];
            o.w = b.in[1];
            o.scale = applied_affine;
            o.bias = applied_affine + gx.channels;
            o.y = b.out[0];
            o.sum = sums;
            o.square_sum = sums ? sums + k : nullptr;
            AMP_CUDNN_CHECK(graph->execute(c.cudnn(), o, scratch + affine_bytes));
            return;
          }
          const void* in = b.in[0];
          if (prologue) {
            batch_norm_relu_apply(t, gx, b.in[0], applied_affine, scratch + affine_bytes, sm, c.stream());
            in = scratch + affine_bytes;
          }
          OpBuffers plain;
          plain.in = {in, b.in[1]};
          plain.out = {b.out[0]};
          plain.workspace = scratch + affine_bytes + applied_bytes;
          unfused->enqueue(plain, c);
          if (statistics)
            batch_norm_sums(t, gy, b.out[0], sums, scratch + affine_bytes + applied_bytes + conv_bytes, sm, c.stream());
        },
        affine_bytes + (graph ? graph->workspace_bytes() : applied_bytes + conv_bytes + sums_bytes));
  }
  size_t packed_output_bytes(const OpShapes& s, size_t output) const override {
    return output == 1 && statistics_ ? batch_norm_sums_bytes(s.out[0]->dims.at(1)) : 0;
  }
  size_t packed_input_bytes(const OpShapes& s, size_t input) const override {
    return input == 2 && prologue_ ? batch_norm_sums_bytes(s.in[0]->dims.at(1)) : 0;
  }
  // X, W (KRSC) and Y for 16-bit data, when the legacy Conv of the fallback takes them so too.
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    if (!channels_last_case(*s.in[0])) return {};
    OpShapes plain;
    plain.in = {s.in[0], s.in[1]};
    plain.out = {s.out[0]};
    if (!legacy_takes(*unfused_, plain)) return {};
    return listed_operands(s, {0, 1}, {0});
  }

 private:
  ConvWindow window_;
  bool prologue_, statistics_;
  float epsilon_, momentum_;
  std::unique_ptr<CudaOp> unfused_;
};

// ConvGrad of a convolution whose input the prologue applied. Operands: 0 dY, 1 x (the
// BatchNorm's input), 2 W, 3 the BatchNorm's statistics, 4 scale, 5 B. Results: dX, dW, dB (each
// optional). dX (and dB) by the legacy backward-data convolution, which does not read X; dW by
// the graph with the prologue.
class ConvBatchNormGrad final : public CudaOp {
 public:
  ConvBatchNormGrad(const Node& grad, ConvWindow window, const Node& bn)
      : window_(std::move(window)),
        epsilon_(bn.attr_float("epsilon", 1e-5f)),
        unfused_(find_cuda_op(kAmpDomain, "ConvGrad")->make(grad, 0)) {}

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc &dy = *s.in[0], &x = *s.in[1], &w = *s.in[2];
    if (!sixteen_bit(x.dtype) || w.dtype != x.dtype || dy.dtype != x.dtype)
      throw InputError("the fused convolution takes one 16-bit type for X, W and dY");
    const bool channels_last = one_layout(s, {0, 1, 2}, {0, 1}, "the fused convolution's gradient");
    const ChannelGeometry gx = geometry(x);
    geometry(dy);
    const bool want_dx = s.has_out(0), want_dw = s.has_out(1), want_db = s.has_out(2);
    std::shared_ptr<PreparedOp> data;
    if (want_dx || want_db) {
      OpShapes d;
      d.in = {s.in[0], s.in[1], s.in[2]};
      d.out = {s.out[0], nullptr, want_db ? s.out[2] : nullptr};
      d.tf32 = s.tf32;
      data = unfused_->prepare(d, ctx);
    }
    std::shared_ptr<ConvolutionGraph> graph;
    std::shared_ptr<PreparedOp> filter;
    const size_t affine_bytes = workspace_aligned(static_cast<size_t>(2 * gx.channels) * sizeof(float));
    size_t applied_bytes = 0, filter_bytes = 0;
    if (want_dw) {
      ConvolutionGraphSpec spec;
      spec.kind = ConvolutionGraphSpec::Kind::kBackwardFilter;
      spec.channels_last = channels_last;
      spec.type = x.dtype;
      spec.x = x.dims;
      spec.w = w.dims;
      spec.y = dy.dims;
      spec.pads = window_.pads;
      spec.strides = window_.strides;
      spec.dilations = window_.dilations;
      spec.prologue = true;
      graph = graph_for(spec, "scale-bias-relu-weight-gradient", ctx);
      if (!graph) {
        OpShapes f;
        f.in = {s.in[0], s.in[1], s.in[2]};
        f.out = {nullptr, s.out[1], nullptr};
        f.tf32 = s.tf32;
        filter = unfused_->prepare(f, ctx);
        applied_bytes = workspace_aligned(x.nbytes());
        filter_bytes = filter->workspace_bytes();
      }
    }
    BatchNormAffine affine;
    affine.channels = gx.channels;
    affine.m = static_cast<float>(gx.per_channel());
    affine.epsilon = epsilon_;
    const DType t = x.dtype;
    const int sm = ctx.sm_count();
    const size_t data_bytes = data ? data->workspace_bytes() : 0;
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          char* scratch = static_cast<char*>(b.workspace);
          if (data) {
            OpBuffers d;
            d.in = {b.in[0], b.in[1], b.in[2]};
            d.out = {b.out[0], nullptr, want_db ? b.out[2] : nullptr};
            d.workspace = b.workspace;
            data->enqueue(d, c);
          }
          if (!want_dw) return;
          float* applied_affine = reinterpret_cast<float*>(scratch);
          BatchNormAffine run = affine;
          run.sums = static_cast<const float*>(b.in[3]);
          run.scale = static_cast<const float*>(b.in[4]);
          run.bias = static_cast<const float*>(b.in[5]);
          run.affine = applied_affine;
          batch_norm_affine(run, sm, c.stream());
          if (graph) {
            ConvolutionGraphOperands o;
            o.x = b.in[1];
            o.dy = b.in[0];
            o.scale = applied_affine;
            o.bias = applied_affine + gx.channels;
            o.dw = b.out[1];
            AMP_CUDNN_CHECK(graph->execute(c.cudnn(), o, scratch + affine_bytes));
            return;
          }
          batch_norm_relu_apply(t, gx, b.in[1], applied_affine, scratch + affine_bytes, sm, c.stream());
          OpBuffers f;
          f.in = {b.in[0], scratch + affine_bytes, b.in[2]};
          f.out = {nullptr, b.out[1], nullptr};
          f.workspace = scratch + affine_bytes + applied_bytes;
          filter->enqueue(f, c);
        },
        // The backward-data convolution runs first and alone in the scratch.
        std::max(data_bytes, want_dw ? affine_bytes + (graph ? graph->workspace_bytes() : applied_bytes + filter_bytes)
                                     : size_t{0}));
  }
  size_t packed_input_bytes(const OpShapes& s, size_t input) const override {
    return input == 3 ? batch_norm_sums_bytes(s.in[1]->dims.at(1)) : 0;
  }
  // dY, x, W (KRSC), dX and dW (KRSC) for 16-bit data, when the legacy ConvGrad that computes dX
  // (and dW on the fallback) takes them so too; never dB (per channel).
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    if (!channels_last_case(*s.in[1])) return {};
    if (s.has_out(0) || s.has_out(2)) {
      OpShapes d;
      d.in = {s.in[0], s.in[1], s.in[2]};
      d.out = {s.out[0], nullptr, nullptr};
      if (!legacy_takes(*unfused_, d)) return {};
    }
    if (s.has_out(1)) {
      OpShapes f;
      f.in = {s.in[0], s.in[1], s.in[2]};
      f.out = {nullptr, s.out[1], nullptr};
      if (!legacy_takes(*unfused_, f)) return {};
    }
    return listed_operands(s, {0, 1, 2}, {0, 1});
  }

 private:
  ConvWindow window_;
  float epsilon_;
  std::unique_ptr<CudaOp> unfused_;
};

bool is_amp_op(const Node* n, const char* op) { return n && n->domain() == kAmpDomain && n->op_type() == op; }
bool dims_only(const Node* n) { return is_op(n, "Shape") || is_op(n, "Size"); }

// One BatchNorm + ReLU the convolutions around it take over.
struct Layer {
  const Node *bn = nullptr, *relu = nullptr, *greater = nullptr, *where = nullptr, *grad = nullptr;
  const Node *conv_in = nullptr, *conv_next = nullptr, *conv_grad = nullptr;
  ConvWindow next_window;
};

std::optional<Layer> layer_of(const Node* bn, const std::function<bool(const Node*)>& busy) {
  if (!is_op(bn, "BatchNormalization") || busy(bn) || bn->attr_int("training_mode", 0) == 0 ||
      bn->inputs().size() < 5 || !bn->input(0))
    return std::nullopt;
  const DType t = bn->input(0)->dtype();
  if (!sixteen_bit(t) || bn->output(0)->dtype() != t) return std::nullopt;
  for (size_t i = 1; i < 5; ++i)
    if (!bn->input(i) || bn->input(i)->dtype() != DType::kFloat) return std::nullopt;
  Layer l;
  l.bn = bn;
  l.conv_in = bn->input(0)->producer();
  if (!is_op(l.conv_in, "Conv") || busy(l.conv_in) || !no_bias(l.conv_in) || !simple_window(l.conv_in) ||
      l.conv_in->output(0)->dtype() != t)
    return std::nullopt;
  l.relu = only_reader(bn->output(0));
  if (!is_op(l.relu, "Relu") || busy(l.relu) || l.relu->output(0)->dtype() != t) return std::nullopt;
  const Value* y = l.relu->output(0);
  if (y->is_output()) return std::nullopt;
  for (const Use& u : y->uses()) {
    const Node* n = u.node;
    if (dims_only(n)) continue;
    if (busy(n)) return std::nullopt;
    if (is_op(n, "Greater") && u.index == 0 && !l.greater && is_zero_constant(n->input(1)))
      l.greater = n;
    else if (is_op(n, "Conv") && u.index == 0 && !l.conv_next)
      l.conv_next = n;
    else if (is_amp_op(n, "ConvGrad") && u.index == 1 && !l.conv_grad)
      l.conv_grad = n;
    else
      return std::nullopt;
  }
  if (!l.greater || !l.conv_next || !l.conv_grad || !no_bias(l.conv_next) || l.conv_next->output(0)->dtype() != t ||
      l.conv_grad->input(2) != l.conv_next->input(1))
    return std::nullopt;
  const std::optional<ConvWindow> w = simple_window(l.conv_next);
  if (!w) return std::nullopt;
  const std::optional<ConvWindow> grad_window = simple_window(l.conv_grad);
  if (!grad_window || !(*grad_window == *w)) return std::nullopt;
  l.next_window = *w;
  const Value* mask = l.greater->output(0);
  if (mask->is_output() || mask->uses().size() != 1) return std::nullopt;
  const Use& m = mask->uses().front();
  l.where = m.node;
  if (!is_op(l.where, "Where") || busy(l.where) || m.index != 0 || !is_zero_constant(l.where->input(2)) ||
      l.where->input(1)->dtype() != t || l.where->output(0)->is_output())
    return std::nullopt;
  for (const Use& u : l.where->output(0)->uses()) {
    const Node* n = u.node;
    if (dims_only(n)) continue;
    if (l.grad || !is_amp_op(n, "BatchNormalizationGrad") || busy(n) || u.index != 0 || n->input(1) != bn->input(0) ||
        n->input(2) != bn->input(1) || n->attr_float("epsilon", 1e-5f) != bn->attr_float("epsilon", 1e-5f))
      return std::nullopt;
    l.grad = n;
  }
  if (!l.grad) return std::nullopt;
  return l;
}

const Value* output_of(const Node* n, size_t k) { return n && n->outputs().size() > k ? n->output(k) : nullptr; }

}  // namespace

std::vector<UnitMatch> match_conv_batch_norm(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<Layer> layers;
  std::vector<const Node*> claimed;
  auto busy = [&](const Node* n) {
    return excluded(n) || std::find(claimed.begin(), claimed.end(), n) != claimed.end();
  };
  for (const Node* n : g.nodes()) {
    std::optional<Layer> l = layer_of(n, busy);
    if (!l) continue;
    // A convolution is one layer's conv_next and another's conv_in at most: both fit one unit.
    for (const Layer& other : layers)
      if (other.conv_in == l->conv_in || other.conv_next == l->conv_next) l.reset();
    if (!l) continue;
    claimed.insert(claimed.end(), {l->bn, l->relu, l->greater, l->where, l->grad, l->conv_grad});
    layers.push_back(*l);
  }
  std::map<const Node*, const Layer*> prologue_of, statistics_of;
  for (const Layer& l : layers) {
    prologue_of[l.conv_next] = &l;
    statistics_of[l.conv_in] = &l;
  }
  std::vector<UnitMatch> out;
  for (const Node* conv : g.nodes()) {
    auto p = prologue_of.find(conv);
    auto st = statistics_of.find(conv);
    const Layer* from = p == prologue_of.end() ? nullptr : p->second;
    const Layer* to = st == statistics_of.end() ? nullptr : st->second;
    if (!from && !to) continue;
    UnitMatch f;
    f.nodes = {conv};
    if (from) f.nodes.insert(f.nodes.end(), {from->bn, from->relu});
    if (to) f.nodes.push_back(to->greater);
    const Node* bn = from ? from->bn : nullptr;
    f.inputs = {from ? bn->input(0) : conv->input(0), conv->input(1), from ? from->greater->output(0) : nullptr};
    for (size_t i = 1; i < 5; ++i) f.inputs.push_back(bn ? bn->input(i) : nullptr);
    f.outputs = {conv->output(0), to ? to->greater->output(0) : nullptr, output_of(bn, 1), output_of(bn, 2)};
    f.op = std::make_unique<ConvBatchNorm>(*conv, *simple_window(conv), bn, to != nullptr);
    out.push_back(std::move(f));
  }
  for (const Layer& l : layers) {
    UnitMatch w;
    w.nodes = {l.conv_grad};
    w.inputs = {l.conv_grad->input(0), l.bn->input(0), l.conv_grad->input(2),
                l.greater->output(0),  l.bn->input(1), l.bn->input(2)};
    w.outputs = {output_of(l.conv_grad, 0), output_of(l.conv_grad, 1), output_of(l.conv_grad, 2)};
    w.op = std::make_unique<ConvBatchNormGrad>(*l.conv_grad, l.next_window, *l.bn);
    out.push_back(std::move(w));
    UnitMatch b;
    b.nodes = {l.grad, l.where};
    b.inputs = {l.where->input(1), l.greater->output(0), l.bn->input(0), l.bn->input(1), nullptr, nullptr,
                nullptr,           l.bn->input(2)};
    b.outputs = {output_of(l.grad, 0), output_of(l.grad, 1), output_of(l.grad, 2)};
    b.op = batch_norm_relu_grad_from_sums(*l.grad);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace amp::cuda
