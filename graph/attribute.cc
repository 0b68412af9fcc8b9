#include "graph/attribute.h"

#include "graph/graph.h"

namespace amp {

Attribute::Attribute() = default;
Attribute::Attribute(Attribute&&) noexcept = default;
Attribute& Attribute::operator=(Attribute&&) noexcept = default;
Attribute::~Attribute() = default;

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kFloat: return "float";
    case AttrKind::kInt: return "int";
    case AttrKind::kString: return "string";
    case AttrKind::kTensor: return "tensor";
    case AttrKind::kGraph: return "graph";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kInts: return "ints";
    case AttrKind::kStrings: return "strings";
    case AttrKind::kTensors: return "tensors";
    case AttrKind::kGraphs: return "graphs";
    case AttrKind::kSparseTensor: return "sparse_tensor";
    case AttrKind::kSparseTensors: return "sparse_tensors";
    case AttrKind::kTypeProto: return "type_proto";
    case AttrKind::kTypeProtos: return "type_protos";
    case AttrKind::kUndefined: break;
  }
  return "undefined";
}

namespace {
Attribute named(std::string name, AttrKind kind) {
  Attribute a;
  a.name = std::move(name);
  a.kind = kind;
  return a;
}
}  // namespace

Attribute Attribute::copy_without_graphs() const {
  Attribute c;
  c.name = name;
  c.kind = kind;
  c.doc_string = doc_string;
  c.ref_attr_name = ref_attr_name;
  c.f = f;
  c.i = i;
  c.s = s;
  c.t = t;
  c.sparse = sparse;
  c.tp = tp;
  c.floats = floats;
  c.ints = ints;
  c.strings = strings;
  c.tensors = tensors;
  c.sparse_tensors = sparse_tensors;
  c.type_protos = type_protos;
  return c;
}

Attribute Attribute::of_int(std::string name, int64_t v) {
  Attribute a = named(std::move(name), AttrKind::kInt);
  a.i = v;
  return a;
}
Attribute Attribute::of_float(std::string name, float v) {
  Attribute a = named(std::move(name), AttrKind::kFloat);
  a.f = v;
  return a;
}
Attribute Attribute::of_string(std::string name, std::string v) {
  Attribute a = named(std::move(name), AttrKind::kString);
  a.s = std::move(v);
  return a;
}
Attribute Attribute::of_ints(std::string name, std::vector<int64_t> v) {
  Attribute a = named(std::move(name), AttrKind::kInts);
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::of_floats(std::string name, std::vector<float> v) {
  Attribute a = named(std::move(name), AttrKind::kFloats);
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::of_tensor(std::string name, Tensor v) {
  Attribute a = named(std::move(name), AttrKind::kTensor);
  a.t = std::move(v);
  return a;
}

}  // namespace amp
