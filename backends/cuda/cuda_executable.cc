#include "backends/cuda/cuda_executable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/channels_last.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_layout.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/unit_times.h"
#include "graph/error.h"

namespace amp::cuda {

namespace {

// The "plan" line of the device report: how many units were prepared, in how many ms in all, and
// the slowest five with their ms (the places a cold first step waits).
void record_prepare_times(std::vector<std::pair<double, const Unit*>> ms,
                          std::chrono::steady_clock::time_point start, DeviceReport& report) {
  const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const size_t shown = std::min<size_t>(5, ms.size());
  std::partial_sort(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(shown), ms.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string slowest;
  for (size_t i = 0; i < shown; ++i) {
    char t[32];
    std::snprintf(t, sizeof t, "%.1f", ms[i].first);
    slowest += (i ? "; " : "") + ms[i].second->where + " [" + ms[i].second->kind + "] " + t + " ms";
  }
  char total_text[32];
  std::snprintf(total_text, sizeof total_text, "%.1f", total);
  report.record("plan", {{"units", std::to_string(ms.size())}, {"prepare ms", total_text}, {"slowest", slowest}});
}

// cuBLASLt's default preferences assume 256-byte aligned operands; so does every buffer here.
constexpr size_t kAlignment = 256;
// Runs of a plan before its launches are captured into a CUDA Graph: the first run compiles and
// warms up (NVRTC, cuBLASLt and cuDNN initialise lazily), the second runs the steady state.
constexpr uint64_t kRunsBeforeCapture = 2;

// AMP_CUDA_TF32=1 allows TF32 as CompileOptions::tf32 does, for programs that do not set it.
bool tf32_from_env() {
  return env_flag("AMP_CUDA_TF32");
}

bool graphs_enabled() {
  const char* v = std::getenv("AMP_CUDA_GRAPHS");
  return !(v && std::string(v) == "0");
}

}  // namespace

struct CudaExecutable::Plan {
  struct Launch {
    const Unit* unit;
    std::unique_ptr<PreparedOp> op;
    OpBuffers buffers;
    // Work of earlier units running beside the step's stream that this one reads: the step's
    // stream waits for their events first (PreparedOp::completion).
    std::vector<cudaEvent_t> joins;
  };
  ShapePlan shapes;                    // types, dims, host values and units of this signature
  std::vector<void*> device;           // per value: its address in this plan, else null
  std::vector<Launch> launches;
  std::vector<cudaEvent_t> final_joins;  // beside-work nothing in the step reads: joined at its end
  std::vector<std::pair<int, void*>> feed_copies;                // feed value -> device buffer
  std::vector<std::pair<int, void*>> state_fetches;              // fetched state -> staging copy
  std::vector<int> fetches;
  DeviceBuffer arena, workspace, uploads, seed;
  ArenaPlan layout;
  cudaGraphExec_t graph = nullptr;
  uint64_t runs = 0, replays = 0;

  ~Plan() {
    if (graph) cudaGraphExecDestroy(graph);
  }
};

CudaExecutable::CudaExecutable(const Model& m, const CompileOptions& options, std::shared_ptr<DeviceContext> ctx)
    : ctx_(std::move(ctx)), s_(m, options), seed_(options.seed), runs_(options.first_run), tf32_(options.tf32 || tf32_from_env()),
      prefetch_(ctx_->device()) {
  // State on the device, copied once.
  for (int v : s_.state_values) {
    const Tensor& init = s_.program.initializers[s_.program.values[v].initializer];
    State st{init.name, init.dtype, init.dims, DeviceBuffer(init.nbytes())};
    if (init.nbytes() > 0) upload(st.buffer.data(), init.data(), init.nbytes());
    state_.push_back(std::move(st));
  }
  AMP_CUDA_CHECK(cudaEventCreate(&run_start_));
  const cudaError_t made = cudaEventCreate(&run_end_);
  if (made != cudaSuccess) cudaEventDestroy(run_start_);
  AMP_CUDA_CHECK(made);
}

// On the step's stream, so the step's kernels are ordered after the copy: a plain cudaMemcpy from
// pageable memory runs on the legacy stream, which a non-blocking stream does not wait for, and
// may return before the data lands. The source is staged before this returns, so it may go.
void CudaExecutable::upload(void* dst, const void* src, size_t bytes) {
  AMP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_->stream()));
}

