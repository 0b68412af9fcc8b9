// The ai.onnx_amp op table: every grad_*.cc family's entries, looked up by op type.
#include <unordered_map>

#include "backends/cpu/grad_kernels.h"
#include "graph/amp_ops.h"
#include "graph/ops/shape_rules.h"

namespace amp::cpu {

const OpEntry* find_amp_op(std::string_view op) {
  static const std::unordered_map<std::string_view, const OpEntry*> index = [] {
    std::unordered_map<std::string_view, const OpEntry*> m;
    for (const auto* family : {&grad_conv_ops(), &grad_pool_ops(), &grad_norm_ops(), &grad_loss_ops(),
                               &grad_scatter_ops(), &grad_pad_ops(), &grad_resize_ops(), &grad_roi_align_ops(), &grad_grid_sample_ops(), &grad_all_finite_ops(), &grad_softmax_ops(), &amp_elementwise_ops(),
                               &fused_elementwise_ops(), &all_reduce_ops(), &attention_ops(), &recurrent_grad_ops(),
                               &bitwise_ops(), &scatter_elements_opset18_ops(), &scatter_nd_opset18_ops(),
                               &deform_conv_ops(), &col2im_ops()})
      for (const OpEntry& e : *family) m.emplace(e.op, &e);
    return m;
  }();
  auto it = index.find(op);
  return it == index.end() ? nullptr : it->second;
}

const OpEntry* find_op(std::string_view domain, std::string_view op) {
  if (domain.empty()) return find_op(op);
  if (domain == kOnnxMlDomain) return find_classical_ml_op(op);
  return domain == kAmpDomain ? find_amp_op(op) : nullptr;
}

}  // namespace amp::cpu
