// Node attributes of every ONNX kind, subgraphs (If/Loop/Scan bodies) included. A subgraph is
// owned by its attribute; its nodes may read values of the enclosing graphs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "graph/type.h"

namespace amp {

class Graph;

struct SparseTensor {
  Tensor values;
  Tensor indices;
  std::vector<int64_t> dims;
};

// Numbers are AttributeProto.AttributeType's.
enum class AttrKind : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kInt = 2,
  kString = 3,
  kTensor = 4,
  kGraph = 5,
  kFloats = 6,
  kInts = 7,
  kStrings = 8,
  kTensors = 9,
  kGraphs = 10,
  kSparseTensor = 11,
  kSparseTensors = 12,
  kTypeProto = 13,
  kTypeProtos = 14,
};

const char* attr_kind_name(AttrKind k);

struct Attribute {
  std::string name;
  AttrKind kind = AttrKind::kUndefined;
  std::string doc_string;
  std::string ref_attr_name;  // set inside function bodies

  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::unique_ptr<Graph> g;
  SparseTensor sparse;
  ValueType tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<SparseTensor> sparse_tensors;
  std::vector<ValueType> type_protos;

  Attribute();
  Attribute(Attribute&&) noexcept;
  Attribute& operator=(Attribute&&) noexcept;
  ~Attribute();

  // A copy of every field but the subgraphs (g, graphs), which belong to one owner graph; a caller
  // that copies those makes them under its own graph.
  Attribute copy_without_graphs() const;

  static Attribute of_int(std::string name, int64_t v);
  static Attribute of_float(std::string name, float v);
  static Attribute of_string(std::string name, std::string v);
  static Attribute of_ints(std::string name, std::vector<int64_t> v);
  static Attribute of_floats(std::string name, std::vector<float> v);
  static Attribute of_tensor(std::string name, Tensor v);
};

}  // namespace amp
