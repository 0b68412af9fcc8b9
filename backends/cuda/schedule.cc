#include "backends/cuda/schedule.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/grad_kernels.h"
#include "backends/cuda/channels_last.h"
#include "backends/cuda/loss_argmax_fusion.h"
#include "backends/cuda/row_pitch.h"
#include "backends/cuda/copy_fusion.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/node_patterns.h"
#include "backends/cuda/unit_patterns.h"
#include "graph/error.h"
#include "graph/ops/elementwise_grouping.h"
#include "graph/ops/elementwise_program_eval.h"

namespace amp::cuda {

namespace {

bool is_fused_node(const Node& n) { return n.domain() == kAmpDomain && n.op_type() == kFusedElementwiseOp; }

// An environment variable set to "0": the benchmarks' switch for a default-on choice.
bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "0";
}

std::string summary(const std::vector<const Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : "+") + n->op_type();
  return s;
}

}  // namespace

bool is_random_op(std::string_view op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "Bernoulli" || op == "Multinomial" || op == "Dropout";
}

Schedule::Schedule(const Model& m, const CompileOptions& options) {
  std::vector<const Node*> nodes;
  program = make_program(m, &nodes);
  const size_t num_steps = program.steps.size();
  readers.resize(program.values.size());
  for (size_t s = 0; s < num_steps; ++s)
    for (int in : program.steps[s].in)
      if (in >= 0) readers[in].push_back(static_cast<int>(s));

  std::vector<std::vector<int>> shape_inputs(num_steps);
  std::vector<bool> reads_data(num_steps, true);
  for (size_t s = 0; s < num_steps; ++s) {
    const Node& n = *nodes[s];
    const Program::Step& step = program.steps[s];
    if (is_fused_node(n)) {
      entries.push_back(nullptr);
      shape_kernels.push_back(nullptr);
      node_programs.push_back(at_node(step.where, [&] {
        return std::make_unique<ElementwiseProgram>(ElementwiseProgram::parse(n.attr_string("program", "")));
      }));
      continue;
    }
    node_programs.push_back(nullptr);
    // The CPU backend's kernels are the shape rules of every op, and compute host steps.
    const cpu::OpEntry* e = cpu::find_op(n.domain(), n.op_type());
    if (!e)
      throw InputError(step.where + ": op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
                       " is not supported by the cuda backend");
    entries.push_back(e);
    shape_kernels.push_back(at_node(step.where, [&] { return e->make(n, step.opset); }));
    shape_inputs[s] = e->shape_inputs;
    if (const CudaOpEntry* c = find_cuda_op(n.domain(), n.op_type()))
      shape_inputs[s].insert(shape_inputs[s].end(), c->host_inputs.begin(), c->host_inputs.end());
    reads_data[s] = e->reads_data;
  }
  shape_value = shape_values(program, shape_inputs, reads_data);
  read_on_host = shape_inputs;

  state_of.assign(program.values.size(), -1);
  // Every initializer is state by default, but those a step reads as a shape input (Reshape's
  // shape, Pad's and PadGrad's amounts, Resize's scales): state lives on the device, and planning
  // must read them on the host. Named state that is read so is refused.
  std::vector<bool> read_as_shape(program.values.size(), false);
  for (size_t s = 0; s < num_steps; ++s)
    for (int i : shape_inputs[s])
      if (i < static_cast<int>(program.steps[s].in.size()) && program.steps[s].in[i] >= 0)
        read_as_shape[program.steps[s].in[i]] = true;
  channels_last = options.channels_last && !env_is_zero("AMP_CUDA_CHANNELS_LAST");
  std::vector<std::string> names = options.state;
  if (names.empty())
    for (const Tensor& t : program.initializers) {
      const int v = program.find(t.name);
      if (v < 0 || !read_as_shape[v]) names.push_back(t.name);
    }
  for (const std::string& name : names) {
    const int v = program.find(name);
    if (v < 0 || program.values[v].initializer < 0)
      throw InputError(program.path + ": state '" + name + "' is not an initializer of the main graph");
    if (read_as_shape[v])
      throw InputError(program.path + ": state '" + name +
                       "' is read as a shape; the cuda backend needs shapes known before a run, so it cannot be device state");
    state_of[v] = static_cast<int>(state_values.size());
    state_values.push_back(v);
  }
  for (const auto& [state, source] : options.state_updates) {
    const int s = state_index(state);
    const int v = program.find(source);
    if (s < 0) throw InputError(program.path + ": state update target '" + state + "' is not state");
    if (v < 0) throw InputError(program.path + ": state update source '" + source + "' is not a value of the graph");
    updates.emplace_back(s, v);
  }

  // Host steps: what planning can compute from constants, shape-deciding feeds and dims alone.
  host_value.assign(program.values.size(), false);
  for (size_t v = 0; v < program.values.size(); ++v) {
    const Program::Val& val = program.values[v];
    host_value[v] = (val.initializer >= 0 && state_of[v] < 0 && !val.graph_input) ||
                     (val.graph_input && shape_value[v]);
  }
  host_step.assign(num_steps, false);
  for (size_t s = 0; s < num_steps; ++s) {
    const Program::Step& step = program.steps[s];
    if (!entries[s] || is_random_op(step.op)) continue;
    bool host = !reads_data[s];
    if (!host) {
      host = true;
      for (int in : step.in) host = host && (in < 0 || host_value[in]);
    }
    host_step[s] = host;
    for (int out : step.out)
      if (out >= 0) host_value[out] = host;
    for (int out : step.out)
      if (out >= 0 && shape_value[out] && !host)
        throw InputError(step.where + ": a shape, or an input an op reads while planning, depends on '" +
                         program.values[out].name +
                         "', which is computed on the device; the cuda backend needs them known before a run");
  }
  build_units(m, nodes);
  merged = loss_argmax_candidates(program, units, nodes);
}

