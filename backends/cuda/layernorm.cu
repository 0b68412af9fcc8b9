// LayerNorm forward and backward. A warp per row for rows of a multiple of 8 up to 1024 elements
// (forward_warp_rows, backward_warp_rows), else a block per row; the statistics are the mean first, then the
// variance of (x - mean), because E[x^2] - E[x]^2 cancels catastrophically in fp32 once |mean| is
// large against the spread. Rows of up to 1024 elements are read once into registers (kPer);
// longer ones are read twice for the statistics and once more to write, from L2. The backward recomputes mean and 1/std rather
// than storing them, and sums dscale/dbias over rows without atomics: each block accumulates its
// rows into its own line of a [blocks, cols] scratch, a second kernel adds the lines up, so the
// gradients are the same bits on every run.
#include "backends/cuda/layernorm.cuh"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;
// Rows of up to kPer * kThreads elements (GPT-2's 768, up to 1024) are read once into registers,
// kPer a thread, and the backward keeps each thread's dscale/dbias sums there across its rows: on
// an H100 (2026-11-27) the backward, which read each row three times and added into its global
// scratch line at every row, took 129 us a call for GPT-2-small's [8192, 768] (25 a step, 3.2 ms),
// about ten times what its bytes take. The same operations in the same order as before.
constexpr int kPer = 4;

// The backward's epilogue (LayerNormResidual): dX plus the gradient reaching the same value by
// its other path (the residual stream's), added in fp32 as the graph's Add does (no contraction
// with the product before it), and that sum also stored narrowed where a Cast reads it.
struct Residual {
  const float* add = nullptr;  // [rows, cols] fp32, or null
  void* narrowed = nullptr;    // [rows, cols] of narrowed_type (float16 or bfloat16), or null
  DType narrowed_type = DType::kUndefined;
};

__device__ __forceinline__ float plus_residual(float v, const float* add, int64_t at) {
  return add ? __fadd_rn(v, add[at]) : v;
}

__device__ __forceinline__ void store_narrowed(const Residual& res, int64_t at, float v) {
  if (!res.narrowed) return;
  if (res.narrowed_type == DType::kBFloat16) static_cast<__nv_bfloat16*>(res.narrowed)[at] = from_float<__nv_bfloat16>(v);
  else static_cast<__half*>(res.narrowed)[at] = from_float<__half>(v);
}

__device__ __forceinline__ void store8_narrowed(const Residual& res, int64_t at, const float (&v)[8]) {
  if (!res.narrowed) return;
  if (res.narrowed_type == DType::kBFloat16) store8(static_cast<__nv_bfloat16*>(res.narrowed) + at, v);
  else store8(static_cast<__half*>(res.narrowed) + at, v);
}

// The forward's prologue (LayerNormResidual): x + other, the residual stream's Add before the
// LayerNorm, in fp32 as the graph's Add computes it, its sum stored where the graph reads it.
struct ResidualIn {
  const void* other = nullptr;  // [rows, cols] of other_type (any float type), or null
  DType other_type = DType::kUndefined;
  float* sum = nullptr;         // [rows, cols], or null
};

__device__ __forceinline__ float other_at(const ResidualIn& res, int64_t at) {
  switch (res.other_type) {
    case DType::kFloat16: return to_float(static_cast<const __half*>(res.other)[at]);
    case DType::kBFloat16: return to_float(static_cast<const __nv_bfloat16*>(res.other)[at]);
    default: return static_cast<const float*>(res.other)[at];
  }
}

__device__ __forceinline__ void other8(const ResidualIn& res, int64_t at, float (&v)[8]) {
  switch (res.other_type) {
    case DType::kFloat16: load8(static_cast<const __half*>(res.other) + at, v); break;
    case DType::kBFloat16: load8(static_cast<const __nv_bfloat16*>(res.other) + at, v); break;
    default: load8(static_cast<const float*>(res.other) + at, v); break;
  }
}

template <class T>
__device__ void row_statistics(const T* row, int64_t cols, float epsilon, float* scratch, float* mean_out,
                               float* inv_std_out) {
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += to_float(row[c]);
  const float mean = block_sum(sum, scratch) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_float(row[c]) - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, scratch) / static_cast<float>(cols);
  *mean_out = mean;
  *inv_std_out = rsqrtf(var + epsilon);
}

