// The CPU backend's op table: every family's entries, looked up by op type.
#include <unordered_map>

#include "backends/cpu/kernel.h"

namespace amp::cpu {

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = [] {
    std::vector<OpEntry> all;
    for (const auto* family : {&elementwise_ops(), &cast_ops(), &float_class_ops(), &mean_ops(), &bit_shift_ops(), &random_ops(), &matmul_ops(), &conv_ops(), &conv_transpose_ops(), &pool_ops(), &norm_ops(),
                               &softmax_ops(), &reduce_ops(), &arg_extremum_ops(), &shape_ops(), &generator_ops(), &dropout_ops(),
                               &loss_ops(), &pad_ops(), &resize_ops(), &scatter_nd_ops(), &einsum_ops(),
                               &tile_ops(), &cumsum_ops(), &gather_elements_ops(), &depth_to_space_ops(), &top_k_ops(),
                               &gather_nd_ops(), &nonzero_ops(), &compress_ops(), &eye_like_ops(), &reverse_sequence_ops(),
                               &hardmax_ops(), &non_max_suppression_ops(), &max_unpool_ops(),
                               &unique_ops(), &roi_align_ops(), &grid_sample_ops(),
                               &quantize_ops(), &recurrent_ops(), &scan_ops(), &control_flow_ops()})
      for (const OpEntry& e : *family) all.push_back(with_shape_rule(e, ""));
    return all;
  }();
  return table;
}

const OpEntry* find_op(std::string_view op) {
  static const std::unordered_map<std::string_view, const OpEntry*> index = [] {
    std::unordered_map<std::string_view, const OpEntry*> m;
    for (const OpEntry& e : op_table()) m.emplace(e.op, &e);
    return m;
  }();
  auto it = index.find(op);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace amp::cpu
