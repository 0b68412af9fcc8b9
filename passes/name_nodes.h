// Gives every unnamed node a name, "<op>_<first output>", unique in the model. Reports, decision
// records and --explain refer to nodes by name; a name derived at report time from an output would
// change when a later rewrite renames that output (amp-rewrite keeps a graph output's name by
// renaming the value behind it), so the name is fixed once, in the model.
#pragma once

#include "passes/pass.h"

namespace amp {

class NameNodesPass : public Pass {
 public:
  std::string name() const override { return "name-nodes"; }
  std::string summary() const override { return "name unnamed nodes after their op and first output"; }
  bool run(Model& m) override;
};

}  // namespace amp
