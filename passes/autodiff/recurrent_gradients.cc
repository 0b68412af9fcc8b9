// Gradients of LSTM, GRU and RNN: one ai.onnx_amp LSTMGrad / GRUGrad / RNNGrad per layer, which
// runs the layer again and walks its steps back (backends/cpu/recurrent.cc), so the forward keeps
// nothing for it beyond its inputs. sequence_lens is integer and gets no gradient.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

std::vector<Value*> recurrent(GradContext& c) {
  const bool lstm = c.node.op_type() == "LSTM";
  const size_t output_grads = lstm ? 3 : 2, forward_inputs = lstm ? 8 : 6;
  std::vector<Value*> in;
  for (size_t k = 0; k < output_grads; ++k) in.push_back(k < c.dy.size() ? c.dy[k] : nullptr);
  for (size_t i = 0; i < forward_inputs; ++i) in.push_back(c.x(i));
  while (!in.back()) in.pop_back();  // X is always there
  // The gradient op's outputs are the gradients of these forward inputs, in this order.
  const std::vector<size_t> of = lstm ? std::vector<size_t>{0, 1, 2, 3, 5, 6, 7} : std::vector<size_t>{0, 1, 2, 3, 5};
  const ValueType none;
  std::vector<ValueType> types;
  for (size_t i : of) types.push_back(c.wants(i) && c.x(i) ? c.x(i)->type() : none);
  std::vector<Attribute> attrs;
  for (const Attribute& a : c.node.attributes()) attrs.push_back(a.copy_without_graphs());
  const std::vector<Value*> outs = c.b.emit(c.node.op_type() + "Grad", in, types, std::move(attrs), kAmpDomain);
  std::vector<Value*> grads(c.node.inputs().size(), nullptr);
  for (size_t k = 0; k < of.size(); ++k)
    if (of[k] < grads.size()) grads[of[k]] = outs[k];
  return grads;
}

}  // namespace

void add_recurrent_gradients(GradRuleTable& t) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) t[op] = recurrent;
}

}  // namespace amp
