#include "graph/model.h"

namespace amp {

Model::Model() : graph(std::make_unique<Graph>()) {}

static bool same_domain(std::string_view a, std::string_view b) {
  auto norm = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  return norm(a) == norm(b);
}

int64_t Model::opset_version(std::string_view d) const {
  for (const auto& o : opset_imports)
    if (same_domain(o.domain, d)) return o.version;
  return 0;
}

void Model::set_opset_version(std::string_view d, int64_t version) {
  for (auto& o : opset_imports)
    if (same_domain(o.domain, d)) {
      o.version = version;
      return;
    }
  opset_imports.push_back(OpsetImport{std::string(d), version});
}

const std::string* Model::metadata(std::string_view key) const {
  for (const auto& kv : metadata_props)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Model::set_metadata(const std::string& key, std::string value) {
  for (auto& kv : metadata_props)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  metadata_props.emplace_back(key, std::move(value));
}

}  // namespace amp
