#include "passes/amp/amp_policy.h"

#include <onnx/defs/schema.h>

#include "graph/error.h"

namespace amp {

namespace {

struct DefaultEntry {
  OpCategory category;
  const char* op;
  const char* reason;
};

constexpr DefaultEntry kDefaultLists[] = {
#define AMP_OP(category, op, reason) {OpCategory::k##category, op, reason},
#include "passes/amp/op_lists.inc"
#undef AMP_OP
};

}  // namespace

const char* op_category_name(OpCategory c) {
  switch (c) {
    case OpCategory::kAllow: return "allow";
    case OpCategory::kDeny: return "deny";
    case OpCategory::kInfer: return "infer";
    case OpCategory::kClear: return "clear";
  }
  return "?";
}

const char* cast_placement_name(CastPlacement p) {
  return p == CastPlacement::kCompute ? "compute" : "consumer";
}

AmpPolicy::AmpPolicy(DType target) {
  set_target(target);
  for (const auto& e : kDefaultLists)
    if (!lists_.emplace(e.op, OpListEntry{e.category, e.reason}).second)
      throw Error(std::string("op_lists.inc lists ") + e.op + " twice");
}

void AmpPolicy::set_target(DType t) {
  if (!is_low_precision(t))
    throw InputError("mixed precision targets float16 or bfloat16, not " + std::string(dtype_name(t)));
  target_ = t;
}

const OpListEntry* AmpPolicy::entry(const std::string& domain, const std::string& op_type) const {
  auto it = lists_.find(domain.empty() || domain == "ai.onnx" ? op_type : domain + ":" + op_type);
  return it == lists_.end() ? nullptr : &it->second;
}

void AmpPolicy::apply(const std::vector<OpListEdits>& all) {
  struct Put {
    OpCategory category;
    std::string source;
  };
  std::map<std::string, Put> puts;
  std::vector<std::pair<std::string, Put>> removals;
  for (const auto& edits : all)
    for (const auto& [category, ops] : edits.edits)
      for (const auto& raw : ops) {
        const bool remove = !raw.empty() && raw[0] == '-';
        const std::string op = remove ? raw.substr(1) : raw;
        const std::string where = std::string(op_category_name(category)) + " list (" + edits.source + ")";
        if (op.empty()) throw InputError("empty op name on the " + where);
        const size_t colon = op.rfind(':');
        const std::string domain = colon == std::string::npos ? "" : op.substr(0, colon);
        if (!onnx::OpSchemaRegistry::Schema(op.substr(colon == std::string::npos ? 0 : colon + 1), domain))
          throw InputError("'" + op + "' on the " + where + " is not an ONNX op");
        if (remove) {
          removals.emplace_back(op, Put{category, where});
          continue;
        }
        auto [it, fresh] = puts.emplace(op, Put{category, where});
        if (!fresh && it->second.category != category)
          throw InputError(op + " is put on two lists: the " + it->second.source + " and the " + where);
      }
  for (const auto& [op, r] : removals) {
    auto it = lists_.find(op);
    if (it == lists_.end() || it->second.category != r.category)
      throw InputError("-" + op + " on the " + r.source + ": " + op + " is not on that list");
    if (puts.count(op) && puts.at(op).category == r.category)
      throw InputError(op + " is both put on and taken off the " + r.source);
    lists_.erase(it);
  }
  for (const auto& [op, p] : puts)
    lists_[op] = OpListEntry{p.category, "put on the " + p.source};
}

void AmpPolicy::block_nodes(const std::string& pattern) {
  try {
    blocked_.emplace_back(pattern, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::regex_error& e) {
    throw InputError("bad node pattern '" + pattern + "': " + e.what());
  }
}

const std::string* AmpPolicy::blocked_by(const Node& n) const {
  for (const auto& [pattern, re] : blocked_)
    if (!n.name.empty() && std::regex_match(n.name, re)) return &pattern;
  return nullptr;
}

const CalibratedNode* AmpPolicy::calibrated(const Node& n) const {
  if (n.name.empty()) return nullptr;
  auto it = calibrated_.find(n.name);
  return it == calibrated_.end() ? nullptr : &it->second;
}

}  // namespace amp
