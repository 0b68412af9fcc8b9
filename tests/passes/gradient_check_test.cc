// Every gradient rule against central finite differences, in float64 on the CPU backend. Each case
// is one forward node with random inputs; the loss is Σ_k ReduceSum(Y_k · R_k) with fixed random
// R_k, so every element of every output carries its own weight. The analytic gradient (the rule's
// nodes, run by the backend) must match (L(x + h) - L(x - h)) / 2h for every element of every
// differentiable input. The demo models, cast to float64, are checked the same way on sampled
// parameter elements, which covers the rules chained as real models chain them.
#include <gtest/gtest.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph_builder.h"
#include "passes/training/loss.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

constexpr double kStep = 1e-5;
constexpr double kTolerance = 2e-6;  // relative to max(1, |finite difference|)

enum class Fill { kRandom, kPositive, kSpread, kWide, kSomeZeros, kInside, kAboveOne, kPastEdges };

// One input of the node under test: a differentiable float64 graph input, or a constant.
struct In {
  std::vector<int64_t> dims;
  Fill fill = Fill::kRandom;
  std::optional<Tensor> constant;  // set: an initializer (indices, shapes, masks), not differentiated
  bool absent = false;
  bool symbolic = false;  // the graph input's dims after the first two are symbols, not numbers
};

In x(std::vector<int64_t> dims, Fill f = Fill::kRandom) { return In{std::move(dims), f, std::nullopt, false}; }
// A differentiable input whose spatial dims the graph does not know (the rules must read them at
// run time), as in a model whose activations come out of computed Reshapes.
In x_symbolic(std::vector<int64_t> dims) { return In{std::move(dims), Fill::kRandom, std::nullopt, false, true}; }
template <class T>
In constant(DType t, std::vector<int64_t> dims, std::vector<T> values) {
  Tensor c(t, dims);
  std::memcpy(c.mutable_data(), values.data(), values.size() * sizeof(T));
  return In{std::move(dims), Fill::kRandom, std::move(c), false};
}
In ints(std::vector<int64_t> v) { return constant<int64_t>(DType::kInt64, {static_cast<int64_t>(v.size())}, v); }
In bools(std::vector<int64_t> dims, std::vector<uint8_t> v) { return constant<uint8_t>(DType::kBool, std::move(dims), v); }
In scalar(double v) { return constant<double>(DType::kDouble, {}, {v}); }

// An attribute as plain data (Attribute itself moves but does not copy; test parameters copy).
struct Attr {
  std::string name;
  AttrKind kind;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats = {};
  std::vector<std::string> strings = {};
};

struct Case {
  std::string name;
  std::string op;
  std::vector<In> inputs;
  std::vector<Attr> attrs;
  size_t outputs = 1;
  std::vector<size_t> loss_outputs = {0};
  std::string domain;
  // false: the outputs take input 0's type instead of ONNX's inference, for an op whose ONNX
  // schema or function body rejects float64 though the CPU kernel takes it (Celu's schema takes
  // float only; MeanVarianceNormalization's body adds a float epsilon).
  bool onnx_types = true;
};

Case typed_like_input(Case c) {
  c.onnx_types = false;
  return c;
}

Case make(std::string name, std::string op, std::vector<In> inputs, std::vector<Attr> attrs = {},
          size_t outputs = 1, std::vector<size_t> loss_outputs = {0}) {
  return Case{std::move(name), std::move(op), std::move(inputs), std::move(attrs), outputs, std::move(loss_outputs), ""};
}

Tensor random_tensor(const std::vector<int64_t>& dims, Fill fill, std::mt19937& rng) {
  Tensor t(DType::kDouble, dims);
  std::uniform_real_distribution<double> u(-1, 1), pos(0.5, 2.0), wide(-5, 5);
  // kSpread draws from one grid of 1000 values without repeats, so any two spread values (of any
  // input) differ by at least 0.002 and Max, Min and MaxPool decide by a margin far above h.
  static std::vector<int> grid;
  if (grid.empty()) {
    for (int i = 0; i < 1000; ++i) grid.push_back(i);
    std::shuffle(grid.begin(), grid.end(), std::mt19937(7));
  }
  static size_t next = 0;
  double* p = t.mutable_as<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (fill == Fill::kPositive) {
      p[i] = pos(rng);
    } else if (fill == Fill::kInside) {
      p[i] = 0.9 * u(rng);  // inside (-1, 1) away from its ends: Asin, Acos, Atanh
    } else if (fill == Fill::kAboveOne) {
      p[i] = 1 + pos(rng);  // in [1.5, 3]: Acosh
    } else if (fill == Fill::kPastEdges) {
      p[i] = 1.3 * u(rng);  // GridSample's grid: inside [-1, 1] and past it, into every padding mode
    } else if (fill == Fill::kSpread) {
      p[i] = -1 + 2 * (grid[next++ % grid.size()] + 0.5) / 1000.0;
    } else if (fill == Fill::kWide) {
      // Over every piece of the piecewise activations, away from their kinks (HardSwish's and
      // nn.Hardsigmoid's at -3 and 3, HardSigmoid's with ONNX's defaults at -2.5 and 2.5).
      auto near_kink = [](double v) {
        for (double k : {-3.0, -2.5, 2.5, 3.0})
          if (std::fabs(v - k) < 0.05) return true;
        return false;
      };
      do p[i] = wide(rng);
      while (near_kink(p[i]));
    } else if (fill == Fill::kSomeZeros && (i == 1 || i == 8 || i == 9)) {
      p[i] = 0;  // ReduceProd over rows of 6: rows with one, two and no zeros
    } else {
      p[i] = u(rng);
      if (std::fabs(p[i]) < 0.05) p[i] += p[i] < 0 ? -0.05 : 0.05;  // away from Relu/Abs kinks
    }
  }
  return t;
}

// Runs ONNX shape inference so the IR carries every output's type, as an imported model would.
void infer_types(Model& m) {
  register_amp_op_schemas();
  onnx::ModelProto p = to_proto(m);
  onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
  onnx::shape_inference::InferShapes(p, onnx::OpSchemaRegistry::Instance(), options);
  Model typed = from_proto(p, "gradient-check", ".");
  for (Node* n : typed.graph->nodes())
    for (Value* v : n->outputs())
      if (v) m.graph->lookup(v->name())->set_type(v->type());
}

struct Checked {
  Model m;
  std::vector<Value*> wrt;
  std::vector<Tensor> values;  // of wrt
  Value* loss = nullptr;
  std::vector<Value*> grads;
};

