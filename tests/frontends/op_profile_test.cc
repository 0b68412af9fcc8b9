// AMP_PROFILE=1 (backends/cpu/op_profile.h): a CPU run says where its time went, one row per op
// type with as many calls per run as the model has nodes of that type; without it, nothing.
#include <gtest/gtest.h>

#include <sstream>

#include "graph/onnx_io.h"
#include "tests/support/graph_counts.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

TEST(OpProfile, EachOpTypeIsOneRowWithTheModelsNodeCount) {
  const std::string dir = temp_dir("op_profile");
  const std::string model = source_dir() + "/models/cnn.onnx";
  const std::string run = binary_dir() + "/amp-run " + model + " --inputs " + source_dir() +
                          "/models/cnn.sample.npz --outputs " + dir + "/o.npz --device cpu 2>&1";
  std::string out;
  ASSERT_EQ(run_command("AMP_PROFILE=1 " + run, &out), 0) << out;
  ASSERT_NE(out.find("profile: 1 runs, "), std::string::npos) << out;
  const Model m = load_model(model);
  for (const char* op : {"Conv", "Relu", "MaxPool"}) {
    const size_t nodes = count_op(*m.graph, op);
    ASSERT_GT(nodes, 0u) << op;
    // "Conv   4.0   0.123   45.6%": the op's name, then its calls per run.
    std::istringstream lines(out);
    std::string line;
    bool found = false;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string name;
      double calls = 0;
      if (fields >> name >> calls && name == op) {
        found = true;
        EXPECT_DOUBLE_EQ(calls, static_cast<double>(nodes)) << line;
      }
    }
    EXPECT_TRUE(found) << op << " has no row:\n" << out;
  }
  ASSERT_EQ(run_command(run, &out), 0) << out;
  EXPECT_EQ(out.find("profile:"), std::string::npos) << out;
}

}  // namespace
}  // namespace amp::test
