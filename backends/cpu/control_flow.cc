// Loop and If (opset 11-17; tf2onnx's and keras2onnx's while loops and conditionals, ONNX's
// function expansions such as Range's). Their bodies run through this backend's executables
// (cpu/subgraph.h), compiled once per node. How many times a Loop runs, the shapes its carried
// values take and which branch an If takes come out of data, so both run while their plan is made
// (Kernel::runs_while_planning): every input is known then, and the outputs are the plan's
// constants. Sequence and optional types are not tensors and are refused by the ops that make them.
//
// Loop(M, cond, v_initial...) with body(iteration_num, cond_in, carried...) -> (cond_out,
// carried..., scan_outputs...): while i < M (when M is given) and cond (when cond is given; the
// body's cond_out is then the next iteration's), the carried values go round and each scan output
// is stacked along a new first axis. Outputs: the final carried values, then the scan outputs.
// If(cond) runs then_branch or else_branch and returns its outputs.
#include <cstring>
#include <limits>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/subgraph.h"

namespace amp::cpu {
namespace {

const Graph& subgraph(const Node& n, const char* name) {
  const Attribute* a = n.attr(name);
  if (!a || !a->g) throw InputError("node " + n.label() + ": no graph attribute '" + name + "'");
  return *a->g;
}

// A scalar (one element) of any integer or bool type, as ONNX reads M and cond.
int64_t scalar_of(const View& v, const std::string& label, const char* what) {
  if (v.numel() != 1)
    throw InputError("node " + label + ": " + what + " must have one element, got shape " + dims_str(v.dims));
  if (v.dtype == DType::kBool) return *v.as<uint8_t>() != 0;
  return read_ints(v)[0];
}

// Computes the op in infer(), which the planner calls with every input known, and hands the
// outputs to the run() that directly follows it.
class RunsWhilePlanning : public Kernel {
 public:
  bool runs_while_planning() const override { return true; }

  size_t infer(KernelIO& io) const override {
    results_ = compute(io);
    for (size_t k = 0; k < io.out.size() && k < results_.size(); ++k)
      if (io.has_out(k)) {
        io.output(k).dtype = results_[k].dtype;
        io.output(k).dims = results_[k].dims;
      }
    return 0;
  }

  void run(KernelIO& io, const RunContext&) const override {
    if (results_.empty()) results_ = compute(io);
    for (size_t k = 0; k < io.out.size() && k < results_.size(); ++k)
      if (io.has_out(k) && results_[k].nbytes()) std::memcpy(io.output(k).data, results_[k].data(), results_[k].nbytes());
    results_.clear();
  }

 protected:
  virtual std::vector<Tensor> compute(const KernelIO& io) const = 0;

 private:
  mutable std::vector<Tensor> results_;  // from infer() to the run() after it
};

class Loop final : public RunsWhilePlanning {
 public:
  Loop(const Node& n, int64_t opset)
      : label_(n.label()), own_inputs_(n.inputs().size()), body_(n, subgraph(n, "body"), opset) {
    if (own_inputs_ < 2) throw InputError("node " + label_ + ": Loop needs the inputs M and cond (either may be empty)");
    carried_ = own_inputs_ - 2;
    const Graph& body = body_.graph();
    if (body_.own_inputs() != carried_ + 2)
      throw InputError("node " + label_ + ": its body has " + std::to_string(body_.own_inputs()) + " inputs, expected " +
                       std::to_string(carried_ + 2) + " (iteration_num, cond and the carried values)");
    if (body.outputs().size() < carried_ + 1)
      throw InputError("node " + label_ + ": its body has " + std::to_string(body.outputs().size()) +
                       " outputs, fewer than cond and the carried values");
    for (size_t k = carried_ + 1; k < body.outputs().size(); ++k) scan_types_.push_back(body.outputs()[k]->type());
  }

