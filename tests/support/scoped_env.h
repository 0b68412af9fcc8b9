// An environment variable set for a scope, then restored: the CUDA stand-ins' AMP_STANDIN_* knobs,
// the algorithm store's folder, AMP_CUDA_REPORT (which .ci/gpu_run.sh may have set for the whole
// run).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace amp::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace amp::test
