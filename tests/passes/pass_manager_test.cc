#include "passes/pass_manager.h"

#include <gtest/gtest.h>

#include "graph/error.h"
#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

// Appends "<tag>" to the graph's doc_string: shows the order passes ran in.
class TagPass : public Pass {
 public:
  explicit TagPass(std::string tag) : tag_(std::move(tag)) {}
  std::string name() const override { return "tag-" + tag_; }
  std::string summary() const override { return "appends a tag to the graph doc string"; }
  bool run(Model& m) override {
    stats_.clear();
    m.graph->doc_string += tag_;
    count("tags", 1);
    return true;
  }

 private:
  std::string tag_;
};

class NoChangePass : public Pass {
 public:
  std::string name() const override { return "no-change"; }
  std::string summary() const override { return "changes nothing"; }
  bool run(Model&) override { return false; }
};

// Retypes an Add's output so its inputs and output disagree: a pass bug verify() must catch.
class BreakTypesPass : public Pass {
 public:
  std::string name() const override { return "break-types"; }
  std::string summary() const override { return "gives an Add an fp16 output from fp32 inputs"; }
  bool run(Model& m) override {
    for (Node* n : m.graph->nodes())
      if (n->op_type() == "Add") n->output(0)->set_dtype(DType::kFloat16);
    return true;
  }
};

TEST(PassManager, RunsPassesInOrderAndReportsEach) {
  test::ModelBuilder b;
  b.output(b.op("Add", {b.input("x"), b.input("y")}, "z"));
  PassManager pm;
  pm.add(std::make_unique<TagPass>("a"));
  pm.add(std::make_unique<NoChangePass>());
  pm.add(std::make_unique<TagPass>("b"));
  EXPECT_TRUE(pm.run(b.m));
  EXPECT_EQ(b.m.graph->doc_string, "ab");
  ASSERT_EQ(pm.runs().size(), 3u);
  EXPECT_EQ(pm.runs()[0].name, "tag-a");
  EXPECT_TRUE(pm.runs()[0].changed);
  EXPECT_FALSE(pm.runs()[1].changed);
  EXPECT_EQ(pm.runs()[2].stats.at("tags"), 1);
  EXPECT_GE(pm.runs()[0].seconds, 0.0);
}

TEST(PassManager, NothingChangedIsReported) {
  test::ModelBuilder b;
  b.output(b.op("Add", {b.input("x"), b.input("y")}, "z"));
  PassManager pm;
  pm.add(std::make_unique<NoChangePass>());
  EXPECT_FALSE(pm.run(b.m));
}

TEST(PassManager, VerifyEachBlamesThePassThatBrokeTheGraph) {
  test::ModelBuilder b;
  b.output(b.op("Add", {b.input("x"), b.input("y")}, "z"));
  PassManager pm(/*verify_each=*/true);
  pm.add(std::make_unique<TagPass>("a"));
  pm.add(std::make_unique<BreakTypesPass>());
  pm.add(std::make_unique<TagPass>("never"));
  try {
    pm.run(b.m);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'break-types' broke the graph: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("z"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.m.graph->doc_string, "a");
}

TEST(PassManager, WithoutVerifyEachABrokenGraphPassesThrough) {
  test::ModelBuilder b;
  b.output(b.op("Add", {b.input("x"), b.input("y")}, "z"));
  PassManager pm;
  pm.add(std::make_unique<BreakTypesPass>());
  EXPECT_TRUE(pm.run(b.m));
  EXPECT_FALSE(verify(b.m).empty());
}

}  // namespace
}  // namespace amp
