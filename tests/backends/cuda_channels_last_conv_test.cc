// Channels-last convolutions and pools (backends/cuda/convolution_ops.cc, CudaOp::channels_last):
// each op run with its operands stored NHWC (the filter KRSC) computes what the same op computes
// on the same data stored NCHW — Conv alone and with its fused bias, residual Add and ReLU,
// ConvGrad's dX, dW (16-bit or, when that measures faster, widened to fp32) and dB, MaxPool and
// AveragePool and their gradients, GlobalAveragePool and GlobalMaxPool, in fp16 and bf16, over strides, pads, dilations and 1x1, 3x3
// and 7x7 filters — within a few 16-bit ulps of the output's scale (cuDNN runs different kernels
// for the two layouts; the stand-ins happen to sum alike). Only 16-bit ops of 2 spatial dims and
// one group offer it, and a convolution's remembered algorithm is the layout's own.
// Without a GPU these run in test_cuda_backend_emulated and skip in test_backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/tensor.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/convolution_ops.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/device_context.h"
#include "tests/support/channels_last_op.h"
#include "tests/support/conv_chain.h"
#include "tests/support/device_report_file.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::from_channels_last;
using test::OneNode;
using test::random_tensor;
using test::run_cuda_op;
using test::to_channels_last;

constexpr DType kSixteenBit[] = {DType::kFloat16, DType::kBFloat16};

using test::ScopedEnv;


// A device context whose remembered convolution algorithms live in memory only (an empty
// AMP_KERNEL_CACHE_DIR), so no earlier process's choices or decisions to widen reach the test.
std::unique_ptr<cuda::DeviceContext> fresh_context() {
  const ScopedEnv memory_only("AMP_KERNEL_CACHE_DIR", "");
  return std::make_unique<cuda::DeviceContext>();
}

// `channels_last` equals `nchw` within `ulps` units in the last place of the type at the largest
// magnitude of `nchw` (the scale every element's fp32 sum was rounded at, at most), both finite:
// the harness fills outputs with NaN first, so an element the op left unwritten fails.
void expect_layouts_agree(const Tensor& channels_last, const Tensor& nchw, const std::string& what, double ulps = 4) {
  ASSERT_EQ(channels_last.dtype, nchw.dtype) << what;
  ASSERT_EQ(channels_last.dims, nchw.dims) << what;
  double scale = 0;
  for (int64_t i = 0; i < nchw.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(nchw.element(i))) << what << " (NCHW)[" << i << "]";
    scale = std::max(scale, std::fabs(nchw.element(i)));
  }
  const double ulp = nchw.dtype == DType::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  const double tol = ulps * ulp * std::max(scale, 1e-3);
  int bad = 0;
  for (int64_t i = 0; i < nchw.numel(); ++i) {
    const double a = channels_last.element(i), b = nchw.element(i);
    if (!(std::fabs(a - b) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: channels-last " << a << ", NCHW " << b << " (tolerance " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << nchw.numel() << " elements differ";
}

// The op the CUDA backend makes for the node (its table's entry).
std::unique_ptr<cuda::CudaOp> cuda_op_for(const OneNode& n, const std::string& domain = "") {
  const cuda::CudaOpEntry* entry = cuda::find_cuda_op(domain, n.node->op_type());
  if (!entry) throw std::runtime_error("no cuda op " + n.node->op_type());
  return entry->make(*n.node, 17);
}

cuda::TensorDesc desc(DType t, std::vector<int64_t> dims) { return {t, std::move(dims)}; }
const cuda::TensorDesc kAbsent{};

// The op's operand descriptions for channels_last(), without running it.
struct Shapes {
  std::vector<cuda::TensorDesc> in, out;
  cuda::OpShapes get() const {
    cuda::OpShapes s;
    for (const cuda::TensorDesc& d : in) {
      s.in.push_back(d.dtype == DType::kUndefined ? nullptr : &d);
      s.host.push_back(nullptr);
    }
    for (const cuda::TensorDesc& d : out) s.out.push_back(d.dtype == DType::kUndefined ? nullptr : &d);
    return s;
  }
};

cuda::ChannelsLastOperands layout_of(const cuda::CudaOp& op, const std::vector<const Tensor*>& inputs,
                                     const std::vector<cuda::TensorDesc>& outs) {
  Shapes s;
  for (const Tensor* t : inputs) s.in.push_back(t ? desc(t->dtype, t->dims) : kAbsent);
  s.out = outs;
  return op.channels_last(s.get());
}

// Runs the op NCHW and channels-last (as its channels_last() lists) on the same data; returns
// {channels-last results, NCHW results}.
std::pair<std::vector<Tensor>, std::vector<Tensor>> both_layouts(const cuda::CudaOp& op, cuda::DeviceContext& ctx,
                                                                 const std::vector<const Tensor*>& inputs,
                                                                 const std::vector<cuda::TensorDesc>& outs) {
  const cuda::ChannelsLastOperands layout = layout_of(op, inputs, outs);
  EXPECT_TRUE(layout.any()) << "the op offers no channels-last layout for these shapes";
  return {run_cuda_op(op, ctx, inputs, outs, layout), run_cuda_op(op, ctx, inputs, outs, {})};
}

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;  // [N, C, H, W], [K, C, R, S]
  std::vector<int64_t> strides, pads, dilations;
  std::vector<int64_t> y() const {
    std::vector<int64_t> out = {x[0], w[0]};
    for (size_t d = 0; d < 2; ++d)
      out.push_back((x[d + 2] + 2 * pads[d] - dilations[d] * (w[d + 2] - 1) - 1) / strides[d] + 1);
    return out;
  }
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"3x3", {2, 8, 10, 10}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"1x1", {2, 16, 6, 6}, {8, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}},
      {"1x1 stride 2", {2, 16, 7, 7}, {24, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}},
      {"7x7 stride 2 of 3 channels", {2, 3, 16, 16}, {16, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}},
      {"3x3 stride 2 dilation 2", {1, 8, 13, 11}, {8, 8, 3, 3}, {2, 1}, {2, 2}, {2, 2}},
  };
  return cases;
}

