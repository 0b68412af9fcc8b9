// Every model of ONNX's backend test data (libonnx-testdata) goes through import -> export ->
// import: the export must pass ONNX's own checker (with shape inference) whenever the original
// does, and the re-import must be structurally equal to the first import.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <iostream>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

// onnx.checker.check_model(model, full_check=True): the checker, then strict shape inference.
std::string full_check(const onnx::ModelProto& proto) {
  try {
    onnx::checker::check_model(proto);
    onnx::ModelProto copy = proto;
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// "" when the model round-trips, else why not.
std::string round_trip(const std::string& path) {
  LoadOptions keep_opset;
  keep_opset.target_opset = 0;
  Model first = load_model(path, keep_opset);
  onnx::ModelProto original;
  {
    std::string bytes = test::read_file(path);
    original.ParseFromString(bytes);
  }
  onnx::ModelProto exported = to_proto(first);
  if (full_check(original).empty()) {
    std::string problem = full_check(exported);
    if (!problem.empty()) return "the export fails onnx's full check: " + problem;
  }
  const std::string bytes = serialize_model(first);
  Model second = load_model_from_bytes(bytes, path + " (re-import)", fs::path(path).parent_path().string(), keep_opset);
  std::string diff = structural_diff(first, second);
  if (!diff.empty()) return "re-import differs: " + diff;
  if (serialize_model(second) != bytes) return "the second export is not byte-identical to the first";
  return "";
}

void round_trip_folder(const std::string& folder) {
  std::vector<std::string> models;
  for (const auto& entry : fs::directory_iterator(test::testdata_dir() + "/" + folder))
    if (fs::exists(entry.path() / "model.onnx")) models.push_back((entry.path() / "model.onnx").string());
  std::sort(models.begin(), models.end());
  ASSERT_FALSE(models.empty()) << "no models under " << test::testdata_dir() << "/" << folder;
  size_t passed = 0;
  std::string failures;
  for (const auto& path : models) {
    std::string problem;
    try {
      problem = round_trip(path);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (problem.empty())
      ++passed;
    else
      failures += "\n  " + path + ": " + problem;
  }
  std::cout << folder << ": " << passed << "/" << models.size() << " models round-trip\n";
  EXPECT_EQ(passed, models.size()) << failures;
}

TEST(OnnxRoundTrip, NodeTests) { round_trip_folder("node"); }
TEST(OnnxRoundTrip, PytorchConverted) { round_trip_folder("pytorch-converted"); }
TEST(OnnxRoundTrip, PytorchOperator) { round_trip_folder("pytorch-operator"); }
TEST(OnnxRoundTrip, Simple) { round_trip_folder("simple"); }

// The project's own sample models, canonical opset, with the default load options.
TEST(OnnxRoundTrip, SampleModels) {
  for (const char* name : {"mlp", "cnn", "gpt", "mlp.train", "cnn.train", "gpt.train"}) {
    const std::string path = test::source_dir() + "/models/" + name + ".onnx";
    Model first = load_model(path);
    EXPECT_EQ(first.opset_version(""), 17) << path;
    Model second = load_model_from_bytes(serialize_model(first), path, test::source_dir() + "/models");
    EXPECT_EQ(structural_diff(first, second), "") << path;
  }
}

}  // namespace
}  // namespace amp
