// libFuzzer target: any bytes given to load_model_from_bytes either load (and export again) or
// are refused with amp::InputError. Anything else escaping, a crash, a hang or a sanitizer report
// is a bug. Build with -DAMP_FUZZ=ON (clang) and run, seeded with small models:
//   import_fuzzer -max_len=8192 -timeout=10 corpus_dir tests/fuzz/corpus <seed models>
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/error.h"
#include "graph/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input's length picks the options, so the importer is also reached without ONNX's checker.
  amp::LoadOptions options;
  if (size % 3 == 1) {
    options.check = false;
    options.infer_shapes = false;
    options.target_opset = 0;
  } else if (size % 3 == 2) {
    options.target_opset = 0;
  }
  try {
    // External data resolves against a folder that does not exist: reading files is not fuzzed.
    amp::Model m = amp::load_model_from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx",
                                              "/nonexistent-amp-fuzz-dir", options);
    amp::serialize_model(m);
  } catch (const amp::InputError&) {
  }
  return 0;
}
