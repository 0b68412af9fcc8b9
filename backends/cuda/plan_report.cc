#include "backends/cuda/plan_report.h"

#include "backends/cuda/channels_last.h"
#include "backends/cuda/device_layout.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/row_pitch.h"
#include "backends/cuda/schedule.h"

namespace amp::cuda {

using nlohmann::ordered_json;

namespace {

// The value's type, and the bytes it takes when its unit stores it in a layout of its own (a
// product's ReLU mask as cuBLASLt's bitmask).
std::string value_type(const ShapePlan& p, int v, std::string (*human_bytes)(int64_t)) {
  std::string s = std::string(dtype_name(p.desc[v].dtype)) + "[";
  for (size_t i = 0; i < p.desc[v].dims.size(); ++i) s += (i ? "," : "") + std::to_string(p.desc[v].dims[i]);
  s += "]";
  if (p.desc[v].packed_bytes) s += " packed in " + human_bytes(static_cast<int64_t>(p.desc[v].packed_bytes));
  if (p.desc[v].channels_last) s += " NHWC";
  if (p.desc[v].row_pitch) s += " rows " + std::to_string(p.desc[v].row_pitch) + " apart";
  return s;
}

}  // namespace

ordered_json plan_report(const Model& m, const CompileOptions& options, const std::vector<Tensor>& feeds,
                         const std::vector<std::string>& fetch_names, std::string (*human_bytes)(int64_t)) {
  const Schedule s(m, options);
  const size_t num_values = s.program.values.size();
  std::vector<const Tensor*> fed(num_values, nullptr);
  for (const Tensor& t : feeds) fed[static_cast<size_t>(s.program.find(t.name))] = &t;
  std::vector<TensorDesc> state;
  size_t state_bytes = 0;
  for (int v : s.state_values) {
    const Tensor& t = s.program.initializers[s.program.values[v].initializer];
    state.push_back(TensorDesc{t.dtype, t.dims});
    state_bytes += t.nbytes();
  }
  std::vector<int> fetches;
  for (const std::string& name : fetch_names) fetches.push_back(s.program.find(name));
  std::vector<int> targets = fetches;
  for (const auto& [st, v] : s.updates) targets.push_back(v);
  const ShapePlan p = s.plan(fed, state, targets);
  const DeviceLayout layout = layout_device_memory(s, p, fed, fetches, 256);

  ordered_json units = ordered_json::array();
  size_t fused = 0, fused_nodes = 0, multi_tensor = 0, moved = 0;
  size_t cl_units = 0, conversions_made = 0, conversion_bytes = 0;
  for (const Unit* u : p.order) {
    ordered_json out = ordered_json::array();
    // What the unit reads and writes in device memory, each operand once (a lower bound: a
    // product re-reads tiles, a reduction its partial sums); operands read only while planning
    // (shapes) are not device traffic.
    size_t bytes = 0;
    for (size_t i = 0; i < u->in.size(); ++i)
      if (u->in[i] >= 0 && !u->host_only[i]) bytes += p.desc[u->in[i]].nbytes();
    for (int v : u->out)
      if (v >= 0) {
        out.push_back(s.program.values[v].name + ": " + value_type(p, v, human_bytes));
        bytes += p.desc[v].nbytes();
      }
    // The layout the unit computes in, and the transposes around it where an operand is stored in
    // the other (channels_last.h): each reads and writes the operand once more.
    ordered_json converted = ordered_json::array();
    for (const LayoutConversion& c : conversions(p, *u)) {
      converted.push_back({{"value", s.program.values[c.value].name},
                           {"to", c.output != c.unit_channels_last ? "NHWC" : "row-major"},
                           {"bytes", c.bytes}});
      bytes += 2 * c.bytes;
      ++conversions_made;
      conversion_bytes += 2 * c.bytes;
    }
    const bool cl = p.channels_last.count(u) > 0;
    cl_units += cl;
    moved += bytes;
    const size_t at = u->where.rfind(": node ");  // "file: node NAME (Op)" -> "NAME (Op)"
    units.push_back({{"kind", u->kind}, {"node", at == std::string::npos ? u->where : u->where.substr(at + 7)},
                     {"nodes", u->steps.size()}, {"bytes", bytes}, {"layout", cl ? "NHWC" : "as stored"},
                     {"conversions", converted}, {"outputs", out}});
    if (dynamic_cast<const MultiTensorFusedOp*>(u->op.get())) ++multi_tensor;
    if (dynamic_cast<const FusedElementwiseOp*>(u->op.get()) || dynamic_cast<const MultiTensorFusedOp*>(u->op.get())) {
      ++fused;
      fused_nodes += u->steps.size();
    }
  }
  // Host steps by op: what planning computed from constants, dims and shape feeds (Shape, the
  // arithmetic on it, constant subgraphs), so a reader can tell that none of them is device work.
  size_t host_steps = 0;
  ordered_json host_ops = ordered_json::object();
  for (int st : p.steps) {
    if (!s.host_step[st]) continue;
    ++host_steps;
    const std::string& op = s.program.steps[st].op;
    host_ops[op] = host_ops.value(op, 0) + 1;
  }
  ordered_json views = ordered_json::object();
  for (const Unit* u : p.views) views[u->kind] = views.value(u->kind, 0) + 1;
  ordered_json j;
  j["device_units"] = p.order.size();
  j["fused_kernels"] = {{"units", fused}, {"nodes", fused_nodes}, {"multi_tensor", multi_tensor}};
  j["views"] = views;
  j["host_steps"] = host_steps;
  j["host_step_ops"] = host_ops;
  j["read_through"] = p.read_through.size();
  j["nodes"] = s.program.steps.size();
  j["channels_last"] = {{"units", cl_units}, {"conversions", conversions_made}, {"conversion_bytes", conversion_bytes}};
  // Values stored with padded rows (row_pitch.h): the products read and write them where they are.
  ordered_json padded = ordered_json::array();
  for (int v : padded_row_values(p))
    padded.push_back({{"value", s.program.values[v].name}, {"type", value_type(p, v, human_bytes)},
                      {"pitch", p.desc[v].row_pitch}});
  j["padded_rows"] = padded;
  j["memory"] = {{"arena_bytes", layout.arena.arena_bytes},
                 {"peak_live_bytes", layout.arena.peak_bytes},
                 {"without_reuse_bytes", layout.arena.total_bytes},
                 {"state_bytes", state_bytes},
                 {"moved_bytes", moved}};
  j["units"] = units;
  return j;
}

}  // namespace amp::cuda
