// What the cuda backend's device-free tests plan: the models/ training steps (or another model's) in mixed precision
// (AdamW with weight decay, dynamic loss scaling for fp16, the inf/NaN check, cross-entropy), their
// compile options, zero feeds and the plan for them; and one elementwise program with every op.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/schedule.h"
#include "graph/onnx_io.h"
#include "graph/ops/elementwise_program.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/training/training_step.h"
#include "tests/support/parity.h"
#include "tests/support/test_support.h"

namespace amp::test {

inline Model shipped_model(const std::string& file) { return load_model(source_dir() + "/models/" + file); }

inline TrainingStep mixed_precision_step(Model forward, DType precision) {
  TrainingSpec spec;
  spec.optimizer.kind = OptimizerSpec::Kind::kAdamW;
  spec.optimizer.weight_decay = 0.01f;
  spec.precision = precision;
  spec.loss_scale.mode = precision == DType::kFloat16 ? LossScaleSpec::Mode::kDynamic : LossScaleSpec::Mode::kNone;
  spec.check_finite = true;
  spec.loss.kind = LossKind::kCrossEntropy;
  return build_training_step(std::move(forward), spec);
}

inline TrainingStep mixed_precision_step(const std::string& file, DType precision) {
  return mixed_precision_step(shipped_model(file), precision);
}

// models/gpt.train.onnx with GPT-2's GELU, the tanh form (gelu_new), in place of nn.GELU's erf:
// what cuBLASLt's GELU epilogues compute.
inline Model gpt_with_tanh_gelu() {
  Model m = shipped_model("gpt.train.onnx");
  RecognizeGeluPass().run(m);
  for (Node* n : m.graph->nodes())
    if (n->domain() == kAmpDomain && n->op_type() == "Gelu") n->set_attr(Attribute::of_string("approximate", "tanh"));
  return m;
}

// Random feeds for the step's data inputs and a learning rate of 1e-2: floats in [-1, 1], integers
// (labels, token ids) in [0, 10), masks true; symbolic dims: batch 4, sequence 8.
inline std::vector<std::pair<std::string, Tensor>> random_step_feeds(const TrainingStep& step, uint32_t seed) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::mt19937 gen(seed);
  for (const Value* v : step.model.graph->inputs()) {
    if (v->has_initializer()) continue;
    std::vector<int64_t> dims;
    for (const Dim& d : v->type().shape->dims) dims.push_back(d.value ? *d.value : d.param == "T" ? 8 : 4);
    Tensor t(v->dtype(), dims);
    for (int64_t i = 0; i < t.numel(); ++i) {
      switch (t.dtype) {
        case DType::kFloat: t.mutable_as<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(gen); break;
        case DType::kInt64: t.mutable_as<int64_t>()[i] = static_cast<int64_t>(gen() % 10); break;
        case DType::kInt32: t.mutable_as<int32_t>()[i] = static_cast<int32_t>(gen() % 10); break;
        case DType::kBool: t.mutable_as<uint8_t>()[i] = 1; break;
        default: ADD_FAILURE() << "feed " << v->name() << " of type " << dtype_name(t.dtype); break;
      }
    }
    if (v->name() == step.lr) t.mutable_as<float>()[0] = 1e-2f;
    feeds.emplace_back(v->name(), std::move(t));
  }
  return feeds;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Runs `steps` steps of `step` on both executables from the same random feeds (seeds first_seed,
// first_seed + 1, ...) and expects the same bits: every fetched loss (and all-finite flag), then
// every state.
inline void expect_same_training(Executable& a, Executable& b, const TrainingStep& step, uint32_t first_seed,
                                 uint32_t steps) {
  std::vector<std::string> fetches = {step.loss};
  if (!step.all_finite.empty()) fetches.push_back(step.all_finite);
  for (uint32_t s = 0; s < steps; ++s) {
    const auto feeds = random_step_feeds(step, first_seed + s);
    const std::vector<Tensor> ya = a.run(feeds, fetches), yb = b.run(feeds, fetches);
    for (size_t k = 0; k < fetches.size(); ++k) EXPECT_TRUE(same_bits(ya[k], yb[k])) << fetches[k] << " at step " << s;
  }
  for (const std::string& name : a.state_names())
    EXPECT_TRUE(same_bits(a.read_state(name), b.read_state(name))) << "state " << name;
}

// torchvision's ResNet Bottleneck as torch 1.13 exports it in training mode
// (tests/passes/torch_exports.py resnet_bottleneck: two blocks, the first downsampling), the
// export alone (its PyTorch gradients are checked in the passes' tests).
inline Model resnet_bottleneck() {
  const std::string dir = temp_dir("resnet_bottleneck");
  std::string out;
  if (run_python(source_dir() + "/tests/passes/torch_exports.py resnet_bottleneck " + dir, &out) != 0)
    throw std::runtime_error("torch_exports.py resnet_bottleneck failed:\n" + out);
  return load_model(dir + "/model.onnx");
}

// An image model's training step as ResNets train: SGD with momentum 0.9, cross-entropy, fp16 with
// a dynamic loss scale, 16-bit steps checking their gradients; `name` stands for the file in errors.
inline TrainingStep sgd_momentum_step(const Model& forward, DType precision, const std::string& name) {
  TrainingSpec spec;
  spec.optimizer.kind = OptimizerSpec::Kind::kSgd;
  spec.optimizer.momentum = 0.9f;
  spec.precision = precision;
  spec.loss_scale.mode = precision == DType::kFloat16 ? LossScaleSpec::Mode::kDynamic : LossScaleSpec::Mode::kNone;
  spec.check_finite = precision != DType::kFloat;
  spec.loss.kind = LossKind::kCrossEntropy;
  return build_training_step(load_model_from_bytes(serialize_model(forward), name, "."), spec);
}

inline CompileOptions step_options(const TrainingStep& step) {
  CompileOptions options;
  options.state = step.state;
  options.state_updates = step.updates;
  return options;
}

// `steps` runs of a training step on the CPU backend and on the CUDA backend, on one batch (input,
// labels) at learning rate 1e-3: each step's loss and the parameters after the last agree within
// expect_close's bound times tol_scale.
inline void expect_device_steps_track_cpu(const TrainingStep& step, Tensor input, Tensor labels, int steps,
                                          double tol_scale) {
  const CompileOptions options = step_options(step);
  std::vector<std::pair<std::string, Tensor>> feeds = {{"input", std::move(input)}, {step.labels, std::move(labels)}};
  Tensor lr(DType::kFloat, {});
  lr.mutable_as<float>()[0] = 1e-3f;
  feeds.push_back({step.lr, lr});
  auto cpu = make_backend("cpu")->compile(step.model, options);
  auto gpu = make_backend("cuda")->compile(step.model, options);
  for (int s = 0; s < steps; ++s) {
    const Tensor lc = cpu->run(feeds, {step.loss})[0];
    const Tensor lg = gpu->run(feeds, {step.loss})[0];
    expect_close(lg, lc, "loss at step " + std::to_string(s), tol_scale);
  }
  for (const std::string& name : step.params) expect_close(gpu->read_state(name), cpu->read_state(name), name, tol_scale);
}

// `runs` runs of an image model's step with SGD and momentum (sgd_momentum_step) on the CPU and the
// CUDA backend, on one random batch of images of input_dims, values in [lo, hi), at learning rate
// 1e-2 (seed picks the batch): the losses, and every state tensor after them, agree within
// expect_close's bound times 10. A momentum buffer sums the gradients, which a 16-bit step
// computes in 16 bits (each side rounds them once, summed in other orders): it is held to that
// type's tolerance (parity.h). Past the first run, the runs replay the captured CUDA Graph.
inline void expect_momentum_step_tracks_cpu(const TrainingStep& step, const CompileOptions& options, DType precision,
                                            const std::vector<int64_t>& input_dims, uint32_t seed, int runs = 3,
                                            float lo = -2, float hi = 2) {
  Tensor lr(DType::kFloat, {});
  *lr.mutable_as<float>() = 1e-2f;
  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"input", random_tensor(DType::kFloat, input_dims, seed, lo, hi)},
      {step.labels, random_tensor(DType::kInt64, {input_dims.at(0)}, seed + 1, 0, 10)},
      {step.lr, lr}};
  auto cpu = make_backend("cpu")->compile(step.model, options);
  auto gpu = make_backend("cuda")->compile(step.model, options);
  for (int k = 0; k < runs; ++k)
    expect_close(gpu->run(feeds, {step.loss})[0], cpu->run(feeds, {step.loss})[0], "loss at step " + std::to_string(k),
                 10.0);
  for (const std::string& name : cpu->state_names()) {
    const bool gradients = name.find("momentum_buffer") != std::string::npos && precision != DType::kFloat;
    const double scale = gradients ? 10.0 * (precision == DType::kFloat16 ? 2e-3 : 1.6e-2) / 1e-4 : 10.0;
    expect_close(gpu->read_state(name), cpu->read_state(name), name, scale);
  }
}

