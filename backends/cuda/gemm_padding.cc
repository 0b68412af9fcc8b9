#include "backends/cuda/gemm_padding.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int64_t kLeadingBytes = 16;      // what cuBLASLt's vectorised kernels load at a time

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
size_t aligned(size_t bytes) {
  constexpr size_t a = GemmPadding::kAlignment;
  return (bytes + a - 1) / a * a;
}

GemmPadding::Staged staged(int64_t rows, int64_t cols, int64_t padded_rows, int64_t padded_cols, DType t) {
  return {rows, cols, padded_rows, padded_cols, dtype_size(t), 0};
}

// dst (padded) = src with zeros around it.
void stage(const GemmPadding::Staged& s, const void* src, uint8_t* dst, cudaStream_t stream) {
  const size_t row = static_cast<size_t>(s.cols) * s.elem, padded_row = static_cast<size_t>(s.padded_cols) * s.elem;
  AMP_CUDA_CHECK(cudaMemcpy2DAsync(dst, padded_row, src, row, row, static_cast<size_t>(s.rows), cudaMemcpyDeviceToDevice,
                                   stream));
  if (s.padded_cols > s.cols)
    AMP_CUDA_CHECK(cudaMemset2DAsync(dst + row, padded_row, 0, padded_row - row, static_cast<size_t>(s.rows), stream));
  if (s.padded_rows > s.rows)
    AMP_CUDA_CHECK(cudaMemsetAsync(dst + static_cast<size_t>(s.rows) * padded_row, 0,
                                   static_cast<size_t>(s.padded_rows - s.rows) * padded_row, stream));
}

// dst = the real [rows, cols] of the padded src.
void unstage(const GemmPadding::Staged& s, const uint8_t* src, void* dst, cudaStream_t stream) {
  const size_t row = static_cast<size_t>(s.cols) * s.elem, padded_row = static_cast<size_t>(s.padded_cols) * s.elem;
  AMP_CUDA_CHECK(cudaMemcpy2DAsync(dst, row, src, padded_row, row, static_cast<size_t>(s.rows), cudaMemcpyDeviceToDevice,
                                   stream));
}

}  // namespace

GemmPadding::GemmPadding(const GemmDesc& g) : desc_(g), run_(g) {
  using E = GemmEpilogue;
  const bool bias = g.epilogue == E::kBias, grad = g.epilogue == E::kBiasGradFromA || g.epilogue == E::kBiasGradFromB;
  if (g.batch != 1 || g.beta != 0.0f || !(g.epilogue == E::kNone || bias || grad)) return;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return;
  const int64_t ab = kLeadingBytes / static_cast<int64_t>(dtype_size(g.ab_type));
  const int64_t dd = kLeadingBytes / static_cast<int64_t>(dtype_size(g.d_type));
  // Every dim that is some matrix's row length (its leading dimension once cuBLASLt sees the
  // row-major matrices as column-major ones): n is D's, and B's unless transposed; k is A's
  // unless transposed and B's when transposed; m is A's when transposed.
  run_.n = round_up(g.n, g.trans_b ? dd : std::max(dd, ab));
  if (!g.trans_a || g.trans_b) run_.k = round_up(g.k, ab);
  if (g.trans_a) run_.m = round_up(g.m, ab);
  if (run_.m == g.m && run_.n == g.n && run_.k == g.k) return;
  active_ = true;
  a_ = g.trans_a ? staged(g.k, g.m, run_.k, run_.m, g.ab_type) : staged(g.m, g.k, run_.m, run_.k, g.ab_type);
  b_ = g.trans_b ? staged(g.n, g.k, run_.n, run_.k, g.ab_type) : staged(g.k, g.n, run_.k, run_.n, g.ab_type);
  d_ = staged(g.m, g.n, run_.m, run_.n, g.d_type);
  if (bias) bias_ = staged(1, g.n, 1, run_.n, g.d_type);
  if (g.epilogue == E::kBiasGradFromB) bias_grad_ = staged(1, g.n, 1, run_.n, g.d_type);
  if (g.epilogue == E::kBiasGradFromA) bias_grad_ = staged(1, g.m, 1, run_.m, g.d_type);
  auto stored = [&](Staged& s, bool padded, const char* which) {
    if (!padded) return;
    if (s.padded_rows != s.rows || s.padded_cols == s.cols)
      throw Error(std::string("internal: ") + which + " of a " + g.str() + " is stored padded, which the padded product " +
                  padded_str() + " does not read so");
    s.in_place = true;
  };
  stored(a_, g.a_stored_padded, "A");
  stored(b_, g.b_stored_padded, "B");
  stored(d_, g.d_stored_padded, "D");
  for (Staged* s : {&a_, &b_, &d_, &bias_, &bias_grad_})
    if (s->used()) {
      s->at = bytes_;
      bytes_ += aligned(s->bytes());
    }
}

bool GemmPadding::takes_pitch(const GemmDesc& desc, int operand, int64_t pitch) {
  GemmDesc plain = desc;
  plain.a_stored_padded = plain.b_stored_padded = plain.d_stored_padded = false;
  const GemmPadding p(plain);
  const Staged& s = operand == 0 ? p.a_ : operand == 1 ? p.b_ : p.d_;
  return p.active() && s.padded_rows == s.rows && s.padded_cols > s.cols && s.padded_cols == pitch;
}

std::string GemmPadding::padded_str() const {
  return "[" + std::to_string(run_.m) + "x" + std::to_string(run_.k) + "]x[" + std::to_string(run_.k) + "x" +
         std::to_string(run_.n) + "]";
}

void GemmPadding::before(const void*& a, const void*& b, void*& d, void*& bias, uint8_t* staging,
                         cudaStream_t stream) const {
  if (!active_) return;
  if (a_.used()) {
    stage(a_, a, staging + a_.at, stream);
    a = staging + a_.at;
  }
  if (b_.used()) {
    stage(b_, b, staging + b_.at, stream);
    b = staging + b_.at;
  }
  if (bias_.used()) {
    stage(bias_, bias, staging + bias_.at, stream);
    bias = staging + bias_.at;
  }
  if (bias_grad_.used()) bias = staging + bias_grad_.at;
  if (d_.used()) d = staging + d_.at;
}

void GemmPadding::after(void* d_out, void* bias_out, const uint8_t* staging, cudaStream_t stream) const {
  if (!active_) return;
  if (d_.used()) unstage(d_, staging + d_.at, d_out, stream);
  if (bias_grad_.used()) unstage(bias_grad_, staging + bias_grad_.at, bias_out, stream);
}

}  // namespace amp::cuda
