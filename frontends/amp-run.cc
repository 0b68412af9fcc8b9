// amp-run MODEL --inputs IN.npz --outputs OUT.npz [--device cpu|cuda|auto]: runs a model once on
// arrays from an .npz (keys = graph input names) and writes every graph output to an .npz (keys =
// output names). bf16 arrays use the ".bf16" key convention of frontends/lib/npz.h.
#include <spdlog/spdlog.h>

#include <chrono>

#include "frontends/lib/model_runner.h"
#include "frontends/lib/npz.h"
#include "frontends/lib/tool_main.h"
#include "graph/onnx_io.h"

namespace amp {

static int run(const std::string& model_path, const std::string& inputs_path, const std::string& outputs_path,
               const RunSettings& settings) {
  const Model m = load_model(model_path);
  NamedTensors feeds = read_npz(inputs_path);
  const auto start = std::chrono::steady_clock::now();
  ModelRunner runner(m, model_path, settings);
  const NamedTensors outputs = runner.run(std::move(feeds), inputs_path);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  write_npz(outputs_path, outputs);
  const MemoryStats mem = runner.memory();
  spdlog::info("{} on {}: {} outputs to {} in {:.1f} ms (compile + first run); arena {} KiB, state {} KiB",
               model_path, runner.backend().name(), outputs.size(), outputs_path, ms, mem.arena_bytes / 1024,
               mem.state_bytes / 1024);
  return kExitOk;
}

}  // namespace amp

int main(int argc, char** argv) {
  CLI::App app{"Run an ONNX model on arrays from an .npz and write its outputs to an .npz.", "amp-run"};
  std::string model, inputs, outputs;
  amp::RunSettings settings;
  app.add_option("model", model, "the .onnx file")->required();
  app.add_option("--inputs", inputs, ".npz with one array per graph input, keyed by input name")->required();
  app.add_option("--outputs", outputs, ".npz to write, one array per graph output")->required();
  app.add_option("--device", settings.device, "cpu, cuda, or auto (cuda when a GPU is usable)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--threads", settings.threads, "CPU threads (0: all cores)");
  app.add_option("--seed", settings.seed, "seed for random ops (Dropout in training mode)");
  app.add_flag("--tf32", settings.tf32,
               "let fp32 products and convolutions use TF32 Tensor Cores (cuda; the CPU computes fp32)");
  return amp::tool_main(app, argc, argv, [&] { return amp::run(model, inputs, outputs, settings); });
}
