#include "passes/training/training_info.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/training/eval_mode.h"

namespace amp {

namespace {

constexpr const char* kMetadataKey = kTrainingMetadataKey;

nlohmann::json names_of(const TrainingStep& s) {
  nlohmann::json loss{{"target", s.loss_spec.target}, {"labels", s.loss_spec.labels}};
  if (s.loss_spec.kind) loss["kind"] = loss_kind_name(*s.loss_spec.kind);
  return {{"loss", s.loss},           {"target", s.target},       {"labels", s.labels},
          {"lr", s.lr},               {"apply_update", s.apply_update}, {"all_finite", s.all_finite},
          {"loss_scale", s.loss_scale}, {"grad_norm", s.grad_norm}, {"classification", s.classification},
          {"correct", s.correct},
          {"params", s.params},       {"data_inputs", s.data_inputs}, {"model_outputs", s.model_outputs},
          {"loss_spec", loss}};
}

// Indices of the nodes that the given outputs need, following inputs back to graph inputs.
std::set<int> nodes_needed(const onnx::GraphProto& g, const std::vector<std::string>& outputs) {
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output()) producer[o] = i;
  std::set<int> needed;
  std::vector<std::string> todo(outputs.begin(), outputs.end());
  while (!todo.empty()) {
    const std::string v = todo.back();
    todo.pop_back();
    auto it = producer.find(v);
    if (it == producer.end() || !needed.insert(it->second).second) continue;
    for (const auto& in : g.node(it->second).input())
      if (!in.empty()) todo.push_back(in);
  }
  return needed;
}

}  // namespace

Model to_training_info_model(const TrainingStep& step, const std::vector<std::pair<std::string, Tensor>>& state) {
  Model current = clone_model(step.model);
  for (const auto& [name, t] : state)
    if (Value* v = current.graph->value(name); v && v->has_initializer()) current.graph->set_initializer(v, t);
  // The passes type the values they add, but ONNX's shape inference never reaches a training_info
  // algorithm: without value_info the step would come back untyped, and the cuda backend plans
  // its fused kernels from the types.
  std::set<const Value*> described(current.graph->value_info().begin(), current.graph->value_info().end());
  for (const Node* n : current.graph->nodes())
    for (Value* v : n->outputs())
      if (v && !v->is_output() && v->type().kind != ValueType::Kind::kUnknown && described.insert(v).second)
        current.graph->value_info().push_back(v);
  onnx::ModelProto p = to_proto(current);
  onnx::GraphProto step_graph;
  step_graph.Swap(p.mutable_graph());
  onnx::GraphProto& main = *p.mutable_graph();
  onnx::TrainingInfoProto& info = *p.add_training_info();
  onnx::GraphProto& algo = *info.mutable_algorithm();
  main.set_name(step_graph.name());
  algo.set_name(step_graph.name() + "_training_step");

  const std::set<int> inference = nodes_needed(step_graph, step.model_outputs);
  std::set<std::string> read_by_inference, made_by_inference, all_names;
  for (int i = 0; i < step_graph.node_size(); ++i) {
    const auto& n = step_graph.node(i);
    for (const auto& o : n.output()) all_names.insert(o);
    if (!inference.count(i)) {
      *algo.add_node() = n;
      continue;
    }
    *main.add_node() = n;
    for (const auto& in : n.input()) read_by_inference.insert(in);
    for (const auto& o : n.output()) made_by_inference.insert(o);
  }
  for (const auto& in : step_graph.input())
    *(read_by_inference.count(in.name()) ? main.add_input() : algo.add_input()) = in;
  for (const auto& t : step_graph.initializer())
    *(read_by_inference.count(t.name()) ? main.add_initializer() : algo.add_initializer()) = t;
  for (const auto& vi : step_graph.value_info())
    *(made_by_inference.count(vi.name()) ? main.add_value_info() : algo.add_value_info()) = vi;
  const std::set<std::string> model_outputs(step.model_outputs.begin(), step.model_outputs.end());
  std::map<std::string, const onnx::ValueInfoProto*> outputs;
  for (const auto& o : step_graph.output()) {
    outputs[o.name()] = &o;
    *(model_outputs.count(o.name()) ? main.add_output() : algo.add_output()) = o;
  }
  // update_binding values must be algorithm (or inference) outputs; a value the inference graph
  // makes but does not output (BatchNorm's new statistics) leaves through an Identity.
  for (const auto& [state_name, value] : step.updates) {
    auto* entry = info.add_update_binding();
    entry->set_key(state_name);
    if (!made_by_inference.count(value) || model_outputs.count(value)) {
      entry->set_value(value);
      continue;
    }
    std::string out = value + "_update";
    for (int k = 1; all_names.count(out); ++k) out = value + "_update_" + std::to_string(k);
    all_names.insert(out);
    auto* id = algo.add_node();
    id->set_op_type("Identity");
    id->add_input(value);
    id->add_output(out);
    for (int i = algo.output_size(); i-- > 0;)
      if (algo.output(i).name() == value) {  // it moves from the algorithm's outputs to the Identity
        onnx::ValueInfoProto vi = algo.output(i);
        algo.mutable_output()->DeleteSubrange(i, 1);
        vi.set_name(out);
        *algo.add_output() = vi;
      }
    entry->set_value(out);
  }
  auto* meta = p.add_metadata_props();
  meta->set_key(kMetadataKey);
  meta->set_value(names_of(step).dump());
  Model out = from_proto(p, step.model.path, ".");
  out.path = step.model.path;
  return out;
}

