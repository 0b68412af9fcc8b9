// What the CUDA backend makes of the shipped models and their mixed-precision training steps,
// checked without a GPU (Schedule and its plan() touch no device): every needed node is a host step
// (shape arithmetic) or part of exactly one device unit, products absorb their bias and ReLU (and
// keep the ReLU's mask as a bitmask for the product of its backward), convolutions their residual
// Add and ReLU, elementwise chains — GELU, the AdamW update — fuse at plan time on concrete shapes,
// the generated source of every fused kernel compiles with NVRTC for the plan's real broadcasts,
// and what the device cannot run is refused naming the node.
#include <gtest/gtest.h>

#if !AMP_HAVE_CUDA
TEST(CudaSchedule, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA (nvcc not found)"; }
#else

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "backends/cuda/copy_fusion.h"
#include "backends/cuda/device_layout.h"
#include "backends/cuda/elementwise_codegen.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/schedule.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/ops/elementwise_program_eval.h"
#include "passes/pipelines.h"
#include "passes/training/training_step.h"
#include "tests/support/conv_chain.h"
#include "tests/support/copy_chain_model.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/pass_through_model.h"
#include "tests/support/gelu_layer_model.h"
#include "tests/support/relu_layer_model.h"
#include "tests/support/scoped_env.h"
#include "tests/support/test_support.h"
#include "tests/support/weight_gradient_model.h"

namespace amp::cuda {
namespace {

using test::mixed_precision_step;
using test::plan_with;
using test::step_options;
using test::zero_feeds;
Model load(const std::string& file) { return test::shipped_model(file); }

ShapePlan plan_with_zero_feeds(const Schedule& s, std::vector<Tensor>& feeds) {
  feeds = zero_feeds(s);
  return plan_with(s, feeds);
}

std::map<std::string, int> kinds(const ShapePlan& p) {
  std::map<std::string, int> k;
  for (const Unit* u : p.order) ++k[u->kind];
  return k;
}

std::string listing(const ShapePlan& p) {
  std::string out;
  for (const Unit* u : p.order) out += "  " + u->kind + "   @" + u->where + "\n";
  return out;
}

// Calls fn(source offset, destination offset) for every element c copies, in elements.
void for_each_offset(const StridedCopy& c, const std::function<void(int64_t, int64_t)>& fn) {
  int64_t n = 1;
  for (int64_t d : c.dims) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, src = c.src_base, dst = c.dst_base;
    for (size_t k = c.dims.size(); k-- > 0;) {
      const int64_t at = rest % c.dims[k];
      rest /= c.dims[k];
      src += at * c.src_strides[k];
      dst += at * c.dst_strides[k];
    }
    fn(src, dst);
  }
}

// Every needed step is a host step or in exactly one unit of the plan (run or view).
void expect_every_step_placed(const Schedule& s, const ShapePlan& p) {
  std::vector<int> covered(s.program.steps.size(), 0);
  for (const auto* list : {&p.order, &p.views})
    for (const Unit* u : *list)
      for (int st : u->steps) ++covered[st];
  for (int st : p.steps) EXPECT_EQ(covered[st] + (s.host_step[st] ? 1 : 0), 1) << s.program.steps[st].where;
  for (int st : p.read_through) {  // left out: no unit runs it, nor is it planned as needed
    EXPECT_EQ(covered[st], 0) << s.program.steps[st].where;
    EXPECT_FALSE(std::binary_search(p.steps.begin(), p.steps.end(), st)) << s.program.steps[st].where;
  }
}

// The generated source of every fused unit, with the plan's broadcasts, compiles; so does that of
// every multi-tensor launch.
void expect_fused_kernels_compile(const ShapePlan& p) {
  size_t fused = 0;
  for (const Unit* u : p.order) {
    std::vector<std::vector<int64_t>> in_dims;
    for (int v : u->in) in_dims.push_back(v >= 0 ? p.desc[v].dims : std::vector<int64_t>{});
    GeneratedKernel k;
    if (const auto* op = dynamic_cast<const FusedElementwiseOp*>(u->op.get())) {
      k = generate_elementwise_kernel(op->program(), choose_indexing(in_dims, p.desc[u->out[0]].dims));
    } else if (const auto* mt = dynamic_cast<const MultiTensorFusedOp*>(u->op.get())) {
      // Each program reads its inputs as its first group does (the others read alike).
      std::vector<MultiTensorVariant> variants(mt->programs().size());
      size_t at = 0, out_at = 0;
      for (int v : mt->variant_of_group()) {
        const ElementwiseProgram& prog = mt->programs()[static_cast<size_t>(v)];
        if (!variants[static_cast<size_t>(v)].program) {
          std::vector<std::vector<int64_t>> dims;
          for (size_t i = 0; i < prog.input_dtypes.size(); ++i) dims.push_back(p.desc[u->in[at + i]].dims);
          variants[static_cast<size_t>(v)] = {&prog, choose_indexing(dims, p.desc[u->out[out_at]].dims)};
        }
        at += prog.input_dtypes.size();
        out_at += prog.outputs.size();
      }
      EXPECT_EQ(at, u->in.size());
      EXPECT_EQ(out_at, u->out.size());
      k = generate_multi_tensor_kernel(variants).kernel;
    } else {
      continue;
    }
    ++fused;
    try {
      compile_cuda_source(k.source, k.name, "sm_90");
    } catch (const Error& e) {
      ADD_FAILURE() << u->where << " (" << u->kind << "): " << e.what();
    }
  }
  EXPECT_GT(fused, 0u);
}

TEST(CudaSchedule, MlpProductsAbsorbBiasAndRelu) {
  const Schedule s(load("mlp.onnx"), {});
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_with_zero_feeds(s, feeds);
  expect_every_step_placed(s, p);
  std::vector<std::string> got;
  for (const Unit* u : p.order) got.push_back(u->kind);
  EXPECT_EQ(got, (std::vector<std::string>{"Gemm+Relu", "Gemm+Relu", "Gemm"})) << listing(p);
  // Flatten moves no byte: its output is the fed image's buffer.
  ASSERT_EQ(p.views.size(), 1u);
  EXPECT_EQ(p.views[0]->kind, "Flatten");
  EXPECT_EQ(p.alias_of[p.views[0]->out[0]], p.views[0]->in[0]);
}

TEST(CudaSchedule, GptShapesOnTheHostGeluFusedBiasesInEpilogues) {
  const Schedule s(load("gpt.onnx"), {});
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_with_zero_feeds(s, feeds);
  expect_every_step_placed(s, p);
  auto k = kinds(p);
  EXPECT_EQ(k.count("Shape"), 0u) << "shape arithmetic runs on the host while planning:\n" << listing(p);
  EXPECT_EQ(k["fused Div+Erf+Add+Mul+Mul"], 2) << listing(p);
  // Every LayerNorm reads a residual stream's sum, which it computes itself (layer_norm_residual_fusion.h).
  EXPECT_EQ(k["LayerNormalization+Add"], 5) << listing(p);
  EXPECT_EQ(k["Softmax"], 2) << listing(p);
  EXPECT_EQ(k["MatMul+Add"], 9) << "qkv, attention proj, MLP fc and proj of both blocks, and the head:\n" << listing(p);
  for (size_t st = 0; st < s.program.steps.size(); ++st) {
    if (s.program.steps[st].op == "Shape" || s.program.steps[st].op == "Constant") {
      EXPECT_TRUE(s.host_step[st]) << s.program.steps[st].where;
    }
  }
  expect_fused_kernels_compile(p);
}

// Every convolution of models/cnn.onnx (an eval export, BatchNorm folded into the Conv biases) is
// one cudnnConvolutionBiasActivationForward with what follows it: its ReLU, and in the residual
// block the Add of the block's input and the ReLU after it. Seven device units where there were
// eleven (each Conv, then a generated ReLU or Add+ReLU kernel). The fp16 rewrite keeps the whole
// chain in fp16 between the Casts of the input and weights and that of the logits, so it fuses
// alike: twelve units where there were sixteen (the Casts of the three 3x3 filters of more than one
// input channel each a kernel of its own, which writes the filter channels-last as it casts:
// backends/cuda/channels_last.h; the single-channel input and first filter, the same bytes both
// ways, stay in one multi-tensor Cast).
TEST(CudaSchedule, CnnConvolutionsAbsorbTheirResidualAndRelu) {
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "fp16 rewrite" : "fp32");
    Model m = load("cnn.onnx");
    AmpResult rewritten;
    if (fp16) {
      ASSERT_TRUE(amp_rewrite_pipeline(AmpPolicy(DType::kFloat16), rewritten, false).run(m));
    }
    const Schedule s(m, {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    auto k = kinds(p);
    EXPECT_EQ(k["Conv+Relu"], 3) << listing(p);
    EXPECT_EQ(k["Conv+Add+Relu"], 1) << listing(p);
    EXPECT_EQ(k.count("Conv") + k.count("fused Relu") + k.count("fused Add+Relu"), 0u) << listing(p);
    EXPECT_EQ(k["MaxPool"], 1);
    EXPECT_EQ(k["GlobalAveragePool"], 1);
    EXPECT_EQ(p.order.size(), fp16 ? 12u : 7u) << listing(p);
    for (const Unit* u : p.order)
      if (u->kind == "Conv+Add+Relu") {
        ASSERT_EQ(u->in.size(), 4u);
        EXPECT_EQ(s.program.values[u->in[3]].name, "/pool/MaxPool_output_0") << "the residual is the block's input";
        EXPECT_EQ(p.desc[u->in[3]].dtype, fp16 ? DType::kFloat16 : DType::kFloat);
      }
  }
}

// What the fused convolution cannot take stays as it was, the Conv alone and a generated kernel
// after it: no bias, a z that broadcasts, an activation cuDNN does not fuse, a result of another
// type than Y's, and a value the graph reads elsewhere (it must be stored).
TEST(CudaSchedule, ConvolutionsKeepWhatTheyCannotAbsorb) {
  struct Case {
    const char* what;
    std::function<void(test::ConvChainSpec&)> set;
    std::vector<std::string> units;
  };
  const std::vector<Case> cases = {
      {"no bias (a zero bias is not worth a buffer)", [](test::ConvChainSpec& c) { c.bias = false; }, {"Conv", "fused Relu"}},
      {"a broadcast residual", [](test::ConvChainSpec& c) { c.residual_dims = {1, 6, 1, 1}; },
       {"Conv", "fused Add+Relu"}},
      {"an activation cuDNN does not fuse", [](test::ConvChainSpec& c) { c.activation = "LeakyRelu"; },
       {"Conv", "fused LeakyRelu"}},
      {"the convolution's output read twice", [](test::ConvChainSpec& c) { c.conv_output_is_graph_output = true; },
       {"Conv", "fused Relu"}},
      {"a Cast to fp32 before the ReLU", [](test::ConvChainSpec& c) { c.widen_before_activation = true; },
       {"Conv", "fused Cast+Relu"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    test::ConvChainSpec spec;
    spec.dtype = DType::kFloat16;
    spec.activation = "Relu";
    c.set(spec);
    const Schedule s(test::conv_chain(spec).m, {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    std::vector<std::string> got;
    for (const Unit* u : p.order) got.push_back(u->kind);
    EXPECT_EQ(got, c.units) << listing(p);
  }
}

TEST(CudaSchedule, MixedPrecisionTrainingStepsRunEntirelyOnTheDeviceWithFusedUpdates) {
  for (const char* model : {"mlp.train.onnx", "gpt.train.onnx", "cnn.train.onnx"}) {
    for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(model) + " " + std::string(dtype_name(precision)));
      TrainingStep step = mixed_precision_step(model, precision);
      std::unique_ptr<Schedule> s;
      try {
        s = std::make_unique<Schedule>(step.model, step_options(step));
      } catch (const InputError& e) {
        FAIL() << e.what();
      }
      std::vector<Tensor> feeds;
      const ShapePlan p = plan_with_zero_feeds(*s, feeds);
      expect_every_step_placed(*s, p);
      // fp16 scales the loss: the check reads the fp16 gradients times 1/scale (AllFiniteScaled),
      // so nothing of the update has to happen before it; bf16 checks its fp32 gradients as they are.
      const std::string check = precision == DType::kFloat16 ? "AllFiniteScaled" : "AllFinite";
      EXPECT_EQ(kinds(p)[check], 1) << listing(p);
      // After the check, AdamW is: one kernel for the step's scalars (bias corrections, the loss
      // scale's update), then one multi-tensor launch that, for every parameter, converts and
      // unscales the gradient, updates both moments, decays and updates the fp32 master weight,
      // and keeps all of it when the step is skipped (a program per gradient type, one launch).
      // A parameter whose 16-bit gradient a convolution writes channels-last (a 3x3 filter of more
      // than one input channel, backends/cuda/channels_last.h) is updated by a kernel of its own,
      // which reads the gradient in that layout.
      size_t after_check = 0, update_launches = 0, updated_params = 0, fused = 0, fused_nodes = 0, own_updates = 0;
      bool seen_check = false;
      for (const Unit* u : p.order) {
        if (u->kind == check) seen_check = true;
        else if (seen_check) ++after_check;
        if (u->kind.find("fused ") == std::string::npos) continue;
        ++fused;
        fused_nodes += u->steps.size();
        if (u->kind.find("Mul+Add+Sqrt+Div+Add+Where+Where+Div+Mul+Sub+Where") == std::string::npos) continue;
        ++update_launches;
        const auto* mt = dynamic_cast<const MultiTensorFusedOp*>(u->op.get());
        if (!mt) {
          ++updated_params;
          ++own_updates;
          EXPECT_TRUE(std::any_of(u->in.begin(), u->in.end(), [&](int v) { return v >= 0 && p.desc[v].channels_last; }))
              << "an update of its own reads no channels-last gradient: " << s->program.values[u->out[0]].name;
          continue;
        }
        // Groups of other programs may ride along (BatchNorm's running statistics kept where they
        // would become non-finite: Sub+Equal+Where); an update is the program with Adam's Sqrt.
        for (int v : mt->variant_of_group()) {
          const auto& instrs = mt->programs()[static_cast<size_t>(v)].instrs;
          updated_params += std::any_of(instrs.begin(), instrs.end(), [](const ElemInstr& i) { return i.op == ElemOp::kSqrt; });
        }
      }
      EXPECT_EQ(updated_params, step.params.size()) << listing(p);
      // The filters whose two layouts differ: 4-D, more than one input channel, a window wider than 1.
      size_t filters = 0;
      for (const std::string& name : step.params) {
        const std::vector<int64_t>& d = p.desc[s->program.find(name)].dims;
        filters += d.size() == 4 && d[1] > 1 && d[2] * d[3] > 1;
      }
      if (std::string(model) == "cnn.train.onnx") {
        EXPECT_GT(filters, 0u);
      }
      EXPECT_EQ(own_updates, filters) << listing(p);
      EXPECT_EQ(update_launches, 1u + own_updates) << "one launch for every other parameter, whatever its gradient's type:\n"
                                                   << listing(p);
      EXPECT_EQ(after_check, 2u + own_updates) << "scalars, then the updates:\n" << listing(p);
      EXPECT_GT(fused_nodes, 5 * fused) << "fused units should average more than 5 nodes:\n" << listing(p);
      if (precision == DType::kFloat16) expect_fused_kernels_compile(p);  // NVRTC is slow: one type is enough
    }
  }
}

// Training graphs keep what the backward reads, and products still absorb their epilogues: ReLU's
// gradient reads the ReLU's result (not the product's) through its mask, which the product writes
// too, the bias row is the Cast of a weight, and PyTorch's x @ W^T reads W itself in the backward
// pass, so the forward Transpose has one reader; the weight gradient's final transpose is the
// product's operands swapped.
TEST(CudaSchedule, TrainingForwardProductsKeepTheirEpilogues) {
  auto step_units = [](const char* model) {
    TrainingStep step = mixed_precision_step(model, DType::kFloat16);
    const Schedule s(step.model, step_options(step));
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    return std::make_pair(kinds(p), listing(p));
  };
  auto [mlp, mlp_listing] = step_units("mlp.train.onnx");
  EXPECT_EQ(mlp["Gemm+Relu+Greater"], 2) << mlp_listing;
  EXPECT_EQ(mlp["fused Relu"], 0) << mlp_listing;
  auto [gpt, gpt_listing] = step_units("gpt.train.onnx");
  EXPECT_EQ(gpt["MatMul+Transpose+Add"], 9) << "every Linear of the forward pass:\n" << gpt_listing;
  // Their weight gradients dW = (X^T dY)^T are one product each, dY^T X, nothing transposed,
  // that also sums dY's rows into the bias gradient, though the graph sums dY before its reshape.
  EXPECT_EQ(gpt["MatMul+Transpose+Transpose+ReduceSum"], 9) << gpt_listing;
  // The Casts around the fp32 ops are done by their kernels: LayerNorm writes fp16, its gradient
  // reads the fp16 dY, the loss gradient writes fp16.
  // (With the residual stream's Add before each, and the Cast widening the projection's fp16 sum
  // into it: layer_norm_residual_fusion.h. The first adds the position table.)
  EXPECT_EQ(gpt["LayerNormalization+Add+Cast"] + gpt["LayerNormalization+Add+Cast+Cast"], 5) << gpt_listing;
  // The final LayerNorm's gradient; the four in the blocks also add the residual stream's gradient
  // (layer_norm_residual_fusion.h), three of them also narrowing that sum to fp16 for the product
  // before (read past autodiff's SumToShape), the first block's first going to the embeddings.
  EXPECT_EQ(gpt["LayerNormalizationGrad+Cast"], 1) << gpt_listing;
  EXPECT_EQ(gpt["LayerNormalizationGrad+Add+Cast"], 1) << gpt_listing;
  EXPECT_EQ(gpt["LayerNormalizationGrad+Add+Cast+SumToShape+Cast"], 3) << gpt_listing;
  EXPECT_EQ(gpt["SoftmaxCrossEntropyLossGrad+Cast"], 1) << gpt_listing;
  // Attention is one op (amp-train recognises the exported MatMul, Mul, Where, Softmax, MatMul),
  // in fp16, and its gradient one: no scores, probabilities or masked fill in the plan.
  EXPECT_EQ(gpt["Attention"], 2) << gpt_listing;
  EXPECT_EQ(gpt["AttentionGrad"], 2) << gpt_listing;
  for (const char* gone : {"Softmax+Cast+Cast", "SoftmaxGrad+Cast+Cast", "fused Where+Mul"})
    EXPECT_EQ(gpt[gone], 0) << gone << "\n" << gpt_listing;
  // Autodiff sums each gradient to its input's shape (SumToShape, a pass-through at these
  // shapes); the residual sums and their Casts to fp16 are the LayerNorm gradients'.
  EXPECT_EQ(gpt["fused Add+Cast"], 0) << gpt_listing;
  EXPECT_EQ(gpt["fused Where"] + gpt["fused Mul"], 0) << gpt_listing;
  // GELU is one op (amp-train recognises the exported Div+Erf+Add+Mul+Mul), and its gradient one.
  EXPECT_EQ(gpt["fused Gelu"], 2) << gpt_listing;
  EXPECT_EQ(gpt["fused GeluGrad"], 2) << gpt_listing;
}

// Elementwise steps read past a pass-through: the ops on its two sides fuse, a reader of another
// shape gets the value from the first kernel (which must then write it) and runs after it, and
// the pass-through itself, left without readers, is not in the plan.
TEST(CudaSchedule, ElementwiseOpsFuseAcrossPassThroughsAndReadersOutsideGetTheirValue) {
  const Schedule s(test::pass_through_model(DType::kFloat16), {});
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_with_zero_feeds(s, feeds);
  expect_every_step_placed(s, p);
  std::vector<std::string> got;
  for (const Unit* u : p.order) got.push_back(u->kind);
  EXPECT_EQ(got, (std::vector<std::string>{"fused Where+Neg", "fused Mul"})) << listing(p);
  EXPECT_TRUE(p.views.empty()) << "SumToShape has no reader left";
  ASSERT_EQ(p.order.size(), 2u);
  const int u = s.program.find("u");
  const std::vector<int>& first_out = p.order[0]->out;
  EXPECT_NE(std::find(first_out.begin(), first_out.end(), u), first_out.end()) << "the Mul reads u";
  EXPECT_NE(std::find(p.order[1]->in.begin(), p.order[1]->in.end(), u), p.order[1]->in.end());
}

// The bias gradient of a Linear over 3-D activations is summed before the weight gradient's
// reshape; the product still absorbs it (ProductOp decides per plan whether the epilogue's sum is
// that sum, see CudaBackendGpu.ProductsWithTheirEpiloguesMatchTheCpu).
TEST(CudaSchedule, WeightGradientProductsAbsorbTheBiasGradientOfA3DGradient) {
  for (int64_t cols : {16, 32}) {
    const Schedule s(test::weight_gradient_model(DType::kFloat16, 2, 12, 8, 16, cols), {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    std::vector<std::string> got;
    for (const Unit* u : p.order) got.push_back(u->kind);
    EXPECT_EQ(got, std::vector<std::string>{"MatMul+Transpose+Transpose+ReduceSum"}) << listing(p);
    ASSERT_EQ(p.order[0]->in.size(), 6u);
    EXPECT_EQ(s.program.values[p.order[0]->in[4]].name, "dy") << "the summed tensor is the 3-D gradient";
  }
}

// What the device would compute, checked on the CPU: every fused unit of a training step's plan
// — plan-time groups, merged scalar kernels, multi-tensor launches with several programs — is
// evaluated on the host (evaluate_elementwise_program, the reference the generated kernels are
// compiled from) on the inputs the CPU backend computed for the unfused graph, and must give
// exactly the CPU backend's values of its outputs.
TEST(CudaSchedule, EveryFusedUnitOfATrainingStepComputesWhatTheUnfusedGraphComputes) {
  for (const char* model : {"mlp.train.onnx", "gpt.train.onnx", "cnn.train.onnx"}) {
    SCOPED_TRACE(model);
    TrainingStep step = mixed_precision_step(model, DType::kFloat16);
    const Schedule s(step.model, step_options(step));
    // Random inputs: images in [-1, 1), labels and tokens in {0, 1}, the learning rate 1e-3.
    std::vector<Tensor> feeds = zero_feeds(s);
    std::mt19937 rng(5);
    for (Tensor& t : feeds) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (t.dtype == DType::kFloat) t.mutable_as<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
        else if (t.dtype == DType::kInt64) t.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 2);
      }
      if (t.name == step.lr) *t.mutable_as<float>() = 1e-3f;
    }
    const ShapePlan p = plan_with(s, feeds);

    // Every value a fused unit reads or writes, from one CPU run of the unfused step.
    std::vector<const Unit*> fused;
    std::vector<std::string> names;
    std::map<int, size_t> fetched;
    for (const Unit* u : p.order) {
      if (!dynamic_cast<const FusedElementwiseOp*>(u->op.get()) && !dynamic_cast<const MultiTensorFusedOp*>(u->op.get()))
        continue;
      fused.push_back(u);
      for (const std::vector<int>* list : {&u->in, &u->out})
        for (int v : *list)
          if (!fetched.count(v)) {
            fetched[v] = names.size();
            names.push_back(s.program.values[v].name);
          }
    }
    ASSERT_GE(fused.size(), 5u);
    std::vector<std::pair<std::string, Tensor>> cpu_feeds;
    for (const Tensor& t : feeds) cpu_feeds.emplace_back(t.name, t);
    // Op by op: the values inside the CPU's own fused groups are fetched too.
    CompileOptions unfused{step.state, step.updates, 3, 1};
    unfused.fuse_elementwise = false;
    auto cpu = make_backend("cpu")->compile(step.model, unfused);
    const std::vector<Tensor> values = cpu->run(cpu_feeds, names);

    size_t checked = 0;
    for (const Unit* u : fused) {
      // (program, its operands) per group.
      std::vector<std::pair<const ElementwiseProgram*, size_t>> groups;  // program, first input index
      std::vector<size_t> out_first;
      if (const auto* op = dynamic_cast<const FusedElementwiseOp*>(u->op.get())) {
        groups.push_back({&op->program(), 0});
        out_first.push_back(0);
      } else {
        const auto* mt = dynamic_cast<const MultiTensorFusedOp*>(u->op.get());
        size_t at = 0, out_at = 0;
        for (int v : mt->variant_of_group()) {
          const ElementwiseProgram& prog = mt->programs()[static_cast<size_t>(v)];
          groups.push_back({&prog, at});
          out_first.push_back(out_at);
          at += prog.input_dtypes.size();
          out_at += prog.outputs.size();
        }
        ASSERT_EQ(at, u->in.size()) << u->kind;
        ASSERT_EQ(out_at, u->out.size()) << u->kind;
      }
      for (size_t g = 0; g < groups.size(); ++g) {
        const ElementwiseProgram& prog = *groups[g].first;
        std::vector<const Tensor*> in;
        for (size_t k = 0; k < prog.input_dtypes.size(); ++k) in.push_back(&values[fetched.at(u->in[groups[g].second + k])]);
        const std::vector<Tensor> got = evaluate_elementwise_program(prog, in, u->where);
        for (size_t k = 0; k < got.size(); ++k) {
          const int v = u->out[out_first[g] + k];
          const Tensor& want = values[fetched.at(v)];
          ASSERT_EQ(got[k].dtype, want.dtype) << u->kind << " " << s.program.values[v].name;
          ASSERT_EQ(got[k].numel(), want.numel()) << u->kind << " " << s.program.values[v].name;
          EXPECT_EQ(std::memcmp(got[k].data(), want.data(), want.nbytes()), 0)
              << u->kind << ": " << s.program.values[v].name << " differs from the unfused graph's";
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, fused.size());
  }
}

// Mixed precision widens a step's 16-bit scores for the loss, and both the loss and its gradient
// read the widened copy: for GPT-2 a [tokens, 50257] fp32 tensor (1.6 GB at 8 x 1024 tokens),
// written once and read twice. The two loss units now read the 16-bit scores and widen them as
// they load (CudaOp::reads_any_float), the Cast is held by the first of them, and no unit writes
// the fp32 copy; the ArgMax that counts the correct predictions reads the 16-bit scores too.
TEST(CudaSchedule, TheLossAndItsGradientReadTheSixteenBitScoresThemselves) {
  for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = mixed_precision_step("gpt.train.onnx", precision);
    const Schedule s(step.model, step_options(step));
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    // The widened scores: the loss node's first input, made by a Cast from 16 bits.
    const Value* widened = nullptr;
    for (const Node* n : step.model.graph->nodes())
      if (n->op_type() == "SoftmaxCrossEntropyLoss") widened = n->input(0);
    ASSERT_NE(widened, nullptr);
    ASSERT_TRUE(widened->producer() && widened->producer()->op_type() == "Cast");
    ASSERT_EQ(widened->dtype(), DType::kFloat);
    ASSERT_GE(widened->uses().size(), 2u) << "the loss and its gradient read it";
    const int widened_id = s.program.find(widened->name());
    int loss_units = 0;
    for (const Unit* u : p.order) {
      EXPECT_EQ(std::count(u->out.begin(), u->out.end(), widened_id), 0) << u->kind << " writes the widened scores";
      if (u->kind.rfind("SoftmaxCrossEntropyLoss", 0) != 0) continue;
      ++loss_units;
      const size_t scores = u->kind.rfind("SoftmaxCrossEntropyLossGrad", 0) == 0 ? 1 : 0;
      EXPECT_EQ(p.desc[u->in[scores]].dtype, precision) << u->kind << " reads " << s.program.values[u->in[scores]].name;
    }
    EXPECT_EQ(loss_units, 2) << listing(p);
  }
}

// A value only host steps read besides the kernel computing it (a Shape, which reads dims the plan
// knows) stays in the kernel's registers: autodiff takes the Shape of a residual Add's widened
// operand (Cast(b) below) for the Add's gradient, and the Cast+Add kernel used to store the
// widened copy for it.
TEST(CudaSchedule, FusedKernelsWriteNoValueOnlyHostStepsRead) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* a = g.add_input("a", ValueType::tensor(DType::kFloat, Shape::of({4, 6})));
  Value* b = g.add_input("b", ValueType::tensor(DType::kFloat16, Shape::of({4, 6})));
  Node* widen = g.add_node("Cast", {b}, {"b32"});
  widen->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat)));
  Node* add = g.add_node("Add", {a, widen->output(0)}, {"sum"});
  Node* shape = g.add_node("Shape", {widen->output(0)}, {"shape"});
  Node* reshape = g.add_node("Reshape", {add->output(0), shape->output(0)}, {"y"});
  for (Node* n : {widen, add, reshape}) n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({4, 6})));
  shape->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({2})));
  g.add_output(reshape->output(0));
  const Schedule s(m, {});
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_with_zero_feeds(s, feeds);
  expect_every_step_placed(s, p);
  int kernels = 0;
  for (const Unit* u : p.order) {
    if (u->kind.rfind("fused", 0) != 0) continue;
    ++kernels;
    EXPECT_EQ(u->kind, "fused Cast+Add");
    ASSERT_EQ(u->out.size(), 1u) << "it writes the sum alone, not the widened copy only the Shape reads";
    EXPECT_EQ(s.program.values[u->out[0]].name, "sum");
  }
  EXPECT_EQ(kernels, 1);
}

