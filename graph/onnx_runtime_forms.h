// Valid models, or models ONNX Runtime runs, in forms that ONNX 1.12's own tools (checker, version
// converter) refuse or mishandle, rewritten on load into what they mean before those tools see
// them. Each function works on the proto and says what it changed; onnx_load.cc calls them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace amp {

// Puts the nodes of every graph (subgraphs included) in a stable topological order: a node moves
// only behind what it reads, reads by its subgraphs included. ONNX requires the order and its
// checker refuses graphs without it; ONNX Runtime sorts them itself, and its transformer optimizer
// writes such graphs (bert_toy_optimized.onnx). Returns the names of the graphs reordered. A read
// of a name nothing defines, or a cycle, leaves that graph as it was, for the scope check to name.
std::vector<std::string> sort_nodes_topologically(onnx::ModelProto& p);

// ONNX Runtime registers LayerNormalization and SimplifiedLayerNormalization (RMS norm) in the
// default domain from opset 1 (its contrib ops, which its optimizer writes into opset 11-16
// models). ONNX defines the same LayerNormalization, with the same inputs, outputs, attributes and
// defaults, from opset 17; SimplifiedLayerNormalization is written as the opset-17 nodes that
// compute it. Below 17 ONNX's checker and version converter know no such op (and the converter
// takes no node of another domain), so each such node whose only output is Y stands aside as
// Identity(X) -> Y, which has Y's type and shape, while they run, and what it means takes its
// place once the model is at opset 17 (restore_onnx_runtime_ops). Attributes LayerNormalization
// does not have (a misspelt "epsion" in one of ONNX Runtime's own test models, which it ignores)
// are dropped, each named in `notes`. Returns the number of nodes set aside.
struct SetAsideNodes {
  std::map<std::string, std::vector<onnx::NodeProto>> by_output;  // what a node means, by its output Y
};
int set_aside_onnx_runtime_ops(onnx::ModelProto& p, SetAsideNodes& saved, std::vector<std::string>& notes);
void restore_onnx_runtime_ops(onnx::ModelProto& p, const SetAsideNodes& saved);

// Softmax, LogSoftmax and Hardmax before opset 13 flatten their input to 2-D at `axis`; from 13 they
// work along `axis` alone. ONNX 1.12's converter needs the input's rank and dims to adapt them (it
// asserts when the rank is unknown, writes symbolic dims as -1 into a Reshape, and leaves Hardmax
// unchanged, a different op). Where the axis is not known to be the last one, each such node
// becomes Flatten(axis) -> the op on axis 1 of the 2-D tensor -> Reshape to Shape(input), which
// means the same at every opset. Call after shape inference (its ranks decide). Returns the count.
int flatten_softmax_axes(onnx::ModelProto& p);

// Slips of other exporters that ONNX Runtime lets pass and ONNX's checker does not, mended before
// the checker runs: a value_info entry with no type (it says nothing about its value; removed);
// below IR version 4, an initializer missing from the graph inputs, where that IR lists every
// initializer (it is added as an input of the initializer's type and shape); a Reduce op's `axes`
// attribute with no values (an empty repeated field is no field to protobuf: ONNX Runtime reads
// it as absent, all axes, and so does the import: removed); and a subgraph that defines a name
// its enclosing graphs already define (ONNX wants one definition per name across nested graphs;
// ONNX Runtime reads the inner one inside the subgraph: the inner definition takes a fresh name,
// and the subgraph's reads and outputs follow it). Returns the counts.
struct LenientFixes {
  int untyped_value_info = 0;
  int initializers_listed = 0;
  int empty_reduce_axes = 0;
  std::vector<std::string> shadowing;  // "graph 'body' redefines 'x'"
};
LenientFixes mend_lenient_forms(onnx::ModelProto& p);

}  // namespace amp
