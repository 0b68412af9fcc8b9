// CPU kernels against numpy / PyTorch (kernel_reference.py) in float32, float16, bfloat16 and
// float64. The 16-bit references are what a GPU computes: inputs widened to fp32, fp32 math (fp32
// accumulation for products and reductions), one round-to-nearest-even on store. Arithmetic that
// is exact in fp32 before the rounding must match bit for bit; transcendental functions and sums
// (whose fp32 results may differ in the last fp32 bit between libm / BLAS implementations) may
// land one 16-bit step away.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "frontends/lib/npz.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/one_node.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

const DType kFloatTypes[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble};

struct Case {
  std::string ref;  // kernel_reference.py's name; "@<type>" is appended
  std::string op;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<Attribute> attrs;
  size_t outputs = 1;
  Tolerance tol;
  std::string domain = "";  // ai.onnx_amp for the project's own ops
};

Tolerance tolerance(DType t, int ulps, double rtol32 = 2e-6) {
  Tolerance tol;
  tol.max_ulps = ulps;
  tol.rtol = t == DType::kDouble ? 1e-12 : rtol32;
  tol.atol = t == DType::kDouble ? 1e-14 : 1e-7;
  return tol;
}

// Runs every case on the CPU backend, asks python for the references in one go, compares.
void check(std::vector<Case>& cases, const std::string& tag) {
  const std::string dir = temp_dir("kernels_" + tag);
  std::string names;
  std::vector<std::vector<Tensor>> results;
  for (Case& c : cases) {
    std::vector<std::pair<std::string, Tensor>> present;
    for (const auto& in : c.inputs)
      if (!in.first.empty()) present.push_back(in);
    write_npz(dir + "/" + c.ref + ".in.npz", present);
    names += " " + c.ref;
    Model m = one_node_model(c.op, c.inputs, std::move(c.attrs), c.outputs);
    if (!c.domain.empty()) {
      for (Node* n : m.graph->nodes()) n->set_domain(c.domain);
      m.set_opset_version(c.domain, 1);
    }
    results.push_back(run_cpu(m, present));
  }
  std::string out;
  ASSERT_EQ(run_python(source_dir() + "/tests/backends/kernel_reference.py " + dir + names, &out), 0) << out;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto refs = read_npz(dir + "/" + cases[k].ref + ".ref.npz");
    ASSERT_EQ(refs.size(), results[k].size()) << cases[k].ref;
    for (size_t i = 0; i < refs.size(); ++i)
      EXPECT_EQ(compare_tensors(results[k][i], refs[i].second, cases[k].tol), "")
          << cases[k].ref << " output " << i << " (" << cases[k].op << ")";
  }
}

std::string suffix(DType t) { return "@" + std::string(dtype_name(t)); }

Case unary(const std::string& ref, const std::string& op, DType t, double lo, double hi, int ulps,
           std::vector<Attribute> attrs = {}) {
  Case c{ref + suffix(t), op, {{"x", random_tensor(t, {3, 4, 17}, lo, hi, 11)}}, std::move(attrs), 1, tolerance(t, ulps)};
  return c;
}

Case binary(const std::string& ref, const std::string& op, DType t, double lo, double hi, int ulps) {
  Case c{ref + suffix(t), op,
         {{"a", random_tensor(t, {2, 3, 4}, lo, hi, 1)}, {"b", random_tensor(t, {3, 1}, lo, hi, 2)}},
         {}, 1, tolerance(t, ulps)};
  return c;
}

TEST(CpuKernels, ElementwiseMatchNumpyInEveryFloatType) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back(binary("add_bcast", "Add", t, -4, 4, 0));
    cases.push_back(binary("sub_bcast", "Sub", t, -4, 4, 0));
    cases.push_back(binary("mul_bcast", "Mul", t, -4, 4, 0));
    cases.push_back(binary("div_bcast", "Div", t, 0.5, 4, 0));
    cases.push_back(binary("pow", "Pow", t, 0.5, 2, 1));
    cases.push_back(unary("relu", "Relu", t, -2, 2, 0));
    {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("alpha", 0.1f));
      cases.push_back(unary("leakyrelu", "LeakyRelu", t, -2, 2, 0, std::move(a)));
    }
    cases.push_back(unary("sigmoid", "Sigmoid", t, -6, 6, 1));
    // ONNX's defaults (alpha 0.2, beta 0.5) against numpy, and nn.Hardsigmoid's export (alpha 1/6)
    // against torch, which computes (x + 3) / 6: an fp32 rounding apart. Not in float64, where the
    // export's alpha, a float attribute, is 3e-8 away from torch's 1/6.
    cases.push_back(unary("hardsigmoid", "HardSigmoid", t, -4, 4, 0));
    if (t != DType::kDouble) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("alpha", 1.0f / 6));
      cases.push_back(unary("hardsigmoid_torch", "HardSigmoid", t, -4, 4, 1, std::move(a)));
    }
    cases.push_back(unary("hardswish", "HardSwish", t, -5, 5, 0));
    cases.push_back(unary("tanh", "Tanh", t, -3, 3, 1));
    cases.push_back(unary("erf", "Erf", t, -3, 3, 1));
    cases.push_back(unary("exp", "Exp", t, -5, 5, 1));
    cases.push_back(unary("log", "Log", t, 0.01, 8, 1));
    cases.push_back(unary("sqrt", "Sqrt", t, 0, 8, 0));
    cases.push_back(unary("reciprocal", "Reciprocal", t, 0.1, 4, 0));
    cases.push_back(unary("neg", "Neg", t, -2, 2, 0));
    cases.push_back(unary("abs", "Abs", t, -2, 2, 0));
    // Round half to even: bf16 and fp16 draws in [-4, 4] hit halves.
    cases.push_back(unary("round", "Round", t, -4, 4, 0));
    cases.push_back(unary("sin", "Sin", t, -6, 6, 1));
    cases.push_back(unary("cos", "Cos", t, -6, 6, 1));
    cases.push_back(unary("tan", "Tan", t, -1.4, 1.4, 1));
    cases.push_back(unary("asin", "Asin", t, -0.99, 0.99, 1));
    cases.push_back(unary("acos", "Acos", t, -0.99, 0.99, 1));
    cases.push_back(unary("atan", "Atan", t, -5, 5, 1));
    cases.push_back(unary("sinh", "Sinh", t, -5, 5, 1));
    cases.push_back(unary("cosh", "Cosh", t, -5, 5, 1));
    cases.push_back(unary("asinh", "Asinh", t, -5, 5, 1));
    cases.push_back(unary("acosh", "Acosh", t, 1.01, 6, 1));
    cases.push_back(unary("atanh", "Atanh", t, -0.95, 0.95, 1));
    cases.push_back(unary("softsign", "Softsign", t, -4, 4, 0));
    {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("alpha", 2.0f));
      cases.push_back(unary("celu", "Celu", t, -4, 4, 1, std::move(a)));
    }
    {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("alpha", 0.5f));
      cases.push_back(unary("thresholdedrelu", "ThresholdedRelu", t, -2, 2, 0, std::move(a)));
    }
    {  // ONNX's general form against numpy, and torch's softshrink (bias = lambd)
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("bias", 0.25f));
      a.push_back(Attribute::of_float("lambd", 0.75f));
      cases.push_back(unary("shrink", "Shrink", t, -2, 2, 0, std::move(a)));
      std::vector<Attribute> soft;
      soft.push_back(Attribute::of_float("bias", 0.5f));
      soft.push_back(Attribute::of_float("lambd", 0.5f));
      cases.push_back(unary("softshrink", "Shrink", t, -2, 2, 0, std::move(soft)));
    }
    for (const char* op : {"Min", "Max"}) {
      Case c{std::string(op == std::string("Min") ? "min3" : "max3") + suffix(t), op,
             {{"a", random_tensor(t, {2, 3}, -2, 2, 3)}, {"b", random_tensor(t, {3}, -2, 2, 4)},
              {"c", random_tensor(t, {2, 1}, -2, 2, 5)}},
             {}, 1, tolerance(t, 0)};
      cases.push_back(std::move(c));
    }
    cases.push_back(Case{"where" + suffix(t), "Where",
                         {{"c", random_tensor(DType::kBool, {2, 1, 4}, 0, 1, 6)},
                          {"a", random_tensor(t, {3, 4}, -2, 2, 7)},
                          {"b", random_tensor(t, {2, 3, 1}, -2, 2, 8)}},
                         {}, 1, tolerance(t, 0)});
    cases.push_back(Case{"clip" + suffix(t), "Clip",
                         {{"x", random_tensor(t, {5, 7}, -3, 3, 9)},
                          {"lo", random_tensor(t, {}, -1, -1, 0)},
                          {"hi", random_tensor(t, {}, 1.5, 1.5, 0)}},
                         {}, 1, tolerance(t, 0)});
    cases.push_back(binary("less", "Less", t, -1, 1, 0));
    // Mean of three broadcast operands, added left to right and divided by 3.
    cases.push_back(Case{"mean3" + suffix(t), "Mean",
                         {{"a", random_tensor(t, {2, 3}, -2, 2, 3)}, {"b", random_tensor(t, {3}, -2, 2, 4)},
                          {"c", random_tensor(t, {2, 1}, -2, 2, 5)}},
                         {}, 1, tolerance(t, 0)});
    cases.push_back(Case{"mean1" + suffix(t), "Mean", {{"a", random_tensor(t, {2, 3}, -2, 2, 6)}}, {}, 1, tolerance(t, 0)});
    // CastLike to each other float type: the output takes the second input's type.
    for (DType to : kFloatTypes) {
      if (to == t) continue;
      cases.push_back(Case{"castlike_to_" + std::string(dtype_name(to)) + suffix(t), "CastLike",
                           {{"x", random_tensor(t, {3, 5}, -70000, 70000, 7)}, {"like", random_tensor(to, {1}, 0, 1, 8)}},
                           {}, 1, tolerance(to, 0)});
    }
  }
  // Shrink on integers computes in float and stores converted, as ONNX's reference.
  {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_float("bias", 1.0f));
    a.push_back(Attribute::of_float("lambd", 1.5f));
    cases.push_back(Case{"shrink_int@int32", "Shrink", {{"x", random_tensor(DType::kInt32, {4, 9}, -6, 6, 9)}},
                         std::move(a), 1, tolerance(DType::kInt32, 0)});
  }
  // BitShift on every unsigned type, both directions, broadcast, shifts up to the width and past it.
  for (DType t : {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    const double bits = 8.0 * static_cast<double>(dtype_size(t));
    const double top = bits == 64 ? 1e15 : std::ldexp(1.0, static_cast<int>(bits));  // values the draw holds exactly
    for (const char* direction : {"LEFT", "RIGHT"}) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_string("direction", direction));
      cases.push_back(Case{std::string("bitshift_") + direction + suffix(t), "BitShift",
                           {{"a", random_tensor(t, {3, 11}, 0, top, 10)}, {"b", random_tensor(t, {11}, 0, bits + 3, 11)}},
                           std::move(a), 1, tolerance(t, 0)});
    }
  }
  check(cases, "elementwise");
}

// Tensors of the values where implementations part: NaN (which Relu, Max, Min and Clip must pass
// on, as PyTorch does: an inf/NaN check downstream has to see it), infinities, signed zeros and
// fp32 subnormals, mixed with ordinary values.
Tensor special_tensor(DType t, std::vector<int64_t> dims, uint32_t seed) {
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 3.0, -3.0, 0.5, -7.25};
  Tensor x = random_tensor(DType::kDouble, dims, -4, 4, seed);
  std::mt19937 gen(seed);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (gen() % 2) x.mutable_as<double>()[i] = specials[gen() % (sizeof(specials) / sizeof(specials[0]))];
  Tensor out(t, x.dims);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.as<double>()[i];
    switch (t) {
      case DType::kFloat: out.mutable_as<float>()[i] = static_cast<float>(v); break;
      case DType::kDouble: out.mutable_as<double>()[i] = v; break;
      case DType::kFloat16: out.mutable_as<uint16_t>()[i] = fp32_to_fp16(static_cast<float>(v)); break;
      case DType::kBFloat16: out.mutable_as<uint16_t>()[i] = fp32_to_bf16(static_cast<float>(v)); break;
      default: throw std::logic_error("special_tensor: not a float type");
    }
  }
  return out;
}

