#include "backends/cuda/cuda_executable.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <queue>
#include <unordered_map>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/matmul_ops.h"
#include "backends/memory_plan.h"
#include "graph/error.h"
#include "passes/fusion/elementwise_fusion.h"
#include "passes/fusion/elementwise_program_eval.h"

namespace amp::cuda {

namespace {

// cuBLASLt's default preferences assume 256-byte aligned operands; so does every buffer here.
constexpr size_t kAlignment = 256;
// Runs of a plan before its launches are captured into a CUDA Graph: the first run compiles and
// warms up (NVRTC, cuBLASLt and cuDNN initialise lazily), the second runs the steady state.
constexpr uint64_t kRunsBeforeCapture = 2;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string type_str(DType t, const std::vector<int64_t>& dims) {
  std::string s = std::string(dtype_name(t)) + "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

template <class F>
auto at_node(const std::string& where, F&& fn) {
  try {
    return fn();
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

// Ops whose results differ per run although they read no data: never evaluated once per plan.
bool is_random_op(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "Bernoulli" || op == "Multinomial" || op == "Dropout";
}

bool graphs_enabled() {
  const char* v = std::getenv("AMP_CUDA_GRAPHS");
  return !(v && std::string(v) == "0");
}

bool is_fused_node(const Node& n) { return n.domain() == kAmpDomain && n.op_type() == kFusedElementwiseOp; }

}  // namespace

struct CudaExecutable::Unit {
  std::vector<int> steps;   // program steps it covers
  std::vector<int> in, out;  // value numbers in the op's operand order, -1 when absent
  std::vector<bool> host_only;  // per input: the op reads it only while planning (a shape input)
  std::unique_ptr<CudaOp> op;
  std::string where;
};

struct CudaExecutable::Plan {
  struct Launch {
    const Unit* unit;
    std::unique_ptr<PreparedOp> op;
    OpBuffers buffers;
  };
  std::vector<TensorDesc> desc;        // per value
  std::vector<cpu::View> host;         // per value, for the CPU shape kernels
  std::vector<const Tensor*> known;    // per value: contents known on the host, else null
  std::deque<Tensor> host_results;     // values computed on the host while planning
  std::vector<void*> device;           // per value: its address in this plan, else null
  std::vector<Launch> launches;
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
    : ctx_(std::move(ctx)), seed_(options.seed) {
  std::vector<const Node*> nodes;
  program_ = make_program(m, &nodes);
  const size_t num_steps = program_.steps.size();

  std::vector<std::vector<int>> shape_inputs(num_steps);
  std::vector<bool> reads_data(num_steps, true);
  for (size_t s = 0; s < num_steps; ++s) {
    const Node& n = *nodes[s];
    const Program::Step& step = program_.steps[s];
    if (is_fused_node(n)) {
      entries_.push_back(nullptr);
      shape_kernels_.push_back(nullptr);
      node_programs_.push_back(at_node(step.where, [&] {
        return std::make_unique<ElementwiseProgram>(ElementwiseProgram::parse(n.attr_string("program", "")));
      }));
      continue;
    }
    node_programs_.push_back(nullptr);
    // The CPU backend's kernels are the shape rules of every op, and compute host steps.
    const cpu::OpEntry* e = cpu::find_op(n.op_type());
    if (!e || (!n.domain().empty() && n.domain() != kAmpDomain))
      throw InputError(step.where + ": op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
                       " is not supported by the cuda backend");
    entries_.push_back(e);
    shape_kernels_.push_back(at_node(step.where, [&] { return e->make(n, step.opset); }));
    shape_inputs[s] = e->shape_inputs;
    reads_data[s] = e->reads_data;
  }
  shape_value_ = shape_values(program_, shape_inputs, reads_data);

  // State on the device, copied once.
  state_of_.assign(program_.values.size(), -1);
  std::vector<std::string> names = options.state;
  if (names.empty())
    for (const Tensor& t : program_.initializers) names.push_back(t.name);
  for (const std::string& name : names) {
    const int v = program_.find(name);
    if (v < 0 || program_.values[v].initializer < 0)
      throw InputError(program_.path + ": state '" + name + "' is not an initializer of the main graph");
    const Tensor& init = program_.initializers[program_.values[v].initializer];
    State st{name, init.dtype, init.dims, DeviceBuffer(init.nbytes())};
    if (init.nbytes() > 0) AMP_CUDA_CHECK(cudaMemcpy(st.buffer.data(), init.data(), init.nbytes(), cudaMemcpyHostToDevice));
    state_of_[v] = static_cast<int>(state_.size());
    state_.push_back(std::move(st));
  }
  for (const auto& [state, source] : options.state_updates) {
    const int s = state_index(state);
    const int v = program_.find(source);
    if (s < 0) throw InputError(program_.path + ": state update target '" + state + "' is not state");
    if (v < 0) throw InputError(program_.path + ": state update source '" + source + "' is not a value of the graph");
    updates_.emplace_back(s, v);
  }

  // Host steps: what planning can compute from constants, shape-deciding feeds and dims alone.
  host_value_.assign(program_.values.size(), false);
  for (size_t v = 0; v < program_.values.size(); ++v) {
    const Program::Val& val = program_.values[v];
    host_value_[v] = (val.initializer >= 0 && state_of_[v] < 0 && !val.graph_input) ||
                     (val.graph_input && shape_value_[v]);
  }
  host_step_.assign(num_steps, false);
  for (size_t s = 0; s < num_steps; ++s) {
    const Program::Step& step = program_.steps[s];
    if (!entries_[s] || is_random_op(step.op)) continue;
    bool host = !reads_data[s];
    if (!host) {
      host = true;
      for (int in : step.in) host = host && (in < 0 || host_value_[in]);
    }
    host_step_[s] = host;
    for (int out : step.out)
      if (out >= 0) host_value_[out] = host;
    for (int out : step.out)
      if (out >= 0 && shape_value_[out] && !host)
        throw InputError(step.where + ": a shape depends on '" + program_.values[out].name +
                         "', which is computed on the device; the cuda backend needs shapes known before a run");
  }
  build_units(m, nodes);
}

CudaExecutable::~CudaExecutable() {
  plans_.clear();  // graphs and buffers before the context they live in
}

void CudaExecutable::build_units(const Model& m, const std::vector<const Node*>& nodes) {
  const size_t num_steps = program_.steps.size();
  std::unordered_map<const Node*, int> step_of;
  for (size_t s = 0; s < num_steps; ++s) step_of[nodes[s]] = static_cast<int>(s);
  unit_of_step_.assign(num_steps, -1);
  std::vector<std::unique_ptr<Unit>> made;
  auto value_id = [&](const Value* v) { return v ? program_.find(v->name()) : -1; };
  auto add = [&](std::vector<const Node*> unit_nodes, std::vector<int> in, std::vector<int> out, std::unique_ptr<CudaOp> op) {
    auto u = std::make_unique<Unit>();
    for (const Node* n : unit_nodes) {
      u->steps.push_back(step_of.at(n));
      unit_of_step_[step_of.at(n)] = static_cast<int>(made.size());
    }
    u->where = program_.steps[u->steps.front()].where;
    u->in = std::move(in);
    u->out = std::move(out);
    u->host_only.assign(u->in.size(), false);
    u->op = std::move(op);
    made.push_back(std::move(u));
  };
  auto taken = [&](const Node* n) {
    auto it = step_of.find(n);
    return it == step_of.end() || host_step_[it->second] || unit_of_step_[it->second] >= 0;
  };

  for (ProductFusion& f : match_product_epilogues(*m.graph, taken)) {
    std::vector<int> in, out;
    for (const Value* v : f.inputs) in.push_back(value_id(v));
    for (const Value* v : f.outputs) out.push_back(value_id(v));
    add(f.nodes, in, out, std::move(f.op));
  }
  // Elementwise chains, and lone elementwise nodes as groups of one: every elementwise op runs as
  // a generated kernel. Grouping follows graph order, so it needs a sorted graph; an unsorted one
  // still runs, unfused.
  std::vector<FusionGroup> groups;
  if (m.graph->is_topologically_sorted()) {
    groups = find_elementwise_groups(*m.graph, 1, taken);
  } else {
    for (const Node* n : nodes)
      if (!taken(n) && is_fusable_node(*n)) groups.push_back(single_node_group(const_cast<Node*>(n)));
  }
  for (FusionGroup& g : groups) {
    std::vector<int> in, out;
    for (const Value* v : g.inputs) in.push_back(value_id(v));
    for (const Value* v : g.outputs) out.push_back(value_id(v));
    add({g.nodes.begin(), g.nodes.end()}, in, out, std::make_unique<FusedElementwiseOp>(std::move(g.program)));
  }
  for (size_t s = 0; s < num_steps; ++s) {
    if (host_step_[s] || unit_of_step_[s] >= 0) continue;
    const Node& n = *nodes[s];
    const Program::Step& step = program_.steps[s];
    std::unique_ptr<CudaOp> op;
    if (node_programs_[s]) {
      op = std::make_unique<FusedElementwiseOp>(*node_programs_[s]);
    } else if (const CudaOpEntry* e = find_cuda_op(n.domain(), n.op_type())) {
      op = at_node(step.where, [&] { return e->make(n, step.opset); });
    } else if (n.domain().empty() && elem_op_from_onnx(n.op_type())) {
      // An elementwise op the fusion pass left alone: its types say why.
      at_node(step.where, [&] { return single_node_group(const_cast<Node*>(&n)); });
    } else {
      throw InputError(step.where + ": op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
                       " is not supported by the cuda backend");
    }
    add({&n}, step.in, step.out, std::move(op));
    if (entries_[s])
      for (int i : entries_[s]->shape_inputs)
        if (i < static_cast<int>(made.back()->host_only.size())) made.back()->host_only[i] = true;
  }

  // Run order: units topologically, ties broken by their first step, so the order stays close to
  // the graph's (what the memory plan's liveness was tuned on).
  const size_t count = made.size();
  std::vector<std::vector<size_t>> readers(count);
  std::vector<size_t> pending(count, 0);
  for (size_t u = 0; u < count; ++u) {
    std::vector<size_t> deps;
    for (int v : made[u]->in) {
      if (v < 0) continue;
      const int p = program_.values[v].producer;
      if (p < 0 || unit_of_step_[p] < 0 || static_cast<size_t>(unit_of_step_[p]) == u) continue;
      deps.push_back(static_cast<size_t>(unit_of_step_[p]));
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (size_t d : deps) readers[d].push_back(u);
    pending[u] = deps.size();
  }
  auto first_step = [&](size_t u) { return *std::min_element(made[u]->steps.begin(), made[u]->steps.end()); };
  auto later = [&](size_t a, size_t b) { return first_step(a) > first_step(b); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> ready(later);
  for (size_t u = 0; u < count; ++u)
    if (pending[u] == 0) ready.push(u);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (size_t r : readers[u])
      if (--pending[r] == 0) ready.push(r);
  }
  if (order.size() != count) throw Error(program_.path + ": internal: fused units form a cycle");
  std::vector<int> new_index(count);
  for (size_t i = 0; i < count; ++i) new_index[order[i]] = static_cast<int>(i);
  for (int& u : unit_of_step_)
    if (u >= 0) u = new_index[static_cast<size_t>(u)];
  for (size_t u : order) units_.push_back(std::move(made[u]));
}

int CudaExecutable::state_index(const std::string& name) const {
  const int v = program_.find(name);
  return v < 0 ? -1 : state_of_[v];
}

const DeviceBuffer& CudaExecutable::device_constant(int value) {
  auto it = constants_on_device_.find(value);
  if (it != constants_on_device_.end()) return it->second;
  const Tensor& t = program_.initializers[program_.values[value].initializer];
  DeviceBuffer b(t.nbytes());
  if (t.nbytes() > 0) AMP_CUDA_CHECK(cudaMemcpy(b.data(), t.data(), t.nbytes(), cudaMemcpyHostToDevice));
  return constants_on_device_.emplace(value, std::move(b)).first->second;
}

std::vector<const Tensor*> CudaExecutable::bind_feeds(const std::vector<std::pair<std::string, Tensor>>& feeds) const {
  std::vector<const Tensor*> fed(program_.values.size(), nullptr);
  for (const auto& [name, t] : feeds) {
    const int v = program_.find(name);
    if (v < 0 || !program_.values[v].graph_input)
      throw InputError(program_.path + ": '" + name + "' is not an input of the graph");
    const Program::Val& val = program_.values[v];
    bool ok = val.dtype == DType::kUndefined || val.dtype == t.dtype;
    if (ok && val.shape) {
      ok = val.shape->rank() == t.dims.size();
      for (size_t i = 0; ok && i < t.dims.size(); ++i)
        ok = !val.shape->dims[i].is_static() || *val.shape->dims[i].value == t.dims[i];
    }
    if (!ok)
      throw InputError(program_.path + ": input '" + name + "' expects " +
                       (val.dtype == DType::kUndefined ? std::string("tensor") : std::string(dtype_name(val.dtype))) +
                       (val.shape ? val.shape->str() : std::string()) + ", got " + type_str(t.dtype, t.dims));
    if (dtype_size(t.dtype) == 0)
      throw InputError(program_.path + ": input '" + name + "': element type " + std::string(dtype_name(t.dtype)) +
                       " is not supported by the cuda backend");
    fed[v] = &t;
  }
  return fed;
}

std::string CudaExecutable::signature(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches) const {
  std::string key;
  for (int f : fetches) key += std::to_string(f) + ",";
  for (size_t v = 0; v < fed.size(); ++v) {
    if (!fed[v]) continue;
    key += "|" + std::to_string(v) + ":" + type_str(fed[v]->dtype, fed[v]->dims);
    if (shape_value_[v]) key.append(reinterpret_cast<const char*>(fed[v]->data()), fed[v]->nbytes());
  }
  return key;
}

std::unique_ptr<CudaExecutable::Plan> CudaExecutable::build_plan(const std::vector<const Tensor*>& fed,
                                                                 const std::vector<int>& fetches) {
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  const size_t num_values = program_.values.size();
  p.fetches = fetches;
  p.desc.resize(num_values);
  p.host.resize(num_values);
  p.known.assign(num_values, nullptr);
  p.device.assign(num_values, nullptr);
  for (size_t v = 0; v < num_values; ++v) {
    const Program::Val& val = program_.values[v];
    if (const Tensor* t = fed[v]) {
      p.host[v] = cpu::View{t->dtype, t->dims, const_cast<uint8_t*>(t->data())};
      if (host_value_[v]) p.known[v] = t;
    } else if (state_of_[v] >= 0) {
      const State& st = state_[state_of_[v]];
      p.host[v] = cpu::View{st.dtype, st.dims, nullptr};
      p.device[v] = st.buffer.data();
    } else if (val.initializer >= 0) {
      const Tensor& t = program_.initializers[val.initializer];
      p.host[v] = cpu::View{t.dtype, t.dims, const_cast<uint8_t*>(t.data())};
      p.known[v] = &t;
    }
  }

  // The steps the fetches and state updates need; a unit runs whole, so all of its steps are.
  std::vector<int> targets = fetches;
  for (const auto& [s, v] : updates_) targets.push_back(v);
  std::vector<int> steps;
  for (;;) {
    steps = steps_needed(program_, targets);
    const size_t before = targets.size();
    std::vector<bool> unit_seen(units_.size(), false);
    for (int s : steps)
      if (unit_of_step_[s] >= 0) unit_seen[unit_of_step_[s]] = true;
    for (size_t u = 0; u < units_.size(); ++u)
      if (unit_seen[u])
        for (int s : units_[u]->steps)
          if (!std::binary_search(steps.begin(), steps.end(), s))
            for (int out : program_.steps[s].out) targets.push_back(out);
    if (targets.size() == before) break;
  }
  for (int s : steps)
    for (int in : program_.steps[s].in)
      if (in >= 0 && program_.values[in].producer < 0 && p.host[in].dtype == DType::kUndefined)
        throw InputError(program_.path + ": input '" + program_.values[in].name + "' is needed but not fed");

  // Types and dims of everything, host steps computed.
  cpu::RunContext planning{1, seed_};
  for (int s : steps) {
    const Program::Step& step = program_.steps[s];
    if (!entries_[s]) {  // a FusedElementwise node: the broadcast of its inputs
      at_node(step.where, [&] {
        const ElementwiseProgram& prog = *node_programs_[s];
        std::vector<std::vector<int64_t>> dims;
        for (int in : step.in) dims.push_back(p.host[in].dims);
        const std::vector<int64_t> out = broadcast_shape(dims, prog.min_rank, "FusedElementwise");
        const std::vector<DType> types = prog.output_dtypes();
        for (size_t k = 0; k < step.out.size(); ++k)
          if (step.out[k] >= 0) p.host[step.out[k]] = cpu::View{types.at(k), out, nullptr};
      });
    } else {
      cpu::KernelIO io;
      for (int in : step.in) io.in.push_back(in >= 0 ? &p.host[in] : nullptr);
      for (int out : step.out) {
        io.out.push_back(out >= 0 ? &p.host[out] : nullptr);
        if (out >= 0) p.host[out].dtype = program_.values[out].dtype;
      }
      const size_t scratch = at_node(step.where, [&] { return shape_kernels_[s]->infer(io); });
      for (int out : step.out) {
        if (out < 0) continue;
        const DType declared = program_.values[out].dtype;
        if (declared != DType::kUndefined && declared != p.host[out].dtype)
          throw InputError(step.where + ": output '" + program_.values[out].name + "' is declared " +
                           std::string(dtype_name(declared)) + " but the op produces " +
                           std::string(dtype_name(p.host[out].dtype)));
      }
      if (host_step_[s]) {
        for (int out : step.out) {
          if (out < 0) continue;
          p.host_results.emplace_back(p.host[out].dtype, p.host[out].dims);
          p.host_results.back().name = program_.values[out].name;
          p.host[out].data = p.host_results.back().mutable_data();
          p.known[out] = &p.host_results.back();
        }
        std::vector<uint8_t> ws(scratch);
        io.workspace = ws.data();
        at_node(step.where, [&] { shape_kernels_[s]->run(io, planning); });
      }
    }
    for (int out : step.out)
      if (out >= 0) p.desc[out] = TensorDesc{p.host[out].dtype, p.host[out].dims};
  }
  for (size_t v = 0; v < num_values; ++v)
    if (p.host[v].dtype != DType::kUndefined && p.desc[v].dtype == DType::kUndefined)
      p.desc[v] = TensorDesc{p.host[v].dtype, p.host[v].dims};

  // Units of this plan, in run order; liveness over their positions.
  std::vector<size_t> run_units;
  {
    std::vector<bool> seen(units_.size(), false);
    for (int s : steps)
      if (unit_of_step_[s] >= 0) seen[unit_of_step_[s]] = true;
    for (size_t u = 0; u < units_.size(); ++u)
      if (seen[u]) run_units.push_back(u);
  }
  const int64_t end = static_cast<int64_t>(run_units.size());
  std::vector<int64_t> first_use(num_values, -1), last_use(num_values, -1);
  std::vector<bool> on_device(num_values, false);  // read by a device unit or by a state update
  for (int64_t pos = 0; pos < end; ++pos) {
    const Unit& u = *units_[run_units[pos]];
    for (size_t i = 0; i < u.in.size(); ++i) {
      const int v = u.in[i];
      if (v < 0 || u.host_only[i]) continue;
      on_device[v] = true;
      last_use[v] = pos;
    }
    for (int v : u.out)
      if (v >= 0 && first_use[v] < 0) first_use[v] = pos;
  }
  for (const auto& [s, v] : updates_) {
    on_device[v] = true;
    last_use[v] = end;
  }
  for (int v : fetches) last_use[v] = end;

  // Prepare every unit: algorithms, descriptors, compiled kernels.
  size_t workspace = 0;
  for (size_t u : run_units) {
    const Unit& unit = *units_[u];
    OpShapes shapes;
    for (int v : unit.in) {
      shapes.in.push_back(v >= 0 ? &p.desc[v] : nullptr);
      shapes.host.push_back(v >= 0 ? p.known[v] : nullptr);
    }
    for (int v : unit.out) shapes.out.push_back(v >= 0 ? &p.desc[v] : nullptr);
    Plan::Launch launch{&unit, at_node(unit.where, [&] { return unit.op->prepare(shapes, *ctx_); }), {}};
    workspace = std::max(workspace, launch.op->workspace_bytes());
    p.launches.push_back(std::move(launch));
  }

  // One arena: unit outputs from their first writer to their last reader, feeds the whole run,
  // staging copies of fetched state at the end.
  std::vector<BufferLife> lives;
  std::vector<int> owners;  // per life: the value, or -1 - value for a state fetch's staging copy
  for (size_t v = 0; v < num_values; ++v) {
    const size_t bytes = p.desc[v].nbytes();
    if (first_use[v] >= 0 && bytes > 0) {
      lives.push_back({bytes, first_use[v], std::max(first_use[v], last_use[v])});
      owners.push_back(static_cast<int>(v));
    } else if (fed[v] && on_device[v] && bytes > 0) {
      lives.push_back({bytes, 0, end});
      owners.push_back(static_cast<int>(v));
    }
  }
  for (int v : fetches)
    if (state_of_[v] >= 0 && !fed[v] && p.desc[v].nbytes() > 0) {
      lives.push_back({p.desc[v].nbytes(), end, end});
      owners.push_back(-1 - v);
    }
  p.layout = plan_arena(lives, kAlignment);
  p.arena = DeviceBuffer(p.layout.arena_bytes);
  auto* base = static_cast<uint8_t*>(p.arena.data());
  for (size_t i = 0; i < lives.size(); ++i) {
    void* at = base + p.layout.offsets[i];
    if (owners[i] >= 0) {
      p.device[owners[i]] = at;
      if (fed[owners[i]]) p.feed_copies.emplace_back(owners[i], at);
    } else {
      p.state_fetches.emplace_back(-1 - owners[i], at);
    }
  }

  // Host values a device unit reads: initializers once per executable, the rest once per plan.
  size_t upload_bytes = 0;
  std::vector<std::pair<int, size_t>> uploads;
  for (size_t v = 0; v < num_values; ++v) {
    if (!on_device[v] || p.device[v] || !p.known[v] || p.desc[v].nbytes() == 0) continue;
    if (program_.values[v].initializer >= 0 && !fed[v]) {
      p.device[v] = device_constant(static_cast<int>(v)).data();
      continue;
    }
    uploads.emplace_back(static_cast<int>(v), upload_bytes);
    upload_bytes += (p.desc[v].nbytes() + kAlignment - 1) / kAlignment * kAlignment;
  }
  p.uploads = DeviceBuffer(upload_bytes);
  for (const auto& [v, offset] : uploads) {
    p.device[v] = static_cast<uint8_t*>(p.uploads.data()) + offset;
    AMP_CUDA_CHECK(cudaMemcpy(p.device[v], p.known[v]->data(), p.desc[v].nbytes(), cudaMemcpyHostToDevice));
  }
  for (size_t v = 0; v < num_values; ++v)
    if (on_device[v] && !p.device[v] && p.desc[v].nbytes() > 0)
      throw Error(program_.path + ": internal: '" + program_.values[v].name + "' has no device buffer");

  p.workspace = DeviceBuffer(workspace);
  p.seed = DeviceBuffer(sizeof(unsigned long long));
  for (Plan::Launch& l : p.launches) {
    for (int v : l.unit->in) l.buffers.in.push_back(v >= 0 ? p.device[v] : nullptr);
    for (int v : l.unit->out) l.buffers.out.push_back(v >= 0 ? p.device[v] : nullptr);
    l.buffers.workspace = p.workspace.data();
    l.buffers.seed = static_cast<const unsigned long long*>(p.seed.data());
  }
  for (const auto& [s, v] : updates_) {
    const State& st = state_[s];
    if (p.desc[v].dtype != st.dtype || p.desc[v].dims != st.dims)
      throw InputError(program_.path + ": state '" + st.name + "' is " + type_str(st.dtype, st.dims) + " but its update '" +
                       program_.values[v].name + "' is " + type_str(p.desc[v].dtype, p.desc[v].dims));
  }
  return plan;
}

void CudaExecutable::enqueue_step(Plan& p) {
  const cudaStream_t stream = ctx_->stream();
  for (const Plan::Launch& l : p.launches) at_node(l.unit->where, [&] { l.op->enqueue(l.buffers, *ctx_); });
  // Fetched state as it was during the step, before the updates overwrite it.
  for (const auto& [v, staging] : p.state_fetches)
    AMP_CUDA_CHECK(cudaMemcpyAsync(staging, p.device[v], p.desc[v].nbytes(), cudaMemcpyDeviceToDevice, stream));
  for (const auto& [s, v] : updates_) {
    State& st = state_[s];
    if (p.device[v] != st.buffer.data() && st.buffer.size() > 0)
      AMP_CUDA_CHECK(cudaMemcpyAsync(st.buffer.data(), p.device[v], st.buffer.size(), cudaMemcpyDeviceToDevice, stream));
  }
}

std::vector<Tensor> CudaExecutable::run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                        const std::vector<std::string>& fetches) {
  const std::vector<const Tensor*> fed = bind_feeds(feeds);
  std::vector<int> fetch_ids;
  for (const std::string& name : fetches) {
    const int v = program_.find(name);
    if (v < 0) throw InputError(program_.path + ": no value named '" + name + "' to fetch");
    fetch_ids.push_back(v);
  }
  const std::string key = signature(fed, fetch_ids);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= 16) plans_.clear();  // many distinct shapes: keep device memory bounded
    it = plans_.emplace(key, build_plan(fed, fetch_ids)).first;
  }
  Plan& p = *it->second;
  last_plan_ = &p;
  const cudaStream_t stream = ctx_->stream();

  for (const auto& [v, dst] : p.feed_copies)
    AMP_CUDA_CHECK(cudaMemcpyAsync(dst, fed[v]->data(), p.desc[v].nbytes(), cudaMemcpyHostToDevice, stream));
  const unsigned long long run_seed = splitmix64(seed_ ^ splitmix64(runs_));
  AMP_CUDA_CHECK(cudaMemcpyAsync(p.seed.data(), &run_seed, sizeof run_seed, cudaMemcpyHostToDevice, stream));

  if (p.graph) {
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
  ++p.runs;
  ++runs_;

  std::vector<Tensor> results;
  for (int v : fetch_ids) {
    Tensor t(p.desc[v].dtype, p.desc[v].dims);
    t.name = program_.values[v].name;
    const size_t bytes = t.nbytes();
    const void* staged = nullptr;
    for (const auto& [sv, at] : p.state_fetches)
      if (sv == v) staged = at;
    if (bytes == 0) {
    } else if (fed[v]) {
      std::memcpy(t.mutable_data(), fed[v]->data(), bytes);
    } else if (staged || p.device[v]) {
      AMP_CUDA_CHECK(cudaMemcpyAsync(t.mutable_data(), staged ? staged : p.device[v], bytes, cudaMemcpyDeviceToHost, stream));
    } else if (p.known[v]) {
      std::memcpy(t.mutable_data(), p.known[v]->data(), bytes);
    } else {
      throw InputError(program_.path + ": '" + t.name +
                       "' lives only inside a fused kernel on the cuda backend; fetch a graph output instead");
    }
    results.push_back(std::move(t));
  }
  AMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return results;
}

std::vector<std::string> CudaExecutable::state_names() const {
  std::vector<std::string> names;
  for (const State& s : state_) names.push_back(s.name);
  return names;
}

Tensor CudaExecutable::read_state(const std::string& name) const {
  const int s = state_index(name);
  if (s < 0) throw InputError(program_.path + ": no state named '" + name + "'");
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
  const int s = state_index(name);
  if (s < 0) throw InputError(program_.path + ": no state named '" + name + "'");
  State& st = state_[s];
  if (value.dtype != st.dtype)
    throw InputError(program_.path + ": state '" + name + "' is " + std::string(dtype_name(st.dtype)) + ", got " +
                     std::string(dtype_name(value.dtype)));
  AMP_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()));
  if (value.dims != st.dims) {
    // Captured graphs and plans hold the old address and shapes.
    plans_.clear();
    last_plan_ = nullptr;
    st.buffer = DeviceBuffer(value.nbytes());
    st.dims = value.dims;
  }
  if (value.nbytes() > 0) AMP_CUDA_CHECK(cudaMemcpy(st.buffer.data(), value.data(), value.nbytes(), cudaMemcpyHostToDevice));
}

MemoryStats CudaExecutable::memory() const {
  MemoryStats m;
  for (const State& s : state_) m.state_bytes += s.buffer.size();
  if (last_plan_) {
    m.arena_bytes = last_plan_->layout.arena_bytes + last_plan_->workspace.size();
    m.peak_bytes = last_plan_->layout.peak_bytes;
    m.intermediate_bytes = last_plan_->layout.total_bytes + last_plan_->workspace.size();
  }
  return m;
}

size_t CudaExecutable::graph_replays() const { return last_plan_ ? last_plan_->replays : 0; }

}  // namespace amp::cuda
