// Output types and shapes of ops from what is known of their inputs: one rule per op, in one place.
// The CPU kernels apply them with every dim known (and the contents of shape inputs: Reshape's
// shape, Slice's starts), and so does the CUDA backend through them; the shape completion before
// autodiff (passes/autodiff/complete_shapes) applies them where ONNX's inference stopped, with ranks
// and whatever dims are known. A rule fills in what follows from what it is given and leaves the
// rest unknown — a Dim without a value, or no Shape when even the rank does not follow — and
// throws InputError when known facts contradict the op (shapes that do not broadcast, a perm of
// the wrong length). The elementwise ops' rules follow from their form in the op table
// (elementwise_ops.h).
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "graph/dtype.h"
#include "graph/node.h"
#include "graph/tensor.h"
#include "graph/type.h"

namespace amp {

// What is known of one tensor.
struct TensorFacts {
  DType dtype = DType::kUndefined;
  std::optional<Shape> shape;   // none: not even the rank is known
  std::optional<Tensor> value;  // the contents, where the rule reads them (its ShapeRule::value_inputs)

  static TensorFacts of(DType t, const std::vector<int64_t>& dims);
  // The dims as integers when every one is known.
  std::optional<std::vector<int64_t>> dims() const;
};

// A rule's inputs (null for an absent optional one) and outputs (one per output of the node; a
// dtype may arrive set, the graph's declared type, for outputs whose type the op leaves free).
struct ShapeQuery {
  std::vector<const TensorFacts*> in;
  std::vector<TensorFacts> out;

  bool has(size_t i) const { return i < in.size() && in[i]; }
  // Input i, which must be present (InputError naming it otherwise).
  const TensorFacts& input(size_t i) const;
  // Input i's contents as integers (an int32 or int64 tensor), when known.
  std::optional<std::vector<int64_t>> ints(size_t i) const;
};

using ShapeFn = std::function<void(ShapeQuery&)>;

struct ShapeRule {
  // Reads the node's attributes once; the function it returns infers for any inputs.
  ShapeFn (*bind)(const Node& n, int64_t opset);
  std::vector<int> value_inputs;  // inputs whose contents decide the output shapes
};

// ONNX's traditional-ML domain, whose preprocessing ops (Scaler, ArrayFeatureExtractor,
// OneHotEncoder, FeatureVectorizer) converters put in front of networks.
inline constexpr const char* kOnnxMlDomain = "ai.onnx.ml";

// The rule of an op (domain "", ai.onnx_amp or ai.onnx.ml); nullptr when it has none.
const ShapeRule* find_shape_rule(std::string_view domain, std::string_view op);

// The output facts of node n for these input facts: its rule applied, or nullopt when it has none.
std::optional<std::vector<TensorFacts>> infer_output_facts(const Node& n, int64_t opset,
                                                           const std::vector<const TensorFacts*>& in,
                                                           std::vector<TensorFacts> out);

// numpy broadcasting of shapes that may be partly known: a dim is known where one operand has a
// known extent other than 1 (or all have 1); named where all the operands that are not 1 share
// that name. No shape when a rank is unknown. InputError naming the shapes when they cannot broadcast.
std::optional<Shape> broadcast_shapes(const std::vector<const std::optional<Shape>*>& shapes);

}  // namespace amp