TEST(CpuKernels, SpecialValuesMatchTorch) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    for (const auto& [ref, op] : {std::pair<const char*, const char*>{"relu_special", "Relu"}, {"abs_special", "Abs"},
                                  {"sigmoid_special", "Sigmoid"}, {"neg_special", "Neg"}})
      cases.push_back(Case{ref + suffix(t), op, {{"x", special_tensor(t, {4, 25}, 41)}}, {}, 1, tolerance(t, 1)});
    for (const auto& [ref, op] : {std::pair<const char*, const char*>{"max_special", "Max"}, {"min_special", "Min"}})
      cases.push_back(Case{ref + suffix(t), op, {{"a", special_tensor(t, {4, 25}, 42)}, {"b", special_tensor(t, {25}, 43)}},
                           {}, 1, tolerance(t, 0)});
    cases.push_back(Case{"clip_special" + suffix(t), "Clip",
                         {{"x", special_tensor(t, {4, 25}, 46)}, {"lo", random_tensor(t, {}, -1, -1, 0)},
                          {"hi", random_tensor(t, {}, 2, 2, 0)}},
                         {}, 1, tolerance(t, 0)});
    cases.push_back(Case{"round_special" + suffix(t), "Round", {{"x", special_tensor(t, {4, 25}, 47)}}, {}, 1,
                         tolerance(t, 0)});
    // The new maps through NaN, infinities and signed zeros (ThresholdedRelu and Shrink give 0 for
    // NaN, as ONNX's numpy reference).
    for (const auto& [ref, op] : {std::pair<const char*, const char*>{"sin_special", "Sin"}, {"atan_special", "Atan"},
                                  {"softsign_special", "Softsign"}, {"celu_special", "Celu"},
                                  {"thresholdedrelu_special", "ThresholdedRelu"}, {"shrink_special", "Shrink"}})
      cases.push_back(Case{ref + suffix(t), op, {{"x", special_tensor(t, {4, 25}, 56)}}, {}, 1, tolerance(t, 1)});
    // IsNaN, and IsInf with both signs (the default), +inf only and -inf only.
    cases.push_back(Case{"isnan_special" + suffix(t), "IsNaN", {{"x", special_tensor(t, {4, 25}, 48)}}, {}, 1,
                         tolerance(t, 0)});
    cases.push_back(Case{"isinf_special" + suffix(t), "IsInf", {{"x", special_tensor(t, {4, 25}, 49)}}, {}, 1,
                         tolerance(t, 0)});
    for (const auto& [ref, detect] : {std::pair<const char*, const char*>{"isposinf_special", "detect_negative"},
                                      {"isneginf_special", "detect_positive"}}) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_int(detect, 0));
      cases.push_back(Case{ref + suffix(t), "IsInf", {{"x", special_tensor(t, {4, 25}, 50)}}, std::move(a), 1,
                           tolerance(t, 0)});
    }
  }
  check(cases, "special");
}

// The other op families a NaN must get through as it does in PyTorch (issue 13): the other
// activations, pooling, reductions, softmax, and a comparison feeding Where (NaN compares false
// and picks the second branch; a NaN in a branch is passed on).
TEST(CpuKernels, NaNAndInfGetThroughEveryOpFamilyAsInTorch) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    std::vector<Attribute> leaky;
    leaky.push_back(Attribute::of_float("alpha", 0.1f));
    cases.push_back(Case{"leakyrelu_special" + suffix(t), "LeakyRelu", {{"x", special_tensor(t, {4, 25}, 51)}},
                         std::move(leaky), 1, tolerance(t, 0)});
    if (t != DType::kDouble) {  // the export's alpha, a float attribute, is not torch's 1/6 in float64
      std::vector<Attribute> hs;
      hs.push_back(Attribute::of_float("alpha", 1.0f / 6));
      cases.push_back(Case{"hardsigmoid_special" + suffix(t), "HardSigmoid", {{"x", special_tensor(t, {4, 25}, 52)}},
                           std::move(hs), 1, tolerance(t, 1)});
    }
    cases.push_back(Case{"hardswish_special" + suffix(t), "HardSwish", {{"x", special_tensor(t, {4, 25}, 53)}}, {}, 1,
                         tolerance(t, 0)});
    std::vector<Attribute> pool;
    pool.push_back(Attribute::of_ints("kernel_shape", {3, 3}));
    pool.push_back(Attribute::of_ints("strides", {2, 2}));
    pool.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
    cases.push_back(Case{"maxpool_special" + suffix(t), "MaxPool", {{"x", special_tensor(t, {2, 3, 9, 9}, 54)}},
                         std::move(pool), 1, tolerance(t, 0)});
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      std::vector<Attribute> axes;
      axes.push_back(Attribute::of_ints("axes", {1}));
      cases.push_back(Case{std::string(op) == "ReduceMax" ? "reduce_max_special" + suffix(t) : "reduce_min_special" + suffix(t),
                           op, {{"x", special_tensor(t, {4, 5, 6}, 55)}}, std::move(axes), 1, tolerance(t, 0)});
    }
    cases.push_back(Case{"reduce_sum_special" + suffix(t), "ReduceSum",
                         {{"x", special_tensor(t, {4, 5, 6}, 56)}, {"axes", int64_tensor({1})}}, {}, 1,
                         tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"softmax_special" + suffix(t), "Softmax", {{"x", special_tensor(t, {6, 7}, 57)}}, {}, 1,
                         tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"greater_special" + suffix(t), "Greater",
                         {{"a", special_tensor(t, {4, 25}, 58)}, {"b", special_tensor(t, {25}, 59)}}, {}, 1,
                         tolerance(t, 0)});
    cases.push_back(Case{"where_special" + suffix(t), "Where",
                         {{"c", random_tensor(DType::kBool, {4, 25}, 0, 1, 60)},
                          {"a", special_tensor(t, {4, 25}, 61)},
                          {"b", special_tensor(t, {25}, 62)}},
                         {}, 1, tolerance(t, 0)});
  }
  check(cases, "nonfinite");
}

// ai.onnx_amp Gelu and GeluGrad against torch.nn.functional.gelu and its autograd, both forms.
TEST(CpuKernels, GeluAndItsGradientMatchTorch) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes)
    for (const char* approximate : {"none", "tanh"}) {
      const std::string form = approximate;
      std::vector<Attribute> a;
      a.push_back(Attribute::of_string("approximate", form));
      // Below x = -3, 1 + erf(x / sqrt 2) cancels (PyTorch's formula, and ours): an ulp of erf's
      // result, which libm and PyTorch's vectorised erf need not agree on, is a large part of it.
      // The error is bounded absolutely, by |x|/2 times a few ulps of 1.
      Case gelu{"gelu_" + form + suffix(t), "Gelu", {{"x", random_tensor(t, {3, 4, 17}, -5, 5, 21)}}, std::move(a), 1,
                tolerance(t, 2, 4e-6), "ai.onnx_amp"};
      gelu.tol.atol = t == DType::kDouble ? 1e-14 : 6e-7;
      cases.push_back(std::move(gelu));
      std::vector<Attribute> ga;
      ga.push_back(Attribute::of_string("approximate", form));
      Case grad{"gelu_grad_" + form + suffix(t), "GeluGrad",
                {{"dy", random_tensor(t, {3, 4, 17}, -2, 2, 22)}, {"x", random_tensor(t, {3, 4, 17}, -5, 5, 23)}},
                std::move(ga), 1, tolerance(t, 1, 4e-6), "ai.onnx_amp"};
      // gelu' crosses 0 near x = -0.75 as the difference of two terms near 0.23: a few ulps of
      // those, not of the result.
      grad.tol.atol = t == DType::kDouble ? 1e-14 : 2e-7;
      cases.push_back(std::move(grad));
    }
  check(cases, "gelu");
}

TEST(CpuKernels, CastRoundsOnceToNearestEven) {
  std::vector<Case> cases;
  // Wide range: overflow to inf past 65520, subnormals, ties.
  Tensor wide = random_tensor(DType::kFloat, {4096}, -70000, 70000, 21);
  Tensor tiny = random_tensor(DType::kFloat, {4096}, -1e-4, 1e-4, 22);
  Tensor both(DType::kFloat, {8192});
  std::memcpy(both.mutable_data(), wide.data(), wide.nbytes());
  std::memcpy(both.mutable_data() + wide.nbytes(), tiny.data(), tiny.nbytes());
  std::vector<Attribute> to16, tobf, to32, to16b;
  to16.push_back(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat16)));
  tobf.push_back(Attribute::of_int("to", static_cast<int64_t>(DType::kBFloat16)));
  to32.push_back(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat)));
  to16b.push_back(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat16)));
  cases.push_back(Case{"cast_to_f16@float", "Cast", {{"x", both}}, std::move(to16), 1, {}});
  cases.push_back(Case{"cast_to_bf16@float", "Cast", {{"x", both}}, std::move(tobf), 1, {}});
  cases.push_back(Case{"cast_to_f32@float16", "Cast", {{"x", random_tensor(DType::kFloat16, {999}, -60000, 60000, 23)}},
                       std::move(to32), 1, {}});
  // float64 values just off an fp16 halfway point, on the side away from the even neighbour:
  // rounding to float32 first would land exactly on the halfway point and round to even, the
  // wrong way (the lower neighbour's mantissa is i: even i needs the value above halfway).
  Tensor f64 = random_tensor(DType::kDouble, {1024}, -100, 100, 24);
  for (int i = 0; i < 256; ++i) {
    const double halfway = (1.0 + (2 * i + 1) * std::ldexp(1.0, -11)) * std::ldexp(1.0, i % 8);
    f64.mutable_as<double>()[i] = halfway + std::ldexp(halfway, -40) * (i % 2 ? -1 : 1);
  }
  cases.push_back(Case{"cast_f64_to_f16@double", "Cast", {{"x", f64}}, std::move(to16b), 1, {}});
  check(cases, "cast");
}

TEST(CpuKernels, MatMulAccumulatesInFp32AndRoundsOnce) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    // K = 256: an fp16 accumulator would be off by many steps; fp32 accumulation is within one.
    cases.push_back(Case{"matmul" + suffix(t), "MatMul",
                         {{"a", random_tensor(t, {2, 1, 5, 256}, -1, 1, 31)}, {"b", random_tensor(t, {3, 256, 4}, -1, 1, 32)}},
                         {}, 1, tolerance(t, 1, 1e-5)});
    // The batch layouts oneDNN's bf16 matmul takes: one weight matrix for every batch (a Linear
    // layer on [N, T, C]) and equal batch dims (attention heads).
    // Sums of K products of terms in [-1, 1] cancel: an fp32 accumulator's error is bounded
    // absolutely, K * 2^-24 at worst, whatever order the library sums in.
    Case linear{"matmul_linear" + suffix(t), "MatMul",
                {{"a", random_tensor(t, {3, 7, 300}, -1, 1, 38)}, {"b", random_tensor(t, {300, 9}, -1, 1, 39)}},
                {}, 1, tolerance(t, 1, 1e-5)};
    Case heads{"matmul_heads" + suffix(t), "MatMul",
               {{"a", random_tensor(t, {2, 4, 6, 200}, -1, 1, 40)}, {"b", random_tensor(t, {2, 4, 200, 5}, -1, 1, 41)}},
               {}, 1, tolerance(t, 1, 1e-5)};
    if (t == DType::kFloat) {
      linear.tol.atol = 300 * std::ldexp(1.0, -24);
      heads.tol.atol = 200 * std::ldexp(1.0, -24);
    }
    cases.push_back(std::move(linear));
    cases.push_back(std::move(heads));
    cases.push_back(Case{"matmul_vec" + suffix(t), "MatMul",
                         {{"a", random_tensor(t, {7}, -1, 1, 33)}, {"b", random_tensor(t, {2, 7, 4}, -1, 1, 34)}},
                         {}, 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> a;
    a.push_back(Attribute::of_int("transB", 1));
    a.push_back(Attribute::of_float("alpha", 0.5f));
    a.push_back(Attribute::of_float("beta", 2.0f));
    cases.push_back(Case{"gemm" + suffix(t), "Gemm",
                         {{"a", random_tensor(t, {6, 300}, -1, 1, 35)},
                          {"b", random_tensor(t, {5, 300}, -1, 1, 36)},
                          {"c", random_tensor(t, {5}, -1, 1, 37)}},
                         std::move(a), 1, tolerance(t, 1, 1e-5)});
  }
  check(cases, "matmul");
}

