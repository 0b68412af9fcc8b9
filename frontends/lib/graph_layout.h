// Lays out a directed graph with Graphviz's dot, in process (libgvc, libcgraph): the caller gives
// nodes with their sizes, edges and nested clusters; it gets back where dot put each of them.
// Nothing is drawn here (html_page.cc draws), so the picture's markup is the project's own: each
// node an element with its id and text, which a page can search and click.
//
// In process rather than `dot -Tsvg`: a page lays out one graph per view (html_page.h), 68 for a
// GPT-2-small training step, and a process per graph plus writing and parsing its text would cost
// more than the layouts (the 48 views of a GPT-2-small forward take about 0.1 s here). Edge labels are not given to dot: it lays a labelled edge out with a node
// for its label in the middle, which tripled the time of a 1,200-node graph (0.73 s -> 2.72 s);
// the page writes each label at its edge's midpoint instead.
#pragma once

#include <string>
#include <vector>

namespace amp {

struct LayoutPoint {
  double x = 0, y = 0;  // points (1/72 inch), origin top left, y down
};

struct LayoutInput {
  struct Node {
    double width = 0, height = 0;  // points
    enum class Shape { kBox, kEllipse, kDiamond } shape = Shape::kBox;
    int cluster = -1;  // index into clusters, -1 for none
  };
  struct Edge {
    int from = 0, to = 0;  // node indices
  };
  struct Cluster {
    int parent = -1;     // the enclosing cluster, -1 for none
    std::string label;   // dot keeps room for it at the cluster's top (sized by its own font metrics)
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  std::vector<Cluster> clusters;
};

struct LayoutBox {
  double x = 0, y = 0, width = 0, height = 0;  // top-left corner and size, points
};

struct Layout {
  double width = 0, height = 0;
  std::vector<LayoutBox> nodes;                   // as LayoutInput::nodes
  std::vector<std::vector<LayoutPoint>> edges;    // cubic Bézier points (1 + 3k) from tail to head
  std::vector<LayoutBox> clusters;                // as LayoutInput::clusters
  bool clusters_dropped = false;                  // dot refused the clusters; laid out without them
};

// Top to bottom. Throws std::runtime_error when dot fails even without clusters.
Layout layout_with_dot(const LayoutInput& graph);

}  // namespace amp