OneNode conv_node(const std::string& op, test::Feeds feeds, std::vector<DType> outs, const ConvCase& c,
                  const std::string& domain = "") {
  OneNode n(op, std::move(feeds), std::move(outs), domain);
  n.attr(Attribute::of_ints("kernel_shape", {c.w[2], c.w[3]}));
  n.attr(Attribute::of_ints("strides", c.strides));
  n.attr(Attribute::of_ints("pads", {c.pads[0], c.pads[1], c.pads[0], c.pads[1]}));
  n.attr(Attribute::of_ints("dilations", c.dilations));
  return n;
}

// A plain Conv, with and without its bias: the bias form runs cuDNN's fused call with IDENTITY
// (when IMPLICIT_PRECOMP_GEMM runs) or the convolution and cudnnAddTensor.
TEST(CudaChannelsLastConv, ConvMatchesNchw) {
  REQUIRE_GPU();
  auto ctx = fresh_context();
  for (DType t : kSixteenBit)
    for (const ConvCase& c : conv_cases())
      for (bool bias : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.name + (bias ? " with bias" : ""));
        const Tensor x = random_tensor(t, c.x, 1, -1.0f, 1.0f), w = random_tensor(t, c.w, 2, -0.25f, 0.25f),
                     b = random_tensor(t, {c.w[0]}, 3, -1.0f, 1.0f);
        test::Feeds feeds = {{"x", x}, {"w", w}};
        if (bias) feeds.push_back({"b", b});
        const auto op = cuda_op_for(conv_node("Conv", feeds, {t}, c));
        std::vector<const Tensor*> in = {&x, &w};
        if (bias) in.push_back(&b);
        const auto [cl, nchw] = both_layouts(*op, *ctx, in, {desc(t, c.y())});
        expect_layouts_agree(cl[0], nchw[0], "Y");
      }
}

// Conv(x, W, B) -> Add(z) -> Relu, as match_convolution_epilogues fuses it, and Conv(x, W, B) ->
// Relu: the fused call computes it, or, when cuDNN refuses that (AMP_STANDIN_CUDNN_REFUSE_FUSED on
// the stand-ins), the convolution, cudnnAddTensor of the bias and of z, and the ReLU, each over Y
// stored NHWC.
TEST(CudaChannelsLastConv, FusedBiasResidualReluMatchesNchw) {
  REQUIRE_GPU();
  for (const bool refuse_fused : {false, true}) {
    if (refuse_fused && !test::on_standins()) continue;
    std::optional<ScopedEnv> refuse;
    if (refuse_fused) refuse.emplace("AMP_STANDIN_CUDNN_REFUSE_FUSED", "1");
    auto ctx = fresh_context();  // a fused call refused is remembered per op; each pass is its own
    for (DType t : kSixteenBit)
      for (const bool residual : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + (residual ? " bias + z, ReLU" : " bias, ReLU") +
                     (refuse_fused ? ", fused call refused" : ""));
        test::ConvChainSpec spec;
        spec.dtype = t;
        spec.x_dims = {2, 8, 7, 7};
        spec.w_dims = {16, 8, 3, 3};
        if (residual) spec.residual_dims = spec.y_dims();
        spec.activation = "Relu";
        const test::ConvChain chain = test::conv_chain(spec);
        std::vector<cuda::ConvFusion> fused =
            cuda::match_convolution_epilogues(*chain.m.graph, [](const Node*) { return false; });
        ASSERT_EQ(fused.size(), 1u);
        ASSERT_EQ(fused[0].nodes.size(), residual ? 3u : 2u);
        std::vector<const Tensor*> in;
        for (const Value* v : fused[0].inputs) {
          const Tensor* feed = nullptr;
          for (const auto& [name, tensor] : chain.feeds)
            if (v && name == v->name()) feed = &tensor;
          in.push_back(feed);
        }
        ASSERT_EQ(in.size(), 4u);
        const cuda::ChannelsLastOperands layout = layout_of(*fused[0].op, in, {desc(t, spec.y_dims())});
        EXPECT_EQ(layout.in, (std::vector<bool>{true, true, false, residual}));
        EXPECT_EQ(layout.out, std::vector<bool>{true});
        const auto [cl, nchw] = both_layouts(*fused[0].op, *ctx, in, {desc(t, spec.y_dims())});
        expect_layouts_agree(cl[0], nchw[0], "Y");
      }
  }
}

