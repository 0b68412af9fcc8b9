#include "passes/name_nodes.h"

#include <gtest/gtest.h>

#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

TEST(NameNodes, UnnamedNodesAreNamedAfterOpAndFirstOutputWithoutClashes) {
  test::ModelBuilder b;
  Value* r = b.op("Relu", {b.input("x")}, "r");
  Value* t = b.op("Tanh", {r}, "t");
  b.output(t);
  b.producer("r")->name = "";
  b.producer("t")->name = "Relu_r";  // already taken by the name the Relu would get
  NameNodesPass pass;
  EXPECT_TRUE(pass.run(b.m));
  EXPECT_EQ(b.producer("r")->name, "Relu_r_1");
  EXPECT_EQ(b.producer("t")->name, "Relu_r");
  EXPECT_EQ(pass.stats().at("nodes named"), 1);
  EXPECT_FALSE(pass.run(b.m));
}

}  // namespace
}  // namespace amp
