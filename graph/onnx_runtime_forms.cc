#include "graph/onnx_runtime_forms.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/onnx_proto_edit.h"

namespace amp {

namespace {

int64_t default_opset(const onnx::ModelProto& p) {
  for (const auto& o : p.opset_import())
    if (proto::default_domain(o.domain())) return o.version();
  return 0;
}

std::vector<onnx::GraphProto*> subgraphs_of(onnx::NodeProto& n) {
  std::vector<onnx::GraphProto*> out;
  for (auto& a : *n.mutable_attribute()) {
    if (a.has_g()) out.push_back(a.mutable_g());
    for (auto& g : *a.mutable_graphs()) out.push_back(&g);
  }
  return out;
}

// Every graph of the model, outer ones first.
void for_each_graph(onnx::GraphProto& g, const std::function<void(onnx::GraphProto&)>& fn) {
  fn(g);
  for (auto& n : *g.mutable_node())
    for (auto* sub : subgraphs_of(n)) for_each_graph(*sub, fn);
}

void for_each_graph(onnx::ModelProto& p, const std::function<void(onnx::GraphProto&)>& fn) {
  for_each_graph(*p.mutable_graph(), fn);
  for (auto& t : *p.mutable_training_info()) {
    if (t.has_initialization()) for_each_graph(*t.mutable_initialization(), fn);
    if (t.has_algorithm()) for_each_graph(*t.mutable_algorithm(), fn);
  }
}

// Names a graph reads from the graphs around it: what its nodes (and their subgraphs) read and
// the graph itself does not define.
std::set<std::string> outer_reads(onnx::GraphProto& g) {
  std::unordered_set<std::string> defined;
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& t : g.sparse_initializer()) defined.insert(t.values().name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  std::set<std::string> reads;
  for (auto& n : *g.mutable_node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !defined.count(i)) reads.insert(i);
    for (auto* sub : subgraphs_of(n))
      for (const auto& name : outer_reads(*sub))
        if (!defined.count(name)) reads.insert(name);
  }
  return reads;
}

// Kahn's algorithm, the lowest original index first among the ready nodes: a sorted graph keeps
// its order, an unsorted one changes only where it must. False when nothing moved or it cannot
// be sorted.
bool sort_graph(onnx::GraphProto& g) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer.emplace(o, i);
  std::vector<std::vector<int>> successors(n);
  std::vector<int> indegree(n, 0);
  for (int i = 0; i < n; ++i) {
    std::set<std::string> reads(g.node(i).input().begin(), g.node(i).input().end());
    for (auto* sub : subgraphs_of(*g.mutable_node(i)))
      for (const auto& name : outer_reads(*sub)) reads.insert(name);
    std::set<int> deps;
    for (const auto& name : reads) {
      auto it = producer.find(name);
      if (it != producer.end() && it->second != i) deps.insert(it->second);
    }
    for (int d : deps) successors[d].push_back(i);
    indegree[i] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : successors[i])
      if (--indegree[s] == 0) ready.push(s);
  }
  if (static_cast<int>(order.size()) != n) return false;  // a cycle: the scope check names it
  bool moved = false;
  for (int i = 0; i < n; ++i) moved |= order[i] != i;
  if (!moved) return false;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) sorted.Add()->Swap(g.mutable_node(i));
  g.mutable_node()->Swap(&sorted);
  return true;
}

// ONNX Runtime's contrib ops that it registers in the default domain, and the ONNX opset that
// defines the same op there.
const std::map<std::string, int> kOnnxRuntimeDefaultDomainOps = {{"LayerNormalization", 17}};

}  // namespace

std::vector<std::string> sort_nodes_topologically(onnx::ModelProto& p) {
  std::vector<std::string> reordered;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    if (sort_graph(g)) reordered.push_back(g.name());
  });
  return reordered;
}

