// Every row of the elementwise op table (graph/ops/elementwise_ops.inc), as a one-node model on
// the CPU backend and as the fused program of that node evaluated on the host
// (evaluate_elementwise_program, the reference of the generated CUDA kernels), gives the same
// bits: for every fusable type the row takes, on random values and on the values where
// implementations part (NaN, +-0, +-inf, fp32 subnormals, fp16's overflow edge, the kinks of the
// piecewise ops), with broadcasting, with non-default attributes, every Cast between the fusable
// types and Clip with absent bounds. Both run the row's one host-math expression, so any
// difference is a kernel reading or rounding differently from a fused kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "graph/half.h"
#include "graph/ops/elementwise_grouping.h"
#include "graph/ops/elementwise_program_eval.h"
#include "tests/support/one_node.h"

namespace amp::test {
namespace {

constexpr DType kFusedTypes[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kBool};

// Values where math libraries and formulas part: NaN, signed zeros, infinities, subnormals, the
// fp16 overflow edge, and the breakpoints of Relu, HardSigmoid, HardSwish, Floor and Clip.
const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                          0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          1e-40f, -1e-40f, 65504.0f, 65520.0f, -65520.0f, 1e30f, -1e30f, 3.0f, -3.0f, 2.5f, -2.5f,
                          0.5f, -0.5f, 1.0f, -1.0f, 6.0f, -6.0f, 1e-8f, 88.8f, -88.8f};

Tensor values(DType t, std::vector<int64_t> dims, uint32_t seed) {
  Tensor x(t, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  constexpr size_t kNumSpecial = sizeof(kSpecial) / sizeof(kSpecial[0]);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = rng() % 3 == 0 ? kSpecial[rng() % kNumSpecial] : uniform(rng);
    switch (t) {
      case DType::kFloat: x.mutable_as<float>()[i] = v; break;
      case DType::kFloat16: x.mutable_as<uint16_t>()[i] = fp32_to_fp16(v); break;
      case DType::kBFloat16: x.mutable_as<uint16_t>()[i] = fp32_to_bf16(v); break;
      case DType::kBool: x.mutable_as<uint8_t>()[i] = rng() & 1u; break;
      default: throw std::logic_error("no values of this type");
    }
  }
  return x;
}

// "" when a and b hold the same bits, else the first element that differs.
std::string difference(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype) return "types " + std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype));
  if (a.dims != b.dims) return "shapes differ";
  const size_t size = dtype_size(a.dtype);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.data() + i * size, b.data() + i * size, size) != 0)
      return "element " + std::to_string(i) + ": " + std::to_string(a.element(i)) + " vs " + std::to_string(b.element(i));
  return "";
}

struct RowCase {
  Feeds feeds;
  DType out;
  std::vector<Attribute> attrs;
  std::string what;
};