// ConvGrad(dY, X, W) -> dX, dW, dB; the 7x7 stem's without dX, as a network's first layer's.
TEST(CudaChannelsLastConv, ConvGradMatchesNchw) {
  REQUIRE_GPU();
  auto ctx = fresh_context();
  for (DType t : kSixteenBit)
    for (const ConvCase& c : conv_cases()) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.name);
      const Tensor dy = random_tensor(t, c.y(), 4, -1.0f, 1.0f), x = random_tensor(t, c.x, 5, -1.0f, 1.0f),
                   w = random_tensor(t, c.w, 6, -0.25f, 0.25f);
      const bool want_dx = c.x[1] != 3;
      const auto op = cuda_op_for(conv_node("ConvGrad", {{"dy", dy}, {"x", x}, {"w", w}}, {t, t, t}, c, kAmpDomain),
                                  kAmpDomain);
      const std::vector<cuda::TensorDesc> outs = {want_dx ? desc(t, c.x) : kAbsent, desc(t, c.w), desc(t, {c.w[0]})};
      const cuda::ChannelsLastOperands layout = layout_of(*op, {&dy, &x, &w}, outs);
      EXPECT_EQ(layout.in, (std::vector<bool>{true, true, true}));
      EXPECT_EQ(layout.out, (std::vector<bool>{want_dx, true, false}));
      const auto [cl, nchw] = both_layouts(*op, *ctx, {&dy, &x, &w}, outs);
      if (want_dx) expect_layouts_agree(cl[0], nchw[0], "dX");
      else EXPECT_EQ(cl[0].dtype, DType::kUndefined);
      expect_layouts_agree(cl[1], nchw[1], "dW");
      expect_layouts_agree(cl[2], nchw[2], "dB");
    }
}

