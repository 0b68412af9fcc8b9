// Blocks of real architectures as PyTorch exports them (tests/passes/torch_exports.py), and the
// check that the gradients autodiff builds for them are PyTorch's: the cross-entropy loss appended
// to the export's logits, the gradient of every parameter built and run on the CPU backend for
// PyTorch's batch, compared with PyTorch's autograd.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph_builder.h"
#include "passes/training/loss.h"
#include "tests/support/test_support.h"

namespace amp::test {

struct TorchExport {
  Model model;
  std::vector<std::pair<std::string, Tensor>> reference;  // input, labels, loss, grad:<parameter>
};

// Runs torch_exports.py for the model `name` and loads what it wrote.
inline TorchExport torch_export(const std::string& name) {
  const std::string dir = temp_dir("torch_export_" + name);
  std::string out;
  const int rc = run_python(source_dir() + "/tests/passes/torch_exports.py " + name + " " + dir, &out);
  if (rc != 0) throw std::runtime_error("torch_exports.py " + name + " failed:\n" + out);
  return TorchExport{load_model(dir + "/model.onnx"), read_npz(dir + "/reference.npz")};
}

// Builds and runs the gradients (fp32) and compares loss and gradients with PyTorch's, element by
// element within atol + rtol |PyTorch's|.
inline void expect_pytorch_gradients(TorchExport& e, double atol, double rtol) {
  Graph& g = *e.model.graph;
  const LossInfo loss = add_loss(e.model, LossSpec{LossKind::kCrossEntropy, "logits", "labels"});
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<Value*> params;
  std::vector<const Tensor*> expected;
  const Tensor* expected_loss = nullptr;
  for (const auto& [key, t] : e.reference) {
    if (key == "input" || key == "labels") feeds.emplace_back(key, t);
    if (key == "loss") expected_loss = &t;
    if (key.rfind("grad:", 0) != 0) continue;
    Value* p = g.lookup(key.substr(5));
    ASSERT_NE(p, nullptr) << "no initializer " << key.substr(5);
    params.push_back(p);
    expected.push_back(&t);
  }
  ASSERT_NE(expected_loss, nullptr);
  GraphBuilder b(g);
  const std::vector<Value*> grads = build_gradients(g, loss.loss, b.scalar(1, DType::kFloat), params);
  std::vector<std::string> fetches{loss.loss->name()};
  for (Value* grad : grads) {
    ASSERT_NE(grad, nullptr);
    g.add_output(grad);
    fetches.push_back(grad->name());
  }
  const std::vector<Tensor> got = make_backend("cpu")->compile(e.model, {})->run(feeds, fetches);
  EXPECT_NEAR(got[0].as<float>()[0], expected_loss->as<float>()[0], atol + rtol * std::fabs(expected_loss->as<float>()[0]));
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& want = *expected[i];
    ASSERT_EQ(got[i + 1].dims, want.dims) << params[i]->name();
    for (int64_t k = 0; k < want.numel(); ++k)
      EXPECT_NEAR(got[i + 1].as<float>()[k], want.as<float>()[k], atol + rtol * std::fabs(want.as<float>()[k]))
          << "d loss / d " << params[i]->name() << "[" << k << "]";
  }
}

}  // namespace amp::test