// TX, TY: the storage types of x and y; T: scale and bias (float when they differ).
template <class TX, class T, class TY>
__global__ void forward_kernel(const TX* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                               TY* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ inv_std_out,
                               int64_t cols, float epsilon, ResidualIn res) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const TX* row = x + r * cols;
  TY* out = y + r * cols;
  float mean, inv_std;
  if (cols <= kPer * static_cast<int64_t>(blockDim.x)) {
    float v[kPer], sum = 0.0f;
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
      v[k] = c < cols ? to_float(row[c]) : 0.0f;
      if (res.other && c < cols) {
        v[k] = __fadd_rn(v[k], other_at(res, r * cols + c));
        if (res.sum) res.sum[r * cols + c] = v[k];
      }
      sum += v[k];
    }
    mean = block_sum(sum, scratch) / static_cast<float>(cols);
    float sq = 0.0f;
    for (int k = 0; k < kPer; ++k)
      if (threadIdx.x + k * static_cast<int64_t>(blockDim.x) < cols) sq += (v[k] - mean) * (v[k] - mean);
    inv_std = rsqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + epsilon);
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
      if (c < cols)
        out[c] = from_float<TY>((v[k] - mean) * inv_std * to_float(scale[c]) + (bias ? to_float(bias[c]) : 0.0f));
    }
  } else {
    row_statistics(row, cols, epsilon, scratch, &mean, &inv_std);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = (to_float(row[c]) - mean) * inv_std * to_float(scale[c]) + (bias ? to_float(bias[c]) : 0.0f);
      out[c] = from_float<TY>(v);
    }
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[r] = mean;
    if (inv_std_out) inv_std_out[r] = inv_std;
  }
}

// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale; partial[block][c]
// collects dy * xhat (first cols) and dy (next cols) over the block's rows. TDY, TDX: the storage
// types of dy and dx; T: x and scale (float when they differ).
template <class TDY, class T, class TDX>
__global__ void backward_kernel(const TDY* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ scale,
                                TDX* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols,
                                float epsilon, Residual res) {
  __shared__ float scratch[32];
  float* mine = partial + blockIdx.x * 2 * cols;
  if (cols <= kPer * static_cast<int64_t>(blockDim.x)) {
    float sum_s[kPer], sum_b[kPer], sc[kPer];
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
      sum_s[k] = sum_b[k] = 0.0f;
      sc[k] = c < cols ? to_float(scale[c]) : 0.0f;
    }
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
      float xv[kPer], d[kPer], sum = 0.0f;
      for (int k = 0; k < kPer; ++k) {
        const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
        xv[k] = c < cols ? to_float(x[r * cols + c]) : 0.0f;
        d[k] = c < cols ? to_float(dy[r * cols + c]) : 0.0f;
        sum += xv[k];
      }
      const float mean = block_sum(sum, scratch) / static_cast<float>(cols);
      float sq = 0.0f;
      for (int k = 0; k < kPer; ++k)
        if (threadIdx.x + k * static_cast<int64_t>(blockDim.x) < cols) sq += (xv[k] - mean) * (xv[k] - mean);
      const float inv_std = rsqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + epsilon);
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (int k = 0; k < kPer; ++k) {
        if (threadIdx.x + k * static_cast<int64_t>(blockDim.x) >= cols) continue;
        xv[k] = (xv[k] - mean) * inv_std;  // xhat from here on
        const float g = d[k] * sc[k];
        sum_g += g;
        sum_gx += g * xv[k];
        sum_s[k] += d[k] * xv[k];
        sum_b[k] += d[k];
      }
      const float mean_g = block_sum(sum_g, scratch) / static_cast<float>(cols);
      const float mean_gx = block_sum(sum_gx, scratch) / static_cast<float>(cols);
      for (int k = 0; k < kPer; ++k) {
        const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
        if (c >= cols) continue;
        const float v = plus_residual(inv_std * (d[k] * sc[k] - mean_g - xv[k] * mean_gx), res.add, r * cols + c);
        dx[r * cols + c] = from_float<TDX>(v);
        store_narrowed(res, r * cols + c, v);
      }
    }
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = threadIdx.x + k * static_cast<int64_t>(blockDim.x);
      if (c < cols) {
        mine[c] = sum_s[k];
        mine[cols + c] = sum_b[k];
      }
    }
    return;
  }
  for (int64_t c = threadIdx.x; c < 2 * cols; c += blockDim.x) mine[c] = 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    const TDY* dyr = dy + r * cols;
    float mean, inv_std;
    row_statistics(xr, cols, epsilon, scratch, &mean, &inv_std);
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (to_float(xr[c]) - mean) * inv_std;
      const float d = to_float(dyr[c]);
      const float g = d * to_float(scale[c]);
      sum_g += g;
      sum_gx += g * xhat;
      mine[c] += d * xhat;
      mine[cols + c] += d;
    }
    const float mean_g = block_sum(sum_g, scratch) / static_cast<float>(cols);
    const float mean_gx = block_sum(sum_gx, scratch) / static_cast<float>(cols);
    TDX* dxr = dx + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (to_float(xr[c]) - mean) * inv_std;
      const float g = to_float(dyr[c]) * to_float(scale[c]);
      const float v = plus_residual(inv_std * (g - mean_g - xhat * mean_gx), res.add, r * cols + c);
      dxr[c] = from_float<TDX>(v);
      store_narrowed(res, r * cols + c, v);
    }
  }
}

