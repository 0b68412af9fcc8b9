// A 16-bit BatchNorm + ReLU between two convolutions inside them (backends/cuda/
// conv_batch_norm_fusion.h): the plan of a ResNet bottleneck's training step (torchvision's
// Bottleneck as torch 1.13 exports it, tests/passes/torch_exports.py resnet_bottleneck) has no
// unit of its own for such a layer and never stores its ReLU's result (device-free, here); the
// whole step computes what the CPU backend computes for the unfused nodes in fp16 and bf16, with
// cuDNN's fused graphs and with their unfused stand-in in the unit (on a GPU, or in
// test_cuda_backend_emulated on the host stand-ins).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/schedule.h"
#include "graph/onnx_io.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

// The two bottlenecks' first two BatchNorm + ReLU layers (4) sit between convolutions: their
// input convolutions sum the statistics (Conv+Greater: the mask's value holds them), the next
// convolutions apply them (Conv+BatchNormalization+Relu[+Greater] when that one sums its own
// output's too), the weight gradients and BatchNorm gradients recompute them; the stem's and the
// residual ones keep the BatchNorm units. fp32 steps are planned as before.
TEST(CudaSchedule, A16BitBottleneckRunsItsInnerBatchNormsInsideTheConvolutions) {
  const Model forward = test::resnet_bottleneck();
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::sgd_momentum_step(forward, precision, "resnet_bottleneck");
    const cuda::Schedule s(step.model, test::step_options(step));
    const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
    std::map<std::string, int> kinds;
    std::string listing;
    for (const cuda::Unit* u : p.order) {
      ++kinds[u->kind];
      listing += "  " + u->kind + "\n";
    }
    const int fused = precision == DType::kFloat ? 0 : 2;
    EXPECT_EQ(kinds["Conv+Greater"], fused) << listing;
    EXPECT_EQ(kinds["Conv+BatchNormalization+Relu+Greater"], fused) << listing;
    EXPECT_EQ(kinds["Conv+BatchNormalization+Relu"], fused) << listing;
    EXPECT_EQ(kinds["BatchNormalization+Relu+Greater"], precision == DType::kFloat ? 5 : 1) << listing;
    EXPECT_EQ(kinds["BatchNormalizationGrad+Where"], precision == DType::kFloat ? 5 : 5) << listing;
    if (precision == DType::kFloat) continue;
    // Every inner layer's ReLU result is read and written by no unit; its mask's value holds the
    // 2C floats of statistics.
    for (const char* layer : {"/layer/layer.0/relu/Relu_output_0", "/layer/layer.0/relu_1/Relu_output_0",
                              "/layer/layer.1/relu/Relu_output_0", "/layer/layer.1/relu_1/Relu_output_0"}) {
      const int y = s.program.find(layer);
      ASSERT_GE(y, 0) << layer;
      for (const cuda::Unit* u : p.order) {
        EXPECT_EQ(std::count(u->in.begin(), u->in.end(), y), 0) << layer << " read by " << u->kind;
        EXPECT_EQ(std::count(u->out.begin(), u->out.end(), y), 0) << layer << " written by " << u->kind;
      }
    }
    int sums = 0;
    for (const cuda::Unit* u : p.order)
      if (u->kind == "Conv+Greater" || u->kind == "Conv+BatchNormalization+Relu+Greater") {
        const int v = u->out.at(1);
        ASSERT_GE(v, 0);
        EXPECT_EQ(p.desc[v].packed_bytes, cuda::batch_norm_sums_bytes(p.desc[v].dims.at(1))) << u->kind;
        ++sums;
      }
    EXPECT_EQ(sums, 4);
  }
}

// The bottleneck's whole training step, SGD with momentum 0.9 (fp16 with a dynamic loss scale),
// 3 steps, its convolution chain channels-last (the default, backends/cuda/channels_last.h;
// cuda_channels_last_test.cc runs it row-major): losses, weights, running statistics and momentum
// buffers track the CPU backend's, with cuDNN's fused graphs (AMP_CUDNN_CONV_GRAPHS=1) and with
// the units' unfused path (the default).
TEST(CudaBackendGpu, TheBottleneckStepWithConvolutionFusionsTracksTheCpu) {
  REQUIRE_GPU();
  const Model forward = test::resnet_bottleneck();
  for (const char* graphs : {"1", "0"})
    for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(precision)) + (graphs[0] == '1' ? " fused" : " unfused"));
      const test::ScopedEnv setting("AMP_CUDNN_CONV_GRAPHS", graphs);
      TrainingStep step = test::sgd_momentum_step(forward, precision, "resnet_bottleneck");
      test::expect_momentum_step_tracks_cpu(step, test::step_options(step), precision, {8, 3, 16, 16}, 80);
    }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
