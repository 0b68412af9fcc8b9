// A model run on a backend, and its results on the CUDA backend against the CPU backend's: the
// parity check of the CUDA tests (on a GPU, or on the host stand-ins in
// test_cuda_backend_emulated).
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

namespace amp::test {

// The fetches of `runs` runs of one executable (the last run's; from the third on, a captured
// CUDA Graph replays).
inline std::vector<Tensor> run_on(const std::string& device, const Model& m, const Feeds& feeds,
                                  const std::vector<std::string>& fetches, const CompileOptions& options = {},
                                  int runs = 1) {
  auto exe = make_backend(device)->compile(m, options);
  std::vector<Tensor> out;
  for (int r = 0; r < runs; ++r) out = exe->run(feeds, fetches);
  return out;
}

// The CUDA backend's fetches against the CPU backend's, within expect_close's tolerance times
// tol_scale.
inline void expect_parity(const Model& m, const Feeds& feeds, const std::vector<std::string>& fetches,
                          double tol_scale = 1.0) {
  const auto cpu = run_on("cpu", m, feeds, fetches);
  const auto gpu = run_on("cuda", m, feeds, fetches);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) expect_close(gpu[k], cpu[k], fetches[k], tol_scale);
}

}  // namespace amp::test
