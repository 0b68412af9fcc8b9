// ModelProto -> Model (from_proto): every field ONNX defines is carried into the IR so that an
// export gives the model back. Names resolve through the scope chain, as ONNX's lexical scoping
// says: a subgraph reads its own values first, then those of the graphs around it.
#include <onnx/onnx_pb.h>

#include <unordered_set>

#include "graph/error.h"
#include "graph/onnx_import.h"
#include "graph/onnx_io.h"
#include "graph/tensor_proto.h"

namespace amp {

namespace {

DType import_elem(int32_t raw, const std::string& where) {
  if (raw != 0 && !is_valid_dtype(raw)) throw InputError(where + ": unknown element type " + std::to_string(raw));
  return static_cast<DType>(raw);
}

}  // namespace

ValueType import_value_type(const onnx::TypeProto& tp, const std::string& where) {
  auto import_shape = [](const onnx::TensorShapeProto& sp) {
    Shape s;
    for (const auto& d : sp.dim()) {
      Dim dim;
      if (d.has_dim_value())
        dim.value = d.dim_value();
      else if (d.has_dim_param())
        dim.param = d.dim_param();
      dim.denotation = d.denotation();
      s.dims.push_back(std::move(dim));
    }
    return s;
  };
  auto inner = [&](const onnx::TypeProto& t) { return std::make_shared<ValueType>(import_value_type(t, where)); };
  ValueType t;
  t.denotation = tp.denotation();
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
      t.kind = ValueType::Kind::kTensor;
      t.elem = import_elem(tp.tensor_type().elem_type(), where);
      if (tp.tensor_type().has_shape()) t.shape = import_shape(tp.tensor_type().shape());
      break;
    case onnx::TypeProto::kSparseTensorType:
      t.kind = ValueType::Kind::kSparseTensor;
      t.elem = import_elem(tp.sparse_tensor_type().elem_type(), where);
      if (tp.sparse_tensor_type().has_shape()) t.shape = import_shape(tp.sparse_tensor_type().shape());
      break;
    case onnx::TypeProto::kSequenceType:
      t.kind = ValueType::Kind::kSequence;
      if (tp.sequence_type().has_elem_type()) t.inner = inner(tp.sequence_type().elem_type());
      break;
    case onnx::TypeProto::kMapType:
      t.kind = ValueType::Kind::kMap;
      t.key = import_elem(tp.map_type().key_type(), where);
      if (tp.map_type().has_value_type()) t.inner = inner(tp.map_type().value_type());
      break;
    case onnx::TypeProto::kOptionalType:
      t.kind = ValueType::Kind::kOptional;
      if (tp.optional_type().has_elem_type()) t.inner = inner(tp.optional_type().elem_type());
      break;
    default: break;  // unset (or an opaque type, which nothing here uses): unknown
  }
  return t;
}

namespace {

std::string normalized_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

std::string node_label(const onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return "node '" + n.name() + "' (" + n.op_type() + ")";
  return "node #" + std::to_string(index) + " (" + n.op_type() + ")";
}

class ProtoImporter {
 public:
  ProtoImporter(const std::string& path, ExternalDataReader& external) : path_(path), external_(external) {}

  Model import_model(onnx::ModelProto& p);

 private:
  void import_graph(onnx::GraphProto& gp, Graph& g);
  void import_node(onnx::NodeProto& np, int index, Graph& g, const std::string& where);
  Attribute import_attribute(onnx::AttributeProto& ap, Graph& g, const std::string& where);
  std::unique_ptr<Graph> import_subgraph(onnx::GraphProto& gp, Graph* parent);
  SparseTensor import_sparse(onnx::SparseTensorProto& sp);
  ValueType import_type(const onnx::TypeProto& tp, const std::string& where) { return import_value_type(tp, where); }
  Value* define(Graph& g, const std::string& name, const std::string& where);

