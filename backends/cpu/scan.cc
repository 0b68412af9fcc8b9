// Scan (opset 9-17; CNTK's recurrent models, ort__scan_1.onnx): the body graph run once per
// slice of the scan inputs, the states carried from one iteration to the next, each scan output
// stacked along its axis. The body is compiled once, as a model of its own, by this backend
// (cpu/subgraph.h: its inputs are the states, one slice of each scan input, then the values it
// reads from the graphs around it, which arrive as this node's inputs after its own).
// scan_input_axes / _directions and scan_output_axes / _directions as ONNX says: a reverse input
// is read from its last slice, a reverse output written from its last.
#include <cstring>
#include <unordered_map>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/subgraph.h"

namespace amp::cpu {
namespace {

// The element bytes of x as [outer, extent, inner] along `axis`.
struct AxisSplit {
  int64_t outer, extent, inner;
  AxisSplit(const std::vector<int64_t>& dims, size_t axis)
      : outer(product(dims, 0, axis)), extent(dims[axis]), inner(product(dims, axis + 1)) {}
};

class Scan final : public Kernel {
 public:
  Scan(const Node& n, int64_t opset)
      : label_(n.label()),
        scan_inputs_(n.attr_int("num_scan_inputs", 0)),
        input_axes_(n.attr_ints("scan_input_axes")),
        input_directions_(n.attr_ints("scan_input_directions")),
        output_axes_(n.attr_ints("scan_output_axes")),
        output_directions_(n.attr_ints("scan_output_directions")),
        opset_(opset),
        own_inputs_(n.inputs().size()),
        body_(n, body_of(n), opset) {
    if (scan_inputs_ <= 0 || scan_inputs_ > static_cast<int64_t>(own_inputs_))
      throw InputError("node " + label_ + ": num_scan_inputs must be in [1, inputs]");
    states_ = own_inputs_ - static_cast<size_t>(scan_inputs_);
    if (body_.own_inputs() != own_inputs_)
      throw InputError("node " + label_ + ": its body has " + std::to_string(body_.own_inputs()) + " inputs, expected " +
                       std::to_string(own_inputs_));
    if (body_.graph().outputs().size() < states_)
      throw InputError("node " + label_ + ": its body has fewer outputs than the Scan has states");
  }

  size_t infer(KernelIO& io) const override {
    const int64_t length = sequence_length(io);
    // The body's output dims for these input dims, by the ops' shape rules.
    std::unordered_map<const Value*, TensorFacts> facts;
    const Graph& g = body_.graph();
    for (size_t i = 0; i < g.inputs().size(); ++i) {  // own inputs, then the enclosing values
      const View& v = io.input(i);
      std::vector<int64_t> dims = v.dims;
      if (i >= states_ && i < own_inputs_) dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(input_axis(io, i)));
      TensorFacts f = TensorFacts::of(v.dtype, dims);
      if (i >= own_inputs_ && body_.enclosing_initializer(i - own_inputs_)) f.value = view_of(v);
      facts[g.inputs()[i]] = std::move(f);
    }
    for (const Value* v : g.initializers()) {
      TensorFacts f = TensorFacts::of(v->initializer().dtype, v->initializer().dims);
      f.value = v->initializer();
      facts[v] = std::move(f);
    }
    for (const Node* n : g.nodes()) {
      std::vector<const TensorFacts*> in;
      for (const Value* v : n->inputs()) in.push_back(v ? &facts.at(v) : nullptr);
      std::vector<TensorFacts> out(n->outputs().size());
      for (size_t k = 0; k < out.size(); ++k)
        if (n->outputs()[k]) out[k].dtype = n->outputs()[k]->dtype();
      auto inferred = infer_output_facts(*n, opset_, in, std::move(out));
      if (!inferred) throw InputError("node " + label_ + ": its body's node " + n->label() + " has no shape rule");
      for (size_t k = 0; k < inferred->size(); ++k)
        if (n->outputs()[k]) facts[n->outputs()[k]] = std::move((*inferred)[k]);
    }
    for (size_t k = 0; k < io.out.size(); ++k) {
      if (!io.has_out(k)) continue;
      const TensorFacts& f = facts.at(g.outputs()[k]);
      const std::optional<std::vector<int64_t>> dims = f.dims();
      if (!dims) throw InputError("node " + label_ + ": the dims of its body's output " + g.outputs()[k]->name() + " do not follow");
      View& out = io.output(k);
      out.dtype = f.dtype;
      out.dims = *dims;
      if (k >= states_) out.dims.insert(out.dims.begin() + static_cast<std::ptrdiff_t>(output_axis(k, out.dims.size() + 1)), length);
    }
    return 0;
  }