std::vector<std::pair<std::string, Tensor>> feeds_of(const Checked& c) {
  std::vector<std::pair<std::string, Tensor>> f;
  for (size_t i = 0; i < c.wrt.size(); ++i) f.emplace_back(c.wrt[i]->name(), c.values[i]);
  return f;
}

// Appends L = Σ ReduceSum(Y_k · R_k) over the given outputs, R_k random of Y_k's run-time shape.
Value* weighted_sum_loss(Model& m, const std::vector<Value*>& ys, const std::vector<std::vector<int64_t>>& dims,
                         std::mt19937& rng) {
  GraphBuilder b(*m.graph);
  Value* loss = nullptr;
  for (size_t k = 0; k < ys.size(); ++k) {
    Tensor r = random_tensor(dims[k], Fill::kRandom, rng);
    r.name = m.graph->fresh_name("R");
    Value* rv = m.graph->add_initializer(std::move(r));
    Value* term = b.reduce_sum(b.mul(ys[k], rv), {}, false);
    loss = loss ? b.add(loss, term) : term;
  }
  loss->set_type(ValueType::tensor(DType::kDouble, Shape::of({})));
  return loss;
}

// Analytic gradients against central differences, element by element; `sample` limits the
// elements checked per input (0: all).
void compare_with_finite_differences(Checked& c, size_t sample, std::mt19937& rng) {
  std::vector<std::string> fetches{c.loss->name()};
  for (size_t i = 0; i < c.grads.size(); ++i) {
    ASSERT_NE(c.grads[i], nullptr) << "no gradient for " << c.wrt[i]->name();
    c.m.graph->add_output(c.grads[i]);
    fetches.push_back(c.grads[i]->name());
  }
  auto exe = make_backend("cpu")->compile(c.m, CompileOptions{});
  std::vector<Tensor> got = exe->run(feeds_of(c), fetches);
  auto loss_at = [&](size_t input, int64_t element, double delta) {
    auto feeds = feeds_of(c);
    feeds[input].second.mutable_as<double>()[element] += delta;
    return exe->run(feeds, {c.loss->name()})[0].as<double>()[0];
  };
  for (size_t i = 0; i < c.wrt.size(); ++i) {
    const Tensor& grad = got[i + 1];
    ASSERT_EQ(grad.dims, c.values[i].dims) << c.wrt[i]->name();
    std::vector<int64_t> elements;
    for (int64_t e = 0; e < grad.numel(); ++e) elements.push_back(e);
    if (sample && elements.size() > sample) {
      std::shuffle(elements.begin(), elements.end(), rng);
      elements.resize(sample);
    }
    for (int64_t e : elements) {
      const double fd = (loss_at(i, e, kStep) - loss_at(i, e, -kStep)) / (2 * kStep);
      const double analytic = grad.as<double>()[e];
      EXPECT_NEAR(analytic, fd, kTolerance * std::max(1.0, std::fabs(fd)))
          << "d loss / d " << c.wrt[i]->name() << "[" << e << "]";
    }
  }
}

void check_case(const Case& k) {
  std::mt19937 rng(1234);
  Checked c;
  c.m.opset_imports = {{"", 17}, {kAmpDomain, kAmpDomainVersion}};
  Graph& g = *c.m.graph;
  g.name = k.name;
  std::vector<Value*> ins;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const In& in = k.inputs[i];
    if (in.absent) {
      ins.push_back(nullptr);
    } else if (in.constant) {
      Tensor t = *in.constant;
      t.name = "c" + std::to_string(i);
      ins.push_back(g.add_initializer(std::move(t)));
    } else {
      Shape shape = Shape::of(in.dims);
      if (in.symbolic)
        for (size_t d = 2; d < shape.dims.size(); ++d) shape.dims[d] = Dim::symbol("s" + std::to_string(d));
      Value* v = g.add_input("x" + std::to_string(i), ValueType::tensor(DType::kDouble, shape));
      ins.push_back(v);
      c.wrt.push_back(v);
      c.values.push_back(random_tensor(in.dims, in.fill, rng));
    }
  }
  std::vector<std::string> names;
  for (size_t o = 0; o < k.outputs; ++o) names.push_back("y" + std::to_string(o));
  Node* n = g.add_node(k.op, ins, names, k.domain);
  for (const Attr& a : k.attrs) {
    Attribute attr;
    attr.name = a.name;
    attr.kind = a.kind;
    attr.i = a.i;
    attr.f = a.f;
    attr.s = a.s;
    attr.ints = a.ints;
    attr.floats = a.floats;
    attr.strings = a.strings;
    n->set_attr(std::move(attr));
  }
  for (Value* y : n->outputs()) g.add_output(y);
  if (k.onnx_types) {
    infer_types(c.m);
  } else {
    for (Value* y : n->outputs()) y->set_type(n->input(0)->type());
  }

  // Output shapes from one forward run, then the weighted loss over them.
  std::vector<std::string> out_names;
  for (size_t o : k.loss_outputs) out_names.push_back(n->output(o)->name());
  std::vector<Tensor> outs = make_backend("cpu")->compile(c.m, CompileOptions{})->run(feeds_of(c), out_names);
  std::vector<Value*> ys;
  std::vector<std::vector<int64_t>> dims;
  for (size_t j = 0; j < outs.size(); ++j) {
    ys.push_back(n->output(k.loss_outputs[j]));
    dims.push_back(outs[j].dims);
  }
  c.loss = weighted_sum_loss(c.m, ys, dims, rng);
  GraphBuilder b(g);
  c.grads = build_gradients(g, c.loss, b.scalar(1, DType::kDouble), c.wrt);
  compare_with_finite_differences(c, 0, rng);
}

