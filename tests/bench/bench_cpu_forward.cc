// Forward time of the demo models on the CPU backend at training-like batches: mlp and cnn on
// 28x28 images (batch 256 and 64), gpt on 16 sequences of 32 tokens; as exported (fp32) and after
// the amp-rewrite pipeline (fp16, bf16: what the CPU reference pays for 16-bit storage). The plan
// is built by a warm-up run, so the loop measures what a training or serving loop sees.
// tests/bench/compare_ort.sh runs ONNX Runtime on the same fp32 models and shapes.
//
//   build-cpu/bench_cpu_forward [--benchmark_filter=gpt]   (AMP_SOURCE_DIR: the checkout, default
//   the one this file was compiled from; AMP_THREADS: threads, default all cores)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/backend.h"
#include "graph/onnx_io.h"
#include "passes/pipelines.h"

namespace {

std::string model_path(const std::string& name) {
  const char* env = std::getenv("AMP_SOURCE_DIR");
  const std::filesystem::path root =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return (root / "models" / (name + ".onnx")).string();
}

amp::Tensor random_input(amp::DType t, std::vector<int64_t> dims) {
  amp::Tensor x(t, std::move(dims));
  std::mt19937 gen(1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == amp::DType::kInt64)
      x.mutable_as<int64_t>()[i] = static_cast<int64_t>(gen() % 64);
    else
      x.mutable_as<float>()[i] = static_cast<float>(gen() % 1000) / 1000.0f;
  }
  return x;
}

void BM_Forward(benchmark::State& state, const std::string& name, amp::DType precision, const std::string& input,
                amp::DType type, std::vector<int64_t> dims) {
  amp::Model m = amp::load_model(model_path(name));
  if (precision != amp::DType::kFloat) {
    amp::AmpResult result;
    amp::amp_rewrite_pipeline(amp::AmpPolicy(precision), result, false).run(m);
  }
  amp::CompileOptions options;
  const char* threads = std::getenv("AMP_THREADS");
  options.threads = threads ? std::atoi(threads) : 0;
  auto exe = amp::make_backend("cpu")->compile(m, options);
  const std::vector<std::pair<std::string, amp::Tensor>> feeds = {{input, random_input(type, dims)}};
  exe->run(feeds, {"logits"});  // plans this shape
  for (auto _ : state) benchmark::DoNotOptimize(exe->run(feeds, {"logits"}));
  const amp::MemoryStats mem = exe->memory();
  state.counters["batch"] = static_cast<double>(dims[0]);
  state.counters["arena_MiB"] = static_cast<double>(mem.arena_bytes) / (1 << 20);
  state.counters["no_reuse_MiB"] = static_cast<double>(mem.intermediate_bytes) / (1 << 20);
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(dims[0]), benchmark::Counter::kIsIterationInvariantRate);
}

#define AMP_FORWARD(model, precision, ...)                                                                    \
  BENCHMARK_CAPTURE(BM_Forward, model##_##precision, #model, amp::dtype_from_name(#precision).value(), __VA_ARGS__) \
      ->Unit(benchmark::kMillisecond)                                                                                \
      ->UseRealTime();
AMP_FORWARD(mlp, fp32, "input", amp::DType::kFloat, {256, 1, 28, 28})
AMP_FORWARD(cnn, fp32, "input", amp::DType::kFloat, {64, 1, 28, 28})
AMP_FORWARD(gpt, fp32, "tokens", amp::DType::kInt64, {16, 32})
AMP_FORWARD(mlp, fp16, "input", amp::DType::kFloat, {256, 1, 28, 28})
AMP_FORWARD(cnn, fp16, "input", amp::DType::kFloat, {64, 1, 28, 28})
AMP_FORWARD(gpt, fp16, "tokens", amp::DType::kInt64, {16, 32})
AMP_FORWARD(mlp, bf16, "input", amp::DType::kFloat, {256, 1, 28, 28})
AMP_FORWARD(cnn, bf16, "input", amp::DType::kFloat, {64, 1, 28, 28})
AMP_FORWARD(gpt, bf16, "tokens", amp::DType::kInt64, {16, 32})

}  // namespace

BENCHMARK_MAIN();
