// Blocked layouts that tensors may keep between kernels (View::layout): oneDNN's convolutions read
// and write weights in blocked formats (resnet18's 3x3 weights: OIhw16i16o), and reordering every
// weight into that format for the forward and its gradient back out of it cost resnet18 a seventh
// of its fp32 step. A weight, its gradient and the optimizer state that follows it can instead stay
// in the format from step to step: elementwise kernels compute the same element for element in any
// order of the elements, as long as every operand has that order.
//
// A layout is a registered (oneDNN format tag, groups) pair, numbered from 1; 0 is dense row-major.
// Groups > 1 views a grouped convolution's [M, C/g, k...] weights as oneDNN does, [g, M/g, C/g, k...].
// Only layouts that permute the same elements are registered for a tensor (no padding): a tensor
// keeps its byte size in any of them.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

namespace amp::cpu::onednn {

// The layout of a convolution primitive's weights memory `d` for a tensor of dims `dims` with
// `groups` groups: the registered (format tag, groups) pair whose desc equals d, or 0 when d is no
// permutation of the dense tensor expressed by a single format tag.
int weights_layout(const dnnl::memory::desc& d, const std::vector<int64_t>& dims, int64_t groups);

// The desc of a tensor with these (ONNX) dims and element type in `layout` (0: dense row-major).
dnnl::memory::desc layout_desc(const std::vector<int64_t>& dims, dnnl::memory::data_type t, int layout);

// The groups of a layout (1 for 0).
int64_t layout_groups(int layout);

// Whether `layout` can hold a tensor of these dims (its groups divide them, it permutes them).
bool layout_fits(int layout, const std::vector<int64_t>& dims);

// Copies a tensor from layout `from` into layout `to` (different buffers), with `threads` cores.
void relayout(const void* src, int from, void* dst, int to, const std::vector<int64_t>& dims,
              dnnl::memory::data_type t, int threads);

}  // namespace amp::cpu::onednn
