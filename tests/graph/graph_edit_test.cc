// The IR's editing API keeps use lists, producers and names consistent, and verify() reports each
// kind of broken graph it promises to catch.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph/error.h"
#include "graph/model.h"
#include "graph/verify.h"

namespace amp {
namespace {

ValueType f32(std::vector<int64_t> dims) { return ValueType::tensor(DType::kFloat, Shape::of(dims)); }
ValueType f16(std::vector<int64_t> dims) { return ValueType::tensor(DType::kFloat16, Shape::of(dims)); }

struct Fixture {
  Model m;
  Graph& g = *m.graph;
  Value *x, *w, *y, *z;
  Node *mm, *relu;
  Fixture() {
    m.opset_imports = {{"", 17}};
    g.name = "g";
    x = g.add_input("x", f32({2, 4}));
    Tensor wt(DType::kFloat, {4, 3});
    wt.name = "w";
    w = g.add_initializer(wt);
    mm = g.add_node("MatMul", {x, w}, {"y"});
    y = mm->output(0);
    y->set_type(f32({2, 3}));
    relu = g.add_node("Relu", {y}, {"z"});
    z = relu->output(0);
    z->set_type(f32({2, 3}));
    g.add_output(z);
  }
};

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(what) != std::string::npos; });
}

TEST(GraphEdit, UseListsFollowEdits) {
  Fixture f;
  ASSERT_EQ(f.y->uses().size(), 1u);
  EXPECT_EQ(f.y->uses()[0].node, f.relu);
  EXPECT_EQ(f.y->producer(), f.mm);
  EXPECT_TRUE(verify(f.m).empty());

  // Insert a Cast pair between MatMul and Relu and reroute the Relu through it.
  Node* c = f.g.add_node("Cast", {f.y}, {"y_fp16"}, "", f.relu);
  c->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat16)));
  c->output(0)->set_type(f16({2, 3}));
  Node* back = f.g.add_node("Cast", {c->output(0)}, {"y_fp32"}, "", f.relu);
  back->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat)));
  back->output(0)->set_type(f32({2, 3}));
  f.relu->set_input(0, back->output(0));
  EXPECT_EQ(f.y->uses().size(), 1u);
  EXPECT_EQ(f.y->uses()[0].node, c);
  EXPECT_TRUE(verify(f.m).empty()) << verify(f.m)[0];

  // Undo with replace_all_uses + remove_node; the graph is exactly as before.
  f.g.replace_all_uses(back->output(0), f.y);
  f.g.remove_node(back);
  f.g.remove_node(c);
  EXPECT_EQ(f.g.num_nodes(), 2u);
  EXPECT_EQ(f.relu->input(0), f.y);
  EXPECT_EQ(f.g.value("y_fp16"), nullptr);
  EXPECT_TRUE(verify(f.m).empty());
}

TEST(GraphEdit, RemovingANodeStillReadThrows) {
  Fixture f;
  EXPECT_THROW(f.g.remove_node(f.mm), Error);
  EXPECT_THROW(f.g.remove_node(f.relu), Error);  // z is a graph output
}

TEST(GraphEdit, ReplaceAllUsesCoversGraphOutputs) {
  Fixture f;
  f.g.replace_all_uses(f.z, f.y);
  EXPECT_EQ(f.g.outputs()[0], f.y);
  EXPECT_FALSE(f.z->is_output());
  f.g.remove_node(f.relu);
  EXPECT_TRUE(verify(f.m).empty());
}

TEST(GraphEdit, FreshNamesNeverCollide) {
  Fixture f;
  std::string a = f.g.fresh_name("y");
  std::string b = f.g.fresh_name("y");
  EXPECT_NE(a, "y");
  EXPECT_NE(a, b);
  EXPECT_THROW(f.g.create_value("x"), Error);
}

TEST(GraphEdit, TopologicalSortIsStableAndRepairsOrder) {
  Fixture f;
  f.g.move_before(f.relu, f.mm);  // relu now reads y before MatMul produces it
  EXPECT_FALSE(f.g.is_topologically_sorted());
  EXPECT_TRUE(mentions(verify(f.m), "before it is produced"));
  f.g.topological_sort();
  EXPECT_TRUE(f.g.is_topologically_sorted());
  auto order = f.g.node_vector();
  EXPECT_EQ(order[0], f.mm);
  EXPECT_EQ(order[1], f.relu);
}

TEST(GraphEdit, CycleIsReported) {
  Fixture f;
  Node* add = f.g.add_node("Add", {f.z, f.z}, {"loop"}, "", f.relu);
  f.mm->set_input(0, add->output(0));  // MatMul <- Add <- Relu <- MatMul
  EXPECT_THROW(f.g.topological_sort(), InputError);
  EXPECT_FALSE(verify(f.m).empty());
}

TEST(Verify, DanglingValue) {
  Fixture f;
  Value* ghost = f.g.create_value("ghost", f32({2, 3}));
  f.relu->set_input(0, ghost);
  EXPECT_TRUE(mentions(verify(f.m), "dangling"));
}

TEST(Verify, TypeMismatchBetweenInputsBoundToOneTypeVariable) {
  Fixture f;
  f.x->set_type(f16({2, 4}));  // MatMul's A and B are both T
  auto problems = verify(f.m);
  ASSERT_TRUE(mentions(problems, "(both T)")) << (problems.empty() ? "" : problems[0]);
}

TEST(Verify, CastOutputMustMatchTo) {
  Fixture f;
  Node* c = f.g.add_node("Cast", {f.z}, {"zc"});
  c->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat16)));
  c->output(0)->set_type(f32({2, 3}));
  EXPECT_TRUE(mentions(verify(f.m), "'to' says float16"));
}

TEST(Verify, TypeNotAllowedBySchema) {
  Fixture f;
  f.x->set_type(ValueType::tensor(DType::kBool, Shape::of({2, 4})));
  f.w->set_type(ValueType::tensor(DType::kBool, Shape::of({4, 3})));
  EXPECT_TRUE(mentions(verify(f.m), "does not allow"));
}

TEST(Verify, SubgraphReadsOuterValuesAndShadowingIsCaught) {
  Fixture f;
  Value* cond = f.g.add_input("cond", ValueType::tensor(DType::kBool, Shape::of({})));
  Node* iff = f.g.add_node("If", {cond}, {"r"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>(&f.g);
    Graph& sub = *a.g;
    sub.name = branch;
    Node* n = sub.add_node("Neg", {f.z}, {sub.fresh_name("neg")});  // reads the outer z
    n->output(0)->set_type(f32({2, 3}));
    sub.add_output(n->output(0));
    iff->set_attr(std::move(a));
  }
  iff->output(0)->set_type(f32({2, 3}));
  EXPECT_TRUE(verify(f.m).empty()) << verify(f.m)[0];
  // The outer z is read inside the If: the If depends on Relu for topological order.
  auto reads = Graph::all_reads(iff);
  EXPECT_NE(std::find(reads.begin(), reads.end(), f.z), reads.end());
  f.g.move_before(iff, f.mm);
  f.g.topological_sort();
  EXPECT_EQ(f.g.node_vector().back(), iff);

  // Removing the If drops the subgraphs' uses of the outer z.
  size_t uses_before = f.z->uses().size();
  f.g.remove_node(iff);
  EXPECT_EQ(f.z->uses().size(), uses_before - 2);

  // A subgraph cannot define a name that shadows an enclosing value.
  Graph sub(&f.g);
  EXPECT_THROW(sub.add_input("x", f32({2, 4})), Error);
}

}  // namespace
}  // namespace amp
