// How a node's ONNX schema binds its inputs and outputs to types, read for mixed precision: which
// inputs and outputs carry the node's floating data (bound to one type variable, "T"), and so
// change type together when the node runs in low precision. Inputs fixed to float (Resize scales),
// integer inputs and inputs of other type variables (BatchNormalization's scale and statistics,
// LayerNormalization's stash type) are not data and keep their types.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "graph/model.h"

namespace onnx {
class OpSchema;
}

namespace amp {

struct NodeTyping {
  enum class Kind {
    kNoSchema,     // no ONNX schema for the op at the model's opset (custom domains)
    kNoFloatData,  // nothing floating bound to a type variable (Shape, integer arithmetic)
    kData,         // floating data bound to type_var
  };
  Kind kind = Kind::kNoSchema;
  std::string type_var;            // the schema's type variable of the data, e.g. "T"
  DType data_type = DType::kUndefined;  // the data's current element type
  bool allows_target = false;      // type_var allows the target type
  bool type_from_attribute = false;  // output type set by an attribute (Cast, ConstantOfShape, RandomNormal)
  std::vector<size_t> data_inputs;   // inputs bound to type_var (present, floating tensors)
  std::vector<size_t> data_outputs;  // outputs bound to type_var (present)
  // Inputs that accept any type their variable allows, whatever the node's precision: the variable
  // binds that one input and nothing else (Shape's data, Cast's input, Dropout's ratio).
  std::vector<bool> flexible_inputs;
};

// The schema of n at the opsets of m, or nullptr.
const onnx::OpSchema* node_schema(const Node& n, const std::vector<OpsetImport>& opsets);

// Reads each schema's type constraints once: a model has thousands of nodes of a few dozen ops.
class NodeTyper {
 public:
  // beyond_opset_schemas: a variable that allows float16 is taken to allow bfloat16 too
  // (AmpPolicy::beyond_opset_schemas).
  explicit NodeTyper(DType target, bool beyond_opset_schemas = false)
      : target_(target), beyond_opset_schemas_(beyond_opset_schemas) {}
  NodeTyping operator()(const Node& n, const onnx::OpSchema* schema);

 private:
  struct Formal {
    int var = -1;  // index into vars, -1 for a fixed type such as tensor(float)
    bool variadic = false;
  };
  struct Var {
    std::string name;
    bool allows_target = false;
    int formals = 0;  // formal parameters bound to it
  };
  struct SchemaTypes {
    std::vector<Formal> inputs, outputs;
    std::vector<Var> vars;
    // The formal for actual position i (the last one repeats when variadic); nullptr past the end.
    static const Formal* at(const std::vector<Formal>& formals, size_t i);
  };
  const SchemaTypes& types_of(const onnx::OpSchema& schema);

  DType target_;
  bool beyond_opset_schemas_;
  std::unordered_map<const onnx::OpSchema*, SchemaTypes> cache_;
};

}  // namespace amp