// A pointwise convolution (1x1, no padding, one group) over channels-last 16-bit data runs as
// cuBLASLt products (convolution_ops.cc, pointwise_product): Conv with and without its bias,
// ConvGrad's dX and dW (and dB, a sum as before) each one product, named in the device report,
// and computing what cuDNN's convolutions compute (AMP_CUDA_POINTWISE_GEMM=0) within the rounding
// of two fp32 sums to 16 bits; at stride 2 (and 3 by 2, odd extents) of the rows the stride picks
// (dX zero elsewhere); a 3x3 convolution is not such a product and stays on cuDNN.
TEST(CudaChannelsLastConv, PointwiseConvolutionsRunAsProducts) {
  REQUIRE_GPU();
  auto bracketed = [](const std::vector<int64_t>& d) {
    std::string out = "[";
    for (size_t i = 0; i < d.size(); ++i) out += (i ? "," : "") + std::to_string(d[i]);
    return out + "]";
  };
  const std::vector<ConvCase> cases = {{"1x1", {2, 16, 6, 5}, {24, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}},
                                       {"1x1 stride 2", {2, 16, 7, 7}, {24, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}},
                                       {"1x1 stride 3 by 2", {2, 8, 8, 9}, {16, 8, 1, 1}, {3, 2}, {0, 0}, {1, 1}}};
  const ConvCase padded{"3x3", {2, 16, 6, 5}, {24, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}};
  for (DType t : kSixteenBit)
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.name);
      const Tensor x = random_tensor(t, c.x, 31, -1.0f, 1.0f), w = random_tensor(t, c.w, 32, -0.25f, 0.25f),
                   b = random_tensor(t, {c.w[0]}, 33, -1.0f, 1.0f), dy = random_tensor(t, c.y(), 34, -1.0f, 1.0f);
      std::vector<Tensor> results[2];
      for (const char* setting : {"1", "0"}) {
        const bool products = setting[0] == '1';
        SCOPED_TRACE(products ? "products" : "cuDNN");
        const ScopedEnv gemm("AMP_CUDA_POINTWISE_GEMM", setting);
        const test::DeviceReportFile report(std::string("pointwise_") + setting);
        auto ctx = fresh_context();
        std::vector<Tensor>& got = results[products ? 0 : 1];
        for (bool bias : {false, true}) {
          test::Feeds feeds = {{"x", x}, {"w", w}};
          if (bias) feeds.push_back({"b", b});
          const auto op = cuda_op_for(conv_node("Conv", feeds, {t}, c));
          std::vector<const Tensor*> in = {&x, &w};
          if (bias) in.push_back(&b);
          got.push_back(both_layouts(*op, *ctx, in, {desc(t, c.y())}).first[0]);
        }
        const auto grad = cuda_op_for(conv_node("ConvGrad", {{"dy", dy}, {"x", x}, {"w", w}}, {t, t, t}, c, kAmpDomain),
                                      kAmpDomain);
        const auto [cl, nchw] =
            both_layouts(*grad, *ctx, {&dy, &x, &w}, {desc(t, c.x), desc(t, c.w), desc(t, {c.w[0]})});
        got.insert(got.end(), cl.begin(), cl.end());
        // A 3x3 convolution stays on cuDNN whatever the setting.
        const Tensor dyp = random_tensor(t, padded.y(), 35, -1.0f, 1.0f), xp = random_tensor(t, padded.x, 36, -1.0f, 1.0f),
                     wp = random_tensor(t, padded.w, 37, -0.25f, 0.25f);
        both_layouts(*cuda_op_for(conv_node("ConvGrad", {{"dy", dyp}, {"x", xp}, {"w", wp}}, {t, t, t}, padded, kAmpDomain),
                                  kAmpDomain),
                     *ctx, {&dyp, &xp, &wp}, {desc(t, padded.x), desc(t, padded.w), desc(t, {padded.w[0]})});
        std::map<std::string, int> products_by_direction;
        for (const nlohmann::json& l : report.lines("convolution_as_product")) {
          EXPECT_EQ(l["shape"].get<std::string>().find("x" + bracketed(c.x)), std::string(dtype_name(t)).size() + 6)
              << l.dump();
          ++products_by_direction[l["direction"].get<std::string>()];
        }
        if (products) {
          EXPECT_EQ(products_by_direction["forward convolution"], 2);  // with and without the bias
          EXPECT_EQ(products_by_direction["backward-data convolution"], 1);
          EXPECT_EQ(products_by_direction["backward-filter convolution"], 1);
        } else {
          EXPECT_TRUE(products_by_direction.empty());
        }
      }
      const char* names[] = {"Y", "Y with bias", "dX", "dW", "dB"};
      ASSERT_EQ(results[0].size(), 5u);
      ASSERT_EQ(results[1].size(), 5u);
      for (size_t k = 0; k < 5; ++k) expect_layouts_agree(results[0][k], results[1][k], names[k]);
    }
}

// With AMP_CUDA_CHANNELS_LAST_GROUPED=1, grouped and depthwise convolutions (efficientnet_b0's
// and convnext_tiny's) compute channels-last too: Conv and ConvGrad (dX, dW KRSC of C/groups
// channels, dB) against their NCHW runs, a depthwise 3x3 of 8 channels and a 2-group 3x3 at
// stride 2. On a GPU this is the check that cuDNN runs them; its speed is for a benchmark.
TEST(CudaChannelsLastConv, GroupedAndDepthwiseConvolutionsMatchNchwWhenAllowed) {
  REQUIRE_GPU();
  const ScopedEnv grouped("AMP_CUDA_CHANNELS_LAST_GROUPED", "1");
  auto ctx = fresh_context();
  const std::vector<std::pair<ConvCase, int64_t>> cases = {
      {{"depthwise 3x3", {2, 8, 9, 9}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}}, 8},
      {{"2 groups 3x3 stride 2", {2, 8, 9, 9}, {12, 4, 3, 3}, {2, 2}, {1, 1}, {1, 1}}, 2}};
  for (DType t : kSixteenBit)
    for (const auto& [c, group] : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.name);
      const Tensor x = random_tensor(t, c.x, 11, -1.0f, 1.0f), w = random_tensor(t, c.w, 12, -0.25f, 0.25f),
                   dy = random_tensor(t, c.y(), 13, -1.0f, 1.0f);
      OneNode fwd = conv_node("Conv", {{"x", x}, {"w", w}}, {t}, c);
      fwd.attr(Attribute::of_int("group", group));
      const auto conv = cuda_op_for(fwd);
      const auto [cl, nchw] = both_layouts(*conv, *ctx, {&x, &w}, {desc(t, c.y())});
      expect_layouts_agree(cl[0], nchw[0], "Y");
      OneNode bwd = conv_node("ConvGrad", {{"dy", dy}, {"x", x}, {"w", w}}, {t, t, t}, c, kAmpDomain);
      bwd.attr(Attribute::of_int("group", group));
      const auto grad = cuda_op_for(bwd, kAmpDomain);
      const std::vector<cuda::TensorDesc> outs = {desc(t, c.x), desc(t, c.w), desc(t, {c.w[0]})};
      const auto [gcl, gnchw] = both_layouts(*grad, *ctx, {&dy, &x, &w}, outs);
      expect_layouts_agree(gcl[0], gnchw[0], "dX");
      expect_layouts_agree(gcl[1], gnchw[1], "dW");
      expect_layouts_agree(gcl[2], gnchw[2], "dB");
    }
}

