// A whole model: the main graph plus everything ModelProto carries around it, training_info
// included (the step graphs amp-train writes and reads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace amp {

struct OpsetImport {
  std::string domain;  // "" is the default ONNX domain
  int64_t version = 0;
};

struct TrainingInfo {
  std::unique_ptr<Graph> initialization;  // may be null
  std::unique_ptr<Graph> algorithm;       // reads the main graph's values by name
  std::vector<std::pair<std::string, std::string>> initialization_binding;
  std::vector<std::pair<std::string, std::string>> update_binding;  // initializer <- algorithm output
};

class Model {
 public:
  Model();
  int64_t ir_version = 8;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::unique_ptr<Graph> graph;
  std::vector<std::string> functions;  // serialized FunctionProtos, carried through unchanged
  std::vector<TrainingInfo> training_info;
  std::string path;  // the file it came from, for error messages

  // 0 when the domain is not imported; "" and "ai.onnx" are the same domain.
  int64_t opset_version(std::string_view domain) const;
  void set_opset_version(std::string_view domain, int64_t version);
  const std::string* metadata(std::string_view key) const;
  void set_metadata(const std::string& key, std::string value);
};

}  // namespace amp
