// Throughput of the CPU backend's elementwise kernels, one node each over 2^20 elements, in fp32,
// fp16, bf16 and fp64: the unary activations, same-shape and bias-broadcast arithmetic, a
// comparison and GELU. bench_cpu_forward shows whole models; this shows whether the per-element
// loops stay vectorized (the 16-bit ones widen to fp32 in blocks, compute, and round once).
//
//   build/tests/bench_cpu_elementwise [--benchmark_filter=Sigmoid]   (AMP_THREADS: threads,
//   default all cores)
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "graph/half.h"
#include "tests/support/one_node.h"

namespace {

constexpr int64_t kRows = 1024, kCols = 1024;

amp::Tensor filled(amp::DType t, std::vector<int64_t> dims, uint32_t seed) {
  amp::Tensor x(t, std::move(dims));
  uint32_t state = seed;
  for (int64_t i = 0; i < x.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float v = static_cast<float>(state >> 8) / 16777216.0f * 8.0f - 4.0f;  // [-4, 4)
    switch (t) {
      case amp::DType::kFloat: x.mutable_as<float>()[i] = v; break;
      case amp::DType::kDouble: x.mutable_as<double>()[i] = v; break;
      case amp::DType::kFloat16: x.mutable_as<uint16_t>()[i] = amp::fp32_to_fp16(v); break;
      case amp::DType::kBFloat16: x.mutable_as<uint16_t>()[i] = amp::fp32_to_bf16(v); break;
      default: std::abort();
    }
  }
  return x;
}

// arity 1: x [R,C]; arity 2: a [R,C] and b [R,C], or b [C] with `bias`.
void BM_Elementwise(benchmark::State& state, const std::string& op, const std::string& domain, int arity, bool bias,
                    amp::DType t, amp::DType out) {
  amp::test::Feeds feeds = {{"a", filled(t, {kRows, kCols}, 1)}};
  if (arity == 2) feeds.push_back({"b", filled(t, bias ? std::vector<int64_t>{kCols} : std::vector<int64_t>{kRows, kCols}, 2)});
  amp::test::OneNode one(op, feeds, {out}, domain);
  amp::CompileOptions options;
  const char* threads = std::getenv("AMP_THREADS");
  options.threads = threads ? std::atoi(threads) : 0;
  auto exe = amp::make_backend("cpu")->compile(one.m, options);
  exe->run(one.feeds, one.outputs);  // plans this shape
  for (auto _ : state) benchmark::DoNotOptimize(exe->run(one.feeds, one.outputs));
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(kRows * kCols), benchmark::Counter::kIsIterationInvariantRate);
}

#define AMP_ELEMENTWISE(name, op, domain, arity, bias, out)                                                           \
  BENCHMARK_CAPTURE(BM_Elementwise, name##_fp32, op, domain, arity, bias, amp::DType::kFloat, out(amp::DType::kFloat)) \
      ->Unit(benchmark::kMicrosecond)->UseRealTime();                                                                 \
  BENCHMARK_CAPTURE(BM_Elementwise, name##_fp16, op, domain, arity, bias, amp::DType::kFloat16,                       \
                    out(amp::DType::kFloat16))->Unit(benchmark::kMicrosecond)->UseRealTime();                           \
  BENCHMARK_CAPTURE(BM_Elementwise, name##_bf16, op, domain, arity, bias, amp::DType::kBFloat16,                      \
                    out(amp::DType::kBFloat16))->Unit(benchmark::kMicrosecond)->UseRealTime();                          \
  BENCHMARK_CAPTURE(BM_Elementwise, name##_fp64, op, domain, arity, bias, amp::DType::kDouble,                        \
                    out(amp::DType::kDouble))->Unit(benchmark::kMicrosecond)->UseRealTime();

#define AMP_SAME(t) t
#define AMP_BOOL(t) amp::DType::kBool
AMP_ELEMENTWISE(Relu, "Relu", "", 1, false, AMP_SAME)
AMP_ELEMENTWISE(Sigmoid, "Sigmoid", "", 1, false, AMP_SAME)
AMP_ELEMENTWISE(Tanh, "Tanh", "", 1, false, AMP_SAME)
AMP_ELEMENTWISE(Gelu, "Gelu", "ai.onnx_amp", 1, false, AMP_SAME)
AMP_ELEMENTWISE(Add, "Add", "", 2, false, AMP_SAME)
AMP_ELEMENTWISE(AddBias, "Add", "", 2, true, AMP_SAME)
AMP_ELEMENTWISE(Mul, "Mul", "", 2, false, AMP_SAME)
AMP_ELEMENTWISE(Less, "Less", "", 2, false, AMP_BOOL)

}  // namespace

BENCHMARK_MAIN();
