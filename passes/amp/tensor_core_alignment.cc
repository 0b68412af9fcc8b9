#include "passes/amp/tensor_core_alignment.h"

namespace amp {

namespace {

// Static size of dim i of v's shape (negative i counts from the end); -1 when unknown.
int64_t dim(const Value* v, int64_t i) {
  if (!v || !v->type().shape) return -1;
  const auto& dims = v->type().shape->dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (i < 0) i += rank;
  if (i < 0 || i >= rank || !dims[i].is_static()) return -1;
  return *dims[i].value;
}

void check(std::vector<MisalignedDim>& out, const char* role, int64_t size) {
  if (size > 0 && size % kTensorCoreMultiple != 0)
    out.push_back({role, size, (size + kTensorCoreMultiple - 1) / kTensorCoreMultiple * kTensorCoreMultiple});
}

std::vector<MisalignedDim> misaligned(const Node& n) {
  std::vector<MisalignedDim> out;
  const std::string& op = n.op_type();
  if (op == "MatMul") {
    const Value* b = n.input(1);
    const bool b_vector = b && b->type().shape && b->type().shape->rank() == 1;
    check(out, "K (reduction)", dim(n.input(0), -1));
    if (!b_vector) check(out, "N (output columns)", dim(b, -1));
  } else if (op == "Gemm") {
    check(out, "K (reduction)", dim(n.input(0), n.attr_int("transA", 0) ? 0 : 1));
    check(out, "N (output columns)", dim(n.input(1), n.attr_int("transB", 0) ? 0 : 1));
  } else if ((op == "Conv" || op == "ConvTranspose") && n.attr_int("group", 1) == 1) {
    // Conv weights are [out, in, k...]; ConvTranspose weights [in, out, k...].
    const bool transpose = op == "ConvTranspose";
    check(out, "input channels", dim(n.input(1), transpose ? 0 : 1));
    check(out, "output channels", dim(n.input(1), transpose ? 1 : 0));
  }
  return out;
}

}  // namespace

std::vector<MisalignedProduct> find_misaligned_products(const AmpDecisions& decisions) {
  std::vector<MisalignedProduct> out;
  for (const NodeDecision& nd : decisions.nodes) {
    // Filter on the copied op first: Casts that cleanup removed have dangling node pointers.
    const bool product = nd.op == "MatMul" || nd.op == "Gemm" || nd.op == "Conv" || nd.op == "ConvTranspose";
    if (!product || nd.decision.precision != Precision::kLow || !nd.node->domain().empty()) continue;
    auto dims = misaligned(*nd.node);
    if (!dims.empty()) out.push_back({nd.ref, nd.op, std::move(dims)});
  }
  return out;
}

}  // namespace amp
