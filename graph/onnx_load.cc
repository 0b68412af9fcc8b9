// Loading an ONNX file: parse, validate, canonicalize, import. The order matters because ONNX's own
// tools (checker, version converter, shape inference) assume a well-formed proto and can crash on
// one that is not: our structural checks run first, then the checker, and only a checked model
// reaches the converter and shape inference.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <spdlog/spdlog.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "graph/amp_ops.h"
#include "graph/crash_isolation.h"
#include "graph/error.h"
#include "graph/onnx_import.h"
#include "graph/onnx_io.h"
#include "graph/onnx_converter_limits.h"
#include "graph/onnx_function_inlining.h"
#include "graph/onnx_newer_opsets.h"
#include "graph/onnx_proto_edit.h"
#include "graph/onnx_runtime_contrib_ops.h"
#include "graph/onnx_runtime_forms.h"

namespace amp {

namespace {

// The newest default-domain opset this build's ONNX library knows.
constexpr int64_t kMaxOpset = 17;
// Checking, converting and inferring shapes of a real model takes seconds, not minutes.
constexpr int kToolTimeoutSeconds = 300;

std::string normalized_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }
std::string domain_name(const std::string& d) { return d.empty() ? std::string("ai.onnx") : d; }

template <class Load>
Model with_one_line_errors(Load&& load) {
  try {
    return load();
  } catch (const InputError& e) {
    throw InputError(one_line(e.what()));
  }
}

onnx::ModelProto parse(const uint8_t* data, size_t size, const std::string& path) {
  if (size > static_cast<size_t>(INT_MAX))
    throw InputError(path + ": the file is over 2 GB, which protobuf cannot read; keep the weights in external data");
  onnx::ModelProto p;
  google::protobuf::io::ArrayInputStream in(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&in);
  coded.SetTotalBytesLimit(INT_MAX);  // the default stops at 64 MB on older protobufs
  if (!p.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw InputError(path + ": not an ONNX model (it does not parse as a ModelProto; truncated or another format)");
  if (!p.has_graph()) throw InputError(path + ": not an ONNX model (it has no graph)");
  if (p.ir_version() <= 0) throw InputError(path + ": not an ONNX model (it has no IR version)");
  return p;
}

// Every graph of the model: the main graph, subgraphs of attributes at any depth, training graphs.
void for_each_graph(onnx::GraphProto& g, const std::function<void(onnx::GraphProto&)>& fn) {
  fn(g);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) for_each_graph(*a.mutable_g(), fn);
      for (auto& sub : *a.mutable_graphs()) for_each_graph(sub, fn);
    }
}

void for_each_graph(onnx::ModelProto& p, const std::function<void(onnx::GraphProto&)>& fn) {
  for_each_graph(*p.mutable_graph(), fn);
  for (auto& t : *p.mutable_training_info()) {
    if (t.has_initialization()) for_each_graph(*t.mutable_initialization(), fn);
    if (t.has_algorithm()) for_each_graph(*t.mutable_algorithm(), fn);
  }
}

using proto::node_label;

std::map<std::string, int64_t> imported_opsets(const onnx::ModelProto& p) {
  std::map<std::string, int64_t> opsets;
  for (const auto& o : p.opset_import()) opsets[normalized_domain(o.domain())] = o.version();
  if (p.ir_version() < 3 && opsets.empty()) opsets[""] = 1;  // before opset_import existed
  return opsets;
}

// Opsets newer than this build's ONNX library: nothing below could read them correctly.
void check_opsets(const onnx::ModelProto& p, const std::string& path) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& [domain, version] : imported_opsets(p)) {
    auto range = known.find(domain);
    if (range == known.end()) continue;  // a custom domain: its nodes are checked by name
    if (version > range->second.second)
      throw InputError(path + ": unsupported opset " + std::to_string(version) + " of domain '" + domain_name(domain) +
                       "' (this build reads up to opset " + std::to_string(range->second.second) + ")");
    if (version < 1)
      throw InputError(path + ": invalid opset version " + std::to_string(version) + " for domain '" + domain_name(domain) + "'");
  }
}

