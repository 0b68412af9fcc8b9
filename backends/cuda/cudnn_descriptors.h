// cuDNN descriptors owned by C++ objects (destroyed with them), and the layouts the ops use:
// ONNX tensors are NCHW-contiguous, given to cuDNN as N-d descriptors with packed strides; a
// channels-last one (TensorDesc::channels_last) keeps its dims in ONNX's order with NHWC's strides,
// and a channels-last filter is CUDNN_TENSOR_NHWC's KRSC.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

cudnnDataType_t cudnn_type(DType t);  // InputError for a type cuDNN does not compute in

class CudnnTensor {
 public:
  // A packed tensor; fewer than 4 dims are padded with trailing 1s (cuDNN wants at least 4).
  // channels_last: dims [N, C, spatial...] stored N, spatial..., C (NHWC strides).
  CudnnTensor(DType t, std::vector<int64_t> dims, bool channels_last = false);
  ~CudnnTensor();
  CudnnTensor(const CudnnTensor&) = delete;
  CudnnTensor& operator=(const CudnnTensor&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class CudnnFilter {
 public:
  // dims [K, C/groups, spatial...], stored so (CUDNN_TENSOR_NCHW) or, channels_last, as K,
  // spatial..., C/groups (CUDNN_TENSOR_NHWC: KRSC for 4-D); cuDNN takes the dims in this order
  // either way.
  CudnnFilter(DType t, std::vector<int64_t> dims, bool channels_last = false);
  ~CudnnFilter();
  CudnnFilter(const CudnnFilter&) = delete;
  CudnnFilter& operator=(const CudnnFilter&) = delete;
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class CudnnConvolution {
 public:
  // Symmetric padding per spatial dim; compute in fp32 (16-bit data accumulates in fp32); Tensor
  // Core math for 16-bit data, and for fp32 only when TF32 is allowed.
  CudnnConvolution(const std::vector<int>& pads, const std::vector<int>& strides, const std::vector<int>& dilations,
                   int groups, DType data, bool tf32);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

// An activation for cudnnConvolutionBiasActivationForward: RELU or IDENTITY, the two it fuses. NaNs
// are not propagated (CUDNN_NOT_PROPAGATE_NAN), the only setting that function documents for
// reluNanOpt: a fused ReLU maps NaN to 0, as cuBLASLt's RELU epilogue does.
class CudnnActivation {
 public:
  explicit CudnnActivation(cudnnActivationMode_t mode);
  ~CudnnActivation();
  CudnnActivation(const CudnnActivation&) = delete;
  CudnnActivation& operator=(const CudnnActivation&) = delete;
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_ = nullptr;
};

class CudnnPooling {
 public:
  CudnnPooling(cudnnPoolingMode_t mode, const std::vector<int>& window, const std::vector<int>& pads,
               const std::vector<int>& strides);
  ~CudnnPooling();
  CudnnPooling(const CudnnPooling&) = delete;
  CudnnPooling& operator=(const CudnnPooling&) = delete;
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

}  // namespace amp::cuda
