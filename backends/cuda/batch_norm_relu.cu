// BatchNorm + [residual Add] + ReLU, forward and backward, in three launches each (five with a
// shortcut's BatchNorm, whose statistics are a second pair of passes): per-block
// partial sums of every channel, a per-channel pass that adds them up in a fixed order (no
// atomics: the same bits on every run) into the statistics, and one elementwise pass that applies
// them. The forward reads x twice and writes y and the mask bits; the unfused chain (cuDNN's
// batch norm, then an Add and a ReLU kernel) read and wrote the activation five times, and its
// backward read y (16 bits an element) for the mask instead of one bit.
//
// Sums are of x - s, s the channel's first value: var = E[(x-s)^2] - E[x-s]^2 then cancels only
// when the spread is far below |mean - s|, not below |mean| as E[x^2] - E[x]^2 would.
#include "backends/cuda/batch_norm_relu.cuh"

#include <algorithm>
#include <initializer_list>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;
// Channels-last data ([rows, C]): a block takes 32 neighbouring channels (coalesced reads of a
// row) over every 8th row of its part.
constexpr int kTile = 32, kPhases = kThreads / kTile;
// Sums per channel: x - s and its square; the backward adds g and g (x - s).
constexpr int kSums = 4;
// The per-channel results the apply passes read, a row of `channels` floats each (row r of
// channel c at stats[r * channels + c]), so that the vector kernels read a thread's 8 channels of
// a row as two 16-byte loads and a warp's as 1 KB in a row. Laid out [channel][4] instead, each
// of a warp's scalar loads touched 32 cache lines: on an H200 (2026-11-28) the channels-last apply
// passes then ran at 300-650 GB/s, bound by the L1's tag lookups (30 of ResNet-50's 48 ms of bf16
// kernels). Forward: mean, 1/std, scale, bias; backward: mean, 1/std, scale, dbias/m, dscale/m.
enum StatRow : int { kMean = 0, kInvStd = 1, kScale = 2, kBias = 3, kDbiasPerM = 3, kDscalePerM = 4 };
constexpr int kStatRows = 5;

// Channels-last rows of a multiple of kVec channels (every 16-bit convolution chain's; ResNet-50's
// 64 to 2048) take the vector kernels: a thread reads and writes kVec neighbouring channels at a
// time (16 bytes of a 16-bit type) and their mask bits as one byte. On an H100 (2026-11-27) the
// one-element-a-thread kernels below moved ResNet-50's bf16 activations at about a quarter of the
// device's bandwidth: 25 of the step's 48 ms of kernels.
constexpr int kVec = 8;
static_assert(kVec == 8, "the vector kernels move 8 elements at a time (load8, store8)");

bool rows_of_vectors(const ChannelGeometry& g) { return g.inner == 1 && g.channels % kVec == 0 && g.channels > 0; }

// Whether every non-null pointer allows the vector loads (16 bytes).
bool vector_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// How the vector statistics kernel lays a block over [rows, channels]: `tile` threads take one
// row's kVec-channel groups side by side (all of them when the row has at most kThreads groups),
// and the block's threads take `rows_at_once` rows at a time; `tiles` blocks cover the channels.
struct RowTiling {
  int64_t groups = 0, tile = 0, rows_at_once = 0, tiles = 0;
};

__host__ __device__ inline RowTiling row_tiling(int64_t channels) {
  RowTiling t;
  t.groups = channels / kVec;
  t.tile = t.groups < kThreads ? t.groups : kThreads;
  t.rows_at_once = kThreads / t.tile;
  t.tiles = (t.groups + t.tile - 1) / t.tile;
  return t;
}

// Parts each channel's values are cut into, so that about 4 blocks per SM sum at once.
int64_t partial_parts(const ChannelGeometry& g, int sm_count) {
  const int64_t want = 4LL * std::max(sm_count, 1);
  if (rows_of_vectors(g)) {
    const RowTiling t = row_tiling(g.channels);
    const int64_t rows = (g.outer + t.rows_at_once - 1) / t.rows_at_once;
    return std::max<int64_t>(1, std::min((want + t.tiles - 1) / t.tiles, rows));
  }
  if (g.inner == 1) {
    const int64_t tiles = (g.channels + kTile - 1) / kTile, rows = (g.outer + kPhases - 1) / kPhases;
    return std::max<int64_t>(1, std::min((want + tiles - 1) / tiles, rows));
  }
  return std::max<int64_t>(1, std::min((want + g.channels - 1) / g.channels, g.outer));
}

__device__ __forceinline__ bool bit_of(const uint32_t* bits, int64_t i) { return (bits[i >> 5] >> (i & 31)) & 1u; }

// The ReLU's mask at element i of channel c: its bit, or, with the prologue's affine
// (batch_norm_affine: s at [c], b at [channels + c]), round(relu(x s + b)) > 0 as the
// convolution that applied it computed it; true without either.
struct Mask {
  const uint32_t* bits = nullptr;
  const float* affine = nullptr;
  int64_t channels = 0;
};

// v rounded to T and back.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  return to_float(from_float<T>(v));
}

template <class T>
__device__ __forceinline__ float applied(float x, const float* affine, int64_t channels, int64_t c) {
  const float v = x * affine[c] + affine[channels + c];
  return to_float(from_float<T>(v > 0.0f ? v : 0.0f));
}

