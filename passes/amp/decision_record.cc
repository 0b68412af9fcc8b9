#include "passes/amp/decision_record.h"

#include <algorithm>
#include <sstream>

namespace amp {

namespace {

constexpr const char* kPrefix = "amp: ";
constexpr const char* kMeasuredPrefix = "amp-measured: ";

bool starts_with(const std::string& line, const char* prefix) { return line.rfind(prefix, 0) == 0; }
bool is_record(const std::string& line) { return starts_with(line, kPrefix) || starts_with(line, kMeasuredPrefix); }

std::string one_line(std::string s, const std::string& also = "") {
  std::replace(s.begin(), s.end(), '\n', ' ');
  for (char c : also) std::replace(s.begin(), s.end(), c, ',');
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  const size_t b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
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
  n.doc_string = out + kPrefix + r.precision + " " + r.rule + ": " + one_line(r.reason);
  if (r.measurements.empty()) return;
  n.doc_string += std::string("\n") + kMeasuredPrefix;
  for (size_t i = 0; i < r.measurements.size(); ++i)
    n.doc_string += (i ? "; " : "") + one_line(r.measurements[i].first, ";=") + "=" +
                    one_line(r.measurements[i].second, ";");
}

std::optional<DecisionRecord> read_decision_record(const Node& n) {
  std::istringstream lines(n.doc_string);
  std::optional<DecisionRecord> record;
  std::vector<std::pair<std::string, std::string>> measurements;
  for (std::string line; std::getline(lines, line);) {
    if (starts_with(line, kMeasuredPrefix)) {
      std::istringstream pairs(line.substr(std::string(kMeasuredPrefix).size()));
      for (std::string pair; std::getline(pairs, pair, ';');) {
        const size_t eq = pair.find('=');
        if (eq != std::string::npos) measurements.emplace_back(trim(pair.substr(0, eq)), trim(pair.substr(eq + 1)));
      }
      continue;
    }
    if (!starts_with(line, kPrefix) || record) continue;
    const std::string body = line.substr(std::string(kPrefix).size());
    const size_t space = body.find(' ');
    const size_t colon = body.find(": ", space == std::string::npos ? 0 : space);
    if (space == std::string::npos || colon == std::string::npos) return std::nullopt;
    record = DecisionRecord{body.substr(0, space), body.substr(space + 1, colon - space - 1), body.substr(colon + 2), {}};
  }
  if (record) record->measurements = std::move(measurements);
  return record;
}

}  // namespace amp
