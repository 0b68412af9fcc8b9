#include "backends/cuda/cuda_check.h"

#include <string>

#include "graph/error.h"

namespace amp::cuda {
namespace {

[[noreturn]] void fail(const std::string& library, const std::string& status, const char* call, const char* file,
                       int line) {
  throw Error(library + " error " + status + " in " + call + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call does not report it again
  fail("CUDA", std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")", call, file, line);
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLAS", std::to_string(static_cast<int>(status)) + " (" + cublasLtGetStatusString(status) + ")", call, file, line);
}

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  fail("cuDNN", cudnnGetErrorString(status), call, file, line);
}

}  // namespace amp::cuda