// Zero-filled feeds for every graph input that is not an initializer: N=2, T=8, other symbols 2.
inline std::vector<Tensor> zero_feeds(const cuda::Schedule& s) {
  std::vector<Tensor> feeds;
  for (int v : s.program.inputs) {
    const Program::Val& val = s.program.values[v];
    if (val.initializer >= 0) continue;
    std::vector<int64_t> dims;
    if (val.shape)
      for (const Dim& d : val.shape->dims) dims.push_back(d.value ? *d.value : d.param == "T" ? 8 : 2);
    Tensor t(val.dtype, dims);
    t.name = val.name;
    feeds.push_back(std::move(t));
  }
  return feeds;
}

// The plan for these feeds, the initial state and every output and state update as targets.
inline cuda::ShapePlan plan_with(const cuda::Schedule& s, const std::vector<Tensor>& feeds) {
  std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
  for (const Tensor& t : feeds) fed[s.program.find(t.name)] = &t;
  std::vector<cuda::TensorDesc> state;
  for (int v : s.state_values) {
    const Tensor& t = s.program.initializers[s.program.values[v].initializer];
    state.push_back(cuda::TensorDesc{t.dtype, t.dims});
  }
  std::vector<int> targets = s.program.outputs;
  for (const auto& [st, v] : s.updates) targets.push_back(v);
  return s.plan(fed, state, targets);
}

