// The precision decision of each node, recorded in the rewritten model itself so any tool (and
// amp-inspect) can show why a node runs in the precision it does. ONNX 1.12 has no per-node
// metadata, so the record is one line of the node's doc_string:
//
//   amp: <precision> <rule>: <reason>
//
// precision is "fp16", "bf16", "fp32" or "-" (moves no floating data), rule one of rule_name()'s
// words ("allow-list", "deny-path", "cast", ...), reason free text to the end of the line. A
// decision backed by measurements (rule "calibration") carries them on a second line,
//
//   amp-measured: <key>=<value>; <key>=<value>; ...
//
// keys and values free text without ';' and '=' in keys (the pairs are kept in order). Other
// doc_string lines are kept; writing again replaces the record. The model as a whole records the
// settings of the rewrite in metadata_props under kRewriteSettingsKey.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"

namespace amp {

struct DecisionRecord {
  std::string precision;
  std::string rule;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> measurements;  // empty for list and propagation rules
};

inline constexpr const char* kRewriteSettingsKey = "onnx-amp.rewrite";

void write_decision_record(Node& n, const DecisionRecord& r);
// The record in n's doc_string, if it has one.
std::optional<DecisionRecord> read_decision_record(const Node& n);

}  // namespace amp
