// The gradient rules of issue 31's data movement and indexing ops against PyTorch's autograd:
// indexing_block (tests/passes/torch_exports.py) as PyTorch exports it in training mode —
// pixel_shuffle as DepthToSpace (CRD), repeat as Tile, cumsum as CumSum, topk as TopK, gather as
// GatherElements at TopK's indices and scatter_add as ScatterElements (reduction add) — whose
// parameters' gradients through the cross-entropy loss must be PyTorch's. Each rule is also checked
// alone by central differences (gradient_check_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "frontends/lib/npz.h"
#include "graph/amp_ops.h"
#include "passes/autodiff/autodiff.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/test_support.h"
#include "tests/support/torch_exports.h"

namespace amp::test {
namespace {

TEST(IndexingGradient, PyTorchBlockWithIndexingOpsGetsPyTorchsGradients) {
  TorchExport e = torch_export("indexing_block");
  std::map<std::string, int> ops;
  for (const Node* n : e.model.graph->nodes()) ops[n->op_type()]++;
  for (const char* op : {"DepthToSpace", "Tile", "CumSum", "TopK", "GatherElements", "ScatterElements"})
    EXPECT_EQ(ops[op], 1) << op;
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

// RoiAlign (ai.onnx_amp RoiAlignGrad) against torchvision's roi_align backward: roi_align_block,
// two aligned roi_aligns of a convolution's map (a fixed and an adaptive sampling grid, regions on
// both batch entries, one past the map's edge); the stem's gradients pass through every tap.
TEST(IndexingGradient, TorchvisionRoiAlignGetsPyTorchsGradients) {
  TorchExport e = torch_export("roi_align_block");
  int roi_aligns = 0;
  for (const Node* n : e.model.graph->nodes()) roi_aligns += n->op_type() == "RoiAlign";
  EXPECT_EQ(roi_aligns, 2);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

// ScatterElements and ScatterND with opset 18's max and min (ai.onnx_amp) against PyTorch's
// scatter_reduce (amax / amin, include_self) autograd (tests/backends/kernel_reference.py; ScatterND
// as scatter_reduce over the data's rows): values of three levels, so the data and several updates
// tie for many elements and share its gradient evenly, which central differences cannot check.
TEST(IndexingGradient, ScatterMaxAndMinShareTiesAsPyTorchsScatterReduce) {
  struct ScatterCase {
    const char* ref;
    const char* op;
    int64_t axis;  // < -1: none (ScatterND)
    const char* reduction;
    std::vector<int64_t> x, i, u;
    std::vector<int64_t> indices;
  };
  const ScatterCase cases[] = {
      {"scatter_elements_max_grad", "ScatterElements", 1, "max", {3, 5}, {3, 4}, {3, 4}, {1, 1, 4, -1, 0, 2, 0, 2, 3, 3, 3, -2}},
      {"scatter_elements_min_grad", "ScatterElements", 0, "min", {4, 3}, {3, 3}, {3, 3}, {0, 1, 2, 3, 3, 3, 0, -1, 2}},
      {"scatter_nd_max_grad", "ScatterND", -2, "max", {4, 3}, {3, 1}, {3, 3}, {2, 0, -2}},
      {"scatter_nd_min_grad", "ScatterND", -2, "min", {3, 2, 2}, {4, 2}, {4, 2}, {1, 0, 2, 1, 1, 0, -1, 1}},
  };
  const std::string dir = temp_dir("scatter_reduce_gradients");
  struct Run {
    std::string name;
    std::vector<Tensor> grads;  // of x, of the updates
  };
  std::vector<Run> runs;
  std::string names;
  for (const ScatterCase& c : cases)
    for (DType t : {DType::kFloat, DType::kDouble}) {
      Tensor x = random_tensor(t, c.x, 0, 3, 71), u = random_tensor(t, c.u, 0, 3, 72);
      for (Tensor* v : {&x, &u})  // whole numbers 0, 1, 2: ties
        for (int64_t k = 0; k < v->numel(); ++k) {
          if (t == DType::kFloat) v->mutable_as<float>()[k] = std::floor(v->as<float>()[k]);
          else v->mutable_as<double>()[k] = std::floor(v->as<double>()[k]);
        }
      Tensor indices = int64_tensor(c.indices);
      indices.dims = c.i;
      const Tensor dy = random_tensor(t, c.x, -2, 2, 73);
      std::vector<Attribute> attrs;
      if (c.axis >= -1) attrs.push_back(Attribute::of_int("axis", c.axis));
      attrs.push_back(Attribute::of_string("reduction", c.reduction));
      Model m = one_node_model(c.op, {{"x", x}, {"i", indices}, {"u", u}}, std::move(attrs));
      m.set_opset_version(kAmpDomain, kAmpDomainVersion);
      Graph& g = *m.graph;
      for (Node* n : g.nodes()) n->set_domain(kAmpDomain);
      Value* seed = g.add_input("dy", ValueType::tensor(t, Shape::of(dy.dims)));
      const std::vector<Value*> d = build_gradients(g, g.lookup("y"), seed, {g.lookup("x"), g.lookup("u")});
      ASSERT_NE(d[0], nullptr) << c.ref;
      ASSERT_NE(d[1], nullptr) << c.ref;
      g.add_output(d[0]);
      g.add_output(d[1]);
      const std::string name = c.ref + std::string("@") + std::string(dtype_name(t));
      const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"i", indices}, {"u", u}, {"dy", dy}};
      write_npz(dir + "/" + name + ".in.npz", feeds);
      runs.push_back({name, run_cpu(m, feeds, {d[0]->name(), d[1]->name()})});
      names += " " + name;
    }
  std::string out;
  ASSERT_EQ(run_python(source_dir() + "/tests/backends/kernel_reference.py " + dir + names, &out), 0) << out;
  for (const Run& r : runs) {
    const auto refs = read_npz(dir + "/" + r.name + ".ref.npz");
    ASSERT_EQ(refs.size(), 2u) << r.name;
    for (size_t k = 0; k < 2; ++k) {
      Tolerance tol;
      tol.rtol = r.grads[k].dtype == DType::kDouble ? 1e-15 : 1e-7;  // one division each, as PyTorch's
      tol.atol = 0;
      EXPECT_EQ(compare_tensors(r.grads[k], refs[k].second, tol), "") << r.name << (k ? " d updates" : " d x");
    }
  }
}

// GridSample (ai.onnx_amp GridSampleGrad) against torch's grid_sample backward: grid_sample_block,
// a convolution's map sampled at a grid another convolution predicts, in three modes and paddings;
// the stem's gradients pass through dX, the predicting convolution's through dGrid.
TEST(IndexingGradient, GridSampleGetsPyTorchsGradientsThroughXAndTheGrid) {
  TorchExport e = torch_export("grid_sample_block");
  int grid_samples = 0;
  for (const Node* n : e.model.graph->nodes()) grid_samples += n->op_type() == "GridSample";
  EXPECT_EQ(grid_samples, 3);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

}  // namespace
}  // namespace amp::test