// The same for every copy unit — Transposes, Slices, the attention's composed and batched copies
// (copy_fusion.h): its copies applied on the host to the inputs the CPU backend computed for the
// unfused graph write exactly the CPU backend's values of its outputs.
TEST(CudaSchedule, EveryCopyUnitOfATrainingStepMovesWhatTheUnfusedGraphMoves) {
  for (const char* model : {"mlp.train.onnx", "gpt.train.onnx", "cnn.train.onnx"}) {
    for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(model) + " " + std::string(dtype_name(precision)));
      TrainingStep step = mixed_precision_step(model, precision);
      const Schedule s(step.model, step_options(step));
      std::vector<Tensor> feeds = zero_feeds(s);
      std::mt19937 rng(6);
      for (Tensor& t : feeds)
        for (int64_t i = 0; i < t.numel(); ++i) {
          if (t.dtype == DType::kFloat) t.mutable_as<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
          else if (t.dtype == DType::kInt64) t.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 2);
        }
      const ShapePlan p = plan_with(s, feeds);
      std::vector<std::pair<const Unit*, std::vector<OperandCopy>>> units;
      std::vector<std::string> names;
      std::map<int, size_t> fetched;
      for (const Unit* u : p.order) {
        std::vector<OperandCopy> copies = u->op->element_copies(unit_shapes(p, *u));
        if (copies.empty()) continue;
        for (const std::vector<int>* list : {&u->in, &u->out})
          for (int v : *list)
            if (!fetched.count(v)) {
              fetched[v] = names.size();
              names.push_back(s.program.values[v].name);
            }
        units.emplace_back(u, std::move(copies));
      }
      if (std::string(model) == "gpt.train.onnx") {
        EXPECT_EQ(units.size(), 8u) << "per layer: the head transposes, the gradients' merge, two single transposes";
      }
      if (units.empty()) continue;
      std::vector<std::pair<std::string, Tensor>> cpu_feeds;
      for (const Tensor& t : feeds) cpu_feeds.emplace_back(t.name, t);
      CompileOptions unfused{step.state, step.updates, 3, 1};
      unfused.fuse_elementwise = false;  // op by op: values inside the CPU's fused groups are fetched too
      auto cpu = make_backend("cpu")->compile(step.model, unfused);
      const std::vector<Tensor> values = cpu->run(cpu_feeds, names);
      for (const auto& [u, copies] : units) {
        std::vector<Tensor> got;
        for (int v : u->out) got.push_back(values[fetched.at(v)]);
        for (Tensor& t : got) std::memset(t.mutable_data(), 0xa5, t.nbytes());
        for (const OperandCopy& c : copies) {
          const Tensor& in = values[fetched.at(u->in[c.input])];
          uint8_t* out = got[c.output].mutable_data();
          for_each_offset(c.copy, [&](int64_t src, int64_t dst) {
            if (src >= 0 && src < in.numel() && dst >= 0 && dst < got[c.output].numel())  // else the layout walk fails
              std::memcpy(out + dst * c.copy.elem_bytes, in.data() + src * c.copy.elem_bytes, c.copy.elem_bytes);
          });
        }
        for (size_t k = 0; k < u->out.size(); ++k)
          EXPECT_TRUE(got[k].same_contents(values[fetched.at(u->out[k])]))
              << u->where << " (" << u->kind << "): " << s.program.values[u->out[k]].name << " differs";
      }
    }
  }
}

