#include "passes/amp/decision_record.h"

#include <algorithm>
#include <sstream>

namespace amp {

namespace {

constexpr const char* kPrefix = "amp: ";
constexpr const char* kFieldPrefix = "amp.";

bool is_field_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// "amp.<name>: value" -> (name, value)
std::optional<std::pair<std::string, std::string>> parse_field(const std::string& line) {
  if (line.rfind(kFieldPrefix, 0) != 0) return std::nullopt;
  const size_t colon = line.find(": ");
  if (colon == std::string::npos) return std::nullopt;
  std::string name = line.substr(std::string(kFieldPrefix).size(), colon - std::string(kFieldPrefix).size());
  if (!is_field_name(name)) return std::nullopt;
  return std::make_pair(std::move(name), line.substr(colon + 2));
}

bool is_record(const std::string& line) { return line.rfind(kPrefix, 0) == 0 || parse_field(line); }

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

void collect(const Graph& g, std::vector<const Node*>& out) {
  for (const Node* n : g.nodes()) {
    out.push_back(n);
    for (const Graph* sub : n->subgraphs()) collect(*sub, out);
  }
}

std::optional<Rule> rule_from_name(const std::string& name) {
  // rule_name() answers "?" past the last rule.
  for (int r = 0; std::string(rule_name(static_cast<Rule>(r))) != "?"; ++r)
    if (name == rule_name(static_cast<Rule>(r))) return static_cast<Rule>(r);
  return std::nullopt;
}

}  // namespace

void write_decision_record(Node& n, const DecisionRecord& r) {
  std::string out;
  for (size_t start = 0; start < n.doc_string.size();) {
    const size_t end = std::min(n.doc_string.find('\n', start), n.doc_string.size());
    const std::string line = n.doc_string.substr(start, end - start);
    if (!is_record(line)) out += line + "\n";
    start = end + 1;
  }
  out += kPrefix + r.precision + " " + r.rule + ": " + one_line(r.reason);
  for (const auto& [name, value] : r.fields) out += "\n" + std::string(kFieldPrefix) + name + ": " + one_line(value);
  n.doc_string = out;
}

std::optional<DecisionRecord> read_decision_record(const Node& n) {
  std::istringstream lines(n.doc_string);
  std::optional<DecisionRecord> record;
  for (std::string line; std::getline(lines, line);) {
    if (record) {
      if (auto field = parse_field(line)) record->fields.push_back(std::move(*field));
      continue;
    }
    if (line.rfind(kPrefix, 0) != 0) continue;
    const std::string body = line.substr(std::string(kPrefix).size());
    const size_t space = body.find(' ');
    const size_t colon = body.find(": ", space == std::string::npos ? 0 : space);
    if (space == std::string::npos || colon == std::string::npos) return std::nullopt;
    record = DecisionRecord{body.substr(0, space), body.substr(space + 1, colon - space - 1), body.substr(colon + 2), {}};
  }
  return record;
}

DecisionRecord make_decision_record(const Decision& d, DType target) {
  DecisionRecord r{precision_name(d.precision, target), rule_name(d.rule), d.reason, {}};
  if (!d.from.empty()) r.fields.emplace_back(kRecordFieldFrom, d.from);
  for (const auto& [name, value] : d.measurements) r.fields.emplace_back(name, value);
  return r;
}

AmpDecisions recorded_decisions(const Graph& g) { return recorded_decisions(std::vector<const Graph*>{&g}); }

AmpDecisions recorded_decisions(const std::vector<const Graph*>& graphs) {
  std::vector<const Node*> nodes;
  for (const Graph* g : graphs) collect(*g, nodes);
  AmpDecisions d;
  for (const Node* n : nodes)
    if (auto r = read_decision_record(*n)) {
      if (r->precision == precision_name(Precision::kLow, DType::kBFloat16)) d.target = DType::kBFloat16;
    }
  for (const Node* n : nodes) {
    auto r = read_decision_record(*n);
    if (!r) continue;
    const std::optional<Rule> rule = rule_from_name(r->rule);
    if (!rule) continue;  // a rule of a later version: the record is shown, not chained
    Decision dec;
    dec.precision = r->precision == "-"                                         ? Precision::kNone
                    : r->precision == precision_name(Precision::kFp32, d.target) ? Precision::kFp32
                                                                                  : Precision::kLow;
    dec.rule = *rule;
    dec.reason = r->reason;
    for (auto& [name, value] : r->fields)
      if (name == kRecordFieldFrom)
        dec.from = value;
      else
        dec.measurements.emplace_back(name, value);  // what a calibration measured, shown by explain()
    d.index[n] = d.nodes.size();
    d.nodes.push_back(NodeDecision{n, n->name, node_ref(n), n->op_type(), std::move(dec), {}});
  }
  return d;
}

std::vector<std::string> explain_recorded(const AmpDecisions& recorded, const Node& n) {
  if (const NodeDecision* nd = recorded.find(&n)) return explain(recorded, *nd);
  return {node_ref(&n) + ": no decision record: made after the precision colouring (a training step's gradients, "
                         "loss scaling, inf check or optimizer), it computes in the types of its inputs"};
}

}  // namespace amp
