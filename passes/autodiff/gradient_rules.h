// Reverse-mode gradient rules: one small function per forward op, kept in a table from op type to
// rule. A rule reads the forward node and the gradients of its outputs and emits the nodes that
// compute the gradients of its inputs — standard ONNX ops where they exist, ops of the
// "ai.onnx_amp" domain (graph/amp_ops.h) where they don't. One file per op family adds its rules.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/graph_builder.h"

namespace amp {

struct GradContext {
  GraphBuilder& b;
  const Node& node;
  std::vector<Value*> dy;    // per output: its gradient, null when none flows into it
  std::vector<bool> wanted;  // per input: whether its gradient is needed

  Value* x(size_t i) const { return node.input(i); }
  Value* y(size_t i) const { return node.output(i); }
  bool wants(size_t i) const { return i < wanted.size() && wanted[i]; }
  // Gradient to hand back for input i: `g` (of the output's broadcast shape) summed over the axes
  // along which input i was broadcast, reshaped to input i's shape. The last `own_dims` axes are
  // input i's own (MatMul's matrix axes) and never broadcast. Static shapes give ReduceSums over
  // the broadcast axes; shapes that leave the axes open give ai.onnx_amp SumToShape, which decides
  // at run time.
  Value* sum_to_input(Value* g, size_t i, int64_t own_dims = 0);
  // The error to throw when the rule cannot handle this node, naming it.
  [[noreturn]] void fail(const std::string& why) const;
};

// Returns the gradient of each input (null where none is wanted or none exists).
using GradRule = std::vector<Value*> (*)(GradContext&);
using GradRuleTable = std::unordered_map<std::string, GradRule>;

// Rules by Node::qualified_op_type: the op type in the default ONNX domain, "<domain>:<op type>" in others.
const GradRuleTable& gradient_rules();
// Ops whose outputs carry no gradient (shape arithmetic, masks, comparisons, and Floor / Ceil / Sign,
// whose derivative is 0 wherever it exists, PyTorch's answer): gradients stop there.
const std::unordered_set<std::string>& non_differentiable_ops();

// Each op family's file adds its rules.
void add_elementwise_gradients(GradRuleTable& t);
void add_broadcast_gradients(GradRuleTable& t);
void add_matmul_gradients(GradRuleTable& t);
void add_conv_pool_gradients(GradRuleTable& t);
void add_conv_transpose_gradients(GradRuleTable& t);
void add_normalization_gradients(GradRuleTable& t);
void add_softmax_loss_gradients(GradRuleTable& t);
void add_shape_gradients(GradRuleTable& t);
void add_reduce_gradients(GradRuleTable& t);
void add_zoo_activation_gradients(GradRuleTable& t);
void add_pad_resize_gradients(GradRuleTable& t);
void add_einsum_gradients(GradRuleTable& t);
void add_attention_gradients(GradRuleTable& t);
void add_recurrent_gradients(GradRuleTable& t);
void add_indexing_gradients(GradRuleTable& t);

}  // namespace amp
