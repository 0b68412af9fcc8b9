// amp-rewrite --dtype fp16 of a transformer encoder layer as PyTorch 1.13 exports it (LayerNorm
// spelled out, tests/frontends/transformer_encoder_export.py) runs in ONNX Runtime at its default
// graph optimizations and matches PyTorch's float32 output. Before recognize-layer-norm, ORT's
// LayerNormFusion swallowed the fp16 -> fp32 Cast in front of the chain and built a
// LayerNormalization with fp16 X and fp32 Scale and B, which ORT then refused ("Type parameter (T)
// of Optype (LayerNormalization) bound to different types").
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "graph/external_data.h"
#include "graph/onnx_io.h"
#include "graph/tensor_proto.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

Tensor read_tensor(const std::string& path) {
  onnx::TensorProto proto;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(proto.ParseFromIstream(&in)) << path;
  ExternalDataReader external(path, fs::path(path).parent_path().string());
  return tensor_from_proto(proto, path, external);
}

TEST(AmpRewriteLayerNorm, Fp16RewriteOfTorchsTransformerEncoderRunsInOnnxRuntimeAndMatchesTorch) {
  const std::string dir = test::temp_dir("amp_rewrite_layer_norm");
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/transformer_encoder_export.py " + dir, &out), 0)
      << out;
  ASSERT_EQ(test::run_command(test::binary_dir() + "/amp-rewrite " + dir + "/encoder.onnx -o " + dir +
                                  "/fp16.onnx --dtype fp16 --force",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("  layer norms: 2 decomposed LayerNorms recognised as LayerNormalization\n"), std::string::npos)
      << out;
  // Each LayerNormalization reads fp32 X, Scale and B (LayerNormalization stays fp32).
  const Model m = load_model(dir + "/fp16.onnx");
  size_t layer_norms = 0;
  for (const Node* n : m.graph->nodes()) {
    EXPECT_NE(n->op_type(), "ReduceMean") << n->label();
    if (n->op_type() != "LayerNormalization") continue;
    ++layer_norms;
    for (const Value* v : n->inputs()) EXPECT_EQ(v->dtype(), DType::kFloat) << n->label() << " " << v->name();
  }
  EXPECT_EQ(layer_norms, 2u);

  const std::string ort = test::source_dir() + "/tests/ort";
  if (!fs::exists(ort + "/node_modules/onnxruntime-node") || test::run_command("node --version", nullptr) != 0)
    GTEST_SKIP() << "ONNX Runtime is not installed: cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install";
  // ONNX Runtime's default optimizations (all), whatever the environment says.
  const int rc = test::run_command("env -u ORT_GRAPH_OPTIMIZATION node " + ort + "/run_model.js " + dir + "/fp16.onnx " +
                                       dir + "/inputs " + dir + "/out16",
                                   &out);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_FALSE(fs::exists(dir + "/out16/error.txt")) << test::read_file(dir + "/out16/error.txt");
  const Tensor want = read_tensor(dir + "/expected/output_0.pb"), got = read_tensor(dir + "/out16/output_0.pb");
  ASSERT_EQ(got.dtype, DType::kFloat);  // keep_io_types
  ASSERT_EQ(got.dims, want.dims);
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_err = std::max(max_err, std::fabs(got.element(i) - want.element(i)));
    max_ref = std::max(max_ref, std::fabs(want.element(i)));
  }
  // fp16 products and activations: the tolerance of amp_rewrite_conformance_test.cc.
  EXPECT_LE(max_err, 1e-2 * std::max(1.0, max_ref)) << "max |ort fp16 - torch fp32| vs max |torch|: " << max_ref;
  std::cout << "[ figures  ] max |ORT fp16 rewrite - torch fp32| = " << max_err << ", max |torch| = " << max_ref << "\n";
}

}  // namespace
}  // namespace amp
