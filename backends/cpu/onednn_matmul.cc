#include "backends/cpu/onednn_matmul.h"

#include <unordered_map>

#include "backends/cpu/onednn_runtime.h"

namespace amp::cpu {

using dnnl::memory;

struct DnnlMatMul::Impl {
  int threads = 1;
  dnnl::matmul prim;
  memory a, b, y, scratchpad;
  size_t total = 0;
  std::unordered_map<int, memory> args;
};

DnnlMatMul::DnnlMatMul(const MatMulGeometry& g, int threads, bool fp32) {
  if (g.batch <= 0 || g.m <= 0 || g.k <= 0 || g.n <= 0) return;
  onednn::OmpThreads omp(threads);
  try {
    using tag = memory::format_tag;
    const auto bf16 = fp32 ? memory::data_type::f32 : memory::data_type::bf16;
    const memory::desc a_md({g.shared_a ? 1 : g.batch, g.m, g.k}, bf16, tag::abc);
    const memory::desc b_md({g.shared_b ? 1 : g.batch, g.k, g.n}, bf16, tag::abc);
    const memory::desc y_md({g.batch, g.m, g.n}, bf16, tag::abc);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, y_md), onednn::user_scratchpad(),
                                    onednn::engine());
    onednn::require_optimised(pd.impl_info_str());
    auto impl = std::make_unique<Impl>();
    impl->threads = threads;
    impl->prim = dnnl::matmul(pd);
    impl->a = memory(a_md, onednn::engine(), DNNL_MEMORY_NONE);
    impl->b = memory(b_md, onednn::engine(), DNNL_MEMORY_NONE);
    impl->y = memory(y_md, onednn::engine(), DNNL_MEMORY_NONE);
    impl->scratchpad = memory(pd.scratchpad_desc(), onednn::engine(), DNNL_MEMORY_NONE);
    impl->total = onednn::aligned(pd.scratchpad_desc().get_size());
    impl->args = {{DNNL_ARG_SRC, impl->a},
                  {DNNL_ARG_WEIGHTS, impl->b},
                  {DNNL_ARG_DST, impl->y},
                  {DNNL_ARG_SCRATCHPAD, impl->scratchpad}};
    impl_ = std::move(impl);
  } catch (const dnnl::error&) {
    impl_.reset();  // the kernel's widening path runs
  }
}

DnnlMatMul::~DnnlMatMul() = default;

size_t DnnlMatMul::scratch_bytes() const { return impl_ ? impl_->total : 0; }

void DnnlMatMul::run(const void* a, const void* b, void* y, void* scratch) const {
  Impl& p = *impl_;
  onednn::OmpThreads omp(p.threads);
  p.a.set_data_handle(const_cast<void*>(a));
  p.b.set_data_handle(const_cast<void*>(b));
  p.y.set_data_handle(y);
  p.scratchpad.set_data_handle(scratch);
  p.prim.execute(onednn::stream(), p.args);
  onednn::stream().wait();
}

}  // namespace amp::cpu
