// complete_shapes: the ops' shape rules (graph/ops/shape_rules.h) filling in what ONNX's inference
// left without a rank. Before/expected graphs: ranks through a channel shuffle whose Reshape targets
// are computed (ShuffleNet's), dims where the contents are constants, known types untouched,
// contradictions named. End to end: PyTorch's export of a ShuffleNet-style block (ONNX leaves
// ReduceMean's input rankless) gets its gradients built, and they are PyTorch's.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "passes/autodiff/complete_shapes.h"
#include "passes/graph_builder.h"
#include "tests/support/torch_exports.h"

namespace amp {
namespace {

std::string shape_of(const Value* v) { return v->type().shape ? v->type().shape->str() : "none"; }

Value* typed_input(Graph& g, const std::string& name, DType t, std::vector<Dim> dims) {
  return g.add_input(name, ValueType::tensor(t, Shape{std::move(dims)}));
}

// x [N,8,4,4] -> Reshape to (N, 2, 4, 4, 4) computed from Shape(x) -> Transpose -> Reshape to
// (N, -1, 4, 4) -> ReduceMean over [2, 3] -> MatMul [8, 10] -> Add bias: every value after the
// first Reshape as ONNX leaves it, an element type and no shape.
TEST(CompleteShapes, RanksFollowThroughAChannelShuffleWhoseTargetsAreComputed) {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* x = typed_input(g, "x", DType::kFloat, {Dim::symbol("N"), Dim::fixed(8), Dim::fixed(4), Dim::fixed(4)});
  Value* n = b.op("Gather", {b.shape_of(x), b.scalar(0, DType::kInt64)}, DType::kInt64);
  Value* batch = b.unsqueeze(n, {0});
  Value* five = b.op("Concat", {batch, b.int64s({2, 4, 4, 4})}, DType::kInt64, attrs(Attribute::of_int("axis", 0)));
  Value* r5 = b.reshape(x, five);
  Value* t = b.transpose(r5, {0, 2, 1, 3, 4});
  Value* four = b.op("Concat", {batch, b.int64s({-1, 4, 4})}, DType::kInt64, attrs(Attribute::of_int("axis", 0)));
  Value* r4 = b.reshape(t, four);
  Value* mean = b.same("ReduceMean", {r4}, attrs(Attribute::of_ints("axes", {2, 3}), Attribute::of_int("keepdims", 0)));
  Value* split = b.emit("Split", {r4, b.int64s({3, 5})}, {ValueType::tensor(DType::kFloat), ValueType::tensor(DType::kFloat)},
                        attrs(Attribute::of_int("axis", 1)))[0];
  Value* flat = b.same("Flatten", {r4});
  Value* w = typed_input(g, "w", DType::kFloat, {Dim::fixed(8), Dim::fixed(10)});
  Value* bias = typed_input(g, "bias", DType::kFloat, {Dim::fixed(10)});
  Value* logits = b.add(b.matmul(mean, w), bias);
  Value* back = b.same("Squeeze", {b.unsqueeze(mean, {1}), b.int64s({1})});
  for (Value* v : {r5, t, r4, mean, split, flat, logits, back}) ASSERT_FALSE(v->type().shape) << v->name();

  complete_shapes(g);
  EXPECT_EQ(shape_of(five), "[5]");
  EXPECT_EQ(shape_of(r5), "[?,?,?,?,?]");  // the target's values come from the run-time batch
  EXPECT_EQ(shape_of(t), "[?,?,?,?,?]");
  EXPECT_EQ(shape_of(r4), "[?,?,?,?]");
  EXPECT_EQ(shape_of(mean), "[?,?]");
  EXPECT_EQ(shape_of(split), "[?,3,?,?]");
  EXPECT_EQ(shape_of(flat), "[?,?]");
  EXPECT_EQ(shape_of(logits), "[?,10]");
  EXPECT_EQ(shape_of(back), "[?,?]");
}

// Where the contents are constants (initializers, Constant nodes, Shape of a static shape), the dims
// follow too.
TEST(CompleteShapes, DimsFollowFromConstantContents) {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* x = typed_input(g, "x", DType::kFloat16, {Dim::fixed(2), Dim::fixed(6), Dim::fixed(4)});
  Value* r = b.reshape(x, b.int64s({0, -1, 2}));                       // 0 copies, -1 is inferred
  Value* s = b.reshape(x, b.op("Shape", {b.transpose(x, {2, 0, 1})}, DType::kInt64));
  Value* e = b.expand(b.same("ReduceSum", {r, b.int64s({1})}), b.int64s({3, 1, 1, 1}));
  Value* sl = b.same("Slice", {x, b.int64s({1, -1}), b.int64s({100, 0}), b.int64s({1, 2}), b.int64s({2, -1})});
  Value* gathered = b.same("Gather", {x, b.int64s({0, 1, 1})}, attrs(Attribute::of_int("axis", 1)));
  Value* cat = b.same("Concat", {x, x}, attrs(Attribute::of_int("axis", -1)));
  Value* halves = b.same("Split", {cat}, attrs(Attribute::of_int("axis", 2)));
  Value* zeros = b.op("ConstantOfShape", {b.int64s({5, 1})}, DType::kFloat);
  Value* mask = b.less(b.cast(x, DType::kFloat), b.scalar(0, DType::kFloat));
  complete_shapes(g);
  EXPECT_EQ(shape_of(r), "[2,12,2]");
  EXPECT_EQ(shape_of(s), "[4,2,6]");
  EXPECT_EQ(shape_of(e), "[3,2,1,2]");
  EXPECT_EQ(shape_of(sl), "[2,3,3]");
  EXPECT_EQ(shape_of(gathered), "[2,3,4]");
  EXPECT_EQ(shape_of(cat), "[2,6,8]");
  EXPECT_EQ(shape_of(halves), "[2,6,8]");  // one output: the whole extent
  EXPECT_EQ(shape_of(zeros), "[5,1]");
  EXPECT_EQ(shape_of(mask), "[2,6,4]");
  EXPECT_EQ(mask->dtype(), DType::kBool);
}

TEST(CompleteShapes, KnownTypesAreNeverChanged) {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* x = typed_input(g, "x", DType::kFloat, {Dim::fixed(2), Dim::fixed(3)});
  Value* y = b.same("Relu", {x});
  y->set_type(ValueType::tensor(DType::kFloat, Shape{{Dim::symbol("A"), Dim{}}}));
  Value* z = b.same("Relu", {y});
  complete_shapes(g);
  EXPECT_EQ(shape_of(y), "[A,?]");
  EXPECT_EQ(shape_of(z), "[A,?]");
}

// torch's repeat: Tile(Expand(x, ConstantOfShape(Shape(repeats))), repeats), the ConstantOfShape
// typed [?] as ONNX leaves it. The rule's length of that shape vector gives Expand and Tile their
// ranks (Expand's dims stay open: the vector's contents are not followed); the vector's declared
// type stays.
TEST(CompleteShapes, TileOfAnExpandAsTorchExportsRepeat) {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* x = typed_input(g, "x", DType::kFloat, {Dim::symbol("N"), Dim::fixed(4), Dim::fixed(8), Dim::fixed(8)});
  Value* repeats = b.int64s({1, 2, 1, 3});
  Tensor one(DType::kInt64, {1});
  one.mutable_as<int64_t>()[0] = 1;
  Value* ones = b.op("ConstantOfShape", {b.shape_of(repeats)}, DType::kInt64, attrs(Attribute::of_tensor("value", one)));
  ones->set_type(ValueType::tensor(DType::kInt64, Shape{{Dim{}}}));
  Value* tiled = b.same("Tile", {b.expand(x, ones), repeats});
  complete_shapes(g);
  EXPECT_EQ(shape_of(ones), "[?]");
  EXPECT_EQ(shape_of(tiled), "[?,?,?,?]");
}

TEST(CompleteShapes, AContradictionNamesTheNodeAndOp) {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* a = typed_input(g, "a", DType::kFloat, {Dim::fixed(2), Dim::fixed(3)});
  Value* c = typed_input(g, "c", DType::kFloat, {Dim::fixed(4)});
  Value* sum = b.add(a, c);
  sum->producer()->name = "bad_add";
  try {
    complete_shapes(g);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node bad_add (Add): shapes [2,3] and [4] do not broadcast"),
              std::string::npos)
        << e.what();
  }
}

// PyTorch's export of a ShuffleNet-style block (tests/passes/torch_exports.py channel_shuffle):
// ONNX's inference leaves the channel shuffle and the head's ReduceMean without ranks, which
// stopped autodiff ("the output's rank must be known"); with the ranks completed, the gradients of
// every parameter are PyTorch's for the same weights and batch.
TEST(CompleteShapes, PyTorchChannelShuffleGetsPyTorchsGradients) {
  test::TorchExport e = test::torch_export("channel_shuffle");
  const Node* reduce_mean = nullptr;
  for (const Node* n : e.model.graph->nodes())
    if (n->op_type() == "ReduceMean") reduce_mean = n;
  ASSERT_NE(reduce_mean, nullptr);
  ASSERT_FALSE(reduce_mean->input(0)->type().shape) << "ONNX's inference now gives the rank: the test checks nothing";
  test::expect_pytorch_gradients(e, 2e-5, 1e-4);
  EXPECT_EQ(reduce_mean->input(0)->type().shape->rank(), 4u);
}

}  // namespace
}  // namespace amp