TEST(CpuKernels, ConvAndPoolMatchTorch) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    std::vector<Attribute> conv;
    conv.push_back(Attribute::of_ints("strides", {2, 1}));
    conv.push_back(Attribute::of_ints("pads", {1, 2, 1, 2}));
    conv.push_back(Attribute::of_ints("dilations", {1, 2}));
    conv.push_back(Attribute::of_int("group", 2));
    cases.push_back(Case{"conv" + suffix(t), "Conv",
                         {{"x", random_tensor(t, {2, 4, 9, 8}, -1, 1, 41)},
                          {"w", random_tensor(t, {6, 2, 3, 3}, -1, 1, 42)},
                          {"b", random_tensor(t, {6}, -1, 1, 43)}},
                         std::move(conv), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"conv_1x1" + suffix(t), "Conv",
                         {{"x", random_tensor(t, {2, 8, 5, 5}, -1, 1, 44)}, {"w", random_tensor(t, {4, 8, 1, 1}, -1, 1, 45)}},
                         {}, 1, tolerance(t, 1, 1e-5)});
    // A stride the input's size does not fill: the window never reaches the last row (oneDNN reads
    // a cropped view there).
    std::vector<Attribute> crop;
    crop.push_back(Attribute::of_ints("strides", {2, 2}));
    cases.push_back(Case{"conv_crop" + suffix(t), "Conv",
                         {{"x", random_tensor(t, {2, 3, 8, 7}, -1, 1, 39)}, {"w", random_tensor(t, {5, 3, 2, 2}, -1, 1, 40)}},
                         std::move(crop), 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> conv1d;
    conv1d.push_back(Attribute::of_ints("pads", {1, 1}));
    cases.push_back(Case{"conv_1d" + suffix(t), "Conv",
                         {{"x", random_tensor(t, {2, 3, 10}, -1, 1, 46)},
                          {"w", random_tensor(t, {5, 3, 3}, -1, 1, 47)},
                          {"b", random_tensor(t, {5}, -1, 1, 48)}},
                         std::move(conv1d), 1, tolerance(t, 1, 1e-5)});
    for (const char* op : {"MaxPool", "AveragePool"}) {
      std::vector<Attribute> pool;
      pool.push_back(Attribute::of_ints("kernel_shape", {3, 3}));
      pool.push_back(Attribute::of_ints("strides", {2, 2}));
      pool.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
      cases.push_back(Case{std::string(op == std::string("MaxPool") ? "maxpool" : "avgpool") + suffix(t), op,
                           {{"x", random_tensor(t, {2, 3, 9, 9}, -1, 1, 49)}}, std::move(pool), 1, tolerance(t, 1, 1e-6)});
    }
    cases.push_back(Case{"global_avgpool" + suffix(t), "GlobalAveragePool",
                         {{"x", random_tensor(t, {2, 3, 7, 6}, -1, 1, 50)}}, {}, 1, tolerance(t, 1, 1e-6)});
    cases.push_back(Case{"global_maxpool" + suffix(t), "GlobalMaxPool",
                         {{"x", random_tensor(t, {2, 3, 7, 6}, -1, 1, 51)}}, {}, 1, tolerance(t, 0)});
  }
  check(cases, "conv");
}

TEST(CpuKernels, NormalizationSoftmaxReductionsAndLossMatchReferences) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    auto bn_inputs = [&](uint32_t seed) {
      return std::vector<std::pair<std::string, Tensor>>{
          {"x", random_tensor(t, {4, 3, 5, 5}, -2, 3, seed)}, {"s", random_tensor(t, {3}, 0.5, 1.5, seed + 1)},
          {"b", random_tensor(t, {3}, -1, 1, seed + 2)},      {"m", random_tensor(t, {3}, -0.5, 0.5, seed + 3)},
          {"v", random_tensor(t, {3}, 0.5, 2, seed + 4)}};
    };
    std::vector<Attribute> train;
    train.push_back(Attribute::of_int("training_mode", 1));
    cases.push_back(Case{"batchnorm_train" + suffix(t), "BatchNormalization", bn_inputs(61), std::move(train), 3,
                         tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"batchnorm_eval" + suffix(t), "BatchNormalization", bn_inputs(71), {}, 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"layernorm" + suffix(t), "LayerNormalization",
                         {{"x", random_tensor(t, {3, 4, 16}, -2, 3, 81)},
                          {"s", random_tensor(t, {16}, 0.5, 1.5, 82)},
                          {"b", random_tensor(t, {16}, -1, 1, 83)}},
                         {}, 3, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> in_eps;
    in_eps.push_back(Attribute::of_float("epsilon", 1e-3f));
    cases.push_back(Case{"instancenorm" + suffix(t), "InstanceNormalization",
                         {{"x", random_tensor(t, {2, 3, 5, 4}, -2, 3, 84)},
                          {"s", random_tensor(t, {3}, 0.5, 1.5, 85)},
                          {"b", random_tensor(t, {3}, -1, 1, 86)}},
                         std::move(in_eps), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"mvn" + suffix(t), "MeanVarianceNormalization", {{"x", random_tensor(t, {2, 3, 4, 5}, -2, 3, 87)}},
                         {}, 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> mvn_axes;
    mvn_axes.push_back(Attribute::of_ints("axes", {1, -1}));
    cases.push_back(Case{"mvn_axes" + suffix(t), "MeanVarianceNormalization",
                         {{"x", random_tensor(t, {2, 3, 4, 5}, -2, 3, 88)}}, std::move(mvn_axes), 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> axis1;
    axis1.push_back(Attribute::of_int("axis", 1));
    cases.push_back(Case{"softmax" + suffix(t), "Softmax", {{"x", random_tensor(t, {3, 5, 4}, -4, 4, 91)}},
                         std::move(axis1), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"logsoftmax" + suffix(t), "LogSoftmax", {{"x", random_tensor(t, {3, 5, 4}, -4, 4, 92)}}, {}, 1,
                         tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_sum_02" + suffix(t), "ReduceSum",
                         {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 93)}, {"axes", int64_tensor({0, 2})}}, {}, 1,
                         tolerance(t, 1, 1e-5)});
    std::vector<Attribute> mean_axes, max_axes;
    mean_axes.push_back(Attribute::of_ints("axes", {-1}));
    mean_axes.push_back(Attribute::of_int("keepdims", 0));
    max_axes.push_back(Attribute::of_ints("axes", {1}));
    cases.push_back(Case{"reduce_mean_last" + suffix(t), "ReduceMean", {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 94)}},
                         std::move(mean_axes), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_max_1" + suffix(t), "ReduceMax", {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 95)}},
                         std::move(max_axes), 1, tolerance(t, 0)});
    std::vector<Attribute> sce;
    sce.push_back(Attribute::of_int("ignore_index", 1));
    cases.push_back(Case{"sce" + suffix(t), "SoftmaxCrossEntropyLoss",
                         {{"x", random_tensor(t, {4, 5, 3}, -3, 3, 96)},
                          {"labels", random_tensor(DType::kInt64, {4, 3}, 0, 5, 97)},
                          {"w", random_tensor(t, {5}, 0.5, 2, 98)}},
                         std::move(sce), 2, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> perm;
    perm.push_back(Attribute::of_ints("perm", {2, 0, 1}));
    cases.push_back(Case{"transpose" + suffix(t), "Transpose", {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 99)}},
                         std::move(perm), 1, tolerance(t, 0)});
  }
  check(cases, "norm");
}

// The activations and arithmetic the torchvision zoo and its single-op probes need (issue 16):
// Sign, Softplus, Elu, Selu (ONNX's defaults and other constants) and Mod in both fmod modes,
// against PyTorch (torch.sign, F.softplus, F.elu, F.selu, torch.remainder, torch.fmod) in the
// four float types. Divisors are kept away from 0 and both signs occur.
TEST(CpuKernels, ZooElementwiseOpsMatchPyTorchInEveryFloatType) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back(unary("sign", "Sign", t, -3, 3, 0));
    cases.push_back(unary("softplus", "Softplus", t, -30, 30, 1));
    cases.push_back(unary("elu", "Elu", t, -4, 3, 1));
    {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_float("alpha", 0.5f));
      cases.push_back(unary("elu_half", "Elu", t, -4, 3, 1, std::move(a)));
    }
    // Not in float64, where ONNX's alpha and gamma, float attributes, are 3e-8 from torch's.
    if (t != DType::kDouble) cases.push_back(unary("selu", "Selu", t, -4, 3, 1));
    for (int fmod = 0; fmod < 2; ++fmod) {
      Tensor b = random_tensor(t, {3, 1}, 0.5, 2.5, 2);
      // A negative divisor in the middle row.
      Tensor neg = random_tensor(t, {1}, -1.75, -1.75, 0);
      std::memcpy(b.mutable_data() + neg.nbytes(), neg.data(), neg.nbytes());
      std::vector<Attribute> a;
      a.push_back(Attribute::of_int("fmod", fmod));
      cases.push_back(Case{(fmod ? "fmod" : "remainder") + suffix(t), "Mod",
                           {{"a", random_tensor(t, {2, 3, 4}, -6, 6, 1)}, {"b", b}}, std::move(a), 1, tolerance(t, 0)});
    }
  }
  // Integer Mod (Swin's window padding arithmetic is int64): Python's % and C's %.
  for (int fmod = 0; fmod < 2; ++fmod) {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_int("fmod", fmod));
    cases.push_back(Case{std::string(fmod ? "fmod" : "remainder") + "@int64", "Mod",
                         {{"a", int64_tensor({7, -7, 7, -7, 0, 13, -1, 224})}, {"b", int64_tensor({3, 3, -3, -3, 5, 7, 7, 7})}},
                         std::move(a), 1, tolerance(DType::kInt64, 0)});
  }
  check(cases, "zoo_elementwise");
}

// Pad in its three modes torch exports (constant with a value, reflect, edge; the zoo's DenseNet,
// Inception v3 and MaxViT pad with constants), and negative amounts that crop, against
// torch.nn.functional.pad in the four float types: moved elements, so bit for bit.
TEST(CpuKernels, PadMatchesPyTorchInEveryFloatType) {
  std::vector<Case> cases;
  struct Mode {
    const char* ref;
    const char* mode;
    std::vector<int64_t> pads;  // ONNX order: begins of every axis, then ends
    bool value;
  };
  const Mode modes[] = {{"pad_constant", "constant", {0, 0, 1, 2, 0, 0, 2, 1}, true},
                        {"pad_reflect", "reflect", {0, 0, 1, 2, 0, 0, 2, 4}, false},
                        {"pad_edge", "edge", {0, 0, 3, 2, 0, 0, 2, 1}, false},
                        {"pad_crop", "constant", {0, 0, -1, 2, 0, 0, 1, -2}, false}};
  for (DType t : kFloatTypes)
    for (const Mode& m : modes) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_string("mode", m.mode));
      Case c{m.ref + suffix(t), "Pad", {{"x", random_tensor(t, {2, 3, 5, 6}, -3, 3, 21)}, {"pads", int64_tensor(m.pads)}},
             std::move(a), 1, tolerance(t, 0)};
      if (m.value) c.inputs.push_back({"value", random_tensor(t, {}, 0.75, 0.75, 0)});
      cases.push_back(std::move(c));
    }
  check(cases, "pad");
}

