#include "backends/cuda/device_layout.h"

#include <algorithm>

namespace amp::cuda {

std::vector<int64_t> join_positions(const ShapePlan& p, const std::vector<bool>& beside) {
  const auto end = static_cast<int64_t>(p.order.size());
  std::vector<int64_t> join(p.order.size(), -1);
  for (int64_t pos = 0; pos < end; ++pos) {
    if (pos >= static_cast<int64_t>(beside.size()) || !beside[static_cast<size_t>(pos)]) continue;
    const Unit& u = *p.order[static_cast<size_t>(pos)];
    int64_t at = end;
    for (int64_t later = pos + 1; later < end && at == end; ++later)
      for (int v : p.order[static_cast<size_t>(later)]->in)
        if (v >= 0 && std::find(u.out.begin(), u.out.end(), p.root(v)) != u.out.end()) at = later;
    join[static_cast<size_t>(pos)] = at;
  }
  return join;
}

DeviceLayout layout_device_memory(const Schedule& s, const ShapePlan& p, const std::vector<const Tensor*>& fed,
                                  const std::vector<int>& fetches, size_t alignment, const std::vector<bool>& beside) {
  DeviceLayout l;
  const size_t num_values = s.program.values.size();
  l.end = static_cast<int64_t>(p.order.size());
  l.first_write.assign(num_values, -1);
  l.last_read.assign(num_values, -1);
  l.on_device.assign(num_values, false);
  l.offset.assign(num_values, -1);

  // A read of a view is a read of its root.
  auto read = [&](int v, int64_t pos) {
    l.on_device[v] = true;
    l.on_device[p.root(v)] = true;
    l.last_read[v] = std::max(l.last_read[v], pos);
    l.last_read[p.root(v)] = std::max(l.last_read[p.root(v)], pos);
  };
  for (int64_t pos = 0; pos < l.end; ++pos) {
    const Unit& u = *p.order[pos];
    for (size_t i = 0; i < u.in.size(); ++i)
      if (u.in[i] >= 0 && !u.host_only[i]) read(u.in[i], pos);
    for (int v : u.out)
      if (v >= 0 && l.first_write[v] < 0) l.first_write[v] = pos;
  }
  // What a unit running beside the step's stream reads and writes stays put until its join.
  const std::vector<int64_t> join = join_positions(p, beside);
  for (size_t pos = 0; pos < join.size(); ++pos) {
    if (join[pos] < 0) continue;
    const Unit& u = *p.order[pos];
    for (size_t i = 0; i < u.in.size(); ++i)
      if (u.in[i] >= 0 && !u.host_only[i]) read(u.in[i], join[pos]);
    for (int v : u.out)
      if (v >= 0) read(v, join[pos]);
  }
  for (const auto& [st, v] : s.updates) read(v, l.end);
  for (int v : fetches) {
    l.last_read[v] = l.end;
    l.last_read[p.root(v)] = std::max(l.last_read[p.root(v)], l.end);
    if (p.alias_of[v] >= 0) read(v, l.end);
  }

  std::vector<BufferLife> lives;
  std::vector<int> owners;  // per life: the value, or -1 - value for a state fetch's staging copy
  for (size_t v = 0; v < num_values; ++v) {
    const size_t bytes = p.desc[v].nbytes();
    if (bytes == 0 || p.alias_of[v] >= 0) continue;
    if (l.first_write[v] >= 0) {
      lives.push_back({bytes, l.first_write[v], std::max(l.first_write[v], l.last_read[v])});
      owners.push_back(static_cast<int>(v));
    } else if (fed[v] && l.on_device[v]) {
      lives.push_back({bytes, 0, l.end});
      owners.push_back(static_cast<int>(v));
    }
  }
  for (int v : fetches)
    if (s.state_of[v] >= 0 && !fed[v] && p.desc[v].nbytes() > 0) {
      lives.push_back({p.desc[v].nbytes(), l.end, l.end});
      owners.push_back(-1 - v);
    }
  l.arena = plan_arena(lives, alignment);
  for (size_t i = 0; i < lives.size(); ++i) {
    const size_t at = l.arena.offsets[i];
    if (owners[i] >= 0) l.offset[static_cast<size_t>(owners[i])] = static_cast<int64_t>(at);
    else l.state_fetches.emplace_back(-1 - owners[i], at);
  }
  return l;
}

}  // namespace amp::cuda
