// External data: a model saved with a threshold keeps its large tensors in "<model>.data", loads
// back equal, maps that file instead of copying it, and reads correctly in onnx's Python package.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBig = 1 << 20;  // 4 MB of floats: well above the threshold, small for CI

// y = (x + w) * b with w big (w[i] = i / 4, exact in float) and b small.
Model make_model() {
  Model m;
  m.set_opset_version("", 17);
  m.producer_name = "external_data_test";
  Graph& g = *m.graph;
  g.name = "ext";
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({kBig})));
  Tensor w(DType::kFloat, {kBig});
  w.name = "w";
  for (int64_t i = 0; i < kBig; ++i) w.mutable_as<float>()[i] = static_cast<float>(i) / 4;
  Tensor b(DType::kFloat, {1});
  b.name = "b";
  b.mutable_as<float>()[0] = 2;
  Value* wv = g.add_initializer(std::move(w));
  Value* bv = g.add_initializer(std::move(b));
  Node* add = g.add_node("Add", {x, wv}, {"sum"});
  Node* mul = g.add_node("Mul", {add->output(0), bv}, {"y"});
  mul->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({kBig})));
  g.add_output(mul->output(0));
  return m;
}

LoadOptions as_saved() {
  LoadOptions o;
  o.target_opset = 0;
  o.infer_shapes = false;
  return o;
}

// The address range of the mapping of `path` in this process, from /proc/self/maps (an
// independent view of where the bytes live).
std::pair<uintptr_t, uintptr_t> mapping_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const std::string real = fs::canonical(path).string();
  while (std::getline(maps, line)) {
    if (line.size() < real.size() || line.compare(line.size() - real.size(), real.size(), real) != 0) continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    return {lo, hi};
  }
  return {0, 0};
}

TEST(ExternalData, SaveWithThresholdAndReload) {
  const std::string dir = test::temp_dir("external_roundtrip");
  const std::string path = dir + "/m.onnx";
  Model original = make_model();
  SaveOptions options;
  options.external_threshold = 1024;
  save_model(original, path, options);

  // Only the model and its data file: no temporary file left behind.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"m.onnx", "m.onnx.data"}));
  EXPECT_LT(fs::file_size(path), 4096u);  // w is not inline
  EXPECT_GE(fs::file_size(path + ".data"), static_cast<uintmax_t>(kBig * 4));

  Model loaded = load_model(path, as_saved());
  EXPECT_EQ(structural_diff(original, loaded), "");
  const Tensor& w = loaded.graph->value("w")->initializer();
  ASSERT_TRUE(w.external.has_value());
  EXPECT_EQ(w.external->location, "m.onnx.data");
  EXPECT_EQ(w.external->offset % 64, 0);
  EXPECT_FALSE(loaded.graph->value("b")->initializer().external.has_value());  // 4 bytes: inline
}

TEST(ExternalData, TensorIsAViewOfTheMappedFile) {
  const std::string dir = test::temp_dir("external_nocopy");
  const std::string path = dir + "/m.onnx";
  SaveOptions options;
  options.external_threshold = 1024;
  save_model(make_model(), path, options);
  Model loaded = load_model(path);
  const auto [lo, hi] = mapping_of(path + ".data");
  ASSERT_NE(lo, 0u) << "the data file is not mapped";
  const Tensor& w = loaded.graph->value("w")->initializer();
  const auto p = reinterpret_cast<uintptr_t>(w.data());
  EXPECT_GE(p, lo);
  EXPECT_LE(p + w.nbytes(), hi);
  EXPECT_EQ(w.as<float>()[kBig - 1], static_cast<float>(kBig - 1) / 4);
}

// Saving over the files a loaded model still maps: the old data stays readable (atomic rename,
// not an overwrite in place) and the new files hold the same tensors.
TEST(ExternalData, SaveOverTheLoadedFiles) {
  const std::string dir = test::temp_dir("external_overwrite");
  const std::string path = dir + "/m.onnx";
  SaveOptions options;
  options.external_threshold = 1024;
  Model original = make_model();
  save_model(original, path, options);
  const std::string model_bytes = test::read_file(path);
  const std::string data_bytes = test::read_file(path + ".data");
  Model loaded = load_model(path, as_saved());
  save_model(loaded, path, options);
  EXPECT_EQ(structural_diff(original, loaded), "");
  EXPECT_EQ(structural_diff(original, load_model(path, as_saved())), "");
  // Deterministic: the same model gives the same bytes.
  EXPECT_TRUE(test::read_file(path) == model_bytes);
  EXPECT_TRUE(test::read_file(path + ".data") == data_bytes);
}

