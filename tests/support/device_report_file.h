// The CUDA backend's device report (backends/cuda/device_report.h, AMP_CUDA_REPORT) of the
// backends made while this lives, in a temporary file, read back event by event.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/scoped_env.h"
#include "tests/support/test_support.h"

namespace amp::test {

class DeviceReportFile {
 public:
  explicit DeviceReportFile(const std::string& tag)
      : path_(temp_dir(tag) + "/report.jsonl"), env_("AMP_CUDA_REPORT", path_) {}
  // Its lines of one event, in order.
  std::vector<nlohmann::json> lines(const std::string& event) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["event"] == event) out.push_back(std::move(j));
    }
    return out;
  }

 private:
  std::string path_;
  ScopedEnv env_;
};

}  // namespace amp::test
