// One self-contained HTML page per model (amp-inspect --html, amp-rewrite --html): the graph laid
// out by Graphviz's dot (graph_layout.h), nodes coloured by precision, Casts marked, edges
// labelled with dtype and shape; pan, zoom and search by node name or op; a node's panel with its
// op, inputs and outputs, attributes, the chain of reasons behind its precision (explain_recorded(),
// what `--explain` prints) and every other field of its decision record; a summary panel
// (precisions, decisions, Casts, parameters per dtype, activation memory fp32 vs as typed, tensor-
// core alignment, a training step's loss-scale and inf-check nodes) and the scopes as a tree.
//
// A graph of thousands of nodes is drawn one scope at a time: the scopes come from the exporter's
// node names ("/layer3/layer3.0/conv1/Conv" is in /layer3/layer3.0/conv1); each view shows a
// scope with its sub-scopes drawn inside it as long as the view stays under kNodesPerView items,
// and as one box each beyond that (a click opens the box's own view). Each view is laid out once,
// when the page is written; the viewer only draws (frontends/lib/html_page_viewer.js, embedded).
// Nothing is fetched when the page is opened.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "graph/model.h"

namespace amp {

inline constexpr int kNodesPerView = 160;

struct HtmlPageOptions {
  std::string title;  // the page's heading: the model's file
  // amp-rewrite's --report JSON (casts inserted and removed, activation bytes before and after),
  // when the page is of the model it just wrote; null otherwise.
  const nlohmann::ordered_json* rewrite_report = nullptr;
};

// The page for a model (an inference graph, a rewritten one, or a saved training step, whose
// inference and algorithm graphs are drawn as one). Throws InputError for a step whose metadata
// is not valid JSON.
std::string html_page(const Model& m, const HtmlPageOptions& options);

// html_page() written atomically to `path`.
void write_html_page(const std::string& path, const Model& m, const HtmlPageOptions& options);

}  // namespace amp
