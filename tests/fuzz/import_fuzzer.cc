// libFuzzer target: any bytes given to load_model_from_bytes either load (and export again) or
// are refused with amp::InputError. Anything else escaping, a crash, a hang or a sanitizer report
// is a bug. Run: import_fuzzer -max_len=65536 tests/fuzz/corpus <seed models>
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/error.h"
#include "graph/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    // External data resolves against a folder that does not exist: reading files is not fuzzed.
    amp::Model m = amp::load_model_from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx",
                                              "/nonexistent-amp-fuzz-dir");
    amp::serialize_model(m);
  } catch (const amp::InputError&) {
  }
  return 0;
}
