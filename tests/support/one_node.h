// A model of one node whose inputs are graph inputs typed as the feeds, for comparing a backend's
// op (or kernel) with the CPU backend's: OneNode("Softmax", {{"x", x}}, {DType::kFloat}).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/model.h"

namespace amp::test {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

struct OneNode {
  Model m;
  Feeds feeds;
  std::vector<std::string> outputs;  // "out0", "out1", ...
  Node* node = nullptr;
  // An input named "" is an absent optional one.
  OneNode(const std::string& op, Feeds inputs, std::vector<DType> out_types, const std::string& domain = "") {
    m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
    Graph& g = *m.graph;
    std::vector<Value*> ins;
    for (auto& [name, t] : inputs)
      ins.push_back(name.empty() ? nullptr : g.add_input(name, ValueType::tensor(t.dtype, Shape::of(t.dims))));
    std::vector<std::string> names;
    for (size_t k = 0; k < out_types.size(); ++k) names.push_back("out" + std::to_string(k));
    node = g.add_node(op, ins, names, domain);
    for (size_t k = 0; k < out_types.size(); ++k) {
      node->output(k)->set_type(ValueType::tensor(out_types[k]));
      g.add_output(node->output(k));
    }
    for (auto& f : inputs)
      if (!f.first.empty()) feeds.push_back(std::move(f));
    outputs = names;
  }
  OneNode& attr(Attribute a) {
    node->set_attr(std::move(a));
    return *this;
  }
  std::vector<Tensor> run_cpu() const { return make_backend("cpu")->compile(m, {})->run(feeds, outputs); }
};

}  // namespace amp::test
