#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/executable.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel.h"
#include "graph/amp_ops.h"

namespace amp::cpu {

std::string CpuBackend::unsupported_reason(const Node& n) const {
  if (!n.domain().empty() && n.domain() != kAmpDomain)
    return "domain '" + n.domain() + "' is not supported by the cpu backend";
  const OpEntry* e = find_op(n.domain(), n.op_type());
  if (!e) return "op " + n.op_type() + " is not supported by the cpu backend";
  const Value* first = e->types && !n.inputs().empty() ? n.input(0) : nullptr;
  if (first && first->dtype() != DType::kUndefined && !(e->types & (1u << static_cast<int>(first->dtype()))))
    return "op " + n.op_type() + " does not take " + std::string(dtype_name(first->dtype())) + " on the cpu backend";
  return "";
}

std::unique_ptr<Executable> CpuBackend::compile(const Model& m, const CompileOptions& options) {
  return std::make_unique<CpuExecutable>(m, options, *this);
}

}  // namespace amp::cpu
