// What the ops that compute channels-last (CudaOp::channels_last, channels_last.h) share: which
// data they take so, the list of their data operands, the check that the plan handed them all in
// one layout, and a channels-last tensor's dims in storage order.
#pragma once

#include <initializer_list>
#include <string>

#include "backends/cuda/cuda_op.h"
#include "graph/error.h"

namespace amp::cuda {

// Data the convolutions, pools and BatchNorms compute channels-last when the plan asks: 16-bit
// [N, C, H, W], the case cuDNN's NHWC Tensor Core kernels and fusion engines are for; fp32 and
// other ranks keep ONNX's layout.
inline bool channels_last_case(const TensorDesc& x) {
  return (x.dtype == DType::kFloat16 || x.dtype == DType::kBFloat16) && x.dims.size() == 4;
}

// A channels-last tensor's dims in the order it is stored: N, spatial..., C.
inline std::vector<int64_t> stored_dims(const TensorDesc& x) {
  std::vector<int64_t> d = x.dims;
  d.erase(d.begin() + 1);
  d.push_back(x.dims[1]);
  return d;
}

// The operands among `inputs` and `outputs` that are present in s, listed channels-last; the
// per-channel ones (scale, bias, statistics) are never in these lists: their layout is the same
// either way.
inline ChannelsLastOperands listed_operands(const OpShapes& s, std::initializer_list<size_t> inputs,
                                            std::initializer_list<size_t> outputs) {
  ChannelsLastOperands cl;
  cl.in.assign(s.in.size(), false);
  cl.out.assign(s.out.size(), false);
  for (size_t i : inputs)
    if (s.has_in(i)) cl.in[i] = true;
  for (size_t k : outputs)
    if (s.has_out(k)) cl.out[k] = true;
  return cl;
}

// Whether the present ones among `inputs` and `outputs` are channels-last: the plan converts
// around a unit and never hands it a mix, so a mix is an InputError naming `what`.
inline bool one_layout(const OpShapes& s, std::initializer_list<size_t> inputs, std::initializer_list<size_t> outputs,
                       const char* what) {
  const TensorDesc* first = nullptr;
  auto check = [&](const TensorDesc* d) {
    if (!first) first = d;
    else if (d->channels_last != first->channels_last)
      throw InputError(std::string(what) + "'s data operands are not all channels-last or all not");
  };
  for (size_t i : inputs)
    if (s.has_in(i)) check(s.in[i]);
  for (size_t k : outputs)
    if (s.has_out(k)) check(s.out[k]);
  return first && first->channels_last;
}

}  // namespace amp::cuda