// Walks a plan's run order over its device layout: every value a unit, a state update or a fetch
// reads must still hold what was written to it — nothing else written to overlapping arena bytes
// between its write and that read (a unit's outputs never overlap its inputs) — and a view's
// read is a read of its root. Every read value has a home: the arena, state, or the host.
void expect_layout_keeps_every_read_value(const Schedule& s, const ShapePlan& p, const std::vector<Tensor>& feeds,
                                          const std::vector<int>& fetches) {
  const size_t num_values = s.program.values.size();
  std::vector<const Tensor*> fed(num_values, nullptr);
  for (const Tensor& t : feeds) fed[s.program.find(t.name)] = &t;
  const DeviceLayout l = layout_device_memory(s, p, fed, fetches, 256);
  // Writes in run order: (position, value, offset, bytes); fed values are copied in before the
  // first unit, staging copies of fetched state after the last.
  struct Write {
    int64_t pos;
    int value;
    size_t offset, bytes;
  };
  std::vector<Write> writes;
  std::vector<int64_t> written_at(num_values, -2);
  for (size_t v = 0; v < num_values; ++v)
    if (l.offset[v] >= 0 && fed[v]) {
      writes.push_back({-1, static_cast<int>(v), static_cast<size_t>(l.offset[v]), p.desc[v].nbytes()});
      written_at[v] = -1;
    }
  for (int64_t pos = 0; pos < l.end; ++pos)
    for (int v : p.order[pos]->out)
      if (v >= 0 && written_at[v] == -2) {
        written_at[v] = pos;
        if (l.offset[v] >= 0) writes.push_back({pos, v, static_cast<size_t>(l.offset[v]), p.desc[v].nbytes()});
      }
  for (const auto& [v, at] : l.state_fetches) writes.push_back({l.end, -1 - v, at, p.desc[v].nbytes()});

  size_t reads = 0;
  auto check_read = [&](int v, int64_t pos, const std::string& reader) {
    const int r = p.root(v);
    ASSERT_EQ(p.desc[r].nbytes(), p.desc[v].nbytes()) << s.program.values[v].name;
    if (p.desc[r].nbytes() == 0) return;
    ++reads;
    const std::string name = s.program.values[v].name + (r != v ? " (a view of " + s.program.values[r].name + ")" : "");
    if (l.offset[r] < 0) {
      // Not in the arena: state (never overwritten during the step) or a value known on the host.
      EXPECT_TRUE((s.state_of[r] >= 0 && !fed[r]) || p.known[r]) << reader << " reads " << name << ", which has no buffer";
      EXPECT_FALSE(s.state_of[r] >= 0 && !fed[r] && r != v) << name << ": a view of state the step updates";
      return;
    }
    ASSERT_NE(written_at[r], -2) << reader << " reads " << name << " before anything writes it";
    ASSERT_LE(written_at[r], pos) << reader << " reads " << name << " before anything writes it";
    const size_t begin = static_cast<size_t>(l.offset[r]), end = begin + p.desc[r].nbytes();
    for (const Write& w : writes) {
      if (w.value == r || w.pos < written_at[r] || w.pos > pos) continue;
      if (w.offset < end && begin < w.offset + w.bytes) {
        const std::string other = w.value >= 0 ? s.program.values[w.value].name : "a staging copy";
        ADD_FAILURE() << reader << " reads " << name << " after " << other << " overwrote it";
        return;
      }
    }
  };
  for (int64_t pos = 0; pos < l.end; ++pos) {
    const Unit& u = *p.order[pos];
    for (size_t i = 0; i < u.in.size(); ++i)
      if (u.in[i] >= 0 && !u.host_only[i]) check_read(u.in[i], pos, u.where + " (" + u.kind + ")");
  }
  for (const auto& [st, v] : s.updates) check_read(v, l.end, "the update of state " + std::to_string(st));
  for (int v : fetches)
    if (!fed[v] && !(s.state_of[v] >= 0) && !p.known[v]) check_read(v, l.end, "the fetch");
  EXPECT_GT(reads, p.order.size());

  // A copy unit reads parts of its sources and writes parts of its destinations (a composed copy
  // reads q out of qkv; three write the thirds of a Concat's output): every element it reads lies
  // inside its source's buffer, and together its copies write every element of every destination
  // exactly once, so none is left holding what the arena held before.
  for (const Unit* u : p.order) {
    const std::vector<OperandCopy> copies = u->op->element_copies(unit_shapes(p, *u));
    if (copies.empty()) continue;
    std::vector<std::vector<int>> writes(u->out.size());
    for (size_t k = 0; k < u->out.size(); ++k)
      if (u->out[k] >= 0) writes[k].assign(static_cast<size_t>(p.desc[u->out[k]].numel()), 0);
    for (const OperandCopy& c : copies) {
      const int64_t in = p.desc[u->in[c.input]].numel(), out = p.desc[u->out[c.output]].numel();
      EXPECT_EQ(c.copy.elem_bytes, dtype_size(p.desc[u->in[c.input]].dtype)) << u->kind;
      bool inside = true;
      for_each_offset(c.copy, [&](int64_t src, int64_t dst) {
        inside = inside && src >= 0 && src < in && dst >= 0 && dst < out;
        if (inside) ++writes[c.output][static_cast<size_t>(dst)];
      });
      EXPECT_TRUE(inside) << u->where << " (" << u->kind << ") copies outside " << s.program.values[u->in[c.input]].name
                          << " or " << s.program.values[u->out[c.output]].name;
    }
    for (size_t k = 0; k < u->out.size(); ++k)
      EXPECT_TRUE(std::all_of(writes[k].begin(), writes[k].end(), [](int w) { return w == 1; }))
          << u->where << " (" << u->kind << ") does not write every element of "
          << s.program.values[u->out[k]].name << " once";
  }
}