// The gradient the ReLU lets through at element i of channel c: dy (+ dy2, rounded as the
// graph's Add) where the mask is set.
template <class T>
__device__ __forceinline__ float relu_gradient(const T* dy, const T* dy2, const T* x, const Mask& mask, int64_t i,
                                               int64_t c) {
  if (mask.bits && !bit_of(mask.bits, i)) return 0.0f;
  if (mask.affine && !(applied<T>(to_float(x[i]), mask.affine, mask.channels, c) > 0.0f)) return 0.0f;
  return dy2 ? to_float(from_float<T>(to_float(dy[i]) + to_float(dy2[i]))) : to_float(dy[i]);
}

// acc += the sums of element i of channel c (shift s).
template <class T, bool kBackward>
__device__ __forceinline__ void accumulate(const T* x, const T* dy, const T* dy2, const Mask& mask, int64_t i,
                                           int64_t c, float s, float* acc) {
  const float d = to_float(x[i]) - s;
  acc[0] += d;
  acc[1] += d * d;
  if (kBackward) {
    const float g = relu_gradient(dy, dy2, x, mask, i, c);
    acc[2] += g;
    acc[3] += g * d;
  }
}

// f(plane, k) for the (plane, position) pairs of `planes` planes of `per_plane` positions that
// thread t of the block takes: pairs t, t + blockDim, ..., its plane and position advanced
// without a division.
template <class F>
__device__ __forceinline__ void for_plane_pairs(int64_t planes, int64_t per_plane, F&& f) {
  const int64_t step_planes = blockDim.x / per_plane, step_k = blockDim.x % per_plane;
  int64_t plane = threadIdx.x / per_plane, k = threadIdx.x % per_plane;
  while (plane < planes) {
    f(plane, k);
    plane += step_planes;
    k += step_k;
    if (k >= per_plane) {
      k -= per_plane;
      ++plane;
    }
  }
}

// The block's sums (2 forward, 4 backward) of channel c's part into out, in a fixed tree.
template <bool kBackward>
__device__ __forceinline__ void store_part(const float (&acc)[kSums], float* scratch, float* __restrict__ out,
                                           int64_t part, int64_t channels, int64_t c) {
  for (int k = 0; k < (kBackward ? 4 : 2); ++k) {
    const float total = block_sum(acc[k], scratch);
    if (threadIdx.x == 0) out[(part * channels + c) * kSums + k] = total;
  }
}

// NCHW-like data (inner > 1): a block per (channel, part), its threads over the part's planes
// as one run of (plane, position) pairs (for_plane_pairs), so that planes smaller than the block
// (ResNet's 7 x 7 and 14 x 14) keep every thread busy.
template <class T, bool kBackward>
__global__ void plane_partials(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ dy2,
                               const Mask mask, int64_t outer, int64_t channels, int64_t inner,
                               int64_t parts, float* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x / parts, part = blockIdx.x % parts;
  const float s = to_float(x[c * inner]);
  float acc[kSums] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int64_t planes = (outer - part + parts - 1) / parts;  // outer indices part, part + parts, ...
  for_plane_pairs(planes, inner, [&](int64_t plane, int64_t k) {
    accumulate<T, kBackward>(x, dy, dy2, mask, ((part + plane * parts) * channels + c) * inner + k, c, s, acc);
  });
  store_part<kBackward>(acc, scratch, out, part, channels, c);
}

// plane_partials for planes of a multiple of kVec elements (efficientnet's row-major BatchNorms
// after its depthwise convolutions, 112 x 112 down to 28 x 28): the pairs are of (plane, vector),
// a thread reading kVec elements of one channel at a time and their mask bits as one byte.
template <class T, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    plane_vector_partials(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ dy2,
                          const uint32_t* __restrict__ bits, int64_t outer, int64_t channels, int64_t inner,
                          int64_t parts, float* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x / parts, part = blockIdx.x % parts, vectors = inner / kVec;
  const float s = to_float(x[c * inner]);
  float acc[kSums] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int64_t planes = (outer - part + parts - 1) / parts;
  for_plane_pairs(planes, vectors, [&](int64_t plane, int64_t k) {
    const int64_t i = ((part + plane * parts) * channels + c) * inner + k * kVec;
    float v[kVec];
    load8(x + i, v);
    float g[kVec] = {};
    if constexpr (kBackward) {
      load8(dy + i, g);
      if (dy2) {
        float g2[kVec];
        load8(dy2 + i, g2);
        for (int j = 0; j < kVec; ++j) g[j] = round_to<T>(g[j] + g2[j]);
      }
      const unsigned byte = bits ? reinterpret_cast<const uint8_t*>(bits)[i / 8] : 0xffu;
      for (int j = 0; j < kVec; ++j)
        if (!((byte >> j) & 1u)) g[j] = 0.0f;
    }
    for (int j = 0; j < kVec; ++j) {
      const float d = v[j] - s;
      acc[0] += d;
      acc[1] += d * d;
      if constexpr (kBackward) {
        acc[2] += g[j];
        acc[3] += g[j] * d;
      }
    }
  });
  store_part<kBackward>(acc, scratch, out, part, channels, c);
}

