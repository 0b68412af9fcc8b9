// amp-rewrite's --config FILE.json: the same settings as its flags, for a policy kept with a model.
//
//   {
//     "dtype": "fp16" | "bf16",
//     "keep_io_types": true,
//     "weights": "keep" | "lowp",
//     "cast_placement": "compute" | "consumer",
//     "min_magnitude": 1e-7,
//     "allow": ["Op", "-Op"], "deny": [...], "infer": [...], "clear": [...],
//     "block_nodes": ["regex", ...]
//   }
//
// Every key is optional. In the lists "Op" puts an op on that list, "-Op" takes it off (it then
// stays fp32). Flags given on the command line win over the file's scalars; list edits and blocked
// nodes from both are combined, and an op put on two lists is an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/amp/amp_policy.h"

namespace amp {

struct AmpConfig {
  std::optional<DType> dtype;
  std::optional<bool> keep_io_types;
  std::optional<WeightStorage> weights;
  std::optional<CastPlacement> cast_placement;
  std::optional<double> min_magnitude;
  OpListEdits lists;
  std::vector<std::string> block_nodes;
};

// Throws InputError naming the file for unreadable JSON, an unknown key or a badly typed value.
AmpConfig read_amp_config(const std::string& path);

// "fp16" / "bf16" (also "float16" / "bfloat16"); InputError otherwise.
DType parse_amp_dtype(const std::string& s);
// "keep" / "lowp"; InputError otherwise.
WeightStorage parse_weight_storage(const std::string& s);
// "compute" / "consumer"; InputError otherwise.
CastPlacement parse_cast_placement(const std::string& s);

}  // namespace amp