// A 16-bit dW computed in fp32 (convolution_ops.cc's WidenedFilter) keeps the channels-last
// layout: X and dY widened elementwise in their NHWC order, the fp32 backward filter described
// channels-last, dW narrowed back in KRSC. On the stand-ins the 16-bit backward-filter algorithms
// are told slow (as the widening test of cuda_backend_test.cc does), so the widened path runs and
// its decision is remembered under the channels-last key; on a GPU whichever measured faster.
TEST(CudaChannelsLastConv, WidenedWeightGradientMatchesNchw) {
  REQUIRE_GPU();
  const ScopedEnv times("AMP_STANDIN_CUDNN_TIMES",
                        "bwd_filter.half:0=50,bwd_filter.half:1=50,bwd_filter.half:3=50,"
                        "bwd_filter.bfloat16:0=50,bwd_filter.bfloat16:1=50,bwd_filter.bfloat16:3=50");
  const ConvCase c = conv_cases()[0];
  for (DType t : kSixteenBit) {
    SCOPED_TRACE(dtype_name(t));
    // A context per type: the fp32 convolution's choice is remembered under one key for both
    // types, and a ConvGrad that finds it remembered has no fp32 time to weigh, so keeps 16 bits.
    auto ctx = fresh_context();
    const Tensor dy = random_tensor(t, c.y(), 7, -1.0f, 1.0f), x = random_tensor(t, c.x, 8, -1.0f, 1.0f),
                 w = random_tensor(t, c.w, 9, -0.25f, 0.25f);
    const auto op = cuda_op_for(conv_node("ConvGrad", {{"dy", dy}, {"x", x}, {"w", w}}, {t, t, t}, c, kAmpDomain),
                                kAmpDomain);
    const std::vector<cuda::TensorDesc> outs = {kAbsent, desc(t, c.w), kAbsent};
    const auto [cl, nchw] = both_layouts(*op, *ctx, {&dy, &x, &w}, outs);
    expect_layouts_agree(cl[1], nchw[1], "dW");
    const std::string key = std::string("fp32 backward-filter convolution ") + std::string(dtype_name(t)) +
                            " nhwc x[2,8,10,10] w[16,8,3,3] pads [1,1] strides [1,1] dilations [1,1] group 1";
    const std::optional<int> decided = ctx->remembered_algorithm(key);
    ASSERT_TRUE(decided) << "the channels-last ConvGrad decided whether to widen under its own key";
    if (test::on_standins()) {
      EXPECT_EQ(*decided, 1) << "widened";
    }
  }
}

// Values 0, 1/16, 2/16, ... each at most once per image plane, shuffled: no window of a max pool
// has two maxima (cuDNN's kernels for the two layouts need not break ties alike), and every value
// is exact in fp16 and bf16 (at most 8 significant bits for planes of up to 256 elements).
Tensor distinct_per_plane(DType t, const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor x(t, dims);
  const int64_t plane = dims[2] * dims[3];
  std::mt19937 rng(seed);
  std::vector<int64_t> order(static_cast<size_t>(plane));
  for (int64_t p = 0; p < dims[0] * dims[1]; ++p) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t k = 0; k < plane; ++k)
      test::put_float(x, p * plane + k, static_cast<float>(order[static_cast<size_t>(k)] - plane / 2) / 16.0f);
  }
  return x;
}

struct PoolCase {
  std::string op;  // MaxPool or AveragePool
  std::vector<int64_t> kernel, strides, pads;
  int64_t count_include_pad = 0;
};