// Resize as PyTorch 1.13 exports F.interpolate (issue 16's upsampling heads): nearest (asymmetric,
// floor) by a scale and to a size, bilinear with align_corners False (pytorch_half_pixel) up and
// down and True (align_corners), against F.interpolate in the four float types. Nearest moves
// elements (bit for bit); bilinear may differ by an fp32 rounding of its weights.
TEST(CpuKernels, ResizeMatchesPyTorchsInterpolateInEveryFloatType) {
  std::vector<Case> cases;
  struct Mode {
    const char* ref;
    const char* mode;
    const char* coord;
    std::vector<float> scales;  // empty: sizes
    std::vector<int64_t> sizes;
    int ulps;
  };
  const Mode modes[] = {{"resize_nearest_x2", "nearest", "asymmetric", {1, 1, 2, 2}, {}, 0},
                        {"resize_nearest_size", "nearest", "asymmetric", {}, {2, 3, 7, 9}, 0},
                        {"resize_bilinear_x2", "linear", "pytorch_half_pixel", {1, 1, 2, 2}, {}, 1},
                        {"resize_bilinear_down", "linear", "pytorch_half_pixel", {}, {2, 3, 3, 4}, 1},
                        {"resize_bilinear_corners", "linear", "align_corners", {}, {2, 3, 9, 11}, 1}};
  for (DType t : kFloatTypes)
    for (const Mode& m : modes) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_string("mode", m.mode));
      a.push_back(Attribute::of_string("coordinate_transformation_mode", m.coord));
      a.push_back(Attribute::of_string("nearest_mode", "floor"));
      Case c{m.ref + suffix(t), "Resize", {{"x", random_tensor(t, {2, 3, 5, 6}, -3, 3, 31)}, {"", Tensor()}}, std::move(a), 1,
             tolerance(t, m.ulps, 1e-5)};
      if (m.sizes.empty()) {
        Tensor scales(DType::kFloat, {4});
        for (int i = 0; i < 4; ++i) scales.mutable_as<float>()[i] = m.scales[static_cast<size_t>(i)];
        c.inputs.push_back({"scales", scales});
      } else {
        c.inputs.push_back({"", Tensor()});
        c.inputs.push_back({"sizes", int64_tensor(m.sizes)});
      }
      cases.push_back(std::move(c));
    }
  check(cases, "resize");
}

// Resize mode cubic against F.interpolate(mode='bicubic') (A = -0.75, outside taps read the edge):
// align_corners False (half_pixel) up by a scale and down to a size, True (align_corners) to a
// size, and ResizeGrad's dX against its autograd; against ONNX's own reference (interpolate_nd
// with cubic_coeffs) where torch has no counterpart: 3-D, asymmetric, cubic_coeff_a -0.5 with
// exclude_outside. In the four float types: float32 against float64, 16-bit against the emulated
// reference (fp32, one rounding).
TEST(CpuKernels, ResizeCubicMatchesTorchAndOnnxsReference) {
  std::vector<Case> cases;
  struct Mode {
    const char* ref;
    const char* coord;
    std::vector<int64_t> in;
    std::vector<float> scales;  // empty: sizes
    std::vector<int64_t> sizes;
    float a;
    int exclude;
  };
  const Mode modes[] = {{"resize_bicubic_x2", "half_pixel", {2, 3, 5, 6}, {1, 1, 2, 2}, {}, -0.75f, 0},
                        {"resize_bicubic_down", "half_pixel", {2, 3, 5, 6}, {}, {2, 3, 3, 4}, -0.75f, 0},
                        {"resize_bicubic_corners", "align_corners", {2, 3, 5, 6}, {}, {2, 3, 9, 11}, -0.75f, 0},
                        {"resize_cubic_3d", "half_pixel", {3, 4, 5}, {}, {5, 6, 3}, -0.75f, 0},
                        {"resize_cubic_asymmetric", "asymmetric", {1, 2, 4, 5}, {1, 1, 1.5f, 0.6f}, {}, -0.75f, 0},
                        {"resize_cubic_exclude", "pytorch_half_pixel", {1, 2, 4, 5}, {}, {1, 2, 7, 3}, -0.5f, 1}};
  for (DType t : kFloatTypes)
    for (const Mode& m : modes) {
      auto attrs = [&] {
        std::vector<Attribute> a;
        a.push_back(Attribute::of_string("mode", "cubic"));
        a.push_back(Attribute::of_string("coordinate_transformation_mode", m.coord));
        a.push_back(Attribute::of_float("cubic_coeff_a", m.a));
        a.push_back(Attribute::of_int("exclude_outside", m.exclude));
        return a;
      };
      Tensor scales(DType::kFloat, {static_cast<int64_t>(m.scales.size())});
      for (size_t i = 0; i < m.scales.size(); ++i) scales.mutable_as<float>()[i] = m.scales[i];
      const Tensor x = random_tensor(t, m.in, -3, 3, 146);
      Case c{m.ref + suffix(t), "Resize", {{"x", x}, {"", Tensor()}}, attrs(), 1, tolerance(t, 1, 1e-6)};
      if (m.sizes.empty()) {
        c.inputs.push_back({"scales", scales});
      } else {
        c.inputs.push_back({"", Tensor()});
        c.inputs.push_back({"sizes", int64_tensor(m.sizes)});
      }
      cases.push_back(std::move(c));
      if (std::string(m.ref).rfind("resize_bicubic", 0) != 0) continue;
      // The gradient: dY of the forward's output dims, X's shape, and the scales when it had them.
      std::vector<int64_t> out = m.sizes;
      if (out.empty())
        for (size_t i = 0; i < m.in.size(); ++i) out.push_back(static_cast<int64_t>(std::floor(m.in[i] * m.scales[i])));
      Case g{std::string(m.ref) + "_grad" + suffix(t), "ResizeGrad",
             {{"dy", random_tensor(t, out, -1, 1, 147)}, {"shape", int64_tensor(m.in)}}, attrs(), 1, tolerance(t, 1, 1e-6),
             "ai.onnx_amp"};
      if (!m.scales.empty()) g.inputs.push_back({"scales", scales});
      cases.push_back(std::move(g));
    }
  check(cases, "resize_cubic");
}

// GridSample in every mode (bilinear, nearest, bicubic) x padding_mode (zeros, border, reflection)
// x align_corners against F.grid_sample, and ai.onnx_amp GridSampleGrad's dX and dGrid against its
// autograd, in the four float types: float32 against torch in float64; the 16-bit forward against
// the emulated reference (fp32 torch, one rounding); the 16-bit gradient against torch in float64
// rounded once, as the kernel sums in fp64 and rounds once, with a float32 grid (ONNX lets the
// grid's type differ): bicubic's dGrid where border or reflection clamp all 16 taps onto one pixel
// is 0 but for rounding noise, which a 16-bit comparison in steps cannot judge. The grid reaches
// past [-1, 1], so every padding mode is exercised; one more case samples a float16 X with a
// float32 grid.
TEST(CpuKernels, GridSampleAndItsGradientMatchTorch) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes)
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* padding : {"zeros", "border", "reflection"})
        for (int align = 0; align < 2; ++align) {
          auto attrs = [&] {
            std::vector<Attribute> a;
            a.push_back(Attribute::of_string("mode", mode));
            a.push_back(Attribute::of_string("padding_mode", padding));
            a.push_back(Attribute::of_int("align_corners", align));
            return a;
          };
          const std::string name = std::string(mode) + "_" + padding + "_" + std::to_string(align) + suffix(t);
          const Tensor x = random_tensor(t, {2, 3, 5, 6}, -2, 2, 141), grid = random_tensor(t, {2, 4, 3, 2}, -1.3, 1.3, 142);
          cases.push_back(Case{"grid_sample_" + name, "GridSample", {{"x", x}, {"grid", grid}}, attrs(), 1,
                               tolerance(t, 1, 1e-6)});
          const bool low = t == DType::kFloat16 || t == DType::kBFloat16;
          cases.push_back(Case{"grid_sample_grad_" + name, "GridSampleGrad",
                               {{"dy", random_tensor(t, {2, 3, 4, 3}, -1, 1, 143)},
                                {"x", x},
                                {"grid", low ? random_tensor(DType::kFloat, {2, 4, 3, 2}, -1.3, 1.3, 142) : grid}},
                               attrs(), 2, tolerance(t, 1, 1e-6), "ai.onnx_amp"});
        }
  std::vector<Attribute> a;
  a.push_back(Attribute::of_string("mode", "bicubic"));
  cases.push_back(Case{"grid_sample_bicubic_zeros_0@float16_float32grid", "GridSample",
                       {{"x", random_tensor(DType::kFloat16, {2, 3, 5, 6}, -2, 2, 144)},
                        {"grid", random_tensor(DType::kFloat, {2, 4, 3, 2}, -1.3, 1.3, 145)}},
                       std::move(a), 1, tolerance(DType::kFloat16, 1)});
  check(cases, "grid_sample");
}

// ScatterND as Swin's shifted-window mask uses it (slices of a zero tensor set to a region's
// number), rows and single elements, against numpy's indexed assignment in the four float types.
TEST(CpuKernels, ScatterNDMatchesNumpy) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back(Case{"scatternd_rows" + suffix(t), "ScatterND",
                         {{"x", random_tensor(t, {5, 4, 3}, -2, 2, 51)},
                          {"i", int64_tensor({3, 0})},
                          {"u", random_tensor(t, {2, 4, 3}, -2, 2, 52)}},
                         {}, 1, tolerance(t, 0)});
    cases.back().inputs[1].second.dims = {2, 1};
    cases.push_back(Case{"scatternd_elements" + suffix(t), "ScatterND",
                         {{"x", random_tensor(t, {5, 4, 3}, -2, 2, 53)},
                          {"i", int64_tensor({1, 2, 0, 4, -1, 2})},
                          {"u", random_tensor(t, {2}, -2, 2, 54)}},
                         {}, 1, tolerance(t, 0)});
    cases.back().inputs[1].second.dims = {2, 3};
  }
  check(cases, "scatternd");
}

// The data-movement and indexing ops of issue 31 (Tile, CumSum, GatherElements, ScatterElements,
// ScatterElements and ScatterND with opset 18's max and min, DepthToSpace, SpaceToDepth, TopK, GatherND, NonZero, Compress, EyeLike, ReverseSequence,
// Hardmax, MaxUnpool, NonMaxSuppression, Unique, RoiAlign) against numpy, torch and torchvision, in the four float types and int32 / int64 where ONNX allows
// them. ONNX's own node tests of them run in `Libonnx`.
Tensor ints_of(std::vector<int64_t> dims, std::vector<int64_t> values) {
  Tensor t = int64_tensor(std::move(values));
  t.dims = std::move(dims);
  return t;
}

constexpr int64_t kNoAxis = INT64_MIN;  // an op without an axis attribute (ScatterND)

std::vector<Attribute> int_attrs(std::vector<std::pair<std::string, int64_t>> values) {
  std::vector<Attribute> a;
  for (auto& [name, v] : values) a.push_back(Attribute::of_int(name, v));
  return a;
}