namespace {

onnx::NodeProto make_node(const std::string& op, std::vector<std::string> in, const std::string& out,
                          const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

// SimplifiedLayerNormalization(X, scale) (ONNX Runtime's RMS norm, T5's, in the default domain; no
// ONNX op means it): Y = X / sqrt(mean(X^2 over the axes from `axis` on) + epsilon) * scale, as
// opset-17 nodes computing in X's type (its stash_type 1 asks for fp32 arithmetic on 16-bit X,
// which these nodes give fp32 models only). Empty when `axis` is not negative: the axes from it on
// then need X's rank, which the proto does not tell.
std::vector<onnx::NodeProto> rms_norm_nodes(const onnx::NodeProto& n) {
  int64_t axis = -1;
  float epsilon = 1e-5f;
  for (const auto& a : n.attribute()) {
    if (a.name() == "axis") axis = a.i();
    if (a.name() == "epsilon") epsilon = a.f();
  }
  if (axis >= 0 || n.input_size() < 2) return {};
  const std::string& x = n.input(0);
  const std::string& y = n.output(0);
  const std::string base = (n.name().empty() ? y : n.name()) + "/rms_norm/";
  std::vector<onnx::NodeProto> out;
  out.push_back(make_node("Mul", {x, x}, base + "square", base + "Mul"));
  out.push_back(make_node("ReduceMean", {base + "square"}, base + "mean_square", base + "ReduceMean"));
  auto* axes = out.back().add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  for (int64_t a = axis; a < 0; ++a) axes->add_ints(a);
  out.push_back(make_node("Constant", {}, base + "epsilon", base + "Constant"));
  auto* value = out.back().add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_float_data(epsilon);
  out.push_back(make_node("Add", {base + "mean_square", base + "epsilon"}, base + "plus_epsilon", base + "Add"));
  out.push_back(make_node("Sqrt", {base + "plus_epsilon"}, base + "rms", base + "Sqrt"));
  out.push_back(make_node("Div", {x, base + "rms"}, base + "normalized", base + "Div"));
  out.push_back(make_node("Mul", {base + "normalized", n.input(1)}, y, base + "Scale"));
  return out;
}

}  // namespace

int set_aside_onnx_runtime_ops(onnx::ModelProto& p, SetAsideNodes& saved, std::vector<std::string>& notes) {
  const int64_t opset = default_opset(p);
  int count = 0;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (auto& n : *g.mutable_node()) {
      if (!proto::default_domain(n.domain())) continue;
      bool only_y = n.input_size() >= 1 && n.output_size() >= 1 && !n.output(0).empty();
      for (int k = 1; k < n.output_size(); ++k) only_y &= n.output(k).empty();
      if (!only_y) continue;  // its Mean / InvStdDev are read: refused by name as an unknown op
      std::vector<onnx::NodeProto> meaning;
      if (n.op_type() == "SimplifiedLayerNormalization" &&
          !onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "")) {
        meaning = rms_norm_nodes(n);
        if (meaning.empty()) continue;  // refused by name as an unknown op
      } else {
        auto op = kOnnxRuntimeDefaultDomainOps.find(n.op_type());
        if (op == kOnnxRuntimeDefaultDomainOps.end() || opset >= op->second ||
            onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), ""))
          continue;
        const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), op->second, "");
        auto* attrs = n.mutable_attribute();
        for (int i = attrs->size(); i-- > 0;) {
          if (schema->attributes().count(attrs->Get(i).name())) continue;
          notes.push_back("node '" + n.name() + "' (" + n.op_type() + "): attribute '" + attrs->Get(i).name() +
                          "' is not one of the op's; ignored, as ONNX Runtime does");
          attrs->DeleteSubrange(i, 1);
        }
        n.clear_domain();
        meaning.push_back(n);
      }
      onnx::NodeProto stand_in;
      stand_in.set_op_type("Identity");
      stand_in.set_name(n.name());
      stand_in.add_input(n.input(0));
      stand_in.add_output(n.output(0));
      saved.by_output[n.output(0)] = std::move(meaning);
      n.Swap(&stand_in);
      ++count;
    }
  });
  return count;
}

void restore_onnx_runtime_ops(onnx::ModelProto& p, const SetAsideNodes& saved) {
  if (saved.by_output.empty()) return;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (auto& n : *g.mutable_node()) {
      auto it = n.op_type() == "Identity" && n.output_size() == 1 ? saved.by_output.find(n.output(0)) : saved.by_output.end();
      if (it == saved.by_output.end()) {
        nodes.Add()->Swap(&n);
        continue;
      }
      for (const onnx::NodeProto& m : it->second) *nodes.Add() = m;
    }
    g.mutable_node()->Swap(&nodes);
  });
}