// Reshapes, Flatten and the gradient sums that broadcast nothing at run time are views: they
// share their input's buffer and launch nothing, and the layout keeps the root alive for every
// reader of every view.
TEST(CudaSchedule, ReshapesAndSumsOverNothingAreViewsTheLayoutKeepsAlive) {
  {
    const Schedule s(load("gpt.onnx"), {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    EXPECT_EQ(kinds(p).count("Reshape"), 0u) << listing(p);
    expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
  }
  for (const char* model : {"mlp.train.onnx", "gpt.train.onnx", "cnn.train.onnx"}) {
    for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(model) + " " + std::string(dtype_name(precision)));
      TrainingStep step = mixed_precision_step(model, precision);
      const Schedule s(step.model, step_options(step));
      std::vector<Tensor> feeds;
      const ShapePlan p = plan_with_zero_feeds(s, feeds);
      expect_every_step_placed(s, p);
      const auto k = kinds(p);
      EXPECT_EQ(k.count("Reshape") + k.count("Flatten") + k.count("Squeeze") + k.count("Unsqueeze"), 0u) << listing(p);
      // What remains of SumToShape really sums: a bias row's gradient, a broadcast scalar's.
      for (const Unit* u : p.order)
        if (u->kind == "SumToShape") {
          EXPECT_LT(p.desc[u->out[0]].numel(), p.desc[u->in[0]].numel()) << u->where;
        }
      size_t views = 0;
      for (const Unit* u : p.views) {
        ++views;
        EXPECT_EQ(p.alias_of[u->out[0]], p.root(u->in[0])) << u->where;
        EXPECT_EQ(p.desc[u->out[0]].nbytes(), p.desc[u->in[0]].nbytes()) << u->where;
      }
      EXPECT_GT(views, 0u);
      // Fetch the loss and every state update's source, as a training step does.
      std::vector<int> fetches = s.program.outputs;
      expect_layout_keeps_every_read_value(s, p, feeds, fetches);
    }
  }
}

