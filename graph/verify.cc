#include "graph/verify.h"

#include <onnx/defs/schema.h>

#include <map>
#include <unordered_set>

#include "graph/error.h"

namespace amp {

std::string onnx_type_string(const ValueType& t) {
  auto inner = [&] { return t.inner ? onnx_type_string(*t.inner) : std::string("?"); };
  switch (t.kind) {
    case ValueType::Kind::kTensor: return "tensor(" + std::string(dtype_name(t.elem)) + ")";
    case ValueType::Kind::kSparseTensor: return "sparse_tensor(" + std::string(dtype_name(t.elem)) + ")";
    case ValueType::Kind::kSequence: return "seq(" + inner() + ")";
    case ValueType::Kind::kMap: return "map(" + std::string(dtype_name(t.key)) + "," + inner() + ")";
    case ValueType::Kind::kOptional: return "optional(" + inner() + ")";
    case ValueType::Kind::kUnknown: break;
  }
  return "?";
}

namespace {

bool encloses(const Graph* outer, const Graph* g) {
  for (; g; g = g->parent())
    if (g == outer) return true;
  return false;
}

int64_t opset_for(const std::vector<OpsetImport>& opsets, const std::string& domain) {
  for (const auto& o : opsets)
    if (o.domain == domain || (domain.empty() && o.domain == "ai.onnx")) return o.version;
  return 0;
}

// Known element types bound to each type variable of the node's schema must agree and be allowed.
void check_types(const Node* n, const onnx::OpSchema& schema, const std::string& where, std::vector<std::string>& out,
                 bool bfloat16_where_float16) {
  std::map<std::string, std::pair<std::string, std::string>> bound;  // type var -> (type string, value name)
  std::map<std::string, std::unordered_set<std::string>> allowed;
  for (const auto& c : schema.typeConstraintParams()) {
    auto& a = allowed[c.type_param_str];
    a.insert(c.allowed_type_strs.begin(), c.allowed_type_strs.end());
    if (bfloat16_where_float16 && a.count("tensor(float16)")) a.insert("tensor(bfloat16)");
  }
  auto bind = [&](const std::vector<onnx::OpSchema::FormalParameter>& formals, const std::vector<Value*>& actual,
                  const char* side) {
    for (size_t i = 0; i < actual.size(); ++i) {
      const Value* v = actual[i];
      if (!v || !v->type().known() || formals.empty()) continue;
      if (v->type().is_tensor() && v->dtype() == DType::kUndefined) continue;
      size_t f = std::min(i, formals.size() - 1);
      const auto& formal = formals[f];
      if (i >= formals.size() && formal.GetOption() != onnx::OpSchema::Variadic) continue;
      const std::string actual_type = onnx_type_string(v->type());
      const std::string& var = formal.GetTypeStr();
      auto a = allowed.find(var);
      if (a == allowed.end()) {  // a fixed type such as "tensor(int64)"
        if (var != actual_type)
          out.push_back(where + ": " + side + " '" + v->name() + "' is " + actual_type + ", the schema wants " + var);
        continue;
      }
      if (!a->second.count(actual_type))
        out.push_back(where + ": " + side + " '" + v->name() + "' is " + actual_type + ", which " + var + " does not allow");
      if (i >= formals.size() - 1 && formal.GetOption() == onnx::OpSchema::Variadic && !formal.GetIsHomogeneous())
        continue;
      auto [it, fresh] = bound.emplace(var, std::make_pair(actual_type, v->name()));
      if (!fresh && it->second.first != actual_type)
        out.push_back(where + ": " + side + " '" + v->name() + "' is " + actual_type + " but '" + it->second.second +
                      "' is " + it->second.first + " (both " + var + ")");
    }
  };
  bind(schema.inputs(), n->inputs(), "input");
  bind(schema.outputs(), n->outputs(), "output");
}

void verify_graph(const Graph& g, const std::vector<OpsetImport>& opsets, std::vector<std::string>& out,
                  bool bfloat16_where_float16) {
  const std::string gname = "graph '" + g.name + "'";
  std::unordered_set<const Node*> seen;
  auto check_read = [&](const Value* v, const std::string& who) {
    if (!encloses(v->graph(), &g) || g.lookup(v->name()) != v) {
      out.push_back(who + ": reads '" + v->name() + "', which is not visible in " + gname);
      return;
    }
    if (v->producer()) {
      if (v->producer()->graph() == &g && !seen.count(v->producer()))
        out.push_back(who + ": reads '" + v->name() + "' before it is produced (cycle or unsorted nodes)");
    } else if (!v->is_input() && !v->has_initializer() && !v->sparse_initializer()) {
      out.push_back(who + ": reads '" + v->name() + "', which nothing produces (dangling)");
    }
  };
  for (const Value* v : g.inputs())
    if (g.parent() && g.parent()->lookup(v->name())) out.push_back(gname + ": input '" + v->name() + "' shadows an outer value");
  for (Node* n : g.nodes()) {
    const std::string who = gname + ", node " + n->label();
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->inputs()[i];
      if (!v) continue;
      check_read(v, who);
      bool listed = false;
      for (const Use& u : v->uses()) listed |= (u.node == n && u.index == i);
      if (!listed) out.push_back(who + ": use list of '" + v->name() + "' misses input " + std::to_string(i));
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* v = n->outputs()[i];
      if (!v) continue;
      if (v->producer() != n || v->output_index() != i || v->graph() != &g)
        out.push_back(who + ": output '" + v->name() + "' does not point back at its producer");
      if (g.parent() && g.parent()->lookup(v->name()))
        out.push_back(who + ": output '" + v->name() + "' shadows a value of an enclosing graph");
      if (v->is_input() || v->has_initializer())
        out.push_back(who + ": output '" + v->name() + "' is also a graph input or initializer");
    }
    if (n->op_type() == "Cast" && n->output(0) && n->output(0)->dtype() != DType::kUndefined &&
        n->output(0)->dtype() != static_cast<DType>(n->attr_int("to", 0)))
      out.push_back(who + ": output is " + std::string(dtype_name(n->output(0)->dtype())) + " but 'to' says " +
                    std::string(dtype_name(static_cast<DType>(n->attr_int("to", 0)))));
    const int64_t version = opset_for(opsets, n->domain());
    if (version > 0)
      if (const auto* schema = onnx::OpSchemaRegistry::Schema(n->op_type(), static_cast<int>(version), n->domain()))
        check_types(n, *schema, who, out, bfloat16_where_float16);
    for (Graph* sub : n->subgraphs()) {
      if (sub->parent() != &g) out.push_back(who + ": subgraph '" + sub->name + "' has the wrong parent");
      verify_graph(*sub, opsets, out, bfloat16_where_float16);
    }
    seen.insert(n);
  }
  for (const Value* v : g.outputs()) check_read(v, gname + ", output");
}

}  // namespace

std::vector<std::string> verify(const Graph& g, const std::vector<OpsetImport>& opsets, bool bfloat16_where_float16) {
  std::vector<std::string> out;
  verify_graph(g, opsets, out, bfloat16_where_float16);
  return out;
}

std::vector<std::string> verify(const Model& m) {
  const std::string* key = m.metadata(kBfloat16WhereFloat16Key);
  const bool beyond = key && *key == "1";
  std::vector<std::string> out = verify(*m.graph, m.opset_imports, beyond);
  for (const auto& t : m.training_info) {
    if (t.initialization) verify_graph(*t.initialization, m.opset_imports, out, beyond);
    if (t.algorithm) verify_graph(*t.algorithm, m.opset_imports, out, beyond);
  }
  return out;
}

void verify_or_throw(const Model& m) {
  auto problems = verify(m);
  if (problems.empty()) return;
  std::string msg = (m.path.empty() ? std::string("model") : m.path) + ": graph verification failed: " + problems[0];
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more)";
  throw Error(msg);
}

}  // namespace amp
