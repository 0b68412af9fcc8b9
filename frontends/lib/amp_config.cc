#include "frontends/lib/amp_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "graph/error.h"

namespace amp {

DType parse_amp_dtype(const std::string& s) {
  if (s == "fp16" || s == "float16") return DType::kFloat16;
  if (s == "bf16" || s == "bfloat16") return DType::kBFloat16;
  throw InputError("unknown low-precision type '" + s + "' (fp16 or bf16)");
}

WeightStorage parse_weight_storage(const std::string& s) {
  if (s == "keep") return WeightStorage::kKeep;
  if (s == "lowp") return WeightStorage::kLowPrecision;
  throw InputError("unknown weight storage '" + s + "' (keep or lowp)");
}

CastPlacement parse_cast_placement(const std::string& s) {
  if (s == "compute") return CastPlacement::kCompute;
  if (s == "consumer") return CastPlacement::kConsumer;
  throw InputError("unknown cast placement '" + s + "' (compute or consumer)");
}

AmpConfig read_amp_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the config file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw InputError(path + ": the config must be a JSON object");
  AmpConfig c;
  c.lists.source = path;
  auto strings = [&](const std::string& key, const nlohmann::json& v) {
    if (!v.is_array()) throw InputError(path + ": '" + key + "' must be a list of strings");
    std::vector<std::string> out;
    for (const auto& s : v) {
      if (!s.is_string()) throw InputError(path + ": '" + key + "' must be a list of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  };
  auto text = [&](const std::string& key, const nlohmann::json& v) {
    if (!v.is_string()) throw InputError(path + ": '" + key + "' must be a string");
    return v.get<std::string>();
  };
  const std::pair<const char*, OpCategory> lists[] = {
      {"allow", OpCategory::kAllow}, {"deny", OpCategory::kDeny}, {"infer", OpCategory::kInfer}, {"clear", OpCategory::kClear}};
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "dtype") {
        c.dtype = parse_amp_dtype(text(key, value));
      } else if (key == "keep_io_types") {
        if (!value.is_boolean()) throw InputError("'keep_io_types' must be true or false");
        c.keep_io_types = value.get<bool>();
      } else if (key == "weights") {
        c.weights = parse_weight_storage(text(key, value));
      } else if (key == "min_magnitude") {
        if (!value.is_number()) throw InputError("'min_magnitude' must be a number");
        c.min_magnitude = value.get<double>();
      } else if (key == "cast_placement") {
        c.cast_placement = parse_cast_placement(text(key, value));
      } else if (key == "block_nodes") {
        c.block_nodes = strings(key, value);
      } else {
        bool known = false;
        for (const auto& [name, category] : lists)
          if (key == name) {
            c.lists.edits[category] = strings(key, value);
            known = true;
          }
        if (!known) throw InputError("unknown key '" + key + "'");
      }
    } catch (const InputError& e) {
      const std::string what = e.what();
      throw InputError(what.rfind(path, 0) == 0 ? what : path + ": " + what);
    }
  }
  return c;
}

}  // namespace amp
