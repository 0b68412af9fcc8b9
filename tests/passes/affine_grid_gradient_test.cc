// AffineGrid (opset 20) has no gradient rule of its own: the import writes it as its function body
// in opset-17 ops (graph/onnx_newer_opsets.cc), whose rules give theta's gradient. Checked against
// PyTorch's autograd of torch.nn.functional.affine_grid on the models of
// tests/frontends/affine_grid_reference.py (2-D and 3-D, align_corners 0 and 1, float32 and
// float64, size a constant or a graph input; not its 16-bit ones).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "passes/autodiff/autodiff.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

const Tensor& named(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& key) {
  for (const auto& [k, t] : arrays)
    if (k == key) return t;
  throw std::runtime_error("no array " + key);
}

TEST(AffineGridGradient, ThetasGradientIsPyTorchs) {
  const std::string dir = temp_dir("affine_grid_gradient");
  std::string names;
  ASSERT_EQ(run_python(source_dir() + "/tests/frontends/affine_grid_reference.py " + dir, &names), 0) << names;
  std::istringstream lines(names);
  int cases = 0;
  for (std::string name; std::getline(lines, name);) {
    if (name.rfind("affine_grid", 0) != 0) continue;  // torch's warnings
    const std::string base = dir + "/" + name;
    Model m = load_model(base + ".onnx");
    Graph& g = *m.graph;
    if (is_low_precision(g.lookup("theta")->dtype())) continue;  // references in float32 and float64
    ++cases;
    const auto grad = read_npz(base + ".grad.npz");
    const Tensor& dgrid = named(grad, "dgrid");
    Value* seed = g.add_input("dgrid", ValueType::tensor(dgrid.dtype, Shape::of(dgrid.dims)));
    const std::vector<Value*> d = build_gradients(g, g.lookup("grid"), seed, {g.lookup("theta")});
    ASSERT_NE(d[0], nullptr) << name;
    g.add_output(d[0]);
    std::vector<std::pair<std::string, Tensor>> feeds = read_npz(base + ".in.npz");
    feeds.emplace_back("dgrid", dgrid);
    const Tensor got = run_cpu(m, feeds, {d[0]->name()})[0], &want = named(grad, "dtheta");
    ASSERT_EQ(got.dims, want.dims) << name;
    // Sums over the grid's positions, in another order than PyTorch's.
    Tolerance tol;
    tol.rtol = got.dtype == DType::kDouble ? 1e-13 : 1e-5;
    tol.atol = got.dtype == DType::kDouble ? 1e-13 : 1e-5;
    EXPECT_EQ(compare_tensors(got, want, tol), "") << name;
  }
  EXPECT_EQ(cases, 5);
}

}  // namespace
}  // namespace amp::test
