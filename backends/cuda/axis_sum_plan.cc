#include "backends/cuda/axis_sum_plan.h"

#include <cstring>
#include <string>

#include "backends/cuda/axis_sums.cuh"
#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {

std::unique_ptr<PreparedOp> prepare_axis_sums(const std::vector<AxisReads>& reads, const TensorDesc& dy,
                                              const TensorDesc& dx, bool weighted, DeviceContext& ctx) {
  const size_t rank = dx.dims.size();
  if (rank > static_cast<size_t>(kMaxAxisSumRank))
    throw InputError("a gradient of rank " + std::to_string(rank) + " is not supported on the GPU (at most " +
                     std::to_string(kMaxAxisSumRank) + ")");
  if (dy.dtype != dx.dtype || (dx.dtype != DType::kFloat && dx.dtype != DType::kFloat16 &&
                               dx.dtype != DType::kBFloat16 && dx.dtype != DType::kDouble))
    throw InputError("the gradient takes float, float16, bfloat16 or double on the GPU, not " +
                     std::string(dtype_name(dy.dtype)) + " into " + std::string(dtype_name(dx.dtype)));
  if (reads.size() != rank || dy.dims.size() != rank) throw Error("internal: axis lists do not match the gradient's rank");
  AxisSumShape s;
  s.rank = static_cast<int>(rank);
  s.weighted = weighted;
  s.type = dx.dtype;
  std::vector<int64_t> offsets, index;
  std::vector<double> weight;
  for (size_t a = 0; a < rank; ++a) {
    s.in[a] = dx.dims[a];
    s.out[a] = dy.dims[a];
    s.first[a] = static_cast<int64_t>(offsets.size());
    if (reads[a].size() != static_cast<size_t>(dx.dims[a])) throw Error("internal: an axis list has the wrong length");
    for (const auto& list : reads[a]) {
      offsets.push_back(static_cast<int64_t>(index.size()));
      for (const auto& [o, w] : list) {
        index.push_back(o);
        weight.push_back(w);
      }
    }
    offsets.push_back(static_cast<int64_t>(index.size()));
  }
  // One block: offsets, then indices, then weights (8-byte elements, all aligned).
  const size_t offsets_bytes = offsets.size() * sizeof(int64_t), index_bytes = index.size() * sizeof(int64_t),
               weight_bytes = weighted ? weight.size() * sizeof(double) : 0;
  auto host = std::make_shared<std::vector<uint8_t>>(offsets_bytes + index_bytes + weight_bytes);
  if (offsets_bytes) std::memcpy(host->data(), offsets.data(), offsets_bytes);
  if (index_bytes) std::memcpy(host->data() + offsets_bytes, index.data(), index_bytes);
  if (weight_bytes) std::memcpy(host->data() + offsets_bytes + index_bytes, weight.data(), weight_bytes);
  auto tables = std::make_shared<DeviceBuffer>(host->size());
  // On the step's stream, so the kernels that read the tables are ordered after the copy.
  if (!host->empty())
    AMP_CUDA_CHECK(cudaMemcpyAsync(tables->data(), host->data(), host->size(), cudaMemcpyHostToDevice, ctx.stream()));
  auto* base = static_cast<uint8_t*>(tables->data());
  const auto* d_offsets = reinterpret_cast<const int64_t*>(base);
  const auto* d_index = reinterpret_cast<const int64_t*>(base + offsets_bytes);
  const auto* d_weight = weighted ? reinterpret_cast<const double*>(base + offsets_bytes + index_bytes) : nullptr;
  return std::make_unique<PreparedFunction>([s, tables, host, d_offsets, d_index, d_weight](const OpBuffers& b, DeviceContext& c) {
    axis_sums(s, d_offsets, d_index, d_weight, b.in[0], b.out[0], c.sm_count(), c.stream());
  });
}

}  // namespace amp::cuda
