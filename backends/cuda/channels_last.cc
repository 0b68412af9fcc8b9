// Channels-last per plan: which values are stored N, spatial..., C, which units compute so, and
// the transposes at the boundaries (channels_last.h).
#include "backends/cuda/channels_last.h"

#include <memory>
#include <unordered_map>
#include <utility>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/strided_copy.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

bool listed(const std::vector<bool>& list, size_t k) { return k < list.size() && list[k]; }

// What a unit does with layouts in this plan.
enum class Role { kFixed, kAnyLayout, kCandidate };

// Operands whose layout a unit's layout decides: stored as dims say or channels-last, 3 dims and
// more, not packed (a packed operand's element order is its writer's, never converted).
bool layout_bearing(const TensorDesc& d) { return d.dims.size() >= 3 && d.packed_bytes == 0; }

// Whether two layouts of one tensor put every element at the same place: they differ only in dims
// of extent 1 (a 1x1 filter [K, C, 1, 1], a pooled [N, C, 1, 1]), so nothing needs transposing.
bool same_memory(const TensorDesc& a, const TensorDesc& b) {
  if (a.channels_last == b.channels_last) return true;
  const std::vector<int64_t> sa = a.strides(), sb = b.strides();
  for (size_t d = 0; d < a.dims.size(); ++d)
    if (a.dims[d] != 1 && sa[d] != sb[d]) return false;
  return true;
}

// Whether d's two layouts put its elements in different places (a transpose between them moves
// something).
bool layouts_differ(const TensorDesc& d) {
  TensorDesc other = d;
  other.channels_last = !d.channels_last;
  return !same_memory(d, other);
}

// The operands of u whose stored layout (stored) is not the one the unit computes in (wanted).
std::vector<LayoutConversion> conversions_between(const Unit& u, const OpShapes& stored, const OpShapes& wanted) {
  std::vector<LayoutConversion> list;
  auto check = [&](bool output, const std::vector<const TensorDesc*>& have, const std::vector<const TensorDesc*>& want,
                   const std::vector<int>& values) {
    for (size_t k = 0; k < have.size(); ++k) {
      if (!have[k] || same_memory(*have[k], *want[k])) continue;
      if (have[k]->packed_bytes) throw Error(u.where + ": internal: a packed operand in the other layout");
      list.push_back({output, k, values[k], want[k]->channels_last, have[k]->nbytes()});
    }
  };
  check(false, stored.in, wanted.in, u.in);
  check(true, stored.out, wanted.out, u.out);
  return list;
}

}  // namespace

