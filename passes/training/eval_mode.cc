#include "passes/training/eval_mode.h"

#include <onnx/onnx_pb.h>

#include "graph/onnx_io.h"

namespace amp {

bool EvalModePass::run(Model& m) {
  Graph& g = *m.graph;
  bool changed = false;
  for (Node* n : g.node_vector()) {
    if (!n->domain().empty()) continue;
    if (n->op_type() == "Dropout" && n->input(2)) {
      n->truncate_inputs(2);
      count("Dropout");
      changed = true;
    }
    if (n->op_type() == "BatchNormalization" && n->attr_int("training_mode", 0) != 0) {
      // Inference mode has no statistics outputs: a node with the first output only replaces it.
      Value* y = n->output(0);
      Node* eval = g.add_node("BatchNormalization", n->inputs(), {g.fresh_name(y->name() + "_eval")}, "", n);
      eval->name = n->name;
      eval->set_attr(Attribute::of_float("epsilon", n->attr_float("epsilon", 1e-5f)));
      eval->set_attr(Attribute::of_float("momentum", n->attr_float("momentum", 0.9f)));
      eval->output(0)->set_type(y->type());
      g.replace_all_uses(y, eval->output(0));
      const std::string name = y->name();
      for (Value* stat : {n->output(1), n->output(2)})
        if (stat && stat->is_output())
          for (size_t i = g.outputs().size(); i-- > 0;)
            if (g.outputs()[i] == stat) g.remove_output(i);
      g.remove_node(n);
      g.rename_value(eval->output(0), name);
      count("BatchNormalization");
      changed = true;
    }
  }
  return changed;
}

Model clone_model(const Model& m) {
  onnx::ModelProto p = to_proto(m);
  Model copy = from_proto(p, m.path, ".");
  copy.path = m.path;
  // ONNX keeps types only of values listed in value_info; the IR knows more (shape inference
  // fills every value it can), and the passes that run on the copy need those types.
  for (Node* n : copy.graph->nodes())
    for (Value* v : n->outputs())
      if (v && !v->type().known())
        if (const Value* original = m.graph->lookup(v->name())) v->set_type(original->type());
  return copy;
}

}  // namespace amp