int flatten_softmax_axes(onnx::ModelProto& p) {
  static const std::set<std::string> kOps = {"Softmax", "LogSoftmax", "Hardmax"};
  // What shape inference knows of each name, and every name in use (for fresh ones).
  std::unordered_map<std::string, const onnx::TypeProto*> types;
  std::unordered_set<std::string> used;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
      for (const auto& vi : *list) {
        used.insert(vi.name());
        if (vi.has_type() && vi.type().has_tensor_type()) types.emplace(vi.name(), &vi.type());
      }
    for (const auto& t : g.initializer()) used.insert(t.name());
    for (const auto& n : g.node()) {
      used.insert(n.name());
      for (const auto& o : n.output()) used.insert(o);
    }
  });
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    return name;
  };
  // Initializers are typed by their tensors.
  std::unordered_map<std::string, int> initializer_ranks;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (const auto& t : g.initializer()) initializer_ranks[t.name()] = t.dims_size();
  });
  int count = 0;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    std::vector<onnx::ValueInfoProto> infos;
    bool changed = false;
    for (auto& n : *g.mutable_node()) {
      if (!proto::default_domain(n.domain()) || !kOps.count(n.op_type()) || n.input_size() < 1 || n.output_size() < 1) {
        nodes.Add()->Swap(&n);
        continue;
      }
      int64_t axis = 1;
      for (const auto& a : n.attribute())
        if (a.name() == "axis") axis = a.i();
      const std::string& x = n.input(0);
      int rank = -1;
      auto t = types.find(x);
      if (t != types.end() && t->second->tensor_type().has_shape()) rank = t->second->tensor_type().shape().dim_size();
      if (initializer_ranks.count(x)) rank = initializer_ranks[x];
      if (rank > 0 && (axis == -1 || axis == rank - 1)) {  // the same op at every opset
        nodes.Add()->Swap(&n);
        continue;
      }
      const std::string y = n.output(0);
      const std::string base = n.name().empty() ? y : n.name();
      const std::string shape = fresh(y + "_input_shape"), flat = fresh(y + "_flat_input"),
                        flat_y = fresh(y + "_flat");
      auto* s = nodes.Add();
      s->set_op_type("Shape");
      s->set_name(fresh(base + "_input_shape"));
      s->add_input(x);
      s->add_output(shape);
      auto* f = nodes.Add();
      f->set_op_type("Flatten");
      f->set_name(fresh(base + "_flatten"));
      f->add_input(x);
      f->add_output(flat);
      auto* fa = f->add_attribute();
      fa->set_name("axis");
      fa->set_type(onnx::AttributeProto::INT);
      fa->set_i(axis);
      auto* op = nodes.Add();
      op->Swap(&n);
      op->set_input(0, flat);
      op->set_output(0, flat_y);
      bool has_axis = false;
      for (auto& a : *op->mutable_attribute())
        if (a.name() == "axis") {
          a.set_i(1);
          has_axis = true;
        }
      if (!has_axis) {
        auto* a = op->add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(1);
      }
      auto* r = nodes.Add();
      r->set_op_type("Reshape");
      r->set_name(fresh(base + "_unflatten"));
      r->add_input(flat_y);
      r->add_input(shape);
      r->add_output(y);
      // Rank 2 for the converter, which reads ranks from value_info (dims unknown).
      if (t != types.end())
        for (const std::string& name : {flat, flat_y}) {
          onnx::ValueInfoProto vi;
          vi.set_name(name);
          vi.mutable_type()->mutable_tensor_type()->set_elem_type(t->second->tensor_type().elem_type());
          auto* dims = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
          dims->add_dim();
          dims->add_dim();
          infos.push_back(std::move(vi));
        }
      changed = true;
      ++count;
    }
    g.mutable_node()->Swap(&nodes);
    if (changed)
      for (auto& vi : infos) g.add_value_info()->Swap(&vi);
  });
  return count;
}

