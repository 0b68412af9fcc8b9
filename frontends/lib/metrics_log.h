// --metrics FILE.jsonl: one JSON object per line, flushed as it is written, so a run that stops
// early leaves every record it made (one per optimizer step, one per validation pass).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace amp {

class MetricsLog {
 public:
  MetricsLog() = default;                      // writes nothing
  MetricsLog(const std::string& path, bool append);  // InputError when the file cannot be opened
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};

}  // namespace amp
