#include "backends/cuda/relu_mask_probe.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_context.h"
#include "graph/half.h"

namespace amp::cuda {
namespace {

// 4 rows of 128 columns (one 128-bit mask row each, no padding), k = 8. Row r, column j:
//   pre = bias[j] + x[r, 0] w[0, j], bias[j] = 0, 1, -1, 0.5 by j % 4, x[r, 0] = r % 2,
//   w[0, j] = -1 where j % 4 == 1, else 0:
// even rows 0, 1, -1, 0.5; odd rows 0, 0 (computed 1 - 1), -1, 0.5. Every value and sum is exact
// in fp16, bf16 and fp32. Bits set only at odd positions, and differently in odd and even rows,
// so a mask in another bit order or row layout matches neither convention.
constexpr int64_t kRows = 4, kCols = 128, kDepth = 8;

float bias_of(int64_t j) {
  static const float kBias[4] = {0.0f, 1.0f, -1.0f, 0.5f};
  return kBias[j % 4];
}
float x_of(int64_t r, int64_t i) { return i == 0 ? static_cast<float>(r % 2) : 0.0f; }
float w_of(int64_t i, int64_t j) { return i == 0 && j % 4 == 1 ? -1.0f : 0.0f; }

std::vector<uint8_t> stored(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = t == DType::kFloat16 ? fp32_to_fp16(v[i]) : fp32_to_bf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

DeviceBuffer on_device(const std::vector<uint8_t>& bytes, cudaStream_t stream) {
  DeviceBuffer b(bytes.size());
  AMP_CUDA_CHECK(cudaMemcpyAsync(b.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream));
  return b;
}

// The mask either convention gives, bit r * kCols + j in bit (i % 8) of byte i / 8.
std::vector<uint8_t> expected_mask(bool at_zero) {
  std::vector<uint8_t> mask(kRows * kCols / 8, 0);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kCols; ++j) {
      const float pre = bias_of(j) + x_of(r, 0) * w_of(0, j);
      if (at_zero ? pre >= 0.0f : pre > 0.0f) mask[(r * kCols + j) / 8] |= static_cast<uint8_t>(1u << ((r * kCols + j) % 8));
    }
  return mask;
}

}  // namespace

ReluMaskConvention probe_relu_mask_convention(DType t, cublasLtHandle_t lt, cudaStream_t stream, GemmAlgorithmCache& cache) {
  using Answer = ReluMaskConvention::Answer;
  GemmDesc g;
  g.m = kRows;
  g.n = kCols;
  g.k = kDepth;
  g.ab_type = g.d_type = t;
  g.epilogue = GemmEpilogue::kReluAuxBias;
  ReluMaskConvention c;
  std::unique_ptr<GemmPlan> plan;
  try {
    plan = std::make_unique<GemmPlan>(g, lt, cache);
  } catch (const NoGemmAlgorithm& e) {
    c.detail = std::string("not probed: ") + e.what() + "; relu_mask.cu's kernels write and apply the mask, no DRELU";
    return c;
  }
  std::vector<float> x(kRows * kDepth), w(kDepth * kCols), bias(kCols);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 0; i < kDepth; ++i) x[r * kDepth + i] = x_of(r, i);
  for (int64_t i = 0; i < kDepth; ++i)
    for (int64_t j = 0; j < kCols; ++j) w[i * kCols + j] = w_of(i, j);
  for (int64_t j = 0; j < kCols; ++j) bias[j] = bias_of(j);
  const DeviceBuffer dx = on_device(stored(t, x), stream), dw = on_device(stored(t, w), stream),
                     dbias = on_device(stored(t, bias), stream);
  const DeviceBuffer y(kRows * kCols * dtype_size(t)), mask(gemm_aux_bytes(g.epilogue, t, kRows, kCols)),
      workspace(plan->workspace_bytes());
  AMP_CUDA_CHECK(cudaMemsetAsync(mask.data(), 0, mask.size(), stream));
  plan->enqueue(lt, stream, dx.data(), dw.data(), y.data(), y.data(), dbias.data(), mask.data(), workspace.data());
  std::vector<uint8_t> bits(mask.size());
  AMP_CUDA_CHECK(cudaMemcpyAsync(bits.data(), mask.data(), bits.size(), cudaMemcpyDeviceToHost, stream));
  AMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::string type(dtype_name(t));
  if (bits == expected_mask(false)) {
    c.answer = Answer::kGreaterThanZero;
    c.detail = "cuBLASLt's ReLU mask (" + type +
               ") has its bit set where x > 0, as the graph's Greater(y, 0): RELU_AUX_BIAS used";
  } else if (bits == expected_mask(true)) {
    c.answer = Answer::kGreaterOrEqualZero;
    c.detail = "cuBLASLt's ReLU mask (" + type +
               ") has its bit set where x >= 0, unlike the graph's Greater(y, 0): write_relu_mask after RELU_BIAS "
               "writes it instead; DRELU still reads it";
  } else {
    c.answer = Answer::kOtherLayout;
    c.detail = "cuBLASLt's ReLU mask (" + type +
               ") is in another layout than bit i % 8 of byte i / 8: relu_mask.cu's kernels write and apply it, "
               "no RELU_AUX_BIAS or DRELU";
  }
  return c;
}

}  // namespace amp::cuda
