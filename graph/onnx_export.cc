// Model -> ModelProto and onto disk. Output is deterministic (same model, same bytes): fields are
// written in IR order and protobuf's deterministic serialization is on.
#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <climits>

#include <spdlog/spdlog.h>

#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/external_data.h"
#include "graph/onnx_io.h"
#include "graph/tensor_proto.h"

namespace amp {

namespace {

class ProtoExporter {
 public:
  ProtoExporter(ExternalDataWriter* external, size_t threshold) : external_(external), threshold_(threshold) {}
  void export_model(const Model& m, onnx::ModelProto* p);
  // Main-graph initializers of at least this many bytes written as typed graph inputs, not copied.
  size_t declare_from_bytes = 0;

 private:
  void export_graph(const Graph& g, onnx::GraphProto* gp);
  void export_attribute(const Attribute& a, onnx::AttributeProto* ap);
  void export_tensor(const Tensor& t, onnx::TensorProto* tp) { tensor_to_proto(t, tp, external_, threshold_); }
  void export_sparse(const SparseTensor& s, onnx::SparseTensorProto* sp);

  ExternalDataWriter* external_;
  size_t threshold_;
};

void export_type(const ValueType& t, onnx::TypeProto* tp) {
  auto export_shape = [](const Shape& s, onnx::TensorShapeProto* sp) {
    for (const Dim& d : s.dims) {
      auto* dp = sp->add_dim();
      if (d.value)
        dp->set_dim_value(*d.value);
      else if (!d.param.empty())
        dp->set_dim_param(d.param);
      if (!d.denotation.empty()) dp->set_denotation(d.denotation);
    }
  };
  if (!t.denotation.empty()) tp->set_denotation(t.denotation);
  switch (t.kind) {
    case ValueType::Kind::kTensor: {
      auto* tt = tp->mutable_tensor_type();
      if (t.elem != DType::kUndefined) tt->set_elem_type(static_cast<int32_t>(t.elem));
      if (t.shape) export_shape(*t.shape, tt->mutable_shape());
      break;
    }
    case ValueType::Kind::kSparseTensor: {
      auto* st = tp->mutable_sparse_tensor_type();
      if (t.elem != DType::kUndefined) st->set_elem_type(static_cast<int32_t>(t.elem));
      if (t.shape) export_shape(*t.shape, st->mutable_shape());
      break;
    }
    case ValueType::Kind::kSequence: {
      auto* seq = tp->mutable_sequence_type();
      if (t.inner) export_type(*t.inner, seq->mutable_elem_type());
      break;
    }
    case ValueType::Kind::kMap: {
      auto* map = tp->mutable_map_type();
      if (t.key != DType::kUndefined) map->set_key_type(static_cast<int32_t>(t.key));
      if (t.inner) export_type(*t.inner, map->mutable_value_type());
      break;
    }
    case ValueType::Kind::kOptional: {
      auto* opt = tp->mutable_optional_type();
      if (t.inner) export_type(*t.inner, opt->mutable_elem_type());
      break;
    }
    case ValueType::Kind::kUnknown: break;
  }
}

void export_value_info(const Value* v, onnx::ValueInfoProto* vi) {
  vi->set_name(v->name());
  if (v->type().known() || !v->type().denotation.empty()) export_type(v->type(), vi->mutable_type());
  if (!v->doc_string.empty()) vi->set_doc_string(v->doc_string);
}

void ProtoExporter::export_sparse(const SparseTensor& s, onnx::SparseTensorProto* sp) {
  export_tensor(s.values, sp->mutable_values());
  export_tensor(s.indices, sp->mutable_indices());
  for (int64_t d : s.dims) sp->add_dims(d);
}

void ProtoExporter::export_attribute(const Attribute& a, onnx::AttributeProto* ap) {
  ap->set_name(a.name);
  if (!a.doc_string.empty()) ap->set_doc_string(a.doc_string);
  if (!a.ref_attr_name.empty()) ap->set_ref_attr_name(a.ref_attr_name);
  ap->set_type(static_cast<onnx::AttributeProto::AttributeType>(a.kind));
  switch (a.kind) {
    case AttrKind::kFloat: ap->set_f(a.f); break;
    case AttrKind::kInt: ap->set_i(a.i); break;
    case AttrKind::kString: ap->set_s(a.s); break;
    case AttrKind::kTensor: export_tensor(a.t, ap->mutable_t()); break;
    case AttrKind::kGraph:
      if (a.g) export_graph(*a.g, ap->mutable_g());
      break;
    case AttrKind::kSparseTensor: export_sparse(a.sparse, ap->mutable_sparse_tensor()); break;
    case AttrKind::kTypeProto: export_type(a.tp, ap->mutable_tp()); break;
    case AttrKind::kFloats: ap->mutable_floats()->Add(a.floats.begin(), a.floats.end()); break;
    case AttrKind::kInts: ap->mutable_ints()->Add(a.ints.begin(), a.ints.end()); break;
    case AttrKind::kStrings:
      for (const auto& s : a.strings) ap->add_strings(s);
      break;
    case AttrKind::kTensors:
      for (const auto& t : a.tensors) export_tensor(t, ap->add_tensors());
      break;
    case AttrKind::kGraphs:
      for (const auto& g : a.graphs) export_graph(*g, ap->add_graphs());
      break;
    case AttrKind::kSparseTensors:
      for (const auto& s : a.sparse_tensors) export_sparse(s, ap->add_sparse_tensors());
      break;
    case AttrKind::kTypeProtos:
      for (const auto& t : a.type_protos) export_type(t, ap->add_type_protos());
      break;
    case AttrKind::kUndefined: break;
  }
}

void ProtoExporter::export_graph(const Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name);
  if (!g.doc_string.empty()) gp->set_doc_string(g.doc_string);
  for (const Value* v : g.inputs()) export_value_info(v, gp->add_input());
  for (const Value* v : g.initializers()) {
    if (declare_from_bytes > 0 && !g.parent() && v->initializer().nbytes() >= declare_from_bytes) {
      export_value_info(v, gp->add_input());
      continue;
    }
    auto* tp = gp->add_initializer();
    export_tensor(v->initializer(), tp);
    tp->set_name(v->name());  // the value may have been renamed since the tensor was attached
  }
  for (const Value* v : g.sparse_initializers()) {
    auto* sp = gp->add_sparse_initializer();
    export_sparse(*v->sparse_initializer(), sp);
    sp->mutable_values()->set_name(v->name());
  }
  for (const Node* n : g.nodes()) {
    auto* np = gp->add_node();
    for (const Value* v : n->inputs()) np->add_input(v ? v->name() : std::string());
    for (const Value* v : n->outputs()) np->add_output(v ? v->name() : std::string());
    if (!n->name.empty()) np->set_name(n->name);
    np->set_op_type(n->op_type());
    if (!n->domain().empty()) np->set_domain(n->domain());
    if (!n->doc_string.empty()) np->set_doc_string(n->doc_string);
    for (const auto& a : n->attributes()) export_attribute(a, np->add_attribute());
  }
  for (const Value* v : g.outputs()) {
    export_value_info(v, gp->add_output());
    // A model read with such an output (an If whose branches return different ranks) is written
    // with it: ONNX Runtime runs it, ONNX's checker, which wants the shape of every output of the
    // main graph (not of a subgraph), does not.
    if (!g.parent() && v->type().kind == ValueType::Kind::kTensor && !v->type().shape)
      spdlog::warn("graph output '{}' has no fixed rank: written without a shape, which ONNX's checker refuses (ONNX "
                   "Runtime accepts it)", v->name());
  }
  for (const Value* v : g.value_info()) export_value_info(v, gp->add_value_info());
}

void ProtoExporter::export_model(const Model& m, onnx::ModelProto* p) {
  p->set_ir_version(m.ir_version);
  for (const auto& o : m.opset_imports) {
    auto* op = p->add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!m.producer_name.empty()) p->set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) p->set_producer_version(m.producer_version);
  if (!m.domain.empty()) p->set_domain(m.domain);
  if (m.model_version != 0) p->set_model_version(m.model_version);
  if (!m.doc_string.empty()) p->set_doc_string(m.doc_string);
  for (const auto& kv : m.metadata_props) {
    auto* e = p->add_metadata_props();
    e->set_key(kv.first);
    e->set_value(kv.second);
  }
  export_graph(*m.graph, p->mutable_graph());
  for (const auto& f : m.functions)
    if (!p->add_functions()->ParseFromString(f)) throw Error("internal: a stored FunctionProto does not parse");
  for (const auto& t : m.training_info) {
    auto* tp = p->add_training_info();
    if (t.initialization) export_graph(*t.initialization, tp->mutable_initialization());
    if (t.algorithm) export_graph(*t.algorithm, tp->mutable_algorithm());
    for (const auto& kv : t.initialization_binding) {
      auto* e = tp->add_initialization_binding();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
    for (const auto& kv : t.update_binding) {
      auto* e = tp->add_update_binding();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
  }
}

// Protobuf cannot write (or read) a message over 2 GB; such models need external data.
void check_size(const onnx::ModelProto& p, const std::string& what) {
  const size_t size = p.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX))
    throw Error(what + ": the model is " + std::to_string(size) +
                " bytes, over protobuf's 2 GB limit; save it with external data (SaveOptions.external_threshold)");
}