// Every node must name an op ONNX defines at the imported opset, or a function of the model. The
// checker lets nodes of domains it does not know pass; this project cannot run them.
void check_ops_known(onnx::ModelProto& p, const std::string& path) {
  const auto opsets = imported_opsets(p);
  std::set<std::pair<std::string, std::string>> functions;
  for (const auto& f : p.functions()) functions.emplace(normalized_domain(f.domain()), f.name());
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      const std::string domain = normalized_domain(n.domain());
      auto opset = opsets.find(domain);
      if (opset == opsets.end())
        throw InputError(path + ": " + node_label(n) + " uses domain '" + domain_name(domain) +
                         "', which the model does not import (unknown domain)");
      if (functions.count({domain, n.op_type()})) continue;
      if (!onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset->second), domain))
        throw InputError(path + ": " + node_label(n) + ": unknown op '" + n.op_type() + "' in domain '" +
                         domain_name(domain) + "' at opset " + std::to_string(opset->second));
    }
  });
}

// ONNX's lexical scoping: every name defined once (no shadowing, as in the IR), read only after its
// definition, graph outputs among the defined names. The checker does not look at graph outputs,
// and the version converter dereferences a missing name (a crash, found by the fuzzer), so this
// runs before any ONNX tool sees the model.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_set<std::string> names;
  bool has(const std::string& name) const { return names.count(name) || (parent && parent->has(name)); }
};

void check_scopes(const onnx::GraphProto& g, Scope& scope, const std::string& path) {
  const std::string where = path + ": graph '" + g.name() + "'";
  auto define = [&](const std::string& name, const std::string& what) {
    if (name.empty()) throw InputError(where + ": " + what + " has an empty name");
    if (scope.has(name)) throw InputError(where + ": " + what + " '" + name + "' is defined more than once");
    scope.names.insert(name);
  };
  std::unordered_set<std::string> inputs;
  for (const auto& vi : g.input()) {
    define(vi.name(), "input");
    inputs.insert(vi.name());
  }
  // IR < 4 lists initializers among the inputs too.
  auto define_initializer = [&](const std::string& name, const std::string& what) {
    if (!inputs.erase(name)) define(name, what);
  };
  for (const auto& t : g.initializer()) define_initializer(t.name(), "initializer");
  for (const auto& t : g.sparse_initializer()) define_initializer(t.values().name(), "sparse initializer");
  for (const auto& n : g.node()) {
    const std::string at = where + ", " + node_label(n);
    for (const auto& name : n.input())
      if (!name.empty() && !scope.has(name)) throw InputError(at + " reads '" + name + "', which is not defined before it");
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subgraphs;
      if (a.has_g()) subgraphs.push_back(&a.g());
      for (const auto& sub : a.graphs()) subgraphs.push_back(&sub);
      for (const auto* sub : subgraphs) {
        Scope inner;
        inner.parent = &scope;
        check_scopes(*sub, inner, path);
      }
    }
    for (const auto& name : n.output())
      if (!name.empty()) define(name, node_label(n) + ": output");
  }
  for (const auto& vi : g.output()) {
    if (vi.name().empty()) throw InputError(where + ": an output has an empty name");
    if (!scope.has(vi.name())) throw InputError(where + ": output '" + vi.name() + "' is not produced by the graph");
  }
}

void check_scopes(const onnx::ModelProto& p, const std::string& path) {
  Scope main;
  check_scopes(p.graph(), main, path);
  for (const auto& t : p.training_info())
    for (const auto* g : {&t.initialization(), &t.algorithm()}) {
      Scope step;
      step.parent = &main;
      check_scopes(*g, step, path);
    }
}

// External locations are checked (and the files mapped) before ONNX's checker looks at them, so
// an unsafe location gets our message and is never touched by anyone else.
void check_external_locations(onnx::ModelProto& p, ExternalDataReader& external) {
  auto check = [&](const onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (const auto& e : t.external_data())
      if (e.key() == "location") external.check_location(t.name(), e.value());
  };
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (const auto& t : g.initializer()) check(t);
    for (const auto& s : g.sparse_initializer()) {
      check(s.values());
      check(s.indices());
    }
    for (const auto& n : g.node())
      for (const auto& a : n.attribute()) {
        if (a.has_t()) check(a.t());
        for (const auto& t : a.tensors()) check(t);
        if (a.has_sparse_tensor()) {
          check(a.sparse_tensor().values());
          check(a.sparse_tensor().indices());
        }
        for (const auto& s : a.sparse_tensors()) {
          check(s.values());
          check(s.indices());
        }
      }
  });
}

