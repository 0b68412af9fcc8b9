// Valid models on which ONNX 1.12's version converter asserts or converts wrongly
// (tests/graph/converter_cases.py, one per case of graph/onnx_converter_limits.h): each is refused
// before the converter runs, with one line naming the file, the node, its op and the opset step
// (the converter's own assertion names neither node nor op); the one case adapted here loads.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

struct Refusal {
  const char* model;
  const char* op;
  int from;
  const char* why;  // a part of the reason
};

class ConverterLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("converter_cases");
    std::string out;
    ASSERT_EQ(run_python(source_dir() + "/tests/graph/converter_cases.py " + dir_, &out), 0) << out;
  }
  static std::string dir_;
};
std::string ConverterLimits::dir_;

TEST_F(ConverterLimits, EachCaseIsRefusedNamingNodeOpAndOpsetStep) {
  const Refusal cases[] = {
      {"equal_6_no_adapter", "Equal", 6, "no adapter for Equal"},
      {"lstm_6_no_adapter", "LSTM", 6, "no adapter for LSTM"},
      {"cast_5_no_adapter", "Cast", 5, "no adapter for Cast"},
      {"add_6_broadcast_symbolic", "Add", 6, "dims as numbers"},
      {"mul_6_symbolic_against_number", "Mul", 6, "symbolic dim with a number"},
      {"gemm_6_symbolic", "Gemm", 6, "dims of A, B and C as numbers"},
      {"batchnorm_6_training", "BatchNormalization", 6, "is_test = 1 only"},
      {"dropout_6_training", "Dropout", 6, "is_test = 1 only"},
      {"batchnorm_8_spatial0", "BatchNormalization", 8, "spatial = 1 only"},
      {"batchnorm_12_saved_outputs_read", "BatchNormalization", 13, "saved mean and variance"},
      {"upsample_6_rank_unknown", "Upsample", 6, "4-D"},
      {"scan_8", "Scan", 8, "batch axis the scan axis"},
  };
  for (const Refusal& c : cases) {
    const std::string path = dir_ + "/" + c.model + ".onnx";
    try {
      load_model(path);
      ADD_FAILURE() << c.model << " loaded";
    } catch (const InputError& e) {
      const std::string what = e.what();
      const std::string expected = path + ": node 'n' (" + c.op + "): ONNX's version converter cannot take it from opset " +
                                   std::to_string(c.from) + " to " + std::to_string(c.from + 1) + ": ";
      EXPECT_EQ(what.rfind(expected, 0), 0u) << c.model << ": " << what;
      EXPECT_NE(what.find(c.why), std::string::npos) << c.model << ": " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << c.model << ": " << what;
    }
  }
}

// BatchNormalization's saved mean and variance (opsets 9-13), unread, are dropped before the
// converter's 13 -> 14 step, which refuses them.
TEST_F(ConverterLimits, UnreadSavedStatisticsOfBatchNormalizationAreDropped) {
  const Model m = load_model(dir_ + "/batchnorm_12_saved_outputs_unread.onnx");
  ASSERT_EQ(m.graph->num_nodes(), 1u);
  EXPECT_EQ((*m.graph->nodes().begin())->outputs().size(), 3u);
  EXPECT_EQ(m.opset_version(""), 17);
}

}  // namespace
}  // namespace amp::test
