// The narrow interface every backend implements (CPU reference, CUDA). A backend says which nodes
// it can run, compiles a Model's main graph into an Executable (schedule, static memory plan that
// reuses buffers by liveness, kernel choice) and runs it with named feeds and fetches. State —
// weights, optimizer moments, loss scale — stays resident between runs (device memory on a GPU)
// and is written back in place from graph outputs, the way TrainingInfoProto's update_binding says.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"
#include "graph/tensor.h"

namespace amp {

struct CompileOptions {
  // Initializers kept resident as state: read once at compile time, readable and writable after.
  // Empty: every initializer is state.
  std::vector<std::string> state;
  // After each run, state <- graph output (name pairs), applied after all outputs are computed.
  std::vector<std::pair<std::string, std::string>> state_updates;
  uint64_t seed = 0;  // random ops (Dropout) draw from this, advanced per run
  int threads = 0;    // 0: all cores
};

struct MemoryStats {
  size_t arena_bytes = 0;  // the static plan's activation arena
  size_t state_bytes = 0;  // resident weights and optimizer state
  size_t peak_bytes = 0;   // the most in use at once during a run
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs once; returns fetches in the order asked, as host tensors.
  virtual std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                  const std::vector<std::string>& fetches) = 0;
  virtual std::vector<std::string> state_names() const = 0;
  virtual Tensor read_state(const std::string& name) const = 0;
  virtual void write_state(const std::string& name, const Tensor& value) = 0;
  virtual MemoryStats memory() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // False (with the reason) when the backend cannot run on this machine, e.g. no GPU.
  virtual bool available(std::string* why) const = 0;
  // "" when this backend can run the node, else why not.
  virtual std::string unsupported_reason(const Node& n) const = 0;
  // Throws InputError naming the node and op of the first node it cannot run.
  virtual std::unique_ptr<Executable> compile(const Model& m, const CompileOptions& options) = 0;
};

// "cpu", "cuda" or "auto" (cuda when available, else cpu). Throws InputError for an unknown name
// or an unavailable device asked for by name.
std::unique_ptr<Backend> make_backend(const std::string& device);

}  // namespace amp