TEST(CpuKernels, IndexingOpsMatchNumpyAndTorch) {
  std::vector<Case> cases;
  const DType types[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32, DType::kInt64};
  for (DType t : types) {
    const bool is_float = t != DType::kInt32 && t != DType::kInt64;
    auto data = [&](std::vector<int64_t> dims, uint32_t seed) { return random_tensor(t, std::move(dims), -20, 20, seed); };
    cases.push_back(Case{"tile" + suffix(t), "Tile", {{"x", data({2, 3, 4}, 101)}, {"r", int64_tensor({2, 1, 3})}}, {}, 1,
                         tolerance(t, 0)});
    // Running sums: fp32 accumulation (fp64 for double), rounded once per output, in numpy's
    // sequential order: equal bit for bit.
    for (int ex = 0; ex < 2; ++ex)
      for (int rev = 0; rev < 2; ++rev) {
        const std::string ref = std::string("cumsum") + (ex ? "_exclusive" : "") + (rev ? "_reverse" : "");
        Case c{ref + suffix(t), "CumSum", {{"x", data({3, 7, 5}, 102)}, {"axis", ints_of({}, {-2})}},
               int_attrs({{"exclusive", ex}, {"reverse", rev}}), 1, tolerance(t, 0)};
        cases.push_back(std::move(c));
      }
    cases.push_back(Case{"gather_elements" + suffix(t), "GatherElements",
                         {{"x", data({4, 5, 3}, 103)}, {"i", ints_of({4, 2, 3}, {0, 4, -1, 2, 2, 1, 3, 0, 0, 1, 1, 1,
                                                                                  4, 4, 4, -5, 2, 0, 1, 3, 2, 0, 0, 4})}},
                         int_attrs({{"axis", 1}}), 1, tolerance(t, 0)});
    // Along axis 0 of [4, 5] with indices [3, 5]: a repeated index in column 1 (the last write
    // stays) for reduction none, distinct indices per column for add and mul.
    cases.push_back(Case{"scatter_elements" + suffix(t), "ScatterElements",
                         {{"x", data({4, 5}, 104)}, {"i", ints_of({3, 5}, {0, 1, 3, 2, -1, 2, 1, 0, 3, 0, 1, 1, 2, 1, 2})},
                          {"u", data({3, 5}, 105)}},
                         {}, 1, tolerance(t, 0)});
    for (const char* reduction : {"add", "mul"}) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_int("axis", 0));
      a.push_back(Attribute::of_string("reduction", reduction));
      cases.push_back(Case{std::string("scatter_elements_") + reduction + suffix(t), "ScatterElements",
                           {{"x", is_float ? data({4, 5}, 106) : random_tensor(t, {4, 5}, -5, 5, 106)},
                            {"i", ints_of({3, 5}, {0, 1, 3, 2, -1, 2, 3, 0, 3, 0, 1, 2, 2, 1, 2})},
                            {"u", is_float ? data({3, 5}, 107) : random_tensor(t, {3, 5}, -5, 5, 107)}},
                           std::move(a), 1, tolerance(t, 0)});
    }
    // Opset 18's reductions max and min (ai.onnx_amp ScatterElements, ScatterND): repeated indices,
    // so several updates compete for one element in turn; small values, so some tie.
    auto reduce = [](int64_t axis, const char* reduction) {
      std::vector<Attribute> a;
      if (axis != kNoAxis) a.push_back(Attribute::of_int("axis", axis));
      a.push_back(Attribute::of_string("reduction", reduction));
      return a;
    };
    cases.push_back(Case{"scatter_elements_max" + suffix(t), "ScatterElements",
                         {{"x", random_tensor(t, {3, 5}, -4, 4, 114)},
                          {"i", ints_of({3, 4}, {1, 1, 4, -1, 0, 2, 0, 2, 3, 3, 3, -2})},
                          {"u", random_tensor(t, {3, 4}, -4, 4, 115)}},
                         reduce(1, "max"), 1, tolerance(t, 0), kAmpDomain});
    cases.push_back(Case{"scatter_elements_min" + suffix(t), "ScatterElements",
                         {{"x", random_tensor(t, {4, 3, 2}, -4, 4, 116)},
                          {"i", ints_of({3, 3, 2}, {0, 1, 2, 3, 3, 3, 0, 1, 2, 3, -1, 0, 0, 0, 2, 2, 1, -4})},
                          {"u", random_tensor(t, {3, 3, 2}, -4, 4, 117)}},
                         reduce(0, "min"), 1, tolerance(t, 0), kAmpDomain});
    cases.push_back(Case{"scatter_nd_max" + suffix(t), "ScatterND",
                         {{"x", random_tensor(t, {5, 4, 3}, -4, 4, 118)},
                          {"i", ints_of({3, 1}, {3, 0, -2})},
                          {"u", random_tensor(t, {3, 4, 3}, -4, 4, 119)}},
                         reduce(kNoAxis, "max"), 1, tolerance(t, 0), kAmpDomain});
    cases.push_back(Case{"scatter_nd_min" + suffix(t), "ScatterND",
                         {{"x", random_tensor(t, {5, 4, 3}, -4, 4, 120)},
                          {"i", ints_of({4, 2}, {1, 2, 0, 0, 1, 2, -1, 3})},
                          {"u", random_tensor(t, {4, 3}, -4, 4, 121)}},
                         reduce(kNoAxis, "min"), 1, tolerance(t, 0), kAmpDomain});
    if (t == DType::kFloat || t == DType::kDouble) {
      // NaN wins from either side, as numpy's maximum (ONNX's reference) and torch's amax.
      Tensor x = random_tensor(t, {2, 3}, -4, 4, 122), u = random_tensor(t, {2, 3}, -4, 4, 123);
      const double nan = std::nan("");
      for (auto [v, k] : {std::pair<Tensor*, int64_t>{&x, 0}, {&u, 1}, {&u, 3}}) {
        if (t == DType::kFloat) v->mutable_as<float>()[k] = static_cast<float>(nan);
        else v->mutable_as<double>()[k] = nan;
      }
      cases.push_back(Case{"scatter_elements_max_nan" + suffix(t), "ScatterElements",
                           {{"x", x}, {"i", ints_of({2, 3}, {0, 1, 1, 2, 2, 0})}, {"u", u}}, reduce(1, "max"), 1,
                           tolerance(t, 0), kAmpDomain});
    }
    for (const char* mode : {"DCR", "CRD"}) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_int("blocksize", 2));
      a.push_back(Attribute::of_string("mode", mode));
      cases.push_back(Case{std::string("depth_to_space_") + mode + suffix(t), "DepthToSpace", {{"x", data({2, 12, 3, 2}, 108)}},
                           std::move(a), 1, tolerance(t, 0)});
    }
    cases.push_back(Case{"space_to_depth" + suffix(t), "SpaceToDepth", {{"x", data({2, 3, 6, 4}, 109)}},
                         int_attrs({{"blocksize", 2}}), 1, tolerance(t, 0)});
    // Small integers and 16-bit roundings repeat values: ties go to the lower index.
    cases.push_back(Case{"top_k" + suffix(t), "TopK", {{"x", data({3, 11, 4}, 110)}, {"k", int64_tensor({5})}},
                         int_attrs({{"axis", 1}}), 2, tolerance(t, 0)});
    cases.push_back(Case{"top_k_smallest" + suffix(t), "TopK", {{"x", data({3, 4, 9}, 111)}, {"k", int64_tensor({9})}},
                         int_attrs({{"largest", 0}}), 2, tolerance(t, 0)});
    cases.push_back(Case{"gather_nd" + suffix(t), "GatherND",
                         {{"x", data({4, 3, 5}, 112)}, {"i", ints_of({2, 2, 2}, {0, 1, 3, -1, 2, 0, 1, 2})}}, {}, 1,
                         tolerance(t, 0)});
    cases.push_back(Case{"gather_nd_batch" + suffix(t), "GatherND",
                         {{"x", data({2, 4, 3}, 113)}, {"i", ints_of({2, 3, 1}, {3, 0, 1, 2, 2, -4})}},
                         int_attrs({{"batch_dims", 1}}), 1, tolerance(t, 0)});
    // NonZero and Compress: output extents from contents (planned per input); integers hold zeros.
    cases.push_back(Case{"nonzero" + suffix(t), "NonZero", {{"x", random_tensor(t, {3, 4, 5}, -1.5, 1.5, 114)}}, {}, 1,
                         tolerance(t, 0)});
    cases.push_back(Case{"compress_axis" + suffix(t), "Compress",
                         {{"x", data({3, 5, 2}, 115)}, {"c", random_tensor(DType::kBool, {4}, 0, 1, 116)}},
                         int_attrs({{"axis", -2}}), 1, tolerance(t, 0)});
    cases.push_back(Case{"compress_flat" + suffix(t), "Compress",
                         {{"x", data({3, 4}, 117)}, {"c", random_tensor(DType::kBool, {9}, 0, 1, 118)}}, {}, 1,
                         tolerance(t, 0)});
    cases.push_back(Case{"eye_like" + suffix(t), "EyeLike", {{"x", data({4, 6}, 119)}}, int_attrs({{"k", -1}}), 1,
                         tolerance(t, 0)});
    for (int time_axis = 0; time_axis < 2; ++time_axis) {
      Tensor lens = int64_tensor(time_axis ? std::vector<int64_t>{4, 1, 0} : std::vector<int64_t>{3, 1, 4, 2});
      cases.push_back(Case{"reverse_sequence_" + std::to_string(time_axis) + suffix(t), "ReverseSequence",
                           {{"x", data(time_axis ? std::vector<int64_t>{3, 4, 2} : std::vector<int64_t>{4, 4, 3}, 120)},
                            {"lens", lens}},
                           int_attrs({{"time_axis", time_axis}, {"batch_axis", 1 - time_axis}}), 1, tolerance(t, 0)});
    }
    if (is_float)
      cases.push_back(Case{"hardmax" + suffix(t), "Hardmax", {{"x", random_tensor(t, {3, 6, 4}, -3, 3, 121)}},
                           int_attrs({{"axis", 1}}), 1, tolerance(t, 0)});
    if (is_float) {
      // MaxUnpool: indices over the whole flattened [1, 2, 4, 4] output, as MaxPool's Indices count.
      std::vector<Attribute> a;
      a.push_back(Attribute::of_ints("kernel_shape", {2, 2}));
      a.push_back(Attribute::of_ints("strides", {2, 2}));
      cases.push_back(Case{"max_unpool" + suffix(t), "MaxUnpool",
                           {{"x", data({1, 2, 2, 2}, 122)}, {"i", ints_of({1, 2, 2, 2}, {0, 3, 9, 15, 16, 22, 24, 31})}},
                           std::move(a), 1, tolerance(t, 0)});
    }
  }
  // Unique: flattened (sorted and by first appearance) with repeats from 16-bit rounding and small
  // integers, and along an axis (slices of int64, compared element by element).
  for (DType t : types) {
    const bool small = t == DType::kInt32 || t == DType::kInt64;
    const Tensor x = small ? random_tensor(t, {3, 7}, -4, 4, 125) : random_tensor(t, {3, 7}, -3, 3, 125);
    cases.push_back(Case{"unique" + suffix(t), "Unique", {{"x", x}}, {}, 4, tolerance(t, 0)});
    cases.push_back(Case{"unique_unsorted" + suffix(t), "Unique", {{"x", x}}, int_attrs({{"sorted", 0}}), 4, tolerance(t, 0)});
  }
  Tensor slices = ints_of({2, 5, 2}, {1, 2, 0, 0, 1, 2, 3, 3, 0, 0, 4, 4, 1, 2, 4, 4, 0, 0, 1, 2});  // slices 2 and 4 repeat 0 and 1
  cases.push_back(Case{"unique_axis@int64", "Unique", {{"x", slices}}, int_attrs({{"axis", 1}}), 4, tolerance(DType::kInt64, 0)});
  // RoiAlign (avg) against torchvision.ops.roi_align (aligned: half_pixel), float types but bf16.
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kDouble}) {
    Tensor rois = random_tensor(t, {3, 4}, 0, 3, 126);  // [x1, y1, x2, y2]: corners pulled apart below
    Tensor far = random_tensor(t, {3, 4}, 3, 6, 127);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t k = 2; k < 4; ++k) std::memcpy(rois.mutable_data() + (r * 4 + k) * dtype_size(t), far.data() + (r * 4 + k) * dtype_size(t), dtype_size(t));
    Tensor batch = ints_of({3}, {1, 0, 1});
    std::vector<Attribute> a;
    a.push_back(Attribute::of_int("output_height", 3));
    a.push_back(Attribute::of_int("output_width", 2));
    cases.push_back(Case{"roi_align" + suffix(t), "RoiAlign",
                         {{"x", random_tensor(t, {2, 3, 7, 6}, -2, 2, 128)}, {"rois", rois}, {"b", batch}}, std::move(a), 1,
                         tolerance(t, 1, 1e-5)});
    std::vector<Attribute> b;
    b.push_back(Attribute::of_int("output_height", 2));
    b.push_back(Attribute::of_int("output_width", 2));
    b.push_back(Attribute::of_int("sampling_ratio", 2));
    b.push_back(Attribute::of_float("spatial_scale", 0.5f));
    b.push_back(Attribute::of_string("coordinate_transformation_mode", "output_half_pixel"));
    cases.push_back(Case{"roi_align_unaligned" + suffix(t), "RoiAlign",
                         {{"x", random_tensor(t, {2, 3, 7, 6}, -2, 2, 129)}, {"rois", rois}, {"b", batch}}, std::move(b), 1,
                         tolerance(t, 1, 1e-5)});
  }
  // NonMaxSuppression (float only) against torchvision.ops.nms per batch and class: corner boxes,
  // a score threshold, at most 3 per class.
  cases.push_back(Case{"nms@float32", "NonMaxSuppression",
                       {{"boxes", random_tensor(DType::kFloat, {2, 8, 4}, 0, 4, 123)},
                        {"scores", random_tensor(DType::kFloat, {2, 3, 8}, 0, 1, 124)},
                        {"max", int64_tensor({3})},
                        {"iou", random_tensor(DType::kFloat, {1}, 0.3, 0.3, 0)},
                        {"floor", random_tensor(DType::kFloat, {1}, 0.2, 0.2, 0)}},
                       {}, 1, tolerance(DType::kFloat, 0)});
  check(cases, "indexing");
}

