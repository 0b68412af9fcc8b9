// A kernel's outputs by its op's shape rule: the views' dtypes and dims as facts (and the contents
// of the inputs the rule reads), the rule applied, every output required to come out known.
#include "backends/cpu/kernel.h"

#include <algorithm>

#include "graph/error.h"

namespace amp::cpu {

void Kernel::bind_shape_rule(const Node& n, int64_t opset) {
  rule_ = find_shape_rule(n.domain(), n.op_type());
  if (rule_) shape_ = rule_->bind(n, opset);
}

void Kernel::infer_outputs(KernelIO& io) const {
  if (!rule_) throw Error("internal: this op has no shape rule; its kernel must set its outputs");
  std::vector<TensorFacts> facts(io.in.size());
  ShapeQuery q;
  for (size_t i = 0; i < io.in.size(); ++i) {
    if (!io.has_in(i)) {
      q.in.push_back(nullptr);
      continue;
    }
    const View& v = io.input(i);
    facts[i] = TensorFacts::of(v.dtype, v.dims);
    const bool read = std::find(rule_->value_inputs.begin(), rule_->value_inputs.end(), static_cast<int>(i)) !=
                      rule_->value_inputs.end();
    if (read && v.data)
      facts[i].value = Tensor::from_bytes(v.dtype, v.dims, std::string(static_cast<const char*>(v.data), v.nbytes()));
    q.in.push_back(&facts[i]);
  }
  q.out.resize(io.out.size());
  for (size_t k = 0; k < io.out.size(); ++k)
    if (io.has_out(k)) q.out[k].dtype = io.output(k).dtype;
  shape_(q);
  for (size_t k = 0; k < io.out.size(); ++k) {
    if (!io.has_out(k)) continue;
    const std::optional<std::vector<int64_t>> dims = q.out[k].dims();
    if (!dims || q.out[k].dtype == DType::kUndefined)
      throw Error("internal: the shape rule left output " + std::to_string(k) + " unknown although every input is known");
    io.output(k).dtype = q.out[k].dtype;
    io.output(k).dims = *dims;
  }
}

OpEntry with_shape_rule(OpEntry e, std::string_view domain) {
  if (const ShapeRule* r = find_shape_rule(domain, e.op)) e.shape_inputs = r->value_inputs;
  return e;
}

}  // namespace amp::cpu