// Channels-last data (inner == 1): a block per (32 channels, part); lane t % 32 takes channel
// tile + t % 32, and the block's 8 warps take every 8th row of the part.
template <class T, bool kBackward>
__global__ void row_partials(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ dy2,
                             const Mask mask, int64_t rows, int64_t channels, int64_t parts,
                             float* __restrict__ out) {
  __shared__ float sums[kPhases][kTile][kSums];
  const int lane = threadIdx.x % kTile, phase = threadIdx.x / kTile;
  const int64_t tiles = (channels + kTile - 1) / kTile;
  const int64_t c = (blockIdx.x % tiles) * kTile + lane, part = blockIdx.x / tiles;
  float acc[kSums] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (c < channels) {
    const float s = to_float(x[c]);
    for (int64_t r = part * kPhases + phase; r < rows; r += parts * kPhases)
      accumulate<T, kBackward>(x, dy, dy2, mask, r * channels + c, c, s, acc);
  }
  for (int k = 0; k < kSums; ++k) sums[phase][lane][k] = acc[k];
  __syncthreads();
  if (phase == 0 && c < channels)
    for (int k = 0; k < kSums; ++k) {
      float total = 0.0f;
      for (int p = 0; p < kPhases; ++p) total += sums[p][lane][k];
      out[(part * channels + c) * kSums + k] = total;
    }
}

// relu_gradient for the kVec elements from i (a multiple of kVec, channel c0 onwards, x their
// values): their mask bits are one byte of the mask.
template <class T>
__device__ __forceinline__ void relu_gradients(const T* __restrict__ dy, const T* __restrict__ dy2, const float (&x)[kVec],
                                               const Mask& mask, int64_t i, int64_t c0, float (&g)[kVec]) {
  load8(dy + i, g);
  if (dy2) {
    float g2[kVec];
    load8(dy2 + i, g2);
    for (int j = 0; j < kVec; ++j) g[j] = round_to<T>(g[j] + g2[j]);
  }
  const unsigned bits = mask.bits ? reinterpret_cast<const uint8_t*>(mask.bits)[i / 8] : 0xffu;
  for (int j = 0; j < kVec; ++j)
    if (!((bits >> j) & 1u)) g[j] = 0.0f;
  if (mask.affine) {  // channels c0..c0+7 (rows of channels): the affine's two rows as vectors
    float scale[kVec], shift[kVec];
    load8(mask.affine + c0, scale);
    load8(mask.affine + mask.channels + c0, shift);
    for (int j = 0; j < kVec; ++j) {
      const float v = x[j] * scale[j] + shift[j];  // applied<T>, its operands loaded 8 at a time
      if (!(to_float(from_float<T>(v > 0.0f ? v : 0.0f)) > 0.0f)) g[j] = 0.0f;
    }
  }
}

// row_partials for rows of a multiple of kVec channels (row_tiling): thread lane of a block takes
// channels (tile * tiling.tile + lane) * kVec onwards, kVec at a time, over the part's rows; the
// block's rows_at_once row phases are added in order in shared memory.
template <class T, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    row_vector_partials(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ dy2, const Mask mask,
                        int64_t rows, int64_t channels, int64_t parts, float* __restrict__ out) {
  __shared__ float sums[kThreads][kVec * kSums + 1];  // + 1: a thread's sums start in another bank
  const RowTiling t = row_tiling(channels);
  const int64_t tile = blockIdx.x % t.tiles, part = blockIdx.x / t.tiles;
  const int64_t lane = threadIdx.x % t.tile, phase = threadIdx.x / t.tile;
  const int64_t group = tile * t.tile + lane, c0 = group * kVec;
  float acc[kVec][kSums];
  for (int j = 0; j < kVec; ++j)
    for (int k = 0; k < kSums; ++k) acc[j][k] = 0.0f;
  if (phase < t.rows_at_once && group < t.groups) {
    float s[kVec];
    load8(x + c0, s);
    for (int64_t r = part * t.rows_at_once + phase; r < rows; r += parts * t.rows_at_once) {
      const int64_t i = r * channels + c0;
      float v[kVec], g[kVec] = {};
      load8(x + i, v);
      if constexpr (kBackward) relu_gradients(dy, dy2, v, mask, i, c0, g);
      for (int j = 0; j < kVec; ++j) {
        const float d = v[j] - s[j];
        acc[j][0] += d;
        acc[j][1] += d * d;
        if constexpr (kBackward) {
          acc[j][2] += g[j];
          acc[j][3] += g[j] * d;
        }
      }
    }
  }
  for (int j = 0; j < kVec; ++j)
    for (int k = 0; k < kSums; ++k) sums[threadIdx.x][j * kSums + k] = acc[j][k];
  __syncthreads();
  for (int64_t at = threadIdx.x; at < t.tile * kVec; at += blockDim.x) {
    const int64_t in_tile = at / kVec, j = at % kVec;
    if (tile * t.tile + in_tile >= t.groups) continue;
    const int64_t c = (tile * t.tile + in_tile) * kVec + j;
    for (int k = 0; k < kSums; ++k) {
      float total = 0.0f;
      for (int64_t p = 0; p < t.rows_at_once; ++p) total += sums[p * t.tile + in_tile][j * kSums + k];
      out[(part * channels + c) * kSums + k] = total;
    }
  }
}

