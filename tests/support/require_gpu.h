// REQUIRE_GPU(): skips a test that needs a CUDA device, saying why there is none
// (cuda::CudaBackend::available). Without one, the device-free half of such a test has run first.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_backend.h"

#define REQUIRE_GPU()                                                                                \
  do {                                                                                               \
    std::string why_no_device;                                                                       \
    if (!::amp::cuda::CudaBackend().available(&why_no_device))                                       \
      GTEST_SKIP() << "no usable CUDA device: " << why_no_device;                                    \
  } while (0)