// Einsum as MaxViT's attention writes it (with spaces, capital letters), a three-operand one and
// a transpose, against torch.einsum in the four float types (fp32 accumulation: a rounding or so).
TEST(CpuKernels, EinsumMatchesTorch) {
  std::vector<Case> cases;
  struct Eq {
    const char* ref;
    const char* equation;
    std::vector<std::vector<int64_t>> dims;
  };
  const Eq eqs[] = {{"einsum_scores", "B G H I D, B G H J D -> B G H I J", {{1, 3, 2, 5, 8}, {1, 3, 2, 6, 8}}},
                    {"einsum_weighted", "BGHIJ,BGHJD->BGHID", {{1, 3, 2, 5, 6}, {1, 3, 2, 6, 8}}},
                    {"einsum_three", "ij,jk,k->i", {{4, 5}, {5, 6}, {6}}},
                    {"einsum_transpose", "abc->cab", {{2, 3, 4}}}};
  for (DType t : kFloatTypes)
    for (const Eq& q : eqs) {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_string("equation", q.equation));
      Case c{q.ref + suffix(t), "Einsum", {}, std::move(a), 1, tolerance(t, 1, 1e-5)};
      const char* names[] = {"a", "b", "c"};
      for (size_t k = 0; k < q.dims.size(); ++k)
        c.inputs.push_back({names[k], random_tensor(t, q.dims[k], -2, 2, 60 + static_cast<uint32_t>(k))});
      cases.push_back(std::move(c));
    }
  check(cases, "einsum");
}

}  // namespace
}  // namespace amp::test

// ConvTranspose against torch.nn.functional.conv_transpose1d/2d/3d (ONNX's begin/end pads as a
// crop of torch's unpadded output) in the four float types: groups, dilations, output_padding,
// asymmetric pads, and auto_pad SAME_UPPER.
namespace amp::test {
namespace {

// ConvGrad's three outputs against torch autograd of the same convolution (strided, padded,
// dilated, grouped). Batch 4: fp16 runs oneDNN on half the batch at a time and carries the
// weights' and bias' sums across the halves in fp32; bf16 runs oneDNN's bf16 primitives; double
// the im2col path.
TEST(CpuKernels, ConvGradMatchesTorchAutogradInEveryFloatType) {
  std::vector<Case> cases;
  // One ConvGrad case: dY, X, W of these dims, drawn from seeds seed, seed+1, seed+2. dW sums up
  // to 160 products of terms in [-1, 1] and can cancel: its error is bounded absolutely.
  auto grad_case = [](const std::string& name, DType t, std::vector<Attribute> attrs, std::vector<int64_t> dy,
                      std::vector<int64_t> x, std::vector<int64_t> w, uint32_t seed) {
    Case c{name + suffix(t), "ConvGrad",
           {{"dy", random_tensor(t, dy, -1, 1, seed)}, {"x", random_tensor(t, x, -1, 1, seed + 1)},
            {"w", random_tensor(t, w, -1, 1, seed + 2)}},
           std::move(attrs), 3, tolerance(t, 1, 1e-5), "ai.onnx_amp"};
    c.tol.atol = t == DType::kDouble ? 1e-12 : 2e-5;
    return c;
  };
  for (DType t : kFloatTypes) {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", {2, 1}));
    a.push_back(Attribute::of_ints("pads", {1, 2, 1, 2}));
    a.push_back(Attribute::of_ints("dilations", {1, 2}));
    a.push_back(Attribute::of_int("group", 2));
    cases.push_back(grad_case("conv_grad", t, std::move(a), {4, 6, 5, 8}, {4, 4, 9, 8}, {6, 2, 3, 3}, 71));
    // Strides whose windows never reach the input's last rows or columns (ResNet's 1x1 stride-2
    // downsampling of an even size; a 3x3 stride-2 window over 8 rows and 7 columns drops the last
    // row): oneDNN reads a cropped view of X, and dX is zero on what it drops.
    std::vector<Attribute> s1;
    s1.push_back(Attribute::of_ints("strides", {2, 2}));
    cases.push_back(grad_case("conv_grad_crop", t, std::move(s1), {4, 6, 4, 3}, {4, 4, 8, 6}, {6, 4, 1, 1}, 77));
    std::vector<Attribute> s3;
    s3.push_back(Attribute::of_ints("strides", {2, 2}));
    s3.push_back(Attribute::of_int("group", 2));
    cases.push_back(grad_case("conv_grad_crop_3x3", t, std::move(s3), {4, 6, 3, 3}, {4, 4, 8, 7}, {6, 2, 3, 3}, 80));
    if (t == DType::kDouble) continue;  // 3-D gradients run on oneDNN only: see the test below
    std::vector<Attribute> a3;
    a3.push_back(Attribute::of_ints("strides", {1, 2, 1}));
    a3.push_back(Attribute::of_ints("pads", {1, 0, 1, 1, 0, 1}));
    cases.push_back(grad_case("conv_grad_3d", t, std::move(a3), {2, 3, 4, 3, 5}, {2, 2, 4, 7, 5}, {3, 2, 3, 3, 3}, 74));
  }
  check(cases, "conv_grad");
}

// ai.onnx_amp DeformConv (ONNX opset 19) against torchvision.ops.deform_conv2d and its
// DeformConvGrad against torchvision's backward (torch autograd), in the four float types: with
// mask and bias, groups and offset groups of 2, strides, pads and dilations; with neither mask nor
// bias; with a mask only. Offsets in [-2, 2] put samples between pixels and past the border.
TEST(CpuKernels, DeformConvAndItsGradientMatchTorchvision) {
  struct Geometry {
    std::string name;
    std::vector<int64_t> x, w, offset, mask;  // mask empty: none
    bool bias;
    std::vector<Attribute> (*attrs)();
  };
  const Geometry geometries[] = {
      {"deform_conv", {2, 4, 7, 6}, {6, 2, 3, 3}, {2, 36, 4, 4}, {2, 18, 4, 4}, true,
       [] {
         std::vector<Attribute> a;
         a.push_back(Attribute::of_ints("strides", {2, 1}));
         a.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
         a.push_back(Attribute::of_ints("dilations", {1, 2}));
         a.push_back(Attribute::of_int("group", 2));
         a.push_back(Attribute::of_int("offset_group", 2));
         return a;
       }},
      {"deform_conv_plain", {1, 3, 5, 5}, {4, 3, 2, 2}, {1, 8, 4, 4}, {}, false, [] { return std::vector<Attribute>{}; }},
      {"deform_conv_mask", {1, 2, 5, 4}, {3, 2, 3, 3}, {1, 18, 5, 4}, {1, 9, 5, 4}, false,
       [] {
         std::vector<Attribute> a;
         a.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
         return a;
       }},
  };
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    uint32_t seed = 400;
    for (const Geometry& g : geometries) {
      const Tensor x = random_tensor(t, g.x, -2, 2, seed), w = random_tensor(t, g.w, -1, 1, seed + 1);
      const Tensor offset = random_tensor(t, g.offset, -2, 2, seed + 2), bias = random_tensor(t, {g.w[0]}, -1, 1, seed + 3);
      const Tensor mask = g.mask.empty() ? Tensor() : random_tensor(t, g.mask, 0, 1, seed + 4);
      const Tensor dy = random_tensor(t, {g.offset[0], g.w[0], g.offset[2], g.offset[3]}, -1, 1, seed + 5);
      seed += 10;
      std::vector<std::pair<std::string, Tensor>> in = {{"x", x}, {"w", w}, {"off", offset}};
      if (g.bias || !g.mask.empty()) in.push_back({g.bias ? "b" : "", g.bias ? bias : Tensor()});
      if (!g.mask.empty()) in.push_back({"mask", mask});
      // Sums of up to 18 products of terms below 2: bounded absolutely, as ConvGrad's.
      Tolerance tol = tolerance(t, 1, 1e-5);
      tol.atol = t == DType::kDouble ? 1e-12 : 1e-5;
      cases.push_back(Case{g.name + suffix(t), "DeformConv", in, g.attrs(), 1, tol, "ai.onnx_amp"});
      std::vector<std::pair<std::string, Tensor>> grad_in = {{"dy", dy}, {"x", x}, {"w", w}, {"off", offset}};
      if (!g.mask.empty()) grad_in.push_back({"mask", mask});
      Case grad{g.name + "_grad" + suffix(t), "DeformConvGrad", grad_in, g.attrs(), g.mask.empty() ? 4u : 5u, tol,
                "ai.onnx_amp"};
      grad.tol.max_ulps = 2;  // dW and the offsets' gradients sum over every pixel, in another order than torchvision's
      cases.push_back(std::move(grad));
    }
  }
  check(cases, "deform_conv");
}

// ai.onnx_amp Col2Im (ONNX opset 18) against torch.nn.functional.fold, in the float types and
// int32 / int64, and in 3-D against a numpy loop; Im2Col, its gradient, against
// torch.nn.functional.unfold. Strides, pads and dilations that make blocks overlap and reach into
// the padding.
TEST(CpuKernels, Col2ImMatchesTorchFoldAndIm2ColUnfold) {
  std::vector<Case> cases;
  auto attrs = [](std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dilations) {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", std::move(strides)));
    a.push_back(Attribute::of_ints("pads", std::move(pads)));
    a.push_back(Attribute::of_ints("dilations", std::move(dilations)));
    return a;
  };
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32, DType::kInt64}) {
    // image [5, 6], block [2, 3]: (5 + 2 - 3) / 1 + 1 = 5 by (6 + 2 - 3) / 2 + 1 = 3 places.
    const bool is_float = t != DType::kInt32 && t != DType::kInt64;
    cases.push_back(Case{"col2im" + suffix(t), "Col2Im",
                         {{"x", random_tensor(t, {2, 18, 15}, is_float ? -2 : -50, is_float ? 2 : 50, 450)},
                          {"image", int64_tensor({5, 6})},
                          {"block", int64_tensor({2, 3})}},
                         attrs({1, 2}, {1, 1, 1, 1}, {2, 1}), 1, tolerance(t, 1, 1e-6)});
    if (!is_float) continue;
    // 3-D: image [4, 3, 5], block [2, 2, 3], strides [2, 1, 1], pads [1, 0, 1, 0, 1, 1]:
    // (4 + 1 - 2) / 2 + 1 = 2, 3 + 1 - 2 + 1 = 3 and 5 + 2 - 3 + 1 = 5 places.
    cases.push_back(Case{"col2im_3d" + suffix(t), "Col2Im",
                         {{"x", random_tensor(t, {1, 24, 30}, -2, 2, 451)},
                          {"image", int64_tensor({4, 3, 5})},
                          {"block", int64_tensor({2, 2, 3})}},
                         attrs({2, 1, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 1}), 1, tolerance(t, 1, 1e-6)});
    cases.push_back(Case{"im2col" + suffix(t), "Im2Col",
                         {{"x", random_tensor(t, {2, 3, 5, 6}, -2, 2, 452)}, {"block", int64_tensor({2, 3})}},
                         attrs({1, 2}, {1, 1, 1, 1}, {2, 1}), 1, tolerance(t, 0), "ai.onnx_amp"});
  }
  for (Case& c : cases)
    if (c.op == "Col2Im") c.domain = "ai.onnx_amp";
  check(cases, "col2im");
}