// Feeds protobuf's output straight into the file, so the serialized model is never held whole.
class AtomicFileStream final : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit AtomicFileStream(AtomicFile& file) : file_(file) {}
  bool Write(const void* buffer, int size) override {
    try {
      file_.write(buffer, static_cast<size_t>(size));
      return true;
    } catch (const Error& e) {
      error_ = e.what();
      return false;
    }
  }
  const std::string& error() const { return error_; }

 private:
  AtomicFile& file_;
  std::string error_;
};

}  // namespace

onnx::ModelProto to_proto(const Model& m) {
  onnx::ModelProto p;
  ProtoExporter(nullptr, 0).export_model(m, &p);
  return p;
}

onnx::ModelProto to_shape_proto(const Model& m) {
  onnx::ModelProto p;
  ProtoExporter exporter(nullptr, 0);
  exporter.declare_from_bytes = 4096;
  exporter.export_model(m, &p);
  return p;
}

std::string serialize_model(const Model& m) {
  onnx::ModelProto p = to_proto(m);
  check_size(p, m.path.empty() ? std::string("model") : m.path);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    p.SerializeWithCachedSizes(&coded);
  }
  return bytes;
}

void save_model(const Model& m, const std::string& path, const SaveOptions& options) {
  std::unique_ptr<ExternalDataWriter> external;
  if (options.external_threshold > 0) external = std::make_unique<ExternalDataWriter>(path);
  onnx::ModelProto p;
  ProtoExporter(external.get(), options.external_threshold).export_model(m, &p);
  check_size(p, path);
  AtomicFile file(path);
  AtomicFileStream sink(file);
  {
    google::protobuf::io::CopyingOutputStreamAdaptor out(&sink);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    p.SerializeWithCachedSizes(&coded);
    coded.Trim();
    if (coded.HadError() || !out.Flush()) throw Error(path + ": cannot write the model: " + sink.error());
  }
  // Both files are complete before either replaces an older pair, so a write that fails (a full
  // disk) leaves the old model and its data as they were; the data goes first, so a model file
  // never names data that is not there yet.
  if (external && !external->empty()) external->commit();
  file.commit();
}

}  // namespace amp
