// A Model's main graph as a backend executes it, independent of the device: values numbered,
// nodes in run (topological) order with their inputs and outputs as value numbers, initializers
// shared with the model's buffers, and the error prefix of every node. Also the two graph walks
// every backend needs: which steps a set of targets depends on, and which values must be known
// when a run is planned because output shapes depend on them (Reshape's shape, Slice's starts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/model.h"

namespace amp {

struct Program {
  struct Val {
    std::string name;
    DType dtype = DType::kUndefined;  // declared; kUndefined when the graph does not say
    std::optional<Shape> shape;       // declared
    int producer = -1;                // step, or -1 for graph inputs and initializers
    int initializer = -1;             // index into initializers, or -1
    bool graph_input = false;
  };
  struct Step {
    std::string op, domain;
    int64_t opset = 0;
    // Value numbers, -1 for an absent optional input or output. A node with subgraphs (If, Loop,
    // Scan) has the values they read from around them after its own inputs (enclosing_reads).
    std::vector<int> in, out;
    std::string where;         // "<file>: node <label>", the prefix of this node's errors
  };

  std::string path;
  std::vector<Val> values;
  std::vector<Step> steps;
  std::vector<int> inputs, outputs;
  std::vector<Tensor> initializers;

  // Value number of a name; -1 when the graph has no such value.
  int find(const std::string& name) const;

 private:
  friend Program make_program(const Model&, std::vector<const Node*>*);
  std::unordered_map<std::string, int> index_;
};

// Numbers the main graph and orders its nodes topologically. `nodes` (optional) receives the nodes
// in step order, valid while the model lives, for creating kernels. InputError on a cycle.
Program make_program(const Model& m, std::vector<const Node*>* nodes = nullptr);

// Kahn's algorithm over items 0..n-1, deps[i] the items i needs first: among the ready items the
// one with the smallest key goes next, so the order stays close to the keys' (a graph's order,
// which memory plans were tuned on). Shorter than n when the dependencies have a cycle.
std::vector<size_t> ordered_topological_sort(const std::vector<std::vector<size_t>>& deps, const std::vector<size_t>& key);

// Steps the target values depend on, in run order.
std::vector<int> steps_needed(const Program& p, const std::vector<int>& targets);

// Values whose contents decide shapes, so a plan must know them: the shape inputs of every step
// (shape_inputs[s]) and, transitively, the inputs of their producers, except inputs of steps that
// read only dims (reads_data[s] false, e.g. Shape).
std::vector<bool> shape_values(const Program& p, const std::vector<std::vector<int>>& shape_inputs,
                               const std::vector<bool>& reads_data);

// ---- what every backend's run() does with its arguments

// "float16[2,3]": a tensor's type in messages.
std::string type_str(DType t, const std::vector<int64_t>& dims);

// Per value, the tensor fed for it (null where nothing is). InputError naming the file and the
// input for a name that is no graph input, a type or static dim that disagrees with the graph,
// or an element type without a fixed size (strings), which `backend` ("cpu", "cuda") cannot run.
std::vector<const Tensor*> bind_feeds(const Program& p, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                      const char* backend);

// Value numbers of the fetched names; InputError for a name the graph has no value for.
std::vector<int> fetch_values(const Program& p, const std::vector<std::string>& fetches);

// What a plan made for these feeds and fetches is valid for: the fetches, every fed value's type
// and dims, and the contents of fed values that decide shapes (shape_value, per value).
std::string plan_signature(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches,
                           const std::vector<bool>& shape_value);

// The 64-bit mixer (splitmix64's finaliser after its increment) that derives per-run seeds.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace amp
