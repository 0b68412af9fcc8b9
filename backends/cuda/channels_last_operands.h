// What the ops that compute channels-last (CudaOp::channels_last, channels_last.h) share: the list
// of their data operands, and the check that the plan handed them all in one layout.
#pragma once

#include <initializer_list>
#include <string>

#include "backends/cuda/cuda_op.h"
#include "graph/error.h"

namespace amp::cuda {

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