// A view of state the step updates would read the new value when fetched after the step: such a
// reshape stays a copy.
TEST(CudaSchedule, ReshapesOfUpdatedStateStayCopies) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Tensor w(DType::kFloat, {2, 3});
  w.name = "w";
  Value* wv = g.add_initializer(w);
  Tensor shape(DType::kInt64, {1});
  shape.name = "shape";
  *shape.mutable_as<int64_t>() = 6;
  Value* sv = g.add_initializer(shape);
  Node* flat = g.add_node("Reshape", {wv, sv}, {"flat"});
  flat->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({6})));
  g.add_output(flat->output(0));
  Node* neg = g.add_node("Neg", {wv}, {"w_next"});
  neg->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2, 3})));
  g.add_output(neg->output(0));
  CompileOptions options;
  options.state = {"w"};
  options.state_updates = {{"w", "w_next"}};
  const Schedule s(m, options);
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_with_zero_feeds(s, feeds);
  expect_every_step_placed(s, p);
  EXPECT_EQ(kinds(p)["Reshape"], 1) << listing(p);
  EXPECT_TRUE(p.views.empty());
  expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
}

// A ReLU's gradient mask, Greater(y, 0), read only by the Where of its backward: the forward
// product writes it as cuBLASLt's bitmask (RELU_AUX_BIAS) and the product computing dY W^T
// applies it and sums the bias gradient (DRELU_BGRAD) — no generated kernel reads y and dY to
// write dH, and the weight gradient's product runs plain. The mask takes 1 bit per element, each
// row padded to 128, and the layout keeps it from its write to its last read.
TEST(CudaSchedule, MlpTrainingStepsKeepTheReluMaskAsABitmaskBetweenEpilogues) {
  for (DType precision : {DType::kFloat, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = mixed_precision_step("mlp.train.onnx", precision);
    const Schedule s(step.model, step_options(step));
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    auto k = kinds(p);
    EXPECT_EQ(k["Gemm+Relu+Greater"], 2) << listing(p);
    EXPECT_EQ(k["Gemm+Where+ReduceSum"], 2) << listing(p);
    EXPECT_EQ(k["fused Greater+Where"], 0) << listing(p);
    EXPECT_EQ(k["Gemm+ReduceSum"], 1) << "only the last layer's weight gradient sums its bias:\n" << listing(p);
    std::vector<int> written, read;
    for (const Unit* u : p.order) {
      if (u->kind == "Gemm+Relu+Greater") {
        ASSERT_EQ(u->out.size(), 3u);
        const TensorDesc& mask = p.desc[u->out[2]];
        EXPECT_EQ(mask.dtype, DType::kBool);
        ASSERT_EQ(mask.dims.size(), 2u);
        EXPECT_EQ(mask.nbytes(), static_cast<size_t>(mask.dims[0] * 128 / 8)) << "features 128 and 64: one 128-bit row each";
        written.push_back(u->out[2]);
      }
      if (u->kind == "Gemm+Where+ReduceSum") {
        ASSERT_EQ(u->in.size(), 6u);
        read.push_back(u->in[5]);
      }
    }
    std::sort(written.begin(), written.end());
    std::sort(read.begin(), read.end());
    EXPECT_EQ(written, read) << "every mask written is read by one backward product";
    expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
  }
}

// When anything else reads the mask as bool (here a Cast to the layer's type), it stays a bool
// tensor: the forward product keeps RELU_BIAS, the Greater and Where run as a generated kernel and
// the weight gradient's product sums the bias gradient (BGRADA).
// GELU's tanh form on a product's result: the forward product takes the bias and the Gelu
// (GELU_AUX_BIAS, h its aux result), the backward product dY W^T the GeluGrad (DGELU, reading h),
// and the weight gradient's product the bias gradient's sum (BGRADA/B); with
// AMP_CUDA_DGELU_BGRAD=1 the backward product sums it (DGELU_BGRAD) and the weight gradient is a
// plain product. The exact (erf) form is no epilogue of cuBLASLt's: a product followed by it keeps a
// generated GELU kernel.
TEST(CudaSchedule, TanhGeluLayersRunOnCublasLtsGeluEpilogues) {
  for (const char* bgrad : {"", "1"}) {
    SCOPED_TRACE(std::string("AMP_CUDA_DGELU_BGRAD=") + bgrad);
    const test::ScopedEnv env("AMP_CUDA_DGELU_BGRAD", bgrad);
    const Schedule s(test::gelu_layer_model(DType::kFloat16, 8), {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    std::vector<std::string> got;
    for (const Unit* u : p.order) got.push_back(u->kind);
    const std::vector<std::string> want =
        *bgrad ? std::vector<std::string>{"Gemm+Gelu", "Gemm", "Gemm+GeluGrad+ReduceSum", "Gemm"}
               : std::vector<std::string>{"Gemm+Gelu", "Gemm", "Gemm+GeluGrad", "Gemm+ReduceSum"};
    EXPECT_EQ(got, want) << listing(p);
    ASSERT_EQ(p.order[0]->out.size(), 3u);
    EXPECT_EQ(s.program.values[p.order[0]->out[2]].name, "h") << "GELU's input is the aux result";
    EXPECT_EQ(p.desc[p.order[0]->out[2]].packed_bytes, 0u) << "stored as its type";
    ASSERT_EQ(p.order[2]->in.size(), 6u);
    EXPECT_EQ(s.program.values[p.order[2]->in[5]].name, "h");
  }
  std::vector<Tensor> feeds;
  std::vector<std::string> got;

  Model exact = test::gelu_layer_model(DType::kFloat16, 8);
  for (Node* n : exact.graph->nodes())
    if (n->domain() == kAmpDomain) n->set_attr(Attribute::of_string("approximate", "none"));
  const Schedule e(exact, {});
  const ShapePlan q = plan_with_zero_feeds(e, feeds);
  for (const Unit* u : q.order) got.push_back(u->kind);
  EXPECT_EQ(got, (std::vector<std::string>{"Gemm", "fused Gelu", "Gemm", "Gemm", "fused GeluGrad", "Gemm+ReduceSum"}))
      << listing(q);
}

// In a transformer's training step (gpt with GPT-2's tanh GELU): the MLP's first product over
// [N, T, C] rows writes gelu(h) and h, the backward product of the second writes dh (DGELU), and
// the first's weight gradient product its bias gradient; with AMP_CUDA_DGELU_BGRAD=1 the backward
// product writes both and the weight gradient's product is left plain.
TEST(CudaSchedule, TanhGeluTransformerStepsUseTheGeluEpiloguePair) {
  for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step(test::gpt_with_tanh_gelu(), precision);
    std::vector<Tensor> feeds;
    std::map<std::string, int> k;
    {
      const test::ScopedEnv on("AMP_CUDA_DGELU_BGRAD", "1");
      const Schedule s(step.model, step_options(step));
      const ShapePlan p = plan_with_zero_feeds(s, feeds);
      expect_every_step_placed(s, p);
      k = kinds(p);
      EXPECT_EQ(k["MatMul+Transpose+Add+Gelu"], 2) << listing(p);
      EXPECT_EQ(k["MatMul+GeluGrad+ReduceSum"], 2) << listing(p);
      EXPECT_EQ(k["fused Gelu"] + k["fused GeluGrad"], 0) << listing(p);
    }
    // The default: the backward product keeps DGELU alone, and the bias gradient's sum goes to the
    // first product's weight gradient (BGRADA/B).
    const Schedule apart(step.model, step_options(step));
    const ShapePlan q = plan_with_zero_feeds(apart, feeds);
    expect_every_step_placed(apart, q);
    auto a = kinds(q);
    EXPECT_EQ(a["MatMul+Transpose+Add+Gelu"], 2) << listing(q);
    EXPECT_EQ(a["fused Gelu"] + a["fused GeluGrad"], 0) << listing(q);
    EXPECT_EQ(a["MatMul+GeluGrad+ReduceSum"], 0) << listing(q);
    EXPECT_EQ(a["MatMul+GeluGrad"], 2) << listing(q);
    auto weight_gradient_sums = [](std::map<std::string, int>& of) {  // products with a bias gradient
      int n = 0;
      for (const auto& [kind, count] : of)
        if (kind.rfind("MatMul+Transpose", 0) == 0 && kind.size() > 10 && kind.substr(kind.size() - 10) == "+ReduceSum")
          n += count;
      return n;
    };
    EXPECT_EQ(weight_gradient_sums(a), weight_gradient_sums(k) + 2) << listing(q);
    EXPECT_EQ(a["ReduceSum"], k["ReduceSum"]) << "no sum of its own" << listing(q);
  }
}

TEST(CudaSchedule, ReluMasksReadAsBoolStayBoolTensors) {
  for (bool read_as_bool : {false, true}) {
    const Schedule s(test::relu_layer_model(DType::kFloat16, 8, read_as_bool), {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    auto k = kinds(p);
    if (read_as_bool) {
      EXPECT_EQ(k["Gemm+Relu"], 1) << listing(p);
      EXPECT_EQ(k["Gemm+ReduceSum"], 1) << listing(p);
      EXPECT_EQ(k.count("Gemm+Where+ReduceSum"), 0u) << listing(p);
      for (const TensorDesc& d : p.desc) EXPECT_EQ(d.packed_bytes, 0u);
    } else {
      std::vector<std::string> got;
      for (const Unit* u : p.order) got.push_back(u->kind);
      EXPECT_EQ(got, (std::vector<std::string>{"Gemm+Relu+Greater", "Gemm", "Gemm+Where+ReduceSum", "Gemm"})) << listing(p);
      EXPECT_EQ(p.desc[s.program.find("mask")].nbytes(), 8u * 128 / 8);
    }
    expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
  }
}

// ---- Copy fusion (copy_fusion.h)

// What c writes into a destination of dst_size elements (-1 where it writes nothing), from src.
std::vector<int32_t> apply_copy(const StridedCopy& c, const std::vector<int32_t>& src, size_t dst_size) {
  std::vector<int32_t> dst(dst_size, -1);
  for_each_offset(c, [&](int64_t s, int64_t d) {
    ASSERT_TRUE(s >= 0 && s < static_cast<int64_t>(src.size())) << "source offset " << s;
    ASSERT_TRUE(d >= 0 && d < static_cast<int64_t>(dst_size)) << "destination offset " << d;
    dst[static_cast<size_t>(d)] = src[static_cast<size_t>(s)];
  });
  return dst;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The copies data_movement_ops.cc makes, over contiguous tensors: Transpose, a Slice window (start
// and step per axis), a part of a whole along an axis (Split reads one, Concat writes one).
StridedCopy transpose_copy(const std::vector<int64_t>& in, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> strides = contiguous_strides(in);
  StridedCopy c;
  for (int64_t p : perm) {
    c.dims.push_back(in[static_cast<size_t>(p)]);
    c.src_strides.push_back(strides[static_cast<size_t>(p)]);
  }
  c.dst_strides = contiguous_strides(c.dims);
  return c;
}
StridedCopy slice_copy(const std::vector<int64_t>& in, const std::vector<int64_t>& start,
                       const std::vector<int64_t>& step, const std::vector<int64_t>& count) {
  const std::vector<int64_t> strides = contiguous_strides(in);
  StridedCopy c;
  c.dims = count;
  c.dst_strides = contiguous_strides(count);
  for (size_t d = 0; d < in.size(); ++d) {
    c.src_strides.push_back(strides[d] * step[d]);
    c.src_base += start[d] * strides[d];
  }
  return c;
}
StridedCopy part_copy(const std::vector<int64_t>& part, const std::vector<int64_t>& whole, size_t axis, int64_t offset,
                      bool into_whole) {
  const std::vector<int64_t> ps = contiguous_strides(part), ws = contiguous_strides(whole);
  StridedCopy c;
  c.dims = part;
  c.src_strides = into_whole ? ps : ws;
  c.dst_strides = into_whole ? ws : ps;
  (into_whole ? c.dst_base : c.src_base) = offset * ws[axis];
  return c;
}

// A copy composed with the one that made its source (read_through) moves what the two move one
// after the other, element for element, or is refused: a reader over another view of the
// producer's output (a reshape merging or splitting its dims), steps of any sign, Split parts and
// Concat parts, Expand's repeats. The attention's chains always compose; a walk that carries
// across the producer's dims never does.
TEST(CudaSchedule, ComposedCopiesMoveWhatTheChainMoves) {
  // Applies producer then reader to 0, 1, 2, ... and the composition to the same, and compares.
  auto check = [](const StridedCopy& producer, const StridedCopy& reader, int64_t source_size, int64_t made_size,
                  int64_t read_size, const std::string& what) {
    std::vector<int32_t> source(static_cast<size_t>(source_size));
    for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<int32_t>(k);
    const std::vector<int32_t> made = apply_copy(simplify(producer), source, static_cast<size_t>(made_size));
    const std::vector<int32_t> want = apply_copy(simplify(reader), made, static_cast<size_t>(read_size));
    const std::optional<StridedCopy> c = read_through(simplify(reader), simplify(producer));
    if (c) {
      EXPECT_EQ(apply_copy(*c, source, static_cast<size_t>(read_size)), want) << what;
    }
    return c.has_value();
  };
  constexpr int64_t N = 2, T = 3, H = 2, D = 4, C = H * D;
  for (size_t part = 0; part < 3; ++part) {
    // A Split part of qkv [N,T,3C] as [N,T,H,D], transposed to [N,H,T,D] and to [N,H,D,T].
    const StridedCopy split = part_copy({N, T, C}, {N, T, 3 * C}, 2, static_cast<int64_t>(part) * C, false);
    for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 2, 1, 3}, std::vector<int64_t>{0, 2, 3, 1}})
      EXPECT_TRUE(check(split, transpose_copy({N, T, H, D}, perm), N * T * 3 * C, N * T * C, N * T * C,
                        "Split part " + std::to_string(part) + " then Transpose"));
    // The backward: [N,H,T,D] transposed to [N,T,H,D], read as [N,T,C] into its third of [N,T,3C].
    EXPECT_TRUE(check(transpose_copy({N, H, T, D}, {0, 2, 1, 3}),
                      part_copy({N, T, C}, {N, T, 3 * C}, 2, static_cast<int64_t>(part) * C, true), N * T * C,
                      N * T * C, N * T * 3 * C, "Transpose then Concat part " + std::to_string(part)));
  }
  // Every 5th of a transposed [4,3] read as 12 elements carries across its dims: refused.
  EXPECT_FALSE(check(transpose_copy({3, 4}, {1, 0}), slice_copy({12}, {0}, {5}, {3}), 12, 12, 3, "every 5th"));

  // Random chains: a producer (Transpose, Slice or Split part) making X from a contiguous source;
  // a reader (Transpose, Slice, Concat part or Expand) of X seen under other dims (X's dims with
  // neighbours merged or one split in two, as a Reshape between them would).
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  // A slice of dims with random starts, steps of either sign up to max_step, and counts that fit;
  // and how many elements it reads.
  auto random_slice = [&](const std::vector<int64_t>& dims, int64_t max_step) {
    std::vector<int64_t> start, step, count;
    for (int64_t d : dims) {
      step.push_back(pick(0, 1) ? pick(1, max_step) : -pick(1, max_step));
      start.push_back(pick(0, d - 1));
      const int64_t room = step.back() > 0 ? (d - 1 - start.back()) / step.back() : start.back() / -step.back();
      count.push_back(pick(1, room + 1));
    }
    return std::make_pair(slice_copy(dims, start, step, count), numel_of(count));
  };
  size_t composed = 0, tried = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<int64_t> source(static_cast<size_t>(pick(1, 4)));
    for (int64_t& d : source) d = pick(1, 5);
    StridedCopy producer;
    const int64_t producer_kind = pick(0, 2);
    if (producer_kind == 0) {
      std::vector<int64_t> perm(source.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      producer = transpose_copy(source, perm);
    } else if (producer_kind == 1) {
      producer = random_slice(source, 2).first;
    } else {
      const size_t axis = static_cast<size_t>(pick(0, static_cast<int64_t>(source.size()) - 1));
      std::vector<int64_t> part = source;
      part[axis] = pick(1, source[axis]);
      producer = part_copy(part, source, axis, pick(0, source[axis] - part[axis]), false);
    }
    const std::vector<int64_t> x = producer.dims;
    // The reader's view of X: neighbours merged, or a dim split in two, or as it is.
    std::vector<int64_t> view = x;
    const int64_t reshape = pick(0, 2);
    if (reshape == 1 && view.size() >= 2) {
      const size_t at = static_cast<size_t>(pick(0, static_cast<int64_t>(view.size()) - 2));
      view[at] *= view[at + 1];
      view.erase(view.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    } else if (reshape == 2) {
      for (size_t at = 0; at < view.size(); ++at)
        if (view[at] % 2 == 0 && view[at] > 2) {
          view[at] /= 2;
          view.insert(view.begin() + static_cast<std::ptrdiff_t>(at) + 1, 2);
          break;
        }
    }
    StridedCopy reader;
    int64_t read_size = 0;
    const int64_t reader_kind = pick(0, 3);
    if (reader_kind == 0) {
      std::vector<int64_t> perm(view.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      reader = transpose_copy(view, perm);
      read_size = numel_of(view);
    } else if (reader_kind == 1) {
      std::tie(reader, read_size) = random_slice(view, 3);
    } else if (reader_kind == 2) {
      const size_t axis = static_cast<size_t>(pick(0, static_cast<int64_t>(view.size()) - 1));
      std::vector<int64_t> whole = view;
      whole[axis] += pick(0, 3);
      reader = part_copy(view, whole, axis, pick(0, whole[axis] - view[axis]), true);
      read_size = numel_of(whole);
    } else {
      // Expand: X's view with a new outer dim of 2 and its dims of 1 repeated 3 times.
      std::vector<int64_t> out = {2};
      std::vector<int64_t> strides = {0};
      const std::vector<int64_t> vs = contiguous_strides(view);
      for (size_t d = 0; d < view.size(); ++d) {
        out.push_back(view[d] == 1 ? 3 : view[d]);
        strides.push_back(view[d] == 1 ? 0 : vs[d]);
      }
      reader.dims = out;
      reader.src_strides = strides;
      reader.dst_strides = contiguous_strides(out);
      read_size = numel_of(out);
    }
    ++tried;
    const std::string what = "round " + std::to_string(round);
    composed += check(producer, reader, numel_of(source), numel_of(x), read_size, what) ? 1 : 0;
    if (HasFailure()) break;
  }
  // Nearly all compose (2990 of these 3000): only a reader's step that crosses the producer's dims
  // unevenly cannot, as every 5th element above.
  EXPECT_GT(composed, tried * 95 / 100) << composed << " of " << tried;
}

// The attention's copies in the gpt training steps: the forward's Split is not run and its three
// head transposes read qkv in one launch; the backward's three transposes are not run and the
// Concat's copies read the gradients they read, in one launch. Neither the Split's outputs nor the
// backward transposes' have a buffer; the transposes of the attention's output and of its
// gradient stay (products write and read those), one per layer each way.
TEST(CudaSchedule, AttentionSplitsTransposesAndConcatsRunAsOneCopyLaunchEach) {
  for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = mixed_precision_step("gpt.train.onnx", precision);
    const Schedule s(step.model, step_options(step));
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    const auto k = kinds(p);
    EXPECT_EQ(k.count("Split") + k.count("Concat"), 0u) << listing(p);
    EXPECT_EQ(k.at("copy x3 Split>Transpose"), 2) << listing(p);
    EXPECT_EQ(k.at("copy x3 Transpose>Concat"), 2) << listing(p);
    EXPECT_EQ(k.at("Transpose"), 4) << listing(p);
    for (const auto& [kind, n] : k) EXPECT_EQ(kind.find("copy x1"), std::string::npos) << kind;
    std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
    for (const Tensor& t : feeds) fed[s.program.find(t.name)] = &t;
    const DeviceLayout l = layout_device_memory(s, p, fed, s.program.outputs, 256);
    auto op_of_only_reader = [&](int v) {
      return s.readers[v].size() == 1 ? s.program.steps[s.readers[v][0]].op : std::string();
    };
    size_t unmade = 0;
    for (const Program::Step& st : s.program.steps) {
      bool read_through = st.op == "Split";  // by the head transposes
      if (st.op == "Transpose" && op_of_only_reader(st.out[0]) == "Reshape") {
        const Program::Step& reshape = s.program.steps[s.readers[st.out[0]][0]];
        read_through = op_of_only_reader(reshape.out[0]) == "Concat";  // by the Concat
      }
      if (!read_through) continue;
      for (int v : st.out) {
        EXPECT_TRUE(l.offset[v] < 0 && !l.on_device[v]) << s.program.values[v].name << " has a buffer";
        ++unmade;
      }
    }
    EXPECT_EQ(unmade, 12u) << "2 layers: 3 Split outputs and 3 backward transposes each";
    expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
  }
}

// The plans of targeted chains (copy_chain_model.h): what composes, what a reader elsewhere keeps,
// and every layout still holding what is read.
TEST(CudaSchedule, CopyChainsComposeUnlessAValueIsNeededElsewhere) {
  struct Case {
    const char* what;
    test::CopyChains parts;
    std::vector<std::string> units;
    std::vector<std::string> unmade;  // values no unit writes
  };
  const auto parts = test::copy_chains;
  const std::vector<Case> cases = {
      {"Split then transposes", parts(true, false, false, false, false), {"copy x3 Split>Transpose"}, {"q", "k", "v"}},
      {"a Split output fetched", parts(true, false, false, true, false),
       {"Split", "copy x3 Transpose | Split>Transpose | Split>Transpose"}, {"k", "v"}},
      {"transposes then Concat", parts(false, true, false, false, false), {"copy x3 Transpose>Concat"},
       {"dq_t", "dk_t", "dv_t"}},
      {"a Concat input read elsewhere", parts(false, true, false, false, true),
       {"Transpose", "copy x3 Concat | Transpose>Concat | Transpose>Concat", "fused Neg"}, {"dk_t", "dv_t"}},
      {"negative steps", parts(false, false, true, false, false),
       {"copy x4 Slice>Transpose | Slice>Slice | Transpose>Slice | Transpose", "Slice"}, {"reversed", "window", "x_t"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Schedule s(test::copy_chain_model(DType::kFloat16, c.parts), {});
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_with_zero_feeds(s, feeds);
    expect_every_step_placed(s, p);
    std::vector<std::string> got;
    for (const Unit* u : p.order) got.push_back(u->kind);
    EXPECT_EQ(got, c.units) << listing(p);
    for (const std::string& name : c.unmade) {
      const int v = s.program.find(name);
      for (const Unit* view : p.views) EXPECT_NE(p.root(view->out[0]), v) << "a view of " << name << " is left";
      for (const Unit* u : p.order)
        for (const std::vector<int>* list : {&u->in, &u->out})
          EXPECT_EQ(std::count(list->begin(), list->end(), v), 0) << name << " is an operand of " << u->kind;
    }
    expect_layout_keeps_every_read_value(s, p, feeds, s.program.outputs);
  }
}

TEST(CudaSchedule, OpsWithoutADeviceKernelAreRefusedNamingTheNode) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({4, 3})));
  Value* t = g.add_input("t", ValueType::tensor(DType::kInt64, Shape::of({4})));
  Node* n = g.add_node("NegativeLogLikelihoodLoss", {x, t}, {"loss"});
  n->name = "nll";
  n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({})));
  g.add_output(n->output(0));
  try {
    Schedule s(m, {});
    FAIL() << "scheduled an op the device cannot run";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nll (NegativeLogLikelihoodLoss)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not supported by the cuda backend"), std::string::npos) << e.what();
  }
}

TEST(CudaSchedule, ShapesThatDependOnDeviceStateAreRefused) {
  // Reshape(x, Cast(w)) with w a weight: its contents live on the device, a plan cannot read them.
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 3})));
  Tensor w(DType::kFloat, {2});
  w.name = "w";
  Value* wv = g.add_initializer(w);
  Node* cast = g.add_node("Cast", {wv}, {"as_int"});
  cast->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kInt64)));
  cast->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({2})));
  Node* flat = g.add_node("Reshape", {x, cast->output(0)}, {"y"});
  flat->name = "reshape";
  flat->output(0)->set_type(ValueType::tensor(DType::kFloat, std::nullopt));
  g.add_output(flat->output(0));
  try {
    Schedule s(m, {});
    FAIL() << "accepted a shape computed from device state";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("computed on the device"), std::string::npos) << e.what();
  }
}