void Schedule::build_units(const Model& m, const std::vector<const Node*>& nodes) {
  const size_t num_steps = program.steps.size();
  std::unordered_map<const Node*, int> step_of;
  for (size_t s = 0; s < num_steps; ++s) step_of[nodes[s]] = static_cast<int>(s);
  unit_of_step.assign(num_steps, -1);
  elementwise.resize(num_steps);
  auto value_id = [&](const Value* v) { return v ? program.find(v->name()) : -1; };
  auto add = [&](std::vector<const Node*> unit_nodes, std::vector<int> in, std::vector<int> out, std::unique_ptr<CudaOp> op) {
    auto u = std::make_unique<Unit>();
    for (const Node* n : unit_nodes) {
      u->steps.push_back(step_of.at(n));
      unit_of_step[step_of.at(n)] = static_cast<int>(units.size());
    }
    u->where = program.steps[u->steps.front()].where;
    u->kind = summary(unit_nodes);
    u->in = std::move(in);
    u->out = std::move(out);
    u->host_only.assign(u->in.size(), false);
    u->op = std::move(op);
    units.push_back(std::move(u));
  };
  auto taken = [&](const Node* n) {
    auto it = step_of.find(n);
    return it == step_of.end() || host_step[it->second] || unit_of_step[it->second] >= 0;
  };

  // A fused unit with the nodes it absorbs (unit_patterns.h): one unit each.
  for (const UnitPattern& pattern : unit_patterns())
    for (UnitMatch& f : pattern.match(*m.graph, taken)) {
      std::vector<int> in, out;
      for (const Value* v : f.inputs) in.push_back(value_id(v));
      for (const Value* v : f.outputs) out.push_back(value_id(v));
      add(f.nodes, in, out, std::move(f.op));
    }
  auto mark_shape_inputs = [&](size_t s) {
    for (int i : read_on_host[s])
      if (i < static_cast<int>(units.back()->host_only.size())) units.back()->host_only[i] = true;
  };
  // Ops whose kernels convert on the way in and out (CudaOp::reads_any_float) take the Casts
  // around them: an fp16/bf16 -> fp32 Cast whose only reader the op is, and an fp32 -> fp16/bf16
  // Cast that is the only reader of the op's fp32 output (mixed precision puts them around every
  // fp32 op: LayerNormalization's output, its gradient's input, Softmax's input).
  auto low = [](DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; };
  // A widening Cast read by several such ops (the loss and its gradient both read a step's widened
  // scores) is absorbed by all of them when every reader converts on the way in: each reads the
  // 16-bit source, the first unit holds the Cast, and the fp32 copy is never stored (GPT-2's
  // [tokens, 50257] scores: 1.6 GB at batch 8). Not when the fp32 value is a graph output.
  std::unordered_set<const Node*> shared_widenings;
  {
    std::unordered_set<const Value*> outputs(m.graph->outputs().begin(), m.graph->outputs().end());
    for (size_t s = 0; s < num_steps; ++s) {
      const Node* cast = nodes[s];
      if (!is_op(cast, "Cast") || taken(cast) || !cast->input(0) || !low(cast->input(0)->dtype())) continue;
      const Value* v = cast->output(0);
      if (!v || v->dtype() != DType::kFloat || v->uses().size() < 2 || outputs.count(v)) continue;
      bool all = true;
      for (const Use& u : v->uses()) {
        auto it = step_of.find(u.node);
        const CudaOpEntry* e = find_cuda_op(u.node->domain(), u.node->op_type());
        if (it == step_of.end() || taken(u.node) || !e || (elem_op_of(*u.node) && is_fusable_node(*u.node))) {
          all = false;
          break;
        }
        try {
          all = e->make(*u.node, program.steps[it->second].opset)->reads_any_float(static_cast<size_t>(u.index));
        } catch (const std::exception&) {
          all = false;  // its own error comes when its unit is made below
        }
        if (!all) break;
      }
      if (all) shared_widenings.insert(cast);
    }
  }
  std::vector<std::unique_ptr<CudaOp>> made(num_steps);  // ops that absorbed nothing, for the loop below
  for (size_t s = 0; s < num_steps; ++s) {
    if (host_step[s] || unit_of_step[s] >= 0 || node_programs[s]) continue;
    const Node& n = *nodes[s];
    const CudaOpEntry* e = find_cuda_op(n.domain(), n.op_type());
    if (!e || (elem_op_of(n) && is_fusable_node(n))) continue;  // a comparison of floats: a generated kernel
    const Program::Step& step = program.steps[s];
    std::unique_ptr<CudaOp> op = at_node(step.where, [&] { return e->make(n, step.opset); });
    std::vector<const Node*> unit_nodes = {&n};
    std::vector<int> in = step.in, out = step.out;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      const Value* v = n.input(i);
      const Node* cast = v ? v->producer() : nullptr;
      if (cast && shared_widenings.count(cast)) {  // read as its source; the first reader holds the Cast
        if (!taken(cast)) unit_nodes.push_back(cast);
        in[i] = value_id(cast->input(0));
        continue;
      }
      if (!is_op(cast, "Cast") || taken(cast) || !op->reads_any_float(i) || only_reader(v) != &n ||
          v->dtype() != DType::kFloat || !low(cast->input(0)->dtype()))
        continue;
      unit_nodes.push_back(cast);
      in[i] = value_id(cast->input(0));
    }
    auto narrowing = [&](const Node* c) { return is_op(c, "Cast") && !taken(c) && low(c->output(0)->dtype()); };
    for (size_t k = 0; k < n.outputs().size(); ++k) {
      const Value* v = n.output(k);
      if (!v || v->dtype() != DType::kFloat) continue;
      const Node* cast = only_reader(v);
      if (narrowing(cast) && op->writes_any_float(k)) {
        unit_nodes.push_back(cast);
        out[k] = value_id(cast->output(0));
        continue;
      }
      // Read as it is and narrowed (Softmax's probabilities: by the backward pass and, in fp16, by
      // the product with V): the narrowed copy is one more result of the kernel.
      if (!op->writes_narrowed_copy(k) || out.size() > n.outputs().size()) continue;
      for (const Use& u : v->uses()) {
        if (!narrowing(u.node)) continue;
        unit_nodes.push_back(u.node);
        out.push_back(value_id(u.node->output(0)));
        break;
      }
    }
    if (unit_nodes.size() == 1 && in == step.in) {  // nothing absorbed: a unit of its own, with the others below
      made[s] = std::move(op);
      continue;
    }
    add(unit_nodes, in, out, std::move(op));
    mark_shape_inputs(s);
  }
  for (size_t s = 0; s < num_steps; ++s) {
    if (host_step[s] || unit_of_step[s] >= 0) continue;
    const Node& n = *nodes[s];
    const Program::Step& step = program.steps[s];
    if (is_fusable_node(n)) {  // grouped with its neighbours once shapes are known (plan())
      std::vector<const Value*> inputs;
      auto part = std::make_unique<ProgramPart>();
      part->program = node_program(n, &inputs);
      for (const Value* v : inputs) part->inputs.push_back(value_id(v));
      part->outputs = {step.out[0]};
      elementwise[s] = std::move(part);
      continue;
    }
    std::unique_ptr<CudaOp> op;
    if (node_programs[s]) {
      op = std::make_unique<FusedElementwiseOp>(*node_programs[s]);
    } else if (made[s]) {
      op = std::move(made[s]);
    } else if (elem_op_of(n)) {
      std::vector<const Value*> inputs;
      at_node(step.where, [&] { return node_program(n, &inputs); });  // throws, saying why it is not fusable
    } else {
      throw InputError(step.where + ": op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
                       " is not supported by the cuda backend");
    }
    add({&n}, step.in, step.out, std::move(op));
    mark_shape_inputs(s);
  }
}