 private:
  std::vector<Tensor> compute(const KernelIO& io) const override {
    const bool has_m = io.has_in(0), has_cond = io.has_in(1);
    if (!has_m && !has_cond) throw InputError("node " + label_ + ": a Loop with neither M nor cond never ends");
    const int64_t trips = has_m ? scalar_of(io.input(0), label_, "M") : std::numeric_limits<int64_t>::max();
    bool go_on = !has_cond || scalar_of(io.input(1), label_, "cond") != 0;
    std::vector<Tensor> carried;
    for (size_t i = 0; i < carried_; ++i) {
      if (!io.has_in(2 + i)) throw InputError("node " + label_ + ": loop-carried input " + std::to_string(i) + " is absent");
      carried.push_back(view_of(io.input(2 + i)));
    }
    std::vector<std::vector<Tensor>> scans(scan_types_.size());
    Tensor iteration(DType::kInt64, {}), cond(DType::kBool, {});
    for (int64_t i = 0; i < trips && go_on; ++i) {
      iteration.mutable_as<int64_t>()[0] = i;
      cond.mutable_as<uint8_t>()[0] = 1;
      std::vector<Tensor> own = {iteration, cond};
      own.insert(own.end(), carried.begin(), carried.end());
      std::vector<Tensor> outs = body_.run(own, io, own_inputs_);
      if (has_cond) {
        const View c{outs[0].dtype, outs[0].dims, const_cast<uint8_t*>(outs[0].data())};
        go_on = scalar_of(c, label_, "the body's cond output") != 0;
      }
      for (size_t k = 0; k < carried_; ++k) carried[k] = std::move(outs[1 + k]);
      for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(std::move(outs[1 + carried_ + k]));
    }
    std::vector<Tensor> results;
    for (Tensor& t : carried) results.push_back(std::move(t));  // after no iteration, views of the inputs
    for (size_t k = 0; k < scans.size(); ++k) results.push_back(stack(scans[k], scan_types_[k], k));
    return results;
  }

  // The iterations' values of scan output k along a new first axis; none: [0, declared dims].
  Tensor stack(const std::vector<Tensor>& parts, const ValueType& declared, size_t k) const {
    if (parts.empty()) {
      std::vector<int64_t> dims = {0};
      if (declared.shape)
        for (const Dim& d : declared.shape->dims) dims.push_back(d.is_static() ? *d.value : 0);
      return Tensor(declared.elem == DType::kUndefined ? DType::kFloat : declared.elem, dims);
    }
    std::vector<int64_t> dims = parts[0].dims;
    dims.insert(dims.begin(), static_cast<int64_t>(parts.size()));
    Tensor out(parts[0].dtype, dims);
    const size_t bytes = parts[0].nbytes();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].dtype != parts[0].dtype || parts[i].dims != parts[0].dims)
        throw InputError("node " + label_ + ": scan output " + std::to_string(k) + " is " +
                         type_name(parts[0]) + " in iteration 0 but " + type_name(parts[i]) + " in iteration " +
                         std::to_string(i));
      if (bytes) std::memcpy(out.mutable_data() + i * bytes, parts[i].data(), bytes);
    }
    return out;
  }

  static std::string type_name(const Tensor& t) { return std::string(dtype_name(t.dtype)) + dims_str(t.dims); }

  std::string label_;
  size_t own_inputs_, carried_ = 0;
  CompiledSubgraph body_;
  std::vector<ValueType> scan_types_;
};

class If final : public RunsWhilePlanning {
 public:
  If(const Node& n, int64_t opset)
      : label_(n.label()),
        own_inputs_(n.inputs().size()),
        then_(n, subgraph(n, "then_branch"), opset),
        else_(n, subgraph(n, "else_branch"), opset) {
    for (const CompiledSubgraph* branch : {&then_, &else_})
      if (branch->graph().outputs().size() != n.outputs().size())
        throw InputError("node " + label_ + ": a branch has " + std::to_string(branch->graph().outputs().size()) +
                         " outputs, the If " + std::to_string(n.outputs().size()));
  }

 private:
  std::vector<Tensor> compute(const KernelIO& io) const override {
    const bool cond = scalar_of(io.input(0), label_, "cond") != 0;
    return (cond ? then_ : else_).run(std::vector<Tensor>{}, io, own_inputs_);
  }

  std::string label_;
  size_t own_inputs_;
  CompiledSubgraph then_, else_;
};

}  // namespace

const std::vector<OpEntry>& control_flow_ops() {
  static const std::vector<OpEntry> ops = {
      {"Loop", make_kernel<Loop>, AllTypes::mask(), {}},
      {"If", make_kernel<If>, 0, {}},
  };
  return ops;
}

}  // namespace amp::cpu
