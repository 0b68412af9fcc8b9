// Turning CUDA, cuBLAS(Lt) and cuDNN status codes into amp::Error with the call, file and line,
// so a failed launch says which API call failed and why instead of surfacing later as garbage.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace amp::cuda {

void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line);

// Whether cuDNN refused a call, as against failing it: cuDNN 9 refuses with any status of the
// NOT_SUPPORTED category, 3000 to 3014 (cudnn_graph.h: CUDNN_STATUS_NOT_SUPPORTED_SHAPE, _DATA_TYPE,
// _LAYOUT, _ARCH_MISMATCH, ...; CUDNN_STATUS_CATEGORY() groups them), where cuDNN 8 had only
// CUDNN_STATUS_NOT_SUPPORTED.
inline bool cudnn_refused(cudnnStatus_t status) { return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED; }

}  // namespace amp::cuda

#define AMP_CUDA_CHECK(call) ::amp::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define AMP_CUBLAS_CHECK(call) ::amp::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define AMP_CUDNN_CHECK(call) ::amp::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
