// The gradient rules of issue 31's data movement and indexing ops against PyTorch's autograd:
// indexing_block (tests/passes/torch_exports.py) as PyTorch exports it in training mode —
// pixel_shuffle as DepthToSpace (CRD), repeat as Tile, cumsum as CumSum, topk as TopK, gather as
// GatherElements at TopK's indices and scatter_add as ScatterElements (reduction add) — whose
// parameters' gradients through the cross-entropy loss must be PyTorch's. Each rule is also checked
// alone by central differences (gradient_check_test.cc).
#include <gtest/gtest.h>

#include <map>

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
