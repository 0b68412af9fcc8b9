#include "backends/cuda/gemm_tuning.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/stream_timer.h"

namespace amp::cuda {

bool gemm_tuning() { return env_flag("AMP_CUBLASLT_TUNE"); }

void tune_gemm(GemmPlan& plan, DeviceContext& ctx) {
  const size_t count = plan.algorithm_count();
  if (!gemm_tuning() || count < 2) return;
  const std::string key = "cublaslt " + std::to_string(cublasLtGetVersion()) + " " + plan.key();
  if (const std::optional<int> known = ctx.remembered_algorithm(key); known && *known >= 0 &&
                                                                      static_cast<size_t>(*known) < count) {
    plan.prefer(static_cast<size_t>(*known));
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  const GemmPlan::OperandBytes bytes = plan.operand_bytes();
  auto at_least = [](size_t n) { return std::max<size_t>(n, 256); };
  const DeviceBuffer a(at_least(bytes.a)), b(at_least(bytes.b)), d(at_least(bytes.d)), bias(at_least(bytes.bias)),
      aux(at_least(bytes.aux)), workspace(at_least(bytes.workspace));
  for (const DeviceBuffer* buf : {&a, &b, &d, &bias, &aux})
    AMP_CUDA_CHECK(cudaMemsetAsync(buf->data(), 0, buf->size(), ctx.stream()));
  constexpr int kRuns = 3;
  StreamTimer timer(ctx.stream());
  size_t best = plan.preferred();
  float best_ms = -1.0f;
  std::string measured;
  for (size_t i = 0; i < count; ++i) {
    auto run = [&] {
      return plan.run_algorithm(i, ctx.cublaslt(), ctx.stream(), a.data(), b.data(), d.data(), bias.data(), aux.data(),
                                workspace.data());
    };
    cublasStatus_t status = run();  // loads its kernels
    float ms = -1.0f;
    if (status == CUBLAS_STATUS_SUCCESS)
      ms = timer.time([&] {
             for (int k = 0; k < kRuns && status == CUBLAS_STATUS_SUCCESS; ++k) status = run();
           }) /
           kRuns;
    if (status != CUBLAS_STATUS_SUCCESS) {
      cudaGetLastError();
      measured += (measured.empty() ? "" : ", ") + std::to_string(i) + " refused (" + cublasLtGetStatusString(status) + ")";
      continue;
    }
    measured += (measured.empty() ? "" : ", ") + std::to_string(i) + " " + std::to_string(ms) + " ms";
    if (best_ms < 0.0f || ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  AMP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  if (best_ms < 0.0f) return;  // none ran: the heuristic's order and enqueue's fallbacks stand
  plan.prefer(best);
  ctx.remember_algorithm(key, static_cast<int>(best));
  ctx.report().record("gemm_tuned",
                      {{"product", plan.desc().str()},
                       {"chosen", std::to_string(best)},
                       {"measured", measured},
                       {"tune ms", std::to_string(std::chrono::duration<double, std::milli>(
                                                       std::chrono::steady_clock::now() - started)
                                                       .count())}});
}

}  // namespace amp::cuda
