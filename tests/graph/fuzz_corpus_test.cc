// Regression inputs kept from fuzzing import_fuzzer (tests/fuzz/corpus): each either loads or is
// refused with InputError; before their fixes they crashed ONNX's tools or escaped as other errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryInputLoadsOrIsAnInputError) {
  const fs::path corpus = fs::path(test::source_dir()) / "tests" / "fuzz" / "corpus";
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    ++files;
    const std::string bytes = test::read_file(entry.path().string());
    // As import_fuzzer calls it: options picked by the length, external data resolved against a
    // folder that does not exist.
    LoadOptions options;
    if (bytes.size() % 3 == 1) {
      options.check = false;
      options.infer_shapes = false;
      options.target_opset = 0;
    } else if (bytes.size() % 3 == 2) {
      options.target_opset = 0;
    }
    try {
      Model m = load_model_from_bytes(bytes, entry.path().string(), "/nonexistent-amp-fuzz-dir", options);
      serialize_model(m);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(entry.path().string()), std::string::npos) << msg;
      // One printable line, whatever bytes the file's names hold.
      EXPECT_EQ(std::count_if(msg.begin(), msg.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }), 0)
          << entry.path();
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << ": not an InputError: " << e.what();
    }
  }
  EXPECT_GT(files, 0u);
}

}  // namespace
}  // namespace amp
