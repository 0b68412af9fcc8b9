// The fallback attention kernels (attention.cuh): one thread per row, 128 threads a block.
// Forward: query row i keeps its running maximum m, sum l and output accumulator, rescaled by
// exp(m_old - m_new) when a key raises the maximum. Backward (FlashAttention's, by rows): D_i =
// sum dY_i Y_i; per query row dQ_i = scale sum_j dS_ij K_j; per key row dV_j = sum_i P_ij dY_i and
// dK_j = scale sum_i dS_ij Q_i, with P_ij = exp(S_ij - LSE_i) and dS_ij = P_ij (dY_i . V_j - D_i).
#include "backends/cuda/attention.cuh"

#include <algorithm>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ int64_t mask_offset(const AttentionShape& s, int64_t b) {
  int64_t off = 0;
  for (int a = s.lead - 1; a >= 0; --a) {
    off += (b % s.lead_dims[a]) * s.mask_lead_stride[a];
    b /= s.lead_dims[a];
  }
  return off;
}

// What the mask adds to the score at `at`: 0 or -inf for a bool mask, else its value.
__device__ __forceinline__ float mask_term(const void* m, DType t, int64_t at) {
  switch (t) {
    case DType::kBool: return static_cast<const bool*>(m)[at] ? 0.0f : -INFINITY;
    case DType::kFloat: return static_cast<const float*>(m)[at];
    case DType::kFloat16: return to_float(static_cast<const __half*>(m)[at]);
    case DType::kBFloat16: return to_float(static_cast<const __nv_bfloat16*>(m)[at]);
    default: return 0.0f;
  }
}

// x as the T operand of a tensor-core product holds it.
template <class T>
__device__ __forceinline__ float as_operand(float x) {
  return to_float(from_float<T>(x));
}

// The score of query row qr (fp32, d wide) against key j of batch b: scale q.k plus the mask,
// -inf where hidden.
template <class T>
__device__ __forceinline__ float score(const AttentionShape& s, const float* qr, const T* k, const void* mask,
                                       int64_t b, int64_t i, int64_t j, int64_t moff) {
  if (s.causal && j > i) return -INFINITY;
  const T* kp = k + (b * s.tk + j) * s.d;
  float dot = 0;
  for (int64_t c = 0; c < s.d; ++c) dot += qr[c] * to_float(kp[c]);
  float sc = dot * s.scale;
  if (mask) sc += mask_term(mask, s.mask_type, moff + i * s.mask_row + j * s.mask_col);
  return sc;
}

template <class T>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                           const T* __restrict__ v, const void* __restrict__ mask,
                                                           T* __restrict__ y, float* __restrict__ lse,
                                                           AttentionShape s) {
  const int64_t b = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= s.tq) return;
  float qr[AttentionShape::kMaxHead], acc[AttentionShape::kMaxHead];
  for (int64_t c = 0; c < s.d; ++c) qr[c] = to_float(q[(b * s.tq + i) * s.d + c]);
  for (int64_t c = 0; c < s.dv; ++c) acc[c] = 0;
  const int64_t moff = mask ? mask_offset(s, b) : 0;
  const int64_t seen = s.causal ? min(s.tk, i + 1) : s.tk;
  float m = -INFINITY, l = 0;
  for (int64_t j = 0; j < seen; ++j) {
    const float sc = score(s, qr, k, mask, b, i, j, moff);
    if (sc == -INFINITY) continue;
    if (sc > m) {
      const float rescale = expf(m - sc);
      l *= rescale;
      for (int64_t c = 0; c < s.dv; ++c) acc[c] *= rescale;
      m = sc;
    }
    const float p = expf(sc - m);
    l += p;
    const float operand = as_operand<T>(p);
    const T* vp = v + (b * s.tk + j) * s.dv;
    for (int64_t c = 0; c < s.dv; ++c) acc[c] += operand * to_float(vp[c]);
  }
  // Every key hidden: l = 0 and Y = 0/0, NaN, as the unfused Softmax gives.
  for (int64_t c = 0; c < s.dv; ++c) y[(b * s.tq + i) * s.dv + c] = from_float<T>(acc[c] / l);
  if (lse) lse[b * s.tq + i] = m + logf(l);
}

