// Products whose leading dimensions are not 16-byte multiples run on padded copies
// (backends/cuda/gemm_padding.h): GPT-2's language-model head, 50257 columns, in miniature. Each
// of the head's three products — the forward with its bias, the input gradient (the odd size is
// the sum's length) and the weight gradient with its bias gradient (as Transpose(MatMul(
// Transpose(x), dY)), which the backend runs as one product with a transposed A whose row length
// is odd) — computes what the CPU backend computes in fp32, fp16 and bf16, and on the stand-ins
// the device report says it ran padded, to which sizes. Products with aligned rows, batched ones
// and those that read C are not padded.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "tests/support/test_support.h"
#include "tests/support/weight_gradient_model.h"

#if AMP_HAVE_CUDA
#include "tests/support/backend_parity.h"
#include "tests/support/device_report_file.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::DeviceReportFile;
using test::expect_parity;
using test::Feeds;
using test::OneNode;
using test::random_tensor;

struct Case {
  std::string what;
  Model model;
  Feeds feeds;
  std::vector<std::string> fetches;
  std::string padded;  // the product cuBLASLt runs, "" when not padded
};

// Every dim that is a row length rounds up to 16 bytes: 8 elements of 16 bits, 4 of fp32.
std::vector<Case> cases(DType t) {
  const bool f32 = t == DType::kFloat;
  std::vector<Case> all;
  // The head's forward: [6, 12] x [12, 37] + b[37] (a Gemm's C row: the BIAS epilogue); 37
  // columns pad to 40, and in 16 bits A's 12-element rows to 16.
  OneNode forward("Gemm", {{"a", random_tensor(t, {6, 12}, 1)}, {"b", random_tensor(t, {12, 37}, 2)},
                           {"c", random_tensor(t, {37}, 3)}},
                  {t});
  all.push_back({"forward with its bias", std::move(forward.m), forward.feeds, forward.outputs,
                 f32 ? "[6x12]x[12x40]" : "[6x16]x[16x40]"});
  // Its input gradient dY W^T: the sum runs over the 37 columns of both operands; D's 12-element
  // rows pad in 16 bits.
  OneNode input_grad("Gemm", {{"a", random_tensor(t, {6, 37}, 4)}, {"b", random_tensor(t, {12, 37}, 5)}}, {t});
  input_grad.node->set_attr(Attribute::of_int("transB", 1));
  all.push_back({"input gradient", std::move(input_grad.m), input_grad.feeds, input_grad.outputs,
                 f32 ? "[6x40]x[40x12]" : "[6x40]x[40x16]"});
  // A transposed A whose rows are 37 long, and 5 columns: both m and n pad.
  OneNode transposed("Gemm", {{"a", random_tensor(t, {12, 37}, 6)}, {"b", random_tensor(t, {12, 5}, 7)}}, {t});
  transposed.node->set_attr(Attribute::of_int("transA", 1));
  all.push_back({"transposed A, odd m and n", std::move(transposed.m), transposed.feeds, transposed.outputs, "[40x12]x[12x8]"});
  // The weight gradient with the bias gradient: dW = dY^T x over 2 x 3 rows (a transposed A with
  // 37-element rows), the bias gradient (37 sums) from the same product's epilogue.
  all.push_back({"weight and bias gradient", test::weight_gradient_model(t, 2, 3, 12, 37, 37),
                 {{"x", random_tensor(t, {6, 12}, 8)}, {"dy", random_tensor(t, {2, 3, 37}, 9)}}, {"dw", "db"},
                 f32 ? "[40x6]x[6x12]" : "[40x6]x[6x16]"});
  // Not padded: aligned rows, a product that reads C, and a batched one (batch strides are the
  // operands' own).
  OneNode aligned("MatMul", {{"a", random_tensor(t, {6, 16}, 10)}, {"b", random_tensor(t, {16, 24}, 11)}}, {t});
  all.push_back({"aligned", std::move(aligned.m), aligned.feeds, aligned.outputs, ""});
  // A Gemm that reads C (beta 2 on a column): run as it is, odd rows and all.
  OneNode with_c("Gemm", {{"a", random_tensor(t, {6, 12}, 14)}, {"b", random_tensor(t, {12, 37}, 15)},
                          {"c", random_tensor(t, {6, 1}, 16)}},
                 {t});
  with_c.node->set_attr(Attribute::of_float("beta", 2.0f));
  all.push_back({"reads C", std::move(with_c.m), with_c.feeds, with_c.outputs, ""});
  OneNode batched("MatMul", {{"a", random_tensor(t, {3, 5, 9}, 12)}, {"b", random_tensor(t, {3, 9, 7}, 13)}}, {t});
  all.push_back({"batched", std::move(batched.m), batched.feeds, batched.outputs, ""});
  return all;
}

TEST(CudaBackendGpu, ProductsWithOddRowLengthsRunPaddedAndMatchTheCpu) {
  REQUIRE_GPU();
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    const double tol = t == DType::kFloat ? 10.0 : 1.0;  // fp32 sums in another order
    for (const Case& c : cases(t)) {
      SCOPED_TRACE(std::string(dtype_name(t)) + ": " + c.what);
      const DeviceReportFile report("gemm_padding");
      expect_parity(c.model, c.feeds, c.fetches, tol);
      if (!test::on_standins()) continue;  // a device reports the same; its tests check results
      const std::vector<nlohmann::json> padded = report.lines("gemm_padded");
      if (c.padded.empty()) {
        EXPECT_TRUE(padded.empty()) << padded.front().dump();
      } else {
        ASSERT_EQ(padded.size(), 1u);
        EXPECT_EQ(padded[0]["runs"], c.padded);
      }
    }
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