ShapePlan Schedule::plan(const std::vector<const Tensor*>& fed, const std::vector<TensorDesc>& state_desc,
                         const std::vector<int>& targets) const {
  ShapePlan p;
  const size_t num_values = program.values.size();
  p.desc.resize(num_values);
  p.known.assign(num_values, nullptr);
  std::vector<cpu::View> host(num_values);
  for (size_t v = 0; v < num_values; ++v) {
    const Program::Val& val = program.values[v];
    if (const Tensor* t = fed[v]) {
      host[v] = cpu::View{t->dtype, t->dims, const_cast<uint8_t*>(t->data())};
      if (host_value[v]) p.known[v] = t;
    } else if (state_of[v] >= 0) {
      const TensorDesc& st = state_desc[static_cast<size_t>(state_of[v])];
      host[v] = cpu::View{st.dtype, st.dims, nullptr};
    } else if (val.initializer >= 0) {
      const Tensor& t = program.initializers[val.initializer];
      host[v] = cpu::View{t.dtype, t.dims, const_cast<uint8_t*>(t.data())};
      p.known[v] = &t;
    }
  }

  // The steps the targets need; a fixed unit runs whole, so all of its steps are needed.
  std::vector<int> wanted = targets;
  for (;;) {
    p.steps = steps_needed(program, wanted);
    const size_t before = wanted.size();
    for (int s : p.steps)
      if (unit_of_step[s] >= 0)
        for (int t : units[unit_of_step[s]]->steps)
          if (!std::binary_search(p.steps.begin(), p.steps.end(), t))
            for (int out : program.steps[t].out) wanted.push_back(out);
    if (wanted.size() == before) break;
  }
  std::vector<bool> needed(program.steps.size(), false);
  for (int s : p.steps) needed[s] = true;
  for (int s : p.steps)
    for (int in : program.steps[s].in)
      if (in >= 0 && program.values[in].producer < 0 && host[in].dtype == DType::kUndefined)
        throw InputError(program.path + ": input '" + program.values[in].name + "' is needed but not fed");

  // Types and dims of everything; host steps computed.
  cpu::RunContext planning{1, 0};
  for (int s : p.steps) {
    const Program::Step& step = program.steps[s];
    if (!entries[s]) {  // a FusedElementwise node: the broadcast of its inputs
      at_node(step.where, [&] {
        const ElementwiseProgram& prog = *node_programs[s];
        std::vector<std::vector<int64_t>> dims;
        for (int in : step.in) dims.push_back(host[in].dims);
        const std::vector<int64_t> out = broadcast_shape(dims, prog.min_rank, "FusedElementwise");
        const std::vector<DType> types = prog.output_dtypes();
        for (size_t k = 0; k < step.out.size(); ++k)
          if (step.out[k] >= 0) host[step.out[k]] = cpu::View{types.at(k), out, nullptr};
      });
    } else {
      cpu::KernelIO io;
      for (int in : step.in) io.in.push_back(in >= 0 ? &host[in] : nullptr);
      for (int out : step.out) {
        io.out.push_back(out >= 0 ? &host[out] : nullptr);
        if (out >= 0) host[out].dtype = program.values[out].dtype;
      }
      const size_t scratch = at_node(step.where, [&] { return shape_kernels[s]->infer(io); });
      for (int out : step.out) {
        if (out < 0) continue;
        const DType declared = program.values[out].dtype;
        if (declared != DType::kUndefined && declared != host[out].dtype)
          throw InputError(step.where + ": output '" + program.values[out].name + "' is declared " +
                           std::string(dtype_name(declared)) + " but the op produces " +
                           std::string(dtype_name(host[out].dtype)));
      }
      if (host_step[s]) {
        for (int out : step.out) {
          if (out < 0) continue;
          p.host_results.emplace_back(host[out].dtype, host[out].dims);
          p.host_results.back().name = program.values[out].name;
          host[out].data = p.host_results.back().mutable_data();
          p.known[out] = &p.host_results.back();
        }
        std::vector<uint8_t> ws(scratch);
        io.workspace = ws.data();
        at_node(step.where, [&] { shape_kernels[s]->run(io, planning); });
      }
    }
  }
  for (size_t v = 0; v < num_values; ++v) p.desc[v] = TensorDesc{host[v].dtype, host[v].dims};

  const std::vector<int> through = bypass_pass_throughs(p, needed, targets, fed);
  group_elementwise(p, needed, targets, through);
  batch_fused_groups(p);
  merge_scalar_groups(p);
  pack_values(p);
  order_units(p);
  choose_views(p, fed);
  merge_loss_argmax(merged, p);
  fuse_copies(*this, p, targets);
  decide_channels_last(*this, p, targets, fed);
  decide_row_pitch(*this, p, targets, fed);
  return p;
}

