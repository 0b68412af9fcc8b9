// Which ReLU mask this device's cuBLASLt writes. cublasLt.h documents the RELU_AUX epilogues'
// output only as "ReLu bit-mask" with a row length (AUX_LD) in bits: not whether the bit is set
// at exactly 0, nor the order of the bits in a byte. A public probe suggests cuBLASLt sets it for
// x >= 0. The graph's ReLU backward, Where(Greater(y, 0), dY, 0), the CPU backend and this
// backend's mask kernels (relu_mask.cuh) zero the gradient where the pre-activation is exactly 0;
// a mask set there would let DRELU pass dY through. So rather than guess, the first RELU_AUX_BIAS
// product of a type on a device is preceded by a tiny one whose pre-activations are positive,
// negative and exactly 0 (as given and as a computed 1 - 1), and its mask is compared with both
// conventions in the layout relu_mask.cuh writes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/gemm.h"
#include "graph/dtype.h"

namespace amp::cuda {

struct ReluMaskConvention {
  enum class Answer {
    kGreaterThanZero,         // the graph's Greater(y, 0), in relu_mask.cuh's layout
    kGreaterOrEqualZero,      // set at exactly 0 too, same layout
    kOtherLayout,             // neither: bits elsewhere than bit i % 8 of byte i / 8
    kNoAlgorithm,             // cuBLASLt had no RELU_AUX_BIAS algorithm for the probe
  };
  Answer answer = Answer::kNoAlgorithm;
  std::string detail;  // what was found, in words, for the log and the device report

  // RELU_AUX_BIAS may write a mask that Where(Greater(y, 0), ...) reads.
  bool writer_matches() const { return answer == Answer::kGreaterThanZero; }
  // DRELU(_BGRAD) reads masks in relu_mask.cuh's layout (which write_relu_mask writes when
  // RELU_AUX_BIAS may not): whichever bit it sets at 0, it applies the bits it is given.
  bool reader_matches() const { return answer == Answer::kGreaterThanZero || answer == Answer::kGreaterOrEqualZero; }
};

// Runs the probe's product of type t on `stream` and waits for it (never while capturing).
ReluMaskConvention probe_relu_mask_convention(DType t, cublasLtHandle_t lt, cudaStream_t stream, GemmAlgorithmCache& cache);

}  // namespace amp::cuda
