// Test helpers for the backend tests: random tensors in any storage type, one-node models, running
// a model on the CPU backend, and comparing tensors — 16-bit ones in units in the last place of
// their own type, wider ones with rtol/atol.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "graph/half.h"
#include "graph/model.h"

namespace amp::test {

// Uniform values in [lo, hi) rounded into dtype (integers: truncated; bool: > midpoint).
inline Tensor random_tensor(DType dtype, std::vector<int64_t> dims, double lo, double hi, uint32_t seed) {
  Tensor t(dtype, std::move(dims));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = dist(gen);
    uint8_t* p = t.mutable_data();
    switch (dtype) {
      case DType::kFloat: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case DType::kDouble: reinterpret_cast<double*>(p)[i] = v; break;
      case DType::kFloat16: reinterpret_cast<uint16_t*>(p)[i] = fp32_to_fp16(static_cast<float>(v)); break;
      case DType::kBFloat16: reinterpret_cast<uint16_t*>(p)[i] = fp32_to_bf16(static_cast<float>(v)); break;
      case DType::kInt64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(std::floor(v)); break;
      case DType::kInt32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(std::floor(v)); break;
      case DType::kUInt8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(std::floor(v)); break;
      case DType::kUInt16: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(std::floor(v)); break;
      case DType::kUInt32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(std::floor(v)); break;
      case DType::kUInt64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(std::floor(v)); break;
      case DType::kBool: p[i] = v > (lo + hi) / 2; break;
      default: throw std::runtime_error("random_tensor: unsupported type");
    }
  }
  return t;
}

inline Tensor int64_tensor(std::vector<int64_t> values) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.mutable_as<int64_t>());
  return t;
}

// A model with one node: inputs named as given (graph inputs typed from the tensors), outputs
// "y", "y1", ... whose types are left for the backend to infer.
inline Model one_node_model(const std::string& op, const std::vector<std::pair<std::string, Tensor>>& inputs,
                            std::vector<Attribute> attrs, size_t outputs = 1, int64_t opset = 17) {
  Model m;
  m.set_opset_version("", opset);
  m.path = "<" + op + " test>";
  std::vector<Value*> ins;
  for (const auto& [name, t] : inputs)
    ins.push_back(name.empty() ? nullptr : m.graph->add_input(name, ValueType::tensor(t.dtype, Shape::of(t.dims))));
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs; ++i) names.push_back(i == 0 ? "y" : "y" + std::to_string(i));
  Node* n = m.graph->add_node(op, ins, names);
  n->name = op + "_under_test";
  for (auto& a : attrs) n->set_attr(std::move(a));
  for (Value* v : n->outputs()) m.graph->add_output(v);
  return m;
}

inline std::vector<Tensor> run_cpu(const Model& m, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                   std::vector<std::string> fetches = {}) {
  if (fetches.empty())
    for (const Value* v : m.graph->outputs()) fetches.push_back(v->name());
  std::vector<std::pair<std::string, Tensor>> present;
  for (const auto& f : feeds)
    if (!f.first.empty()) present.push_back(f);
  auto exe = make_backend("cpu")->compile(m, {});
  return exe->run(present, fetches);
}

// Sign-magnitude 16-bit pattern -> an integer whose differences count representable steps.
inline int32_t ordered16(uint16_t bits) {
  const int32_t mag = bits & 0x7fff;
  return bits & 0x8000 ? -mag : mag;
}

struct Tolerance {
  int max_ulps = 0;     // fp16 / bf16 outputs
  double rtol = 1e-5;   // float / double outputs
  double atol = 1e-6;
};

// "" when got matches want, else the first few mismatches.
inline std::string compare_tensors(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (got.dtype != want.dtype) return "dtype " + std::string(dtype_name(got.dtype)) + " vs " + std::string(dtype_name(want.dtype));
  if (got.dims != want.dims) {
    std::string g, w;
    for (int64_t d : got.dims) g += std::to_string(d) + ",";
    for (int64_t d : want.dims) w += std::to_string(d) + ",";
    return "dims [" + g + "] vs [" + w + "]";
  }
  std::string report;
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok;
    if (is_low_precision(got.dtype)) {
      const uint16_t a = got.as<uint16_t>()[i], b = want.as<uint16_t>()[i];
      const float fa = static_cast<float>(got.element(i)), fb = static_cast<float>(want.element(i));
      ok = a == b || (std::isnan(fa) && std::isnan(fb)) || std::abs(ordered16(a) - ordered16(b)) <= tol.max_ulps;
    } else if (is_floating(got.dtype)) {
      const double a = got.element(i), b = want.element(i);
      ok = (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= tol.atol + tol.rtol * std::abs(b);
    } else {
      ok = got.element(i) == want.element(i);
    }
    if (!ok && bad++ < 5)
      report += " [" + std::to_string(i) + "] got " + std::to_string(got.element(i)) + " want " +
                std::to_string(want.element(i)) + ";";
  }
  if (bad) report = std::to_string(bad) + " of " + std::to_string(got.numel()) + " differ:" + report;
  return report;
}

}  // namespace amp::test
