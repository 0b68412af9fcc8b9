// The mixed-precision rewrite as passes: colour, insert casts, record the decisions in the model.
// They share an AmpResult the caller owns, from which reports read the decisions and cast figures.
#pragma once

#include "passes/amp/amp_policy.h"
#include "passes/amp/colour.h"
#include "passes/amp/insert_casts.h"
#include "passes/pass.h"

namespace amp {

struct AmpResult {
  AmpDecisions decisions;
  CastReport casts;
};

class AmpColourPass : public Pass {
 public:
  AmpColourPass(AmpPolicy policy, AmpResult& result) : policy_(std::move(policy)), result_(result) {}
  std::string name() const override { return "amp-colour"; }
  std::string summary() const override { return "decide each node's precision from the op lists and its neighbours"; }
  bool run(Model& m) override;  // reads only: always false

 private:
  AmpPolicy policy_;
  AmpResult& result_;
};

class AmpInsertCastsPass : public Pass {
 public:
  AmpInsertCastsPass(AmpPolicy policy, AmpResult& result) : policy_(std::move(policy)), result_(result) {}
  std::string name() const override { return "amp-insert-casts"; }
  std::string summary() const override { return "retype low-precision nodes and put one Cast on each boundary"; }
  bool run(Model& m) override;

 private:
  AmpPolicy policy_;
  AmpResult& result_;
};

class AmpRecordDecisionsPass : public Pass {
 public:
  AmpRecordDecisionsPass(AmpPolicy policy, const AmpResult& result) : policy_(std::move(policy)), result_(result) {}
  std::string name() const override { return "amp-record-decisions"; }
  std::string summary() const override { return "write each node's precision and reason into the model (decision_record.h)"; }
  bool run(Model& m) override;

 private:
  AmpPolicy policy_;
  const AmpResult& result_;
};

}  // namespace amp
