// The narrow interface every backend implements (CPU reference, CUDA). A backend says which nodes
// it can run, compiles a Model's main graph into an Executable (schedule, static memory plan that
// reuses buffers by liveness, kernel choice) and runs it with named feeds and fetches. State —
// weights, optimizer moments, loss scale — stays resident between runs (device memory on a GPU)
// and is written back in place from graph outputs, the way TrainingInfoProto's update_binding says.
//
// Shapes are resolved when a run sees a new input-shape signature: the executable plans that
// signature once (shapes of every value, one arena sized by liveness) and reuses the plan for
// every later run with the same feed shapes. A GPU backend may enqueue work asynchronously on its
// own stream; run() returns only once the fetched tensors are on the host and state is updated.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/communicator.h"
#include "graph/model.h"
#include "graph/tensor.h"

namespace amp {

struct CompileOptions {
  // Initializers kept resident as state: read once at compile time, readable and writable after.
  // Empty: every initializer is state. The others are constants the backend may fold or share.
  std::vector<std::string> state;
  // After each run, state <- graph output (name pairs), applied after all outputs are computed.
  std::vector<std::pair<std::string, std::string>> state_updates;
  uint64_t seed = 0;  // random ops (Dropout) draw from this, advanced per run
  int threads = 0;    // 0: all cores
  // Runs an earlier executable of the same graph already made (a resumed training run): random ops
  // continue the stream where it stopped, so N runs + resume + N runs draws what 2N runs draw.
  uint64_t first_run = 0;
  // fp32 products and convolutions may use TF32 Tensor Cores (10-bit mantissa in the products,
  // fp32 sums: PyTorch's allow_tf32). The cuda backend only; the CPU backend computes fp32.
  bool tf32 = false;
  // The processes of a data-parallel run: the graph's AllReduce nodes average over them (MPI on
  // the CPU, NCCL bootstrapped through it on the GPU, whose device is then the one of this
  // process's local rank). Null: one process, where an AllReduce passes its inputs on.
  std::shared_ptr<Communicator> communicator = nullptr;
  // The CPU backend runs each group of elementwise ops (graph/ops/elementwise_grouping.h) as one
  // fused kernel: one pass through memory instead of one per op, the same results bit for bit.
  // (The cuda backend always fuses.) Off: op by op, for tests that compare the two.
  bool fuse_elementwise = true;
  // The CPU backend keeps convolution weights that only convolutions and elementwise ops touch
  // (with their gradients and optimizer state) in the blocked layout oneDNN's convolutions use,
  // from step to step, instead of reordering them in and out at every convolution. The same
  // results bit for bit; read_state and write_state still see dense row-major tensors. Off: every
  // tensor dense, for tests that compare the two.
  bool native_weight_layouts = true;
  // The cuda backend stores the values between 16-bit convolutions, pools and BatchNorms
  // channels-last (NHWC), the layout cuDNN's Tensor Core kernels and fusion engines take, and
  // transposes only where such a region meets anything else (backends/cuda/channels_last.h).
  // Off: ONNX's layout everywhere, for tests and benchmarks that compare the two
  // (AMP_CUDA_CHANNELS_LAST=0 turns it off too).
  bool channels_last = true;
};

// One buffer of the arena: a value of the graph, or a kernel's scratch (value "").
struct ArenaUse {
  std::string value;
  size_t bytes = 0;
};

struct MemoryStats {
  size_t arena_bytes = 0;  // the static plan's activation arena (intermediates and scratch)
  size_t state_bytes = 0;  // resident weights and optimizer state
  size_t peak_bytes = 0;   // the most intermediate bytes live at once during a run (arena's lower bound)
  size_t intermediate_bytes = 0;  // sum of all intermediate and scratch buffers: the arena without reuse
  // Per state tensor (name, bytes), in state_names() order: what state_bytes sums.
  std::vector<std::pair<std::string, size_t>> state;
  // The buffers live at the step where the plan's live bytes peak: they sum to peak_bytes. Empty
  // where the backend does not say (cuda).
  std::vector<ArenaUse> peak_live;
  // Host bytes the executable holds besides state and arena: initializers that are not state (the
  // model's constants, shared with the Model compiled) and values computed while planning.
  size_t constant_bytes = 0;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs once; returns fetches in the order asked, as host tensors. Feeds are keyed by graph input
  // name; a fed initializer overrides its stored value for this run. Fetches may name any value
  // of the main graph; only the nodes they (and the state updates) need are run.
  // Throws InputError for an unknown, missing or mistyped feed and for an unknown fetch.
  virtual std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                  const std::vector<std::string>& fetches) = 0;
  virtual std::vector<std::string> state_names() const = 0;
  virtual Tensor read_state(const std::string& name) const = 0;
  // Replaces a state tensor's contents (same dtype; a new shape re-plans the next run).
  virtual void write_state(const std::string& name, const Tensor& value) = 0;
  // Figures of the plan used by the latest run (state_bytes only before the first run).
  virtual MemoryStats memory() const = 0;
  // Drops the plans (and their arenas) kept for later runs; the next run plans again. For a
  // caller about to hold a lot of memory elsewhere (copies of the state for a checkpoint).
  virtual void trim() {}
  // Starts moving these feeds to where a later run() given the same tensors reads them, from any
  // thread, while another run() is in progress: a training loop's next batch, gathered by its
  // loader. Nothing changes in what runs compute. The CPU backend reads feeds where they are: a
  // no-op there; the CUDA backend uploads them on a stream of its own (backends/cuda/feed_prefetch.h).
  virtual void prefetch(const std::vector<std::pair<std::string, Tensor>>& /*feeds*/) {}
  // Milliseconds the device spent on the latest run, from its first upload to the end of its last
  // unit (the CUDA backend's events); negative where a backend does not measure it (the CPU's
  // runs are host time throughout). A step's wall time beyond it is the host's.
  virtual double last_run_device_ms() const { return -1.0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // False (with the reason) when the backend cannot run on this machine, e.g. no GPU.
  virtual bool available(std::string* why) const = 0;
  // "" when this backend can run the node, else why not.
  virtual std::string unsupported_reason(const Node& n) const = 0;
  // Throws InputError naming the file, node and op of the first node it cannot run.
  virtual std::unique_ptr<Executable> compile(const Model& m, const CompileOptions& options) = 0;
};

// "cpu", "cuda" or "auto" (cuda when available, else cpu). Throws InputError for an unknown name
// and "cuda backend not available: <reason>" when cuda is asked for by name and cannot run.
std::unique_ptr<Backend> make_backend(const std::string& device);

// The CUDA backend (backends/cuda/, built when nvcc is found) defines this; make_backend() reaches
// it through the shared module's extern "C" entry point (backends/cuda_module.h), or directly where
// the backend is compiled into the executable (AMP_CUDA_LINKED). The returned backend reports
// through available() whether a device and driver are present.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace amp
