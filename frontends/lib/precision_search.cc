#include "frontends/lib/precision_search.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "graph/error.h"
#include "passes/amp/insert_casts.h"

namespace amp {

namespace {

std::vector<Tensor> values(NamedTensors named) {
  std::vector<Tensor> out;
  for (auto& [name, t] : named) out.push_back(std::move(t));
  return out;
}

// The feeds in the types the rewrite's inputs have (without keep_io_types, float32 inputs the
// rewrite made 16-bit take the 16-bit rounding of the same values).
NamedTensors feeds_for(const Model& m, const NamedTensors& feeds) {
  NamedTensors out;
  for (const auto& [name, t] : feeds) {
    const Value* v = m.graph->value(name);
    const DType want = v ? v->dtype() : t.dtype;
    ClampRecord clamps{name};
    out.emplace_back(name, t.dtype == DType::kFloat && is_low_precision(want) ? convert_tensor(t, want, &clamps) : t);
  }
  return out;
}

struct Segment {
  size_t begin, end;
  bool accepted = false, kept = false;  // runs in low precision / a single node kept fp32
  size_t size() const { return end - begin; }
};

}  // namespace

bool outputs_close(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate, double rtol, double atol) {
  if (reference.size() != candidate.size()) return false;
  for (size_t k = 0; k < reference.size(); ++k) {
    const Tensor &r = reference[k], &c = candidate[k];
    if (r.numel() != c.numel()) return false;
    if (!is_floating(r.dtype) && !is_floating(c.dtype) && r.dtype == c.dtype) {
      if (!r.same_contents(c)) return false;
      continue;
    }
    for (int64_t i = 0; i < r.numel(); ++i) {
      const double a = r.element(i), b = c.element(i);
      if (a == b) continue;  // equal infinities
      if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) return false;
    }
  }
  return true;
}

PrecisionSearch search_fp32_nodes(const ModelSource& source, const RewriteSettings& settings, const NamedTensors& feeds,
                                  const OutputCheck& check, const RunSettings& run) {
  std::vector<Tensor> reference;
  {
    const Model m = source.load();
    ModelRunner runner(m, source.path, run);
    reference = values(runner.run(feeds, "feeds"));
  }
  if (!check(reference, reference)) throw InputError(source.path + ": the fp32 model's outputs fail the check against themselves");

  PrecisionSearch search;
  auto attempt = [&](const std::vector<std::string>& blocked) {
    RewriteSettings s = settings;
    s.block_names.insert(s.block_names.end(), blocked.begin(), blocked.end());
    RewrittenModel r = rewrite_model(source.load(), make_rewrite_policy(s), source.path, s.verify_each);
    ModelRunner runner(r.model, source.path, run);
    const bool passes = check(reference, values(runner.run(feeds_for(r.model, feeds), "feeds")));
    ++search.attempts;
    spdlog::info("{}: attempt {}: {} node{} kept in fp32: {}", source.path, search.attempts, blocked.size(),
                 blocked.size() == 1 ? "" : "s", passes ? "passes" : "fails");
    return std::make_pair(passes, std::move(r));
  };

  auto [passes, first] = attempt({});
  if (passes) {
    search.rewrite = std::move(first);
    return search;
  }
  // The candidates: the nodes the rewrite computes in low precision (Casts and Constants aside).
  std::vector<std::string> candidates;
  for (const NodeDecision& nd : first.result.decisions.nodes)
    if (nd.decision.precision == Precision::kLow && nd.decision.rule != Rule::kCast &&
        nd.decision.rule != Rule::kConstant && !nd.name.empty())
      candidates.push_back(nd.name);
  std::vector<Segment> segments{{0, candidates.size()}};
  auto blocked_except = [&](const Segment* trying) {
    std::vector<std::string> blocked;
    for (const Segment& s : segments)
      if (!s.accepted && &s != trying)
        for (size_t i = s.begin; i < s.end; ++i) blocked.push_back(candidates[i]);
    return blocked;
  };
  bool first_attempt = true;  // the whole list in low precision: the plain rewrite, already tried
  for (;;) {
    Segment* largest = nullptr;
    for (Segment& s : segments)
      if (!s.accepted && !s.kept && (!largest || s.size() > largest->size())) largest = &s;
    if (!largest) break;
    const bool ok = first_attempt ? false : attempt(blocked_except(largest)).first;
    first_attempt = false;
    if (ok) {
      largest->accepted = true;
    } else if (largest->size() == 1) {
      largest->kept = true;
    } else {
      const size_t begin = largest->begin, mid = begin + largest->size() / 2, end = largest->end;
      const size_t at = static_cast<size_t>(largest - segments.data());
      segments[at] = Segment{begin, mid};
      segments.insert(segments.begin() + static_cast<std::ptrdiff_t>(at) + 1, Segment{mid, end});
    }
  }
  search.kept_fp32 = blocked_except(nullptr);
  auto [final_passes, final_rewrite] = attempt(search.kept_fp32);
  if (!final_passes)
    throw InputError(source.path + ": no rewrite passes the check: with the " + std::to_string(search.kept_fp32.size()) +
                     " nodes that failed it alone kept in fp32, the outputs still fail it");
  search.rewrite = std::move(final_rewrite);
  return search;
}

}  // namespace amp
