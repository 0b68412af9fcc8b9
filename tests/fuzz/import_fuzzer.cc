// libFuzzer target: any bytes given to load_model_from_bytes either load (and export again) or
// are refused with amp::InputError. Anything else escaping, a crash, a hang or a sanitizer report
// is a bug. Build with -DAMP_FUZZ=ON (clang) and run, seeded with small models:
//   import_fuzzer -max_len=8192 -timeout=10 corpus_dir tests/fuzz/corpus <seed models>
// The fork that rehearses ONNX's tools limits this to ~150 inputs/s under ASan. With
// AMP_FUZZ_NO_ISOLATION=1 it runs ~50x faster, and crashes inside libonnx are then expected: run
// with -fork=1 -ignore_crashes=1, keep them in tests/fuzz/corpus, where fuzz_corpus_test checks
// that the rehearsal turns each into an InputError.
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <string>

#include "graph/error.h"
#include "graph/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input's length picks the options, so the importer is also reached without ONNX's checker.
  static const bool isolate = std::getenv("AMP_FUZZ_NO_ISOLATION") == nullptr;
  amp::LoadOptions options;
  options.isolate_onnx_tools = isolate;
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
