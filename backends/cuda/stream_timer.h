// Milliseconds of device work on a stream, between two events: the measurements that choose
// between ways of running one op while a plan is prepared (convolution algorithms timed here with
// AMP_CUDNN_FIND=top, the casts of a widened weight gradient, the engines of a fused convolution
// graph).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"

namespace amp::cuda {

class StreamTimer {
 public:
  explicit StreamTimer(cudaStream_t stream) : stream_(stream) {
    AMP_CUDA_CHECK(cudaEventCreate(&start_));
    const cudaError_t e = cudaEventCreate(&end_);
    if (e != cudaSuccess) cudaEventDestroy(start_);
    AMP_CUDA_CHECK(e);
  }
  ~StreamTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // Enqueues work() between the two events, waits for the stream, and returns the milliseconds
  // between them.
  template <class Work>
  float time(Work&& work) {
    AMP_CUDA_CHECK(cudaEventRecord(start_, stream_));
    work();
    AMP_CUDA_CHECK(cudaEventRecord(end_, stream_));
    AMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
    float ms = 0.0f;
    AMP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, end_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
};

}  // namespace amp::cuda