// MaxPool and AveragePool (padding counted and not) forward, and their gradients.
TEST(CudaChannelsLastConv, PoolsAndTheirGradientsMatchNchw) {
  REQUIRE_GPU();
  auto ctx = fresh_context();
  const std::vector<int64_t> x_dims = {2, 16, 9, 9};
  const std::vector<PoolCase> cases = {
      {"MaxPool", {3, 3}, {2, 2}, {1, 1}},
      {"MaxPool", {2, 2}, {2, 2}, {0, 0}},
      {"AveragePool", {3, 3}, {2, 2}, {1, 1}, 0},
      {"AveragePool", {3, 3}, {1, 1}, {1, 1}, 1},
  };
  for (DType t : kSixteenBit)
    for (const PoolCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.op + " " + std::to_string(c.kernel[0]) + "x" +
                   std::to_string(c.kernel[1]) + " stride " + std::to_string(c.strides[0]) + " pad " +
                   std::to_string(c.pads[0]) + " count_include_pad " + std::to_string(c.count_include_pad));
      std::vector<int64_t> y_dims = {x_dims[0], x_dims[1]};
      for (size_t d = 0; d < 2; ++d) y_dims.push_back((x_dims[d + 2] + 2 * c.pads[d] - c.kernel[d]) / c.strides[d] + 1);
      const Tensor x = distinct_per_plane(t, x_dims, 10), dy = random_tensor(t, y_dims, 11, -1.0f, 1.0f);
      auto attrs = [&](OneNode n) {
        n.attr(Attribute::of_ints("kernel_shape", c.kernel));
        n.attr(Attribute::of_ints("strides", c.strides));
        n.attr(Attribute::of_ints("pads", {c.pads[0], c.pads[1], c.pads[0], c.pads[1]}));
        if (c.op == "AveragePool") n.attr(Attribute::of_int("count_include_pad", c.count_include_pad));
        return n;
      };
      const auto forward = cuda_op_for(attrs(OneNode(c.op, {{"x", x}}, {t})));
      const auto [y_cl, y_nchw] = both_layouts(*forward, *ctx, {&x}, {desc(t, y_dims)});
      expect_layouts_agree(y_cl[0], y_nchw[0], "Y");
      const auto backward =
          cuda_op_for(attrs(OneNode(c.op + "Grad", {{"dy", dy}, {"x", x}}, {t}, kAmpDomain)), kAmpDomain);
      EXPECT_EQ(layout_of(*backward, {&dy, &x}, {desc(t, x_dims)}).in, (std::vector<bool>{true, true}));
      const auto [dx_cl, dx_nchw] = both_layouts(*backward, *ctx, {&dy, &x}, {desc(t, x_dims)});
      expect_layouts_agree(dx_cl[0], dx_nchw[0], "dX");
    }
}

// MaxPoolGrad over channels-last data runs the gather kernel of max_pool_grad.cuh: against the CPU
// backend's kernel bit for bit (the first maximum of each window, a NaN taking it, the windows
// summed in fp32 in the output's order), on data full of ties (values from five levels) and with
// NaNs, for windows at strides that overlap, tile, and stride one way only; with C = 16 (two
// groups of 8 channels) and C = 8. AMP_CUDA_CUDNN_MAX_POOL_GRAD=1 keeps cuDNN's, which the NCHW
// run compares against on distinct values in PoolsAndTheirGradientsMatchNchw.
TEST(CudaChannelsLastConv, MaxPoolGradientsMatchTheCpuBitForBitWithTiesAndNaNs) {
  REQUIRE_GPU();
  auto ctx = fresh_context();
  struct Case {
    std::vector<int64_t> x, kernel, strides, pads;
  };
  const Case cases[] = {{{2, 16, 9, 9}, {3, 3}, {2, 2}, {1, 1}},
                        {{2, 16, 8, 6}, {2, 2}, {2, 2}, {0, 0}},
                        {{1, 8, 7, 9}, {3, 3}, {1, 1}, {1, 1}},
                        {{1, 8, 9, 7}, {3, 2}, {2, 1}, {1, 0}}};
  std::mt19937 rng(77);
  for (DType t : kSixteenBit)
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(c.kernel[0]) + "x" + std::to_string(c.kernel[1]) +
                   " stride " + std::to_string(c.strides[0]) + "," + std::to_string(c.strides[1]) + " C " +
                   std::to_string(c.x[1]));
      std::vector<int64_t> y_dims = {c.x[0], c.x[1]};
      for (size_t d = 0; d < 2; ++d) y_dims.push_back((c.x[d + 2] + 2 * c.pads[d] - c.kernel[d]) / c.strides[d] + 1);
      Tensor x(t, c.x);
      for (int64_t i = 0; i < x.numel(); ++i)
        test::put_float(x, i, i % 37 == 5 ? NAN : static_cast<float>(static_cast<int>(rng() % 5) - 2) / 2.0f);
      const Tensor dy = random_tensor(t, y_dims, 78, -1.0f, 1.0f);
      OneNode grad("MaxPoolGrad", {{"dy", dy}, {"x", x}}, {t}, kAmpDomain);
      grad.attr(Attribute::of_ints("kernel_shape", c.kernel));
      grad.attr(Attribute::of_ints("strides", c.strides));
      grad.attr(Attribute::of_ints("pads", {c.pads[0], c.pads[1], c.pads[0], c.pads[1]}));
      const Tensor want = make_backend("cpu")->compile(grad.m, {})->run(grad.feeds, grad.outputs)[0];
      const auto op = cuda_op_for(grad, kAmpDomain);
      const cuda::ChannelsLastOperands layout = layout_of(*op, {&dy, &x}, {desc(t, c.x)});
      ASSERT_EQ(layout.in, (std::vector<bool>{true, true}));
      const Tensor got = run_cuda_op(*op, *ctx, {&dy, &x}, {desc(t, c.x)}, layout)[0];
      EXPECT_TRUE(got.same_contents(want)) << "dX differs from the CPU kernel's";
      int64_t nonzero = 0;
      for (int64_t i = 0; i < got.numel(); ++i) nonzero += (got.as<uint16_t>()[i] & 0x7fffu) != 0;  // 16-bit
      EXPECT_GT(nonzero, 0);
    }
}

