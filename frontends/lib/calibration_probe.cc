#include "frontends/lib/calibration_probe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "frontends/lib/model_copy.h"
#include "graph/half.h"

namespace amp {


std::vector<NodeTwin> add_low_precision_twins(Model& m, const std::vector<const NodeDecision*>& nodes, DType low) {
  Graph& g = *m.graph;
  std::map<std::string, Node*> by_name;
  for (Node* n : g.nodes()) by_name[n->name] = n;
  std::map<const Value*, Value*> rounded;  // one Cast per fp32 value, shared by the twins reading it
  auto round_once = [&](Value* v) {
    auto it = rounded.find(v);
    if (it != rounded.end()) return it->second;
    Node* c = g.add_node("Cast", {v}, {g.fresh_name(v->name() + "_probe_rounded")});
    c->name = c->output(0)->name();
    c->set_attr(Attribute::of_int("to", static_cast<int64_t>(low)));
    ValueType t = v->type();
    t.elem = low;
    c->output(0)->set_type(t);
    return rounded[v] = c->output(0);
  };
  std::vector<NodeTwin> twins;
  for (const NodeDecision* nd : nodes) {
    auto it = by_name.find(nd->name);
    if (it == by_name.end() || !it->second->subgraphs().empty()) continue;
    Node* n = it->second;
    std::vector<Value*> inputs(n->inputs());
    for (size_t i : nd->typing.data_inputs)
      if (inputs[i] && inputs[i]->dtype() == DType::kFloat) inputs[i] = round_once(inputs[i]);
    std::vector<std::string> names;
    for (const Value* v : n->outputs()) names.push_back(v ? g.fresh_name(v->name() + "_probe") : Graph::kAbsent);
    Node* twin = g.add_node(n->op_type(), inputs, names, n->domain());
    twin->name = g.fresh_name(n->name + "_probe");
    for (const Attribute& a : n->attributes()) twin->set_attr(a.copy_without_graphs());
    NodeTwin t{n->name, n->op_type(), {}, {}};
    for (size_t k = 0; k < n->outputs().size(); ++k) {
      if (!n->output(k)) continue;
      ValueType type = n->output(k)->type();
      const bool data = std::find(nd->typing.data_outputs.begin(), nd->typing.data_outputs.end(), k) !=
                        nd->typing.data_outputs.end();
      if (data && type.elem == DType::kFloat) type.elem = low;
      twin->output(k)->set_type(type);
      if (!data || type.elem != low) continue;
      t.fp32_outputs.push_back(n->output(k)->name());
      t.low_outputs.push_back(twin->output(k)->name());
      // Graph outputs: a backend plans the values a model returns (a twin's are read by nothing).
      for (Value* v : {n->output(k), twin->output(k)})
        if (!v->is_output()) g.add_output(v);
    }
    if (!t.low_outputs.empty()) twins.push_back(std::move(t));
  }
  return twins;
}

double TensorDifference::relative() const {
  if (overflow > 0) return std::numeric_limits<double>::infinity();
  return max_abs_ref > 0 ? max_abs_error / max_abs_ref : max_abs_error;
}

namespace {

// fp32, fp16 and bf16 values read as floats (exactly): one switch per tensor instead of one per
// element (Tensor::element), a third of the measuring time on ResNet-18's 4.9 million compared values.
bool widens_to_float(DType t) { return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16; }

const float* as_floats(const Tensor& t, int64_t n, std::vector<float>& scratch) {
  if (t.dtype == DType::kFloat) return t.as<float>();
  scratch.resize(static_cast<size_t>(n));
  const uint16_t* bits = t.as<uint16_t>();
  if (t.dtype == DType::kFloat16)
    for (int64_t i = 0; i < n; ++i) scratch[i] = fp16_to_fp32(bits[i]);
  else
    for (int64_t i = 0; i < n; ++i) scratch[i] = bf16_to_fp32(bits[i]);
  return scratch.data();
}

template <class Get>
void accumulate(TensorDifference& d, int64_t n, Get get) {
  for (int64_t i = 0; i < n; ++i) {
    const auto [a, b] = get(i);
    if (!std::isfinite(a)) continue;
    ++d.values;
    d.max_abs_ref = std::max(d.max_abs_ref, std::fabs(a));
    if (!std::isfinite(b)) {
      ++d.overflow;
      continue;
    }
    d.underflow += a != 0 && b == 0;
    d.max_abs_error = std::max(d.max_abs_error, std::fabs(a - b));
  }
}

}  // namespace

TensorDifference tensor_difference(const Tensor& ref, const Tensor& y) {
  TensorDifference d;
  const int64_t n = std::min(ref.numel(), y.numel());
  if (widens_to_float(ref.dtype) && widens_to_float(y.dtype)) {
    std::vector<float> ref_scratch, y_scratch;
    const float* a = as_floats(ref, n, ref_scratch);
    const float* b = as_floats(y, n, y_scratch);
    accumulate(d, n, [&](int64_t i) { return std::pair<double, double>(a[i], b[i]); });
  } else {
    accumulate(d, n, [&](int64_t i) { return std::pair<double, double>(ref.element(i), y.element(i)); });
  }
  return d;
}

int64_t product_macs(const Node& n, const std::vector<int64_t>& out, const std::vector<int64_t>& a,
                     const std::vector<int64_t>& b) {
  if (!n.domain().empty()) return 0;
  const std::string& op = n.op_type();
  auto numel = [](const std::vector<int64_t>& d, size_t from = 0) {
    int64_t e = 1;
    for (size_t i = from; i < d.size(); ++i) e *= d[i];
    return e;
  };
  // Conv: every output value sums over Cin/group x kernel taps, weight dims [Cout, Cin/group, k...].
  if (op == "Conv" && b.size() >= 2) return numel(out) * numel(b, 1);
  // ConvTranspose: every input value scatters into Cout/group x kernel taps, weight [Cin, Cout/group, k...].
  if (op == "ConvTranspose" && b.size() >= 2) return numel(a) * numel(b, 1);
  if (op == "MatMul" && !a.empty()) return numel(out) * a.back();
  if (op == "Gemm" && a.size() == 2) return numel(out) * (n.attr_int("transA", 0) ? a[0] : a[1]);
  return 0;
}

}  // namespace amp
