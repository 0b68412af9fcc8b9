#include "passes/amp/decision_record.h"

#include <algorithm>
#include <sstream>

namespace amp {

namespace {

constexpr const char* kPrefix = "amp: ";

bool is_record(const std::string& line) { return line.rfind(kPrefix, 0) == 0; }

}  // namespace

void write_decision_record(Node& n, const DecisionRecord& r) {
  std::string reason = r.reason;
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  std::string out;
  for (size_t start = 0; start < n.doc_string.size();) {
    const size_t end = std::min(n.doc_string.find('\n', start), n.doc_string.size());
    const std::string line = n.doc_string.substr(start, end - start);
    if (!is_record(line)) out += line + "\n";
    start = end + 1;
  }
  n.doc_string = out + kPrefix + r.precision + " " + r.rule + ": " + reason;
}

std::optional<DecisionRecord> read_decision_record(const Node& n) {
  std::istringstream lines(n.doc_string);
  for (std::string line; std::getline(lines, line);) {
    if (!is_record(line)) continue;
    const std::string body = line.substr(std::string(kPrefix).size());
    const size_t space = body.find(' ');
    const size_t colon = body.find(": ", space == std::string::npos ? 0 : space);
    if (space == std::string::npos || colon == std::string::npos) return std::nullopt;
    return DecisionRecord{body.substr(0, space), body.substr(space + 1, colon - space - 1), body.substr(colon + 2)};
  }
  return std::nullopt;
}

}  // namespace amp
