// The CPU backend: the reference every other backend is checked against. fp16/bf16 tensors are
// stored as 16 bits and computed in fp32 with one rounding per stored result, products go through
// OpenBLAS with fp32 accumulation, and loops spread over the cores with OpenMP.
#pragma once

#include "backends/backend.h"

namespace amp::cpu {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool available(std::string*) const override { return true; }
  std::string unsupported_reason(const Node& n) const override;
  std::unique_ptr<Executable> compile(const Model& m, const CompileOptions& options) override;
};

}  // namespace amp::cpu