Attr ints_attr(const char* name, std::vector<int64_t> v) { return Attr{name, AttrKind::kInts, 0, 0, "", std::move(v)}; }
Attr int_attr(const char* name, int64_t v) { return Attr{name, AttrKind::kInt, v, 0, "", {}}; }
Attr float_attr(const char* name, float v) { return Attr{name, AttrKind::kFloat, 0, v, "", {}}; }
Attr string_attr(const char* name, std::string v) { return Attr{name, AttrKind::kString, 0, 0, std::move(v), {}}; }
Attr floats_attr(const char* name, std::vector<float> v) { return Attr{name, AttrKind::kFloats, 0, 0, "", {}, std::move(v)}; }
Attr strings_attr(const char* name, std::vector<std::string> v) {
  return Attr{name, AttrKind::kStrings, 0, 0, "", {}, {}, std::move(v)};
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](Case k) { c.push_back(std::move(k)); };
  const std::vector<int64_t> m23{2, 3};
  // one-input elementwise
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Identity"}) add(make(op, op, {x(m23)}));
  add(make("LeakyRelu", "LeakyRelu", {x(m23)}, {float_attr("alpha", 0.2f)}));
  add(make("HardSigmoid", "HardSigmoid", {x({4, 6}, Fill::kWide)}));
  add(make("HardSigmoidTorch", "HardSigmoid", {x({4, 6}, Fill::kWide)}, {float_attr("alpha", 1.0f / 6)}));
  add(make("HardSwish", "HardSwish", {x({4, 6}, Fill::kWide)}));
  add(make("Softsign", "Softsign", {x({4, 6}, Fill::kWide)}));
  for (float alpha : {1.0f, 2.0f}) {
    Case celu = make(alpha == 1 ? "Celu" : "CeluAlpha", "Celu", {x({4, 6}, Fill::kWide)}, {float_attr("alpha", alpha)});
    celu.onnx_types = false;  // ONNX's Celu schema takes float only
    add(std::move(celu));
  }
  // Kinks at alpha and at -lambd, lambd: 2.5, which kWide keeps away from.
  add(make("ThresholdedRelu", "ThresholdedRelu", {x({4, 6}, Fill::kWide)}, {float_attr("alpha", 2.5f)}));
  add(make("Shrink", "Shrink", {x({4, 6}, Fill::kWide)}, {float_attr("bias", 0.5f), float_attr("lambd", 2.5f)}));
  for (const char* op : {"Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh"}) add(make(op, op, {x(m23)}));
  for (const char* op : {"Asin", "Acos", "Atanh"}) add(make(op, op, {x(m23, Fill::kInside)}));
  add(make("Acosh", "Acosh", {x(m23, Fill::kAboveOne)}));
  // The zoo's activations and Mod in both fmod modes (issue 16; zoo_activation_gradients.cc).
  add(make("Softplus", "Softplus", {x({4, 6}, Fill::kWide)}));
  add(make("Elu", "Elu", {x({4, 6}, Fill::kWide)}));
  add(make("EluAlpha", "Elu", {x({4, 6}, Fill::kWide)}, {float_attr("alpha", 0.3f)}));
  add(make("Selu", "Selu", {x({4, 6}, Fill::kWide)}));
  add(make("SeluConstants", "Selu", {x({4, 6}, Fill::kWide)}, {float_attr("alpha", 1.5f), float_attr("gamma", 2.0f)}));
  add(make("Mod", "Mod", {x({2, 3}, Fill::kWide), x({3}, Fill::kPositive)}));
  add(make("ModFmod", "Mod", {x({2, 3}, Fill::kWide), x({2, 1}, Fill::kPositive)}, {int_attr("fmod", 1)}));
  // Pad (issue 16; pad_resize_gradients.cc): constant (a crop too), and reflect, edge and wrap,
  // whose gradients sum the elements read more than once (ai.onnx_amp PadGrad).
  add(make("PadConstant", "Pad", {x({2, 3, 4}), ints({0, 1, 2, 1, 0, 1}), scalar(0.5)}));
  add(make("PadConstantCrop", "Pad", {x({2, 3, 4}), ints({0, -1, 2, 0, 1, -1})}));
  for (const char* mode : {"reflect", "edge", "wrap"})
    add(make(std::string("Pad_") + mode, "Pad", {x({2, 3, 4}), ints({0, 2, 1, 1, 1, 3})}, {string_attr("mode", mode)}));
  // Resize (ai.onnx_amp ResizeGrad) as PyTorch exports F.interpolate: nearest by 2, bilinear with
  // align_corners False (by 2, and to sizes that shrink one axis) and True.
  {
    const In none{{}, Fill::kRandom, std::nullopt, true};
    const In by2 = constant<float>(DType::kFloat, {4}, {1, 1, 2, 2});
    auto resize = [&](const std::string& name, const char* mode, const char* coord, std::vector<In> in) {
      add(make(name, "Resize", std::move(in),
               {string_attr("mode", mode), string_attr("coordinate_transformation_mode", coord),
                string_attr("nearest_mode", "floor")}));
    };
    resize("ResizeNearest", "nearest", "asymmetric", {x({1, 2, 3, 3}), none, by2});
    resize("ResizeBilinear", "linear", "pytorch_half_pixel", {x({1, 2, 3, 3}), none, by2});
    resize("ResizeBilinearSizes", "linear", "pytorch_half_pixel", {x({1, 2, 4, 3}), none, none, ints({1, 2, 3, 5})});
    resize("ResizeBilinearCorners", "linear", "align_corners", {x({1, 1, 3, 4}), none, none, ints({1, 1, 5, 7})});
    // Cubic: by 2 (half_pixel), to sizes (align_corners; asymmetric over three axes), and
    // cubic_coeff_a -0.5 with exclude_outside.
    resize("ResizeCubic", "cubic", "half_pixel", {x({1, 2, 3, 3}), none, by2});
    resize("ResizeCubicCorners", "cubic", "align_corners", {x({1, 1, 4, 3}), none, none, ints({1, 1, 3, 5})});
    resize("ResizeCubic3D", "cubic", "asymmetric", {x({3, 4, 3}), none, none, ints({4, 3, 5})});
    add(make("ResizeCubicExcludeOutside", "Resize", {x({1, 2, 4, 3}), none, none, ints({1, 2, 6, 2})},
             {string_attr("mode", "cubic"), float_attr("cubic_coeff_a", -0.5f), int_attr("exclude_outside", 1)}));
  }
  // ScatterND's data (Swin's mask): dY with the written rows zeroed.
  add(make("ScatterNDData", "ScatterND",
           {x({4, 3}), constant<int64_t>(DType::kInt64, {2, 1}, {2, 0}), constant<double>(DType::kDouble, {2, 3}, {1, 2, 3, 4, 5, 6})}));
  // and its updates (GatherND of dY): the data and the updates both differentiated.
  add(make("ScatterNDUpdates", "ScatterND", {x({4, 3}), constant<int64_t>(DType::kInt64, {2, 1}, {2, 0}), x({2, 3})}));
  // Einsum as MaxViT's attention writes it (scores, then the weighted sum), and a three-operand one.
  add(make("EinsumScores", "Einsum", {x({1, 2, 2, 3, 4}), x({1, 2, 2, 5, 4})}, {string_attr("equation", "B G H I D, B G H J D -> B G H I J")}));
  add(make("EinsumWeighted", "Einsum", {x({1, 2, 2, 3, 5}), x({1, 2, 2, 5, 4})}, {string_attr("equation", "BGHIJ,BGHJD->BGHID")}));
  add(make("EinsumThree", "Einsum", {x({2, 3}), x({3, 4}), x({4})}, {string_attr("equation", "ij,jk,k->i")}));
  {  // ai.onnx_amp Attention (AttentionGrad, the probabilities recomputed from the saved LSE): no
     // mask, causal over 70 queries (two blocks of 64, the second partial), a bool mask, and a
     // float mask broadcast over the heads, whose own gradient is checked too.
    auto attention = [&](std::string name, std::vector<In> in, std::vector<Attr> a) {
      Case c = make(std::move(name), "Attention", std::move(in), std::move(a), 2, {0});
      c.domain = kAmpDomain;
      add(std::move(c));
    };
    attention("Attention", {x({1, 2, 5, 4}), x({1, 2, 7, 4}), x({1, 2, 7, 3})}, {float_attr("scale", 0.7f)});
    attention("AttentionCausal", {x({1, 1, 70, 3}), x({1, 1, 70, 3}), x({1, 1, 70, 2})}, {int_attr("is_causal", 1)});
    std::vector<uint8_t> keep(5 * 7);
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = i % 3 != 1;  // every row keeps keys
    attention("AttentionBoolMask", {x({2, 5, 4}), x({2, 7, 4}), x({2, 7, 3}), bools({5, 7}, keep)}, {});
    attention("AttentionFloatMask", {x({2, 2, 5, 4}), x({2, 2, 7, 4}), x({2, 2, 7, 4}), x({2, 1, 5, 7})},
              {float_attr("scale", 0.5f), int_attr("is_causal", 1)});
  }
  for (const char* approximate : {"none", "tanh"}) {  // ai.onnx_amp Gelu
    Case gelu = make(std::string("Gelu_") + approximate, "Gelu", {x({3, 4})}, {string_attr("approximate", approximate)});
    gelu.domain = kAmpDomain;
    add(std::move(gelu));
  }
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) add(make(op, op, {x(m23, Fill::kPositive)}));
  add(make("Cast", "Cast", {x(m23)}, {int_attr("to", static_cast<int64_t>(DType::kDouble))}));
  add(make("CastLike", "CastLike", {x(m23), constant<double>(DType::kDouble, {1}, {0.0})}));
  add(make("Clip", "Clip", {x({2, 4}), scalar(-0.5), scalar(0.5)}));
  add(make("ClipMinOnly", "Clip", {x({2, 4}), scalar(-0.5)}));
  add(make("DropoutTraining", "Dropout",
           {x(m23), scalar(0.0), bools({}, {1})}, {}, 2, {0}));
  add(make("DropoutInference", "Dropout", {x(m23)}));
  add(make("Softmax", "Softmax", {x({2, 3, 4})}, {int_attr("axis", 1)}));
  add(make("SoftmaxLast", "Softmax", {x({2, 5})}));
  add(make("LogSoftmax", "LogSoftmax", {x({3, 4})}, {int_attr("axis", -1)}));
  // broadcasting
  add(make("Add", "Add", {x(m23), x({3})}));
  add(make("Sub", "Sub", {x({2, 1}), x(m23)}));
  add(make("Mul", "Mul", {x(m23), x({1, 3})}));
  add(make("Div", "Div", {x(m23), x({3}, Fill::kPositive)}));
  add(make("Pow", "Pow", {x(m23, Fill::kPositive), x({3})}));
  add(make("Max", "Max", {x(m23, Fill::kSpread), x({3}, Fill::kSpread), x(m23, Fill::kSpread)}));
  add(make("Min", "Min", {x(m23, Fill::kSpread), x({2, 1}, Fill::kSpread)}));
  add(make("Where", "Where", {bools(m23, {1, 0, 1, 0, 0, 1}), x(m23), x({3})}));
  add(make("Expand", "Expand", {x({3, 1}), ints({2, 3, 4})}));
  // products
  add(make("MatMul", "MatMul", {x({2, 3}), x({3, 4})}));
  add(make("MatMulSharedWeight", "MatMul", {x({2, 2, 3}), x({3, 4})}));
  add(make("MatMulBatched", "MatMul", {x({2, 2, 3}), x({2, 3, 4})}));
  add(make("MatMulBatchBroadcast", "MatMul", {x({1, 2, 3}), x({2, 3, 4})}));
  add(make("MatMulVectorLeft", "MatMul", {x({3}), x({2, 3, 4})}));
  add(make("MatMulVectorRight", "MatMul", {x({2, 2, 3}), x({3})}));
  add(make("MatMulDot", "MatMul", {x({3}), x({3})}));
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      add(make("Gemm_t" + std::to_string(ta) + std::to_string(tb), "Gemm",
               {x(ta ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3}),
                x(tb ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4}), x({4})},
               {int_attr("transA", ta), int_attr("transB", tb), float_attr("alpha", 0.7f), float_attr("beta", 1.3f)}));
  add(make("GemmNoBias", "Gemm", {x({2, 3}), x({4, 3})}, {int_attr("transB", 1)}));
  // convolutions and pools
  add(make("Conv", "Conv", {x({2, 3, 5, 5}), x({4, 3, 3, 3}), x({4})},
           {ints_attr("pads", {1, 1, 1, 1}), ints_attr("strides", {2, 2})}));
  add(make("ConvGroupsDilated", "Conv", {x({1, 4, 6, 6}), x({4, 2, 2, 2})},
           {int_attr("group", 2), ints_attr("dilations", {2, 2}), ints_attr("pads", {1, 0, 0, 1})}));
  add(make("Conv1d", "Conv", {x({2, 3, 7}), x({2, 3, 3}), x({2})}, {string_attr("auto_pad", "SAME_UPPER")}));
  add(make("ConvTranspose", "ConvTranspose", {x({2, 3, 3, 4}), x({3, 2, 3, 3}), x({2})},
           {ints_attr("pads", {1, 0, 1, 1}), ints_attr("strides", {2, 2}), ints_attr("output_padding", {1, 0})}));
  add(make("ConvTransposeGroupsDilated", "ConvTranspose", {x({1, 4, 3, 3}), x({4, 1, 2, 2})},
           {int_attr("group", 2), ints_attr("dilations", {2, 1}), ints_attr("strides", {1, 2})}));
  add(make("ConvTranspose1dOutputShape", "ConvTranspose", {x({2, 2, 4}), x({2, 3, 3}), x({3})},
           {ints_attr("strides", {2}), ints_attr("output_shape", {10})}));
  add(make("ConvTranspose1dSameLower", "ConvTranspose", {x({1, 2, 4}), x({2, 2, 4})},
           {ints_attr("strides", {3}), string_attr("auto_pad", "SAME_LOWER")}));
  add(make("MaxPool", "MaxPool", {x({2, 2, 5, 5}, Fill::kSpread)},
           {ints_attr("kernel_shape", {2, 2}), ints_attr("strides", {2, 2}), ints_attr("pads", {0, 0, 1, 1})}));
  add(make("MaxPoolOverlapping", "MaxPool", {x({1, 2, 5, 5}, Fill::kSpread)},
           {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {1, 1})}));
  add(make("AveragePool", "AveragePool", {x({2, 2, 5, 5})},
           {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1})}));
  add(make("AveragePoolCountPad", "AveragePool", {x({1, 2, 4, 4})},
           {ints_attr("kernel_shape", {3, 3}), ints_attr("pads", {1, 1, 1, 1}), int_attr("count_include_pad", 1)}));
  add(make("GlobalAveragePool", "GlobalAveragePool", {x({2, 3, 3, 4})}));
  add(make("GlobalAveragePoolSymbolicDims", "GlobalAveragePool", {x_symbolic({2, 3, 3, 4})}));
  add(make("GlobalMaxPool", "GlobalMaxPool", {x({2, 3, 3, 4}, Fill::kSpread)}));
  // normalization
  add(make("BatchNormTraining", "BatchNormalization",
           {x({3, 2, 2, 2}), x({2}), x({2}), constant<double>(DType::kDouble, {2}, {0.1, -0.2}),
            constant<double>(DType::kDouble, {2}, {1.5, 0.7})},
           {int_attr("training_mode", 1), float_attr("epsilon", 1e-3f)}, 3, {0}));
  add(make("BatchNormInference", "BatchNormalization",
           {x({3, 2, 2}), x({2}), x({2}), x({2}), x({2}, Fill::kPositive)}));
  add(make("LayerNorm", "LayerNormalization", {x({2, 3, 4}), x({4}), x({4})}, {float_attr("epsilon", 1e-3f)}));
  add(make("LayerNormAxis1", "LayerNormalization", {x({2, 3, 2}), x({3, 2}), x({3, 2})}, {int_attr("axis", 1)}));
  add(make("InstanceNorm", "InstanceNormalization", {x({2, 3, 2, 3}), x({3}), x({3})}, {float_attr("epsilon", 1e-3f)}));
  add(make("InstanceNorm1d", "InstanceNormalization", {x({2, 3, 5}), x({3}), x({3})}));
  add(typed_like_input(make("MeanVarianceNorm", "MeanVarianceNormalization", {x({2, 3, 2, 3})})));
  add(typed_like_input(make("MeanVarianceNormAxes", "MeanVarianceNormalization", {x({2, 3, 4})}, {ints_attr("axes", {1, -1})})));
  // losses
  const In labels = ints({1, 0, 4, 2});
  add(make("SoftmaxCrossEntropyMean", "SoftmaxCrossEntropyLoss", {x({4, 5}), labels}));
  add(make("SoftmaxCrossEntropySumWeighted", "SoftmaxCrossEntropyLoss",
           {x({4, 5}), labels, constant<double>(DType::kDouble, {5}, {0.5, 1, 2, 1, 0.25})},
           {string_attr("reduction", "sum")}));
  add(make("SoftmaxCrossEntropyNoneIgnore", "SoftmaxCrossEntropyLoss", {x({4, 5, 2}), constant<int64_t>(DType::kInt64, {4, 2}, {1, 0, 4, 2, 3, 3, 0, 1})},
           {string_attr("reduction", "none"), int_attr("ignore_index", 3)}));
  add(make("SoftmaxCrossEntropyLogProb", "SoftmaxCrossEntropyLoss", {x({4, 5}), labels}, {}, 2, {0, 1}));
  add(make("NegativeLogLikelihoodMean", "NegativeLogLikelihoodLoss",
           {x({4, 5}), labels, constant<double>(DType::kDouble, {5}, {0.5, 1, 2, 1, 0.25})}));
  // data movement
  add(make("Reshape", "Reshape", {x({2, 3, 4}), ints({4, 6})}));
  add(make("Flatten", "Flatten", {x({2, 3, 4})}, {int_attr("axis", 2)}));
  add(make("Transpose", "Transpose", {x({2, 3, 4})}, {ints_attr("perm", {2, 0, 1})}));
  add(make("TransposeDefault", "Transpose", {x({2, 3, 4})}));
  add(make("Squeeze", "Squeeze", {x({2, 1, 3}), ints({1})}));
  add(make("Unsqueeze", "Unsqueeze", {x({2, 3}), ints({0, 3})}));
  add(make("Concat", "Concat", {x({2, 1}), x({2, 3}), x({2, 2})}, {int_attr("axis", -1)}));
  add(make("Split", "Split", {x({2, 6}), ints({2, 4})}, {int_attr("axis", 1)}, 2, {0, 1}));
  add(make("SplitOneUsed", "Split", {x({6, 2}), ints({3, 3})}, {}, 2, {1}));
  add(make("Slice", "Slice", {x({4, 5}), ints({1, 0}), ints({3, 5}), ints({0, 1}), ints({1, 2})}));
  add(make("SliceNegativeStep", "Slice", {x({4, 5}), ints({-1}), ints({0}), ints({1}), ints({-2})}));
  add(make("Gather", "Gather", {x({5, 3}), constant<int64_t>(DType::kInt64, {2, 2}, {0, 2, 2, 4})}));
  add(make("GatherAxis1", "Gather", {x({2, 4, 3}), constant<int64_t>(DType::kInt64, {3}, {3, -1, 0})},
           {int_attr("axis", 1)}));
  // data movement and indexing (issue 31)
  add(make("Tile", "Tile", {x({2, 3}), ints({3, 2})}));
  add(make("TileSymbolicDims", "Tile", {x_symbolic({2, 1, 3}), ints({1, 4, 2})}));
  add(make("CumSum", "CumSum", {x({3, 4}), constant<int64_t>(DType::kInt64, {}, {1})}));
  add(make("CumSumExclusiveReverse", "CumSum", {x({3, 4}), constant<int32_t>(DType::kInt32, {}, {-2})},
           {int_attr("exclusive", 1), int_attr("reverse", 1)}));
  add(make("GatherElements", "GatherElements",
           {x({3, 4}), constant<int64_t>(DType::kInt64, {2, 4}, {0, 2, 2, -1, 1, 1, 0, 2})}, {int_attr("axis", 0)}));
  const In scatter_at = constant<int64_t>(DType::kInt64, {2, 3}, {1, 0, 3, 0, 2, -2});  // a repeat only along axis 1
  add(make("ScatterElements", "ScatterElements", {x({4, 3}), scatter_at, x({2, 3})}));
  add(make("ScatterElementsAdd", "ScatterElements", {x({3, 4}), scatter_at, x({2, 3})},
           {int_attr("axis", 1), string_attr("reduction", "add")}));
  {  // opset 18's reductions max and min (ai.onnx_amp ScatterElements, ScatterND): values spread
     // apart, so no two tie and each output element comes from one element, by a margin above h;
     // repeated indices make several updates compete for one element.
    auto opset18 = [&](std::string name, const char* op, std::vector<In> in, std::vector<Attr> a) {
      Case c = make(std::move(name), op, std::move(in), std::move(a));
      c.domain = kAmpDomain;
      add(std::move(c));
    };
    const In rows = constant<int64_t>(DType::kInt64, {3, 1}, {2, 0, 2});
    for (const char* reduction : {"max", "min"}) {
      const std::string r = reduction == std::string("max") ? "Max" : "Min";
      opset18("ScatterElements" + r, "ScatterElements", {x({4, 3}, Fill::kSpread), scatter_at, x({2, 3}, Fill::kSpread)},
              {string_attr("reduction", reduction)});
      opset18("ScatterElements" + r + "Axis1", "ScatterElements",
              {x({3, 4}, Fill::kSpread), scatter_at, x({2, 3}, Fill::kSpread)},
              {int_attr("axis", -1), string_attr("reduction", reduction)});
      opset18("ScatterND" + r, "ScatterND", {x({4, 3}, Fill::kSpread), rows, x({3, 3}, Fill::kSpread)},
              {string_attr("reduction", reduction)});
    }
  }
  add(make("DepthToSpaceDCR", "DepthToSpace", {x({1, 8, 2, 3})}, {int_attr("blocksize", 2)}));
  add(make("DepthToSpaceCRD", "DepthToSpace", {x({2, 8, 2, 1})}, {int_attr("blocksize", 2), string_attr("mode", "CRD")}));
  add(make("DepthToSpaceCRDSymbolicDims", "DepthToSpace", {x_symbolic({1, 8, 2, 3})},
           {int_attr("blocksize", 2), string_attr("mode", "CRD")}));
  add(make("SpaceToDepth", "SpaceToDepth", {x({2, 2, 4, 2})}, {int_attr("blocksize", 2)}));
  add(make("TopK", "TopK", {x({3, 6}, Fill::kSpread), ints({4})}, {}, 2, {0}));
  add(make("TopKSmallestAxis0", "TopK", {x({5, 3}, Fill::kSpread), ints({2})}, {int_attr("axis", 0), int_attr("largest", 0)},
           2, {0}));
  add(make("ReverseSequence", "ReverseSequence", {x({4, 3, 2}), ints({3, 1, 4})}));
  add(make("ReverseSequenceBatchFirst", "ReverseSequence", {x({2, 3, 2}), ints({2, 3})},
           {int_attr("time_axis", 1), int_attr("batch_axis", 0)}));
  add(make("CompressAxis", "Compress", {x({3, 4}), bools({3}, {1, 0, 1})}, {int_attr("axis", 1)}));
  add(make("CompressFlat", "Compress", {x({2, 3}), bools({5}, {0, 1, 1, 0, 1})}));
  add(make("MaxUnpool", "MaxUnpool",
           {x({1, 2, 2, 2}), constant<int64_t>(DType::kInt64, {1, 2, 2, 2}, {0, 3, 9, 15, 16, 22, 24, 31})},
           {ints_attr("kernel_shape", {2, 2}), ints_attr("strides", {2, 2})}));
  add(make("GatherND", "GatherND", {x({4, 3, 2}), constant<int64_t>(DType::kInt64, {3, 2}, {0, 1, 3, 2, 0, 1})}));
  {  // RoiAlign (ai.onnx_amp RoiAlignGrad): two regions on two batch entries, one reaching past the
     // map's edge, both modes, both coordinate conventions, a fixed and an adaptive sampling grid.
    const In rois = constant<double>(DType::kDouble, {3, 4}, {0.3, 0.6, 3.7, 2.9, 1.2, 0.1, 4.6, 3.8, -0.8, 2.2, 2.4, 5.3});
    const In batch = constant<int64_t>(DType::kInt64, {3}, {0, 1, 1});
    add(make("RoiAlign", "RoiAlign", {x({2, 2, 5, 6}), rois, batch},
             {int_attr("output_height", 2), int_attr("output_width", 3), int_attr("sampling_ratio", 2)}));
    add(make("RoiAlignAdaptiveOutputHalfPixel", "RoiAlign", {x({2, 2, 5, 6}), rois, batch},
             {int_attr("output_height", 3), int_attr("output_width", 2), float_attr("spatial_scale", 0.8f),
              string_attr("coordinate_transformation_mode", "output_half_pixel")}));
    add(make("RoiAlignMax", "RoiAlign", {x({2, 2, 5, 6}, Fill::kSpread), rois, batch},
             {int_attr("output_height", 2), int_attr("output_width", 2), int_attr("sampling_ratio", 1),
              string_attr("mode", "max")}));
  }
  {  // ai.onnx_amp DeformConv (DeformConvGrad): with mask and bias, groups and offset groups of 2,
     // strides, pads and dilations; and with neither mask nor bias. Offsets in [-5, 5] put samples
     // past the border. ai.onnx_amp Col2Im (Im2Col): overlapping blocks reaching into the padding.
    const In none{{}, Fill::kRandom, std::nullopt, true};
    auto amp_op = [&](Case c) {
      c.domain = kAmpDomain;
      add(std::move(c));
    };
    amp_op(make("DeformConv", "DeformConv", {x({2, 4, 5, 4}), x({4, 2, 2, 2}), x({2, 16, 3, 3}, Fill::kWide), x({4}), x({2, 8, 3, 3})},
                {ints_attr("strides", {2, 1}), ints_attr("pads", {1, 0, 1, 1}), ints_attr("dilations", {1, 2}), int_attr("group", 2),
                 int_attr("offset_group", 2)}));
    amp_op(make("DeformConvPlain", "DeformConv", {x({1, 2, 4, 4}), x({3, 2, 2, 2}), x({1, 8, 3, 3})}, {}));
    amp_op(make("DeformConvMaskOnly", "DeformConv", {x({1, 2, 4, 3}), x({2, 2, 2, 2}), x({1, 8, 3, 2}), none, x({1, 4, 3, 2})}, {}));
    amp_op(make("Col2Im", "Col2Im", {x({2, 12, 9}), ints({4, 3}), ints({2, 3})},
                {ints_attr("strides", {2, 1}), ints_attr("pads", {1, 1, 1, 1}), ints_attr("dilations", {1, 1})}));
  }
  // GridSample (ai.onnx_amp GridSampleGrad, dX and dGrid) in every mode, padding_mode and
  // align_corners, with a grid reaching past the map. Nearest's dGrid is 0 (its weights are steps).
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int align = 0; align < 2; ++align)
        add(make(std::string("GridSample_") + mode + "_" + padding + "_" + std::to_string(align), "GridSample",
                 {x({2, 2, 3, 4}), x({2, 3, 2, 2}, Fill::kPastEdges)},
                 {string_attr("mode", mode), string_attr("padding_mode", padding), int_attr("align_corners", align)}));
  // reductions
  add(make("ReduceSum", "ReduceSum", {x({2, 3, 4}), ints({1})}, {int_attr("keepdims", 0)}));
  add(make("ReduceSumAll", "ReduceSum", {x({2, 3})}, {int_attr("keepdims", 1)}));
  add(make("ReduceMean", "ReduceMean", {x({2, 3, 4})}, {ints_attr("axes", {0, 2}), int_attr("keepdims", 0)}));
  add(make("ReduceMeanAll", "ReduceMean", {x({2, 3})}));
  add(make("ReduceMax", "ReduceMax", {x({2, 3, 4}, Fill::kSpread)}, {ints_attr("axes", {1})}));
  add(make("ReduceMin", "ReduceMin", {x({2, 3, 4}, Fill::kSpread)}, {ints_attr("axes", {1})}));
  // the ops third-party exporters' models brought (issue 31)
  add(make("Sum3", "Sum", {x(m23), x({3}), x({2, 1})}));
  add(make("Mean3", "Mean", {x(m23), x({3}), x({2, 1})}));
  add(make("Mean1", "Mean", {x(m23)}));
  add(make("PRelu", "PRelu", {x({2, 3, 4}), x({3, 1})}));
  add(make("ReduceProd", "ReduceProd", {x({2, 3, 4})}, {ints_attr("axes", {1}), int_attr("keepdims", 0)}));
  add(make("ReduceProdZeros", "ReduceProd", {x({4, 6}, Fill::kSomeZeros)}, {ints_attr("axes", {1})}));
  add(make("ReduceL1", "ReduceL1", {x({2, 3, 4}, Fill::kSpread)}, {ints_attr("axes", {1}), int_attr("keepdims", 0)}));
  add(make("ReduceL2", "ReduceL2", {x({2, 3, 4})}, {ints_attr("axes", {0, 2})}));
  add(make("ReduceL2All", "ReduceL2", {x({2, 3})}, {int_attr("keepdims", 0)}));
  add(make("ReduceSumSquare", "ReduceSumSquare", {x({2, 3, 4})}, {ints_attr("axes", {-1}), int_attr("keepdims", 0)}));
  add(make("ReduceLogSum", "ReduceLogSum", {x({2, 3, 4}, Fill::kPositive)}, {ints_attr("axes", {1})}));
  add(make("ReduceLogSumExp", "ReduceLogSumExp", {x({2, 3, 4}, Fill::kWide)}, {ints_attr("axes", {0, 2}), int_attr("keepdims", 0)}));
  add(make("ReduceLogSumExpNoop", "ReduceLogSumExp", {x({2, 3})}, {int_attr("noop_with_empty_axes", 1)}));
  add(make("LRN", "LRN", {x({2, 5, 3, 3})},
           {int_attr("size", 3), float_attr("alpha", 0.5f), float_attr("beta", 0.75f), float_attr("bias", 1.5f)}));
  {  // LSTM, GRU and RNN (ai.onnx_amp LSTMGrad / GRUGrad / RNNGrad, backpropagation through time):
     // X [seq 4, batch 2, input 3], hidden 2; the loss weighs Y and the final states. Every input
     // that has a gradient is checked: X, W, R, B, initial_h, initial_c and the peepholes.
    const In none{{}, Fill::kRandom, std::nullopt, true};
    const In lengths = constant<int32_t>(DType::kInt32, {2}, {4, 2});  // one sample stops early
    auto layer = [&](std::string name, const char* op, std::vector<In> in, std::vector<Attr> a) {
      a.push_back(int_attr("hidden_size", 2));
      const size_t outputs = std::string(op) == "LSTM" ? 3 : 2;
      std::vector<size_t> loss(outputs);
      for (size_t k = 0; k < outputs; ++k) loss[k] = k;
      add(make(std::move(name), op, std::move(in), std::move(a), outputs, loss));
    };
    layer("LSTM", "LSTM", {x({4, 2, 3}), x({1, 8, 3}), x({1, 8, 2}), x({1, 16}), none, x({1, 2, 2}), x({1, 2, 2}), x({1, 6})}, {});
    // Both directions, sequence_lens, input_forget, a clip that some pre-activations pass.
    layer("LSTMBidirectionalLengthsClip", "LSTM", {x({4, 2, 3}), x({2, 8, 3}), x({2, 8, 2}), x({2, 16}), lengths},
          {string_attr("direction", "bidirectional"), int_attr("input_forget", 1), float_attr("clip", 1.2f)});
    // Batch first, reverse, other activations with their alpha and beta.
    layer("LSTMLayout1ReverseActivations", "LSTM", {x({2, 4, 3}), x({1, 8, 3}), x({1, 8, 2}), none, none, x({2, 1, 2}), x({2, 1, 2})},
          {int_attr("layout", 1), string_attr("direction", "reverse"),
           strings_attr("activations", {"HardSigmoid", "ScaledTanh", "Softsign"}), floats_attr("activation_alpha", {0.3f, 1.5f}),
           floats_attr("activation_beta", {0.4f, 0.8f})});
    layer("GRU", "GRU", {x({4, 2, 3}), x({1, 6, 3}), x({1, 6, 2}), x({1, 12}), none, x({1, 2, 2})}, {});
    layer("GRUBidirectionalLinearBeforeResetLengths", "GRU", {x({2, 4, 3}), x({2, 6, 3}), x({2, 6, 2}), x({2, 12}), lengths, x({2, 2, 2})},
          {string_attr("direction", "bidirectional"), int_attr("linear_before_reset", 1), int_attr("layout", 1)});
    layer("GRUClipActivations", "GRU", {x({4, 2, 3}), x({1, 6, 3}), x({1, 6, 2}), x({1, 12})},
          {float_attr("clip", 1.2f), strings_attr("activations", {"Sigmoid", "Softplus"})});
    layer("RNN", "RNN", {x({4, 2, 3}), x({1, 2, 3}), x({1, 2, 2}), x({1, 4}), none, x({1, 2, 2})}, {});
    layer("RNNBidirectionalActivations", "RNN", {x({4, 2, 3}), x({2, 2, 3}), x({2, 2, 2}), x({2, 4}), lengths},
          {string_attr("direction", "bidirectional"), strings_attr("activations", {"Elu", "LeakyRelu"}),
           floats_attr("activation_alpha", {0.7f, 0.1f})});
  }
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GradientCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradientCheck, MatchesCentralDifferences) { check_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, GradientCheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- whole models in float64

void to_float64(Graph& g) {
  auto retype = [](Value* v) {
    if (v && v->dtype() == DType::kFloat) v->set_dtype(DType::kDouble);
  };
  auto widen = [](const Tensor& t) {
    Tensor d(DType::kDouble, t.dims);
    for (int64_t i = 0; i < t.numel(); ++i) d.mutable_as<double>()[i] = t.as<float>()[i];
    d.name = t.name;
    return d;
  };
  for (Value* v : std::vector<Value*>(g.initializers()))
    if (v->dtype() == DType::kFloat) g.set_initializer(v, widen(v->initializer()));
  for (Value* v : g.inputs()) retype(v);
  for (Node* n : g.nodes()) {
    for (Value* v : n->outputs()) retype(v);
    if (Attribute* a = n->mutable_attr("value"); a && a->kind == AttrKind::kTensor && a->t.dtype == DType::kFloat)
      a->t = widen(a->t);
    if (n->op_type() == "Cast" && n->attr_int("to", 0) == static_cast<int64_t>(DType::kFloat))
      n->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kDouble)));
  }
}

class ModelGradientCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradientCheck, SampledParameterGradientsMatchCentralDifferences) {
  std::mt19937 rng(99);
  register_amp_op_schemas();
  Checked c;
  c.m = load_model(test::source_dir() + "/models/" + GetParam() + ".train.onnx");
  Graph& g = *c.m.graph;
  // Dropout draws a new mask each run, which finite differences cannot follow: ratio 0 keeps the
  // training-mode path (mask and scale) deterministic.
  for (Node* n : g.node_vector())
    if (n->op_type() == "Dropout" && n->input(1)) {
      Value* zero = GraphBuilder(g).scalar(0, DType::kFloat);
      g.move_before(zero->producer(), n);
      n->set_input(1, zero);
    }
  to_float64(g);
  LossInfo info = add_loss(c.m, LossSpec{LossKind::kCrossEntropy, "logits", "labels"});
  c.loss = info.loss;
  Value* input = g.inputs()[0];
  const bool gpt = GetParam() == "gpt";
  Tensor data = gpt ? Tensor(DType::kInt64, {2, 5}) : random_tensor({3, 1, 28, 28}, Fill::kRandom, rng);
  if (gpt)
    for (int64_t i = 0; i < data.numel(); ++i) data.mutable_as<int64_t>()[i] = (i * 7 + 3) % 64;
  Tensor labels(DType::kInt64, gpt ? std::vector<int64_t>{2, 5} : std::vector<int64_t>{3});
  for (int64_t i = 0; i < labels.numel(); ++i) labels.mutable_as<int64_t>()[i] = (i * 3 + 1) % 10;
  // The parameters become graph inputs so the check can perturb them like any input.
  std::vector<std::pair<std::string, Tensor>> fixed{{input->name(), data}, {"labels", labels}};
  for (Value* v : std::vector<Value*>(g.initializers())) {
    bool stat = false;
    for (const Use& u : v->uses()) stat = stat || (u.node->op_type() == "BatchNormalization" && u.index >= 3);
    if (v->dtype() != DType::kDouble || stat) continue;
    c.wrt.push_back(v);
    c.values.push_back(v->initializer());
    g.mark_input(v);
  }
  GraphBuilder b(g);
  c.grads = build_gradients(g, c.loss, b.scalar(1, DType::kDouble), c.wrt);
  // Feed data and labels with every run: wrap feeds_of by extending the checked inputs.
  for (auto& [name, t] : fixed) {
    c.wrt.push_back(g.lookup(name));
    c.values.push_back(t);
    c.grads.push_back(nullptr);
  }
  // Only the parameters are compared; data and labels ride along as feeds.
  const size_t params = c.grads.size() - fixed.size();
  std::vector<Value*> grads(c.grads.begin(), c.grads.begin() + static_cast<std::ptrdiff_t>(params));
  std::vector<std::string> fetches{c.loss->name()};
  for (Value* gr : grads) {
    ASSERT_NE(gr, nullptr);
    g.add_output(gr);
    fetches.push_back(gr->name());
  }
  auto exe = make_backend("cpu")->compile(c.m, CompileOptions{});
  std::vector<Tensor> got = exe->run(feeds_of(c), fetches);
  for (size_t i = 0; i < params; ++i) {
    std::uniform_int_distribution<int64_t> pick(0, c.values[i].numel() - 1);
    for (int k = 0; k < 3; ++k) {
      const int64_t e = pick(rng);
      auto loss_at = [&](double delta) {
        auto feeds = feeds_of(c);
        feeds[i].second.mutable_as<double>()[e] += delta;  // copy on write: c.values stays
        return exe->run(feeds, {c.loss->name()})[0].as<double>()[0];
      };
      const double fd = (loss_at(kStep) - loss_at(-kStep)) / (2 * kStep);
      EXPECT_NEAR(got[i + 1].as<double>()[e], fd, kTolerance * std::max(1.0, std::fabs(fd)))
          << GetParam() << ": d loss / d " << c.wrt[i]->name() << "[" << e << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientCheck, ::testing::Values("mlp", "cnn", "gpt"));

}  // namespace
}  // namespace amp
