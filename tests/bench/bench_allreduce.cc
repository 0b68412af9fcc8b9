// What averaging the gradients costs on the CPU, and what reducing them in 16 bits would save:
// Communicator::sum (MPI_Allreduce) over as many fp32 values as each models/ model has trained
// parameters (what the step averages: fp32 gradients, one bucket), and over half as many (the
// bytes the same gradients take in fp16 or bf16), each timed over 200 calls after 20. Run it under
// mpirun, from the repository root (or give the models folder):
//   mpirun --allow-run-as-root -np 2 build/tests/bench_allreduce [MODELS_DIR]
// A fixed number of calls, as every rank must make the same ones. Rank 0 prints microseconds per
// call, the mean over the ranks.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "backends/communicator.h"
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"

namespace {

// Float initializers that are not BatchNorm statistics: the parameters amp-train trains.
int64_t parameters(const std::string& models, const std::string& name) {
  amp::Model m = amp::load_model((std::filesystem::path(models) / (name + ".train.onnx")).string());
  int64_t n = 0;
  for (const amp::Value* v : m.graph->initializers())
    if (v->dtype() == amp::DType::kFloat && v->name().find("running_") == std::string::npos) n += v->initializer().numel();
  return n;
}

double microseconds_per_sum(amp::Communicator& c, std::vector<float>& data) {
  for (int i = 0; i < 20; ++i) c.sum(data.data(), data.size());
  const auto start = std::chrono::steady_clock::now();
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) c.sum(data.data(), data.size());
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls;
  std::vector<double> total{us};
  c.sum(total.data(), 1);
  return total[0] / c.size();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string models = argc > 1 ? argv[1] : "models";
  std::shared_ptr<amp::Communicator> c = amp::join_launched_processes();
  if (!c) {
    std::fprintf(stderr, "bench_allreduce: run it under mpirun (mpirun -np 2 %s)\n", "build/tests/bench_allreduce");
    return 2;
  }
  amp::register_amp_op_schemas();
  if (c->rank() == 0)
    std::printf("%d processes\n%-5s %12s %16s %16s\n", c->size(), "model", "parameters", "fp32 (us/call)",
                "16-bit bytes (us)");
  for (const char* name : {"mlp", "cnn", "gpt"}) {
    const int64_t n = parameters(models, name);
    std::vector<float> full(static_cast<size_t>(n), 1.0f), half(static_cast<size_t>((n + 1) / 2), 1.0f);
    const double wide = microseconds_per_sum(*c, full), narrow = microseconds_per_sum(*c, half);
    if (c->rank() == 0) std::printf("%-5s %12lld %16.1f %16.1f\n", name, static_cast<long long>(n), wide, narrow);
  }
  return 0;
}
