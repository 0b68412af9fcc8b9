#include "backends/cpu/executable.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>

#include "backends/cpu/fused_steps.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/onednn_layout.h"
#include "backends/memory_plan.h"
#include "graph/error.h"
#include "graph/ops/elementwise_grouping.h"

namespace amp::cpu {

namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Runs fn, prefixing any error with the node it happened in.
template <class F>
void at_node(const std::string& where, F&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace

struct CpuExecutable::Plan {
  struct Launch {
    int step;
    KernelIO io;
  };
  std::vector<View> views;        // per value
  std::vector<Tensor> constants;  // storage of the values computed while planning
  std::vector<Launch> launches;   // the steps a run executes, in order
  // State updates applied as soon as their value is computed (per launch: state index <- value),
  // because nothing after that launch reads the old state: the new value's buffer is then free
  // for reuse at once instead of living to the end of the run. The rest are applied at the end.
  std::vector<std::vector<std::pair<int, int>>> early_updates;  // per launch
  std::vector<std::pair<int, int>> late_updates;
  std::vector<ArenaUse> peak_live;  // the arena's buffers live at the step of its peak
  size_t constant_bytes = 0;        // of `constants`
  std::vector<int> state_layout;   // per state: the layout this plan's kernels read it in
  std::vector<std::pair<int, int>> state_views;  // (value, state) pairs whose view points at the state's bytes
  std::vector<int> feeds;         // values whose view points at this run's feed
  // (value, root) pairs: a Reshape-like step's output viewing the arena buffer of the value its
  // chain of such steps starts from, with no launch of its own (build_plan).
  std::vector<std::pair<int, int>> aliases;
  std::vector<int> fetches;
  std::unique_ptr<uint8_t, FreeDeleter> arena;
  ArenaPlan layout;
};

CpuExecutable::CpuExecutable(const Model& m, const CompileOptions& options, const Backend&) {
  std::vector<const Node*> nodes;
  program_ = make_program(m, &nodes);
  std::vector<std::optional<FusedStep>> fused(program_.steps.size());
  if (options.fuse_elementwise) {
    std::vector<std::string> keep;
    for (const auto& [state, source] : options.state_updates) keep.push_back(source);
    fuse_elementwise_steps(m, keep, program_, nodes, fused, seed_index_);
  } else {
    for (size_t s = 0; s < program_.steps.size(); ++s) seed_index_.push_back(static_cast<int>(s));
  }
  threads_ = options.threads > 0 ? options.threads : omp_get_num_procs();
  native_layouts_ = options.native_weight_layouts;
  // One pool of threads: OpenMP's. OpenBLAS runs each product on its caller's thread, and kernels
  // split products across cores themselves; two pools spinning for the same cores made the cnn
  // forward 15x slower on a loaded machine.
  openblas_set_num_threads(1);
  seed_ = options.seed;
  runs_ = options.first_run;
  communicator_ = options.communicator;

  std::vector<std::vector<int>> shape_inputs;
  std::vector<bool> reads_data;
  fused_away_.assign(program_.values.size(), false);
  for (size_t s = 0; s < nodes.size(); ++s) {
    const Program::Step& step = program_.steps[s];
    profile_names_.push_back(fused[s] ? fused[s]->summary : step.op);
    layout_role_.push_back(LayoutRole::kDense);
    if (fused[s]) {
      layout_role_.back() = LayoutRole::kElementwise;
      for (int v : fused[s]->internal) fused_away_[static_cast<size_t>(v)] = true;
      at_node(step.where, [&] { kernels_.push_back(make_fused_elementwise_kernel(fused[s]->program)); });
      entries_.push_back(&fused_elementwise_ops().front());
      shape_inputs.push_back({});
      reads_data.push_back(true);
      continue;
    }
    const Node& n = *nodes[s];
    const OpEntry* e = find_op(n.domain(), n.op_type());
    if (!e)
      throw InputError(step.where + ": op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
                       " is not supported by the cpu backend");
    const int first = step.in.empty() ? -1 : step.in[0];
    const DType t = first >= 0 ? program_.values[first].dtype : DType::kUndefined;
    if (e->types && t != DType::kUndefined && !(e->types & (1u << static_cast<int>(t))))
      throw InputError(step.where + ": op " + n.op_type() + " does not take " + std::string(dtype_name(t)) +
                       " on the cpu backend");
    at_node(step.where, [&] { kernels_.push_back(e->make(n, step.opset)); });
    entries_.push_back(e);
    if (is_fusable_node(n))
      layout_role_.back() = LayoutRole::kElementwise;
    else if (n.op_type() == "AllFinite" || n.op_type() == "AllFiniteScaled")
      layout_role_.back() = LayoutRole::kAnyInputs;
    else if (n.op_type() == "AllReduce")
      layout_role_.back() = LayoutRole::kPairwise;
    shape_inputs.push_back(e->shape_inputs);
    if (kernels_.back()->runs_while_planning()) {
      shape_inputs.back().clear();
      for (size_t i = 0; i < step.in.size(); ++i) shape_inputs.back().push_back(static_cast<int>(i));
    }
    reads_data.push_back(e->reads_data);
  }
  shape_value_ = shape_values(program_, shape_inputs, reads_data);

  state_of_.assign(program_.values.size(), -1);
  std::vector<std::string> names = options.state;
  if (names.empty())
    for (const Tensor& t : program_.initializers) names.push_back(t.name);
  for (const std::string& name : names) {
    const int v = program_.find(name);
    if (v < 0 || program_.values[v].initializer < 0)
      throw InputError(program_.path + ": state '" + name + "' is not an initializer of the main graph");
    const Tensor& init = program_.initializers[program_.values[v].initializer];
    // State that runs write in place gets a private copy (the model's bytes may be a read-only
    // mapping); the rest shares the model's buffer until write_state replaces it.
    const bool updated = std::any_of(options.state_updates.begin(), options.state_updates.end(),
                                     [&](const auto& u) { return u.first == name; });
    Tensor own = updated ? Tensor::from_bytes(init.dtype, init.dims,
                                              std::string(reinterpret_cast<const char*>(init.data()), init.nbytes()))
                         : init;
    own.name = name;
    state_of_[v] = static_cast<int>(state_.size());
    state_.push_back(std::move(own));
  }
  // Runs read state from state_, never from the program's initializers: dropping those references
  // lets the caller free the model's copy (or unmap its external data) once compiled. With state
  // named (a training step, whose state is copied), constants read from external data get bytes of
  // their own too, so that no view keeps the mapping, and the weights' pages in it, resident.
  for (int v = 0; v < static_cast<int>(state_of_.size()); ++v) {
    const int i = program_.values[v].initializer;
    if (i >= 0 && state_of_[v] < 0 && !options.state.empty() && program_.initializers[i].external) {
      Tensor& init = program_.initializers[i];
      Tensor own = Tensor::from_bytes(init.dtype, init.dims,
                                      std::string(reinterpret_cast<const char*>(init.data()), init.nbytes()));
      own.name = init.name;
      init = std::move(own);
    }
  }
  for (int v = 0; v < static_cast<int>(state_of_.size()); ++v)
    if (state_of_[v] >= 0) {
      Tensor& init = program_.initializers[program_.values[v].initializer];
      Tensor meta;
      meta.name = init.name;
      meta.dtype = init.dtype;
      meta.dims = init.dims;
      init = std::move(meta);
    }
  state_layout_.assign(state_.size(), 0);
  for (const auto& [state, source] : options.state_updates) {
    const int s = state_index(state);
    const int v = program_.find(source);
    if (s < 0) throw InputError(program_.path + ": state update target '" + state + "' is not state");
    if (v < 0) throw InputError(program_.path + ": state update source '" + source + "' is not a value of the graph");
    updates_.emplace_back(s, v);
  }
}

CpuExecutable::~CpuExecutable() = default;

int CpuExecutable::state_index(const std::string& name) const {
  const int v = program_.find(name);
  return v < 0 ? -1 : state_of_[v];
}

std::unique_ptr<CpuExecutable::Plan> CpuExecutable::build_plan(const std::vector<const Tensor*>& fed,
                                                               const std::vector<int>& fetches) const {
  auto plan = std::make_unique<Plan>();
  plan->fetches = fetches;
  std::vector<View>& views = plan->views;
  views.resize(program_.values.size());
  for (size_t v = 0; v < views.size(); ++v) {
    const Program::Val& val = program_.values[v];
    const Tensor* t = fed[v];
    if (t) {
      plan->feeds.push_back(static_cast<int>(v));
    } else if (state_of_[v] >= 0) {
      t = &state_[state_of_[v]];
    } else if (val.initializer >= 0) {
      t = &program_.initializers[val.initializer];
    }
    if (t) views[v] = View{t->dtype, t->dims, const_cast<uint8_t*>(t->data())};
    if (t && !fed[v] && state_of_[v] >= 0) plan->state_views.emplace_back(static_cast<int>(v), state_of_[v]);
  }

  std::vector<int> targets = fetches;
  for (const auto& [s, v] : updates_) targets.push_back(v);
  const std::vector<int> steps = steps_needed(program_, targets);
  const auto end = static_cast<int64_t>(steps.size());
  std::vector<int64_t> last_use(views.size(), -1), made_at(views.size(), -1);
  for (int64_t pos = 0; pos < end; ++pos) {
    const Program::Step& step = program_.steps[steps[pos]];
    // A step that runs while the plan is made (it computes a shape value: Shape of a tensor the
    // backward sums a gradient down to) reads its inputs then, not at run time: it does not keep
    // their buffers alive. Otherwise each bias Add's gradient held the product before the Add
    // from the forward to the backward (GPT-2 at 2 x 1024 tokens: the head's 393 MiB, and 54 MiB
    // a layer).
    const bool while_planning =
        std::any_of(step.out.begin(), step.out.end(), [&](int out) { return out >= 0 && shape_value_[out]; });
    if (!while_planning)
      for (int in : step.in)
        if (in >= 0) last_use[in] = pos;
    for (int out : step.out)
      if (out >= 0) made_at[out] = pos;
  }
  for (int t : fetches) last_use[t] = end;
  // An update whose old state nobody reads after its new value is made (nor fetches) is applied
  // right after that step; its value then lives only as long as its readers need it.
  std::vector<int64_t> early_at(updates_.size(), -1);
  for (size_t u = 0; u < updates_.size(); ++u) {
    const auto [s, v] = updates_[u];
    const int sv = program_.find(state_[s].name);
    if (made_at[v] >= 0 && !shape_value_[v] && !shape_value_[sv] && last_use[sv] <= made_at[v]) early_at[u] = made_at[v];
  }
  for (size_t u = 0; u < updates_.size(); ++u)
    if (early_at[u] < 0) last_use[updates_[u].second] = end;
  // Several states updated from one value: early only when all of them are.
  for (size_t u = 0; u < updates_.size(); ++u)
    if (last_use[updates_[u].second] == end) early_at[u] = -1;
  for (size_t u = 0; u < updates_.size(); ++u)
    if (early_at[u] >= 0) last_use[updates_[u].second] = std::max(last_use[updates_[u].second], early_at[u]);
  for (size_t v = 0; v < views.size(); ++v) {
    const Program::Val& val = program_.values[v];
    if (last_use[v] >= 0 && fused_away_[v])
      throw InputError(program_.path + ": value '" + val.name +
                       "' is computed inside a fused elementwise kernel and cannot be fetched (CompileOptions::" +
                       "fuse_elementwise = false keeps every value)");
    if (last_use[v] >= 0 && val.producer < 0 && views[v].dtype == DType::kUndefined)
      throw InputError(program_.path + ": input '" + val.name + "' is needed but not fed");
  }

  // A fused elementwise kernel whose output is the new value of a state it reads, at the last read
  // of that state (an optimizer's update), writes it straight into the state's buffer: each
  // element is read before it is written, and the value then needs neither an arena buffer nor a
  // copy after the launch (an SGD step of resnet18 copied 45 MB a step).
  std::vector<int> in_place(views.size(), -1);  // per value: the state it is written into
  {
    std::vector<int> sources(views.size(), 0);
    for (size_t u = 0; u < updates_.size(); ++u) ++sources[static_cast<size_t>(updates_[u].second)];
    for (size_t u = 0; u < updates_.size(); ++u) {
      const auto [s, v] = updates_[u];
      const int producer = program_.values[v].producer;
      if (early_at[u] < 0 || sources[static_cast<size_t>(v)] != 1 || producer < 0) continue;
      if (entries_[producer] != &fused_elementwise_ops().front()) continue;
      const int sv = program_.find(state_[s].name);
      const auto& reads = program_.steps[producer].in;
      if (std::find(reads.begin(), reads.end(), sv) == reads.end()) continue;
      in_place[static_cast<size_t>(v)] = s;
    }
  }

  // Values that are the new value of some state: their buffer is copied into the state after the
  // launch that makes them, so none of them is a view of another value's buffer.
  std::vector<bool> updates_a_state(views.size(), false);
  for (const auto& [st, v] : updates_) updates_a_state[static_cast<size_t>(v)] = true;

  std::vector<BufferLife> lives;
  std::vector<std::pair<int, size_t>> owners;  // per life: (value, 0) or (-1, launch index) for scratch
  std::vector<int64_t> life_of(views.size(), -1);  // per value: its arena buffer's index in lives
  std::vector<int> root_of(views.size(), -1);      // per value: the value whose buffer it views
  std::vector<int64_t> launch_at(static_cast<size_t>(end), -1);  // per position: its launch, or -1
  std::vector<int64_t> scratch_life;   // per launch: its scratch's index in lives, or -1
  std::vector<int64_t> launch_pos;     // per launch: its position
  std::vector<bool> made_at_plan(views.size(), false);
  RunContext planning{threads_, seed_};
  for (int64_t pos = 0; pos < end; ++pos) {
    const int s = steps[pos];
    const Program::Step& step = program_.steps[s];
    KernelIO io;
    io.threads = threads_;
    for (int in : step.in) io.in.push_back(in >= 0 ? &views[in] : nullptr);
    // Shape-deciding values, and nodes without inputs (Constant), are computed once per plan.
    bool at_plan_time = (step.in.empty() && !kernels_[s]->draws()) || kernels_[s]->runs_while_planning();
    for (int out : step.out) {
      io.out.push_back(out >= 0 ? &views[out] : nullptr);
      if (out < 0) continue;
      views[out].dtype = program_.values[out].dtype;
      at_plan_time = at_plan_time || shape_value_[out];
    }
    size_t scratch = 0;
    at_node(step.where, [&] {
      const OpEntry& e = *entries_[s];
      if (e.types && io.has_in(0) && !(e.types & (1u << static_cast<int>(io.input(0).dtype))))
        throw InputError("op " + step.op + " does not take " + std::string(dtype_name(io.input(0).dtype)) +
                         " on the cpu backend");
      scratch = kernels_[s]->infer(io);
      for (int out : step.out) {
        if (out < 0) continue;
        const DType declared = program_.values[out].dtype;
        if (declared != DType::kUndefined && declared != views[out].dtype)
          throw InputError("output '" + program_.values[out].name + "' is declared " +
                           std::string(dtype_name(declared)) + " but the op produces " +
                           std::string(dtype_name(views[out].dtype)));
      }
    });
    if (at_plan_time) {
      // Output shapes downstream depend on these contents: compute them now, once per signature.
      for (int out : step.out) {
        if (out < 0) continue;
        plan->constants.emplace_back(views[out].dtype, views[out].dims);
        views[out].data = plan->constants.back().mutable_data();
        made_at_plan[static_cast<size_t>(out)] = true;
      }
      std::vector<uint8_t> ws(scratch);
      io.workspace = ws.data();
      at_node(step.where, [&] { kernels_[s]->run(io, planning); });
      continue;
    }
    // A Reshape-like step whose input has a buffer in the arena (made by a launch of this plan, not
    // a feed, state, initializer or constant) views that buffer instead of copying it: the
    // buffer's life is stretched to the view's last reader, and nothing writes into an arena
    // buffer after the launch that made it.
    if (kernels_[s]->aliases_input() && step.out.size() == 1 && step.out[0] >= 0 && !step.in.empty() && step.in[0] >= 0) {
      const int in = step.in[0], out = step.out[0];
      const int root = root_of[static_cast<size_t>(in)] >= 0 ? root_of[static_cast<size_t>(in)] : in;
      if (life_of[static_cast<size_t>(root)] >= 0 && !updates_a_state[static_cast<size_t>(out)] &&
          in_place[static_cast<size_t>(out)] < 0 && views[out].nbytes() == views[root].nbytes()) {
        BufferLife& life = lives[static_cast<size_t>(life_of[static_cast<size_t>(root)])];
        life.last = std::max({life.last, pos, last_use[out]});
        root_of[static_cast<size_t>(out)] = root;
        plan->aliases.emplace_back(out, root);
        continue;
      }
    }
    // A kernel that may write its output over an input's bytes (Kernel::overwrites_input) gets
    // that input's arena buffer when no later step reads the buffer (nor a fetch, nor a view of it
    // still to be read) and no other operand of this step is that buffer.
    int overwritten = -1;
    if (const int i = kernels_[s]->overwrites_input(); i >= 0 && static_cast<size_t>(i) < step.in.size() &&
                                                       step.in[i] >= 0 && !step.out.empty() && step.out[0] >= 0) {
      const int in = step.in[i], out = step.out[0];
      const int root = root_of[static_cast<size_t>(in)] >= 0 ? root_of[static_cast<size_t>(in)] : in;
      const int64_t life = life_of[static_cast<size_t>(root)];
      const auto same_buffer = [&](int v) {
        return v >= 0 && (v == root || root_of[static_cast<size_t>(v)] == root);
      };
      const bool shared = std::count_if(step.in.begin(), step.in.end(), same_buffer) > 1;
      if (life >= 0 && lives[static_cast<size_t>(life)].last <= pos && !shared &&
          !updates_a_state[static_cast<size_t>(out)] && in_place[static_cast<size_t>(out)] < 0 &&
          views[out].dtype == views[in].dtype && views[out].nbytes() == views[root].nbytes()) {
        lives[static_cast<size_t>(life)].last = std::max(pos, last_use[out]);
        root_of[static_cast<size_t>(out)] = root;
        plan->aliases.emplace_back(out, root);
        overwritten = out;
      }
    }
    for (int out : step.out) {
      if (out < 0 || out == overwritten) continue;
      if (const int st = in_place[static_cast<size_t>(out)];
          st >= 0 && views[out].dtype == state_[st].dtype && views[out].dims == state_[st].dims) {
        views[out].data = const_cast<uint8_t*>(state_[st].data());
        plan->state_views.emplace_back(out, st);
        continue;
      }
      life_of[static_cast<size_t>(out)] = static_cast<int64_t>(lives.size());
      lives.push_back({views[out].nbytes(), pos, std::max(pos, last_use[out])});
      owners.emplace_back(out, 0);
    }
    scratch_life.push_back(-1);
    if (scratch > 0) {
      scratch_life.back() = static_cast<int64_t>(lives.size());
      lives.push_back({scratch, pos, pos});
      owners.emplace_back(-1, plan->launches.size());
    }
    launch_at[pos] = static_cast<int64_t>(plan->launches.size());
    launch_pos.push_back(pos);
    plan->launches.push_back({s, std::move(io)});
  }
  plan->state_layout = assign_layouts(*plan, fed, made_at_plan);
  // Kernels given a blocked operand size their scratch again: that operand may need no reorder now.
  for (size_t li = 0; li < plan->launches.size(); ++li) {
    Plan::Launch& l = plan->launches[li];
    const auto blocked = [](const View* v) { return v && v->layout != 0; };
    if (std::none_of(l.io.in.begin(), l.io.in.end(), blocked) && std::none_of(l.io.out.begin(), l.io.out.end(), blocked))
      continue;
    if (layout_role_[static_cast<size_t>(l.step)] != LayoutRole::kDense) continue;
    size_t scratch = 0;
    at_node(program_.steps[l.step].where, [&] { scratch = kernels_[l.step]->infer(l.io); });
    if (scratch_life[li] >= 0) {
      lives[static_cast<size_t>(scratch_life[li])].bytes = scratch;
    } else if (scratch > 0) {
      lives.push_back({scratch, launch_pos[li], launch_pos[li]});
      owners.emplace_back(-1, li);
    }
  }
  for (const Tensor& t : plan->constants) plan->constant_bytes += t.nbytes();

  plan->early_updates.resize(plan->launches.size());
  for (size_t u = 0; u < updates_.size(); ++u) {
    const auto [s, v] = updates_[u];
    if (early_at[u] < 0 || launch_at[early_at[u]] < 0) {
      plan->late_updates.push_back(updates_[u]);
      continue;
    }
    const Tensor& to = state_[s];
    if (views[v].dtype != to.dtype || views[v].dims != to.dims)
      throw InputError(program_.path + ": state '" + to.name + "' is " + type_str(to.dtype, to.dims) +
                       " but its update '" + program_.values[v].name + "' is " +
                       type_str(views[v].dtype, views[v].dims));
    plan->early_updates[launch_at[early_at[u]]].push_back(updates_[u]);
  }

  plan->layout = plan_arena(lives);
  // What the arena holds at its peak, buffer by buffer (the same aligned sizes plan_arena sums).
  if (!lives.empty()) {
    std::map<int64_t, int64_t> delta;
    for (const BufferLife& b : lives) {
      delta[b.first] += static_cast<int64_t>((b.bytes + 63) / 64 * 64);
      delta[b.last + 1] -= static_cast<int64_t>((b.bytes + 63) / 64 * 64);
    }
    int64_t live = 0, best = -1, at = 0;
    for (const auto& [pos, d] : delta) {
      live += d;
      if (live > best) best = live, at = pos;
    }
    for (size_t i = 0; i < lives.size(); ++i)
      if (lives[i].first <= at && at <= lives[i].last && lives[i].bytes > 0)
        plan->peak_live.push_back({owners[i].first >= 0 ? program_.values[owners[i].first].name : std::string(),
                                   (lives[i].bytes + 63) / 64 * 64});
  }
  plan->arena.reset(static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(plan->layout.arena_bytes, 64))));
  if (!plan->arena) throw std::bad_alloc();
  uint8_t* base = plan->arena.get();
  for (size_t i = 0; i < lives.size(); ++i) {
    uint8_t* at = base + plan->layout.offsets[i];
    if (owners[i].first >= 0)
      views[owners[i].first].data = at;
    else
      plan->launches[owners[i].second].io.workspace = at;
  }
  for (const auto& [value, root] : plan->aliases) views[value].data = views[root].data;
  return plan;
}

