// What mixed-precision rewriting is asked to do: the target type, the op lists (defaults from
// op_lists.inc, edited by flags or a config file), blocked nodes, and how graph inputs, outputs and
// weights are treated. colour() and insert_casts() read it; nothing in it depends on a model.
#pragma once

#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "graph/dtype.h"
#include "graph/node.h"

namespace amp {

enum class OpCategory { kAllow, kDeny, kInfer, kClear };
const char* op_category_name(OpCategory c);  // "allow", "deny", "infer", "clear"

struct OpListEntry {
  OpCategory category;
  std::string reason;  // one line: why the op is on its list
};

// How float initializers are stored after the rewrite.
enum class WeightStorage {
  kKeep,          // stay fp32 and are Cast at use: the master weights a training step updates
  kLowPrecision,  // stored in the target type when every use is low precision
};

// Where a Cast goes between a low-precision region and an fp32 one when data-movement ops (the
// clear list: Transpose, Reshape, Flatten, ...) lie between them; the values are the same either way
// (those ops are exact in any type), the bytes they move and what a runtime can remove differ.
enum class CastPlacement {
  // At the consuming op, as PyTorch's autocast casts: the data movement runs in the precision of
  // the op next to it that computes in low precision (half the bytes).
  kConsumer,
  // Beside the op that computes: data movement whose data all comes from, or all goes to, fp32 ops
  // runs in fp32 (colour.h, step 6; not where a low op's decision read it). A runtime that computes
  // low-precision ops in fp32 and removes the Cast pairs around them (ONNX Runtime's CPU provider)
  // then rounds nowhere at that edge; with the Cast at the consumer its fp16 Transpose keeps the
  // rounding. amp-rewrite's default: its models go to such runtimes.
  kCompute,
};
const char* cast_placement_name(CastPlacement p);  // "consumer" / "compute"

// Measured figures behind a decision, in order: (what, value as text). Decision records carry them.
using Measurements = std::vector<std::pair<std::string, std::string>>;

// A node that numerical calibration (frontends/lib/calibrate.h) keeps in fp32: why, in one line
// (what keeping it bought), and what was measured on it.
struct CalibratedNode {
  std::string reason;
  Measurements measurements;
};

// Edits of the op lists, as the command line and config files give them: per category, op types
// to put on that list ("Op", "domain:Op" outside the default domain) or to take off it ("-Op"; the
// op then stays fp32).
struct OpListEdits {
  std::map<OpCategory, std::vector<std::string>> edits;
  std::string source;  // "command line", a config file path: named in errors
};

class AmpPolicy {
 public:
  // The default lists of op_lists.inc, targeting fp16 or bf16.
  explicit AmpPolicy(DType target = DType::kFloat16);

  DType target() const { return target_; }
  void set_target(DType t);  // throws InputError unless fp16 or bf16
  // Graph inputs and outputs keep their types (Casts at the boundary). On by default.
  bool keep_io_types = true;
  WeightStorage weights = WeightStorage::kKeep;
  // The graph runs on this project's backends (a training step), not in a runtime bound by the
  // model's opset: an op whose type constraint allows float16 runs in bfloat16 too, though opset
  // 17 leaves bfloat16 out of Conv, ConvTranspose, MaxPool, AveragePool... (both backends run
  // every such op in both 16-bit types). Off for amp-rewrite, whose output must stay valid ONNX.
  bool beyond_opset_schemas = false;
  // Consumer placement by default (the training step's, on this project's backends); amp-rewrite
  // asks for kCompute (frontends/lib/model_rewrite.cc).
  CastPlacement cast_placement = CastPlacement::kConsumer;
  // Non-zero values that a conversion stores in the low type with a magnitude below this become
  // +-min_magnitude first (onnxconverter-common's min_positive_val: an epsilon constant does not
  // flush to zero in fp16). 0: off, values round as IEEE does (the default).
  float min_magnitude = 0;

  // The list entry of an op: keyed by op type in the default domain, "domain:Op" in others (the
  // defaults list default-domain ops only). nullptr when not listed.
  const OpListEntry* entry(const std::string& domain, const std::string& op_type) const;
  const std::map<std::string, OpListEntry>& lists() const { return lists_; }
  // Applies edits from all sources at once. An op put on two lists (by any sources together), or an
  // unknown op name, is an InputError naming the sources.
  void apply(const std::vector<OpListEdits>& edits);

  // Nodes whose name matches one of these (std::regex, whole name) stay fp32.
  void block_nodes(const std::string& pattern);  // throws InputError for a bad regex
  // The pattern that blocks this node, or nullptr.
  const std::string* blocked_by(const Node& n) const;

  // Nodes (by name) that calibration keeps in fp32: colour() decides them fp32 with the rule
  // "calibration", before the op lists are read, and they do not propagate fp32 to neighbours.
  void keep_calibrated(const std::string& node_name, CalibratedNode why) { calibrated_[node_name] = std::move(why); }
  const CalibratedNode* calibrated(const Node& n) const;
  const std::map<std::string, CalibratedNode>& calibrated_nodes() const { return calibrated_; }

 private:
  DType target_;
  std::map<std::string, OpListEntry> lists_;
  std::vector<std::pair<std::string, std::regex>> blocked_;
  std::map<std::string, CalibratedNode> calibrated_;
};

}  // namespace amp
