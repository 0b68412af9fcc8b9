// amp-run MODEL --inputs IN.npz --outputs OUT.npz [--device cpu|cuda|auto]: runs a model once on
// arrays from an .npz (keys = graph input names) and writes every graph output to an .npz (keys =
// output names). bf16 arrays use the ".bf16" key convention of frontends/lib/npz.h.
#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "backends/backend.h"
#include "frontends/lib/non_finite.h"
#include "frontends/lib/npz.h"
#include "frontends/lib/tool_main.h"
#include "graph/error.h"
#include "graph/onnx_io.h"

namespace amp {

static int run(const std::string& model_path, const std::string& inputs_path, const std::string& outputs_path,
               const std::string& device, int threads, uint64_t seed, bool tf32) {
  const Model m = load_model(model_path);
  std::set<std::string> graph_inputs;
  for (const Value* v : m.graph->inputs()) graph_inputs.insert(v->name());

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (auto& [key, t] : read_npz(inputs_path)) {
    if (graph_inputs.count(key))
      feeds.emplace_back(key, std::move(t));
    else
      spdlog::warn("{}: array '{}' is not a graph input; ignored", inputs_path, key);
  }
  for (const Value* v : m.graph->inputs()) {
    if (v->has_initializer()) continue;
    bool fed = false;
    for (const auto& f : feeds) fed = fed || f.first == v->name();
    if (!fed)
      throw InputError(inputs_path + ": no array '" + v->name() + "' for graph input " + v->name() + " (" +
                       v->type().str() + ")");
  }

  std::unique_ptr<Backend> backend = make_backend(device);
  CompileOptions options;
  options.threads = threads;
  options.seed = seed;
  options.tf32 = tf32;
  const auto start = std::chrono::steady_clock::now();
  auto exe = backend->compile(m, options);
  std::vector<std::string> fetches;
  for (const Value* v : m.graph->outputs()) fetches.push_back(v->name());
  std::vector<Tensor> outputs = exe->run(feeds, fetches);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::pair<std::string, Tensor>> arrays;
  for (size_t i = 0; i < fetches.size(); ++i) {
    // Said, not averaged away: which outputs hold NaN or inf, and from which sample on.
    const NonFiniteCount c = count_non_finite(outputs[i]);
    if (c.any())
      spdlog::warn("{}: output '{}' has {}", model_path, fetches[i],
                   c.text(outputs[i].dims.empty() ? 1 : outputs[i].dims[0]));
    arrays.emplace_back(fetches[i], std::move(outputs[i]));
  }
  write_npz(outputs_path, arrays);
  const MemoryStats mem = exe->memory();
  spdlog::info("{} on {}: {} outputs to {} in {:.1f} ms (compile + first run); arena {} KiB, state {} KiB",
               model_path, backend->name(), arrays.size(), outputs_path, ms, mem.arena_bytes / 1024,
               mem.state_bytes / 1024);
  return kExitOk;
}

}  // namespace amp

int main(int argc, char** argv) {
  CLI::App app{"Run an ONNX model on arrays from an .npz and write its outputs to an .npz.", "amp-run"};
  std::string model, inputs, outputs, device = "cpu";
  int threads = 0;
  uint64_t seed = 0;
  bool tf32 = false;
  app.add_option("model", model, "the .onnx file")->required();
  app.add_option("--inputs", inputs, ".npz with one array per graph input, keyed by input name")->required();
  app.add_option("--outputs", outputs, ".npz to write, one array per graph output")->required();
  app.add_option("--device", device, "cpu, cuda, or auto (cuda when a GPU is usable)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--threads", threads, "CPU threads (0: all cores)");
  app.add_option("--seed", seed, "seed for random ops (Dropout in training mode)");
  app.add_flag("--tf32", tf32, "let fp32 products and convolutions use TF32 Tensor Cores (cuda; the CPU computes fp32)");
  return amp::tool_main(app, argc, argv, [&] { return amp::run(model, inputs, outputs, device, threads, seed, tf32); });
}
