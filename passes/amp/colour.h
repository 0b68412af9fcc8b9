// Precision colouring: decides for every node (subgraphs included) whether it runs in the low type
// (fp16/bf16) or in fp32, and records the rule and the neighbour behind each decision so reports
// and `amp-rewrite --explain` can say why. It reads the model and changes nothing; insert_casts()
// then makes the types real.
//
// The propagation follows TensorFlow grappler's auto_mixed_precision, over the edges that carry
// each node's floating data (see node_typing.h):
//   1. allow-list ops become low;
//   2. fp32 is painted forward from deny-list ops through clear/infer ops, onto every node on a path
//      that ends at an infer or deny op, so fp32 regions are not cut into pieces by casts;
//   3. clear/infer ops on a path between two low ops become low;
//   4. low spreads through clear ops, upstream and downstream;
//   5. in topological order, a clear/infer op whose inputs are all low becomes low (PyTorch
//      autocast's "runs in its inputs' type"); any other stays fp32;
//   6. with CastPlacement::kCompute, a clear op made low in steps 4-5 whose data all comes from, or
//      all goes to, fp32 ops becomes fp32 (unless another low op's decision read it), so the Cast
//      at that edge sits beside the low op that computes; and one whose data all comes from low ops
//      and that an fp32 op reads (maybe beside low ones) becomes fp32 too (its values are low-precision
//      numbers either way, so every reader reads what it read before).
// Ops that cannot run in the target type (schema constraint, attribute-set output type, blocked by
// the user, data already of another type) stay fp32 and do not propagate. If/Loop/Scan keep the
// types of their inputs, outputs and loop-carried values, so a carried value has one type in
// every iteration; their bodies are coloured like any graph, with casts at the body's edges.
// Existing Casts stop propagation (their type is their 'to'); step 5 looks through Casts between
// float types to the value they convert. A Cast from a non-float type, a Constant, an initializer
// (and, without keep_io_types, a graph input) is free: it takes the type its consumers need.
// Decisions therefore depend on the graph's structure and not on the Casts a rewrite inserted, so
// colouring a rewritten model reproduces the decisions that rewrote it (rewriting is idempotent).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "graph/model.h"
#include "passes/amp/amp_policy.h"
#include "passes/amp/node_typing.h"

namespace amp {

enum class Precision { kNone, kFp32, kLow };
// "fp16" / "bf16" for kLow given the target, "fp32", "-" for kNone.
std::string precision_name(Precision p, DType target);

// The rule that decided a node's precision.
enum class Rule {
  kAllowList,
  kDenyList,
  kDenyPath,           // on a path from a deny op to an infer or deny op (step 2)
  kBetweenLow,         // on a path between low ops (step 3)
  kNextToLow,          // clear op joined to a low op by clear ops (step 4)
  kNextToFp32,         // clear op next to fp32 ops at the edge of a low region, under CastPlacement::kCompute (step 6)
  kInputsLow,          // every input is low (step 5)
  kInputFp32,          // some input is fp32, or none is low (step 5)
  kNotListed,
  kBlocked,
  kCalibration,        // kept fp32 by numerical calibration (AmpPolicy::keep_calibrated)
  kSchemaForbids,      // the data's type variable does not allow the target type
  kTypeFromAttribute,  // the output type is an attribute (RandomNormal's dtype, ConstantOfShape)
  kOtherType,          // the data is double or the other 16-bit type: left alone
  kControlFlow,
  kQuantized,          // a QuantizeLinear / DequantizeLinear or an op between them (a QDQ model)
  kOrtFusion,          // a pattern ONNX Runtime fuses assuming one element type (MatMul + BatchNormalization)
  kNoSchema,
  kNoFloatData,
  kCast,
  kConstant,
};
const char* rule_name(Rule r);  // "allow-list", "deny-path", ... (stable: used in reports and records)

struct Decision {
  Precision precision = Precision::kNone;
  Rule rule = Rule::kNoFloatData;
  std::string reason;  // one line for people
  std::string from;    // node_ref() of the neighbour the decision came from; "" for list rules
  Measurements measurements;  // what calibration measured (kCalibration); empty otherwise
};

// One node's decision with what the rewrite needs about it. `node` points at the node as it was
// coloured: insert_casts() and the record pass use it right after; once a pass has removed nodes
// (cast-cleanup) it may dangle, so reports read the copies (name, ref, op) instead.
struct NodeDecision {
  const Node* node = nullptr;
  std::string name;
  std::string ref;  // node_ref(node)
  std::string op;
  Decision decision;
  NodeTyping typing;
};

struct AmpDecisions {
  DType target = DType::kFloat16;
  std::vector<NodeDecision> nodes;  // graph order; a subgraph's nodes right after their If/Loop/Scan
  std::unordered_map<const Node*, size_t> index;

  // Only for nodes alive since colouring: a node made after another was removed may reuse the
  // removed node's address (amp-rewrite's passes make nodes before they remove any).
  const NodeDecision* find(const Node* n) const;
  // By node name, or by node_ref() for unnamed nodes; nullptr when absent. Reads only copies.
  const NodeDecision* find(const std::string& name_or_ref) const;
};

// How reports name a node: "name (Op)", or "Op -> first_output" when unnamed (amp-rewrite names
// every node first: an output can be renamed by the rewrite, a name is not).
std::string node_ref(const Node* n);

AmpDecisions colour(const Model& m, const AmpPolicy& policy);
// A Cast's decision, whoever inserted it: its precision is its 'to'.
Decision cast_decision(const Node& cast);

// The chain of reasons for one node: its decision, then that of the node it came from, and so on
// to a list rule; one line each, "ref: precision, rule: reason", and under a node with
// measurements one more, "  measured: key=value, key=value".
std::vector<std::string> explain(const AmpDecisions& d, const NodeDecision& node);

}  // namespace amp
