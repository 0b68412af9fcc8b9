#include "frontends/lib/html_page.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "frontends/lib/graph_layout.h"
#include "frontends/lib/model_summary.h"
#include "frontends/lib/rewrite_report.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "passes/amp/decision_record.h"
#include "passes/amp/tensor_core_alignment.h"
#include "passes/training/training_info.h"

namespace amp {

// The viewer's script and style, embedded at build time from html_page_viewer.{js,css}.
extern const char* const kHtmlPageViewerJs;
extern const char* const kHtmlPageViewerCss;

namespace {

using nlohmann::ordered_json;

// "fp16" for a node computing in float16, ... "" for one that moves no floating data.
std::string short_precision(const std::string& dtype) {
  static const std::map<std::string, std::string> names = {
      {"float", "fp32"}, {"float16", "fp16"}, {"bfloat16", "bf16"}, {"double", "fp64"}};
  auto it = names.find(dtype);
  return it == names.end() ? "" : it->second;
}

std::string scope_of_name(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos || slash == 0 ? "" : name.substr(0, slash);
}

std::vector<std::string> split_scope(const std::string& scope) {
  std::vector<std::string> parts;
  for (size_t start = 1; start <= scope.size();) {
    const size_t end = std::min(scope.find('/', start), scope.size());
    parts.push_back(scope.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string attribute_text(const Attribute& a) {
  auto join = [](const auto& xs, auto fmt) {
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i == 16) return s + ", ... " + std::to_string(xs.size()) + " in all]";
      s += (i ? ", " : "") + fmt(xs[i]);
    }
    return s + "]";
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  auto tensor = [](const Tensor& t) {
    std::string s = std::string(dtype_name(t.dtype)) + "[";
    for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? "," : "") + std::to_string(t.dims[i]);
    return "tensor " + s + "]";
  };
  switch (a.kind) {
    case AttrKind::kFloat: return num(a.f);
    case AttrKind::kInt: return std::to_string(a.i);
    case AttrKind::kString: return "\"" + a.s + "\"";
    case AttrKind::kTensor: return tensor(a.t);
    case AttrKind::kFloats: return join(a.floats, num);
    case AttrKind::kInts: return join(a.ints, [](int64_t v) { return std::to_string(v); });
    case AttrKind::kStrings: return join(a.strings, [](const std::string& v) { return "\"" + v + "\""; });
    case AttrKind::kTensors: return join(a.tensors, tensor);
    case AttrKind::kGraph: return "graph (" + std::to_string(a.g ? a.g->num_nodes() : 0) + " nodes)";
    case AttrKind::kGraphs: return std::to_string(a.graphs.size()) + " graphs";
    case AttrKind::kTypeProto: return a.tp.str();
    default: return attr_kind_name(a.kind);
  }
}

// Rough text widths of the viewer's fonts (DejaVu Sans, the fonts-dejavu-core package): dot needs
// each box's size before anything is drawn.
double text_width(const std::string& s, double font_px) { return 0.62 * font_px * static_cast<double>(s.size()); }

class PageBuilder {
 public:
  // A saved training step is drawn as one graph, its inference and algorithm graphs read together
  // by value name (as ONNX runs them), without joining them into a copy: a GPT-2's step carries
  // 2 GB of weights and moments, which step_from_training_info() copies twice (6.5 s here).
  PageBuilder(const Model& m, const HtmlPageOptions& o) : m_(m), options_(o) {
    graphs_.push_back(m.graph.get());
    if (!m.training_info.empty() && m.training_info[0].algorithm) graphs_.push_back(m.training_info[0].algorithm.get());
    if (const std::string* meta = m.metadata(kTrainingMetadataKey)) {
      try {
        step_names_ = nlohmann::json::parse(*meta);
      } catch (const std::exception& e) {
        throw InputError(m.path + ": metadata '" + std::string(kTrainingMetadataKey) + "' is not valid JSON: " + e.what());
      }
    }
  }

  ordered_json build() {
    index_values();
    assign_scopes();
    build_scope_tree();
    ordered_json page;
    page["title"] = options_.title;
    page["training"] = training();
    page["summary"] = summary();
    page["nodes"] = nodes_json();
    page["lines"] = lines_;  // the reasons' lines, which nodes_json() numbers
    page["values"] = values_json();
    page["scopes"] = scopes_json();
    page["views"] = views_json();
    return page;
  }

 private:
  struct Scope {
    std::string path;  // "/layer3/layer3.0"; "" for the root
    int parent = -1;
    std::vector<int> children;
    std::vector<int> nodes;  // nodes drawn directly in it (those of dissolved sub-scopes included)
    int total = 0;           // nodes in its subtree
    bool dissolved = false;  // too small for a box of its own: drawn in its parent
    int view = -1;           // its own view, when it has one
  };

  // One box in a view: a node, a collapsed scope, or a stub for a value entering or leaving.
  enum class ItemKind { kNode = 0, kScope = 1, kInput = 2, kOutput = 3 };
  struct Item {
    ItemKind kind;
    int ref;
  };

  bool training() const { return graphs_.size() > 1; }

  // Values by name across the graphs: type, kind, producer and consumers.
  struct Val {
    std::string name, type;
    const char* kind = "";  // "initializer", "input", "output" or ""
    int producer = -1;
    std::vector<int> consumers;
  };

  int value_id(const Value* v) {
    auto [it, added] = value_by_name_.emplace(v->name(), static_cast<int>(vals_.size()));
    if (added) vals_.push_back(Val{v->name(), v->type().str(), "", -1, {}});
    Val& val = vals_[it->second];
    if (v->type().known() && (val.type.empty() || !v->graph() || v->producer() || v->has_initializer()))
      val.type = v->type().str();
    return it->second;
  }

  void index_values() {
    for (const Graph* g : graphs_)
      for (const Node* n : g->nodes()) {
        node_index_[n] = static_cast<int>(nodes_.size());
        nodes_.push_back(n);
      }
    for (const Graph* g : graphs_) {
      for (const Value* v : g->inputs()) vals_[value_id(v)].kind = v->has_initializer() ? "initializer" : "input";
      for (const Value* v : g->initializers()) vals_[value_id(v)].kind = "initializer";
    }
    node_inputs_.resize(nodes_.size());
    node_outputs_.resize(nodes_.size());
    for (size_t k = 0; k < nodes_.size(); ++k) {
      for (const Value* v : nodes_[k]->outputs()) {
        node_outputs_[k].push_back(v ? value_id(v) : -1);
        if (v) vals_[node_outputs_[k].back()].producer = static_cast<int>(k);
      }
    }
    for (size_t k = 0; k < nodes_.size(); ++k)
      for (const Value* v : nodes_[k]->inputs()) {
        node_inputs_[k].push_back(v ? value_id(v) : -1);
        if (v) vals_[node_inputs_[k].back()].consumers.push_back(static_cast<int>(k));
      }
    // The step's outputs are those of its algorithm graph (the updated state, the loss); an
    // inference graph's, its own.
    for (const Value* v : graphs_.back()->outputs()) vals_[value_id(v)].kind = "output";
    if (training())
      for (const Value* v : graphs_.front()->outputs()) {
        Val& val = vals_[value_id(v)];
        if (val.consumers.empty()) val.kind = "output";
      }
  }

  // A node's scope: its exporter name's, or for the nodes the rewrite and the training step made
  // (Casts of weights, gradients, optimizer updates: named after values, or not at all) that of
  // the module a value they touch belongs to, else that of their inputs' producers, else that of
  // their first consumer.
  void assign_scopes() {
    std::set<std::string> known;
    for (const Node* n : nodes_) {
      const std::string s = scope_of_name(n->name);
      for (std::string p = s; !p.empty(); p = scope_of_name(p)) known.insert(p);
    }
    // Torch's scope "/layer1/layer1.0/conv1" is module "layer1.0.conv1", whose weight is
    // "layer1.0.conv1.weight"; "/blocks.1/mlp" is "blocks.1.mlp".
    for (const std::string& s : known) {
      std::string module;
      for (const std::string& part : split_scope(s))
        module = module.empty() || part.rfind(module + ".", 0) == 0 ? part : module + "." + part;
      module_scope_.emplace(module, s);
    }
    scope_path_.assign(nodes_.size(), "");
    std::vector<bool> settled(nodes_.size(), false);
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const Node* n = nodes_[k];
      if (n->name.find('/') != std::string::npos) {
        scope_path_[k] = scope_of_name(n->name);
        settled[k] = true;
        continue;
      }
      std::vector<int> touched = node_outputs_[k];
      touched.insert(touched.end(), node_inputs_[k].begin(), node_inputs_[k].end());
      for (int v : touched) {
        if (v < 0) continue;
        const std::string s = scope_of_value_name(vals_[v].name);
        if (!s.empty()) {
          scope_path_[k] = s;
          settled[k] = true;
          break;
        }
      }
      if (settled[k]) continue;
      for (auto it = node_inputs_[k].rbegin(); it != node_inputs_[k].rend(); ++it) {
        if (*it < 0 || vals_[*it].producer < 0) continue;
        const int p = vals_[*it].producer;
        if (!settled[p]) continue;
        scope_path_[k] = scope_path_[p];
        settled[k] = true;
        break;
      }
    }
    for (size_t k = nodes_.size(); k-- > 0;) {
      if (settled[k]) continue;
      for (int v : node_outputs_[k]) {
        if (v < 0 || vals_[v].consumers.empty()) continue;
        scope_path_[k] = scope_path_[vals_[v].consumers.front()];
        break;
      }
    }
  }

  std::string scope_of_value_name(const std::string& name) const {
    if (name.find('/') != std::string::npos) return scope_of_name(name);
    for (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0; dot = name.rfind('.', dot - 1)) {
      auto it = module_scope_.find(name.substr(0, dot));
      if (it != module_scope_.end()) return it->second;
    }
    return "";
  }

  int scope_id(const std::string& path) {
    auto it = scope_by_path_.find(path);
    if (it != scope_by_path_.end()) return it->second;
    const int parent = path.empty() ? -1 : scope_id(scope_of_name(path));
    const int id = static_cast<int>(scopes_.size());
    scopes_.push_back(Scope{path, parent, {}, {}, 0, false, -1});
    scope_by_path_[path] = id;
    if (parent >= 0) scopes_[parent].children.push_back(id);
    return id;
  }

  void build_scope_tree() {
    scope_id("");
    node_scope_.resize(nodes_.size());
    for (size_t k = 0; k < nodes_.size(); ++k) {
      node_scope_[k] = scope_id(scope_path_[k]);
      for (int s = node_scope_[k]; s >= 0; s = scopes_[s].parent) ++scopes_[s].total;
    }
    // A scope of one to three nodes (a Linear's MatMul and Add, a Conv and its weight's Cast)
    // reads better drawn in its parent than as a box.
    for (size_t s = 1; s < scopes_.size(); ++s) scopes_[s].dissolved = scopes_[s].total <= 3;
    for (size_t k = 0; k < nodes_.size(); ++k) scopes_[drawn_scope(node_scope_[k])].nodes.push_back(static_cast<int>(k));
    make_view(0);
  }

  int drawn_scope(int s) const {
    while (scopes_[s].dissolved) s = scopes_[s].parent;
    return s;
  }

  std::vector<int> kept_children(int s) const {
    std::vector<int> out;
    for (int c : scopes_[s].children) {
      if (scopes_[c].dissolved) {
        const std::vector<int> deeper = kept_children(c);
        out.insert(out.end(), deeper.begin(), deeper.end());
      } else {
        out.push_back(c);
      }
    }
    return out;
  }

  // The view of scope s: sub-scopes expanded a level at a time while the view stays under
  // kNodesPerView items; the ones still closed get views of their own.
  void make_view(int s) {
    const int view = static_cast<int>(views_.size());
    views_.push_back({s, {}});
    scopes_[s].view = view;
    std::vector<int> expanded = {s};
    std::vector<int> frontier = kept_children(s);
    int items = static_cast<int>(scopes_[s].nodes.size() + frontier.size());
    while (!frontier.empty()) {
      int grown = items - static_cast<int>(frontier.size());
      std::vector<int> next;
      for (int c : frontier) {
        const std::vector<int> kids = kept_children(c);
        grown += static_cast<int>(scopes_[c].nodes.size() + kids.size());
        next.insert(next.end(), kids.begin(), kids.end());
      }
      if (grown > kNodesPerView) break;
      expanded.insert(expanded.end(), frontier.begin(), frontier.end());
      items = grown;
      frontier = std::move(next);
    }
    views_[view].expanded = expanded;
    for (int c : frontier) make_view(c);
  }

  int line_id(const std::string& line) {
    auto it = line_index_.find(line);
    if (it != line_index_.end()) return it->second;
    const int id = static_cast<int>(lines_.size());
    lines_.push_back(line);
    line_index_.emplace(line, id);
    return id;
  }

  int home_view(int k) const {
    for (int s = drawn_scope(node_scope_[k]);; s = scopes_[s].parent)
      if (scopes_[s].view >= 0) return scopes_[s].view;
  }

  ordered_json nodes_json() {
    const AmpDecisions recorded = recorded_decisions(graphs_);
    has_records_ = !recorded.nodes.empty();
    ordered_json out = ordered_json::array();
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const Node* n = nodes_[k];
      ordered_json j;
      j["name"] = n->name;
      j["ref"] = node_ref(n);
      j["op"] = n->qualified_op_type();
      j["p"] = short_precision(node_precision(*n));
      j["scope"] = node_scope_[k];
      j["view"] = home_view(static_cast<int>(k));
      j["in"] = node_inputs_[k];
      j["out"] = node_outputs_[k];
      ordered_json attrs = ordered_json::array();
      for (const Attribute& a : n->attributes()) attrs.push_back({a.name, attribute_text(a)});
      if (!attrs.empty()) j["attrs"] = attrs;
      if (has_records_) {
        ordered_json chain = ordered_json::array();
        for (const std::string& line : explain_recorded(recorded, *n)) chain.push_back(line_id(line));
        j["why"] = chain;
        if (auto r = read_decision_record(*n)) {
          j["rule"] = r->rule;
          ordered_json fields = ordered_json::array();
          for (const auto& [name, value] : r->fields) fields.push_back({name, value});
          if (!fields.empty()) j["fields"] = fields;
        }
      }
      out.push_back(std::move(j));
    }
    decisions_ = recorded.nodes.size();
    misaligned_ = find_misaligned_products(recorded);
    return out;
  }

