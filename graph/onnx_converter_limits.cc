#include "graph/onnx_converter_limits.h"

#include <onnx/version_converter/convert.h>

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "graph/error.h"

namespace amp {

namespace {

// The converter's own table: which adapters exist and which opsets each op's schema changes at.
class ConverterTable : public onnx::version_conversion::DefaultVersionConverter {
 public:
  // True when the converter adapts op at the step to `version` (from version - 1), i.e. the op's
  // schema changes there.
  bool changes_at(const std::string& op, int64_t version) const {
    auto it = all_schemas.find(op);
    if (it == all_schemas.end()) return false;
    auto domain = it->second.find("");
    return domain != it->second.end() && domain->second.count(version) > 0;
  }
  bool has_adapter(const std::string& op, int64_t version) const {
    auto it = adapters.find(op);
    if (it == adapters.end()) return false;
    auto from = it->second.find(onnx::OpSetID(version - 1).toString());
    return from != it->second.end() && from->second.count(onnx::OpSetID(version).toString()) > 0;
  }
};

const ConverterTable& converter_table() {
  static const ConverterTable table;
  return table;
}

// A dim as the converter's IR holds it: a number, or not (a symbol, or unknown), which its
// adapters compare as -1.
struct Dim {
  bool is_int;
  int64_t value;
};
using Dims = std::optional<std::vector<Dim>>;  // nullopt: no shape

class Shapes {
 public:
  explicit Shapes(const onnx::GraphProto& g) {
    auto take = [&](const onnx::ValueInfoProto& vi) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
      std::vector<Dim> dims;
      for (const auto& d : vi.type().tensor_type().shape().dim())
        dims.push_back(d.has_dim_value() ? Dim{true, d.dim_value()} : Dim{false, -1});
      dims_[vi.name()] = dims;
    };
    for (const auto& vi : g.input()) take(vi);
    for (const auto& vi : g.value_info()) take(vi);
    for (const auto& vi : g.output()) take(vi);
    for (const auto& t : g.initializer()) {
      std::vector<Dim> dims;
      for (int64_t d : t.dims()) dims.push_back({true, d});
      dims_[t.name()] = dims;
    }
  }
  Dims of(const std::string& name) const {
    auto it = dims_.find(name);
    return it == dims_.end() ? std::nullopt : Dims(it->second);
  }

 private:
  std::map<std::string, std::vector<Dim>> dims_;
};

bool all_numbers(const Dims& d) {
  if (!d) return false;
  for (const Dim& x : *d)
    if (!x.is_int) return false;
  return true;
}

int64_t int_attr(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}
bool has_attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return true;
  return false;
}

// helper.cc's assert_numpy_multibroadcastable: the shorter shape's dims against the longer one's
// trailing dims, equal (a non-number counts as -1) or one of them 1.
bool converter_broadcastable(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  const std::vector<Dim>& longer = a.size() >= b.size() ? a : b;
  const std::vector<Dim>& shorter = a.size() >= b.size() ? b : a;
  const size_t lead = longer.size() - shorter.size();
  for (size_t i = 0; i < shorter.size(); ++i) {
    const int64_t x = longer[lead + i].value, y = shorter[i].value;
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// Why the converter fails on node n at the step to `version`, or "" when it does not.
std::string failure(const onnx::NodeProto& n, int64_t version, const Shapes& shapes) {
  const std::string& op = n.op_type();
  const ConverterTable& table = converter_table();
  if (!table.changes_at(op, version)) return "";
  if (!table.has_adapter(op, version)) return "it has no adapter for " + op + " at this step";
  auto input = [&](int i) { return i < n.input_size() && !n.input(i).empty() ? shapes.of(n.input(i)) : Dims(); };
  static const std::set<std::string> kBroadcasting = {"Add", "Sub", "Mul", "Div", "Pow"};
  if (version == 7 && kBroadcasting.count(op)) {
    if (has_attr(n, "broadcast") && (!all_numbers(input(0)) || !all_numbers(input(1))))
      return "its `broadcast` adapter needs both inputs' dims as numbers";
    Dims a = input(0), b = input(1);
    if (a && b && has_attr(n, "broadcast") && has_attr(n, "axis") && int_attr(n, "axis", 0) != static_cast<int64_t>(a->size()) - static_cast<int64_t>(b->size()))
      while (b->size() < a->size()) b->push_back({true, 1});  // the Unsqueeze the adapter inserts
    if (a && b && !converter_broadcastable(*a, *b))
      return "its broadcasting check compares a symbolic dim with a number other than 1";
  }
  if (version == 7 && op == "Gemm")
    for (int i = 0; i < 3; ++i)
      if (!all_numbers(input(i))) return "its adapter needs the dims of A, B and C as numbers";
  if (version == 7 && (op == "BatchNormalization" || op == "Dropout") && has_attr(n, "is_test") && int_attr(n, "is_test", 1) == 0)
    return "its adapter takes is_test = 1 only (is_test = 0, training, has no opset 7 form it writes)";
  if (version == 9 && op == "BatchNormalization" && int_attr(n, "spatial", 1) != 1)
    return "its adapter takes spatial = 1 only";
  if (version == 14 && op == "BatchNormalization" && n.output_size() > 3)
    return "outputs 4 and 5 (the saved mean and variance) are read, and opset 14 has no such outputs";
  if (version == 7 && op == "Upsample" && (!input(0) || input(0)->size() != 4))
    return "its adapter needs the input known to be 4-D";
  if (version == 9 && op == "Scan")
    return "its adapter makes opset 8's batch axis the scan axis and leaves the body as it was, a different "
           "computation";
  return "";
}

// BatchNormalization (opsets 9-13) writes its saved mean and variance as outputs 4 and 5 in
// training; opset 14 dropped them. Unread, they go.
void drop_unread_batch_norm_outputs(onnx::GraphProto& g) {
  std::set<std::string> read;
  for (const auto& n : g.node())
    for (const auto& in : n.input()) read.insert(in);
  for (const auto& o : g.output()) read.insert(o.name());
  for (auto& n : *g.mutable_node()) {
    if (n.op_type() != "BatchNormalization" || !(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    while (n.output_size() > 3 && (n.output(n.output_size() - 1).empty() || !read.count(n.output(n.output_size() - 1))))
      n.mutable_output()->RemoveLast();
  }
}

}  // namespace

void prepare_for_converter(onnx::ModelProto& p, int64_t from, int64_t to, const std::string& path) {
  if (to <= from) return;
  onnx::GraphProto& g = *p.mutable_graph();
  if (from < 14 && to >= 14) drop_unread_batch_norm_outputs(g);
  const Shapes shapes(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    for (int64_t v = from + 1; v <= to; ++v) {
      const std::string why = failure(n, v, shapes);
      if (why.empty()) continue;
      const std::string node = n.name().empty() ? "node #" + std::to_string(i) : "node '" + n.name() + "'";
      throw InputError(path + ": " + node + " (" + n.op_type() + "): ONNX's version converter cannot take it from opset " +
                       std::to_string(v - 1) + " to " + std::to_string(v) + ": " + why);
    }
  }
}

}  // namespace amp
