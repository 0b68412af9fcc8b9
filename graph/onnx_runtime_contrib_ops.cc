#include "graph/onnx_runtime_contrib_ops.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "graph/error.h"
#include "graph/half.h"
#include "graph/onnx_value_types.h"

namespace amp {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;

bool is_ms_domain(const std::string& d) { return d == "com.microsoft"; }
bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::string input(const NodeProto& n, int i) { return i < n.input_size() ? n.input(i) : std::string(); }
std::string output(const NodeProto& n, int i) { return i < n.output_size() ? n.output(i) : std::string(); }

const AttributeProto* find_attr(const NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t int_attr(const NodeProto& n, const std::string& name, int64_t fallback) {
  const AttributeProto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}
float float_attr(const NodeProto& n, const std::string& name, float fallback) {
  const AttributeProto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}

void add_attr(NodeProto& n, const std::string& name, int64_t v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void add_attr(NodeProto& n, const std::string& name, float v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(v);
}
void add_attr(NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

class ContribExpansion {
 public:
  ContribExpansion(onnx::ModelProto& p, std::string path) : p_(p), path_(std::move(path)) {
    for (const auto& o : p.opset_import())
      if (is_default_domain(o.domain())) opset_ = o.version();
  }

  std::string run() {
    each_graph(*p_.mutable_graph(), [&](GraphProto& g) {
      for (const auto& n : g.node()) {
        names_.insert(n.name());
        for (const auto& o : n.output()) names_.insert(o);
      }
    });
    each_graph(*p_.mutable_graph(), [&](GraphProto& g) { expand(g); });
    if (counts_.empty()) return "";
    bool still_read = false;
    each_graph(*p_.mutable_graph(), [&](GraphProto& g) {
      for (const auto& n : g.node()) still_read = still_read || is_ms_domain(n.domain());
    });
    auto* imports = p_.mutable_opset_import();
    if (!still_read)
      for (int i = imports->size() - 1; i >= 0; --i)
        if (is_ms_domain(imports->Get(i).domain())) imports->DeleteSubrange(i, 1);
    // A model of contrib ops alone may import no default domain: the new nodes need one.
    if (opset_ == 0) {
      auto* o = p_.add_opset_import();
      o->set_domain("");
      o->set_version(17);
      p_.set_ir_version(std::max<int64_t>(p_.ir_version(), 8));
    }
    std::string said;
    for (const auto& [op, count] : counts_) said += (said.empty() ? "" : ", ") + op + " x" + std::to_string(count);
    return said;
  }

 private:
  template <class F>
  static void each_graph(GraphProto& g, F&& fn) {
    fn(g);
    for (auto& n : *g.mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) each_graph(*a.mutable_g(), fn);
        for (auto& sub : *a.mutable_graphs()) each_graph(sub, fn);
      }
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  [[noreturn]] void refuse(const NodeProto& n, const std::string& why) const {
    throw InputError(path_ + ": " + (n.name().empty() ? "a node of type " + n.op_type() : "node '" + n.name() + "' (" + n.op_type() + ")") +
                     " of domain com.microsoft: " + why);
  }

  // A new default-domain node named after `from`; `output` empty: a fresh value.
  std::string add(const NodeProto& from, const std::string& op, std::vector<std::string> inputs, std::string output = "",
                  NodeProto* out_node = nullptr) {
    NodeProto n;
    n.set_op_type(op);
    const std::string base = from.name().empty() ? from.output(0) : from.name();
    n.set_name(fresh(base + "/" + op));
    for (auto& i : inputs) n.add_input(i);
    if (output.empty()) output = fresh(from.output(0) + "/" + op);
    n.add_output(output);
    if (out_node) *out_node = n;
    else out_->push_back(std::move(n));
    return output;
  }

  void push(NodeProto n) { out_->push_back(std::move(n)); }

  // The element type of a name (0 when neither declared nor implied by its producers).
  int32_t declared_type(const std::string& name) const { return known_elem_type({graph_}, name); }

  int declared_rank(const std::string& name) const {
    auto dims = known_dims({graph_}, name);
    return dims ? static_cast<int>(dims->size()) : -1;
  }

  // A rank-0 constant equal to `value` in the type of `like`, as torch's exporter writes them (the
  // fusion passes look for such constants): typed when the type is declared, else a float made
  // like `like` by CastLike (opset 15 on).
  std::string scalar(const NodeProto& from, double value, const std::string& like) {
    const int32_t type = declared_type(like);
    TensorProto t;
    t.set_data_type(type == TensorProto::DOUBLE || type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16 ? type
                                                                                                                  : TensorProto::FLOAT);
    if (type == TensorProto::DOUBLE) t.add_double_data(value);
    else if (type == TensorProto::FLOAT16) t.add_int32_data(fp32_to_fp16(static_cast<float>(value)));
    else if (type == TensorProto::BFLOAT16) t.add_int32_data(fp32_to_bf16(static_cast<float>(value)));
    else t.add_float_data(static_cast<float>(value));
    const std::string name = fresh(from.output(0) + "/constant");
    t.set_name(name);
    NodeProto c;
    add(from, "Constant", {}, name, &c);
    AttributeProto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    *a->mutable_t() = t;
    push(std::move(c));
    return type == 0 ? cast_like(from, name, like) : name;
  }

  std::string cast_like(const NodeProto& from, const std::string& v, const std::string& like) {
    if (opset_ != 0 && opset_ < 15) refuse(from, "the element type of '" + like + "' is not declared (CastLike needs opset 15)");
    return add(from, "CastLike", {v, like});
  }

  // 0.5 * x * (1 + erf(x / sqrt(2))), torch 1.13's export of GELU (recognised by the fusion passes).
  // x may be a value made here: constants take the type of the node's first input, which x has.
  void gelu_erf(const NodeProto& n, const std::string& x, const std::string& y) {
    const std::string d = add(n, "Div", {x, scalar(n, 1.41421356237309504880, n.input(0))});
    const std::string e = add(n, "Erf", {d});
    const std::string plus = add(n, "Add", {e, scalar(n, 1.0, n.input(0))});
    const std::string times = add(n, "Mul", {x, plus});
    add(n, "Mul", {times, scalar(n, 0.5, n.input(0))}, y);
  }

  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
  void gelu_tanh(const NodeProto& n, const std::string& x, const std::string& y) {
    const std::string cube = add(n, "Pow", {x, scalar(n, 3.0, n.input(0))});
    const std::string cc = add(n, "Mul", {cube, scalar(n, 0.044715, n.input(0))});
    const std::string sum = add(n, "Add", {x, cc});
    const std::string scaled = add(n, "Mul", {sum, scalar(n, 0.79788456080286535588, n.input(0))});
    const std::string t = add(n, "Tanh", {scaled});
    const std::string plus = add(n, "Add", {t, scalar(n, 1.0, n.input(0))});
    const std::string times = add(n, "Mul", {x, plus});
    add(n, "Mul", {times, scalar(n, 0.5, n.input(0))}, y);
  }

  std::string dequantize(const NodeProto& n, const std::string& x, const std::string& scale, const std::string& zero_point) {
    std::vector<std::string> in = {x, scale};
    if (!zero_point.empty()) in.push_back(zero_point);
    return add(n, "DequantizeLinear", in);
  }

  void quantize(const NodeProto& n, const std::string& y, const std::string& scale, const std::string& zero_point) {
    std::vector<std::string> in = {y, scale};
    if (!zero_point.empty()) in.push_back(zero_point);
    add(n, "QuantizeLinear", in, n.output(0));
  }

  std::string transpose(const NodeProto& n, const std::string& x, const std::vector<int64_t>& perm) {
    NodeProto t;
    const std::string y = add(n, "Transpose", {x}, "", &t);
    add_attr(t, "perm", perm);
    push(std::move(t));
    return y;
  }

  // The op, with `from`'s attributes but those in `skip`.
  std::string with_attributes(const NodeProto& from, const std::string& op, std::vector<std::string> inputs,
                              const std::set<std::string>& skip, const std::string& output = "") {
    NodeProto f;
    const std::string y = add(from, op, std::move(inputs), output, &f);
    for (const auto& a : from.attribute())
      if (!skip.count(a.name())) *f.add_attribute() = a;
    push(std::move(f));
    return y;
  }

  bool quantized(const NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "QLinearAdd" || op == "QLinearMul") {
      if (n.input_size() < 7) refuse(n, "it needs at least 7 inputs");
      const std::string a = dequantize(n, n.input(0), n.input(1), input(n, 2));
      const std::string b = dequantize(n, n.input(3), n.input(4), input(n, 5));
      quantize(n, add(n, op.substr(7), {a, b}), n.input(6), input(n, 7));
      return true;
    }
    if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu") {
      if (n.input_size() < 4) refuse(n, "it needs at least 4 inputs");
      const std::string x = dequantize(n, n.input(0), n.input(1), input(n, 2));
      quantize(n, with_attributes(n, op.substr(7), {x}, {}), n.input(3), input(n, 4));
      return true;
    }
    if (op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool") {
      if (n.input_size() < 4) refuse(n, "it needs at least 4 inputs");
      const bool channels_last = int_attr(n, "channels_last", 0) != 0;
      if (channels_last && declared_rank(n.input(0)) != 4 && declared_rank(n.input(0)) != -1)
        refuse(n, "channels_last is read for 4-D inputs only");
      std::string x = dequantize(n, n.input(0), n.input(1), input(n, 2));
      if (channels_last) x = transpose(n, x, {0, 3, 1, 2});
      std::string y = with_attributes(n, op.substr(7), {x}, {"channels_last"});
      if (channels_last) y = transpose(n, y, {0, 2, 3, 1});
      quantize(n, y, n.input(3), input(n, 4));
      return true;
    }
    if (op == "QLinearConcat") {
      if (n.input_size() < 5 || (n.input_size() - 2) % 3 != 0) refuse(n, "its inputs are not Y_scale, Y_zero_point, then triples");
      std::vector<std::string> parts;
      for (int i = 2; i + 2 < n.input_size(); i += 3) parts.push_back(dequantize(n, n.input(i), n.input(i + 1), n.input(i + 2)));
      quantize(n, with_attributes(n, "Concat", parts, {}), n.input(0), n.input(1));
      return true;
    }
    return false;
  }

  bool transformer(const NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "Gelu") {
      gelu_erf(n, n.input(0), n.output(0));
      return true;
    }
    if (op == "BiasGelu") {
      if (n.input_size() < 2) refuse(n, "it needs A and B");
      gelu_erf(n, add(n, "Add", {n.input(0), n.input(1)}), n.output(0));
      return true;
    }
    if (op == "FastGelu") {
      const std::string x = input(n, 1).empty() ? n.input(0) : add(n, "Add", {n.input(0), n.input(1)});
      gelu_tanh(n, x, n.output(0));
      return true;
    }
    if (op == "QuickGelu") {  // x * sigmoid(alpha * x)
      const std::string x = n.input(0);
      const std::string s = add(n, "Sigmoid", {add(n, "Mul", {x, scalar(n, float_attr(n, "alpha", 1.702f), x)})});
      add(n, "Mul", {x, s}, n.output(0));
      return true;
    }
    if (op == "SkipLayerNormalization" || op == "SkipSimplifiedLayerNormalization") {
      const bool simplified = op == "SkipSimplifiedLayerNormalization";
      if (n.input_size() < 3) refuse(n, "it needs input, skip and gamma");
      if (!output(n, 1).empty() || !output(n, 2).empty()) refuse(n, "its mean and inverse standard deviation outputs are read");
      std::string sum = add(n, "Add", {n.input(0), n.input(1)});
      const std::string bias = simplified ? input(n, 3) : input(n, 4);
      if (!bias.empty()) sum = add(n, "Add", {sum, bias});
      if (!output(n, 3).empty()) add(n, "Identity", {sum}, output(n, 3));
      const float eps = float_attr(n, "epsilon", 1e-12f);
      if (simplified) {
        const std::string square = add(n, "Mul", {sum, sum});
        NodeProto mean;
        const std::string m = add(n, "ReduceMean", {square}, "", &mean);
        add_attr(mean, "axes", std::vector<int64_t>{-1});
        push(std::move(mean));
        const std::string rms = add(n, "Sqrt", {add(n, "Add", {m, scalar(n, eps, n.input(0))})});
        add(n, "Mul", {add(n, "Div", {sum, rms}), n.input(2)}, n.output(0));
      } else {
        std::vector<std::string> in = {sum, n.input(2)};
        if (!input(n, 3).empty()) in.push_back(n.input(3));
        NodeProto ln;
        add(n, "LayerNormalization", in, n.output(0), &ln);
        add_attr(ln, "axis", int64_t{-1});
        add_attr(ln, "epsilon", eps);
        push(std::move(ln));
      }
      return true;
    }
    if (op == "FusedMatMul") {
      if (n.input_size() < 2) refuse(n, "it needs A and B");
      if (int_attr(n, "transBatchA", 0) || int_attr(n, "transBatchB", 0)) refuse(n, "transBatchA / transBatchB are not read");
      auto operand = [&](const std::string& v, bool trans) {
        if (!trans) return v;
        const int rank = declared_rank(v);
        if (rank < 2) refuse(n, "the rank of '" + v + "', which it transposes, is not declared");
        std::vector<int64_t> perm(rank);
        for (int i = 0; i < rank; ++i) perm[i] = i;
        std::swap(perm[rank - 1], perm[rank - 2]);
        return transpose(n, v, perm);
      };
      const std::string a = operand(n.input(0), int_attr(n, "transA", 0) != 0);
      const std::string b = operand(n.input(1), int_attr(n, "transB", 0) != 0);
      const float alpha = float_attr(n, "alpha", 1.0f);
      if (alpha == 1.0f) {
        add(n, "MatMul", {a, b}, n.output(0));
      } else {
        const std::string product = add(n, "MatMul", {a, b});
        add(n, "Mul", {product, scalar(n, alpha, n.input(0))}, n.output(0));
      }
      return true;
    }
    return false;
  }

  void expand(GraphProto& g) {
    std::vector<NodeProto> nodes;
    bool changed = false;
    graph_ = &g;
    for (const auto& n : g.node()) {
      if (!is_ms_domain(n.domain()) || n.input_size() == 0 || n.output_size() == 0) {
        nodes.push_back(n);
        continue;
      }
      std::vector<NodeProto> replacement;
      out_ = &replacement;
      if (quantized(n) || transformer(n)) {
        for (auto& r : replacement) nodes.push_back(std::move(r));
        ++counts_[n.op_type()];
        changed = true;
      } else {
        nodes.push_back(n);
      }
    }
    if (!changed) return;
    g.clear_node();
    for (auto& n : nodes) *g.add_node() = std::move(n);
  }

  onnx::ModelProto& p_;
  const std::string path_;
  int64_t opset_ = 0;
  std::set<std::string> names_;
  std::map<std::string, int> counts_;
  const GraphProto* graph_ = nullptr;
  std::vector<NodeProto>* out_ = nullptr;
};

}  // namespace

std::string expand_onnx_runtime_contrib_ops(onnx::ModelProto& p, const std::string& path) {
  return ContribExpansion(p, path).run();
}

}  // namespace amp