void Schedule::pack_values(ShapePlan& p) const {
  const std::vector<const Unit*> all = plan_units(p);
  for (const Unit* u : all) {
    const OpShapes shapes = unit_shapes(p, *u);
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0) p.desc[u->out[k]].packed_bytes = u->op->packed_output_bytes(shapes, k);
  }
  for (const Unit* u : all) {
    const OpShapes shapes = unit_shapes(p, *u);
    for (size_t i = 0; i < u->in.size(); ++i) {
      const int v = u->in[i];
      const size_t expected = v >= 0 ? u->op->packed_input_bytes(shapes, i) : 0;
      auto layout = [](size_t bytes) { return bytes ? "packed in " + std::to_string(bytes) + " bytes" : std::string("as its type"); };
      if (v >= 0 && expected != p.desc[v].packed_bytes)
        throw Error(u->where + ": internal: " + u->kind + " reads '" + program.values[v].name + "' " + layout(expected) +
                    ", but it is stored " + layout(p.desc[v].packed_bytes));
    }
  }
}

std::vector<int> Schedule::bypass_pass_throughs(ShapePlan& p, std::vector<bool>& needed, const std::vector<int>& targets,
                                                const std::vector<const Tensor*>& fed) const {
  std::vector<int> through(program.values.size(), -1);
  std::vector<int> pass_steps;
  for (int s : p.steps) {
    const int u = unit_of_step[s];
    if (u < 0 || units[u]->steps.size() != 1) continue;
    const Unit& unit = *units[u];
    if (unit.in.empty() || unit.out.size() != 1 || unit.in[0] < 0 || unit.out[0] < 0) continue;
    const int x = unit.in[0], y = unit.out[0];
    // As choose_views' conditions, and the same dims: a reader may take x for y unchanged.
    if (p.desc[x].dtype != p.desc[y].dtype || p.desc[x].dims != p.desc[y].dims || state_of[x] >= 0 || fed[x] ||
        state_of[y] >= 0 || fed[y] || !unit.op->aliases_input(unit_shapes(p, unit)))
      continue;
    through[y] = through[x] >= 0 ? through[x] : x;  // a chain of them passes on its first input
    pass_steps.push_back(s);
  }
  std::vector<bool> is_target(program.values.size(), false);
  for (int t : targets) is_target[t] = true;
  // Elementwise steps read through; a pass-through that then has no reader left is not needed.
  // Latest first, so a chain of them unwinds from its end.
  for (auto it = pass_steps.rbegin(); it != pass_steps.rend(); ++it) {
    const int y = units[unit_of_step[*it]]->out[0];
    if (is_target[y]) continue;
    bool read = false;
    for (int r : readers[y]) read = read || (needed[r] && !(elementwise[r] && unit_of_step[r] < 0));
    if (!read) {
      needed[*it] = false;
      p.read_through.push_back(*it);
    }
  }
  p.steps.erase(std::remove_if(p.steps.begin(), p.steps.end(), [&](int s) { return !needed[s]; }), p.steps.end());
  return through;
}