  ordered_json values_json() const {
    ordered_json out = ordered_json::array();
    for (const Val& v : vals_) {
      ordered_json j = {v.name, v.type};
      if (*v.kind) j.push_back(v.kind);
      out.push_back(std::move(j));
    }
    return out;
  }

  ordered_json scopes_json() const {
    ordered_json out = ordered_json::array();
    std::vector<std::map<std::string, int>> precisions(scopes_.size());
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const std::string p = short_precision(node_precision(*nodes_[k]));
      for (int s = node_scope_[k]; s >= 0; s = scopes_[s].parent) ++precisions[s][p.empty() ? "-" : p];
    }
    for (size_t s = 0; s < scopes_.size(); ++s) {
      const Scope& sc = scopes_[s];
      ordered_json j;
      j["path"] = sc.path.empty() ? "/" : sc.path;
      j["parent"] = sc.parent;
      j["total"] = sc.total;
      j["precisions"] = precisions[s];
      // The view that shows it: its own, or the one it is drawn inside.
      int v = -1;
      for (int a = static_cast<int>(s); a >= 0 && v < 0; a = scopes_[a].parent) v = scopes_[a].view;
      j["view"] = v;
      out.push_back(std::move(j));
    }
    return out;
  }

  // Lays out every view with dot.
  ordered_json views_json() {
    ordered_json out = ordered_json::array();
    for (const View& v : views_) out.push_back(view_json(v));
    return out;
  }