// finalize and raw_sums_kernel: a block of kSumThreads per channel (at most 65535 blocks, each
// then taking every 65535th channel).
constexpr int kSumThreads = 128;
unsigned channel_blocks(int64_t channels) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(channels, 65535)));
}

// sum[k < count] = the sums of channel c's parts, in every thread of the calling block: thread t
// adds parts t, t + blockDim, ..., then the threads' sums are added in a fixed tree (the same bits
// every run). Hundreds of parts a channel (the vector statistics kernel cuts 64 channels into 528
// at batch 128): one thread a channel adding them in order took 21 us a call on an H100, a warp a
// channel 15 us on an H200 (2026-11-28: 1.1 ms of ResNet-50's bf16 step in 74 calls; 64 channels
// were 64 warps, 8 blocks on 132 SMs, each lane 17 loads deep).
__device__ __forceinline__ void sum_parts(const float* __restrict__ partial, int64_t parts, int64_t channels, int64_t c,
                                          int count, float (&sum)[kSums], float* scratch) {
  for (int k = 0; k < kSums; ++k) sum[k] = 0.0f;
  for (int64_t p = threadIdx.x; p < parts; p += blockDim.x)
    for (int k = 0; k < count; ++k) sum[k] += partial[(p * channels + c) * kSums + k];
  for (int k = 0; k < count; ++k) sum[k] = block_sum(sum[k], scratch);
}

// Per channel, a block each: the parts' sums added up into the channel's StatRow values (scale and
// bias copied beside them, so that the apply passes read every per-channel operand from rows).
template <class T, bool kBackward>
__global__ void finalize(const float* __restrict__ partial, int64_t parts, const T* __restrict__ x, int64_t channels,
                         int64_t inner, float m, float epsilon, float momentum, const float* __restrict__ scale,
                         const float* __restrict__ bias, const float* __restrict__ mean_in,
                         const float* __restrict__ var_in, float* __restrict__ mean_out, float* __restrict__ var_out,
                         float* __restrict__ dscale, float* __restrict__ dbias, float* __restrict__ stats) {
  __shared__ float scratch[32];
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float sum[kSums];
    sum_parts(partial, parts, channels, c, kBackward ? 4 : 2, sum, scratch);
    if (threadIdx.x != 0) continue;
    const float shifted_mean = sum[0] / m;
    const float var = fmaxf(sum[1] / m - shifted_mean * shifted_mean, 0.0f);
    const float mean = to_float(x[c * inner]) + shifted_mean, inv_std = 1.0f / sqrtf(var + epsilon);
    stats[kMean * channels + c] = mean;
    stats[kInvStd * channels + c] = inv_std;
    stats[kScale * channels + c] = scale[c];
    if (!kBackward) {
      stats[kBias * channels + c] = bias[c];
      if (mean_out) mean_out[c] = mean_in[c] * momentum + mean * (1.0f - momentum);
      if (var_out) var_out[c] = var_in[c] * momentum + var * (1.0f - momentum);
      continue;
    }
    // sum g (x - mean) = sum g (x - s) - (mean - s) sum g
    const float db = sum[2], ds = inv_std * (sum[3] - shifted_mean * sum[2]);
    if (dbias) dbias[c] = db;
    if (dscale) dscale[c] = ds;
    stats[kDbiasPerM * channels + c] = db / m;
    stats[kDscalePerM * channels + c] = ds / m;
  }
}

// bn(x) of channel c, rounded to T as the graph's BatchNormalization rounds its output.
template <class T>
__device__ __forceinline__ float normalized(float x, float mean, float inv_std, float scale, float bias) {
  return round_to<T>((x - mean) * inv_std * scale + bias);
}

// The forward's value from bn(x) = v (then rounded where the graph rounds: the Add's sum, in T;
// rounded once instead, a sum that ends next to 0 can take the other sign than the graph's, and
// the ReLU's mask with it: 1 of 1200 elements of a channel in fp16, its dscale 4% off): + z or
// + bn2(x2), then the ReLU (NaN passes, as the Relu's max(x, 0) in the graph).
template <class T>
__device__ __forceinline__ float forward_value(float v, const float* z, const float* bn2, bool relu) {
  if (z) v = round_to<T>(v + *z);
  if (bn2) v = round_to<T>(v + *bn2);
  if (relu && !(v > 0.0f) && v == v) v = 0.0f;
  return v;
}

// dx of BatchNorm `stats` (backward rows) for g at x in channel c.
__device__ __forceinline__ float input_gradient(float g, float x, float mean, float inv_std, float scale, float dbias_m,
                                                float dscale_m) {
  const float xhat = (x - mean) * inv_std;
  return scale * inv_std * (g - dbias_m - xhat * dscale_m);
}

