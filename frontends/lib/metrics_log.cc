#include "frontends/lib/metrics_log.h"

#include "graph/error.h"

namespace amp {

MetricsLog::MetricsLog(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw InputError(path + ": cannot open for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace amp