void decide_channels_last(const Schedule& s, ShapePlan& p, const std::vector<int>& targets,
                          const std::vector<const Tensor*>& fed) {
  p.channels_last.clear();
  for (TensorDesc& d : p.desc) d.channels_last = false;
  if (!s.channels_last) return;

  // Candidates: the operands each takes channels-last for these (row-major) shapes.
  std::unordered_map<const Unit*, ChannelsLastOperands> candidate;
  for (const Unit* u : p.order) {
    ChannelsLastOperands cl = u->op->channels_last(unit_shapes(p, *u));
    if (cl.any()) candidate.emplace(u, std::move(cl));
  }
  if (candidate.empty()) return;

  const size_t num_values = p.desc.size();
  std::vector<bool> pinned(num_values, false);
  for (int v : targets) pinned[v] = true;
  for (size_t v = 0; v < num_values; ++v) {
    if (fed[v] || s.state_of[v] >= 0 || p.known[v] || p.alias_of[v] >= 0 || p.desc[v].dims.size() < 3) pinned[v] = true;
    if (p.alias_of[v] >= 0) pinned[p.alias_of[v]] = true;
  }
  for (const Unit* u : p.views) {
    for (int v : u->in)
      if (v >= 0) pinned[v] = true;
    for (int v : u->out)
      if (v >= 0) pinned[v] = true;
  }
  auto role = [&](const Unit* u) {
    return candidate.count(u) ? Role::kCandidate : u->op->any_layout() ? Role::kAnyLayout : Role::kFixed;
  };
  // Operands a unit needs row-major: all of a fixed unit's, a candidate's unlisted ones.
  for (const Unit* u : p.order) {
    const Role r = role(u);
    if (r == Role::kAnyLayout) continue;
    const ChannelsLastOperands* cl = r == Role::kCandidate ? &candidate.at(u) : nullptr;
    for (size_t i = 0; i < u->in.size(); ++i)
      if (u->in[i] >= 0 && !(cl && listed(cl->in, i))) pinned[u->in[i]] = true;
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0 && !(cl && listed(cl->out, k))) pinned[u->out[k]] = true;
  }

  // Stored channels-last: what a candidate lists, then the outputs of elementwise kernels reading
  // such a value of their dims, until nothing changes.
  std::vector<bool> cl_value(num_values, false);
  for (const auto& [u, cl] : candidate) {
    for (size_t i = 0; i < u->in.size(); ++i)
      if (listed(cl.in, i) && u->in[i] >= 0 && !pinned[u->in[i]]) cl_value[u->in[i]] = true;
    for (size_t k = 0; k < u->out.size(); ++k)
      if (listed(cl.out, k) && u->out[k] >= 0 && !pinned[u->out[k]]) cl_value[u->out[k]] = true;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const Unit* u : p.order) {
      if (role(u) != Role::kAnyLayout) continue;
      bool reads = false;
      for (int v : u->in)
        for (int o : u->out)
          if (v >= 0 && o >= 0 && cl_value[v] && p.desc[v].dims == p.desc[o].dims) reads = true;
      if (!reads) continue;
      for (int o : u->out)
        if (o >= 0 && !pinned[o] && !cl_value[o] && p.desc[o].dims.size() >= 3) cl_value[o] = changed = true;
    }
  }

  // Which candidates compute channels-last, and how the values between them are stored: each
  // candidate takes the layout that transposes fewer bytes of its operands as they are stored (a
  // tie: row-major when a pinned operand would be transposed, as the others can follow the unit;
  // else channels-last when one of them is stored so), and each value that is not pinned the layout
  // most of the candidates reading or writing it compute in (a tie keeps it), until nothing changes.
  // A BatchNorm between a depthwise convolution (which keeps ONNX's layout) and an activation then
  // computes row-major rather than transposing the convolution's output in and its own back out.
  auto operands = [&](const Unit* u, const ChannelsLastOperands& cl, auto&& f) {
    for (size_t i = 0; i < u->in.size(); ++i)
      if (listed(cl.in, i) && u->in[i] >= 0 && layout_bearing(p.desc[u->in[i]])) f(u->in[i]);
    for (size_t k = 0; k < u->out.size(); ++k)
      if (listed(cl.out, k) && u->out[k] >= 0 && layout_bearing(p.desc[u->out[k]])) f(u->out[k]);
  };
  std::unordered_map<const Unit*, bool> computes;
  std::vector<std::vector<const Unit*>> touching(num_values);  // the candidates listing v
  for (const auto& [u, cl] : candidate) {
    bool any = false;
    operands(u, cl, [&, u = u](int v) {
      any |= cl_value[v];
      touching[v].push_back(u);
    });
    computes[u] = any;
  }
  for (int round = 0; round < 32; ++round) {
    bool changed = false;
    for (const auto& [u, cl] : candidate) {
      size_t if_cl = 0, if_rm = 0;  // bytes transposed when the unit computes channels-last / row-major
      bool any = false, pinned_transposed = false;
      operands(u, cl, [&](int v) {
        any |= cl_value[v];
        if (!layouts_differ(p.desc[v])) return;
        (cl_value[v] ? if_rm : if_cl) += p.desc[v].nbytes();
        pinned_transposed |= pinned[v];
      });
      const bool want = if_cl < if_rm || (if_cl == if_rm && any && !pinned_transposed);
      if (want != computes[u]) computes[u] = want, changed = true;
    }
    for (size_t v = 0; v < num_values; ++v) {
      if (pinned[v] || touching[v].empty()) continue;
      int votes = 0;
      for (const Unit* u : touching[v]) votes += computes[u] ? 1 : -1;
      const bool want = votes > 0 || (votes == 0 && cl_value[v]);
      if (want != cl_value[v]) cl_value[v] = want, changed = true;
    }
    if (!changed) break;
  }
  // An elementwise kernel's outputs share one iteration space: one layout for all of them.
  for (const Unit* u : p.order) {
    if (role(u) != Role::kAnyLayout) continue;
    bool all = true;
    for (int o : u->out) all &= o < 0 || cl_value[o];
    if (!all)
      for (int o : u->out)
        if (o >= 0) cl_value[o] = false;
  }
  // Whether u, as the plan stands, takes its operand (input or output k) channels-last.
  auto takes_cl = [&](const Unit* u, bool output, size_t k) {
    auto it = candidate.find(u);
    return it != candidate.end() && computes[u] && listed(output ? it->second.out : it->second.in, k);
  };
  std::vector<std::pair<const Unit*, size_t>> writer(num_values, {nullptr, 0});
  for (const Unit* u : p.order)
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0) writer[u->out[k]] = {u, k};
  for (bool changed = true; changed;) {
    changed = false;
    for (const Unit* u : p.order)
      for (size_t i = 0; i < u->in.size(); ++i) {
        const int v = u->in[i];
        if (v < 0 || p.desc[v].packed_bytes == 0 || !writer[v].first) continue;
        const Unit* w = writer[v].first;
        if (takes_cl(w, true, writer[v].second) == takes_cl(u, false, i)) continue;
        for (const Unit* x : {w, u})
          if (computes.count(x) && computes[x]) computes[x] = false, changed = true;
      }
  }

  for (size_t v = 0; v < num_values; ++v) p.desc[v].channels_last = cl_value[v] && layout_bearing(p.desc[v]);
  for (const auto& [u, cl] : candidate) {
    if (!computes[u]) continue;
    p.channels_last.emplace(u, cl);
    // A packed operand is stored as its writer computes.
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0 && p.desc[u->out[k]].packed_bytes && listed(cl.out, k)) p.desc[u->out[k]].channels_last = true;
  }
}

