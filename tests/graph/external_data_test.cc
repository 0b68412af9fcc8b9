// External data: a model saved with a threshold keeps its large tensors in "<model>.data", loads
// back equal, maps that file instead of copying it, and reads correctly in onnx's Python package.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace amp
