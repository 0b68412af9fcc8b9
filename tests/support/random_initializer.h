// A random fp32 initializer added to a test model's graph: the weights of the hand-built models the
// CUDA tests train.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "tests/support/parity.h"

namespace amp::test {

// Named `name`, dims `dims`, uniform in [-range, range) from `seed`.
inline Value* random_initializer(Graph& g, const std::string& name, std::vector<int64_t> dims, uint32_t seed, float range) {
  Tensor t = random_tensor(DType::kFloat, std::move(dims), seed, -range, range);
  t.name = name;
  return g.add_initializer(std::move(t));
}

}  // namespace amp::test
