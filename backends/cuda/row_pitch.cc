#include "backends/cuda/row_pitch.h"

#include "backends/cuda/env_flag.h"

namespace amp::cuda {
namespace {

bool float_type(DType t) { return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16; }

// AMP_CUDA_STAGED_ROWS=1 keeps every value's rows together (the products stage padded copies, as
// before padded rows), for comparing the two on a device.
bool staged_rows() { return env_flag("AMP_CUDA_STAGED_ROWS"); }

}  // namespace

int64_t padded_row_length(int64_t cols, DType t) {
  const int64_t per16 = 16 / static_cast<int64_t>(dtype_size(t));
  return (cols + per16 - 1) / per16 * per16;
}

void decide_row_pitch(const Schedule& s, ShapePlan& p, const std::vector<int>& targets,
                      const std::vector<const Tensor*>& fed) {
  for (TensorDesc& d : p.desc) d.row_pitch = 0;
  if (staged_rows()) return;
  const size_t num_values = p.desc.size();
  std::vector<bool> pinned(num_values, false);
  for (int v : targets) pinned[v] = true;
  for (size_t v = 0; v < num_values; ++v)
    if (fed[v] || s.state_of[v] >= 0 || p.known[v]) pinned[v] = true;

  // Per root, its views; per value, the units writing and reading it (host-only reads are of dims).
  std::vector<std::vector<int>> views(num_values);
  for (size_t v = 0; v < num_values; ++v)
    if (p.alias_of[v] >= 0) views[p.root(static_cast<int>(v))].push_back(static_cast<int>(v));
  struct Access {
    const Unit* unit;
    bool output;
    size_t operand;
  };
  std::vector<std::vector<Access>> uses(num_values);
  std::vector<int> writers(num_values, 0);
  for (const Unit* u : p.order) {
    for (size_t i = 0; i < u->in.size(); ++i)
      if (u->in[i] >= 0 && !(i < u->host_only.size() && u->host_only[i])) uses[u->in[i]].push_back({u, false, i});
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0) {
        uses[u->out[k]].push_back({u, true, k});
        ++writers[u->out[k]];
      }
  }
  // A view unit reads its root by another name: it is no unit of the plan, but what reads the view
  // is (views' readers are checked below), and a view of a padded value is padded alike.

  for (size_t r = 0; r < num_values; ++r) {
    const int root = static_cast<int>(r);
    const TensorDesc& d = p.desc[r];
    if (p.alias_of[r] >= 0 || pinned[r] || writers[r] != 1 || !float_type(d.dtype) || d.dims.size() < 2 ||
        d.channels_last || d.packed_bytes || d.numel() == 0)
      continue;
    const int64_t cols = d.dims.back();
    const int64_t pitch = padded_row_length(cols, d.dtype);
    if (pitch == cols) continue;
    std::vector<int> group = {root};
    group.insert(group.end(), views[r].begin(), views[r].end());
    bool ok = true;
    for (int v : group) {
      const TensorDesc& w = p.desc[v];
      ok &= !pinned[v] && !w.channels_last && !w.packed_bytes && !w.dims.empty() && w.dims.back() == cols &&
            w.dtype == d.dtype && (v == root || writers[v] == 0);
    }
    if (!ok) continue;
    for (int v : group) p.desc[v].row_pitch = pitch;
    for (int v : group)
      for (const Access& use : uses[v]) {
        if (!ok) break;
        ok = use.unit->op->takes_row_pitch(unit_shapes(p, *use.unit), use.output, use.operand);
      }
    if (!ok)
      for (int v : group) p.desc[v].row_pitch = 0;
  }
}

std::vector<int> padded_row_values(const ShapePlan& p) {
  std::vector<int> out;
  for (size_t v = 0; v < p.desc.size(); ++v)
    if (p.desc[v].row_pitch && p.alias_of[v] < 0) out.push_back(static_cast<int>(v));
  return out;
}

}  // namespace amp::cuda