std::vector<bool> touched_channels_last(const Schedule& s, const ShapePlan& p, const std::vector<const Unit*>& units) {
  std::vector<bool> touched(p.desc.size(), false);
  if (!s.channels_last) return touched;
  auto mark = [&](int v) {
    if (v >= 0 && layout_bearing(p.desc[v]) && layouts_differ(p.desc[v])) touched[v] = true;
  };
  for (const Unit* u : units) {
    const ChannelsLastOperands cl = u->op->channels_last(unit_shapes(p, *u));
    for (size_t i = 0; i < u->in.size(); ++i)
      if (listed(cl.in, i)) mark(u->in[i]);
    for (size_t k = 0; k < u->out.size(); ++k)
      if (listed(cl.out, k)) mark(u->out[k]);
  }
  return touched;
}

OpShapes compute_shapes(const ShapePlan& p, const Unit& u) {
  OpShapes shapes = unit_shapes(p, u);
  if (u.op->any_layout()) return shapes;
  auto it = p.channels_last.find(&u);
  const ChannelsLastOperands* cl = it == p.channels_last.end() ? nullptr : &it->second;
  // Descriptors of this unit's own: the stored ones with the layout the unit computes in.
  auto own = std::make_shared<std::vector<TensorDesc>>();
  own->reserve(shapes.in.size() + shapes.out.size());
  auto adjust = [&](std::vector<const TensorDesc*>& list, const std::vector<bool>* flags) {
    for (size_t k = 0; k < list.size(); ++k) {
      if (!list[k]) continue;
      const bool want = flags && listed(*flags, k) && (layout_bearing(*list[k]) || list[k]->channels_last);
      if (list[k]->channels_last == want) continue;
      own->push_back(*list[k]);
      own->back().channels_last = want;
      list[k] = &own->back();
    }
  };
  adjust(shapes.in, cl ? &cl->in : nullptr);
  adjust(shapes.out, cl ? &cl->out : nullptr);
  if (!own->empty()) shapes.keep = std::move(own);
  return shapes;
}

std::vector<LayoutConversion> conversions(const ShapePlan& p, const Unit& u) {
  return conversions_between(u, unit_shapes(p, u), compute_shapes(p, u));
}