CudaExecutable::~CudaExecutable() {
  plans_.clear();  // graphs and buffers before the context they live in
  cudaEventDestroy(run_start_);
  cudaEventDestroy(run_end_);
}

const DeviceBuffer& CudaExecutable::device_constant(int value) {
  auto it = constants_on_device_.find(value);
  if (it != constants_on_device_.end()) return it->second;
  const Tensor& t = s_.program.initializers[s_.program.values[value].initializer];
  DeviceBuffer b(t.nbytes());
  if (t.nbytes() > 0) upload(b.data(), t.data(), t.nbytes());
  return constants_on_device_.emplace(value, std::move(b)).first->second;
}

std::unique_ptr<CudaExecutable::Plan> CudaExecutable::build_plan(const std::vector<const Tensor*>& fed,
                                                                 const std::vector<int>& fetches) {
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  const size_t num_values = s_.program.values.size();
  p.fetches = fetches;
  std::vector<TensorDesc> state_desc;
  for (const State& st : state_) state_desc.push_back(TensorDesc{st.dtype, st.dims});
  std::vector<int> targets = fetches;
  for (const auto& [s, v] : s_.updates) targets.push_back(v);
  p.shapes = s_.plan(fed, state_desc, targets);
  const ShapePlan& sp = p.shapes;
  const std::vector<TensorDesc>& desc = sp.desc;
  // A value stored in a layout of its own (a product's ReLU bitmask) has no bytes of its type to
  // copy out; the schedule packs only values that are neither graph outputs nor state updates.
  for (int v : fetches)
    if (desc[v].packed_bytes)
      throw InputError(s_.program.path + ": '" + s_.program.values[v].name +
                       "' exists only as a product epilogue's bitmask on the cuda backend; fetch a graph output instead");
  p.device.assign(num_values, nullptr);
  for (size_t v = 0; v < num_values; ++v)
    if (s_.state_of[v] >= 0 && !fed[v]) p.device[v] = state_[s_.state_of[v]].buffer.data();

  // Prepare every unit: algorithms, descriptors, compiled kernels. Timed for the device report: a
  // cold first step is mostly this (cuDNN's measurements and graph builds, NVRTC).
  size_t workspace = 0;
  std::vector<std::pair<double, const Unit*>> prepare_ms;
  const auto plan_start = std::chrono::steady_clock::now();
  for (const Unit* unit : sp.order) {
    const DeviceReport::UnitScope scope(unit->where, unit->kind);
    const auto start = std::chrono::steady_clock::now();
    Plan::Launch launch{unit, at_node(unit->where, [&] { return prepare_unit(sp, *unit, tf32_, *ctx_); }), {}, {}};
    prepare_ms.emplace_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
                            unit);
    workspace = std::max(workspace, launch.op->workspace_bytes());
    p.launches.push_back(std::move(launch));
  }
  if (ctx_->report().enabled()) record_prepare_times(prepare_ms, plan_start, ctx_->report());

  std::vector<bool> beside;
  for (const Plan::Launch& l : p.launches) beside.push_back(l.op->completion() != nullptr);
  const std::vector<int64_t> join = join_positions(sp, beside);
  for (size_t pos = 0; pos < join.size(); ++pos) {
    if (join[pos] < 0) continue;
    cudaEvent_t done = p.launches[pos].op->completion();
    (join[pos] < static_cast<int64_t>(p.launches.size()) ? p.launches[static_cast<size_t>(join[pos])].joins : p.final_joins)
        .push_back(done);
  }

  // One arena (device_layout.h); views take their root's address once every root has one.
  const DeviceLayout mem = layout_device_memory(s_, sp, fed, fetches, kAlignment, beside);
  const std::vector<bool>& on_device = mem.on_device;
  p.layout = mem.arena;
  p.arena = DeviceBuffer(p.layout.arena_bytes);
  auto* base = static_cast<uint8_t*>(p.arena.data());
  for (size_t v = 0; v < num_values; ++v) {
    if (mem.offset[v] < 0) continue;
    p.device[v] = base + mem.offset[v];
    if (fed[v]) p.feed_copies.emplace_back(static_cast<int>(v), p.device[v]);
  }
  for (const auto& [v, offset] : mem.state_fetches) p.state_fetches.emplace_back(v, base + offset);

  // Host values a device unit reads: initializers once per executable, the rest once per plan.
  size_t upload_bytes = 0;
  std::vector<std::pair<int, size_t>> uploads;
  for (size_t v = 0; v < num_values; ++v) {
    if (!on_device[v] || p.device[v] || !sp.known[v] || desc[v].nbytes() == 0 || sp.alias_of[v] >= 0) continue;
    if (s_.program.values[v].initializer >= 0 && !fed[v]) {
      p.device[v] = device_constant(static_cast<int>(v)).data();
      continue;
    }
    uploads.emplace_back(static_cast<int>(v), upload_bytes);
    upload_bytes += (desc[v].nbytes() + kAlignment - 1) / kAlignment * kAlignment;
  }
  p.uploads = DeviceBuffer(upload_bytes);
  for (const auto& [v, offset] : uploads) {
    p.device[v] = static_cast<uint8_t*>(p.uploads.data()) + offset;
    upload(p.device[v], sp.known[v]->data(), desc[v].nbytes());
  }
  for (size_t v = 0; v < num_values; ++v)
    if (sp.alias_of[v] >= 0) p.device[v] = p.device[sp.alias_of[v]];
  for (size_t v = 0; v < num_values; ++v)
    if (on_device[v] && !p.device[v] && desc[v].nbytes() > 0)
      throw Error(s_.program.path + ": internal: '" + s_.program.values[v].name + "' has no device buffer");

  p.workspace = DeviceBuffer(workspace);
  p.seed = DeviceBuffer(sizeof(unsigned long long));
  for (Plan::Launch& l : p.launches) {
    for (int v : l.unit->in) l.buffers.in.push_back(v >= 0 ? p.device[v] : nullptr);
    for (int v : l.unit->out) l.buffers.out.push_back(v >= 0 ? p.device[v] : nullptr);
    l.buffers.workspace = p.workspace.data();
    l.buffers.seed = static_cast<const unsigned long long*>(p.seed.data());
  }
  for (const auto& [s, v] : s_.updates) {
    const State& st = state_[s];
    if (desc[v].packed_bytes)
      throw Error(s_.program.path + ": internal: state '" + st.name + "' is updated from a packed value");
    if (desc[v].dtype != st.dtype || desc[v].dims != st.dims)
      throw InputError(s_.program.path + ": state '" + st.name + "' is " + type_str(st.dtype, st.dims) + " but its update '" +
                       s_.program.values[v].name + "' is " + type_str(desc[v].dtype, desc[v].dims));
  }
  return plan;
}

