// The CUDA backend's switches for comparing its paths on a device (AMP_CUDA_CUDNN_DEPTHWISE=1 keeps
// cuDNN's depthwise convolutions, ...): a switch is on when its variable is set to exactly "1".
#pragma once

#include <cstdlib>
#include <cstring>

namespace amp::cuda {

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace amp::cuda