// Rows of a multiple of 8 elements, up to kWarpGroups * 32 * 8 (GPT-2's 768): a warp per row, each
// lane 8 neighbouring elements at a time with vector loads and stores, the row's sums by warp
// shuffles — no __syncthreads per row. The block-per-row kernels above spent their time in
// barriers: 4 block-wide sums a row (forward 2), 256 threads for 768 elements; on an H100
// (2026-11-27) the backward took 129 us a call for GPT-2-small's [8192, 768] rows, the forward
// 29 us, where their bytes take about 15 and 11. Lane l takes elements (g * 32 + l) * 8 onwards
// for g < kWarpGroups; the backward keeps its dscale/dbias sums there across the warp's rows, and
// the block's warps add theirs into the block's line of the scratch in warp order (the same bits
// every run).
constexpr int kWarpGroups = 4;

bool warp_rows(int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols <= 0 || cols % 8 != 0 || cols > kWarpGroups * 32 * 8) return false;
  for (const void* p : pointers)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// The row's mean and 1 / sqrt(var + epsilon), the variance of (x - mean), from each lane's groups
// (v[g] where its columns exist), for every lane of the warp.
__device__ __forceinline__ void warp_row_statistics(const float (&v)[kWarpGroups][8], int lane, int64_t cols,
                                                    float epsilon, float* mean, float* inv_std) {
  float sum = 0.0f;
  for (int g = 0; g < kWarpGroups; ++g) {
    if ((g * 32 + lane) * 8 >= cols) continue;
    for (int j = 0; j < 8; ++j) sum += v[g][j];
  }
  const float m = warp_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int g = 0; g < kWarpGroups; ++g) {
    if ((g * 32 + lane) * 8 >= cols) continue;
    for (int j = 0; j < 8; ++j) sq += (v[g][j] - m) * (v[g][j] - m);
  }
  *mean = m;
  *inv_std = rsqrtf(warp_sum(sq) / static_cast<float>(cols) + epsilon);
}

template <class TX, class T, class TY>
__global__ void __launch_bounds__(kThreads)
    forward_warp_rows(const TX* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                      TY* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ inv_std_out, int64_t rows,
                      int64_t cols, float epsilon, ResidualIn res) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    float v[kWarpGroups][8];
    for (int g = 0; g < kWarpGroups; ++g) {
      const int64_t c0 = (g * 32 + lane) * 8;
      if (c0 >= cols) continue;
      load8(x + r * cols + c0, v[g]);
      if (res.other) {
        float w[8];
        other8(res, r * cols + c0, w);
        for (int j = 0; j < 8; ++j) v[g][j] = __fadd_rn(v[g][j], w[j]);
        if (res.sum) store8(res.sum + r * cols + c0, v[g]);
      }
    }
    float mean, inv_std;
    warp_row_statistics(v, lane, cols, epsilon, &mean, &inv_std);
    for (int g = 0; g < kWarpGroups; ++g) {
      const int64_t c0 = (g * 32 + lane) * 8;
      if (c0 >= cols) continue;
      float sc[8], b[8] = {};
      load8(scale + c0, sc);
      if (bias) load8(bias + c0, b);
      float out[8];
      for (int j = 0; j < 8; ++j) out[j] = (v[g][j] - mean) * inv_std * sc[j] + b[j];
      store8(y + r * cols + c0, out);
    }
    if (lane == 0) {
      if (mean_out) mean_out[r] = mean;
      if (inv_std_out) inv_std_out[r] = inv_std;
    }
  }
}

