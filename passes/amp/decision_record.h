// The precision decision of each node, recorded in the rewritten model itself so any tool (and
// amp-inspect) can show why a node runs in the precision it does. ONNX 1.12 has no per-node
// metadata, so the record is lines of the node's doc_string:
//
//   amp: <precision> <rule>: <reason>
//   amp.<field>: <value>            (zero or more)
//
// precision is "fp16", "bf16", "fp32" or "-" (moves no floating data), rule one of rule_name()'s
// words ("allow-list", "deny-path", "cast", ...), reason free text to the end of the line. The
// field lines carry what else the decision knows, in order: `from`, the node_ref() of the
// neighbour the decision came from (so the whole chain of reasons that `--explain` prints can be
// read back from the model), and any measured figures a rule adds; readers show fields they do
// not know as they are. Other doc_string lines are kept; writing again replaces the record. The
// model as a whole records the settings of the rewrite in metadata_props under kRewriteSettingsKey.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"
#include "passes/amp/colour.h"

namespace amp {

struct DecisionRecord {
  std::string precision;
  std::string rule;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> fields;  // (name, value); names are [a-z0-9_-]
};

inline constexpr const char* kRewriteSettingsKey = "onnx-amp.rewrite";
inline constexpr const char* kRecordFieldFrom = "from";

void write_decision_record(Node& n, const DecisionRecord& r);
// The record in n's doc_string, if it has one.
std::optional<DecisionRecord> read_decision_record(const Node& n);

// A node's decision as recorded: precision, rule and reason, and `from` from its field.
DecisionRecord make_decision_record(const Decision& d, DType target);

// The decisions recorded in a model (its graph and subgraphs, in graph order), as colour() made
// them, so explain() gives the chain of reasons from a saved model as amp-rewrite gave it. Nodes
// without a record are left out; the target is the low type the records name (fp16 when none).
AmpDecisions recorded_decisions(const Graph& g);
// The same over several graphs read as one (a saved training step's inference and algorithm graphs).
AmpDecisions recorded_decisions(const std::vector<const Graph*>& graphs);

// explain() for a node of a saved model: its chain from the records, or one line saying that the
// node has none (a training step's gradient, loss-scaling and optimizer nodes are made after the
// colouring and compute in the types of their inputs).
std::vector<std::string> explain_recorded(const AmpDecisions& recorded, const Node& n);

}  // namespace amp