void Schedule::group_elementwise(ShapePlan& p, const std::vector<bool>& needed, const std::vector<int>& targets,
                                 const std::vector<int>& through) const {
  // What an elementwise step reads: past pass-throughs, to the value they pass on.
  auto source = [&](int v) { return v >= 0 && through[v] >= 0 ? through[v] : v; };
  auto reads = [&](int s) {
    std::vector<int> in = program.steps[s].in;
    if (elementwise[s] && unit_of_step[s] < 0)
      for (int& v : in) v = source(v);
    return in;
  };
  std::vector<std::vector<int>> extra_readers(program.values.size());  // readers through a pass-through
  for (int s : p.steps)
    if (elementwise[s] && unit_of_step[s] < 0)
      for (int v : program.steps[s].in)
        if (source(v) != v) extra_readers[source(v)].push_back(s);
  // Grouping sees a fixed unit as one op: the steps of a product and what it absorbed run as one
  // launch, so a path into any of them and out of any other counts for cycles. Nodes: needed
  // steps outside fixed units, and fixed units, in a topological order close to the program's.
  const size_t num_steps = program.steps.size();
  std::vector<int> node_of_step(num_steps, -1), node_unit;
  std::vector<std::vector<int>> node_steps;
  for (int s : p.steps) {
    const int u = unit_of_step[s];
    if (u >= 0) {
      const int first = units[u]->steps.front();
      if (node_of_step[first] < 0) {
        node_steps.push_back(units[u]->steps);
        node_unit.push_back(u);
        for (int t : units[u]->steps) node_of_step[t] = static_cast<int>(node_steps.size()) - 1;
      }
    } else {
      node_of_step[s] = static_cast<int>(node_steps.size());
      node_steps.push_back({s});
      node_unit.push_back(-1);
    }
  }
  const size_t count = node_steps.size();
  std::vector<std::vector<size_t>> deps(count);
  std::vector<size_t> first_step(count);
  for (size_t n = 0; n < count; ++n) {
    auto depend_on = [&](int in) {
      const int producer = in >= 0 ? program.values[in].producer : -1;
      const int d = producer >= 0 ? node_of_step[producer] : -1;
      if (d >= 0 && d != static_cast<int>(n)) deps[n].push_back(static_cast<size_t>(d));
    };
    // A fixed unit reads its operands, not every input of its steps: a unit that recomputes a
    // value from others (a ReLU's mask from the statistics, conv_batch_norm_fusion.h) never
    // waits for the step that made it.
    if (node_unit[n] >= 0) {
      for (int in : units[node_unit[n]]->in) depend_on(in);
    } else {
      for (int in : reads(node_steps[n].front())) depend_on(in);
    }
    std::sort(deps[n].begin(), deps[n].end());
    deps[n].erase(std::unique(deps[n].begin(), deps[n].end()), deps[n].end());
    first_step[n] = static_cast<size_t>(*std::min_element(node_steps[n].begin(), node_steps[n].end()));
  }
  const std::vector<size_t> order = ordered_topological_sort(deps, first_step);
  std::vector<int> rank(count, -1);
  for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<int>(i);
  if (order.size() != count) throw Error(program.path + ": internal: products and what they absorbed form a cycle");

  std::vector<FusionCandidate> ops(count);
  for (size_t i = 0; i < count; ++i) {
    const std::vector<int>& steps = node_steps[order[i]];
    const int s = steps.front();
    ops[i].fusable = steps.size() == 1 && unit_of_step[s] < 0 && elementwise[s] != nullptr;
    if (ops[i].fusable) {
      std::string key;
      for (int64_t d : p.desc[program.steps[s].out[0]].dims) key += std::to_string(d) + ",";
      ops[i].shape = key;
    }
    for (size_t d : deps[order[i]]) ops[i].producers.push_back(rank[d]);
  }

  std::vector<bool> is_target(program.values.size(), false);
  for (int t : targets) is_target[t] = true;
  for (const std::vector<int>& group_nodes : group_fusion_candidates(ops, 1)) {
    std::vector<int> group;
    for (int i : group_nodes) group.push_back(node_steps[order[i]].front());
    std::deque<ProgramPart> read_through;  // parts whose inputs were passed through
    std::vector<const ProgramPart*> parts;
    for (int s : group) {
      const ProgramPart* part = elementwise[s].get();
      if (std::any_of(part->inputs.begin(), part->inputs.end(), [&](int v) { return source(v) != v; })) {
        read_through.push_back(*part);
        for (int& v : read_through.back().inputs) v = source(v);
        part = &read_through.back();
      }
      parts.push_back(part);
    }
    // A value leaves the kernel when a needed step outside the group reads it, or it is a target.
    // A host step reads no device value's contents, only its dims (a Shape: planning refuses
    // shapes that depend on device data), which the plan knows without it: a GPT-2 step's
    // residual Adds read each projection's fp32 Cast, which a Shape for the Add's gradient also
    // reads, and the kernel wrote that Cast out for it (24 tensors of [tokens, 768] fp32 a step).
    auto outside = [&](int r) {
      return needed[r] && !host_step[r] && std::find(group.begin(), group.end(), r) == group.end();
    };
    const ProgramPart merged = merge_programs(parts, [&](int v) {
      return is_target[v] || std::any_of(readers[v].begin(), readers[v].end(), outside) ||
             std::any_of(extra_readers[v].begin(), extra_readers[v].end(), outside);
    });
    auto u = std::make_unique<Unit>();
    u->steps = group;
    u->in = merged.inputs;
    u->out = merged.outputs;
    u->host_only.assign(u->in.size(), false);
    u->where = program.steps[group.front()].where;
    u->kind = "fused";
    for (size_t i = 0; i < group.size(); ++i) u->kind += (i ? "+" : " ") + program.steps[group[i]].op;
    u->op = std::make_unique<FusedElementwiseOp>(merged.program);
    p.fused.push_back(std::move(u));
  }
}