void CudaExecutable::enqueue_step(Plan& p, UnitTimes* times) {
  const cudaStream_t stream = ctx_->stream();
  if (times) times->mark(0, stream);
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const Plan::Launch& l = p.launches[i];
    for (cudaEvent_t done : l.joins) AMP_CUDA_CHECK(cudaStreamWaitEvent(stream, done, 0));
    const DeviceReport::UnitScope scope(l.unit->where, l.unit->kind);
    at_node(l.unit->where, [&] { l.op->enqueue(l.buffers, *ctx_); });
    if (times) times->mark(i + 1, stream);
  }
  // Joined before the fetches and updates read the results, and before a capture ends (a capture
  // with a forked stream not joined back is invalid).
  for (cudaEvent_t done : p.final_joins) AMP_CUDA_CHECK(cudaStreamWaitEvent(stream, done, 0));
  // Fetched state as it was during the step, before the updates overwrite it.
  for (const auto& [v, staging] : p.state_fetches)
    AMP_CUDA_CHECK(cudaMemcpyAsync(staging, p.device[v], p.shapes.desc[v].nbytes(), cudaMemcpyDeviceToDevice, stream));
  for (const auto& [s, v] : s_.updates) {
    State& st = state_[s];
    if (p.device[v] != st.buffer.data() && st.buffer.size() > 0)
      AMP_CUDA_CHECK(cudaMemcpyAsync(st.buffer.data(), p.device[v], st.buffer.size(), cudaMemcpyDeviceToDevice, stream));
  }
  if (times) times->mark(p.launches.size() + 1, stream);
}

