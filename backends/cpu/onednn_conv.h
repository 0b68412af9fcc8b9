// Convolutions through oneDNN (Debian's libdnnl, the library PyTorch's own CPU convolutions run
// on): the forward, backward-data and backward-weights primitives of one geometry and element type,
// made once per shape signature and cached by the kernel, run on the kernel's plain N C (D) (H) W
// buffers. oneDNN picks its blocked layouts; the reorders into and out of them, and its
// scratchpad, live in the kernel's workspace, so a step allocates nothing.
//
// Numerics are the CPU backend's contract: fp32 sums for every type. fp32 runs in fp32; bf16 runs
// with bf16 operands and fp32 accumulation (vdpbf16ps on AVX-512 BF16 / AMX CPUs, oneDNN's own
// emulation on other AVX-512 CPUs), and a bf16 result is rounded once, to nearest-even. The
// weights' and bias' gradients come back in fp32 for the caller to round once. fp16 has no oneDNN
// CPU convolution in this version: the caller widens it to fp32 first.
//
// oneDNN runs on OpenMP, the backend's one thread pool, with the kernel's thread count. Where
// oneDNN has no implementation (a geometry or a CPU it does not cover), ok() is false and the
// kernel keeps its own im2col path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "graph/ops/window.h"

namespace amp::cpu {

// One convolution's geometry; spatial vectors have 1 to 3 entries.
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, groups = 1;
  std::vector<int64_t> in, kernel, out, strides, dilations, pads_begin;
};

// Images per oneDNN call for fp16, whose tensors are staged in fp32: half the batch (a third or
// a quarter when the batch does not halve), so the fp32 staging is no larger than the 16-bit
// tensors it widens. Smaller chunks save little more and cost much: a call on a few images of a
// small late layer leaves the cores idle (resnet18 at batch 32: 127 ms a step in halves, 225 in
// quarters, 422 in eighths). A batch none of these divide goes whole.
inline int64_t fp16_chunk(int64_t n) {
  for (int64_t parts = 2; parts <= 4; ++parts)
    if (n % parts == 0) return n / parts;
  return n;
}

// The convolution of X (x_dims: [N, C, spatial...]) into `maps` channels over `win`, for a oneDNN
// call: N images, or fp16_chunk(N) for fp16.
inline ConvShape conv_shape(const std::vector<int64_t>& x_dims, int64_t maps, int64_t groups, const Window& win,
                            bool fp16) {
  ConvShape s;
  s.n = fp16 ? fp16_chunk(x_dims[0]) : x_dims[0];
  s.c = x_dims[1];
  s.m = maps;
  s.groups = groups;
  s.in = win.in;
  s.kernel = win.kernel;
  s.out = win.out;
  s.strides = win.strides;
  s.dilations = win.dilations;
  s.pads_begin = win.pads_begin;
  return s;
}

enum class DnnlType { kF32, kBF16 };

class DnnlConvForward {
 public:
  // w_layout: the layout the caller holds W in (View::layout; 0: dense).
  DnnlConvForward(const ConvShape& shape, DnnlType type, bool bias, int threads, int w_layout = 0);
  ~DnnlConvForward();
  bool ok() const { return impl_ != nullptr; }
  size_t scratch_bytes() const;
  // The blocked layout (backends/cpu/onednn_layout.h) the primitive reads W in, when it is a
  // permutation of W; 0 otherwise. W held in it is read without a reorder.
  int weights_layout() const;
  // y = conv(x, w) + bias; x, w, bias and y have the element type given at construction (bias may
  // be null when constructed without one). scratch: scratch_bytes(), 64-byte aligned.
  void run(const void* x, const void* w, const void* bias, void* y, void* scratch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class DnnlConvBackward {
 public:
  // want_dx: the input's gradient; want_dw: the weights' (and, with want_db, the bias') gradient.
  // w_layout, dw_layout: the layouts the caller holds W and dW in (View::layout; 0: dense).
  DnnlConvBackward(const ConvShape& shape, DnnlType type, bool want_dx, bool want_dw, bool want_db, int threads,
                   int w_layout = 0, int dw_layout = 0);
  ~DnnlConvBackward();
  bool ok() const { return impl_ != nullptr; }
  size_t scratch_bytes() const;
  // The blocked layouts backward-data reads W in and backward-weights writes dW in (0: none that
  // permutes W, or that primitive is not made).
  int data_weights_layout() const;
  int diff_weights_layout() const;
  // dy, x, w: the element type; dx: the element type; dw: the element type (bf16 is oneDNN's fp32
  // sums rounded once, as PyTorch asks for it) ; db: fp32 (null when not wanted).
  void run(const void* dy, const void* x, const void* w, void* dx, void* dw, float* db, void* scratch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace amp::cpu
