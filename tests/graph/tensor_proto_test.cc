// Typed TensorProto fields import as the little-endian bytes numpy gives for the same values: the
// file and the expected bytes are written by make_typed_tensors.py with onnx.helper and numpy.
#include <gtest/gtest.h>

#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

TEST(TensorProto, TypedFieldsImportAsRawBytes) {
  const std::string dir = test::temp_dir("typed_tensors");
  std::string output;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/graph/make_typed_tensors.py " + dir, &output), 0) << output;
  LoadOptions options;
  options.target_opset = 0;
  Model m = load_model(dir + "/typed_tensors.onnx", options);
  size_t compared = 0;
  for (const Value* v : m.graph->initializers()) {
    const Tensor& t = v->initializer();
    if (t.dtype == DType::kString) {
      EXPECT_EQ(t.strings, (std::vector<std::string>{"a", "", "bc"}));
      continue;
    }
    const std::string expected = test::read_file(dir + "/" + v->name() + ".bin");
    ASSERT_EQ(t.nbytes(), expected.size()) << v->name();
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()) == expected) << v->name();
    ++compared;
  }
  EXPECT_EQ(compared, 15u);
  // Exported as raw_data, the tensors read back the same.
  Model again = load_model_from_bytes(serialize_model(m), "typed (re-import)", dir, options);
  EXPECT_EQ(structural_diff(m, again), "");
}

}  // namespace
}  // namespace amp
