// Training-mode BatchNorm with what follows it in a ResNet — the residual Add and the ReLU — as one
// pass over memory forward and one backward (batch_norm_relu_fusion.h matches the nodes). The
// statistics are fp32 whatever the storage type; the ReLU's mask is kept as bits between the
// two (bit i % 32 of 32-bit word i / 32 is element i's y > 0, in memory order), 1/16 of a bf16
// tensor the backward would otherwise read. Channels are found by position in memory, so the
// same kernels take NCHW ([N, C, H*W]) and channels-last ([N*H*W, C, 1]) data.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// Memory as [outer, channels, inner]: element i is in channel (i / inner) % channels.
struct ChannelGeometry {
  int64_t outer = 0, channels = 0, inner = 0;
  int64_t count() const { return outer * channels * inner; }
  int64_t per_channel() const { return outer * inner; }
};

// Bytes of the ReLU mask of n elements: one bit each, in whole 32-bit words.
inline size_t relu_bits_bytes(int64_t n) { return static_cast<size_t>((n + 31) / 32) * 4; }

// Scratch both directions need: per-block partial sums and the per-channel results, for two
// BatchNorms (the block's and its shortcut's).
size_t batch_norm_relu_workspace(const ChannelGeometry& g, int sm_count);

// y = relu(scale (x - mean) / sqrt(var + eps) + bias [+ z]) with the batch's mean and biased
// variance, rounded once into x's type; running = running_in * momentum + batch * (1 - momentum)
// (ONNX's rule, the biased variance); bits: y > 0 (null: not written). With x2, the shortcut's
// BatchNorm (its own parameters and statistics, x2 of x's shape) takes z's place:
// y = relu(bn(x) + bn2(x2)), and neither sum is stored.
// x, z, y of type t (fp32, fp16, bf16); scale, bias and the statistics fp32. relu false: a plain
// training-mode BatchNormalization (no bits, z or x2), y = bn(x) as the graph rounds it.
struct BatchNormReluForward {
  DType t = DType::kUndefined;
  ChannelGeometry g;
  const void* x = nullptr;
  const void* z = nullptr;
  const float *scale = nullptr, *bias = nullptr, *mean_in = nullptr, *var_in = nullptr;
  void* y = nullptr;
  float *mean_out = nullptr, *var_out = nullptr;
  const void* x2 = nullptr;
  const float *scale2 = nullptr, *bias2 = nullptr, *mean2_in = nullptr, *var2_in = nullptr;
  float *mean2_out = nullptr, *var2_out = nullptr;
  uint32_t* bits = nullptr;
  float epsilon = 1e-5f, momentum = 0.9f;
  bool relu = true;
};
void batch_norm_relu_forward(const BatchNormReluForward& a, void* workspace, int sm_count, cudaStream_t stream);

// The backward of the above with the statistics recomputed from x: g = bit ? dy : 0 (dy itself
// without bits; with dy2, dy + dy2 rounded to the type first, as the Add of two gradients that
// autodiff sums into dy would round it), dbias = sum g, dscale = sum g xhat,
// dx = scale / sqrt(var + eps) (g - dbias/m - xhat dscale/m) over the m values of a channel; dg
// (null: not written) receives g, the gradient of the residual Add's other operand. With x2, the
// shortcut BatchNorm's gradients from the same g too (dx2, dscale2, dbias2). Without bits, sums,
// dy2 and x2 it is a plain BatchNormalization's gradient (g = dy).
struct BatchNormReluBackward {
  DType t = DType::kUndefined;
  ChannelGeometry g;
  const void *dy = nullptr, *dy2 = nullptr;
  const uint32_t* bits = nullptr;
  const void* x = nullptr;
  const float* scale = nullptr;
  void* dx = nullptr;
  float *dscale = nullptr, *dbias = nullptr;
  void* dg = nullptr;
  const void* x2 = nullptr;
  const float* scale2 = nullptr;
  void* dx2 = nullptr;
  float *dscale2 = nullptr, *dbias2 = nullptr;
  float epsilon = 1e-5f;
  // Without bits: the mask recomputed from x, as the convolution that applied this BatchNorm and
  // ReLU in its prologue computed it (conv_batch_norm_fusion.h): y > 0 where
  // round(relu(x * s + b)) > 0, s and b the affine of batch_norm_affine() from `sums` (the
  // forward's per-channel statistics, BatchNormSums layout) and bias.
  const float *sums = nullptr, *bias = nullptr;
};
void batch_norm_relu_backward(const BatchNormReluBackward& a, void* workspace, int sm_count, cudaStream_t stream);

// A BatchNorm whose statistics a convolution's epilogue sums (cuDNN's GenStats) and whose
// normalisation and ReLU the next convolution applies as it reads its input (its prologue): the
// per-channel statistics are stored packed, sum of x then sum of x^2, 2C floats, in place of the
// ReLU's mask (which every reader recomputes from x and them) — BatchNormSums.
inline size_t batch_norm_sums_bytes(int64_t channels) { return static_cast<size_t>(2 * channels) * sizeof(float); }

// The affine the prologue applies, per channel c over m values: mean = sum/m,
// var = max(sum2/m - mean^2, 0) (biased), s = scale / sqrt(var + eps), b = bias - mean s, into
// affine[c] = s and affine[C + c] = b; with mean_out/var_out, the running statistics
// (running * momentum + batch * (1 - momentum), ONNX's rule, as batch_norm_relu_forward).
struct BatchNormAffine {
  int64_t channels = 0;
  float m = 0.0f, epsilon = 1e-5f, momentum = 0.9f;
  const float *sums = nullptr, *scale = nullptr, *bias = nullptr, *mean_in = nullptr, *var_in = nullptr;
  float* affine = nullptr;
  float *mean_out = nullptr, *var_out = nullptr;
};
void batch_norm_affine(const BatchNormAffine& a, int sm_count, cudaStream_t stream);

// The prologue unfused, for a device whose cuDNN takes no such graph: y = round(relu(x s + b))
// with affine from batch_norm_affine, x and y of type t in geometry g.
void batch_norm_relu_apply(DType t, const ChannelGeometry& g, const void* x, const float* affine, void* y, int sm_count,
                           cudaStream_t stream);

// GenStats unfused: sums (BatchNormSums layout) of x of type t; workspace of
// batch_norm_relu_workspace(g).
void batch_norm_sums(DType t, const ChannelGeometry& g, const void* x, float* sums, void* workspace, int sm_count,
                     cudaStream_t stream);

}  // namespace amp::cuda