// Below the target opset, ONNX's version converter rebuilds the graph, and its IR keeps no
// external-data reference: the weight has to come back as it was (a torchvision export at opset 14
// with its weights beside it failed to load before).
TEST(ExternalData, LoadsThroughTheOpsetConverter) {
  const std::string dir = test::temp_dir("external_convert");
  const std::string path = dir + "/m.onnx";
  Model old = make_model();
  old.set_opset_version("", 12);  // Add changed at 13 and 14: the converter runs
  old.ir_version = 7;
  SaveOptions options;
  options.external_threshold = 1024;
  save_model(old, path, options);
  Model loaded = load_model(path);
  EXPECT_EQ(loaded.opset_version(""), 17);
  const Tensor& w = loaded.graph->value("w")->initializer();
  ASSERT_TRUE(w.external.has_value());
  EXPECT_EQ(w.external->location, "m.onnx.data");
  EXPECT_EQ(w.as<float>()[kBig - 1], static_cast<float>(kBig - 1) / 4);
  EXPECT_EQ(loaded.graph->value("b")->initializer().as<float>()[0], 2.0f);
}

TEST(ExternalData, InlineWhenThresholdIsZero) {
  const std::string dir = test::temp_dir("external_inline");
  const std::string path = dir + "/m.onnx";
  save_model(make_model(), path);
  EXPECT_FALSE(fs::exists(path + ".data"));
  EXPECT_GT(fs::file_size(path), static_cast<uintmax_t>(kBig * 4));
  EXPECT_TRUE(test::read_file(path) == serialize_model(make_model()));
}

TEST(ExternalData, PythonOnnxReadsIt) {
  const std::string dir = test::temp_dir("external_python");
  const std::string path = dir + "/m.onnx";
  SaveOptions options;
  options.external_threshold = 1024;
  save_model(make_model(), path, options);
  std::string expected(static_cast<size_t>(kBig) * 4, '\0');
  for (int64_t i = 0; i < kBig; ++i) {
    float v = static_cast<float>(i) / 4;
    std::memcpy(&expected[static_cast<size_t>(i) * 4], &v, 4);
  }
  test::write_file(dir + "/w.expected", expected);
  std::string output;
  EXPECT_EQ(test::run_python(test::source_dir() + "/tests/graph/check_exported_model.py " + path + " w=" + dir +
                                 "/w.expected",
                             &output),
            0)
      << output;
}

// A tensor bigger than protobuf's 2 GB limit, in a sparse file (no disk blocks, nothing read):
// offsets and sizes past 2^31 must survive the checker, shape inference and the mapping. The
// model proto is built by hand here, not by the exporter under test.
TEST(ExternalData, TensorOver2GB) {
  const std::string dir = test::temp_dir("external_2gb");
  const int64_t numel = (int64_t(1) << 29) + 16;  // 2 GiB + 64 bytes of floats
  const int64_t offset = 4096;
  {
    std::FILE* f = std::fopen((dir + "/big.bin").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(::ftruncate(fileno(f), offset + numel * 4), 0);
    std::fclose(f);
  }
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(17);
  auto* g = p.mutable_graph();
  g->set_name("big");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(numel);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", "big.bin"},
                                   {"offset", std::to_string(offset)},
                                   {"length", std::to_string(numel * 4)}}) {
    auto* e = w->add_external_data();
    e->set_key(key);
    e->set_value(value);
  }
  auto* node = g->add_node();
  node->set_op_type("Identity");
  node->add_input("w");
  node->add_output("y");
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  test::write_file(dir + "/big.onnx", p.SerializeAsString());

  Model m = load_model(dir + "/big.onnx");
  const Tensor& t = m.graph->value("w")->initializer();
  EXPECT_EQ(t.nbytes(), static_cast<size_t>(numel) * 4);
  const auto [lo, hi] = mapping_of(dir + "/big.bin");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()), lo + offset);
  EXPECT_EQ(t.as<float>()[numel - 1], 0.0f);
  EXPECT_EQ(m.graph->value("y")->type().str(), "float[" + std::to_string(numel) + "]");  // inferred
}

}  // namespace
}  // namespace amp