  void run(KernelIO& io, const RunContext&) const override {
    const int64_t length = sequence_length(io);
    std::vector<Tensor> states;
    for (size_t i = 0; i < states_; ++i) states.push_back(view_of(io.input(i)));
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Tensor> own = states;
      for (size_t i = states_; i < own_inputs_; ++i) {
        const View& x = io.input(i);
        const size_t axis = input_axis(io, i);
        const bool reverse = direction(input_directions_, i - states_);
        own.push_back(slice(x, axis, reverse ? length - 1 - t : t));
      }
      std::vector<Tensor> outs = body_.run(own, io, own_inputs_);
      for (size_t k = 0; k < states_; ++k) states[k] = std::move(outs[k]);
      for (size_t k = states_; k < outs.size(); ++k) {
        if (!io.has_out(k)) continue;
        View& y = io.output(k);
        const size_t axis = output_axis(k, y.rank());
        const bool reverse = direction(output_directions_, k - states_);
        put_slice(outs[k], y, axis, reverse ? length - 1 - t : t);
      }
    }
    for (size_t k = 0; k < states_; ++k)
      if (io.has_out(k)) {
        if (states[k].nbytes() != io.output(k).nbytes())
          throw InputError("node " + label_ + ": state " + std::to_string(k) + " changed its size in the body");
        if (states[k].nbytes()) std::memcpy(io.output(k).data, states[k].data(), states[k].nbytes());
      }
  }

 private:
  static const Graph& body_of(const Node& n) {
    const std::vector<Graph*> bodies = n.subgraphs();
    if (bodies.size() != 1) throw InputError("node " + n.label() + ": Scan needs one body graph");
    return *bodies[0];
  }

  static bool direction(const std::vector<int64_t>& list, size_t i) { return i < list.size() && list[i] != 0; }

  size_t input_axis(const KernelIO& io, size_t i) const {
    const size_t j = i - states_;
    const int64_t axis = j < input_axes_.size() ? input_axes_[j] : 0;
    return static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(io.input(i).rank())));
  }
  size_t output_axis(size_t k, size_t rank) const {
    const size_t j = k - states_;
    const int64_t axis = j < output_axes_.size() ? output_axes_[j] : 0;
    return static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(rank)));
  }

  int64_t sequence_length(const KernelIO& io) const {
    int64_t length = -1;
    for (size_t i = states_; i < own_inputs_; ++i) {
      const int64_t l = io.input(i).dims[input_axis(io, i)];
      if (length >= 0 && l != length)
        throw InputError("node " + label_ + ": scan inputs of different lengths (" + std::to_string(length) + " and " +
                         std::to_string(l) + ")");
      length = l;
    }
    return length;
  }

  static Tensor slice(const View& x, size_t axis, int64_t index) {
    const AxisSplit s(x.dims, axis);
    std::vector<int64_t> dims = x.dims;
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
    Tensor t(x.dtype, dims);
    const size_t row = static_cast<size_t>(s.inner) * dtype_size(x.dtype);
    const auto* in = static_cast<const uint8_t*>(x.data);
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(t.mutable_data() + o * row, in + (o * s.extent + index) * row, row);
    return t;
  }

  void put_slice(const Tensor& part, View& y, size_t axis, int64_t index) const {
    const AxisSplit s(y.dims, axis);
    if (part.numel() != s.outer * s.inner || part.dtype != y.dtype)
      throw InputError("node " + label_ + ": a scan output's slice changed its shape or type between iterations");
    const size_t row = static_cast<size_t>(s.inner) * dtype_size(y.dtype);
    auto* out = static_cast<uint8_t*>(y.data);
    for (int64_t o = 0; o < s.outer; ++o) std::memcpy(out + (o * s.extent + index) * row, part.data() + o * row, row);
  }

  std::string label_;
  int64_t scan_inputs_;
  std::vector<int64_t> input_axes_, input_directions_, output_axes_, output_directions_;
  int64_t opset_;
  size_t own_inputs_, states_ = 0;
  CompiledSubgraph body_;
};

}  // namespace

const std::vector<OpEntry>& scan_ops() {
  static const std::vector<OpEntry> ops = {
      {"Scan", make_kernel<Scan>, AllTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