namespace {

// Renames, in g and the subgraphs below it, the reads of the names in `renamed` (a subgraph that
// defines one of them again reads its own: those are dropped from the map below it).
void rename_reads(onnx::GraphProto& g, std::map<std::string, std::string> renamed) {
  auto defines = [&](const std::string& name) { renamed.erase(name); };
  for (const auto& vi : g.input()) defines(vi.name());
  for (const auto& t : g.initializer()) defines(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defines(o);
  if (renamed.empty()) return;
  auto follow = [&](std::string* name) {
    if (auto it = renamed.find(*name); it != renamed.end()) *name = it->second;
  };
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input()) follow(&in);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_reads(*a.mutable_g(), renamed);
      for (auto& sub : *a.mutable_graphs()) rename_reads(sub, renamed);
    }
  }
  for (auto& vi : *g.mutable_output()) follow(vi.mutable_name());
}

// Gives the names a subgraph defines that an enclosing graph defines too (`outer`) fresh ones.
void rename_shadowing(onnx::GraphProto& g, std::set<std::string> outer, proto::NameAllocator& names,
                      std::vector<std::string>& notes) {
  std::map<std::string, std::string> renamed;
  auto define = [&](std::string* name) {
    if (name->empty()) return;
    if (outer.count(*name) && !renamed.count(*name)) {
      renamed[*name] = names.fresh(*name);
      notes.push_back("graph '" + g.name() + "' redefines '" + *name + "'");
    }
    if (auto it = renamed.find(*name); it != renamed.end()) *name = it->second;
  };
  for (auto& vi : *g.mutable_input()) define(vi.mutable_name());
  for (auto& t : *g.mutable_initializer()) define(t.mutable_name());
  for (auto& vi : *g.mutable_value_info())
    if (auto it = renamed.find(vi.name()); it != renamed.end()) vi.set_name(it->second);
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    for (auto& o : *n.mutable_output()) define(&o);
  }
  for (auto& vi : *g.mutable_output())
    if (auto it = renamed.find(vi.name()); it != renamed.end()) vi.set_name(it->second);
  // Deeper subgraphs read the renamed inner names, and see this graph's names as outer ones.
  for (const auto& vi : g.input()) outer.insert(vi.name());
  for (const auto& t : g.initializer()) outer.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) outer.insert(o);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      std::vector<onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) subs.push_back(&sub);
      for (onnx::GraphProto* sub : subs) {
        rename_reads(*sub, renamed);
        rename_shadowing(*sub, outer, names, notes);
      }
    }
}

bool is_reduce(const std::string& op) { return op.rfind("Reduce", 0) == 0; }

}  // namespace

LenientFixes mend_lenient_forms(onnx::ModelProto& p) {
  LenientFixes fixes;
  std::function<void(onnx::GraphProto&)> mend = [&](onnx::GraphProto& g) {
    auto* infos = g.mutable_value_info();
    for (int i = infos->size() - 1; i >= 0; --i)
      if (!infos->Get(i).has_type()) {
        infos->DeleteSubrange(i, 1);
        ++fixes.untyped_value_info;
      }
    for (auto& n : *g.mutable_node()) {
      if (proto::default_domain(n.domain()) && is_reduce(n.op_type())) {
        const auto* axes = proto::find_attr(n, "axes");
        if (axes && axes->type() == onnx::AttributeProto::INTS && axes->ints_size() == 0) {
          proto::remove_attr(n, "axes");
          ++fixes.empty_reduce_axes;
        }
      }
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) mend(*a.mutable_g());
        for (auto& sub : *a.mutable_graphs()) mend(sub);
      }
    }
  };
  mend(*p.mutable_graph());
  {
    proto::NameAllocator names;
    names.collect(p.graph());
    std::set<std::string> none;
    rename_shadowing(*p.mutable_graph(), none, names, fixes.shadowing);
  }
  if (p.ir_version() < 4) {
    onnx::GraphProto& g = *p.mutable_graph();
    std::set<std::string> inputs;
    for (const auto& vi : g.input()) inputs.insert(vi.name());
    for (const auto& t : g.initializer()) {
      if (inputs.count(t.name())) continue;
      onnx::ValueInfoProto* vi = g.add_input();
      vi->set_name(t.name());
      auto* type = vi->mutable_type()->mutable_tensor_type();
      type->set_elem_type(t.data_type());
      auto* shape = type->mutable_shape();
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      ++fixes.initializers_listed;
    }
  }
  return fixes;
}

}  // namespace amp