// GlobalAveragePool and GlobalMaxPool (an image model's head) reduce a channels-last input over
// its stored H and W; the [N, C, 1, 1] result is the same bytes either way. fp32 keeps ONNX's
// layout.
TEST(CudaChannelsLastConv, GlobalPoolsMatchNchw) {
  REQUIRE_GPU();
  auto ctx = fresh_context();
  for (DType t : kSixteenBit)
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + op);
      const Tensor x = random_tensor(t, {3, 20, 7, 5}, 12, -2.0f, 2.0f);
      const auto pool = cuda_op_for(OneNode(op, {{"x", x}}, {t}));
      EXPECT_EQ(layout_of(*pool, {&x}, {desc(t, {3, 20, 1, 1})}).in, (std::vector<bool>{true}));
      const auto [cl, nchw] = both_layouts(*pool, *ctx, {&x}, {desc(t, {3, 20, 1, 1})});
      expect_layouts_agree(cl[0], nchw[0], "Y");
      const Tensor x32 = random_tensor(DType::kFloat, {3, 20, 7, 5}, 13);
      EXPECT_FALSE(layout_of(*cuda_op_for(OneNode(op, {{"x", x32}}, {DType::kFloat})), {&x32},
                             {desc(DType::kFloat, {3, 20, 1, 1})})
                       .any());
    }
}

// channels_last() is empty unless the data is 16-bit with 2 spatial dims and the convolution has
// one group: fp32 keeps its NCHW paths, as do 1-D and 3-D convolutions and pools and grouped
// (depthwise) convolutions, unless AMP_CUDA_CHANNELS_LAST_GROUPED=1 lets those compute
// channels-last. Nothing runs: no device needed.
TEST(CudaChannelsLastConv, OnlySixteenBitTwoDimensionalUngroupedOpsComputeChannelsLast) {
  auto conv = [](DType t, std::vector<int64_t> x, std::vector<int64_t> w, int64_t group) {
    const Tensor xt(t, x), wt(t, w);
    OneNode n("Conv", {{"x", xt}, {"w", wt}}, {t});
    n.attr(Attribute::of_int("group", group));
    std::vector<int64_t> y = x;
    y[1] = w[0];
    Shapes s{{desc(t, x), desc(t, w)}, {desc(t, y)}};
    return cuda_op_for(n)->channels_last(s.get());
  };
  EXPECT_TRUE(conv(DType::kFloat16, {1, 8, 5, 5}, {4, 8, 1, 1}, 1).any());
  EXPECT_TRUE(conv(DType::kBFloat16, {1, 8, 5, 5}, {4, 8, 1, 1}, 1).any());
  EXPECT_FALSE(conv(DType::kFloat, {1, 8, 5, 5}, {4, 8, 1, 1}, 1).any()) << "fp32";
  EXPECT_FALSE(conv(DType::kFloat16, {1, 8, 5}, {4, 8, 1}, 1).any()) << "1-D";
  EXPECT_FALSE(conv(DType::kFloat16, {1, 8, 5, 5, 5}, {4, 8, 1, 1, 1}, 1).any()) << "3-D";
  EXPECT_FALSE(conv(DType::kFloat16, {1, 8, 5, 5}, {8, 1, 1, 1}, 8).any()) << "depthwise";
  EXPECT_FALSE(conv(DType::kFloat16, {1, 8, 5, 5}, {4, 4, 1, 1}, 2).any()) << "grouped";
  {
    const ScopedEnv grouped("AMP_CUDA_CHANNELS_LAST_GROUPED", "1");
    EXPECT_TRUE(conv(DType::kFloat16, {1, 8, 5, 5}, {8, 1, 1, 1}, 8).any()) << "depthwise, allowed";
    EXPECT_TRUE(conv(DType::kBFloat16, {1, 8, 5, 5}, {4, 4, 1, 1}, 2).any()) << "grouped, allowed";
    EXPECT_FALSE(conv(DType::kFloat, {1, 8, 5, 5}, {8, 1, 1, 1}, 8).any()) << "fp32 depthwise, allowed";
  }

  auto conv_grad = [](DType t, std::vector<int64_t> x) {
    std::vector<int64_t> w = {4, x[1]}, y = x;
    for (size_t d = 2; d < x.size(); ++d) w.push_back(1);
    y[1] = 4;
    const Tensor dyt(t, y), xt(t, x), wt(t, w);
    OneNode n("ConvGrad", {{"dy", dyt}, {"x", xt}, {"w", wt}}, {t, t, t}, kAmpDomain);
    Shapes s{{desc(t, y), desc(t, x), desc(t, w)}, {desc(t, x), desc(t, w), desc(t, {4})}};
    return cuda_op_for(n, kAmpDomain)->channels_last(s.get());
  };
  EXPECT_TRUE(conv_grad(DType::kFloat16, {1, 8, 5, 5}).any());
  EXPECT_FALSE(conv_grad(DType::kFloat, {1, 8, 5, 5}).any()) << "fp32 ConvGrad";
  EXPECT_FALSE(conv_grad(DType::kBFloat16, {1, 8, 5}).any()) << "1-D ConvGrad";

  auto pool = [](const std::string& op, DType t, std::vector<int64_t> x) {
    const Tensor xt(t, x);
    OneNode n(op, {{"x", xt}}, {t});
    n.attr(Attribute::of_ints("kernel_shape", std::vector<int64_t>(x.size() - 2, 1)));
    Shapes s{{desc(t, x)}, {desc(t, x)}};
    return cuda_op_for(n)->channels_last(s.get());
  };
  EXPECT_EQ(pool("MaxPool", DType::kFloat16, {1, 8, 5, 5}).out, std::vector<bool>{true});
  EXPECT_TRUE(pool("AveragePool", DType::kBFloat16, {1, 8, 5, 5}).any());
  EXPECT_FALSE(pool("MaxPool", DType::kFloat, {1, 8, 5, 5}).any()) << "fp32 pool";
  EXPECT_FALSE(pool("AveragePool", DType::kFloat16, {1, 8, 5}).any()) << "1-D pool";
  EXPECT_FALSE(pool("MaxPool", DType::kFloat16, {1, 8, 5, 5, 5}).any()) << "3-D pool";
}