// onnx::checker::check_model(const ModelProto&) resolves external data against the working
// directory; this is the same check with the model's folder as the base.
void run_checker(const onnx::ModelProto& p, const std::string& path, const std::string& base_dir) {
  try {
    if (p.ir_version() > onnx::IR_VERSION)
      throw InputError(path + ": unsupported IR version " + std::to_string(p.ir_version()) + " (this build reads up to " +
                       std::to_string(onnx::IR_VERSION) + ")");
    std::set<std::string> keys;
    for (const auto& kv : p.metadata_props())
      if (!keys.insert(kv.key()).second) throw InputError(path + ": invalid ONNX model: metadata key '" + kv.key() + "' appears twice");
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(p.ir_version()));
    ctx.set_model_dir(base_dir.empty() ? std::string(".") : base_dir);
    std::unordered_map<std::string, int> opsets;
    for (const auto& [domain, version] : imported_opsets(p)) opsets[domain] = static_cast<int>(version);
    if (p.ir_version() >= 3 && p.opset_import_size() == 0)
      throw InputError(path + ": invalid ONNX model: IR version >= 3 needs an opset_import");
    ctx.set_opset_imports(opsets);
    onnx::checker::LexicalScopeContext scope;
    onnx::checker::check_graph(p.graph(), ctx, scope);
    if (p.ir_version() >= 8) onnx::checker::check_model_local_functions(p, ctx, scope);
  } catch (const amp::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(path + ": invalid ONNX model: " + one_line(e.what()));
  }
}

// The IR version that goes with each default-domain opset (onnx/helper.py's VERSION_TABLE).
int64_t ir_version_for_opset(int64_t opset) {
  static const std::map<int64_t, int64_t> kTable = {{1, 3}, {7, 3},  {9, 4},  {10, 5}, {11, 6},
                                                    {12, 7}, {15, 8}};
  auto it = kTable.upper_bound(opset);
  return std::prev(it)->second;
}

// Shape inference. A declared shape of an output or intermediate value that contradicts what its op
// computes (a rank-0 output declared for a [20] result, as onnx2c's fp_float16 test model has) stops
// ONNX's inference; ONNX Runtime ignores such declarations (a warning) and computes the shapes
// itself. So does this import: those declarations are dropped, with one warning line, and
// inference runs again. Anything else it fails on refuses the model.
void infer_shapes(onnx::ModelProto& p, const std::string& path) {
  onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/false);
  try {
    onnx::shape_inference::InferShapes(p, onnx::OpSchemaRegistry::Instance(), options);
    return;
  } catch (const std::exception& e) {
    const std::string message = one_line(e.what());
    if (message.find("Inferred shape and existing shape differ") == std::string::npos)
      throw InputError(path + ": shape inference failed: " + message);
    onnx::ModelProto retry = p;
    for_each_graph(retry, [](onnx::GraphProto& g) {
      g.clear_value_info();
      for (auto& vi : *g.mutable_output())
        if (vi.has_type() && vi.type().has_tensor_type()) vi.mutable_type()->mutable_tensor_type()->clear_shape();
    });
    try {
      onnx::shape_inference::InferShapes(retry, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception&) {
      throw InputError(path + ": shape inference failed: " + message);
    }
    spdlog::warn("{}: a declared shape contradicts what its node computes ({}); the declared output and value shapes are "
                 "ignored, as ONNX Runtime ignores them", path, message);
    p.Swap(&retry);
  }
}

// Main-graph outputs without a type or a shape (none, an empty TypeProto, a tensor type without
// its element type or its shape): ONNX's checker requires every graph output's type and shape (a
// subgraph's it lets pass), ONNX Runtime infers them. Here ONNX's shape inference completes them,
// on a copy: each such output takes what it lacks from what inference gives it. An output inference cannot give an element type stays as it is, for the
// checker to refuse. One whose rank inference cannot fix (an If whose branches return different
// ranks) is typed without a shape, which no shape in the file could say truthfully: the checker
// then checks the model without it (`unranked`), and the writer warns that its output will not
// pass the checker.
// No type, an empty one, or a tensor type without its element type or its shape.
bool untyped(const onnx::ValueInfoProto& vi) {
  if (!vi.has_type() || vi.type().value_case() == onnx::TypeProto::VALUE_NOT_SET) return true;
  if (!vi.type().has_tensor_type()) return false;
  const auto& t = vi.type().tensor_type();
  return t.elem_type() == onnx::TensorProto::UNDEFINED || !t.has_shape();
}

bool has_untyped_outputs(const onnx::ModelProto& p) {
  for (const auto& vi : p.graph().output())
    if (untyped(vi)) return true;
  return false;
}

struct TypedOutputs {
  int count = 0;
  std::set<std::string> unranked;  // main-graph outputs typed without a shape
};