template <class TDY, class T, class TDX>
__global__ void __launch_bounds__(kThreads)
    backward_warp_rows(const TDY* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ scale,
                       TDX* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols, float epsilon,
                       Residual res) {
  __shared__ float line[2 * kWarpGroups * 32 * 8];  // the block's dscale and dbias sums
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, block_warps = blockDim.x / 32;
  float ds[kWarpGroups][8], db[kWarpGroups][8], sc[kWarpGroups][8];
  for (int g = 0; g < kWarpGroups; ++g) {
    const int64_t c0 = (g * 32 + lane) * 8;
    for (int j = 0; j < 8; ++j) ds[g][j] = db[g][j] = sc[g][j] = 0.0f;
    if (c0 < cols) load8(scale + c0, sc[g]);
  }
  const int64_t warps = static_cast<int64_t>(gridDim.x) * block_warps;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(block_warps) + warp; r < rows; r += warps) {
    float xv[kWarpGroups][8], d[kWarpGroups][8];
    for (int g = 0; g < kWarpGroups; ++g) {
      const int64_t c0 = (g * 32 + lane) * 8;
      if (c0 >= cols) continue;
      load8(x + r * cols + c0, xv[g]);
      load8(dy + r * cols + c0, d[g]);
    }
    float mean, inv_std;
    warp_row_statistics(xv, lane, cols, epsilon, &mean, &inv_std);
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int g = 0; g < kWarpGroups; ++g) {
      if ((g * 32 + lane) * 8 >= cols) continue;
      for (int j = 0; j < 8; ++j) {
        xv[g][j] = (xv[g][j] - mean) * inv_std;  // xhat from here on
        const float gv = d[g][j] * sc[g][j];
        sum_g += gv;
        sum_gx += gv * xv[g][j];
        ds[g][j] += d[g][j] * xv[g][j];
        db[g][j] += d[g][j];
      }
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(cols);
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(cols);
    for (int g = 0; g < kWarpGroups; ++g) {
      const int64_t c0 = (g * 32 + lane) * 8;
      if (c0 >= cols) continue;
      float out[8];
      for (int j = 0; j < 8; ++j) out[j] = inv_std * (d[g][j] * sc[g][j] - mean_g - xv[g][j] * mean_gx);
      if (res.add) {
        float add[8];
        load8(res.add + r * cols + c0, add);
        for (int j = 0; j < 8; ++j) out[j] = __fadd_rn(out[j], add[j]);
      }
      store8(dx + r * cols + c0, out);
      store8_narrowed(res, r * cols + c0, out);
    }
  }
  // The block's line: warp 0's sums, then each next warp's added in turn.
  for (int w = 0; w < block_warps; ++w) {
    if (warp == w)
      for (int g = 0; g < kWarpGroups; ++g) {
        const int64_t c0 = (g * 32 + lane) * 8;
        if (c0 >= cols) continue;
        for (int j = 0; j < 8; ++j) {
          line[c0 + j] = w == 0 ? ds[g][j] : line[c0 + j] + ds[g][j];
          line[cols + c0 + j] = w == 0 ? db[g][j] : line[cols + c0 + j] + db[g][j];
        }
      }
    __syncthreads();
  }
  float* mine = partial + blockIdx.x * 2 * cols;
  for (int64_t c = threadIdx.x; c < 2 * cols; c += blockDim.x) mine[c] = line[c];
}

template <class T>
__global__ void column_sums_kernel(const float* __restrict__ partial, int blocks, int64_t cols, T* __restrict__ dscale,
                                   T* __restrict__ dbias) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f, b = 0.0f;
  for (int k = 0; k < blocks; ++k) {
    s += partial[k * 2 * cols + c];
    b += partial[k * 2 * cols + cols + c];
  }
  if (dscale) dscale[c] = from_float<T>(s);
  if (dbias) dbias[c] = from_float<T>(b);
}

