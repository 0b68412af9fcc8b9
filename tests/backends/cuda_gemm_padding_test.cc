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
#include "tests/support/lm_head_model.h"
#include "tests/support/test_support.h"
#include "tests/support/weight_gradient_model.h"

#if AMP_HAVE_CUDA
#include "tests/support/backend_parity.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/device_report_file.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::DeviceReportFile;
using test::expect_close;
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

// The head trained (backends/cuda/row_pitch.h): its 37-column scores and their gradient stored with
// rows 40 elements apart, written by the forward product and the loss's gradient, read by the
// loss, ArgMax and the two backward products where they are. Three AdamW steps on the same batch
// compute the CPU backend's losses, correct counts and weights, as the staged copies do
// (AMP_CUDA_STAGED_ROWS=1), and with cuBLASLt refusing the bias and bias-gradient epilogues (on
// the stand-ins: the generated bias kernel then writes the padded scores through scratch, and the
// separate sum adds the padded gradient's rows). On the stand-ins the products stage no copy of
// the scores or their gradient: three fewer than the staged run.
TEST(CudaBackendGpu, PaddedScoreRowsTrainAsTheCpuDoesWithoutStagedCopies) {
  REQUIRE_GPU();
  constexpr int64_t kVocab = 37, kRows = 2 * 8;
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    const TrainingStep step = test::mixed_precision_step(test::lm_head_model(kVocab, 16), precision);
    const CompileOptions options = test::step_options(step);
    Tensor lr(DType::kFloat, {});
    lr.mutable_as<float>()[0] = 1e-2f;
    const Feeds feeds = {{"tokens", random_tensor(DType::kInt64, {2, 8}, 31, 0, kVocab)},
                         {step.labels, random_tensor(DType::kInt64, {2, 8}, 32, 0, kVocab)},
                         {step.lr, lr}};
    auto cpu = make_backend("cpu")->compile(step.model, options);
    std::vector<Tensor> want;
    for (int k = 0; k < 3; ++k)
      for (Tensor& t : cpu->run(feeds, {step.loss, step.correct})) want.push_back(std::move(t));
    size_t staged_total[2] = {0, 0};
    for (const char* mode : {"padded", "staged", "epilogues refused"}) {
      SCOPED_TRACE(std::string(dtype_name(precision)) + ", " + mode);
      const bool staged = std::string(mode) == "staged", refused = std::string(mode) == "epilogues refused";
      if (refused && !test::on_standins()) continue;  // a knob of the stand-in cuBLASLt
      std::optional<test::ScopedEnv> staged_env, refuse_env;
      if (staged) staged_env.emplace("AMP_CUDA_STAGED_ROWS", "1");
      if (refused) refuse_env.emplace("AMP_STANDIN_CUBLASLT_REFUSE", "BIAS,BGRADA,BGRADB");
      const DeviceReportFile report(std::string("padded_rows_") + (staged ? "staged" : refused ? "refused" : "padded"));
      auto gpu = make_backend("cuda")->compile(step.model, options);
      for (int k = 0; k < 3; ++k) {
        const std::vector<Tensor> got = gpu->run(feeds, {step.loss, step.correct});
        expect_close(got[0], want[2 * k], "loss at step " + std::to_string(k), 10.0);
        // A 16-bit score may round to the other side of a near tie on either backend.
        EXPECT_NEAR(got[1].element(0), want[2 * k + 1].element(0), precision == DType::kFloat ? 0.0 : 1.0)
            << "correct predictions at step " << k;
      }
      for (const std::string& name : step.params) expect_close(gpu->read_state(name), cpu->read_state(name), name, 10.0);
      if (!test::on_standins() || refused) continue;
      size_t& total = staged_total[staged ? 1 : 0];
      for (const nlohmann::json& line : report.lines("gemm_padded")) total += std::stoul(line["staged_bytes"].get<std::string>());
    }
    if (test::on_standins()) {
      // The forward product's D, the input gradient's A and the weight gradient's A: the scores or
      // their gradient, [16, 40] each in the staging area's 256-byte pieces.
      const size_t rows_bytes = static_cast<size_t>(kRows * 40) * dtype_size(precision);
      const size_t piece = (rows_bytes + 255) / 256 * 256;
      EXPECT_EQ(staged_total[1] - staged_total[0], 3 * piece) << "staged " << staged_total[1] << ", padded " << staged_total[0];
    }
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