// A warp's 32 lanes take 32 neighbouring elements, so the mask's word is one ballot: every lane
// of a warp loops while the warp's first element is in range. I: the index type, 32 bits below
// 2^31 elements (every tensor of ResNet-50 at batch 256), where the channel's division per element
// costs a fraction of 64 bits'.
template <class T, class I>
__global__ void forward_apply(const T* __restrict__ x, const T* __restrict__ z, const float* __restrict__ stats,
                              const T* __restrict__ x2, const float* __restrict__ stats2, T* __restrict__ y,
                              uint32_t* __restrict__ bits, bool relu, I n, I channels, I inner) {
  const I lane = threadIdx.x % 32;
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i - lane < n; i += stride) {
    bool positive = false;
    if (i < n) {
      const I c = (i / inner) % channels;
      auto bn = [&](const T* in, const float* st) {
        return normalized<T>(to_float(in[i]), st[kMean * channels + c], st[kInvStd * channels + c],
                             st[kScale * channels + c], st[kBias * channels + c]);
      };
      const float zv = z ? to_float(z[i]) : 0.0f, b2 = x2 ? bn(x2, stats2) : 0.0f;
      const T out = from_float<T>(forward_value<T>(bn(x, stats), z ? &zv : nullptr, x2 ? &b2 : nullptr, relu));
      y[i] = out;
      positive = to_float(out) > 0.0f;
    }
    if (bits) {
      const unsigned word = __ballot_sync(0xffffffffu, positive);
      if (lane == 0) bits[i >> 5] = word;
    }
  }
}

template <class T, class I>
__global__ void backward_apply(const T* __restrict__ dy, const T* __restrict__ dy2, const Mask mask,
                               const T* __restrict__ x, const float* __restrict__ stats, T* __restrict__ dx,
                               T* __restrict__ dg, const T* __restrict__ x2, const float* __restrict__ stats2,
                               T* __restrict__ dx2, I n, I channels, I inner) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const I c = (i / inner) % channels;
    const float g = relu_gradient(dy, dy2, x, mask, i, c);
    auto grad = [&](const T* in, const float* st) {
      return from_float<T>(input_gradient(g, to_float(in[i]), st[kMean * channels + c], st[kInvStd * channels + c],
                                          st[kScale * channels + c], st[kDbiasPerM * channels + c],
                                          st[kDscalePerM * channels + c]));
    };
    dx[i] = grad(x, stats);
    if (dg) dg[i] = from_float<T>(g);
    if (dx2) dx2[i] = grad(x2, stats2);
  }
}

__global__ void affine_kernel(BatchNormAffine a) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < a.channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float mean = a.sums[c] / a.m;
    const float var = fmaxf(a.sums[a.channels + c] / a.m - mean * mean, 0.0f);
    const float s = a.scale[c] / sqrtf(var + a.epsilon);
    a.affine[c] = s;
    a.affine[a.channels + c] = a.bias[c] - mean * s;
    if (a.mean_out) a.mean_out[c] = a.mean_in[c] * a.momentum + mean * (1.0f - a.momentum);
    if (a.var_out) a.var_out[c] = a.var_in[c] * a.momentum + var * (1.0f - a.momentum);
  }
}

template <class T, class I>
__global__ void apply_kernel(const T* __restrict__ x, const float* __restrict__ affine, T* __restrict__ y, I n,
                             I channels, I inner) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const I c = (i / inner) % channels;
    y[i] = from_float<T>(applied<T>(to_float(x[i]), affine, channels, c));
  }
}

// Row r's values for the kVec elements of a vector: channels c..c+7 (rows of channels, kRows),
// or channel c for all eight (planes of a multiple of kVec).
template <bool kRows, class I>
__device__ __forceinline__ void row_values(const float* __restrict__ stats, int row, I channels, I c,
                                           float (&v)[kVec]) {
  const float* at = stats + static_cast<int64_t>(row) * channels + c;
  if constexpr (kRows) {
    load8(at, v);
  } else {
    const float r = *at;
    for (int j = 0; j < kVec; ++j) v[j] = r;
  }
}

// The vector's channel: its first element's (rows of channels), or the plane's.
template <bool kRows, class I>
__device__ __forceinline__ I vector_channel(I i, I channels, I inner) {
  if constexpr (kRows) return i % channels;
  else return (i / inner) % channels;
}

// forward_apply, backward_apply and apply_kernel kVec elements a thread: over rows of a multiple of
// kVec channels (kRows), or planes of a multiple of kVec elements; thread t takes elements kVec t
// onwards (one byte of the mask).
template <class T, class I, bool kRows>
__global__ void __launch_bounds__(kThreads)
    forward_apply_vectors(const T* __restrict__ x, const T* __restrict__ z, const float* __restrict__ stats,
                          const T* __restrict__ x2, const float* __restrict__ stats2, T* __restrict__ y,
                          uint32_t* __restrict__ bits, bool relu, I n, I channels, I inner) {
  const I vectors = n / kVec, stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I v = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; v < vectors; v += stride) {
    const I i = v * kVec, c = vector_channel<kRows>(i, channels, inner);
    float a[kVec], out[kVec], mean[kVec], inv_std[kVec], scale[kVec], bias[kVec];
    load8(x + i, a);
    row_values<kRows>(stats, kMean, channels, c, mean);
    row_values<kRows>(stats, kInvStd, channels, c, inv_std);
    row_values<kRows>(stats, kScale, channels, c, scale);
    row_values<kRows>(stats, kBias, channels, c, bias);
    for (int j = 0; j < kVec; ++j) out[j] = normalized<T>(a[j], mean[j], inv_std[j], scale[j], bias[j]);
    if (x2) {
      float b[kVec];
      load8(x2 + i, a);
      row_values<kRows>(stats2, kMean, channels, c, mean);
      row_values<kRows>(stats2, kInvStd, channels, c, inv_std);
      row_values<kRows>(stats2, kScale, channels, c, scale);
      row_values<kRows>(stats2, kBias, channels, c, bias);
      for (int j = 0; j < kVec; ++j) {
        b[j] = normalized<T>(a[j], mean[j], inv_std[j], scale[j], bias[j]);
        out[j] = forward_value<T>(out[j], nullptr, &b[j], relu);
      }
    } else if (z) {
      load8(z + i, a);
      for (int j = 0; j < kVec; ++j) out[j] = forward_value<T>(out[j], &a[j], nullptr, relu);
    } else {
      for (int j = 0; j < kVec; ++j) out[j] = forward_value<T>(out[j], nullptr, nullptr, relu);
    }
    unsigned byte = 0;
    for (int j = 0; j < kVec; ++j)
      if (out[j] > 0.0f) byte |= 1u << j;  // out is of T's precision already: stored exactly
    store8(y + i, out);
    if (bits) reinterpret_cast<uint8_t*>(bits)[v] = static_cast<uint8_t>(byte);
  }
  // The mask's last 32-bit word past n: zero, as the ballot of forward_apply leaves it.
  if (bits && blockIdx.x == 0 && threadIdx.x == 0)
    for (int64_t b = vectors; b < (static_cast<int64_t>(n) + 31) / 32 * 4; ++b) reinterpret_cast<uint8_t*>(bits)[b] = 0;
}

