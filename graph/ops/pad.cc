#include "graph/ops/pad.h"

#include "graph/error.h"

namespace amp {

PadMode pad_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  throw InputError("Pad mode '" + m + "' is not one of constant, reflect, edge, wrap");
}

const char* pad_mode_name(PadMode m) {
  switch (m) {
    case PadMode::kConstant: return "constant";
    case PadMode::kReflect: return "reflect";
    case PadMode::kEdge: return "edge";
    case PadMode::kWrap: return "wrap";
  }
  return "?";
}

PadAmounts pad_amounts(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  std::vector<int64_t> ax = axes;
  if (ax.empty())
    for (int64_t a = 0; a < r; ++a) ax.push_back(a);
  if (pads.size() != 2 * ax.size())
    throw InputError("Pad has " + std::to_string(pads.size()) + " pads for " + std::to_string(ax.size()) +
                     " axes (it needs two per axis) of a rank-" + std::to_string(rank) + " input");
  PadAmounts p{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  for (size_t k = 0; k < ax.size(); ++k) {
    int64_t a = ax[k];
    if (a < -r || a >= r) throw InputError("Pad axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if (a < 0) a += r;
    p.begin[static_cast<size_t>(a)] = pads[k];
    p.end[static_cast<size_t>(a)] = pads[k + ax.size()];
  }
  return p;
}

std::vector<int64_t> padded_dims(const std::vector<int64_t>& in, const PadAmounts& p, PadMode mode) {
  std::vector<int64_t> out(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    out[a] = in[a] + p.begin[a] + p.end[a];
    if (out[a] < 0)
      throw InputError("Pad of axis " + std::to_string(a) + " (extent " + std::to_string(in[a]) + ") by " +
                       std::to_string(p.begin[a]) + " and " + std::to_string(p.end[a]) + " leaves a negative extent");
    if (mode != PadMode::kConstant && in[a] == 0 && out[a] > 0)
      throw InputError(std::string("Pad mode ") + pad_mode_name(mode) + " cannot fill axis " + std::to_string(a) +
                       ", which is empty");
  }
  return out;
}

}  // namespace amp
