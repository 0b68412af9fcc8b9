// A tensor's elements in groups: those that share their index on the kept dims form one group,
// whatever the set of reduced dims (MeanVarianceNormalization's axes, ReduceLogSumExp's). A
// kernel takes a group per block and walks its members in input order (the CPU kernels' order,
// which their sequential sums follow). Neighbouring dims of the same status merge, and dims of
// extent 1 drop, as the CPU's walk does, so the usual cases are one or two runs each way.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"

namespace amp::cuda {

constexpr int kMaxGroupRuns = 8;

struct AxisGroups {
  int64_t groups = 1, members = 1;  // groups: product of the kept dims; members: of the reduced dims
  int kept_runs = 0, reduced_runs = 0;
  // Extents and input strides of the runs, innermost last.
  int64_t kept_dims[kMaxGroupRuns] = {}, kept_strides[kMaxGroupRuns] = {};
  int64_t reduced_dims[kMaxGroupRuns] = {}, reduced_strides[kMaxGroupRuns] = {};
};

// InputError for more than kMaxGroupRuns alternations of kept and reduced dims.
inline AxisGroups axis_groups(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  std::vector<std::pair<int64_t, bool>> runs;
  AxisGroups a;
  for (size_t d = 0; d < dims.size(); ++d) {
    (reduced[d] ? a.members : a.groups) *= dims[d];
    if (dims[d] == 1) continue;
    if (!runs.empty() && runs.back().second == reduced[d]) runs.back().first *= dims[d];
    else runs.emplace_back(dims[d], reduced[d]);
  }
  int64_t stride = 1;
  std::vector<std::pair<int64_t, int64_t>> kept, red;  // (extent, stride), innermost first
  for (size_t k = runs.size(); k-- > 0;) {
    (runs[k].second ? red : kept).emplace_back(runs[k].first, stride);
    stride *= runs[k].first;
  }
  if (kept.size() > kMaxGroupRuns || red.size() > kMaxGroupRuns)
    throw InputError("more than " + std::to_string(kMaxGroupRuns) + " alternations of kept and reduced dims");
  a.kept_runs = static_cast<int>(kept.size());
  a.reduced_runs = static_cast<int>(red.size());
  for (int k = 0; k < a.kept_runs; ++k) {
    a.kept_dims[a.kept_runs - 1 - k] = kept[static_cast<size_t>(k)].first;
    a.kept_strides[a.kept_runs - 1 - k] = kept[static_cast<size_t>(k)].second;
  }
  for (int k = 0; k < a.reduced_runs; ++k) {
    a.reduced_dims[a.reduced_runs - 1 - k] = red[static_cast<size_t>(k)].first;
    a.reduced_strides[a.reduced_runs - 1 - k] = red[static_cast<size_t>(k)].second;
  }
  return a;
}

// The input offset of group g's first member (groups in row-major order of the kept dims: the
// order of a reduction's outputs).
__device__ __forceinline__ int64_t group_base(const AxisGroups& a, int64_t g) {
  int64_t off = 0;
  for (int k = a.kept_runs; k-- > 0;) {
    off += g % a.kept_dims[k] * a.kept_strides[k];
    g /= a.kept_dims[k];
  }
  return off;
}

// The offset of a group's member j from its first (members in input order).
__device__ __forceinline__ int64_t member_offset(const AxisGroups& a, int64_t j) {
  int64_t off = 0;
  for (int k = a.reduced_runs; k-- > 0;) {
    off += j % a.reduced_dims[k] * a.reduced_strides[k];
    j /= a.reduced_dims[k];
  }
  return off;
}

}  // namespace amp::cuda
