// The joined table of device ops: each family file contributes its entries.
#include <algorithm>

#include "backends/cuda/cuda_op.h"

namespace amp::cuda {

const std::vector<CudaOpEntry>& cuda_op_table() {
  static const std::vector<CudaOpEntry> table = [] {
    std::vector<CudaOpEntry> all;
    for (const auto* family : {&matmul_ops(), &data_movement_ops(), &normalization_ops(), &softmax_loss_ops(),
                               &reduction_ops(), &convolution_ops(), &training_ops(),
                               &collective_ops(), &pad_ops(), &resize_ops(), &scatter_nd_ops(),
                               &einsum_ops(), &attention_ops(), &int_compare_ops(), &lrn_ops(), &arg_extremum_ops(),
                               &quantize_ops(), &cast_ops(), &instance_norm_ops(),
                               &top_k_ops(), &max_unpool_ops(), &roi_align_ops(), &deform_conv_ops(), &grid_sample_ops(), &indexing_ops(), &float_class_ops(),
                               &broadcast_ops()})
      all.insert(all.end(), family->begin(), family->end());
    return all;
  }();
  return table;
}

const CudaOpEntry* find_cuda_op(std::string_view domain, std::string_view op) {
  const auto& t = cuda_op_table();
  auto it = std::find_if(t.begin(), t.end(), [&](const CudaOpEntry& e) { return e.domain == domain && e.op == op; });
  return it == t.end() ? nullptr : &*it;
}

unsigned grid_for(int64_t n, int block, const DeviceContext& ctx) {
  const int64_t needed = (n + block - 1) / block;
  const int64_t fill = static_cast<int64_t>(ctx.sm_count()) * 8;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, fill)));
}

}  // namespace amp::cuda
