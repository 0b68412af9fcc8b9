// The products' algorithms timed on the device (backends/cuda/gemm_tuning.h, AMP_CUBLASLT_TUNE=1):
// a plan runs each algorithm cuBLASLt offers, starts with the fastest, records `gemm_tuned` in the
// device report and remembers the choice in the kernel cache's folder, where a new device context
// (a new process) finds it and times nothing; without the switch nothing is timed. On the host
// stand-ins the heuristic's first result is made 30 ms slower (AMP_STANDIN_CUBLASLT_SLOW_FIRST),
// so the choice must be another; on a device whichever is fastest. A product compiled with the
// switch computes what the CPU backend computes. Without a GPU these run in
// test_cuda_backend_emulated and skip in test_backends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/device_context.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/gemm_tuning.h"
#include "tests/support/backend_parity.h"
#include "tests/support/device_report_file.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

TEST(CudaBackendGpu, ProductsStartWithTheirFastestMeasuredAlgorithm) {
  REQUIRE_GPU();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("amp-gemm-tuning-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  test::ScopedEnv cache("AMP_KERNEL_CACHE_DIR", dir.string());
  std::optional<test::ScopedEnv> slow;
  if (test::on_standins()) slow.emplace("AMP_STANDIN_CUBLASLT_SLOW_FIRST", "30");
  cuda::GemmDesc g;
  g.m = 96;
  g.n = 64;
  g.k = 80;
  g.ab_type = g.d_type = DType::kBFloat16;
  {
    SCOPED_TRACE("without AMP_CUBLASLT_TUNE");
    const test::DeviceReportFile report("gemm_untuned");
    cuda::DeviceContext ctx;
    cuda::GemmPlan plan(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
    cuda::tune_gemm(plan, ctx);
    EXPECT_EQ(plan.preferred(), 0u);
    EXPECT_TRUE(report.lines("gemm_tuned").empty());
  }
  test::ScopedEnv tune("AMP_CUBLASLT_TUNE", "1");
  size_t chosen = 0;
  {
    const test::DeviceReportFile report("gemm_tuned");
    cuda::DeviceContext ctx;
    cuda::GemmPlan plan(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
    if (plan.algorithm_count() < 2) GTEST_SKIP() << "cuBLASLt offers one algorithm for " << g.str();
    cuda::tune_gemm(plan, ctx);
    const auto lines = report.lines("gemm_tuned");
    ASSERT_EQ(lines.size(), 1u);
    chosen = plan.preferred();
    EXPECT_EQ(lines[0]["chosen"], std::to_string(chosen));
    EXPECT_EQ(lines[0]["product"], g.str());
    if (test::on_standins()) EXPECT_NE(chosen, 0u) << "the first result was made slow: " << lines[0].dump();
  }
  {
    SCOPED_TRACE("a new device context, as a new process");
    const test::DeviceReportFile report("gemm_remembered");
    cuda::DeviceContext ctx;
    cuda::GemmPlan plan(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
    EXPECT_EQ(plan.preferred(), 0u) << "a new context's cache starts with the heuristic's first";
    cuda::tune_gemm(plan, ctx);
    EXPECT_EQ(plan.preferred(), chosen);
    EXPECT_TRUE(report.lines("gemm_tuned").empty()) << "nothing timed again";
  }
  // A product run with the switch, on its chosen algorithm: the CPU backend's result.
  test::OneNode product("MatMul", {{"a", test::random_tensor(DType::kBFloat16, {96, 80}, 41)},
                                   {"b", test::random_tensor(DType::kBFloat16, {80, 64}, 42)}},
                        {DType::kBFloat16});
  test::expect_parity(product.m, product.feeds, product.outputs, 1.0);
  std::filesystem::remove_all(dir);
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