std::vector<const Unit*> Schedule::plan_units(const ShapePlan& p) const {
  std::vector<const Unit*> all;
  std::vector<bool> seen(units.size(), false);
  for (int s : p.steps)
    if (unit_of_step[s] >= 0 && !seen[unit_of_step[s]]) {
      seen[unit_of_step[s]] = true;
      all.push_back(units[unit_of_step[s]].get());
    }
  for (const auto& u : p.fused) all.push_back(u.get());
  return all;
}

std::vector<std::vector<size_t>> Schedule::unit_dependencies(const std::vector<const Unit*>& all) const {
  std::vector<int> unit_of_value(program.values.size(), -1);
  for (size_t u = 0; u < all.size(); ++u)
    for (int s : all[u]->steps)
      for (int v : program.steps[s].out)
        if (v >= 0) unit_of_value[v] = static_cast<int>(u);
  std::vector<std::vector<size_t>> deps(all.size());
  for (size_t u = 0; u < all.size(); ++u) {
    // What the unit reads (a fused unit may read past a pass-through its steps name).
    for (int v : all[u]->in)
      if (v >= 0 && unit_of_value[v] >= 0 && static_cast<size_t>(unit_of_value[v]) != u)
        deps[u].push_back(static_cast<size_t>(unit_of_value[v]));
    std::sort(deps[u].begin(), deps[u].end());
    deps[u].erase(std::unique(deps[u].begin(), deps[u].end()), deps[u].end());
  }
  return deps;
}

std::vector<size_t> Schedule::topological(const std::vector<const Unit*>& all,
                                          const std::vector<std::vector<size_t>>& deps) const {
  // Ties broken by first step, so the order stays close to the graph's (what the memory plan's
  // liveness was tuned on).
  const size_t count = all.size();
  std::vector<size_t> first_step(count);
  for (size_t u = 0; u < count; ++u) first_step[u] = static_cast<size_t>(*std::min_element(all[u]->steps.begin(), all[u]->steps.end()));
  const std::vector<size_t> order = ordered_topological_sort(deps, first_step);
  if (order.size() != count) throw Error(program.path + ": internal: device units form a cycle");
  return order;
}

