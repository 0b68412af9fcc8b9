// Chains of copies as an attention layer makes them, small (N = 2, T = 3, C = 8 as H = 2 heads of
// D = 4), for the plan's copy fusion (backends/cuda/copy_fusion.h). Each part is optional:
//   split_heads:  q, k, v = Split(qkv [N,T,3C], axis 2); each Reshape [N,T,H,D] and Transpose to
//                 qh [N,H,T,D], kh [N,H,D,T], vh [N,H,T,D] (graph outputs);
//   merge_heads:  dq [N,H,T,D], dk [N,H,D,T], dv [N,H,T,D] each Transpose to [N,T,H,D] (dq_t,
//                 dk_t, dv_t) and Reshape [N,T,C]; dqkv = Concat(axis 2) [N,T,3C];
//   slices:       steps of -1, -2, -3 before and after a Transpose, a Slice of a Slice, and a
//                 Slice of every 5th element of a transposed [2,2,3,4], which no one copy does
//                 (its walk carries across the transposed dims);
//   fetch_q:      q, a Split output, is a graph output too;
//   dq_t_read_elsewhere: Neg(dq_t) is a graph output too.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "graph/model.h"

namespace amp::test {

struct CopyChains {
  bool split_heads = false, merge_heads = false, slices = false, fetch_q = false, dq_t_read_elsewhere = false;
};

inline CopyChains copy_chains(bool split, bool merge, bool slices, bool fetch_q, bool dq_t_elsewhere) {
  CopyChains c;
  c.split_heads = split;
  c.merge_heads = merge;
  c.slices = slices;
  c.fetch_q = fetch_q;
  c.dq_t_read_elsewhere = dq_t_elsewhere;
  return c;
}

inline Model copy_chain_model(DType t, const CopyChains& parts) {
  constexpr int64_t N = 2, T = 3, H = 2, D = 4, C = H * D, kFirst = std::numeric_limits<int64_t>::min();
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  auto ints = [&](std::vector<int64_t> v) {
    Tensor c(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t k = 0; k < v.size(); ++k) c.mutable_as<int64_t>()[k] = v[k];
    Node* n = g.add_node("Constant", {}, 1);
    n->set_attr(Attribute::of_tensor("value", c));
    n->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({static_cast<int64_t>(v.size())})));
    return n->output(0);
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out) {
    Node* n = g.add_node(op, in, {out});
    n->output(0)->set_type(ValueType::tensor(t));
    return n;
  };
  auto transpose = [&](Value* x, std::vector<int64_t> perm, const std::string& out) {
    Node* n = node("Transpose", {x}, out);
    n->set_attr(Attribute::of_ints("perm", std::move(perm)));
    return n->output(0);
  };
  auto slice = [&](Value* x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                   std::vector<int64_t> steps, const std::string& out) {
    return node("Slice", {x, ints(starts), ints(ends), ints(axes), ints(steps)}, out)->output(0);
  };
  Value* qkv = parts.split_heads || parts.slices ? g.add_input("qkv", ValueType::tensor(t, Shape::of({N, T, 3 * C})))
                                                : nullptr;
  if (parts.split_heads) {
    Node* split = g.add_node("Split", {qkv}, {"q", "k", "v"});
    split->set_attr(Attribute::of_int("axis", 2));
    const std::vector<std::vector<int64_t>> perms = {{0, 2, 1, 3}, {0, 2, 3, 1}, {0, 2, 1, 3}};
    for (size_t k = 0; k < 3; ++k) {
      split->output(k)->set_type(ValueType::tensor(t));
      const std::string name = split->output(k)->name();
      Value* heads = node("Reshape", {split->output(k), ints({N, T, H, D})}, name + "_4d")->output(0);
      g.add_output(transpose(heads, perms[k], name + "h"));
    }
    if (parts.fetch_q) g.add_output(split->output(0));
  }
  if (parts.merge_heads) {
    std::vector<Value*> flat;
    Value* dq_t = nullptr;
    for (const char* name : {"dq", "dk", "dv"}) {
      const bool k = name[1] == 'k';
      Value* d = g.add_input(name, ValueType::tensor(t, Shape::of(k ? std::vector<int64_t>{N, H, D, T}
                                                                       : std::vector<int64_t>{N, H, T, D})));
      Value* back = transpose(d, k ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{0, 2, 1, 3},
                              std::string(name) + "_t");
      if (!dq_t) dq_t = back;
      flat.push_back(node("Reshape", {back, ints({N, T, C})}, std::string(name) + "_flat")->output(0));
    }
    Node* concat = node("Concat", flat, "dqkv");
    concat->set_attr(Attribute::of_int("axis", 2));
    g.add_output(concat->output(0));
    if (parts.dq_t_read_elsewhere) g.add_output(node("Neg", {dq_t}, "neg_dq_t")->output(0));
  }
  if (parts.slices) {
    // [N,T,3C] -> rows reversed, every 3rd column from 1: [2,3,8] -> transposed [8,2,3].
    g.add_output(transpose(slice(qkv, {-1, 1}, {kFirst, 3 * C}, {1, 2}, {-1, 3}, "reversed"), {2, 0, 1}, "reversed_t"));
    // [N,T,3C] -> [2,2,8] -> the last axis every 3rd from the end: [2,2,3].
    g.add_output(slice(slice(qkv, {0, 0, 5}, {N, T, 21}, {0, 1, 2}, {1, 2, 2}, "window"), {-1}, {kFirst}, {2}, {-3},
                       "window_reversed"));
    Value* x = g.add_input("x", ValueType::tensor(t, Shape::of({N, H, D, T})));
    // [2,2,4,3] -> [4,2,2,3] -> the first axis every 2nd from the end, the last reversed: [2,2,2,3].
    g.add_output(
        slice(transpose(x, {2, 1, 0, 3}, "x_t"), {-1, -1}, {kFirst, kFirst}, {0, 3}, {-2, -1}, "x_t_reversed"));
    // [2,2,4,3] -> [2,2,3,4] -> 48 elements -> every 5th: not one walk over x.
    Value* flat = node("Reshape", {transpose(x, {0, 1, 3, 2}, "x_u"), ints({N * H * D * T})}, "x_u_flat")->output(0);
    g.add_output(slice(flat, {0}, {N * H * D * T}, {0}, {5}, "x_u_every_5th"));
  }
  return m;
}

}  // namespace amp::test
