#include "backends/cuda/unit_patterns.h"

#include "backends/cuda/batch_norm_relu_fusion.h"
#include "backends/cuda/conv_batch_norm_fusion.h"
#include "backends/cuda/layer_norm_residual_fusion.h"
#include "backends/cuda/convolution_ops.h"
#include "backends/cuda/matmul_ops.h"

namespace amp::cuda {
namespace {

// A matcher whose results name their parts as UnitMatch does.
template <class Fusion, std::vector<Fusion> (*Match)(const Graph&, const std::function<bool(const Node*)>&)>
std::vector<UnitMatch> as_units(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<UnitMatch> out;
  for (Fusion& f : Match(g, excluded))
    out.push_back({std::move(f.nodes), std::move(f.inputs), std::move(f.outputs), std::move(f.op)});
  return out;
}

}  // namespace

const std::vector<UnitPattern>& unit_patterns() {
  static const std::vector<UnitPattern> patterns = {
      {"cuBLASLt product with its epilogues", as_units<ProductFusion, match_product_epilogues>},
      // Before the convolution epilogues and the BatchNorm units: it takes a 16-bit BatchNorm + ReLU
      // between two convolutions whole, and leaves the others to them.
      {"16-bit convolutions around a BatchNorm + ReLU (cuDNN's convolution fusions)", match_conv_batch_norm},
      {"cuDNN convolution with bias, residual and ReLU", as_units<ConvFusion, match_convolution_epilogues>},
      {"BatchNorm + residual Add + ReLU, forward and backward", match_batch_norm_relu},
      {"LayerNorm's backward + the residual stream's gradient", match_layer_norm_residual},
      {"the residual stream's Add + LayerNorm", match_residual_layer_norm},
  };
  return patterns;
}

}  // namespace amp::cuda
