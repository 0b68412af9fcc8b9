// Where a model comes from: a file, or its serialized bytes (the Python package's onnx.ModelProto),
// whose external data, if any, lies in base_dir.
#pragma once

#include <string>

#include "graph/model.h"

namespace amp {

struct ModelSource {
  std::string path;   // the file; for bytes, the name messages give the model
  std::string bytes;  // empty: read `path`
  std::string base_dir;

  Model load() const;  // load_model's checks, conversion and errors
};

}  // namespace amp