// One instruction of every op, reading inputs of every type (fp16, bf16, fp32, bool), each result
// an output: no op's code can hide from a compiler or a comparison.
inline ElementwiseProgram every_op_program() {
  ElementwiseProgram p;
  p.input_dtypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat, DType::kBool};
  int in[4];
  for (int k = 0; k < 4; ++k) {
    ElemInstr i;
    i.op = ElemOp::kInput;
    i.input = k;
    i.dtype = p.input_dtypes[static_cast<size_t>(k)];
    in[k] = p.add(i);
  }
  for (int op = static_cast<int>(ElemOp::kIdentity); op < kNumElemOps; ++op) {
    ElemInstr i;
    i.op = static_cast<ElemOp>(op);
    const ElemOpInfo& info = elem_op_info(i.op);
    const bool logic = info.types == ElemTypes::kBool;
    i.dtype = info.yields_bool() ? DType::kBool : p.input_dtypes[static_cast<size_t>(op % 3)];
    for (int a = 0; a < info.arity; ++a)
      i.args.push_back(logic || (info.form == ElemForm::kSelect && a == 0) ? in[3] : in[(op + a) % 3]);
    i.alpha = 0.25f;
    i.beta = 0.625f;
    p.outputs.push_back(p.add(i));
  }
  p.check();
  return p;
}

}  // namespace amp::test
