// amp-run's work, shared by the command and the Python package (onnx_amp.run, onnx_amp.Runner): a
// model compiled once on a backend, run on named arrays, every graph output returned and the ones
// holding NaN or inf named in a warning.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "graph/model.h"

namespace amp {

struct RunSettings {
  std::string device = "cpu";  // cpu, cuda or auto
  int threads = 0;             // CPU threads (0: all cores)
  uint64_t seed = 0;           // random ops (Dropout in training mode)
  bool tf32 = false;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class ModelRunner {
 public:
  // `model_path` names the model in messages. InputError when the device cannot be had or the
  // backend cannot run a node (naming file, node and op).
  ModelRunner(const Model& m, const std::string& model_path, const RunSettings& settings);

  // Feeds keyed by graph input name; `feeds_source` (a file, "inputs") names them in messages. A
  // feed no graph input reads is dropped with a warning; a graph input without a feed (and
  // without an initializer) is an InputError. Returns every graph output, in graph order.
  NamedTensors run(NamedTensors feeds, const std::string& feeds_source);

  const Backend& backend() const { return *backend_; }
  MemoryStats memory() const { return exe_->memory(); }
  // The graph inputs a run must be fed, with their types: (name, "float32[N,3,224,224]").
  const std::vector<std::pair<std::string, ValueType>>& inputs() const { return inputs_; }

 private:
  std::string model_path_;
  std::vector<std::pair<std::string, ValueType>> inputs_;
  std::vector<std::string> fetches_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executable> exe_;
};

}  // namespace amp
