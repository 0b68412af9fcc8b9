// Removes Casts that change nothing, in every graph of a model, until none is left:
//   no-op casts (input already of the 'to' type);
//   exact chains: Cast_B(Cast_A(x)) reads x directly when A holds every value of x's type exactly
//     (fp16 -> fp32 -> fp16 becomes x; fp16 -> fp32 -> bf16 becomes fp16 -> bf16); a lossy first
//     step (fp32 -> fp16 -> fp32) changes values and is kept;
//   duplicates: two Casts of one value to one type in one graph become one;
//   dead Casts (nothing reads them).
// A Cast producing a graph output keeps it (the output's name and type must not change).
#pragma once

#include "passes/pass.h"

namespace amp {

class CastCleanupPass : public Pass {
 public:
  std::string name() const override { return "cast-cleanup"; }
  std::string summary() const override { return "remove no-op, exact round-trip, duplicate and dead Casts"; }
  bool run(Model& m) override;
};

// True when every value of type `from` is exactly representable in `to`.
bool widens_exactly(DType from, DType to);

}  // namespace amp