int backward_blocks(int64_t rows, int sm_count) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rows, 2 * static_cast<int64_t>(sm_count))));
}

}  // namespace

bool layernorm_forward_adds(int64_t cols) { return cols > 0 && cols <= kPer * kThreads; }

void layernorm_forward(DType t, DType x_type, DType y_type, const void* x, const void* scale, const void* bias, void* y,
                       float* mean, float* inv_std, int64_t rows, int64_t cols, float epsilon, cudaStream_t stream,
                       const void* other, DType other_type, float* sum) {
  if (rows * cols == 0) return;
  if (other && !layernorm_forward_adds(cols))
    throw Error("internal: LayerNormalization adds a residual only to rows of up to " + std::to_string(kPer * kThreads));
  const ResidualIn res{other, other_type, sum};
  dispatch_io(t, x_type, y_type, "LayerNormalization", [&](auto x_tag, auto tag, auto y_tag) {
    using TX = decltype(x_tag);
    using T = decltype(tag);
    using TY = decltype(y_tag);
    if (warp_rows(cols, {x, scale, bias, y, other, sum})) {
      const int64_t blocks = std::min<int64_t>((rows + kThreads / 32 - 1) / (kThreads / 32), 65535);
      forward_warp_rows<TX, T, TY><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          static_cast<const TX*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<TY*>(y),
          mean, inv_std, rows, cols, epsilon, res);
      return;
    }
    forward_kernel<TX, T, TY><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const TX*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<TY*>(y), mean,
        inv_std, cols, epsilon, res);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

size_t layernorm_backward_workspace(int64_t rows, int64_t cols, int sm_count) {
  return static_cast<size_t>(backward_blocks(rows, sm_count)) * 2 * static_cast<size_t>(cols) * sizeof(float);
}

void layernorm_backward(DType t, DType dy_type, DType dx_type, const void* dy, const void* x, const void* scale, void* dx,
                        void* dscale, void* dbias, int64_t rows, int64_t cols, float epsilon, void* workspace,
                        int sm_count, cudaStream_t stream, const float* residual, void* narrowed, DType narrowed_type) {
  if (rows * cols == 0) return;
  if ((residual || narrowed) && dx_type != DType::kFloat)
    throw Error("internal: LayerNormalizationGrad adds a residual gradient only to a float dX");
  if (narrowed && narrowed_type != DType::kFloat16 && narrowed_type != DType::kBFloat16)
    throw Error("internal: LayerNormalizationGrad's narrowed copy is float16 or bfloat16");
  const Residual res{residual, narrowed, narrowed_type};
  // The warp kernel holds each lane's sums for four groups of 8 columns (up to 210 registers on sm_90, no spill):
  // one block of 8 warps fits an SM, so one block per SM, in one wave; its warps go round the rows.
  const bool warps = warp_rows(cols, {dy, x, scale, dx, residual, narrowed});
  const int blocks = warps ? static_cast<int>(std::min<int64_t>(backward_blocks(rows, sm_count), sm_count))
                           : backward_blocks(rows, sm_count);
  float* partial = static_cast<float*>(workspace);
  dispatch_io(t, dy_type, dx_type, "LayerNormalizationGrad", [&](auto dy_tag, auto tag, auto dx_tag) {
    using TDY = decltype(dy_tag);
    using T = decltype(tag);
    using TDX = decltype(dx_tag);
    if (warps)
      backward_warp_rows<TDY, T, TDX><<<blocks, kThreads, 0, stream>>>(
          static_cast<const TDY*>(dy), static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<TDX*>(dx),
          partial, rows, cols, epsilon, res);
    else
      backward_kernel<TDY, T, TDX><<<blocks, kThreads, 0, stream>>>(static_cast<const TDY*>(dy), static_cast<const T*>(x),
                                                                    static_cast<const T*>(scale), static_cast<TDX*>(dx),
                                                                    partial, rows, cols, epsilon, res);
    if (dscale || dbias)
      column_sums_kernel<T><<<static_cast<unsigned>((cols + 255) / 256), 256, 0, stream>>>(
          partial, blocks, cols, static_cast<T*>(dscale), static_cast<T*>(dbias));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