TypedOutputs type_untyped_outputs(onnx::ModelProto& p) {
  TypedOutputs r;
  if (!has_untyped_outputs(p)) return r;
  onnx::ModelProto typed = p;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/false);
    onnx::shape_inference::InferShapes(typed, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return r;  // the checker says what is wrong
  }
  auto& outs = *p.mutable_graph()->mutable_output();
  const auto& inferred = typed.graph().output();
  if (inferred.size() != outs.size()) return r;
  for (int i = 0; i < outs.size(); ++i) {
    const onnx::ValueInfoProto& t = inferred.Get(i);
    if (!untyped(outs.Get(i)) || !t.has_type() || !t.type().has_tensor_type() ||
        t.type().tensor_type().elem_type() == onnx::TensorProto::UNDEFINED)
      continue;
    // What the declaration says stays; what it lacks comes from inference.
    onnx::TypeProto_Tensor& mine = *outs.Mutable(i)->mutable_type()->mutable_tensor_type();
    const onnx::TypeProto_Tensor& theirs = t.type().tensor_type();
    if (mine.elem_type() == onnx::TensorProto::UNDEFINED) mine.set_elem_type(theirs.elem_type());
    if (!mine.has_shape() && theirs.has_shape()) *mine.mutable_shape() = theirs.shape();
    ++r.count;
    if (!mine.has_shape()) r.unranked.insert(outs.Get(i).name());
  }
  return r;
}

// The checker on the model less the main-graph outputs named (those whose rank is not fixed).
void run_checker_without(const onnx::ModelProto& p, const std::set<std::string>& outputs, const std::string& path,
                         const std::string& base_dir) {
  if (outputs.empty()) return run_checker(p, path, base_dir);
  onnx::ModelProto copy = p;
  auto* outs = copy.mutable_graph()->mutable_output();
  for (int i = outs->size() - 1; i >= 0; --i)
    if (outputs.count(outs->Get(i).name())) outs->DeleteSubrange(i, 1);
  run_checker(copy, path, base_dir);
}

// True when no default-domain op of the model changes between the two opsets: then converting is
// only a new version number, and ONNX's converter (which loses sequence and optional types on the
// way through its own IR) is not needed.
bool ops_unchanged(onnx::ModelProto& p, int64_t from, int64_t to) {
  bool unchanged = true;
  for_each_graph(p, [&](onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      if (!normalized_domain(n.domain()).empty()) continue;
      const auto* a = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(from), "");
      const auto* b = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(to), "");
      if (!a || !b || a->since_version() != b->since_version()) unchanged = false;
    }
  });
  return unchanged;
}

void set_default_opset(onnx::ModelProto& p, int64_t version) {
  for (auto& o : *p.mutable_opset_import())
    if (normalized_domain(o.domain()).empty()) o.set_version(version);
}

// The converter's IR holds tensor types only: sequence and optional types come back unset. They are
// restored by name (names are unique in a model) from the original.
void restore_lost_types(onnx::ModelProto& original, onnx::ModelProto& converted) {
  std::map<std::string, onnx::TypeProto> types;
  auto each_value_info = [](onnx::GraphProto& g, const std::function<void(onnx::ValueInfoProto&)>& fn) {
    for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
      for (auto& vi : *list) fn(vi);
  };
  for_each_graph(original, [&](onnx::GraphProto& g) {
    each_value_info(g, [&](onnx::ValueInfoProto& vi) {
      if (vi.has_type()) types.emplace(vi.name(), vi.type());
    });
  });
  for_each_graph(converted, [&](onnx::GraphProto& g) {
    each_value_info(g, [&](onnx::ValueInfoProto& vi) {
      auto it = types.find(vi.name());
      if (!vi.has_type() && it != types.end()) *vi.mutable_type() = it->second;
    });
  });
}

// The converter's IR keeps no external-data reference: an initializer whose data lives in another
// file comes back with no data at all. Each is restored by name from the original (the converter's
// adapters rewrite nodes and attributes, never a weight's bytes); one whose type or dims changed
// on the way is refused rather than guessed.
void restore_external_initializers(onnx::ModelProto& original, onnx::ModelProto& converted, const std::string& what) {
  std::map<std::string, const onnx::TensorProto*> external;
  for_each_graph(original, [&](onnx::GraphProto& g) {
    for (const auto& t : g.initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL) external.emplace(t.name(), &t);
  });
  if (external.empty()) return;
  for_each_graph(converted, [&](onnx::GraphProto& g) {
    for (auto& t : *g.mutable_initializer()) {
      auto it = external.find(t.name());
      if (it == external.end()) continue;
      const onnx::TensorProto& o = *it->second;
      if (t.data_type() != o.data_type() || !std::equal(t.dims().begin(), t.dims().end(), o.dims().begin(), o.dims().end()))
        throw InputError(what + ": the converter changed the type or shape of '" + t.name() +
                         "', whose data is external; convert the model with its weights inline");
      t.CopyFrom(o);
    }
  });
}