// MaxPoolGrad and AveragePoolGrad against torch autograd of the same pooling. X holds ties
// (repeated values, +0 and -0), infinities and NaN, so the arg-max rule shows: the first maximum of
// a window, or the last NaN in it, as torch's max-pool kernels pick. Geometries: ResNet's stem
// pool (overlapping windows, pads), a dilated window with ceil_mode, 1-D and 3-D; the 2-D ones take
// the row-vectorised path, 3-D the plain one.
TEST(CpuKernels, PoolGradientsMatchTorchAutogradInEveryFloatType) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    auto pool = [&](std::string name, const char* op, std::vector<int64_t> x, std::vector<int64_t> y,
                    std::vector<Attribute> a, uint32_t seed) {
      Case c{name + suffix(t), op, {{"dy", random_tensor(t, y, -1, 1, seed)}, {"x", special_tensor(t, x, seed + 1)}},
             std::move(a), 1, tolerance(t, 1, 1e-6), "ai.onnx_amp"};
      cases.push_back(std::move(c));
    };
    auto stem = [] {
      std::vector<Attribute> a;
      a.push_back(Attribute::of_ints("kernel_shape", {3, 3}));
      a.push_back(Attribute::of_ints("strides", {2, 2}));
      a.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
      return a;
    };
    pool("maxpool_grad", "MaxPoolGrad", {2, 3, 11, 12}, {2, 3, 6, 6}, stem(), 81);
    std::vector<Attribute> dilated;
    dilated.push_back(Attribute::of_ints("kernel_shape", {2, 3}));
    dilated.push_back(Attribute::of_ints("strides", {1, 2}));
    dilated.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
    dilated.push_back(Attribute::of_ints("dilations", {2, 1}));
    dilated.push_back(Attribute::of_int("ceil_mode", 1));
    pool("maxpool_grad_dilated", "MaxPoolGrad", {2, 2, 7, 10}, {2, 2, 7, 6}, std::move(dilated), 83);
    std::vector<Attribute> one_d;
    one_d.push_back(Attribute::of_ints("kernel_shape", {3}));
    one_d.push_back(Attribute::of_ints("strides", {2}));
    one_d.push_back(Attribute::of_ints("pads", {1, 1}));
    pool("maxpool_grad_1d", "MaxPoolGrad", {3, 2, 15}, {3, 2, 8}, std::move(one_d), 85);
    std::vector<Attribute> three_d;
    three_d.push_back(Attribute::of_ints("kernel_shape", {2, 2, 2}));
    three_d.push_back(Attribute::of_ints("strides", {1, 2, 2}));
    pool("maxpool_grad_3d", "MaxPoolGrad", {2, 2, 4, 6, 6}, {2, 2, 3, 3, 3}, std::move(three_d), 87);
    pool("avgpool_grad", "AveragePoolGrad", {2, 3, 11, 12}, {2, 3, 6, 6}, stem(), 89);
    std::vector<Attribute> count_pad = stem();
    count_pad.push_back(Attribute::of_int("count_include_pad", 1));
    count_pad.push_back(Attribute::of_int("ceil_mode", 1));
    pool("avgpool_grad_count_pad", "AveragePoolGrad", {2, 3, 10, 12}, {2, 3, 6, 7}, std::move(count_pad), 91);
  }
  check(cases, "pool_grad");
}

// ConvGrad of a 3-D convolution has no im2col path: in double it is refused with one clear line.
TEST(CpuKernels, ConvGradOf3DConvolutionInDoubleSaysWhy) {
  OneNode n("ConvGrad",
            {{"dy", random_tensor(DType::kDouble, {1, 1, 2, 2, 2}, -1, 1, 77)},
             {"x", random_tensor(DType::kDouble, {1, 1, 4, 4, 4}, -1, 1, 78)},
             {"w", random_tensor(DType::kDouble, {1, 1, 3, 3, 3}, -1, 1, 79)}},
            {DType::kDouble, DType::kDouble, DType::kDouble}, "ai.onnx_amp");
  try {
    n.run_cpu();
    FAIL() << "a 3-D ConvGrad in double ran";
  } catch (const amp::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ConvGrad of a 3-D convolution runs on oneDNN only"), std::string::npos) << e.what();
  }
}

// BitShift's direction is LEFT or RIGHT (ONNX gives no default): anything else is one clear line.
TEST(CpuKernels, BitShiftWithAnotherDirectionSaysWhichItTakes) {
  Tensor x(DType::kUInt8, {3});
  for (int64_t k = 0; k < 3; ++k) x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(k);
  OneNode n("BitShift", {{"x", x}, {"s", x}}, {DType::kUInt8});
  n.attr(Attribute::of_string("direction", "UP"));
  try {
    n.run_cpu();
    FAIL() << "BitShift ran with direction UP";
  } catch (const amp::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("direction is 'UP'; BitShift takes LEFT or RIGHT"), std::string::npos) << e.what();
  }
}

// A tensor of random bytes: every bit pattern of an integer type, negative values included.
Tensor random_bits(DType t, std::vector<int64_t> dims, uint32_t seed) {
  Tensor x(t, std::move(dims));
  std::mt19937 gen(seed);
  uint8_t* p = x.mutable_data();
  for (size_t i = 0; i < x.nbytes(); ++i) p[i] = static_cast<uint8_t>(gen());
  return x;
}

// ONNX's bitwise ops (opset 18; ai.onnx_amp after the import) against numpy on every integer type,
// broadcast each way and with a scalar operand.
TEST(CpuKernels, BitwiseOpsMatchNumpyOnEveryIntegerType) {
  struct Binary {
    const char* ref;
    const char* op;
    std::vector<int64_t> a, b;
  };
  const Binary binaries[] = {{"bitwise_and", "BitwiseAnd", {2, 3, 4}, {3, 1}},
                             {"bitwise_or", "BitwiseOr", {3, 1}, {2, 1, 4}},
                             {"bitwise_xor", "BitwiseXor", {}, {2, 3}}};
  std::vector<Case> cases;
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16,
                  DType::kUInt32, DType::kUInt64}) {
    for (const Binary& b : binaries)
      cases.push_back(Case{b.ref + suffix(t), b.op, {{"a", random_bits(t, b.a, 21)}, {"b", random_bits(t, b.b, 22)}}, {},
                           1, tolerance(t, 0), kAmpDomain});
    cases.push_back(
        Case{"bitwise_not" + suffix(t), "BitwiseNot", {{"x", random_bits(t, {3, 5}, 23)}}, {}, 1, tolerance(t, 0), kAmpDomain});
  }
  check(cases, "bitwise");
}

// Opset 16 and 17 know ScatterElements' and ScatterND's reductions none, add and mul only: a node of
// the default domain with max (which the import would have carried into ai.onnx_amp had the model
// been of opset 18) is refused in one line.
TEST(CpuKernels, ScatterMaxInTheDefaultDomainSaysItCameWithOpset18) {
  const Tensor x = random_tensor(DType::kFloat, {3}, -1, 1, 1), u = random_tensor(DType::kFloat, {1}, -1, 1, 2);
  OneNode n("ScatterElements", {{"x", x}, {"i", int64_tensor({2})}, {"u", u}}, {DType::kFloat});
  n.attr(Attribute::of_string("reduction", "max"));
  try {
    n.run_cpu();
    FAIL() << "ScatterElements of opset 17 ran with reduction max";
  } catch (const amp::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ScatterElements reduction 'max' came with opset 18"), std::string::npos) << e.what();
  }
}

TEST(CpuKernels, ConvTransposeMatchesTorchInEveryFloatType) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    std::vector<Attribute> a2;
    a2.push_back(Attribute::of_ints("strides", {2, 1}));
    a2.push_back(Attribute::of_ints("pads", {1, 0, 0, 1}));
    a2.push_back(Attribute::of_ints("output_padding", {1, 0}));
    a2.push_back(Attribute::of_ints("dilations", {1, 2}));
    a2.push_back(Attribute::of_int("group", 2));
    cases.push_back(Case{"convt" + suffix(t), "ConvTranspose",
                         {{"x", random_tensor(t, {2, 4, 5, 4}, -1, 1, 61)},
                          {"w", random_tensor(t, {4, 3, 3, 3}, -1, 1, 62)},
                          {"b", random_tensor(t, {6}, -1, 1, 63)}},
                         std::move(a2), 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> a1;
    a1.push_back(Attribute::of_ints("strides", {3}));
    a1.push_back(Attribute::of_ints("pads", {1, 2}));
    cases.push_back(Case{"convt_1d" + suffix(t), "ConvTranspose",
                         {{"x", random_tensor(t, {2, 3, 7}, -1, 1, 64)},
                          {"w", random_tensor(t, {3, 2, 4}, -1, 1, 65)},
                          {"b", random_tensor(t, {2}, -1, 1, 66)}},
                         std::move(a1), 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> a3;
    a3.push_back(Attribute::of_ints("strides", {2, 1, 2}));
    a3.push_back(Attribute::of_ints("pads", {0, 1, 0, 0, 0, 1}));
    cases.push_back(Case{"convt_3d" + suffix(t), "ConvTranspose",
                         {{"x", random_tensor(t, {1, 2, 3, 4, 3}, -1, 1, 67)},
                          {"w", random_tensor(t, {2, 2, 2, 3, 2}, -1, 1, 68)}},
                         std::move(a3), 1, tolerance(t, 1, 1e-5)});
    std::vector<Attribute> same;
    same.push_back(Attribute::of_ints("strides", {2, 2}));
    same.push_back(Attribute::of_string("auto_pad", "SAME_UPPER"));
    cases.push_back(Case{"convt_same_upper" + suffix(t), "ConvTranspose",
                         {{"x", random_tensor(t, {2, 2, 3, 3}, -1, 1, 69)},
                          {"w", random_tensor(t, {2, 3, 3, 3}, -1, 1, 70)},
                          {"b", random_tensor(t, {3}, -1, 1, 71)}},
                         std::move(same), 1, tolerance(t, 1, 1e-5)});
  }
  check(cases, "conv_transpose");
}

// The ops third-party exporters' models brought (issue 31): Caffe2's variadic Sum and LRN,
// PRelu, keras2onnx's ReduceProd, QDQ models' QuantizeLinear / DequantizeLinear, OneHot, and the
// recurrent layers, against torch (Sum, PRelu, ReduceProd, LRN) or numpy written from ONNX's
// operator text (the rest; the recurrent layers with the state rounded to the tensor type after
// each step, as a GPU stores it). ONNX's node tests of the same ops run in `Libonnx`, and the
// layers exported by torch against ONNX Runtime in tests/corpus.
Tensor small_ints(DType t, std::vector<int64_t> dims, int lo, int hi, uint32_t seed) {
  Tensor x(t, std::move(dims));
  std::mt19937 gen(seed);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int v = lo + static_cast<int>(gen() % static_cast<uint32_t>(hi - lo + 1));
    if (t == DType::kInt8) x.mutable_as<int8_t>()[i] = static_cast<int8_t>(v);
    else if (t == DType::kUInt8) x.mutable_as<uint8_t>()[i] = static_cast<uint8_t>(v);
    else x.mutable_as<int64_t>()[i] = v;
  }
  return x;
}

TEST(CpuKernels, ThirdPartyExportersOpsMatchTorchAndNumpy) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back(Case{"sum3" + suffix(t), "Sum",
                         {{"a", random_tensor(t, {2, 3}, -2, 2, 71)}, {"b", random_tensor(t, {3}, -2, 2, 72)},
                          {"c", random_tensor(t, {2, 1}, -2, 2, 73)}},
                         {}, 1, tolerance(t, 0)});
    cases.push_back(Case{"prelu" + suffix(t), "PRelu",
                         {{"x", random_tensor(t, {2, 3, 4, 5}, -2, 2, 74)}, {"slope", random_tensor(t, {3, 1, 1}, 0, 0.5, 75)}},
                         {}, 1, tolerance(t, 0)});
    std::vector<Attribute> prod;
    prod.push_back(Attribute::of_ints("axes", {1}));
    cases.push_back(Case{"reduce_prod" + suffix(t), "ReduceProd", {{"x", random_tensor(t, {3, 6, 5}, 0.5, 1.5, 76)}},
                         std::move(prod), 1, tolerance(t, 1, 1e-6)});
    std::vector<Attribute> lrn;
    lrn.push_back(Attribute::of_int("size", 5));
    lrn.push_back(Attribute::of_float("alpha", 1e-2f));
    lrn.push_back(Attribute::of_float("beta", 0.75f));
    lrn.push_back(Attribute::of_float("bias", 2.0f));
    cases.push_back(Case{"lrn" + suffix(t), "LRN", {{"x", random_tensor(t, {2, 7, 3, 4}, -3, 3, 77)}}, std::move(lrn), 1,
                         tolerance(t, 1, 1e-5)});
    std::vector<Attribute> q;
    q.push_back(Attribute::of_int("axis", 1));
    cases.push_back(Case{"quantize" + suffix(t), "QuantizeLinear",
                         {{"x", random_tensor(t, {2, 3, 4}, -20, 20, 78)}, {"scale", random_tensor(t, {3}, 0.05, 0.3, 79)},
                          {"zp", small_ints(DType::kInt8, {3}, -10, 10, 80)}},
                         std::move(q), 1, {}});
    for (const char* cell : {"lstm", "gru", "rnn"}) {
      const int gates = cell == std::string("lstm") ? 4 : cell == std::string("gru") ? 3 : 1;
      const int64_t hidden = 5, input = 4, batch = 3, seq = 6;
      std::vector<Attribute> a;
      a.push_back(Attribute::of_int("hidden_size", hidden));
      a.push_back(Attribute::of_string("direction", "bidirectional"));
      if (gates == 3) a.push_back(Attribute::of_int("linear_before_reset", 1));
      std::vector<std::pair<std::string, Tensor>> in = {
          {"x", random_tensor(t, {seq, batch, input}, -1, 1, 81)},
          {"w", random_tensor(t, {2, gates * hidden, input}, -0.6, 0.6, 82)},
          {"r", random_tensor(t, {2, gates * hidden, hidden}, -0.6, 0.6, 83)},
          {"b", random_tensor(t, {2, 2 * gates * hidden}, -0.3, 0.3, 84)},
          {"lens", random_tensor(DType::kInt32, {batch}, 2, 7, 85)},
          {"h0", random_tensor(t, {2, batch, hidden}, -0.5, 0.5, 86)}};
      if (gates == 4) in.push_back({"c0", random_tensor(t, {2, batch, hidden}, -0.5, 0.5, 87)});
      cases.push_back(Case{cell + suffix(t), gates == 4 ? "LSTM" : gates == 3 ? "GRU" : "RNN", std::move(in),
                           std::move(a), gates == 4 ? 3u : 2u, tolerance(t, 2, 2e-5)});
    }
  }
  std::vector<Attribute> dq;
  dq.push_back(Attribute::of_int("axis", 1));
  cases.push_back(Case{"dequantize@uint8", "DequantizeLinear",
                       {{"x", small_ints(DType::kUInt8, {2, 3, 4}, 0, 255, 88)},
                        {"scale", random_tensor(DType::kFloat, {3}, 0.05, 0.3, 89)},
                        {"zp", small_ints(DType::kUInt8, {3}, 100, 150, 90)}},
                       std::move(dq), 1, tolerance(DType::kFloat, 0)});
  std::vector<Attribute> onehot;
  onehot.push_back(Attribute::of_int("axis", 1));
  cases.push_back(Case{"onehot@int64", "OneHot",
                       {{"i", small_ints(DType::kInt64, {2, 3}, -5, 4, 91)}, {"depth", int64_tensor({4})},
                        {"v", random_tensor(DType::kFloat, {2}, -3, 3, 92)}},
                       std::move(onehot), 1, tolerance(DType::kFloat, 0)});
  check(cases, "exporters");
}