// An initializer a step reads as a shape input (Reshape's shape, PadGrad's amounts) is a constant
// the plan reads, not device state, when the state is left to the backend; named as state, it is
// refused by name rather than planned without its contents.
TEST(CudaSchedule, InitializersReadAsShapesAreNotDeviceState) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 3})));
  Tensor w(DType::kFloat, {3});
  w.name = "w";
  Tensor shape(DType::kInt64, {1});
  shape.mutable_as<int64_t>()[0] = 6;
  shape.name = "shape";
  Node* mul = g.add_node("Mul", {x, g.add_initializer(w)}, {"xw"});
  mul->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2, 3})));
  Node* flat = g.add_node("Reshape", {mul->output(0), g.add_initializer(shape)}, {"y"});
  flat->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({6})));
  g.add_output(flat->output(0));
  const Schedule s(m, {});
  ASSERT_EQ(s.state_values.size(), 1u);
  EXPECT_EQ(s.program.values[s.state_values[0]].name, "w");
  const Tensor feed = Tensor(DType::kFloat, {2, 3});
  std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
  fed[s.program.find("x")] = &feed;
  const ShapePlan p = s.plan(fed, {TensorDesc{DType::kFloat, {3}}}, {s.program.find("y")});
  EXPECT_EQ(p.desc[s.program.find("y")].dims, std::vector<int64_t>{6});
  CompileOptions named;
  named.state = {"w", "shape"};
  try {
    Schedule refused(m, named);
    FAIL() << "planned with a shape input as device state";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("state 'shape' is read as a shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amp::cuda

#endif