// The unit_times.h report of a run enqueued with `times`, once its events have passed.
void CudaExecutable::record_unit_times_of(const Plan& p, const UnitTimes& times, uint64_t run) {
  std::vector<TimedUnit> units;
  for (const Plan::Launch& l : p.launches) {
    TimedUnit u{l.unit->where, l.unit->kind, 0, l.op->completion() != nullptr};
    for (size_t i = 0; i < l.unit->in.size(); ++i) {
      const int v = l.unit->in[i];
      if (v >= 0 && !(i < l.unit->host_only.size() && l.unit->host_only[i])) u.bytes += p.shapes.desc[v].nbytes();
    }
    for (int v : l.unit->out)
      if (v >= 0) u.bytes += p.shapes.desc[v].nbytes();
    units.push_back(std::move(u));
  }
  record_unit_times(units, times.intervals(), run, ctx_->report());
}

std::vector<Tensor> CudaExecutable::run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                        const std::vector<std::string>& fetches) {
  const std::vector<const Tensor*> fed = bind_feeds(s_.program, feeds, "cuda");
  const std::vector<int> fetch_ids = fetch_values(s_.program, fetches);
  const std::string key = plan_signature(fed, fetch_ids, s_.shape_value);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= 16) plans_.clear();  // many distinct shapes: keep device memory bounded
    it = plans_.emplace(key, build_plan(fed, fetch_ids)).first;
  }
  Plan& p = *it->second;
  last_plan_ = &p;
  const cudaStream_t stream = ctx_->stream();

  AMP_CUDA_CHECK(cudaEventRecord(run_start_, stream));
  for (const auto& [v, dst] : p.feed_copies) {
    const size_t bytes = p.shapes.desc[v].nbytes();
    if (!prefetch_.take(fed[v]->data(), bytes, dst, stream))
      AMP_CUDA_CHECK(cudaMemcpyAsync(dst, fed[v]->data(), bytes, cudaMemcpyHostToDevice, stream));
  }
  const unsigned long long run_seed = splitmix64(seed_ ^ splitmix64(runs_));
  AMP_CUDA_CHECK(cudaMemcpyAsync(p.seed.data(), &run_seed, sizeof run_seed, cudaMemcpyHostToDevice, stream));

  // AMP_CUDA_UNIT_TIMES=K: this plan's K-th run, enqueued unit by unit between events.
  std::unique_ptr<UnitTimes> times;
  if (ctx_->report().enabled() && unit_times_run() == p.runs + 1)  // no getenv a run without a report
    times = std::make_unique<UnitTimes>(p.launches.size() + 2);
  if (times) {
    enqueue_step(p, times.get());
    record_unit_times_of(p, *times, p.runs + 1);
  } else if (p.graph) {
    AMP_CUDA_CHECK(cudaGraphLaunch(p.graph, stream));
    ++p.replays;
  } else if (p.runs >= kRunsBeforeCapture && graphs_enabled()) {
    // Capture the steady-state step once: from now on one launch replaces hundreds.
    cudaGraph_t graph = nullptr;
    AMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_step(p);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    AMP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t status = cudaGraphInstantiate(&p.graph, graph, 0);
    cudaGraphDestroy(graph);
    if (status != cudaSuccess) {
      p.graph = nullptr;
      AMP_CUDA_CHECK(status);  // throws; AMP_CUDA_GRAPHS=0 runs without graphs
    }
    AMP_CUDA_CHECK(cudaGraphLaunch(p.graph, stream));
    ++p.replays;
  } else {
    enqueue_step(p);
  }
  AMP_CUDA_CHECK(cudaEventRecord(run_end_, stream));
  ++p.runs;
  ++runs_;

  std::vector<Tensor> results;
  for (int v : fetch_ids) {
    Tensor t(p.shapes.desc[v].dtype, p.shapes.desc[v].dims);
    t.name = s_.program.values[v].name;
    const size_t bytes = t.nbytes();
    const void* staged = nullptr;
    for (const auto& [sv, at] : p.state_fetches)
      if (sv == v) staged = at;
    if (bytes == 0) {
    } else if (fed[v]) {
      std::memcpy(t.mutable_data(), fed[v]->data(), bytes);
    } else if (staged || p.device[v]) {
      AMP_CUDA_CHECK(cudaMemcpyAsync(t.mutable_data(), staged ? staged : p.device[v], bytes, cudaMemcpyDeviceToHost, stream));
    } else if (p.shapes.known[v]) {
      std::memcpy(t.mutable_data(), p.shapes.known[v]->data(), bytes);
    } else {
      throw InputError(s_.program.path + ": '" + t.name +
                       "' lives only inside a fused kernel on the cuda backend; fetch a graph output instead");
    }
    results.push_back(std::move(t));
  }
  AMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  float device_ms = 0.0f;
  AMP_CUDA_CHECK(cudaEventElapsedTime(&device_ms, run_start_, run_end_));
  last_device_ms_ = device_ms;
  return results;
}