namespace {

// units without those in `gone`, then `made`.
void replace_units(std::vector<std::unique_ptr<Unit>>& units, const std::vector<const Unit*>& gone,
                   std::vector<std::unique_ptr<Unit>>& made) {
  std::vector<std::unique_ptr<Unit>> kept;
  for (auto& u : units)
    if (std::find(gone.begin(), gone.end(), u.get()) == gone.end()) kept.push_back(std::move(u));
  for (auto& u : made) kept.push_back(std::move(u));
  units = std::move(kept);
}

// Which units (transitively) wait for which; two units can share a launch when neither waits for
// the other.
class Reachability {
 public:
  Reachability(const std::vector<std::vector<size_t>>& deps, const std::vector<size_t>& order)
      : words_((deps.size() + 63) / 64), reach_(deps.size(), std::vector<uint64_t>(words_, 0)) {
    std::vector<std::vector<size_t>> readers_of(deps.size());
    for (size_t u = 0; u < deps.size(); ++u)
      for (size_t d : deps[u]) readers_of[d].push_back(u);
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      for (size_t r : readers_of[*it]) {
        reach_[*it][r / 64] |= uint64_t{1} << (r % 64);
        for (size_t w = 0; w < words_; ++w) reach_[*it][w] |= reach_[r][w];
      }
  }
  // True when b waits, directly or not, for a.
  bool operator()(size_t a, size_t b) const { return (reach_[a][b / 64] >> (b % 64)) & 1; }

 private:
  size_t words_;
  std::vector<std::vector<uint64_t>> reach_;
};

}  // namespace

void Schedule::batch_fused_groups(ShapePlan& p) const {
  const std::vector<const Unit*> all = plan_units(p);
  const std::vector<std::vector<size_t>> deps = unit_dependencies(all);
  const std::vector<size_t> order = topological(all, deps);
  const Reachability reaches(deps, order);

  // Fused groups alike in program and in how each input is read, without broadcasts, and none
  // reading or writing what a unit takes channels-last (channels_last.h: such a group, alone,
  // reads and writes each operand in the layout it is stored in).
  const std::vector<bool> touched_cl = touched_channels_last(*this, p, all);
  std::map<std::string, std::vector<std::vector<size_t>>> batches;
  for (size_t u : order) {
    const auto* op = dynamic_cast<const FusedElementwiseOp*>(all[u]->op.get());
    if (!op) continue;
    bool cl = false;
    for (int v : all[u]->in) cl |= v >= 0 && touched_cl[v];
    for (int v : all[u]->out) cl |= v >= 0 && touched_cl[v];
    if (cl) continue;
    const std::vector<int64_t>& space = p.desc[all[u]->out[0]].dims;
    std::string key = op->program().to_text();
    bool broadcast = false;
    for (int v : all[u]->in) {
      const bool same = p.desc[v].dims == space, scalar = p.desc[v].numel() == 1;
      broadcast |= !same && !scalar;
      key += same ? 'S' : 'C';
    }
    if (broadcast) continue;
    auto& list = batches[key];
    auto fits = [&](const std::vector<size_t>& batch) {
      return std::all_of(batch.begin(), batch.end(), [&](size_t m) { return !reaches(m, u) && !reaches(u, m); });
    };
    auto batch = std::find_if(list.begin(), list.end(), fits);
    if (batch == list.end()) list.push_back({u});
    else batch->push_back(u);
  }

  // Batches of different programs that do not wait for each other share one launch too, each
  // group running its own program (the update of parameters with fp16 gradients and of those with
  // fp32 ones: one optimizer launch).
  struct Batch {
    const std::vector<size_t>* units;
    size_t first;  // its earliest unit, for a stable order
  };
  std::vector<Batch> all_batches;
  for (const auto& [key, list] : batches)
    for (const std::vector<size_t>& batch : list)
      if (batch.size() >= 2) all_batches.push_back({&batch, *std::min_element(batch.begin(), batch.end())});
  std::sort(all_batches.begin(), all_batches.end(), [](const Batch& a, const Batch& b) { return a.first < b.first; });
  std::vector<std::vector<const std::vector<size_t>*>> launches;
  for (const Batch& b : all_batches) {
    auto independent = [&](const std::vector<const std::vector<size_t>*>& launch) {
      for (const std::vector<size_t>* other : launch)
        for (size_t m : *other)
          for (size_t u : *b.units)
            if (reaches(m, u) || reaches(u, m)) return false;
      return true;
    };
    auto launch = std::find_if(launches.begin(), launches.end(), independent);
    if (launch == launches.end()) launches.push_back({b.units});
    else launch->push_back(b.units);
  }

  std::vector<const Unit*> batched;
  std::vector<std::unique_ptr<Unit>> made;
  for (const auto& launch : launches) {
    auto merged = std::make_unique<Unit>();
    std::vector<ElementwiseProgram> programs;
    std::vector<int> variant_of_group;
    size_t groups = 0;
    for (size_t v = 0; v < launch.size(); ++v) {
      const std::vector<size_t>& batch = *launch[v];
      programs.push_back(dynamic_cast<const FusedElementwiseOp&>(*all[batch.front()]->op).program());
      for (size_t m : batch) {
        const Unit& u = *all[m];
        merged->steps.insert(merged->steps.end(), u.steps.begin(), u.steps.end());
        merged->in.insert(merged->in.end(), u.in.begin(), u.in.end());
        merged->out.insert(merged->out.end(), u.out.begin(), u.out.end());
        variant_of_group.push_back(static_cast<int>(v));
        batched.push_back(&u);
      }
      groups += batch.size();
      merged->kind += (v ? " | " : "") + all[batch.front()]->kind;
    }
    merged->host_only.assign(merged->in.size(), false);
    merged->where = all[launch.front()->front()]->where;
    merged->kind = "multi-tensor x" + std::to_string(groups) + " " + merged->kind;
    merged->op = std::make_unique<MultiTensorFusedOp>(std::move(programs), std::move(variant_of_group));
    made.push_back(std::move(merged));
  }
  replace_units(p.fused, batched, made);
}

