#include "backends/cpu/onednn_runtime.h"

#include <omp.h>

namespace amp::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

OmpThreads::OmpThreads(int n) : previous_(omp_get_max_threads()) { omp_set_num_threads(n > 0 ? n : 1); }
OmpThreads::~OmpThreads() { omp_set_num_threads(previous_); }

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void require_optimised(const char* impl_info) {
  if (std::string(impl_info).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "reference implementation");
}

}  // namespace amp::cpu::onednn