template <class T, class I, bool kRows>
__global__ void __launch_bounds__(kThreads)
    backward_apply_vectors(const T* __restrict__ dy, const T* __restrict__ dy2, const Mask mask,
                           const T* __restrict__ x, const float* __restrict__ stats, T* __restrict__ dx,
                           T* __restrict__ dg, const T* __restrict__ x2, const float* __restrict__ stats2,
                           T* __restrict__ dx2, I n, I channels, I inner) {
  const I vectors = n / kVec, stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I v = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; v < vectors; v += stride) {
    const I i = v * kVec, c = vector_channel<kRows>(i, channels, inner);
    float a[kVec], g[kVec], out[kVec];
    load8(x + i, a);
    relu_gradients(dy, dy2, a, mask, i, c, g);  // mask.affine only with kRows (batch_norm_relu_backward)
    auto grad = [&](const float* st) {
      float mean[kVec], inv_std[kVec], scale[kVec], dbias_m[kVec], dscale_m[kVec];
      row_values<kRows>(st, kMean, channels, c, mean);
      row_values<kRows>(st, kInvStd, channels, c, inv_std);
      row_values<kRows>(st, kScale, channels, c, scale);
      row_values<kRows>(st, kDbiasPerM, channels, c, dbias_m);
      row_values<kRows>(st, kDscalePerM, channels, c, dscale_m);
      for (int j = 0; j < kVec; ++j)
        out[j] = input_gradient(g[j], a[j], mean[j], inv_std[j], scale[j], dbias_m[j], dscale_m[j]);
    };
    grad(stats);
    store8(dx + i, out);
    if (dg) store8(dg + i, g);
    if (dx2) {
      load8(x2 + i, a);
      grad(stats2);
      store8(dx2 + i, out);
    }
  }
}

template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    apply_vectors(const T* __restrict__ x, const float* __restrict__ affine, T* __restrict__ y, I n, I channels) {
  const I vectors = n / kVec, stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I v = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; v < vectors; v += stride) {
    const I i = v * kVec, c0 = i % channels;
    float a[kVec], scale[kVec], shift[kVec];
    load8(x + i, a);
    row_values<true>(affine, 0, channels, c0, scale);
    row_values<true>(affine, 1, channels, c0, shift);
    for (int j = 0; j < kVec; ++j) {
      const float t = a[j] * scale[j] + shift[j];  // applied<T>
      a[j] = to_float(from_float<T>(t > 0.0f ? t : 0.0f));
    }
    store8(y + i, a);
  }
}

// sums[c] = sum x = sum (x - s) + m s, sums[C + c] = sum x^2 = sum (x - s)^2 + 2 s sum (x - s) + m s^2,
// from the shifted partial sums.
template <class T>
__global__ void raw_sums_kernel(const float* __restrict__ partial, int64_t parts, const T* __restrict__ x,
                                int64_t channels, int64_t inner, float m, float* __restrict__ sums) {
  __shared__ float scratch[32];
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float all[kSums];
    sum_parts(partial, parts, channels, c, 2, all, scratch);
    if (threadIdx.x != 0) continue;
    const float d = all[0], d2 = all[1];
    const float s = to_float(x[c * inner]);
    sums[c] = d + m * s;
    sums[channels + c] = d2 + 2.0f * s * d + m * s * s;
  }
}

// f(I{}) with I the apply passes' index type for n elements (forward_apply).
template <class F>
void with_index_type(int64_t n, F&& f) {
  if (n < (int64_t{1} << 31)) f(uint32_t{});
  else f(int64_t{});
}

// Planes (inner > 1) of a multiple of kVec elements, which the plane vector kernels take.
bool planes_of_vectors(const ChannelGeometry& g) { return g.inner > 1 && g.inner % kVec == 0; }