namespace {

bool relayout_type(DType t) { return t == DType::kFloat || t == DType::kBFloat16 || t == DType::kFloat16; }

dnnl::memory::data_type onednn_type(DType t) {
  return t == DType::kFloat ? dnnl::memory::data_type::f32
                            : t == DType::kBFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f16;
}

}  // namespace

// Values are joined into groups that must share one order of their elements: the operands of an
// elementwise step of one shape (a scalar operand has no order), AllReduce's input and output, a
// state and its update. A group keeps dense row-major order when any member is touched by anything
// else: a kernel that reads or writes it dense, a broadcast against another shape, a fetch, a feed,
// a constant. Otherwise it takes the layout its kernels' wishes (Kernel::layout_preferences) weigh
// most — a layout a kernel writes (a convolution's weight gradient) counts 3, one it reads 2 — so
// resnet18's weights, gradients and momentum stay in the layout its forward reads and its
// backward-weights writes, and only backward-data reorders them.
std::vector<int> CpuExecutable::assign_layouts(Plan& plan, const std::vector<const Tensor*>& fed,
                                               const std::vector<bool>& made_at_plan) const {
  std::vector<int> state_layout(state_.size(), 0);
  if (!native_layouts_) return state_layout;
  std::vector<View>& views = plan.views;
  const size_t nv = views.size();
  std::vector<int> parent(nv);
  for (size_t v = 0; v < nv; ++v) parent[v] = static_cast<int>(v);
  std::function<int(int)> find = [&](int v) { return parent[v] == v ? v : parent[v] = find(parent[v]); };
  auto unite = [&](int a, int b) { parent[find(a)] = find(b); };
  std::vector<bool> pinned(nv, false);
  // A view and the buffer it views keep their dense order (the skipped copy was a dense kernel).
  for (const auto& [value, root] : plan.aliases) pinned[value] = pinned[root] = true;
  auto tensor = [&](int v) { return v >= 0 && views[v].numel() > 1; };
  std::vector<std::vector<Kernel::LayoutWish>> wishes(plan.launches.size());
  bool any_wish = false;
  for (size_t li = 0; li < plan.launches.size(); ++li) {
    const int s = plan.launches[li].step;
    const Program::Step& st = program_.steps[s];
    std::vector<int> operands(st.in);
    operands.insert(operands.end(), st.out.begin(), st.out.end());
    switch (layout_role_[static_cast<size_t>(s)]) {
      case LayoutRole::kElementwise: {
        const int first = st.out.empty() ? -1 : st.out[0];
        bool same = first >= 0;
        for (int v : operands)
          if (tensor(v) && first >= 0 && views[v].dims != views[first].dims) same = false;
        for (int v : operands)
          if (tensor(v)) {
            if (same)
              unite(v, first);
            else
              pinned[v] = true;
          }
        break;
      }
      case LayoutRole::kAnyInputs:
        for (int v : st.out)
          if (v >= 0) pinned[v] = true;
        break;
      case LayoutRole::kPairwise:
        for (size_t i = 0; i < st.in.size(); ++i) {
          const int in = st.in[i], out = i >= 1 && i - 1 < st.out.size() ? st.out[i - 1] : -1;
          if (in >= 0 && out >= 0 && views[in].dims == views[out].dims)
            unite(in, out);
          else if (in >= 0)
            pinned[in] = true;
        }
        break;
      case LayoutRole::kDense: {
        wishes[li] = kernels_[s]->layout_preferences(plan.launches[li].io);
        any_wish = any_wish || !wishes[li].empty();
        auto wished = [&](bool output, size_t i) {
          return std::any_of(wishes[li].begin(), wishes[li].end(),
                             [&](const Kernel::LayoutWish& w) { return w.output == output && w.index == i; });
        };
        for (size_t i = 0; i < st.in.size(); ++i)
          if (st.in[i] >= 0 && !wished(false, i)) pinned[st.in[i]] = true;
        for (size_t i = 0; i < st.out.size(); ++i)
          if (st.out[i] >= 0 && !wished(true, i)) pinned[st.out[i]] = true;
        break;
      }
    }
  }
  if (!any_wish) return state_layout;
  for (const auto& [s, v] : updates_) unite(program_.find(state_[s].name), v);
  for (int v : plan.fetches) pinned[v] = true;
  for (size_t v = 0; v < nv; ++v) {
    const Program::Val& val = program_.values[v];
    if (fed[v] || made_at_plan[v] || shape_value_[v] || (val.initializer >= 0 && state_of_[v] < 0)) pinned[v] = true;
    if (state_of_[v] >= 0 && !relayout_type(views[v].dtype)) pinned[v] = true;
  }
  // Per group: pinned, and the weight of each wished layout.
  std::vector<bool> group_pinned(nv, false);
  for (size_t v = 0; v < nv; ++v)
    if (pinned[v]) group_pinned[static_cast<size_t>(find(static_cast<int>(v)))] = true;
  std::map<int, std::map<int, int>> votes;  // group -> layout -> weight
  for (size_t li = 0; li < plan.launches.size(); ++li) {
    const Program::Step& st = program_.steps[plan.launches[li].step];
    for (const Kernel::LayoutWish& w : wishes[li]) {
      const int v = w.output ? st.out[w.index] : st.in[w.index];
      if (v < 0) continue;
      const int g = find(v);
      if (!group_pinned[static_cast<size_t>(g)]) votes[g][w.layout] += w.output ? 3 : 2;
    }
  }
  std::map<int, int> chosen;  // group -> layout
  for (const auto& [g, weights] : votes) {
    int best = 0, best_weight = 0;
    for (const auto& [layout, weight] : weights)
      if (weight > best_weight) best = layout, best_weight = weight;
    // Every kernel's wish in the group must view the tensor with the same groups.
    bool consistent = true;
    for (const auto& [layout, weight] : weights)
      consistent = consistent && onednn::layout_groups(layout) == onednn::layout_groups(best);
    if (best && consistent) chosen[g] = best;
  }
  for (size_t v = 0; v < nv; ++v) {
    const auto it = chosen.find(find(static_cast<int>(v)));
    if (it != chosen.end() && !onednn::layout_fits(it->second, views[v].dims)) chosen.erase(it);
  }
  for (size_t v = 0; v < nv; ++v) {
    const auto it = chosen.find(find(static_cast<int>(v)));
    if (it == chosen.end()) continue;
    views[v].layout = it->second;
    if (state_of_[v] >= 0) state_layout[static_cast<size_t>(state_of_[v])] = it->second;
  }
  return state_layout;
}

