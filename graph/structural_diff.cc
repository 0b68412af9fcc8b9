// structural_diff: the first difference between two models, as a path to it and the two sides.
// Values are compared by name and type (not by address), tensors by bytes, floats bitwise so that
// NaN attributes compare equal to themselves.
#include <cstring>
#include <sstream>

#include "graph/onnx_io.h"

namespace amp {

namespace {

template <class T>
std::string text(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string text(const std::string& s) { return "'" + s + "'"; }
std::string text(const ValueType& t) { return t.str(); }

class Differ {
 public:
  std::string result;

  bool done() const { return !result.empty(); }

  template <class T>
  void same(const std::string& where, const T& a, const T& b) {
    if (!done() && !(a == b)) result = where + ": " + text(a) + " vs " + text(b);
  }
  void same_bits(const std::string& where, float a, float b) {
    if (!done() && std::memcmp(&a, &b, sizeof a) != 0) result = where + ": " + text(a) + " vs " + text(b);
  }
  bool same_count(const std::string& where, size_t a, size_t b) {
    same(where + " count", a, b);
    return !done();
  }

  void tensor(const std::string& where, const Tensor& a, const Tensor& b) {
    same(where + " name", a.name, b.name);
    same(where + " doc_string", a.doc_string, b.doc_string);
    same(where + " dtype", std::string(dtype_name(a.dtype)), std::string(dtype_name(b.dtype)));
    same(where + " dims", Shape::of(a.dims).str(), Shape::of(b.dims).str());
    if (!done() && !a.same_contents(b)) result = where + ": contents differ";
  }

  void sparse(const std::string& where, const SparseTensor& a, const SparseTensor& b) {
    tensor(where + " values", a.values, b.values);
    tensor(where + " indices", a.indices, b.indices);
    same(where + " dims", Shape::of(a.dims).str(), Shape::of(b.dims).str());
  }

  void value(const std::string& where, const Value* a, const Value* b) {
    if (done()) return;
    if (!a || !b) {
      if (a || b) result = where + ": " + (a ? a->name() : "(absent)") + " vs " + (b ? b->name() : "(absent)");
      return;
    }
    same(where + " name", a->name(), b->name());
    same(where + " '" + a->name() + "' type", a->type(), b->type());
    same(where + " '" + a->name() + "' doc_string", a->doc_string, b->doc_string);
  }

  void values(const std::string& where, const std::vector<Value*>& a, const std::vector<Value*>& b) {
    if (!same_count(where, a.size(), b.size())) return;
    for (size_t i = 0; i < a.size() && !done(); ++i) value(where + " #" + std::to_string(i), a[i], b[i]);
  }

  void attribute(const std::string& where, const Attribute& a, const Attribute& b) {
    same(where + " kind", std::string(attr_kind_name(a.kind)), std::string(attr_kind_name(b.kind)));
    same(where + " doc_string", a.doc_string, b.doc_string);
    same(where + " ref_attr_name", a.ref_attr_name, b.ref_attr_name);
    if (done()) return;
    switch (a.kind) {
      case AttrKind::kFloat: same_bits(where, a.f, b.f); break;
      case AttrKind::kInt: same(where, a.i, b.i); break;
      case AttrKind::kString: same(where, a.s, b.s); break;
      case AttrKind::kTensor: tensor(where, a.t, b.t); break;
      case AttrKind::kGraph:
        if (a.g && b.g)
          graph(where + " > ", *a.g, *b.g);
        else
          same(where + " has a graph", a.g != nullptr, b.g != nullptr);
        break;
      case AttrKind::kSparseTensor: sparse(where, a.sparse, b.sparse); break;
      case AttrKind::kTypeProto: same(where, a.tp, b.tp); break;
      case AttrKind::kFloats:
        if (same_count(where, a.floats.size(), b.floats.size()))
          for (size_t i = 0; i < a.floats.size(); ++i) same_bits(where + "[" + std::to_string(i) + "]", a.floats[i], b.floats[i]);
        break;
      case AttrKind::kInts:
        if (same_count(where, a.ints.size(), b.ints.size()))
          for (size_t i = 0; i < a.ints.size(); ++i) same(where + "[" + std::to_string(i) + "]", a.ints[i], b.ints[i]);
        break;
      case AttrKind::kStrings:
        if (same_count(where, a.strings.size(), b.strings.size()))
          for (size_t i = 0; i < a.strings.size(); ++i) same(where + "[" + std::to_string(i) + "]", a.strings[i], b.strings[i]);
        break;
      case AttrKind::kTensors:
        if (same_count(where, a.tensors.size(), b.tensors.size()))
          for (size_t i = 0; i < a.tensors.size(); ++i) tensor(where + "[" + std::to_string(i) + "]", a.tensors[i], b.tensors[i]);
        break;
      case AttrKind::kGraphs:
        if (same_count(where, a.graphs.size(), b.graphs.size()))
          for (size_t i = 0; i < a.graphs.size() && !done(); ++i)
            graph(where + "[" + std::to_string(i) + "] > ", *a.graphs[i], *b.graphs[i]);
        break;
      case AttrKind::kSparseTensors:
        if (same_count(where, a.sparse_tensors.size(), b.sparse_tensors.size()))
          for (size_t i = 0; i < a.sparse_tensors.size(); ++i)
            sparse(where + "[" + std::to_string(i) + "]", a.sparse_tensors[i], b.sparse_tensors[i]);
        break;
      case AttrKind::kTypeProtos:
        if (same_count(where, a.type_protos.size(), b.type_protos.size()))
          for (size_t i = 0; i < a.type_protos.size(); ++i) same(where + "[" + std::to_string(i) + "]", a.type_protos[i], b.type_protos[i]);
        break;
      case AttrKind::kUndefined: break;
    }
  }

  void node(const std::string& where, const Node& a, const Node& b) {
    same(where + " op_type", a.op_type(), b.op_type());
    same(where + " domain", a.domain(), b.domain());
    same(where + " name", a.name, b.name);
    same(where + " doc_string", a.doc_string, b.doc_string);
    values(where + " input", a.inputs(), b.inputs());
    values(where + " output", a.outputs(), b.outputs());
    if (!same_count(where + " attribute", a.attributes().size(), b.attributes().size())) return;
    for (size_t i = 0; i < a.attributes().size() && !done(); ++i) {
      const Attribute& x = a.attributes()[i];
      const Attribute& y = b.attributes()[i];
      same(where + " attribute #" + std::to_string(i) + " name", x.name, y.name);
      attribute(where + " attribute '" + x.name + "'", x, y);
    }
  }

  void graph(const std::string& prefix, const Graph& a, const Graph& b) {
    const std::string where = prefix + "graph '" + a.name + "'";
    same(where + " name", a.name, b.name);
    same(where + " doc_string", a.doc_string, b.doc_string);
    values(where + " input", a.inputs(), b.inputs());
    values(where + " output", a.outputs(), b.outputs());
    values(where + " initializer", a.initializers(), b.initializers());
    if (done()) return;
    for (size_t i = 0; i < a.initializers().size() && !done(); ++i)
      tensor(where + " initializer '" + a.initializers()[i]->name() + "'", a.initializers()[i]->initializer(),
             b.initializers()[i]->initializer());
    values(where + " sparse initializer", a.sparse_initializers(), b.sparse_initializers());
    for (size_t i = 0; i < a.sparse_initializers().size() && !done(); ++i)
      sparse(where + " sparse initializer '" + a.sparse_initializers()[i]->name() + "'",
             *a.sparse_initializers()[i]->sparse_initializer(), *b.sparse_initializers()[i]->sparse_initializer());
    values(where + " value_info", a.value_info(), b.value_info());
    if (!same_count(where + " node", a.num_nodes(), b.num_nodes())) return;
    auto x = a.nodes().begin(), y = b.nodes().begin();
    for (size_t i = 0; x != a.nodes().end() && !done(); ++x, ++y, ++i) node(where + " node #" + std::to_string(i) + " " + (*x)->label(), **x, **y);
  }

  void pairs(const std::string& where, const std::vector<std::pair<std::string, std::string>>& a,
             const std::vector<std::pair<std::string, std::string>>& b) {
    if (!same_count(where, a.size(), b.size())) return;
    for (size_t i = 0; i < a.size(); ++i) {
      same(where + " #" + std::to_string(i) + " key", a[i].first, b[i].first);
      same(where + " '" + a[i].first + "'", a[i].second, b[i].second);
    }
  }

  void optional_graph(const std::string& where, const Graph* a, const Graph* b) {
    same(where + " present", a != nullptr, b != nullptr);
    if (a && b && !done()) graph(where + " > ", *a, *b);
  }

  void model(const Model& a, const Model& b) {
    same("ir_version", a.ir_version, b.ir_version);
    if (same_count("opset_import", a.opset_imports.size(), b.opset_imports.size()))
      for (size_t i = 0; i < a.opset_imports.size(); ++i) {
        same("opset_import #" + std::to_string(i) + " domain", a.opset_imports[i].domain, b.opset_imports[i].domain);
        same("opset_import '" + a.opset_imports[i].domain + "' version", a.opset_imports[i].version, b.opset_imports[i].version);
      }
    same("producer_name", a.producer_name, b.producer_name);
    same("producer_version", a.producer_version, b.producer_version);
    same("domain", a.domain, b.domain);
    same("model_version", a.model_version, b.model_version);
    same("doc_string", a.doc_string, b.doc_string);
    pairs("metadata_props", a.metadata_props, b.metadata_props);
    if (same_count("functions", a.functions.size(), b.functions.size()))
      for (size_t i = 0; i < a.functions.size(); ++i)
        if (!done() && a.functions[i] != b.functions[i]) result = "function #" + std::to_string(i) + ": contents differ";
    if (!done()) graph("", *a.graph, *b.graph);
    if (!same_count("training_info", a.training_info.size(), b.training_info.size())) return;
    for (size_t i = 0; i < a.training_info.size() && !done(); ++i) {
      const std::string where = "training_info #" + std::to_string(i);
      optional_graph(where + " initialization", a.training_info[i].initialization.get(), b.training_info[i].initialization.get());
      optional_graph(where + " algorithm", a.training_info[i].algorithm.get(), b.training_info[i].algorithm.get());
      pairs(where + " initialization_binding", a.training_info[i].initialization_binding, b.training_info[i].initialization_binding);
      pairs(where + " update_binding", a.training_info[i].update_binding, b.training_info[i].update_binding);
    }
  }
};

}  // namespace

std::string structural_diff(const Model& a, const Model& b) {
  Differ d;
  d.model(a, b);
  return d.result;
}

}  // namespace amp
