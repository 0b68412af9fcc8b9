#include "backends/cuda/device_report.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace amp::cuda {
namespace {

// The unit being prepared or enqueued on this thread (UnitScope), for the records' "unit".
thread_local const std::string* current_where = nullptr;
thread_local const std::string* current_kind = nullptr;

}  // namespace

DeviceReport::DeviceReport() {
  const char* path = std::getenv("AMP_CUDA_REPORT");
  if (path) path_ = path;
}

void DeviceReport::record(const std::string& event, const Fields& fields) {
  if (!enabled()) return;
  nlohmann::ordered_json line;
  line["event"] = event;
  line["unit"] = current_where ? *current_where : "";
  line["kind"] = current_kind ? *current_kind : "";
  for (const auto& [key, value] : fields) line[key] = value;
  std::lock_guard<std::mutex> lock(mutex_);
  std::ofstream out(path_, std::ios::app);
  out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

DeviceReport::UnitScope::UnitScope(const std::string& where, const std::string& kind)
    : where_(current_where), kind_(current_kind) {
  current_where = &where;
  current_kind = &kind;
}

DeviceReport::UnitScope::~UnitScope() {
  current_where = where_;
  current_kind = kind_;
}

}  // namespace amp::cuda
