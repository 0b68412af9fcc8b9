#include "backends/cuda/copy_fusion.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "backends/cuda/schedule.h"
#include "graph/error.h"

namespace amp::cuda {

std::optional<StridedCopy> read_through(const StridedCopy& reader, const StridedCopy& producer) {
  // The producer writes element e of its output (row-major over its dims, digit d of e counting
  // place[d] elements) from its source at src_base + sum_d digit_d(e) * src_strides[d]. That is
  // linear in each of the reader's dims as long as the dim stays inside one digit of e and no
  // digit carries: then digit d of the reader's element is its base's digit plus m * c for each
  // of its dims with stride m * place[d] and coordinate c.
  const StridedCopy& p = producer;
  const std::vector<int64_t>& radix = p.dims;
  const std::vector<int64_t>& place = p.dst_strides;
  if (reader.elem_bytes != p.elem_bytes || p.dst_base != 0 || place != contiguous_strides(radix)) return std::nullopt;
  int64_t made = 1, read = 1;
  for (int64_t d : radix) made *= d;
  for (int64_t d : reader.dims) read *= d;
  if (made == 0 || read == 0 || reader.src_base < 0 || reader.src_base >= made) return std::nullopt;

  StridedCopy out;
  out.dst_base = reader.dst_base;
  out.elem_bytes = reader.elem_bytes;
  out.src_base = p.src_base;
  std::vector<int64_t> low(radix.size()), high(radix.size());  // each digit's range over the walk
  for (size_t d = 0; d < radix.size(); ++d) {
    low[d] = high[d] = reader.src_base / place[d] % radix[d];
    out.src_base += low[d] * p.src_strides[d];
  }
  // A reader's dim of n elements, stride s in the producer's output, dst_stride in its own.
  auto place_dim = [&](auto& self, int64_t n, int64_t s, int64_t dst_stride) -> bool {
    if (n == 1) return true;
    if (s == 0) {  // a repeat (Expand)
      out.dims.push_back(n);
      out.src_strides.push_back(0);
      out.dst_strides.push_back(dst_stride);
      return true;
    }
    // The outermost digit the stride is a whole number of (place.back() is 1, so there is one).
    size_t d = 0;
    while (std::llabs(s) % place[d] != 0) ++d;
    const int64_t m = s / place[d], step = std::llabs(m);
    if (step * (n - 1) >= radix[d]) {
      // The dim runs past this digit into the outer ones (a reshape merged them): split off an
      // inner walk that covers the digit once, e.g. [N*T] over [N, T] as [N] and [T].
      const int64_t inner = radix[d] / step;
      if (radix[d] % step != 0 || inner < 2 || n % inner != 0) return false;
      return self(self, n / inner, s * inner, dst_stride * inner) && self(self, inner, s, dst_stride);
    }
    out.dims.push_back(n);
    out.src_strides.push_back(m * p.src_strides[d]);
    out.dst_strides.push_back(dst_stride);
    (m > 0 ? high[d] : low[d]) += m * (n - 1);
    return true;
  };
  for (size_t k = 0; k < reader.dims.size(); ++k)
    if (!place_dim(place_dim, reader.dims[k], reader.src_strides[k], reader.dst_strides[k])) return std::nullopt;
  for (size_t d = 0; d < radix.size(); ++d)
    if (low[d] < 0 || high[d] >= radix[d]) return std::nullopt;  // a carry: not one linear walk
  // simplify() refuses more dims than the kernel takes; such a chain stays two copies.
  try {
    return simplify(std::move(out));
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::unique_ptr<PreparedOp> prepare_copies(std::vector<OperandCopy> copies) {
  std::vector<StridedCopy> walks;
  for (const OperandCopy& c : copies) walks.push_back(c.copy);
  return std::make_unique<PreparedFunction>([copies = std::move(copies), walks](const OpBuffers& b,
                                                                                DeviceContext& ctx) {
    std::vector<const void*> src;
    std::vector<void*> dst;
    for (const OperandCopy& c : copies) {
      src.push_back(b.in[c.input]);
      dst.push_back(b.out[c.output]);
    }
    strided_copies(walks, src, dst, ctx.sm_count(), ctx.stream());
  });
}

namespace {

// One copy of the plan: a walk from the buffer of value src to that of value dst.
struct Task {
  StridedCopy copy;
  int src, dst;
  std::string chain;  // the ops it stands for, "Split>Transpose"
  bool gone = false;  // composed into its readers
};

// Whether t writes all of its destination, row by row: what a reader can read through.
bool writes_whole(const Task& t, const ShapePlan& p) {
  int64_t n = 1;
  for (int64_t d : t.copy.dims) n *= d;
  return t.copy.dst_base == 0 && t.copy.dst_strides == contiguous_strides(t.copy.dims) && n == p.desc[t.dst].numel();
}

// A unit running `tasks` (none gone) in one launch, covering `steps`.
std::unique_ptr<Unit> copy_unit(const std::vector<const Task*>& tasks, std::vector<int> steps,
                                const std::string& where) {
  auto u = std::make_unique<Unit>();
  std::vector<OperandCopy> copies;
  auto operand = [](std::vector<int>& list, int v) {
    auto it = std::find(list.begin(), list.end(), v);
    if (it == list.end()) it = list.insert(list.end(), v);
    return static_cast<size_t>(it - list.begin());
  };
  std::vector<std::string> chains;
  for (const Task* t : tasks) {
    const size_t in = operand(u->in, t->src);
    copies.push_back({t->copy, in, operand(u->out, t->dst)});
    chains.push_back(t->chain);
  }
  u->host_only.assign(u->in.size(), false);
  std::sort(steps.begin(), steps.end());
  u->steps = std::move(steps);
  u->where = where;
  // "copy x3 Split>Transpose" when all are alike, else each: "copy x2 Transpose | Slice".
  const bool alike = std::all_of(chains.begin(), chains.end(), [&](const std::string& c) { return c == chains[0]; });
  if (tasks.size() > 1) u->kind = "copy x" + std::to_string(tasks.size()) + " ";
  for (size_t k = 0; k < (alike ? 1 : chains.size()); ++k) u->kind += (k ? " | " : "") + chains[k];
  u->op = std::make_unique<CopiesOp>(std::move(copies));
  return u;
}

}  // namespace

void fuse_copies(const Schedule& s, ShapePlan& p, const std::vector<int>& targets) {
  const size_t num_values = s.program.values.size(), count = p.order.size();
  std::vector<std::vector<Task>> tasks(count);  // per unit in the order; empty: not a copy unit
  std::vector<std::vector<size_t>> read_by(num_values);  // per value (its root): the units reading it
  for (size_t i = 0; i < count; ++i) {
    const Unit& u = *p.order[i];
    for (const OperandCopy& c : u.op->element_copies(unit_shapes(p, u)))
      if (u.in[c.input] >= 0 && u.out[c.output] >= 0)
        tasks[i].push_back({c.copy, p.root(u.in[c.input]), u.out[c.output], u.kind});
    for (size_t k = 0; k < u.in.size(); ++k) {
      if (u.in[k] < 0 || u.host_only[k]) continue;
      std::vector<size_t>& readers = read_by[p.root(u.in[k])];
      if (readers.empty() || readers.back() != i) readers.push_back(i);
    }
  }
  std::vector<bool> kept(num_values, false);  // targets (through views too)
  for (int t : targets) kept[static_cast<size_t>(p.root(t))] = true;

  // In run order, so a producer's own source is already composed when its readers read through it.
  std::vector<bool> changed(count, false), made(num_values, true);
  for (size_t i = 0; i < count; ++i)
    for (Task& producer : tasks[i]) {
      const int x = producer.dst;
      if (kept[x] || !writes_whole(producer, p)) continue;
      // Every reader must be a copy that can read through the producer.
      std::vector<std::pair<Task*, StridedCopy>> composed;
      auto compose_all = [&] {
        for (size_t r : read_by[x]) {
          if (tasks[r].empty()) return false;
          for (Task& t : tasks[r]) {
            if (t.src != x) continue;
            std::optional<StridedCopy> c = read_through(t.copy, producer.copy);
            if (!c) return false;
            composed.emplace_back(&t, std::move(*c));
          }
        }
        return true;
      };
      if (!compose_all()) continue;
      for (auto& [t, c] : composed) {
        t->copy = std::move(c);
        t->src = producer.src;
        t->chain = producer.chain + ">" + t->chain;
      }
      for (size_t r : read_by[x]) changed[r] = true;
      producer.gone = true;
      changed[i] = true;
      made[x] = false;
    }

  // Views of what is no longer made, and units left with nothing to make, leave the plan with
  // their steps.
  std::vector<bool> dropped_step(s.program.steps.size(), false);
  std::vector<const Unit*> views;
  for (const Unit* v : p.views) {
    if (made[p.root(v->out[0])]) {
      views.push_back(v);
      continue;
    }
    p.alias_of[v->out[0]] = -1;
    for (int st : v->steps) dropped_step[st] = true;
  }
  p.views = std::move(views);

  // Copy units next to each other, none reading what an earlier one of them writes: one launch.
  std::vector<const Unit*> order;
  struct Batch {
    std::vector<const Task*> tasks;
    std::vector<int> steps;
    std::vector<size_t> units;  // positions in p.order
    bool changed = false;
  } batch;
  std::vector<bool> written(num_values, false);  // by the batch
  auto flush = [&] {
    if (batch.units.size() == 1 && !batch.changed) {
      order.push_back(p.order[batch.units[0]]);  // as it was
    } else if (!batch.units.empty()) {
      p.copies.push_back(copy_unit(batch.tasks, batch.steps, p.order[batch.units[0]]->where));
      order.push_back(p.copies.back().get());
    }
    for (const Task* t : batch.tasks) written[t->dst] = false;
    batch = Batch{};
  };
  for (size_t i = 0; i < count; ++i) {
    const Unit* u = p.order[i];
    if (tasks[i].empty()) {
      flush();
      order.push_back(u);
      continue;
    }
    std::vector<const Task*> live;
    for (const Task& t : tasks[i])
      if (!t.gone) live.push_back(&t);
    if (live.empty()) {  // all it made is read through
      for (int st : u->steps) dropped_step[st] = true;
      continue;
    }
    if (std::any_of(live.begin(), live.end(), [&](const Task* t) { return written[t->src]; })) flush();
    for (const Task* t : live) {
      batch.tasks.push_back(t);
      written[t->dst] = true;
    }
    batch.steps.insert(batch.steps.end(), u->steps.begin(), u->steps.end());
    batch.units.push_back(i);
    batch.changed = batch.changed || changed[i];
  }
  flush();
  p.order = std::move(order);
  for (int st : p.steps)
    if (dropped_step[st]) p.read_through.push_back(st);
  p.steps.erase(std::remove_if(p.steps.begin(), p.steps.end(), [&](int st) { return dropped_step[st]; }),
                p.steps.end());
}

}  // namespace amp::cuda
