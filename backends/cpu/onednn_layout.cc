#include "backends/cpu/onednn_layout.h"

#include <mutex>
#include <stdexcept>

#include "backends/cpu/onednn_runtime.h"

namespace amp::cpu::onednn {

namespace {

using dnnl::memory;

struct Spec {
  memory::format_tag tag;
  int64_t groups;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<Spec>& registry() {
  static std::vector<Spec> specs;
  return specs;
}

Spec spec_of(int layout) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto& specs = registry();
  if (layout <= 0 || static_cast<size_t>(layout) > specs.size()) throw std::logic_error("unknown tensor layout");
  return specs[static_cast<size_t>(layout) - 1];
}

int register_spec(Spec s) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& specs = registry();
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].tag == s.tag && specs[i].groups == s.groups) return static_cast<int>(i) + 1;
  specs.push_back(s);
  return static_cast<int>(specs.size());
}

// oneDNN's dims of a weight tensor: [g, M/g, C/g, k...] for a grouped one.
memory::dims onednn_dims(const std::vector<int64_t>& dims, int64_t groups) {
  if (groups <= 1) return memory::dims(dims.begin(), dims.end());
  memory::dims d = {groups, dims[0] / groups};
  d.insert(d.end(), dims.begin() + 1, dims.end());
  return d;
}

memory::format_tag plain_tag(size_t rank) {
  switch (rank) {
    case 1: return memory::format_tag::a;
    case 2: return memory::format_tag::ab;
    case 3: return memory::format_tag::abc;
    case 4: return memory::format_tag::abcd;
    case 5: return memory::format_tag::abcde;
    case 6: return memory::format_tag::abcdef;
    default: throw std::logic_error("no dense layout of this rank");
  }
}

// The desc of dims in tag; a zero desc when oneDNN cannot pair them.
memory::desc desc_or_zero(const memory::dims& dims, memory::data_type t, memory::format_tag tag) {
  try {
    return memory::desc(dims, t, tag);
  } catch (const dnnl::error&) {
    return memory::desc();
  }
}

}  // namespace

int weights_layout(const memory::desc& d, const std::vector<int64_t>& dims, int64_t groups) {
  if (dims.empty() || (groups > 1 && dims[0] % groups)) return 0;
  const memory::dims od = onednn_dims(dims, groups);
  if (d.dims() != od) return 0;
  const memory::desc plain(od, d.data_type(), plain_tag(od.size()));
  if (d == plain || d.get_size() != plain.get_size()) return 0;
  // Every format tag oneDNN knows, tried once per primitive made (at compile time).
  for (int t = static_cast<int>(dnnl_format_tag_undef) + 1; t < static_cast<int>(dnnl_format_tag_last); ++t) {
    const auto tag = static_cast<memory::format_tag>(t);
    if (tag == memory::format_tag::any) continue;
    const memory::desc candidate = desc_or_zero(od, d.data_type(), tag);
    if (candidate.is_zero() || !(candidate == d)) continue;
    return register_spec({tag, groups});
  }
  return 0;
}

memory::desc layout_desc(const std::vector<int64_t>& dims, memory::data_type t, int layout) {
  if (layout == 0) return memory::desc(memory::dims(dims.begin(), dims.end()), t, plain_tag(dims.size()));
  const Spec s = spec_of(layout);
  return memory::desc(onednn_dims(dims, s.groups), t, s.tag);
}

int64_t layout_groups(int layout) { return layout ? spec_of(layout).groups : 1; }

bool layout_fits(int layout, const std::vector<int64_t>& dims) {
  if (layout == 0) return true;
  const Spec s = spec_of(layout);
  if (dims.empty() || (s.groups > 1 && dims[0] % s.groups)) return false;
  const memory::dims od = onednn_dims(dims, s.groups);
  const memory::desc d = desc_or_zero(od, memory::data_type::f32, s.tag);
  return !d.is_zero() && d.get_size() == memory::desc(od, memory::data_type::f32, plain_tag(od.size())).get_size();
}

void relayout(const void* src, int from, void* dst, int to, const std::vector<int64_t>& dims, memory::data_type t,
              int threads) {
  // Both sides in oneDNN's dims of the (grouped) layout: the plain side's dense order is the same.
  const int64_t groups = from ? spec_of(from).groups : to ? spec_of(to).groups : 1;
  if (from && to && spec_of(to).groups != groups) throw std::logic_error("relayout between different groupings");
  const memory::dims od = onednn_dims(dims, groups);
  auto desc = [&](int layout) { return memory::desc(od, t, layout ? spec_of(layout).tag : plain_tag(od.size())); };
  OmpThreads omp(threads);
  memory a(desc(from), engine(), const_cast<void*>(src)), b(desc(to), engine(), dst);
  dnnl::reorder(a, b).execute(stream(), a, b);
  stream().wait();
}

}  // namespace amp::cpu::onednn
