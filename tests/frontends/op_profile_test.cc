// AMP_PROFILE=1 (backends/cpu/op_profile.h): a CPU run says where its time went, one row per op
// type, or per fused group of elementwise ops ("Add+Relu"), whose calls per run add up to the
// model's nodes of each type; without it, nothing.
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
    // "Conv   4.0   0.123   45.6%": the op's name (or a fused group's "Add+Relu"), then its calls per run.
    std::istringstream lines(out);
    std::string line;
    double total = 0;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string name;
      double calls = 0;
      if (!(fields >> name >> calls)) continue;
      std::istringstream members(name);
      for (std::string member; std::getline(members, member, '+');)
        if (member == op) total += calls;
    }
    EXPECT_DOUBLE_EQ(total, static_cast<double>(nodes)) << op << ":\n" << out;
  }
  ASSERT_EQ(run_command(run, &out), 0) << out;
  EXPECT_EQ(out.find("profile:"), std::string::npos) << out;
}

}  // namespace
}  // namespace amp::test
