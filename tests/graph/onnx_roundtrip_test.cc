// Every model of ONNX's backend test data (libonnx-testdata) goes through import -> export ->
// import: the export must pass ONNX's own checker (with shape inference) whenever the original
// does, and the re-import must be structurally equal to the first import.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <google/protobuf/util/message_differencer.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

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

// ONNX's own test models do not crash its tools; skipping the rehearsal in a child process keeps
// these 4000 loads fast (import_errors_test and fuzz_corpus_test cover it).
LoadOptions trusted_model() {
  LoadOptions options;
  options.isolate_onnx_tools = false;
  return options;
}

// "" when the model round-trips at the given target opset (0: its own), else why not. Models that
// import only other domains (the training ops) have no default opset to convert.
std::string round_trip(const std::string& path, int64_t target_opset, bool original_passes_full_check) {
  LoadOptions options = trusted_model();
  options.target_opset = target_opset;
  Model first = load_model(path, options);
  if (target_opset > 0 && first.opset_version("") != 0 && first.opset_version("") != target_opset)
    return "loaded at opset " + std::to_string(first.opset_version("")) + ", not " + std::to_string(target_opset);
  if (original_passes_full_check) {
    std::string problem = full_check(to_proto(first));
    if (!problem.empty()) return "the export fails onnx's full check: " + problem;
  }
  const std::string bytes = serialize_model(first);
  options.target_opset = 0;
  Model second = load_model_from_bytes(bytes, path + " (re-import)", fs::path(path).parent_path().string(), options);
  std::string diff = structural_diff(first, second);
  if (!diff.empty()) return "re-import differs: " + diff;
  if (serialize_model(second) != bytes) return "the second export is not byte-identical to the first";
  return "";
}

// Both at the model's own opset and converted to the canonical opset 17.
std::string round_trip(const std::string& path) {
  onnx::ModelProto original;
  original.ParseFromString(test::read_file(path));
  const bool valid = full_check(original).empty();
  for (int64_t target : {int64_t(0), int64_t(17)}) {
    std::string problem = round_trip(path, target, valid);
    if (!problem.empty()) return (target ? "at opset 17: " : "at its own opset: ") + problem;
  }
  return "";
}

// The ONNX spellings that import canonicalises: typed tensor fields become raw little-endian bytes,
// the default domain "ai.onnx" becomes "". (The testdata uses typed fields for these types only;
// the narrower packing rules are checked against onnx.helper in tensor_proto_test.)
void normalize(google::protobuf::Message& m) {
  if (auto* t = dynamic_cast<onnx::TensorProto*>(&m)) {
    auto to_raw = [&](const auto& field) {
      if (field.empty()) return;
      t->set_raw_data(field.data(), field.size() * sizeof(*field.data()));
    };
    if (t->data_type() == onnx::TensorProto::INT64) to_raw(t->int64_data()), t->clear_int64_data();
    if (t->data_type() == onnx::TensorProto::FLOAT) to_raw(t->float_data()), t->clear_float_data();
    if (t->data_type() == onnx::TensorProto::INT32) to_raw(t->int32_data()), t->clear_int32_data();
    if (t->data_type() == onnx::TensorProto::DOUBLE) to_raw(t->double_data()), t->clear_double_data();
    if (t->data_type() == onnx::TensorProto::BOOL && !t->int32_data().empty()) {
      std::string bytes;
      for (int32_t v : t->int32_data()) bytes += static_cast<char>(v != 0);
      t->set_raw_data(bytes);
      t->clear_int32_data();
    }
  }
  if (auto* n = dynamic_cast<onnx::NodeProto*>(&m); n && n->domain() == "ai.onnx") n->clear_domain();
  if (auto* o = dynamic_cast<onnx::OperatorSetIdProto*>(&m); o && o->domain() == "ai.onnx") o->clear_domain();
  const auto* reflection = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated())
      for (int i = 0; i < reflection->FieldSize(m, f); ++i) normalize(*reflection->MutableRepeatedMessage(&m, f, i));
    else
      normalize(*reflection->MutableMessage(&m, f));
  }
}

// Import then export, with nothing added (no shape inference, no conversion), gives the file's
// own proto back: nothing was lost on the way into the IR.
std::string export_matches_original(const std::string& path) {
  LoadOptions as_is = trusted_model();
  as_is.target_opset = 0;
  as_is.infer_shapes = false;
  onnx::ModelProto exported = to_proto(load_model(path, as_is));
  onnx::ModelProto original;
  original.ParseFromString(test::read_file(path));
  normalize(original);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_message_field_comparison(google::protobuf::util::MessageDifferencer::EQUIVALENT);
  std::string report;
  differ.ReportDifferencesToString(&report);
  if (differ.Compare(original, exported)) return "";
  return "the export differs from the file: " + report.substr(0, 300);
}

// Models whose conversion to opset 17 is refused on purpose, with the refusal's words: ONNX's
// version converter would change what they compute (graph/onnx_converter_limits.h). Their import
// at their own opset still round-trips (export_matches_original).
const std::map<std::string, std::string>& refused_conversions() {
  static const std::map<std::string, std::string> refused = {
      {"node/test_scan_sum", "Scan): ONNX's version converter cannot take it from opset 8 to 9"},
  };
  return refused;
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
    const auto refused = refused_conversions().find(folder + "/" + fs::path(path).parent_path().filename().string());
    try {
      problem = export_matches_original(path);
      if (problem.empty()) problem = round_trip(path);
      if (refused != refused_conversions().end()) problem = "converted, though it should be refused: " + refused->second;
    } catch (const std::exception& e) {
      problem = e.what();
      if (refused != refused_conversions().end() && problem.find(refused->second) != std::string::npos) problem.clear();
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

// The fields the test data leaves empty: metadata, functions, sparse initializers and attributes,
// denotations, doc strings (model written by make_full_model.py with onnx.helper).
TEST(OnnxRoundTrip, EveryModelProtoField) {
  const std::string dir = test::temp_dir("full_model");
  std::string output;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/graph/make_full_model.py " + dir, &output), 0) << output;
  const std::string path = dir + "/full_model.onnx";
  EXPECT_EQ(export_matches_original(path), "");
  EXPECT_EQ(round_trip(path), "");
  LoadOptions as_is;
  as_is.target_opset = 0;
  as_is.infer_shapes = false;
  Model m = load_model(path, as_is);
  EXPECT_EQ(m.functions.size(), 1u);
  ASSERT_NE(m.metadata("author"), nullptr);
  EXPECT_EQ(*m.metadata("author"), "onnx-amp tests");
  EXPECT_EQ(m.graph->sparse_initializers().size(), 1u);
  const Value* w = m.graph->value("w");
  EXPECT_TRUE(w->is_input() && w->has_initializer());
  EXPECT_EQ(m.graph->inputs()[0]->type().shape->dims[0].denotation, "DATA_BATCH");
}

}  // namespace
}  // namespace amp
