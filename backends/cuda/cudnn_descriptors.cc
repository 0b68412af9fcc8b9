#include "backends/cuda/cudnn_descriptors.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layout_strides.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

std::vector<int> to_int(const std::vector<int64_t>& v) {
  std::vector<int> out;
  for (int64_t x : v) {
    if (x > INT32_MAX) throw InputError("a dim of " + std::to_string(x) + " is beyond cuDNN's 32-bit sizes");
    out.push_back(static_cast<int>(x));
  }
  while (out.size() < 4) out.push_back(1);
  return out;
}

}  // namespace

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::kFloat: return CUDNN_DATA_FLOAT;
    case DType::kFloat16: return CUDNN_DATA_HALF;
    case DType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: throw InputError("cuDNN takes float, float16 or bfloat16, not " + std::string(dtype_name(t)));
  }
}

CudnnTensor::CudnnTensor(DType t, std::vector<int64_t> dims, bool channels_last) {
  while (dims.size() < 4) dims.push_back(1);  // as to_int pads them, before the strides
  const std::vector<int> d = to_int(dims), s = to_int(layout_strides(dims, channels_last));
  AMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
  AMP_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d_, cudnn_type(t), static_cast<int>(d.size()), d.data(), s.data()));
}

CudnnTensor::~CudnnTensor() {
  if (d_) cudnnDestroyTensorDescriptor(d_);
}

CudnnFilter::CudnnFilter(DType t, std::vector<int64_t> dims, bool channels_last) {
  const std::vector<int> d = to_int(dims);
  AMP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_));
  AMP_CUDNN_CHECK(cudnnSetFilterNdDescriptor(d_, cudnn_type(t), channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                             static_cast<int>(d.size()), d.data()));
}

CudnnFilter::~CudnnFilter() {
  if (d_) cudnnDestroyFilterDescriptor(d_);
}

CudnnConvolution::CudnnConvolution(const std::vector<int>& pads, const std::vector<int>& strides,
                                   const std::vector<int>& dilations, int groups, DType data, bool tf32) {
  AMP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_));
  AMP_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d_, static_cast<int>(pads.size()), pads.data(), strides.data(),
                                                  dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  AMP_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d_, groups));
  const cudnnMathType_t math = data == DType::kFloat ? (tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH) : CUDNN_TENSOR_OP_MATH;
  AMP_CUDNN_CHECK(cudnnSetConvolutionMathType(d_, math));
}

CudnnConvolution::~CudnnConvolution() {
  if (d_) cudnnDestroyConvolutionDescriptor(d_);
}

CudnnActivation::CudnnActivation(cudnnActivationMode_t mode) {
  AMP_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_));
  AMP_CUDNN_CHECK(cudnnSetActivationDescriptor(d_, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
}

CudnnActivation::~CudnnActivation() {
  if (d_) cudnnDestroyActivationDescriptor(d_);
}

CudnnPooling::CudnnPooling(cudnnPoolingMode_t mode, const std::vector<int>& window, const std::vector<int>& pads,
                           const std::vector<int>& strides) {
  AMP_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_));
  AMP_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(window.size()),
                                              window.data(), pads.data(), strides.data()));
}

CudnnPooling::~CudnnPooling() {
  if (d_) cudnnDestroyPoolingDescriptor(d_);
}

}  // namespace amp::cuda