template <class T>
__global__ void __launch_bounds__(kThreads) row_dot_kernel(const T* __restrict__ dy, const T* __restrict__ y,
                                                           float* __restrict__ out, AttentionShape s) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= s.batch * s.tq) return;
  float dot = 0;
  for (int64_t c = 0; c < s.dv; ++c) dot += to_float(dy[r * s.dv + c]) * to_float(y[r * s.dv + c]);
  out[r] = dot;
}

template <class T>
__global__ void __launch_bounds__(kThreads) dq_kernel(const T* __restrict__ dy, const T* __restrict__ q,
                                                      const T* __restrict__ k, const T* __restrict__ v,
                                                      const float* __restrict__ lse, const float* __restrict__ rowdot,
                                                      const void* __restrict__ mask, T* __restrict__ dq,
                                                      AttentionShape s) {
  const int64_t b = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= s.tq) return;
  float qr[AttentionShape::kMaxHead], dyr[AttentionShape::kMaxHead], acc[AttentionShape::kMaxHead];
  for (int64_t c = 0; c < s.d; ++c) {
    qr[c] = to_float(q[(b * s.tq + i) * s.d + c]);
    acc[c] = 0;
  }
  for (int64_t c = 0; c < s.dv; ++c) dyr[c] = to_float(dy[(b * s.tq + i) * s.dv + c]);
  const int64_t moff = mask ? mask_offset(s, b) : 0;
  const int64_t seen = s.causal ? min(s.tk, i + 1) : s.tk;
  const float row_lse = lse[b * s.tq + i], row_dot = rowdot[b * s.tq + i];
  for (int64_t j = 0; j < seen; ++j) {
    const float sc = score(s, qr, k, mask, b, i, j, moff);
    if (sc == -INFINITY) continue;
    const float p = expf(sc - row_lse);
    const T* vp = v + (b * s.tk + j) * s.dv;
    float dp = 0;
    for (int64_t c = 0; c < s.dv; ++c) dp += dyr[c] * to_float(vp[c]);
    const float ds = as_operand<T>(p * (dp - row_dot)) * s.scale;
    const T* kp = k + (b * s.tk + j) * s.d;
    for (int64_t c = 0; c < s.d; ++c) acc[c] += ds * to_float(kp[c]);
  }
  for (int64_t c = 0; c < s.d; ++c) dq[(b * s.tq + i) * s.d + c] = from_float<T>(acc[c]);
}

template <class T>
__global__ void __launch_bounds__(kThreads) dkv_kernel(const T* __restrict__ dy, const T* __restrict__ q,
                                                       const T* __restrict__ k, const T* __restrict__ v,
                                                       const float* __restrict__ lse, const float* __restrict__ rowdot,
                                                       const void* __restrict__ mask, T* __restrict__ dk,
                                                       T* __restrict__ dv, AttentionShape s) {
  const int64_t b = blockIdx.y, j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= s.tk) return;
  float vr[AttentionShape::kMaxHead], dka[AttentionShape::kMaxHead], dva[AttentionShape::kMaxHead];
  float qr[AttentionShape::kMaxHead];
  for (int64_t c = 0; c < s.d; ++c) dka[c] = 0;
  for (int64_t c = 0; c < s.dv; ++c) {
    vr[c] = to_float(v[(b * s.tk + j) * s.dv + c]);
    dva[c] = 0;
  }
  const int64_t moff = mask ? mask_offset(s, b) : 0;
  for (int64_t i = s.causal ? j : 0; i < s.tq; ++i) {
    for (int64_t c = 0; c < s.d; ++c) qr[c] = to_float(q[(b * s.tq + i) * s.d + c]);
    const float sc = score(s, qr, k, mask, b, i, j, moff);
    if (sc == -INFINITY) continue;
    const float p = expf(sc - lse[b * s.tq + i]);
    const float p_operand = as_operand<T>(p);
    const T* dyp = dy + (b * s.tq + i) * s.dv;
    float dp = 0;
    for (int64_t c = 0; c < s.dv; ++c) {
      const float g = to_float(dyp[c]);
      dp += g * vr[c];
      dva[c] += p_operand * g;
    }
    const float ds = as_operand<T>(p * (dp - rowdot[b * s.tq + i])) * s.scale;
    for (int64_t c = 0; c < s.d; ++c) dka[c] += ds * qr[c];
  }
  if (dk)
    for (int64_t c = 0; c < s.d; ++c) dk[(b * s.tk + j) * s.d + c] = from_float<T>(dka[c]);
  if (dv)
    for (int64_t c = 0; c < s.dv; ++c) dv[(b * s.tk + j) * s.dv + c] = from_float<T>(dva[c]);
}