std::vector<std::string> CudaExecutable::state_names() const {
  std::vector<std::string> names;
  for (const State& s : state_) names.push_back(s.name);
  return names;
}

Tensor CudaExecutable::read_state(const std::string& name) const {
  const int s = s_.state_index(name);
  if (s < 0) throw InputError(s_.program.path + ": no state named '" + name + "'");
  const State& st = state_[s];
  Tensor t(st.dtype, st.dims);
  t.name = name;
  if (t.nbytes() > 0) {
    AMP_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()));
    AMP_CUDA_CHECK(cudaMemcpy(t.mutable_data(), st.buffer.data(), t.nbytes(), cudaMemcpyDeviceToHost));
  }
  return t;
}

void CudaExecutable::write_state(const std::string& name, const Tensor& value) {
  const int s = s_.state_index(name);
  if (s < 0) throw InputError(s_.program.path + ": no state named '" + name + "'");
  State& st = state_[s];
  if (value.dtype != st.dtype)
    throw InputError(s_.program.path + ": state '" + name + "' is " + std::string(dtype_name(st.dtype)) + ", got " +
                     std::string(dtype_name(value.dtype)));
  AMP_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()));
  if (value.dims != st.dims) {
    // Captured graphs and plans hold the old address and shapes.
    plans_.clear();
    last_plan_ = nullptr;
    st.buffer = DeviceBuffer(value.nbytes());
    st.dims = value.dims;
  }
  if (value.nbytes() > 0) upload(st.buffer.data(), value.data(), value.nbytes());
}

void CudaExecutable::prefetch(const std::vector<std::pair<std::string, Tensor>>& feeds) { prefetch_.prefetch(feeds); }

MemoryStats CudaExecutable::memory() const {
  MemoryStats m;
  for (const State& s : state_) m.state_bytes += s.buffer.size();
  if (last_plan_) {
    m.arena_bytes = last_plan_->layout.arena_bytes + last_plan_->workspace.size();
    m.peak_bytes = last_plan_->layout.peak_bytes;
    m.intermediate_bytes = last_plan_->layout.total_bytes + last_plan_->workspace.size();
  }
  m.arena_bytes += prefetch_.slot_bytes();  // the prefetched feeds' device copies
  return m;
}

size_t CudaExecutable::graph_replays() const { return last_plan_ ? last_plan_->replays : 0; }

}  // namespace amp::cuda