namespace {

// A unit's op with some operands transposed through scratch around it. The scratch holds the
// op's own workspace first, then one buffer per converted operand. It also keeps the descriptors
// the op was prepared with (compute_shapes' own), which a prepared op may point to while it runs.
class Converting final : public PreparedOp {
 public:
  // The operands converted one way (the inputs before the unit, the outputs after it): each one's
  // position among the unit's inputs or outputs, its buffer's offset in the scratch, and the copy
  // (stored -> computed for an input, computed -> stored for an output).
  struct Side {
    std::vector<size_t> operand, offset;
    std::vector<StridedCopy> copies;
  };
  Converting(std::unique_ptr<PreparedOp> inner, Side in, Side out, size_t bytes, std::shared_ptr<const void> keep)
      : inner_(std::move(inner)), in_(std::move(in)), out_(std::move(out)), bytes_(bytes), keep_(std::move(keep)) {}
  size_t workspace_bytes() const override { return bytes_; }
  // Only a unit with nothing converted may leave work running beside the stream (prepare_unit).
  cudaEvent_t completion() const override { return inner_->completion(); }
  void enqueue(const OpBuffers& b, DeviceContext& ctx) const override {
    auto* scratch = static_cast<uint8_t*>(b.workspace);
    OpBuffers inner = b;
    std::vector<const void*> src(in_.operand.size());
    std::vector<void*> dst(in_.operand.size());
    for (size_t k = 0; k < in_.operand.size(); ++k) {
      src[k] = b.in[in_.operand[k]];
      dst[k] = scratch + in_.offset[k];
      inner.in[in_.operand[k]] = dst[k];
    }
    if (!in_.copies.empty()) strided_copies(in_.copies, src, dst, ctx.sm_count(), ctx.stream());
    src.resize(out_.operand.size());
    dst.resize(out_.operand.size());
    for (size_t k = 0; k < out_.operand.size(); ++k) {
      src[k] = scratch + out_.offset[k];
      dst[k] = b.out[out_.operand[k]];
      inner.out[out_.operand[k]] = scratch + out_.offset[k];
    }
    inner_->enqueue(inner, ctx);
    if (!out_.copies.empty()) strided_copies(out_.copies, src, dst, ctx.sm_count(), ctx.stream());
  }

 private:
  std::unique_ptr<PreparedOp> inner_;
  Side in_, out_;
  size_t bytes_;
  std::shared_ptr<const void> keep_;
};

}  // namespace

std::unique_ptr<PreparedOp> prepare_unit(const ShapePlan& p, const Unit& u, bool tf32, DeviceContext& ctx) {
  OpShapes shapes = compute_shapes(p, u);
  shapes.tf32 = tf32;
  std::unique_ptr<PreparedOp> inner = u.op->prepare(shapes, ctx);
  const OpShapes stored = unit_shapes(p, u);
  const std::vector<LayoutConversion> list = conversions_between(u, stored, shapes);
  if (list.empty() && !shapes.keep) return inner;
  if (!list.empty() && inner->completion())
    throw Error(u.where + ": internal: a unit whose work runs beside the step's stream cannot have operands converted");
  size_t offset = list.empty() ? inner->workspace_bytes() : workspace_aligned(inner->workspace_bytes());
  Converting::Side in, out;
  for (const LayoutConversion& c : list) {
    const TensorDesc& from = c.output ? *shapes.out[c.operand] : *stored.in[c.operand];
    const TensorDesc& to = c.output ? *stored.out[c.operand] : *shapes.in[c.operand];
    StridedCopy copy;
    copy.dims = from.dims;
    copy.src_strides = from.strides();
    copy.dst_strides = to.strides();
    copy.elem_bytes = dtype_size(from.dtype);
    Converting::Side& side = c.output ? out : in;
    side.operand.push_back(c.operand);
    side.offset.push_back(offset);
    side.copies.push_back(simplify(std::move(copy)));
    offset += workspace_aligned(c.bytes);
  }
  return std::make_unique<Converting>(std::move(inner), std::move(in), std::move(out), offset, shapes.keep);
}

}  // namespace amp::cuda
