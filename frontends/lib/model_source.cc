#include "frontends/lib/model_source.h"

#include "graph/onnx_io.h"

namespace amp {

Model ModelSource::load() const {
  return bytes.empty() ? load_model(path) : load_model_from_bytes(bytes, path, base_dir);
}

}  // namespace amp
