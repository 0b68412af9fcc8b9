// Every kind of bad input gives an InputError whose message names the file (and the node and op
// where one is at fault). The bad models are written by make_bad_models.py with onnx.helper.
#include <gtest/gtest.h>

#include <filesystem>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

// gmock is not linked into the tests: a plain substring assertion that prints the message.
::testing::AssertionResult Contains(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << message << "' does not contain '" << part << "'";
}

class ImportErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::temp_dir("import_errors");
    std::string output;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/graph/make_bad_models.py " + dir_, &output), 0) << output;
  }
  // The InputError's message, or a note that loading did not throw one.
  static std::string load_error(const std::string& path) {
    try {
      load_model(path);
    } catch (const InputError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an InputError: ") + e.what();
    }
    return "(loaded without error)";
  }
  static std::string dir_;
};
std::string ImportErrors::dir_;

TEST_F(ImportErrors, NotOnnx) {
  for (const std::string& contents : {std::string("name,value\n1,2\n"), std::string(4096, '\xff'), std::string()}) {
    const std::string path = dir_ + "/not_onnx.onnx";
    test::write_file(path, contents);
    const std::string msg = load_error(path);
    EXPECT_TRUE(Contains(msg, path + ": not an ONNX model"));
  }
}

TEST_F(ImportErrors, Truncated) {
  for (const char* source : {"/models/mlp.onnx", "/models/gpt.onnx"}) {
    const std::string whole = test::read_file(test::source_dir() + source);
    const std::string path = dir_ + "/truncated.onnx";
    test::write_file(path, whole.substr(0, whole.size() / 2));
    EXPECT_TRUE(Contains(load_error(path), path + ": not an ONNX model")) << source;
  }
}

TEST_F(ImportErrors, MissingFile) {
  EXPECT_TRUE(Contains(load_error(dir_ + "/no_such.onnx"), dir_ + "/no_such.onnx"));
}

TEST_F(ImportErrors, UnknownOp) {
  const std::string msg = load_error(dir_ + "/unknown_op.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/unknown_op.onnx: "));
  EXPECT_TRUE(Contains(msg, "node 'mystery' (FooBar)"));
  EXPECT_TRUE(Contains(msg, "unknown op 'FooBar'"));
}

TEST_F(ImportErrors, UnknownDomain) {
  std::string msg = load_error(dir_ + "/unknown_domain.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/unknown_domain.onnx: node 'elsewhere' (Relu)"));
  EXPECT_TRUE(Contains(msg, "'com.example'"));
  msg = load_error(dir_ + "/custom_op.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/custom_op.onnx: node 'custom' (Frob)"));
  EXPECT_TRUE(Contains(msg, "unknown op 'Frob' in domain 'com.example'"));
}

TEST_F(ImportErrors, UnsupportedOpset) {
  EXPECT_TRUE(Contains(load_error(dir_ + "/opset25.onnx"), dir_ + "/opset25.onnx: unsupported opset 25"));
}

TEST_F(ImportErrors, UndefinedInput) {
  const std::string msg = load_error(dir_ + "/undefined_input.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/undefined_input.onnx: graph 'g', node 'dangling' (Relu) reads 'nowhere'"));
}

TEST_F(ImportErrors, CheckerErrorIsOneLine) {
  const std::string msg = load_error(dir_ + "/missing_attribute.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/missing_attribute.onnx: invalid ONNX model: "));
  EXPECT_TRUE(Contains(msg, "'to'"));
  EXPECT_TRUE(Contains(msg, "untyped"));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST_F(ImportErrors, ExternalDataControl) {
  Model m = load_model(dir_ + "/ext_ok/model.onnx");
  const Tensor& w = m.graph->value("w")->initializer();
  ASSERT_EQ(w.numel(), 4);
  EXPECT_EQ(w.as<float>()[3], 3.0f);
}

TEST_F(ImportErrors, ExternalDataMissing) {
  const std::string msg = load_error(dir_ + "/ext_missing/model.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/ext_missing/model.onnx: tensor 'w'"));
  EXPECT_TRUE(Contains(msg, "weights.bin"));
}

TEST_F(ImportErrors, ExternalDataAbsolute) {
  const std::string msg = load_error(dir_ + "/ext_absolute/model.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/ext_absolute/model.onnx: tensor 'w'"));
  EXPECT_TRUE(Contains(msg, "is absolute"));
}

TEST_F(ImportErrors, ExternalDataDotDot) {
  const std::string msg = load_error(dir_ + "/ext_dotdot/model.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/ext_dotdot/model.onnx: tensor 'w'"));
  EXPECT_TRUE(Contains(msg, "'..'"));
}

TEST_F(ImportErrors, ExternalDataSymlinkOutside) {
  const std::string msg = load_error(dir_ + "/ext_symlink/model.onnx");
  EXPECT_TRUE(Contains(msg, dir_ + "/ext_symlink/model.onnx: tensor 'w'"));
  EXPECT_TRUE(Contains(msg, "outside the model's folder"));
}

TEST_F(ImportErrors, ExternalDataBeyondFile) {
  for (const char* folder : {"ext_short", "ext_offset"}) {
    const std::string msg = load_error(dir_ + "/" + folder + "/model.onnx");
    EXPECT_TRUE(Contains(msg, dir_ + "/" + folder + "/model.onnx: tensor 'w'"));
    EXPECT_TRUE(Contains(msg, "beyond the end of the file"));
  }
  EXPECT_TRUE(Contains(load_error(dir_ + "/ext_length/model.onnx"), "has length 12"));
}

TEST_F(ImportErrors, FromBytesNamesTheGivenPath) {
  EXPECT_THROW(
      {
        try {
          load_model_from_bytes("garbage", "memory.onnx", dir_);
        } catch (const InputError& e) {
          EXPECT_TRUE(Contains(e.what(), "memory.onnx: not an ONNX model"));
          throw;
        }
      },
      InputError);
}

}  // namespace
}  // namespace amp