  std::string path_;
  ExternalDataReader& external_;
};

SparseTensor ProtoImporter::import_sparse(onnx::SparseTensorProto& sp) {
  SparseTensor s;
  s.values = tensor_from_proto(*sp.mutable_values(), path_, external_);
  s.indices = tensor_from_proto(*sp.mutable_indices(), path_, external_);
  s.dims.assign(sp.dims().begin(), sp.dims().end());
  return s;
}

std::unique_ptr<Graph> ProtoImporter::import_subgraph(onnx::GraphProto& gp, Graph* parent) {
  auto g = std::make_unique<Graph>(parent);
  import_graph(gp, *g);
  return g;
}

// Files before IR version 2 left AttributeProto.type unset; the filled field says the kind.
AttrKind inferred_kind(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return static_cast<AttrKind>(a.type());
  if (a.has_f()) return AttrKind::kFloat;
  if (a.has_i()) return AttrKind::kInt;
  if (a.has_s()) return AttrKind::kString;
  if (a.has_t()) return AttrKind::kTensor;
  if (a.has_g()) return AttrKind::kGraph;
  if (a.has_sparse_tensor()) return AttrKind::kSparseTensor;
  if (a.has_tp()) return AttrKind::kTypeProto;
  if (a.floats_size()) return AttrKind::kFloats;
  if (a.ints_size()) return AttrKind::kInts;
  if (a.strings_size()) return AttrKind::kStrings;
  if (a.tensors_size()) return AttrKind::kTensors;
  if (a.graphs_size()) return AttrKind::kGraphs;
  if (a.sparse_tensors_size()) return AttrKind::kSparseTensors;
  if (a.type_protos_size()) return AttrKind::kTypeProtos;
  return AttrKind::kUndefined;
}

Attribute ProtoImporter::import_attribute(onnx::AttributeProto& ap, Graph& g, const std::string& where) {
  Attribute a;
  a.name = ap.name();
  a.doc_string = ap.doc_string();
  a.ref_attr_name = ap.ref_attr_name();
  a.kind = inferred_kind(ap);
  const std::string at = where + ", attribute '" + a.name + "'";
  switch (a.kind) {
    case AttrKind::kFloat: a.f = ap.f(); break;
    case AttrKind::kInt: a.i = ap.i(); break;
    case AttrKind::kString: a.s = ap.s(); break;
    case AttrKind::kTensor: a.t = tensor_from_proto(*ap.mutable_t(), path_, external_); break;
    case AttrKind::kGraph: a.g = import_subgraph(*ap.mutable_g(), &g); break;
    case AttrKind::kSparseTensor: a.sparse = import_sparse(*ap.mutable_sparse_tensor()); break;
    case AttrKind::kTypeProto: a.tp = import_type(ap.tp(), at); break;
    case AttrKind::kFloats: a.floats.assign(ap.floats().begin(), ap.floats().end()); break;
    case AttrKind::kInts: a.ints.assign(ap.ints().begin(), ap.ints().end()); break;
    case AttrKind::kStrings: a.strings.assign(ap.strings().begin(), ap.strings().end()); break;
    case AttrKind::kTensors:
      for (auto& t : *ap.mutable_tensors()) a.tensors.push_back(tensor_from_proto(t, path_, external_));
      break;
    case AttrKind::kGraphs:
      for (auto& sub : *ap.mutable_graphs()) a.graphs.push_back(import_subgraph(sub, &g));
      break;
    case AttrKind::kSparseTensors:
      for (auto& s : *ap.mutable_sparse_tensors()) a.sparse_tensors.push_back(import_sparse(s));
      break;
    case AttrKind::kTypeProtos:
      for (const auto& t : ap.type_protos()) a.type_protos.push_back(import_type(t, at));
      break;
    case AttrKind::kUndefined: throw InputError(at + " has no value");
  }
  return a;
}

// A value name about to be defined in g must be new in g's scope (ONNX graphs are SSA).
Value* ProtoImporter::define(Graph& g, const std::string& name, const std::string& where) {
  if (name.empty()) throw InputError(where + " has an empty name");
  if (g.lookup(name)) throw InputError(where + ": '" + name + "' is defined more than once");
  return g.create_value(name);
}

void ProtoImporter::import_node(onnx::NodeProto& np, int index, Graph& g, const std::string& graph_where) {
  const std::string where = graph_where + ", " + node_label(np, index);
  std::vector<Value*> inputs;
  for (const auto& name : np.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    Value* v = g.lookup(name);
    if (!v) throw InputError(where + " reads '" + name + "', which is not defined before it");
    inputs.push_back(v);
  }
  // Attributes first: a subgraph sees the values defined before this node, not its outputs.
  std::vector<Attribute> attrs;
  std::unordered_set<std::string> attr_names;
  for (auto& ap : *np.mutable_attribute()) {
    if (!attr_names.insert(ap.name()).second) throw InputError(where + " has attribute '" + ap.name() + "' twice");
    attrs.push_back(import_attribute(ap, g, where));
  }
  std::vector<std::string> outputs;
  std::unordered_set<std::string> output_names;
  for (const auto& name : np.output()) {
    if (name.empty()) {
      outputs.push_back(Graph::kAbsent);
      continue;
    }
    if (g.lookup(name) || !output_names.insert(name).second)
      throw InputError(where + ": output '" + name + "' is defined more than once");
    outputs.push_back(name);
  }
  Node* n = g.add_node(np.op_type(), inputs, outputs, normalized_domain(np.domain()));
  n->name = np.name();
  n->doc_string = np.doc_string();
  for (auto& a : attrs) n->set_attr(std::move(a));
}

void ProtoImporter::import_graph(onnx::GraphProto& gp, Graph& g) {
  g.name = gp.name();
  g.doc_string = gp.doc_string();
  const std::string where = path_ + ": graph '" + g.name + "'";
  for (const auto& vi : gp.input()) {
    Value* v = define(g, vi.name(), where + ", input");
    if (vi.has_type()) v->set_type(import_type(vi.type(), where + ", input '" + vi.name() + "'"));
    v->doc_string = vi.doc_string();
    g.mark_input(v);
  }
  // IR < 4 lists initializers among the inputs too: such a value is an input and an initializer.
  for (auto& tp : *gp.mutable_initializer()) {
    const std::string at = where + ", initializer";
    Value* v = g.value(tp.name());
    if (!v || !v->is_input() || v->has_initializer()) v = define(g, tp.name(), at);
    g.set_initializer(v, tensor_from_proto(tp, path_, external_));
  }
  for (auto& sp : *gp.mutable_sparse_initializer()) {
    const std::string name = sp.values().name();
    Value* v = g.value(name);
    if (!v || !v->is_input() || v->sparse_initializer()) define(g, name, where + ", sparse initializer");
    g.add_sparse_initializer(name, import_sparse(sp));
  }
  int index = 0;
  for (auto& np : *gp.mutable_node()) import_node(np, index++, g, where);
  // value_info and graph outputs type the node outputs of this graph; inputs, initializers and
  // values of enclosing graphs keep their own declaration unless they have none.
  auto typed_here = [&](const Value* v) { return (v->producer() && v->graph() == &g) || !v->type().known(); };
  // value_info may describe any value in scope; entries for unknown names carry nothing to keep.
  std::unordered_set<const Value*> described;
  for (const auto& vi : gp.value_info()) {
    Value* v = g.lookup(vi.name());
    if (!v || !described.insert(v).second) continue;
    if (vi.has_type() && typed_here(v))
      v->set_type(import_type(vi.type(), where + ", value_info '" + vi.name() + "'"));
    if (!vi.doc_string().empty()) v->doc_string = vi.doc_string();
    g.value_info().push_back(v);
  }
  for (const auto& vi : gp.output()) {
    if (vi.name().empty()) throw InputError(where + ": an output has an empty name");
    Value* v = g.lookup(vi.name());
    if (!v) throw InputError(where + ": output '" + vi.name() + "' is not produced by the graph");
    if (vi.has_type() && typed_here(v))
      v->set_type(import_type(vi.type(), where + ", output '" + vi.name() + "'"));
    if (!vi.doc_string().empty()) v->doc_string = vi.doc_string();
    g.add_output(v);
  }
}

// ONNX's scoping lets a subgraph define a name that its enclosing graph defines only after the
// node that holds the subgraph (a CNTK Scan body's outputs carry the Scan node's own output names,
// ort__scan_1.onnx): the outer value is not visible inside, so nothing is shadowed. The IR keeps
// one value per name visible anywhere in a scope chain, so such a subgraph value takes a fresh name
// (reads are by pointer, and body outputs are matched by position, not name).
void rename_hidden_clashes(Graph& g) {
  for (Node* n : g.nodes())
    for (Graph* sub : n->subgraphs()) {
      std::vector<Value*> defined(sub->inputs().begin(), sub->inputs().end());
      for (Value* v : sub->initializers()) defined.push_back(v);
      for (Node* m : sub->nodes())
        for (Value* v : m->outputs())
          if (v) defined.push_back(v);
      for (Value* v : defined)
        if (g.lookup(v->name())) sub->rename_value(v, sub->fresh_name(v->name()));
      rename_hidden_clashes(*sub);
    }
}

std::string serialized(const google::protobuf::MessageLite& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

Model ProtoImporter::import_model(onnx::ModelProto& p) {
  Model m;
  m.path = path_;
  m.ir_version = p.ir_version();
  m.opset_imports.clear();
  for (const auto& o : p.opset_import()) m.opset_imports.push_back(OpsetImport{normalized_domain(o.domain()), o.version()});
  m.producer_name = p.producer_name();
  m.producer_version = p.producer_version();
  m.domain = p.domain();
  m.model_version = p.model_version();
  m.doc_string = p.doc_string();
  for (const auto& kv : p.metadata_props()) m.metadata_props.emplace_back(kv.key(), kv.value());
  import_graph(*p.mutable_graph(), *m.graph);
  rename_hidden_clashes(*m.graph);
  for (const auto& f : p.functions()) m.functions.push_back(serialized(f));
  for (auto& tp : *p.mutable_training_info()) {
    TrainingInfo t;
    if (tp.has_initialization()) t.initialization = import_subgraph(*tp.mutable_initialization(), m.graph.get());
    if (tp.has_algorithm()) t.algorithm = import_subgraph(*tp.mutable_algorithm(), m.graph.get());
    for (const auto& kv : tp.initialization_binding()) t.initialization_binding.emplace_back(kv.key(), kv.value());
    for (const auto& kv : tp.update_binding()) t.update_binding.emplace_back(kv.key(), kv.value());
    m.training_info.push_back(std::move(t));
  }
  return m;
}

}  // namespace

Model import_model_proto(onnx::ModelProto& proto, const std::string& path_for_errors, ExternalDataReader& external) {
  return ProtoImporter(path_for_errors, external).import_model(proto);
}

Model from_proto(onnx::ModelProto& proto, const std::string& path_for_errors, const std::string& base_dir) {
  ExternalDataReader external(path_for_errors, base_dir);
  return import_model_proto(proto, path_for_errors, external);
}

}  // namespace amp