void CpuExecutable::set_state_layout(size_t s, int layout) {
  Tensor& t = state_[s];
  if (state_layout_[s] == layout) return;
  if (t.nbytes() > 0) {
    const std::string before(reinterpret_cast<const char*>(t.data()), t.nbytes());
    onednn::relayout(before.data(), state_layout_[s], t.mutable_data(), layout, t.dims, onednn_type(t.dtype), threads_);
  }
  state_layout_[s] = layout;
}

std::vector<Tensor> CpuExecutable::run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                       const std::vector<std::string>& fetches) {
  const std::vector<const Tensor*> fed = bind_feeds(program_, feeds, "cpu");
  const std::vector<int> fetch_ids = fetch_values(program_, fetches);
  const std::string key = plan_signature(fed, fetch_ids, shape_value_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= 16) plans_.clear();  // many distinct shapes: keep memory bounded
    it = plans_.emplace(key, build_plan(fed, fetch_ids)).first;
  }
  Plan& plan = *it->second;
  last_plan_ = &plan;
  // State in the layouts this plan reads it in (a plan made for another input shape may differ).
  // A state that shared the model's bytes gets its own when converted: views are pointed again.
  bool moved = false;
  for (size_t st = 0; st < state_.size(); ++st) {
    if (state_layout_[st] == plan.state_layout[st]) continue;
    const uint8_t* before = state_[st].data();
    set_state_layout(st, plan.state_layout[st]);
    moved = moved || state_[st].data() != before;
  }
  if (moved) {
    for (const auto& [v, st] : plan.state_views) plan.views[v].data = const_cast<uint8_t*>(state_[st].data());
    for (auto p = plans_.begin(); p != plans_.end();) p = p->second.get() == &plan ? std::next(p) : plans_.erase(p);
  }
  for (int v : plan.feeds) plan.views[v].data = const_cast<uint8_t*>(fed[v]->data());

  const uint64_t run_seed = splitmix64(seed_ ^ splitmix64(runs_));
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    Plan::Launch& l = plan.launches[i];
    const RunContext ctx{threads_, splitmix64(run_seed + static_cast<uint64_t>(seed_index_[l.step])), communicator_.get()};
    if (!profile_.on()) {
      at_node(program_.steps[l.step].where, [&] { kernels_[l.step]->run(l.io, ctx); });
    } else {
      const auto start = std::chrono::steady_clock::now();
      at_node(program_.steps[l.step].where, [&] { kernels_[l.step]->run(l.io, ctx); });
      profile_.add(profile_names_[l.step], std::chrono::steady_clock::now() - start);
    }
    for (const auto& [s, v] : plan.early_updates[i])
      if (plan.views[v].data != state_[s].data()) std::memmove(state_[s].mutable_data(), plan.views[v].data, state_[s].nbytes());
  }
  if (profile_.on()) profile_.end_run();
  ++runs_;

  std::vector<Tensor> results;
  for (int v : fetch_ids) {
    const View& view = plan.views[v];
    Tensor t(view.dtype, view.dims);
    if (view.nbytes() > 0) std::memcpy(t.mutable_data(), view.data, view.nbytes());
    t.name = program_.values[v].name;
    results.push_back(std::move(t));
  }
  bool replan = false;
  for (const auto& [s, v] : updates_) replan = replan || shape_value_[program_.find(state_[s].name)];
  for (const auto& [s, v] : plan.late_updates) {
    const View& from = plan.views[v];
    Tensor& to = state_[s];
    if (from.dtype != to.dtype || from.dims != to.dims)
      throw InputError(program_.path + ": state '" + to.name + "' is " + type_str(to.dtype, to.dims) +
                       " but its update '" + program_.values[v].name + "' is " + type_str(from.dtype, from.dims));
    std::memmove(to.mutable_data(), from.data, to.nbytes());
  }
  for (int v : plan.feeds) plan.views[v].data = nullptr;  // the caller's tensors may go away
  if (replan) {
    plans_.clear();
    last_plan_ = nullptr;
  }
  return results;
}