// The norm-like reductions (ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare,
// axes an attribute at opset 17) against torch, 16-bit types accumulating in fp32; ReduceLogSumExp
// over values whose exp overflows fp32 (a max-shifted sum is finite), and integer inputs against
// numpy (ONNX's reference truncates the root and the logarithm).
TEST(CpuKernels, NormLikeReductionsMatchTorch) {
  std::vector<Case> cases;
  auto axes = [](std::vector<int64_t> a, int keepdims) {
    std::vector<Attribute> attrs;
    if (!a.empty()) attrs.push_back(Attribute::of_ints("axes", std::move(a)));
    attrs.push_back(Attribute::of_int("keepdims", keepdims));
    return attrs;
  };
  for (DType t : kFloatTypes) {
    cases.push_back(Case{"reduce_l1_1" + suffix(t), "ReduceL1", {{"x", random_tensor(t, {3, 6, 5}, -2, 2, 101)}},
                         axes({1}, 1), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_l2_02" + suffix(t), "ReduceL2", {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 102)}},
                         axes({0, 2}, 0), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_logsum_last" + suffix(t), "ReduceLogSum", {{"x", random_tensor(t, {3, 4, 5}, 0.1, 2, 103)}},
                         axes({-1}, 0), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_logsumexp_1" + suffix(t), "ReduceLogSumExp",
                         {{"x", random_tensor(t, {3, 6, 5}, -60, 95, 104)}}, axes({1}, 1), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_logsumexp_02" + suffix(t), "ReduceLogSumExp",
                         {{"x", random_tensor(t, {3, 4, 5}, -3, 3, 105)}}, axes({0, 2}, 0), 1, tolerance(t, 1, 1e-5)});
    cases.push_back(Case{"reduce_sumsquare_all" + suffix(t), "ReduceSumSquare",
                         {{"x", random_tensor(t, {3, 4, 5}, -2, 2, 106)}}, axes({}, 1), 1, tolerance(t, 1, 1e-5)});
  }
  cases.push_back(Case{"reduce_l1_int", "ReduceL1", {{"x", small_ints(DType::kInt64, {3, 4, 5}, -50, 50, 107)}},
                       axes({1}, 1), 1, {}});
  cases.push_back(Case{"reduce_l2_int", "ReduceL2", {{"x", small_ints(DType::kInt64, {3, 4, 5}, -50, 50, 108)}},
                       axes({0, 2}, 0), 1, {}});
  cases.push_back(Case{"reduce_sumsquare_int", "ReduceSumSquare",
                       {{"x", small_ints(DType::kInt64, {3, 4, 5}, -50, 50, 109)}}, axes({-1}, 1), 1, {}});
  check(cases, "norm_reductions");
}

// The integer ops of quantized models (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv,
// DynamicQuantizeLinear) against numpy / torch in float64 (exact for these integers) written from
// ONNX's operator text: per-tensor and per-row / per-column / per-channel zero points and scales,
// uint8 and int8, broadcast batches, padding, strides and groups. ONNX's node tests run in `Libonnx`.
TEST(CpuKernels, IntegerQuantizedOpsMatchNumpy) {
  std::vector<Case> cases;
  const DType u8 = DType::kUInt8, s8 = DType::kInt8, f32 = DType::kFloat;
  cases.push_back(Case{"matmulinteger_u8", "MatMulInteger",
                       {{"a", small_ints(u8, {2, 3, 4}, 0, 255, 201)}, {"b", small_ints(u8, {4, 5}, 0, 255, 202)},
                        {"azp", small_ints(u8, {3}, 0, 255, 203)}, {"bzp", small_ints(u8, {5}, 0, 255, 204)}},
                       {}, 1, {}});
  cases.push_back(Case{"matmulinteger_s8", "MatMulInteger",
                       {{"a", small_ints(s8, {3, 4}, -128, 127, 205)}, {"b", small_ints(s8, {2, 4, 5}, -128, 127, 206)},
                        {"azp", small_ints(s8, {}, -20, 20, 207)}, {"bzp", small_ints(s8, {}, -20, 20, 208)}},
                       {}, 1, {}});
  cases.push_back(Case{"qlinearmatmul_u8", "QLinearMatMul",
                       {{"a", small_ints(u8, {2, 3, 4}, 0, 255, 209)}, {"as", random_tensor(f32, {}, 0.01, 0.05, 210)},
                        {"azp", small_ints(u8, {}, 100, 150, 211)}, {"b", small_ints(u8, {4, 5}, 0, 255, 212)},
                        {"bs", random_tensor(f32, {5}, 0.01, 0.05, 213)}, {"bzp", small_ints(u8, {5}, 100, 150, 214)},
                        {"ys", random_tensor(f32, {}, 0.05, 0.2, 215)}, {"yzp", small_ints(u8, {}, 100, 150, 216)}},
                       {}, 1, {}});
  cases.push_back(Case{"qlinearmatmul_s8", "QLinearMatMul",
                       {{"a", small_ints(s8, {3, 4}, -128, 127, 217)}, {"as", random_tensor(f32, {3}, 0.01, 0.05, 218)},
                        {"azp", small_ints(s8, {3}, -10, 10, 219)}, {"b", small_ints(s8, {4, 5}, -128, 127, 220)},
                        {"bs", random_tensor(f32, {}, 0.01, 0.05, 221)}, {"bzp", small_ints(s8, {}, -10, 10, 222)},
                        {"ys", random_tensor(f32, {}, 0.05, 0.2, 223)}, {"yzp", small_ints(s8, {}, -10, 10, 224)}},
                       {}, 1, {}});
  std::vector<Attribute> conv_attrs;
  conv_attrs.push_back(Attribute::of_ints("pads", {1, 0, 1, 2}));
  conv_attrs.push_back(Attribute::of_ints("strides", {2, 1}));
  cases.push_back(Case{"convinteger_u8", "ConvInteger",
                       {{"x", small_ints(u8, {2, 2, 5, 6}, 0, 255, 225)}, {"w", small_ints(u8, {4, 2, 3, 3}, 0, 255, 226)},
                        {"xzp", small_ints(u8, {}, 100, 150, 227)}, {"wzp", small_ints(u8, {4}, 100, 150, 228)}},
                       std::move(conv_attrs), 1, {}});
  std::vector<Attribute> group_attrs;
  group_attrs.push_back(Attribute::of_int("group", 2));
  group_attrs.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
  group_attrs.push_back(Attribute::of_ints("dilations", {1, 2}));
  cases.push_back(Case{"qlinearconv_s8", "QLinearConv",
                       {{"x", small_ints(s8, {1, 4, 5, 6}, -128, 127, 229)}, {"xs", random_tensor(f32, {}, 0.01, 0.05, 230)},
                        {"xzp", small_ints(s8, {}, -10, 10, 231)}, {"w", small_ints(s8, {6, 2, 3, 3}, -128, 127, 232)},
                        {"ws", random_tensor(f32, {6}, 0.01, 0.05, 233)}, {"wzp", small_ints(s8, {6}, -5, 5, 234)},
                        {"ys", random_tensor(f32, {}, 0.2, 0.6, 235)}, {"yzp", small_ints(s8, {}, -10, 10, 236)},
                        {"bias", random_tensor(DType::kInt32, {6}, -2000, 2000, 237)}},
                       std::move(group_attrs), 1, {}});
  cases.push_back(Case{"dynamicquantizelinear", "DynamicQuantizeLinear", {{"x", random_tensor(f32, {3, 4, 5}, -3, 5, 238)}},
                       {}, 3, {}});
  cases.push_back(Case{"dynamicquantizelinear_positive", "DynamicQuantizeLinear",
                       {{"x", random_tensor(f32, {7}, 1, 4, 239)}}, {}, 3, {}});
  cases.push_back(Case{"dynamicquantizelinear_zeros", "DynamicQuantizeLinear", {{"x", random_tensor(f32, {4}, 0, 0, 240)}},
                       {}, 3, {}});
  check(cases, "integer_quantized");
}

}  // namespace
}  // namespace amp::test