  struct View {
    int scope;
    std::vector<int> expanded;  // scopes drawn open in it, its own first
  };

  ordered_json view_json(const View& view) {
    std::unordered_map<int, int> open;  // expanded scope -> cluster index (-1 for the view's own)
    LayoutInput in;
    for (size_t i = 0; i < view.expanded.size(); ++i) {
      const int s = view.expanded[i];
      if (i == 0) {
        open[s] = -1;
        continue;
      }
      int parent = drawn_scope(scopes_[s].parent);
      while (!open.count(parent)) parent = drawn_scope(scopes_[parent].parent);
      open[s] = static_cast<int>(in.clusters.size());
      in.clusters.push_back({open.at(parent), relative(scopes_[s].path, scopes_[view.scope].path)});
    }
    std::vector<Item> items;
    std::unordered_map<int, int> item_of_node;   // node -> item
    std::unordered_map<int, int> item_of_scope;  // collapsed scope -> item
    auto add_item = [&](Item it, double w, double h, LayoutInput::Node::Shape shape, int cluster) {
      items.push_back(it);
      in.nodes.push_back({w, h, shape, cluster});
      return static_cast<int>(items.size()) - 1;
    };
    for (int s : view.expanded) {
      for (int k : scopes_[s].nodes) {
        const Node* n = nodes_[k];
        const std::string label = relative(n->name.empty() ? node_ref(n) : n->name, scopes_[view.scope].path);
        const double w = std::max(text_width(n->op_type(), 12), text_width(label, 10)) + 16;
        item_of_node[k] = add_item({ItemKind::kNode, k}, std::max(w, 48.0), 34, LayoutInput::Node::Shape::kBox,
                                   open.at(s));
      }
      for (int c : kept_children(s)) {
        if (open.count(c)) continue;
        const std::string label = relative(scopes_[c].path, scopes_[view.scope].path);
        item_of_scope[c] = add_item({ItemKind::kScope, c}, std::max(text_width(label, 12) + 24, 90.0), 44,
                                    LayoutInput::Node::Shape::kBox, open.at(s));
      }
    }
    // Which item holds each node of the view's subtree.
    auto holder = [&](int k) -> int {
      auto it = item_of_node.find(k);
      if (it != item_of_node.end()) return it->second;
      for (int s = drawn_scope(node_scope_[k]); s >= 0; s = scopes_[s].parent) {
        auto sc = item_of_scope.find(s);
        if (sc != item_of_scope.end()) return sc->second;
        if (s == view.scope) break;
      }
      return -1;
    };
    std::set<std::tuple<int, int, int>> edges;  // (from item, to item, value)
    std::unordered_map<int, int> input_stub;  // value -> item
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const int to = holder(static_cast<int>(k));
      if (to < 0) continue;
      for (int value : node_inputs_[k]) {
        if (value < 0 || std::string(vals_[value].kind) == "initializer") continue;
        int from = vals_[value].producer >= 0 ? holder(vals_[value].producer) : -1;
        if (from == to) continue;
        if (from < 0) {
          auto it = input_stub.find(value);
          if (it == input_stub.end()) {
            const std::string& label = vals_[value].name;
            it = input_stub.emplace(value, add_item({ItemKind::kInput, value}, text_width(label, 10) + 20, 24,
                                                    LayoutInput::Node::Shape::kEllipse, -1)).first;
          }
          from = it->second;
        }
        edges.insert({from, to, value});
      }
    }
    // Values leaving the view: to nodes outside it, or the graph's outputs.
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const int from = holder(static_cast<int>(k));
      if (from < 0) continue;
      for (int value : node_outputs_[k]) {
        if (value < 0) continue;
        bool leaves = std::string(vals_[value].kind) == "output";
        for (int c : vals_[value].consumers) leaves = leaves || holder(c) < 0;
        if (!leaves) continue;
        const std::string& label = vals_[value].name;
        const int stub = add_item({ItemKind::kOutput, value}, text_width(label, 10) + 20, 24,
                                  LayoutInput::Node::Shape::kEllipse, -1);
        edges.insert({from, stub, value});
      }
    }
    std::vector<std::tuple<int, int, int>> edge_list(edges.begin(), edges.end());
    for (const auto& [from, to, value] : edge_list) in.edges.push_back({from, to});
    const Layout layout = layout_with_dot(in);

    auto r = [](double x) { return std::lround(x); };
    ordered_json j;
    j["scope"] = view.scope;
    j["w"] = r(layout.width);
    j["h"] = r(layout.height);
    ordered_json its = ordered_json::array();
    for (size_t i = 0; i < items.size(); ++i) {
      const LayoutBox& b = layout.nodes[i];
      its.push_back({static_cast<int>(items[i].kind), items[i].ref, r(b.x), r(b.y), r(b.width), r(b.height)});
    }
    j["items"] = its;
    ordered_json es = ordered_json::array();
    for (size_t e = 0; e < edge_list.size(); ++e) {
      ordered_json pts = ordered_json::array();
      for (const LayoutPoint& p : layout.edges[e]) {
        pts.push_back(r(p.x));
        pts.push_back(r(p.y));
      }
      es.push_back({std::get<0>(edge_list[e]), std::get<1>(edge_list[e]), std::get<2>(edge_list[e]), pts});
    }
    j["edges"] = es;
    ordered_json cs = ordered_json::array();
    for (size_t c = 0; c < in.clusters.size(); ++c) {
      const LayoutBox& b = layout.clusters[c];
      cs.push_back({view.expanded[c + 1], r(b.x), r(b.y), r(b.width), r(b.height)});
    }
    if (!layout.clusters_dropped) j["clusters"] = cs;
    return j;
  }

  // "/blocks.0/attn/MatMul_1" seen from "/blocks.0": "attn/MatMul_1".
  static std::string relative(const std::string& name, const std::string& scope) {
    if (!scope.empty() && name.rfind(scope + "/", 0) == 0) return name.substr(scope.size() + 1);
    return name;
  }

  ordered_json summary() {
    ordered_json s = summarize(m_);
    ordered_json out;
    out["file"] = s["file"];
    out["producer"] = s["producer"];
    out["opsets"] = s["opsets"];
    out["nodes"] = nodes_.size();
    std::map<std::string, int64_t> precisions, ops;
    int64_t casts = 0;
    for (const Node* n : nodes_) {
      const std::string p = short_precision(node_precision(*n));
      ++precisions[p.empty() ? "-" : p];
      ++ops[n->qualified_op_type()];
      casts += n->domain().empty() && n->op_type() == "Cast";
    }
    out["precisions"] = precisions;
    out["ops"] = ops;
    out["casts"] = casts;
    if (const std::string* settings = m_.metadata(kRewriteSettingsKey)) out["rewrite"] = *settings;
    std::map<std::string, int64_t> rules;
    for (const Node* n : nodes_)
      if (auto r = read_decision_record(*n)) ++rules[r->precision + " " + r->rule];
    out["decisions"] = rules;
    out["parameters"] = s["parameters_by_dtype"];
    out["activation_bytes"] = {{"fp32", activation_bytes(m_, /*low_precision_as_fp32=*/true)},
                               {"as_typed", activation_bytes(m_)}};
    if (const ordered_json* report = options_.rewrite_report) {
      out["rewrite_casts"] = (*report)["casts"];
      out["rewrite_activation_bytes"] = (*report)["activation_bytes"];
      out["warnings"] = (*report)["warnings"];
    }
    if (training()) {
      ordered_json t;
      t["loss"] = step_name("loss");
      t["loss_scale"] = step_name("loss_scale");
      t["all_finite"] = step_name("all_finite");
      t["loss_scale_nodes"] = nodes_reading(step_name("loss_scale"));
      t["inf_check_nodes"] = inf_check_nodes();
      out["training"] = t;
    }
    return out;
  }

  std::string step_name(const char* key) const {
    return step_names_.contains(key) && step_names_[key].is_string() ? step_names_[key].get<std::string>() : "";
  }

  // Indices of the nodes that read the named value.
  ordered_json nodes_reading(const std::string& name) const {
    ordered_json out = ordered_json::array();
    auto it = value_by_name_.find(name);
    if (name.empty() || it == value_by_name_.end()) return out;
    for (int k : vals_[it->second].consumers)
      if (out.empty() || out.back() != k) out.push_back(k);
    return out;
  }

  // The node that gives the verdict of the inf/NaN check and the nodes that act on it (the
  // updates skipped, the loss scale's update).
  ordered_json inf_check_nodes() const {
    ordered_json out = ordered_json::array();
    auto it = value_by_name_.find(step_name("all_finite"));
    if (it == value_by_name_.end()) return out;
    if (vals_[it->second].producer >= 0) out.push_back(vals_[it->second].producer);
    for (const auto& k : nodes_reading(step_name("all_finite"))) out.push_back(k);
    return out;
  }

 public:
  // Filled by build(): figures the summary takes from the nodes' pass.
  void finish_summary(ordered_json& page) const {
    page["summary"]["decided_nodes"] = decisions_;
    page["summary"]["has_records"] = has_records_;
    ordered_json tc = ordered_json::array();
    for (const MisalignedProduct& p : misaligned_) {
      std::string fixes;
      for (const MisalignedDim& d : p.dims)
        fixes += (fixes.empty() ? "" : "; ") + d.role + " " + std::to_string(d.size) + " -> pad to " +
                 std::to_string(d.padded);
      tc.push_back({p.node, fixes});
    }
    page["summary"]["tensor_core_alignment"] = tc;
  }

 private:
  const Model& m_;
  const HtmlPageOptions& options_;
  std::vector<const Graph*> graphs_;  // the inference graph, then a training step's algorithm
  nlohmann::json step_names_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, int> node_index_;
  std::vector<std::vector<int>> node_inputs_, node_outputs_;  // value ids, -1 for absent
  std::vector<Val> vals_;
  std::unordered_map<std::string, int> value_by_name_;
  std::map<std::string, std::string> module_scope_;
  std::vector<std::string> scope_path_;
  std::vector<int> node_scope_;
  std::vector<Scope> scopes_;
  std::unordered_map<std::string, int> scope_by_path_;
  std::vector<View> views_;
  std::vector<std::string> lines_;
  std::unordered_map<std::string, int> line_index_;
  bool has_records_ = false;
  size_t decisions_ = 0;
  std::vector<MisalignedProduct> misaligned_;
};

// The JSON goes inside <script type="application/json">: only "</" could end it early.
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      out += "<\\/";
      ++i;
      continue;
    }
    out += json[i];
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string html_page(const Model& m, const HtmlPageOptions& options) {
  PageBuilder builder(m, options);
  ordered_json page = builder.build();
  builder.finish_summary(page);
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
          "style-src 'unsafe-inline'; img-src data:\">\n";
  html += "<title>" + html_escape(options.title) + " - onnx-amp</title>\n<style>\n";
  html += kHtmlPageViewerCss;
  html += "</style></head>\n<body>\n<script type=\"application/json\" id=\"amp-data\">";
  html += script_safe(page.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  html += "</script>\n<script>\n";
  html += kHtmlPageViewerJs;
  html += "</script>\n</body></html>\n";
  return html;
}

void write_html_page(const std::string& path, const Model& m, const HtmlPageOptions& options) {
  const std::string text = html_page(m, options);
  AtomicFile out(path);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace amp