std::vector<std::string> CpuExecutable::state_names() const {
  std::vector<std::string> names;
  for (const Tensor& t : state_) names.push_back(t.name);
  return names;
}

Tensor CpuExecutable::read_state(const std::string& name) const {
  const int s = state_index(name);
  if (s < 0) throw InputError(program_.path + ": no state named '" + name + "'");
  const Tensor& t = state_[s];
  Tensor copy = Tensor::from_bytes(t.dtype, t.dims, std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
  if (state_layout_[s] && t.nbytes() > 0)
    onednn::relayout(t.data(), state_layout_[s], copy.mutable_data(), 0, t.dims, onednn_type(t.dtype), threads_);
  copy.name = name;
  return copy;
}

void CpuExecutable::write_state(const std::string& name, const Tensor& value) {
  const int s = state_index(name);
  if (s < 0) throw InputError(program_.path + ": no state named '" + name + "'");
  Tensor& t = state_[s];
  if (value.dtype != t.dtype)
    throw InputError(program_.path + ": state '" + name + "' is " + std::string(dtype_name(t.dtype)) + ", got " +
                     std::string(dtype_name(value.dtype)));
  if (value.dims == t.dims && !shape_value_[program_.find(name)]) {
    const uint8_t* before = t.data();
    if (state_layout_[s] && t.nbytes() > 0)
      onednn::relayout(value.data(), 0, t.mutable_data(), state_layout_[s], t.dims, onednn_type(t.dtype), threads_);
    else
      std::memcpy(t.mutable_data(), value.data(), t.nbytes());
    if (t.data() != before) {  // it was shared with the model: plans point at the old bytes
      plans_.clear();
      last_plan_ = nullptr;
    }
    return;
  }
  // A new shape (or contents other shapes depend on): plans are stale.
  t = Tensor::from_bytes(value.dtype, value.dims,
                         std::string(reinterpret_cast<const char*>(value.data()), value.nbytes()));
  t.name = name;
  state_layout_[s] = 0;
  plans_.clear();
  last_plan_ = nullptr;
}

MemoryStats CpuExecutable::memory() const {
  MemoryStats m;
  for (const Tensor& t : state_) {
    m.state_bytes += t.nbytes();
    m.state.emplace_back(t.name, t.nbytes());
  }
  for (size_t v = 0; v < state_of_.size(); ++v)
    if (state_of_[v] < 0 && program_.values[v].initializer >= 0)
      m.constant_bytes += program_.initializers[program_.values[v].initializer].nbytes();
  if (last_plan_) {
    m.arena_bytes = last_plan_->layout.arena_bytes;
    m.peak_bytes = last_plan_->layout.peak_bytes;
    m.intermediate_bytes = last_plan_->layout.total_bytes;
    m.peak_live = last_plan_->peak_live;
    m.constant_bytes += last_plan_->constant_bytes;
  }
  return m;
}

std::vector<std::string> CpuExecutable::blocked_state() const {
  std::vector<std::string> names;
  for (size_t s = 0; s < state_.size(); ++s)
    if (state_layout_[s]) names.push_back(state_[s].name);
  return names;
}

void CpuExecutable::trim() {
  plans_.clear();
  last_plan_ = nullptr;
}

}  // namespace amp::cpu