TrainingStep step_from_training_info(const Model& m) {
  const std::string* meta = m.metadata(kMetadataKey);
  if (m.training_info.size() != 1 || !m.training_info[0].algorithm || !meta)
    throw InputError(m.path + ": the model's training_info was not written by amp-train --save-training-graph "
                     "(one algorithm graph and metadata '" + std::string(kMetadataKey) + "' are needed)");
  nlohmann::json names;
  try {
    names = nlohmann::json::parse(*meta);
  } catch (const std::exception& e) {
    throw InputError(m.path + ": metadata '" + std::string(kMetadataKey) + "' is not valid JSON: " + e.what());
  }
  onnx::ModelProto p = to_proto(m);
  onnx::GraphProto& g = *p.mutable_graph();
  const onnx::GraphProto& algo = p.training_info(0).algorithm();
  for (const auto& in : algo.input()) *g.add_input() = in;
  for (const auto& t : algo.initializer()) *g.add_initializer() = t;
  for (const auto& n : algo.node()) *g.add_node() = n;
  for (const auto& o : algo.output()) *g.add_output() = o;
  for (const auto& vi : algo.value_info()) *g.add_value_info() = vi;

  TrainingStep step;
  for (const auto& kv : p.training_info(0).update_binding()) {
    step.state.push_back(kv.key());
    step.updates.emplace_back(kv.key(), kv.value());
  }
  p.clear_training_info();
  step.model = from_proto(p, m.path, ".");
  step.model.path = m.path;
  try {
    step.loss = names.at("loss");
    step.target = names.at("target");
    step.labels = names.at("labels");
    step.lr = names.at("lr");
    step.apply_update = names.at("apply_update");
    step.all_finite = names.at("all_finite");
    step.loss_scale = names.at("loss_scale");
    step.grad_norm = names.at("grad_norm");
    step.classification = names.at("classification");
    step.correct = names.value("correct", "");  // absent from steps saved before it was counted in the graph
    step.params = names.at("params").get<std::vector<std::string>>();
    step.data_inputs = names.at("data_inputs").get<std::vector<std::string>>();
    step.model_outputs = names.at("model_outputs").get<std::vector<std::string>>();
    const auto& loss = names.at("loss_spec");
    step.loss_spec.target = loss.at("target");
    step.loss_spec.labels = loss.at("labels");
    if (loss.contains("kind")) step.loss_spec.kind = loss_kind_from_name(loss.at("kind"));
  } catch (const std::exception& e) {
    throw InputError(m.path + ": metadata '" + std::string(kMetadataKey) + "' lacks what amp-train needs: " + e.what());
  }
  return step;
}

}  // namespace amp