// The cases of one row for data type t.
std::vector<RowCase> row_cases(const ElemOpInfo& info, DType t) {
  const DType out = info.yields_bool() ? DType::kBool : t;
  std::vector<RowCase> s;
  auto full = [&](uint32_t seed) { return values(t, {5, 37}, seed); };
  auto row = [&](uint32_t seed) { return values(t, {37}, seed); };
  switch (info.form) {
    case ElemForm::kMap:
    case ElemForm::kCopy:
      s.push_back({{{"x", full(1)}}, out, {}, ""});
      break;
    case ElemForm::kZip:
    case ElemForm::kCompare:
    case ElemForm::kPower:
    case ElemForm::kFold:
      s.push_back({{{"a", full(2)}, {"b", full(3)}}, out, {}, "same shape"});
      s.push_back({{{"a", full(4)}, {"b", row(5)}}, out, {}, "b broadcast"});
      if (info.form == ElemForm::kFold) {  // variadic: folded in the compute type, rounded once
        s.push_back({{{"a", row(15)}, {"b", full(16)}, {"c", full(17)}}, out, {}, "three operands"});
        s.push_back({{{"a", full(18)}, {"b", row(19)}, {"c", full(20)}, {"d", values(t, {5, 1}, 21)}}, out, {},
                     "four operands"});
      }
      break;
    case ElemForm::kSelect:
      s.push_back({{{"c", values(DType::kBool, {5, 1}, 6)}, {"x", full(7)}, {"y", row(8)}}, t, {}, ""});
      break;
    case ElemForm::kClamp: {
      Tensor lo = values(t, {}, 9), hi = values(t, {}, 10);
      const float bounds[2] = {-1.5f, 2.25f};
      for (int k = 0; k < 2; ++k) {
        Tensor& b = k == 0 ? lo : hi;
        if (t == DType::kFloat) b.mutable_as<float>()[0] = bounds[k];
        if (t == DType::kFloat16) b.mutable_as<uint16_t>()[0] = fp32_to_fp16(bounds[k]);
        if (t == DType::kBFloat16) b.mutable_as<uint16_t>()[0] = fp32_to_bf16(bounds[k]);
      }
      s.push_back({{{"x", full(11)}, {"lo", lo}, {"hi", hi}}, t, {}, "both bounds"});
      s.push_back({{{"x", full(12)}, {"", Tensor()}, {"hi", hi}}, t, {}, "no min"});
      s.push_back({{{"x", full(13)}, {"lo", lo}}, t, {}, "no max"});
      break;
    }
    case ElemForm::kCast:
      for (DType to : kFusedTypes) {
        std::vector<Attribute> a;
        a.push_back(Attribute::of_int("to", static_cast<int64_t>(to)));
        s.push_back({{{"x", full(14)}}, to, std::move(a), "to " + std::string(dtype_name(to))});
      }
      break;
    case ElemForm::kLeaf:
      break;
  }
  for (RowCase& c : s) {
    if (info.params.alpha.attr) c.attrs.push_back(Attribute::of_float(info.params.alpha.attr, 0.3f));
    if (info.params.beta.attr) c.attrs.push_back(Attribute::of_float(info.params.beta.attr, 0.45f));
    if (info.node.variant)
      c.attrs.push_back(info.node.variant_is_int ? Attribute::of_int(info.node.variant, std::stoll(info.node.variant_value))
                                                 : Attribute::of_string(info.node.variant, info.node.variant_value));
  }
  return s;
}

TEST(ElementwiseTable, CpuKernelsComputeWhatTheFusedProgramComputesBitForBit) {
  int compared = 0;
  for (int k = static_cast<int>(ElemOp::kConstant) + 1; k < kNumElemOps; ++k) {
    const ElemOpInfo& info = elem_op_info(static_cast<ElemOp>(k));
    for (DType t : kFusedTypes) {
      if (!(elem_type_mask(info.types) & (1u << static_cast<int>(t)))) continue;
      for (RowCase& s : row_cases(info, t)) {
        const std::string where = std::string(info.name) + " on " + std::string(dtype_name(t)) + (s.what.empty() ? "" : ", " + s.what);
        OneNode one(info.node.op, s.feeds, {s.out}, info.node.domain);
        for (Attribute& a : s.attrs) one.attr(std::move(a));
        ASSERT_EQ(elem_op_of(*one.node), std::optional<ElemOp>(info.op)) << where;
        std::vector<const Value*> program_inputs;
        const ElementwiseProgram program = node_program(*one.node, &program_inputs);
        std::vector<const Tensor*> in;
        for (const Value* v : program_inputs)
          for (const auto& [name, tensor] : one.feeds)
            if (name == v->name()) in.push_back(&tensor);
        ASSERT_EQ(in.size(), program_inputs.size()) << where;
        const std::vector<Tensor> fused = evaluate_elementwise_program(program, in, where);
        const std::vector<Tensor> cpu = one.run_cpu();
        ASSERT_EQ(fused.size(), 1u);
        EXPECT_EQ(difference(cpu[0], fused[0]), "") << where << "\n" << program.to_text();
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 90);
}

}  // namespace
}  // namespace amp::test