template <class T>
__global__ void __launch_bounds__(kThreads) mask_bias_kernel(const void* __restrict__ mask, DType mask_type,
                                                             T* __restrict__ bias, float lowest, int64_t n,
                                                             int64_t rows, int64_t cols, bool mask_rows,
                                                             bool mask_cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / (rows * cols), r = i / cols % rows, c = i % cols;
    const int64_t from = (o * (mask_rows ? rows : 1) + (mask_rows ? r : 0)) * (mask_cols ? cols : 1) + (mask_cols ? c : 0);
    const float term = mask_term(mask, mask_type, from);
    bias[i] = from_float<T>(term == -INFINITY && mask_type == DType::kBool ? lowest : term);
  }
}

dim3 rows_grid(int64_t rows, int64_t batch) {
  return dim3(static_cast<unsigned>((rows + kThreads - 1) / kThreads), static_cast<unsigned>(batch));
}

}  // namespace

void attention_forward(DType t, const void* q, const void* k, const void* v, const void* mask, void* y, float* lse,
                       const AttentionShape& s, cudaStream_t stream) {
  if (s.batch * s.tq * s.dv == 0) return;
  dispatch_float(t, "Attention", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<rows_grid(s.tq, s.batch), kThreads, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask, static_cast<T*>(y), lse, s);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void attention_mask_bias(DType mask_type, const void* mask, DType t, void* bias, int64_t outer, int64_t rows,
                         int64_t cols, bool mask_rows, bool mask_cols, cudaStream_t stream) {
  const int64_t n = outer * rows * cols;
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  dispatch_float(t, "Attention", [&](auto tag) {
    using T = decltype(tag);
    // fp16's lowest finite value is -65504, bf16's -3.39e38: exp() of either minus a row's maximum is 0.
    const float lowest = std::is_same_v<T, __half> ? -65504.0f : std::is_same_v<T, float> ? -3.4028235e38f : -3.3895314e38f;
    mask_bias_kernel<T><<<blocks, kThreads, 0, stream>>>(mask, mask_type, static_cast<T*>(bias), lowest, n, rows, cols,
                                                          mask_rows, mask_cols);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

size_t attention_backward_workspace(const AttentionShape& s) {
  return static_cast<size_t>(s.batch * s.tq) * sizeof(float);
}

void attention_backward(DType t, const void* dy, const void* q, const void* k, const void* v, const void* y,
                        const float* lse, const void* mask, void* dq, void* dk, void* dv, const AttentionShape& s,
                        void* workspace, cudaStream_t stream) {
  if (s.batch * s.tq * s.tk == 0) return;
  float* rowdot = static_cast<float*>(workspace);
  dispatch_float(t, "AttentionGrad", [&](auto tag) {
    using T = decltype(tag);
    const T *dyp = static_cast<const T*>(dy), *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v);
    row_dot_kernel<T><<<static_cast<unsigned>((s.batch * s.tq + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        dyp, static_cast<const T*>(y), rowdot, s);
    if (dq)
      dq_kernel<T><<<rows_grid(s.tq, s.batch), kThreads, 0, stream>>>(dyp, qp, kp, vp, lse, rowdot, mask,
                                                                       static_cast<T*>(dq), s);
    if (dk || dv)
      dkv_kernel<T><<<rows_grid(s.tk, s.batch), kThreads, 0, stream>>>(dyp, qp, kp, vp, lse, rowdot, mask,
                                                                        static_cast<T*>(dk), static_cast<T*>(dv), s);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