void Schedule::merge_scalar_groups(ShapePlan& p) const {
  const std::vector<const Unit*> all = plan_units(p);
  const std::vector<std::vector<size_t>> deps = unit_dependencies(all);
  const std::vector<size_t> order = topological(all, deps);
  const Reachability reaches(deps, order);
  // Sets of independent fused units computing single elements, by the outputs' dims.
  std::map<std::vector<int64_t>, std::vector<std::vector<size_t>>> sets;
  for (size_t u : order) {
    if (!dynamic_cast<const FusedElementwiseOp*>(all[u]->op.get())) continue;
    const TensorDesc& out = p.desc[all[u]->out[0]];
    if (out.numel() != 1) continue;
    bool scalar = true;
    for (int v : all[u]->in) scalar = scalar && p.desc[v].numel() == 1;
    for (int v : all[u]->out) scalar = scalar && p.desc[v].dims == out.dims;
    if (!scalar) continue;
    auto& list = sets[out.dims];
    auto fits = [&](const std::vector<size_t>& set) {
      return std::all_of(set.begin(), set.end(), [&](size_t m) { return !reaches(m, u) && !reaches(u, m); });
    };
    auto set = std::find_if(list.begin(), list.end(), fits);
    if (set == list.end()) list.push_back({u});
    else set->push_back(u);
  }

  std::vector<const Unit*> merged_away;
  std::vector<std::unique_ptr<Unit>> made;
  for (const auto& [dims, list] : sets)
    for (const std::vector<size_t>& set : list) {
      if (set.size() < 2) continue;
      std::vector<ProgramPart> parts(set.size());
      std::vector<const ProgramPart*> part_ptrs;
      auto merged = std::make_unique<Unit>();
      merged->kind = "fused";
      for (size_t j = 0; j < set.size(); ++j) {
        const Unit& u = *all[set[j]];
        parts[j].program = dynamic_cast<const FusedElementwiseOp&>(*u.op).program();
        parts[j].inputs = u.in;
        parts[j].outputs = u.out;
        part_ptrs.push_back(&parts[j]);
        merged->steps.insert(merged->steps.end(), u.steps.begin(), u.steps.end());
        merged->kind += (j ? " | " : " ") + u.kind.substr(u.kind.find(' ') + 1);
        merged_away.push_back(&u);
      }
      // Independent parts share no register; every output already leaves its own kernel.
      ProgramPart one = merge_programs(part_ptrs, [](int) { return true; });
      merged->in = one.inputs;
      merged->out = one.outputs;
      merged->host_only.assign(merged->in.size(), false);
      merged->where = all[set.front()]->where;
      merged->op = std::make_unique<FusedElementwiseOp>(std::move(one.program));
      made.push_back(std::move(merged));
    }
  replace_units(p.fused, merged_away, made);
}

void Schedule::order_units(ShapePlan& p) const {
  const std::vector<const Unit*> all = plan_units(p);
  for (size_t u : topological(all, unit_dependencies(all))) p.order.push_back(all[u]);
}

void Schedule::choose_views(ShapePlan& p, const std::vector<const Tensor*>& fed) const {
  p.alias_of.assign(program.values.size(), -1);
  std::vector<const Unit*> run;
  for (const Unit* u : p.order) {
    bool view = u->in.size() >= 1 && u->out.size() == 1 && u->in[0] >= 0 && u->out[0] >= 0;
    if (view) {
      const int x = p.root(u->in[0]), y = u->out[0];
      view = p.desc[x].nbytes() == p.desc[y].nbytes() && !(state_of[x] >= 0 && !fed[x]) && !fed[y] &&
             state_of[y] < 0 && u->op->aliases_input(unit_shapes(p, *u));
      if (view) p.alias_of[y] = x;
    }
    (view ? p.views : run).push_back(u);
  }
  p.order = std::move(run);
}

OpShapes unit_shapes(const ShapePlan& p, const Unit& u) {
  OpShapes shapes;
  for (int v : u.in) {
    shapes.in.push_back(v >= 0 ? &p.desc[v] : nullptr);
    shapes.host.push_back(v >= 0 ? p.known[v] : nullptr);
  }
  for (int v : u.out) shapes.out.push_back(v >= 0 ? &p.desc[v] : nullptr);
  return shapes;
}

int Schedule::state_index(const std::string& name) const {
  const int v = program.find(name);
  return v < 0 ? -1 : state_of[v];
}

}  // namespace amp::cuda
