#include "graph/onnx_function_inlining.h"

#include <google/protobuf/unknown_field_set.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "graph/onnx_proto_edit.h"

namespace amp {
namespace {

using onnx::AttributeProto;
using onnx::FunctionProto;
using onnx::GraphProto;
using onnx::NodeProto;

std::string normalized(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

// FunctionProto.attribute_proto (field 11, IR 9): attributes with default values. ONNX 1.12's
// protobuf does not know the field and keeps it among the unknown fields.
std::map<std::string, AttributeProto> attribute_defaults(const FunctionProto& f) {
  std::map<std::string, AttributeProto> out;
  const google::protobuf::UnknownFieldSet& unknown = f.GetReflection()->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& field = unknown.field(i);
    if (field.number() != 11 || field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    AttributeProto a;
    if (a.ParseFromString(field.length_delimited()) && !a.name().empty()) out[a.name()] = a;
  }
  return out;
}

bool has_subgraph(const NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.has_g() || a.graphs_size() > 0) return true;
  return false;
}

class Inliner {
 public:
  Inliner(onnx::ModelProto& p, std::string path) : p_(p), path_(std::move(path)) {
    for (const auto& f : p.functions()) functions_[{normalized(f.domain()), f.name()}] = &f;
    for (const auto& o : p.opset_import()) model_opsets_[normalized(o.domain())] = o.version();
    names_.collect(p.graph());
  }

  int run() {
    if (functions_.empty()) return 0;
    inline_graph(*p_.mutable_graph());
    for (auto& t : *p_.mutable_training_info()) {
      if (t.has_initialization()) inline_graph(*t.mutable_initialization());
      if (t.has_algorithm()) inline_graph(*t.mutable_algorithm());
    }
    if (count_ == 0) return 0;
    // Domains the bodies use that the model did not import.
    for (const auto& [domain, version] : added_opsets_) {
      auto* o = p_.add_opset_import();
      o->set_domain(domain);
      o->set_version(version);
    }
    // The inlined functions go; one nothing called stays.
    auto* list = p_.mutable_functions();
    for (int i = list->size() - 1; i >= 0; --i)
      if (inlined_.count({normalized(list->Get(i).domain()), list->Get(i).name()})) list->DeleteSubrange(i, 1);
    return count_;
  }

 private:
  std::string fresh(const std::string& base) { return names_.fresh(base); }

  const FunctionProto* function_of(const NodeProto& n) const {
    auto it = functions_.find({normalized(n.domain()), n.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  void inline_graph(GraphProto& g) {
    for (auto& n : *g.mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) inline_graph(*a.mutable_g());
        for (auto& sub : *a.mutable_graphs()) inline_graph(sub);
      }
    bool any = false;
    for (const auto& n : g.node()) any = any || function_of(n) != nullptr;
    if (!any) return;
    std::vector<NodeProto> nodes;
    for (const auto& n : g.node()) expand(n, nodes, 0);
    g.clear_node();
    for (auto& n : nodes) *g.add_node() = std::move(n);
  }

  // Appends n, or the body of the function it calls (calls inside expanded in turn).
  void expand(const NodeProto& n, std::vector<NodeProto>& out, int depth) {
    const FunctionProto* f = function_of(n);
    if (!f) return out.push_back(n);
    const std::string where = path_ + ": " + proto::node_label(n) + ", function '" + f->name() + "'";
    if (depth > 64) throw InputError(where + ": calls nest deeper than 64 (a recursive function?)");
    for (const auto& o : f->opset_import()) {
      const std::string domain = normalized(o.domain());
      auto it = model_opsets_.find(domain);
      if (it == model_opsets_.end()) {
        model_opsets_[domain] = o.version();
        added_opsets_[domain] = o.version();
      } else if (it->second != o.version() && functions_domains().count(domain) == 0) {
        throw InputError(where + ": its body imports " + (domain.empty() ? "ai.onnx" : domain) + " at opset " +
                         std::to_string(o.version()) + ", the model at " + std::to_string(it->second));
      }
    }
    // Formal names -> the call's names; the body's own values get names of their own.
    std::map<std::string, std::string> rename;
    for (int i = 0; i < f->input_size(); ++i) rename[f->input(i)] = i < n.input_size() ? n.input(i) : std::string();
    const std::string prefix = (n.name().empty() ? n.op_type() : n.name()) + "/";
    for (int i = 0; i < f->output_size(); ++i)
      rename[f->output(i)] = i < n.output_size() && !n.output(i).empty() ? n.output(i) : fresh(prefix + f->output(i));
    const std::map<std::string, AttributeProto> defaults = attribute_defaults(*f);
    std::map<std::string, const AttributeProto*> given;
    for (const auto& a : n.attribute()) given[a.name()] = &a;
    for (const NodeProto& body : f->node()) {
      if (has_subgraph(body)) throw InputError(where + ": its body has a node with a subgraph, which is not inlined here");
      NodeProto copy = body;
      copy.set_name(fresh(prefix + (body.name().empty() ? body.op_type() : body.name())));
      for (auto& i : *copy.mutable_input()) {
        if (i.empty()) continue;
        auto it = rename.find(i);
        if (it == rename.end()) throw InputError(where + ": its body reads '" + i + "', which nothing in it defines");
        i = it->second;
      }
      for (auto& o : *copy.mutable_output()) {
        if (o.empty()) continue;
        auto it = rename.find(o);
        if (it == rename.end()) it = rename.emplace(o, fresh(prefix + o)).first;
        o = it->second;
      }
      auto* attrs = copy.mutable_attribute();
      for (int i = attrs->size() - 1; i >= 0; --i) {
        AttributeProto& a = *attrs->Mutable(i);
        if (a.ref_attr_name().empty()) continue;
        const std::string ref = a.ref_attr_name(), name = a.name();
        if (auto g = given.find(ref); g != given.end()) {
          a = *g->second;
        } else if (auto d = defaults.find(ref); d != defaults.end()) {
          a = d->second;
        } else {
          attrs->DeleteSubrange(i, 1);  // neither given nor defaulted: the op's own default
          continue;
        }
        a.set_name(name);
        a.clear_ref_attr_name();
      }
      expand(copy, out, depth + 1);
    }
    inlined_.insert({normalized(f->domain()), f->name()});
    ++count_;
  }

  // Domains that only name functions (no op schemas): their version is the functions' business.
  const std::set<std::string>& functions_domains() {
    if (function_domains_.empty())
      for (const auto& [key, f] : functions_) function_domains_.insert(key.first);
    return function_domains_;
  }

  onnx::ModelProto& p_;
  const std::string path_;
  std::map<std::pair<std::string, std::string>, const FunctionProto*> functions_;
  std::map<std::string, int64_t> model_opsets_, added_opsets_;
  std::set<std::pair<std::string, std::string>> inlined_;
  proto::NameAllocator names_;
  std::set<std::string> function_domains_;
  int count_ = 0;
};

}  // namespace

int inline_local_functions(onnx::ModelProto& p, const std::string& path) { return Inliner(p, path).run(); }

}  // namespace amp
