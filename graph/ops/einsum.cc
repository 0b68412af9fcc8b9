#include "graph/ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "graph/error.h"

namespace amp {

EinsumEquation parse_einsum(const std::string& equation, size_t operands) {
  std::string eq;
  for (char ch : equation)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  if (eq.find("...") != std::string::npos)
    throw InputError("Einsum equation '" + equation + "': ellipses are not supported");
  EinsumEquation e;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::string term;
  for (char ch : lhs + ",") {
    if (ch == ',') {
      e.inputs.push_back(term);
      term.clear();
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      term += ch;
    } else {
      throw InputError("Einsum equation '" + equation + "': '" + std::string(1, ch) + "' is not a letter");
    }
  }
  if (e.inputs.size() != operands)
    throw InputError("Einsum equation '" + equation + "' has " + std::to_string(e.inputs.size()) + " terms for " +
                     std::to_string(operands) + " inputs");
  std::map<char, int> count;
  for (const std::string& t : e.inputs)
    for (char ch : t) count[ch]++;
  if (arrow != std::string::npos) {
    e.output = eq.substr(arrow + 2);
    for (char ch : e.output) {
      if (!count.count(ch))
        throw InputError("Einsum equation '" + equation + "': output letter '" + std::string(1, ch) + "' is in no input");
      if (std::count(e.output.begin(), e.output.end(), ch) > 1)
        throw InputError("Einsum equation '" + equation + "': output letter '" + std::string(1, ch) + "' repeats");
    }
  } else {
    for (const auto& [ch, n] : count)
      if (n == 1) e.output += ch;
  }
  e.letters = e.output;
  for (const auto& [ch, n] : count)
    if (e.letters.find(ch) == std::string::npos) e.letters += ch;
  return e;
}

std::vector<int64_t> einsum_extents(const EinsumEquation& e, const std::vector<std::vector<int64_t>>& dims) {
  std::vector<int64_t> extent(e.letters.size(), -1);
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    const std::string& t = e.inputs[k];
    if (t.size() != dims[k].size())
      throw InputError("Einsum term '" + t + "' has " + std::to_string(t.size()) + " letters for an input of rank " +
                       std::to_string(dims[k].size()));
    for (size_t i = 0; i < t.size(); ++i) {
      int64_t& x = extent[e.letters.find(t[i])];
      if (x >= 0 && x != dims[k][i] && x != 1 && dims[k][i] != 1)
        throw InputError("Einsum letter '" + std::string(1, t[i]) + "' has extents " + std::to_string(x) + " and " +
                         std::to_string(dims[k][i]));
      x = std::max(x, dims[k][i]);
    }
  }
  return extent;
}

std::vector<int64_t> einsum_output_dims(const EinsumEquation& e, const std::vector<int64_t>& extents) {
  return std::vector<int64_t>(extents.begin(), extents.begin() + static_cast<int64_t>(e.output.size()));
}

}  // namespace amp
