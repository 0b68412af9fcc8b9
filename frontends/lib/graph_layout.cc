#include "frontends/lib/graph_layout.h"

#include <graphviz/gvc.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace amp {

namespace {

// dot's messages go here rather than to stderr; the one that made a layout fail is the error's text.
std::string& dot_messages() {
  static std::string messages;
  return messages;
}

int keep_message(char* text) {
  dot_messages() += text;
  return 0;
}

GVC_t* context() {
  // One context for the process: creating it reads Graphviz's plugin configuration.
  static GVC_t* gvc = [] {
    agseterr(AGERR);
    agseterrf(keep_message);
    return gvContext();
  }();
  return gvc;
}

void set(void* object, const char* name, const std::string& value) {
  agsafeset(object, const_cast<char*>(name), const_cast<char*>(value.c_str()), const_cast<char*>(""));
}

std::string inches(double points) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", points / 72.0);
  return buf;
}

const char* shape_name(LayoutInput::Node::Shape s) {
  switch (s) {
    case LayoutInput::Node::Shape::kBox: return "box";
    case LayoutInput::Node::Shape::kEllipse: return "ellipse";
    case LayoutInput::Node::Shape::kDiamond: return "diamond";
  }
  return "box";
}

struct DotGraph {
  Agraph_t* g = nullptr;
  std::vector<Agnode_t*> nodes;
  std::vector<Agedge_t*> edges;
  std::vector<Agraph_t*> clusters;
  ~DotGraph() {
    if (!g) return;
    gvFreeLayout(context(), g);
    agclose(g);
  }
};

// Returns false when dot refused the graph.
bool run_dot(const LayoutInput& in, bool with_clusters, DotGraph& d) {
  d.g = agopen(const_cast<char*>("view"), Agdirected, nullptr);
  set(d.g, "rankdir", "TB");
  set(d.g, "nodesep", "0.25");
  set(d.g, "ranksep", "0.45");  // room for the edge labels the page writes between ranks
  set(d.g, "fontsize", "12");
  set(d.g, "fontname", "Helvetica");
  if (with_clusters) {
    for (size_t i = 0; i < in.clusters.size(); ++i) {
      const LayoutInput::Cluster& c = in.clusters[i];
      Agraph_t* parent = c.parent < 0 ? d.g : d.clusters.at(c.parent);  // parents come first
      Agraph_t* sub = agsubg(parent, const_cast<char*>(("cluster_" + std::to_string(i)).c_str()), 1);
      set(sub, "label", c.label);
      set(sub, "margin", "10");
      d.clusters.push_back(sub);
    }
  }
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const LayoutInput::Node& n = in.nodes[i];
    Agraph_t* home = with_clusters && n.cluster >= 0 ? d.clusters.at(n.cluster) : d.g;
    Agnode_t* a = agnode(home, const_cast<char*>(("n" + std::to_string(i)).c_str()), 1);
    set(a, "shape", shape_name(n.shape));
    set(a, "fixedsize", "true");
    set(a, "label", "");
    set(a, "width", inches(n.width));
    set(a, "height", inches(n.height));
    d.nodes.push_back(a);
  }
  for (const LayoutInput::Edge& e : in.edges)
    d.edges.push_back(agedge(d.g, d.nodes.at(e.from), d.nodes.at(e.to), nullptr, 1));
  return gvLayout(context(), d.g, "dot") == 0;
}

}  // namespace

Layout layout_with_dot(const LayoutInput& in) {
  dot_messages().clear();
  auto d = std::make_unique<DotGraph>();
  Layout out;
  if (!run_dot(in, true, *d)) {
    // dot 2.42 gives up on some clustered graphs ("trouble in init_rank"); the same graph without
    // its clusters still lays out.
    if (in.clusters.empty()) throw std::runtime_error("Graphviz dot failed: " + dot_messages());
    d = std::make_unique<DotGraph>();
    out.clusters_dropped = true;
    if (!run_dot(in, false, *d)) throw std::runtime_error("Graphviz dot failed: " + dot_messages());
  }
  const boxf bb = GD_bb(d->g);
  out.width = bb.UR.x - bb.LL.x;
  out.height = bb.UR.y - bb.LL.y;
  auto flip = [&](pointf p) { return LayoutPoint{p.x - bb.LL.x, bb.UR.y - p.y}; };
  for (Agnode_t* a : d->nodes) {
    const LayoutPoint c = flip(ND_coord(a));
    const double w = ND_width(a) * 72, h = ND_height(a) * 72;
    out.nodes.push_back({c.x - w / 2, c.y - h / 2, w, h});
  }
  for (Agedge_t* e : d->edges) {
    std::vector<LayoutPoint> points;
    if (ED_spl(e) && ED_spl(e)->size > 0) {
      const bezier& b = ED_spl(e)->list[0];
      for (int i = 0; i < b.size; ++i) points.push_back(flip(b.list[i]));
    }
    out.edges.push_back(std::move(points));
  }
  for (Agraph_t* c : d->clusters) {
    const boxf cb = GD_bb(c);
    out.clusters.push_back({cb.LL.x - bb.LL.x, bb.UR.y - cb.UR.y, cb.UR.x - cb.LL.x, cb.UR.y - cb.LL.y});
  }
  if (out.clusters_dropped) out.clusters.assign(in.clusters.size(), LayoutBox{});
  return out;
}

}  // namespace amp