// The device remembers a convolution's algorithm per layout: the channels-last and the NCHW
// convolution of the same dims each measure and keep their own choice. On the stand-ins GEMM is
// told fastest, and it runs only for the NCHW filter (cuDNN's NHWC-filter tables list only the
// implicit GEMMs), so the two keys hold different algorithms.
TEST(CudaChannelsLastConv, EachLayoutRemembersItsOwnAlgorithm) {
  REQUIRE_GPU();
  const ScopedEnv times("AMP_STANDIN_CUDNN_TIMES", "fwd:2=0.1");
  auto ctx = fresh_context();
  const ConvCase c = {"3x3", {2, 8, 12, 12}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}};
  const DType t = DType::kFloat16;
  const Tensor x = random_tensor(t, c.x, 12, -1.0f, 1.0f), w = random_tensor(t, c.w, 13, -0.25f, 0.25f);
  const auto op = cuda_op_for(conv_node("Conv", {{"x", x}, {"w", w}}, {t}, c));
  const std::string dims = " x[2,8,12,12] w[16,8,3,3] pads [1,1] strides [1,1] dilations [1,1] group 1";
  const std::string nhwc_key = "forward convolution float16 nhwc" + dims, nchw_key = "forward convolution float16" + dims;
  const auto [cl, nchw] = both_layouts(*op, *ctx, {&x, &w}, {desc(t, c.y())});
  expect_layouts_agree(cl[0], nchw[0], "Y");
  const std::optional<int> nhwc_choice = ctx->remembered_algorithm(nhwc_key), nchw_choice = ctx->remembered_algorithm(nchw_key);
  ASSERT_TRUE(nhwc_choice) << nhwc_key;
  ASSERT_TRUE(nchw_choice) << nchw_key;
  if (test::on_standins()) {
    EXPECT_EQ(*nchw_choice % 16, CUDNN_CONVOLUTION_FWD_ALGO_GEMM);
    EXPECT_EQ(*nhwc_choice % 16, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  }
}

// The harness's host-side layout change: element (n, c, h, w) of [N, C, H, W] is element
// (n, h, w, c) of its channels-last copy, and from_channels_last undoes it.
TEST(CudaChannelsLastConv, ChannelsLastCopiesMoveTheChannelsInnermost) {
  const Tensor t = random_tensor(DType::kFloat16, {2, 3, 4, 5}, 14);
  const Tensor cl = to_channels_last(t);
  ASSERT_EQ(cl.dims, (std::vector<int64_t>{2, 4, 5, 3}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w)
          ASSERT_EQ(cl.element(((n * 4 + h) * 5 + w) * 3 + c), t.element(((n * 3 + c) * 4 + h) * 5 + w));
  EXPECT_TRUE(from_channels_last(cl).same_contents(t));
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