// The partial sums of x (and dy) for every channel into `partial`.
template <class T, bool kBackward>
void launch_partials(const ChannelGeometry& g, const T* x, const T* dy, const T* dy2, const Mask& mask,
                     int64_t parts, float* partial, cudaStream_t stream) {
  if (rows_of_vectors(g) && vector_aligned({x, dy, dy2, mask.affine})) {
    row_vector_partials<T, kBackward><<<static_cast<unsigned>(row_tiling(g.channels).tiles * parts), kThreads, 0, stream>>>(
        x, dy, dy2, mask, g.outer, g.channels, parts, partial);
  } else if (g.inner == 1) {
    const int64_t tiles = (g.channels + kTile - 1) / kTile;
    row_partials<T, kBackward><<<static_cast<unsigned>(tiles * parts), kThreads, 0, stream>>>(
        x, dy, dy2, mask, g.outer, g.channels, parts, partial);
  } else if (planes_of_vectors(g) && !mask.affine && vector_aligned({x, dy, dy2})) {
    plane_vector_partials<T, kBackward><<<static_cast<unsigned>(g.channels * parts), kThreads, 0, stream>>>(
        x, dy, dy2, mask.bits, g.outer, g.channels, g.inner, parts, partial);
  } else {
    plane_partials<T, kBackward><<<static_cast<unsigned>(g.channels * parts), kThreads, 0, stream>>>(
        x, dy, dy2, mask, g.outer, g.channels, g.inner, parts, partial);
  }
}

// Where one BatchNorm's (of two: the block's and its shortcut's) partial sums and StatRow
// results lie in the workspace: partial, stats, partial2, stats2, each region starting at a
// multiple of 8 floats from the start when the channels are (the vector kernels' 16-byte loads).
struct Scratch {
  float *partial, *stats, *partial2, *stats2;
};

Scratch scratch_of(void* workspace, const ChannelGeometry& g, int64_t parts) {
  Scratch s;
  s.partial = static_cast<float*>(workspace);
  s.stats = s.partial + parts * g.channels * kSums;
  s.partial2 = s.stats + g.channels * kStatRows;
  s.stats2 = s.partial2 + parts * g.channels * kSums;
  return s;
}

}  // namespace

size_t batch_norm_relu_workspace(const ChannelGeometry& g, int sm_count) {
  return 2 * static_cast<size_t>(partial_parts(g, sm_count) * g.channels * kSums + g.channels * kStatRows) *
         sizeof(float);
}

