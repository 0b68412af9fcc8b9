// The losses amp-train wrote to a --metrics file, one per step record, in order: what the
// training tests compare with PyTorch's.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace amp::test {

inline std::vector<double> metric_losses(const std::string& path) {
  std::vector<double> losses;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

}  // namespace amp::test