// The converter rebuilds the graph from its own IR and drops what that IR does not hold; those
// fields are carried over from the original.
void convert_opset(onnx::ModelProto& p, int64_t from, int64_t to, const std::string& path, const SetAsideNodes& set_aside) {
  const std::string what = path + ": cannot convert the model from opset " + std::to_string(from) + " to opset " +
                           std::to_string(to);
  if (ops_unchanged(p, from, to)) {
    set_default_opset(p, to);
  } else {
    // Adapters such as the opset 7 broadcasting change need the input shapes.
    infer_shapes(p, path);
    if (from < 13 && to >= 13) flatten_softmax_axes(p);
    prepare_for_converter(p, from, to, path);
    onnx::ModelProto converted;
    try {
      converted = onnx::version_conversion::ConvertVersion(p, static_cast<int>(to));
    } catch (const std::exception& e) {
      throw InputError(what + ": " + one_line(e.what()));
    }
    restore_lost_types(p, converted);
    restore_external_initializers(p, converted, what);
    converted.mutable_training_info()->Swap(p.mutable_training_info());
    converted.mutable_functions()->Swap(p.mutable_functions());
    converted.mutable_metadata_props()->Swap(p.mutable_metadata_props());
    p.Swap(&converted);
  }
  restore_onnx_runtime_ops(p, set_aside);
  p.set_ir_version(std::max(p.ir_version(), ir_version_for_opset(to)));
}

int64_t default_opset(const onnx::ModelProto& p) {
  const auto opsets = imported_opsets(p);
  return opsets.count("") ? opsets.at("") : 0;
}

bool needs_conversion(const onnx::ModelProto& p, const LoadOptions& options) {
  return options.target_opset > 0 && default_opset(p) > 0 && default_opset(p) != options.target_opset;
}

// The steps that hand the proto to ONNX's own tools.
TypedOutputs run_onnx_tools(onnx::ModelProto& p, const std::string& path, const std::string& base_dir,
                            const LoadOptions& options, const SetAsideNodes& set_aside) {
  const TypedOutputs typed = type_untyped_outputs(p);
  if (options.check) run_checker_without(p, typed.unranked, path, base_dir);
  const int64_t opset = default_opset(p);
  if (needs_conversion(p, options)) {
    convert_opset(p, opset, options.target_opset, path, set_aside);
    if (options.check) {  // a converter bug must not pass on silently
      try {
        run_checker_without(p, typed.unranked, path, base_dir);
      } catch (const InputError& e) {
        throw InputError(path + ": converting from opset " + std::to_string(opset) + " to opset " +
                         std::to_string(options.target_opset) + " gave an invalid model: " +
                         std::string(e.what()).substr(path.size() + 2));
      }
    }
  }
  if (options.infer_shapes) infer_shapes(p, path);
  return typed;
}