void batch_norm_relu_forward(const BatchNormReluForward& a, void* workspace, int sm_count, cudaStream_t stream) {
  const ChannelGeometry& g = a.g;
  if (g.count() == 0) return;
  if (!a.relu && (a.bits || a.z || a.x2)) throw Error("internal: a BatchNorm without its ReLU takes no mask, z or x2");
  const int64_t parts = partial_parts(g, sm_count);
  const Scratch w = scratch_of(workspace, g, parts);
  const float m = static_cast<float>(g.per_channel());
  dispatch_float(a.t, "BatchNormalization", [&](auto tag) {
    using T = decltype(tag);
    auto statistics = [&](const T* x, const float* scale, const float* bias, const float* mean_in, const float* var_in,
                          float* mean_out, float* var_out, float* part, float* out) {
      launch_partials<T, false>(g, x, nullptr, nullptr, Mask{}, parts, part, stream);
      finalize<T, false><<<channel_blocks(g.channels), kSumThreads, 0, stream>>>(
          part, parts, x, g.channels, g.inner, m, a.epsilon, a.momentum, scale, bias, mean_in, var_in, mean_out,
          var_out, nullptr, nullptr, out);
    };
    const T* x = static_cast<const T*>(a.x);
    const T* x2 = static_cast<const T*>(a.x2);
    const T* z = static_cast<const T*>(a.z);
    T* y = static_cast<T*>(a.y);
    statistics(x, a.scale, a.bias, a.mean_in, a.var_in, a.mean_out, a.var_out, w.partial, w.stats);
    if (x2)
      statistics(x2, a.scale2, a.bias2, a.mean2_in, a.var2_in, a.mean2_out, a.var2_out, w.partial2, w.stats2);
    with_index_type(g.count(), [&](auto index) {
      using I = decltype(index);
      const I n = static_cast<I>(g.count()), channels = static_cast<I>(g.channels), inner = static_cast<I>(g.inner);
      const bool aligned = vector_aligned({a.x, a.z, a.x2, a.y, w.stats, x2 ? w.stats2 : nullptr});
      if (rows_of_vectors(g) && aligned) {
        forward_apply_vectors<T, I, true><<<grid_stride_blocks(g.count() / kVec, sm_count), kThreads, 0, stream>>>(
            x, z, w.stats, x2, w.stats2, y, a.bits, a.relu, n, channels, inner);
      } else if (planes_of_vectors(g) && aligned) {
        forward_apply_vectors<T, I, false><<<grid_stride_blocks(g.count() / kVec, sm_count), kThreads, 0, stream>>>(
            x, z, w.stats, x2, w.stats2, y, a.bits, a.relu, n, channels, inner);
      } else {
        forward_apply<T, I><<<grid_stride_blocks(g.count(), sm_count), kThreads, 0, stream>>>(
            x, z, w.stats, x2, w.stats2, y, a.bits, a.relu, n, channels, inner);
      }
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_relu_backward(const BatchNormReluBackward& a, void* workspace, int sm_count, cudaStream_t stream) {
  const ChannelGeometry& g = a.g;
  if (g.count() == 0) return;
  const int64_t parts = partial_parts(g, sm_count);
  const Scratch w = scratch_of(workspace, g, parts);
  const float m = static_cast<float>(g.per_channel());
  dispatch_float(a.t, "BatchNormalizationGrad", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(a.dy);
    const T* dy2 = static_cast<const T*>(a.dy2);
    Mask mask{a.bits, nullptr, g.channels};
    if (a.sums) {  // the prologue's affine, in the shortcut's scratch (a unit with sums has no shortcut)
      mask.affine = w.partial2;
      BatchNormAffine affine;
      affine.channels = g.channels;
      affine.m = m;
      affine.epsilon = a.epsilon;
      affine.sums = a.sums;
      affine.scale = a.scale;
      affine.bias = a.bias;
      affine.affine = w.partial2;
      batch_norm_affine(affine, sm_count, stream);
    }
    auto sums = [&](const T* x, const float* scale, float* dscale, float* dbias, float* part, float* out) {
      launch_partials<T, true>(g, x, dy, dy2, mask, parts, part, stream);
      finalize<T, true><<<channel_blocks(g.channels), kSumThreads, 0, stream>>>(
          part, parts, x, g.channels, g.inner, m, a.epsilon, 0.0f, scale, nullptr, nullptr, nullptr, nullptr, nullptr,
          dscale, dbias, out);
    };
    const T* x = static_cast<const T*>(a.x);
    const T* x2 = static_cast<const T*>(a.x2);
    T* dx = static_cast<T*>(a.dx);
    T* dg = static_cast<T*>(a.dg);
    T* dx2 = static_cast<T*>(a.dx2);
    sums(x, a.scale, a.dscale, a.dbias, w.partial, w.stats);
    if (x2) sums(x2, a.scale2, a.dscale2, a.dbias2, w.partial2, w.stats2);
    with_index_type(g.count(), [&](auto index) {
      using I = decltype(index);
      const I n = static_cast<I>(g.count()), channels = static_cast<I>(g.channels), inner = static_cast<I>(g.inner);
      const bool aligned = vector_aligned({a.dy, a.dy2, a.x, a.dx, a.dg, a.x2, a.dx2, w.stats,
                                           x2 ? w.stats2 : nullptr, mask.affine});
      if (rows_of_vectors(g) && aligned) {
        backward_apply_vectors<T, I, true><<<grid_stride_blocks(g.count() / kVec, sm_count), kThreads, 0, stream>>>(
            dy, dy2, mask, x, w.stats, dx, dg, x2, w.stats2, dx2, n, channels, inner);
      } else if (planes_of_vectors(g) && !mask.affine && aligned) {  // the affine's channels vary along a vector
        backward_apply_vectors<T, I, false><<<grid_stride_blocks(g.count() / kVec, sm_count), kThreads, 0, stream>>>(
            dy, dy2, mask, x, w.stats, dx, dg, x2, w.stats2, dx2, n, channels, inner);
      } else {
        backward_apply<T, I><<<grid_stride_blocks(g.count(), sm_count), kThreads, 0, stream>>>(
            dy, dy2, mask, x, w.stats, dx, dg, x2, w.stats2, dx2, n, channels, inner);
      }
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_affine(const BatchNormAffine& a, int sm_count, cudaStream_t stream) {
  if (a.channels == 0) return;
  affine_kernel<<<grid_stride_blocks(a.channels, sm_count), kThreads, 0, stream>>>(a);
  AMP_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_relu_apply(DType t, const ChannelGeometry& g, const void* x, const float* affine, void* y, int sm_count,
                           cudaStream_t stream) {
  if (g.count() == 0) return;
  dispatch_float(t, "BatchNormalization", [&](auto tag) {
    using T = decltype(tag);
    with_index_type(g.count(), [&](auto index) {
      using I = decltype(index);
      if (rows_of_vectors(g) && vector_aligned({x, y, affine})) {
        apply_vectors<T, I><<<grid_stride_blocks(g.count() / kVec, sm_count), kThreads, 0, stream>>>(
            static_cast<const T*>(x), affine, static_cast<T*>(y), static_cast<I>(g.count()), static_cast<I>(g.channels));
        return;
      }
      apply_kernel<T, I><<<grid_stride_blocks(g.count(), sm_count), kThreads, 0, stream>>>(
          static_cast<const T*>(x), affine, static_cast<T*>(y), static_cast<I>(g.count()), static_cast<I>(g.channels),
          static_cast<I>(g.inner));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_sums(DType t, const ChannelGeometry& g, const void* x, float* sums, void* workspace, int sm_count,
                     cudaStream_t stream) {
  if (g.count() == 0) return;
  const int64_t parts = partial_parts(g, sm_count);
  float* partial = static_cast<float*>(workspace);
  dispatch_float(t, "BatchNormalization", [&](auto tag) {
    using T = decltype(tag);
    launch_partials<T, false>(g, static_cast<const T*>(x), nullptr, nullptr, Mask{}, parts, partial, stream);
    raw_sums_kernel<T><<<channel_blocks(g.channels), kSumThreads, 0, stream>>>(
        partial, parts, static_cast<const T*>(x), g.channels, g.inner, static_cast<float>(g.per_channel()), sums);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
