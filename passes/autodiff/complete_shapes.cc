#include "passes/autodiff/complete_shapes.h"

#include <unordered_map>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/ops/shape_rules.h"

namespace amp {

void complete_shapes(Graph& g) {
  // What is known of each value: its type, and the contents of initializers and of what the rules
  // compute from them (Constant, Shape of a static shape).
  std::unordered_map<const Value*, TensorFacts> facts;
  auto facts_of = [&](const Value* v) -> const TensorFacts& {
    auto it = facts.find(v);
    if (it != facts.end()) return it->second;
    TensorFacts f;
    if (v->type().is_tensor()) {
      f.dtype = v->dtype();
      f.shape = v->type().shape;
    }
    if (v->has_initializer()) f.value = v->initializer();
    return facts[v] = std::move(f);
  };
  for (Node* n : g.nodes()) {
    std::vector<const TensorFacts*> in;
    for (const Value* v : n->inputs()) in.push_back(v ? &facts_of(v) : nullptr);
    std::vector<TensorFacts> preset;
    for (const Value* v : n->outputs()) preset.push_back(v ? facts_of(v) : TensorFacts{});
    // Graphs reach autodiff at the canonical opset (load_model upgrades them) or, for ai.onnx_amp, its one version.
    const int64_t opset = n->domain().empty() ? kCanonicalOpset : kAmpDomainVersion;
    bool all_shaped = true;
    for (const Value* v : n->outputs()) all_shaped = all_shaped && (!v || v->type().shape);
    std::optional<std::vector<TensorFacts>> out;
    try {
      out = infer_output_facts(*n, opset, in, std::move(preset));
    } catch (const InputError& e) {
      // Where ONNX's inference typed every output, its word stands (a backend reports the op's
      // trouble when it compiles the node); a rank this pass was to give cannot be given.
      if (all_shaped) continue;
      throw InputError("node " + n->label() + ": " + e.what());
    }
    if (!out) continue;
    for (size_t k = 0; k < n->outputs().size(); ++k) {
      Value* y = n->output(k);
      if (!y) continue;
      TensorFacts& known = facts[y];
      known.value = (*out)[k].value;
      const bool int_vector = known.shape && known.shape->rank() == 1 && (known.dtype == DType::kInt64 || known.dtype == DType::kInt32);
      if (y->type().shape && int_vector && (*out)[k].shape && (*out)[k].shape->rank() == 1 && !known.shape->dims[0].value) {
        // A shape being computed whose length ONNX left open (ConstantOfShape of a known Shape,
        // feeding an Expand, as torch exports repeat): the rule's length informs the rules
        // downstream, though the value's declared type stays as ONNX gave it.
        known.shape->dims[0] = (*out)[k].shape->dims[0];
      }
      if (y->type().shape || !(*out)[k].shape) continue;
      ValueType t = y->type();
      t.kind = ValueType::Kind::kTensor;
      if (t.elem == DType::kUndefined) t.elem = (*out)[k].dtype;
      t.shape = (*out)[k].shape;
      y->set_type(t);
      known.dtype = t.elem;
      known.shape = t.shape;
    }
  }
}

}  // namespace amp