Model load_proto(onnx::ModelProto& p, const std::string& path, const std::string& base_dir, const LoadOptions& options) {
  register_amp_op_schemas();  // the project's own ops (saved training steps) check like standard ones
  if (options.target_opset > kMaxOpset)
    throw InputError(path + ": unsupported target opset " + std::to_string(options.target_opset) +
                     " (this build reads up to opset " + std::to_string(kMaxOpset) + ")");
  ExternalDataReader external(path, base_dir);
  if (options.target_opset > 0)
    if (int n = inline_local_functions(p, path))
      spdlog::info("{}: {} call{} of model-local functions inlined", path, n, n == 1 ? "" : "s");
  if (const int64_t newer = default_opset(p); newer > kMaxOpset) {
    std::string notes;
    for (const std::string& n : lower_to_opset_17(p, path)) notes += (notes.empty() ? "" : "; ") + n;
    spdlog::warn("{}: opset {} is newer than the {} this build's ONNX library knows: read through its opset-{} form{}", path,
                 newer, kMaxOpset, kMaxOpset, notes.empty() ? " (no node changes)" : " (" + notes + ")");
  }
  lower_ir_version(p, path);
  check_opsets(p, path);
  if (const std::string expanded = expand_onnx_runtime_contrib_ops(p, path); !expanded.empty())
    spdlog::warn("{}: ONNX Runtime's contrib ops (com.microsoft: {}) read as the standard nodes that compute them", path,
                 expanded);
  const LenientFixes mended = mend_lenient_forms(p);
  if (mended.untyped_value_info)
    spdlog::warn("{}: {} value_info entr{} without a type (ONNX requires one; ONNX Runtime ignores them): dropped", path,
                 mended.untyped_value_info, mended.untyped_value_info == 1 ? "y" : "ies");
  if (mended.empty_reduce_axes)
    spdlog::warn("{}: {} Reduce node{} with an empty 'axes' attribute (ONNX's checker refuses it; ONNX Runtime reads it as "
                 "absent): read as absent, all axes", path, mended.empty_reduce_axes, mended.empty_reduce_axes == 1 ? "" : "s");
  if (!mended.shadowing.empty()) {
    std::string which;
    for (const std::string& s : mended.shadowing) which += (which.empty() ? "" : "; ") + s;
    spdlog::warn("{}: a subgraph defines a name an enclosing graph defines ({}): ONNX forbids it, ONNX Runtime reads the "
                 "inner one inside the subgraph, and so does the import (the inner one renamed)", path, which);
  }
  if (mended.initializers_listed)
    spdlog::warn("{}: IR version {} lists every initializer among the graph inputs and {} {} not: added, as ONNX Runtime "
                 "reads them", path, p.ir_version(), mended.initializers_listed, mended.initializers_listed == 1 ? "is" : "are");
  for (const std::string& g : sort_nodes_topologically(p))
    spdlog::warn("{}: the nodes of graph '{}' are not in topological order, which ONNX requires (ONNX Runtime sorts "
                 "them); sorted on import", path, g);
  SetAsideNodes set_aside;
  if (options.target_opset >= 17 && default_opset(p) > 0 && default_opset(p) < 17) {
    std::vector<std::string> notes;
    if (int n = set_aside_onnx_runtime_ops(p, set_aside, notes))
      spdlog::warn("{}: {} node{} of ONNX Runtime's contrib ops in the default domain at opset {} (LayerNormalization, "
                   "SimplifiedLayerNormalization): read as what {} at opset 17", path, n, n == 1 ? "" : "s",
                   default_opset(p), n == 1 ? "it means" : "they mean");
    for (const std::string& note : notes) spdlog::warn("{}: {}", path, note);
  }
  check_scopes(p, path);
  if (options.check) {
    check_ops_known(p, path);
    check_external_locations(p, external);
  }
  const bool uses_onnx_tools =
      options.check || options.infer_shapes || needs_conversion(p, options) || has_untyped_outputs(p);
  if (options.isolate_onnx_tools && uses_onnx_tools) {
    const std::string failure =
        rehearse_in_child([&] { run_onnx_tools(p, path, base_dir, options, set_aside); }, kToolTimeoutSeconds);
    if (!failure.empty())
      throw InputError(path + ": malformed model: ONNX's checker, version converter or shape inference " + failure +
                       " on it");
  }
  const TypedOutputs typed = run_onnx_tools(p, path, base_dir, options, set_aside);
  if (typed.count) {
    std::string unranked;
    for (const std::string& o : typed.unranked) unranked += (unranked.empty() ? "" : ", ") + ("'" + o + "'");
    spdlog::warn("{}: {} graph output{} without a type or shape (ONNX requires both; ONNX Runtime infers them): "
                 "completed by shape inference{}", path, typed.count, typed.count == 1 ? "" : "s",
                 unranked.empty() ? "" : "; ONNX's shape inference cannot fix the rank of " + unranked);
  }
  return import_model_proto(p, path, external);
}

std::string folder_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Model load_model_from_bytes(const std::string& bytes, const std::string& path_for_errors, const std::string& base_dir,
                            const LoadOptions& options) {
  return with_one_line_errors([&] {
    onnx::ModelProto p = parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path_for_errors);
    return load_proto(p, path_for_errors, base_dir, options);
  });
}

Model load_model(const std::string& path, const LoadOptions& options) {
  return with_one_line_errors([&] {
    onnx::ModelProto p;
    {
      // Parsed straight from the mapping: the file's bytes are not copied into memory first.
      std::shared_ptr<MappedFile> file = MappedFile::open(path);
      p = parse(file->data(), file->size(), path);
    }
    return load_proto(p, path, folder_of(path), options);
  });
}

}  // namespace amp
