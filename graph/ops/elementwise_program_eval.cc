#include "graph/ops/elementwise_program_eval.h"

#include <cmath>
#include <cstring>

#include "graph/error.h"
#include "graph/half.h"

namespace amp {
namespace {

float load(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat: return t.as<float>()[i];
    case DType::kFloat16: return fp16_to_fp32(t.as<uint16_t>()[i]);
    case DType::kBFloat16: return bf16_to_fp32(t.as<uint16_t>()[i]);
    case DType::kBool: return t.as<uint8_t>()[i] ? 1.0f : 0.0f;
    default: throw Error("internal: fused program reads " + std::string(dtype_name(t.dtype)));
  }
}

void store(Tensor& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::kFloat: t.mutable_as<float>()[i] = v; break;
    case DType::kFloat16: t.mutable_as<uint16_t>()[i] = fp32_to_fp16(v); break;
    case DType::kBFloat16: t.mutable_as<uint16_t>()[i] = fp32_to_bf16(v); break;
    case DType::kBool: t.mutable_as<uint8_t>()[i] = v != 0.0f; break;
    default: throw Error("internal: fused program writes " + std::string(dtype_name(t.dtype)));
  }
}

}  // namespace

std::vector<int64_t> broadcast_shape(const std::vector<std::vector<int64_t>>& shapes, int min_rank, const std::string& who) {
  size_t rank = static_cast<size_t>(min_rank);
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[rank - s.size() + k];
      const int64_t d = s[k];
      if (d == o || d == 1) continue;
      if (o != 1) throw InputError(who + ": shapes do not broadcast (" + std::to_string(o) + " vs " + std::to_string(d) + ")");
      o = d;
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = in.size(); k-- > 0;) {
    const size_t d = out.size() - in.size() + k;
    strides[d] = in[k] == 1 ? 0 : stride;
    stride *= in[k];
  }
  return strides;
}

float apply_elem_op(const ElemInstr& in, const float* x) {
  if (in.op == ElemOp::kInput || in.op == ElemOp::kConstant) return in.alpha;
  const ElemParamValues p{in.alpha, in.beta};
  // Only the first `arity` arguments are meaningful; the table's host math, in fp32.
  return elementwise::visit(in.op, [&](auto row) { return static_cast<float>(row.math(x[0], x[1], x[2], p)); });
}

float round_to_dtype(float v, DType t) {
  switch (t) {
    case DType::kFloat16: return round_fp16(v);
    case DType::kBFloat16: return round_bf16(v);
    case DType::kBool: return v != 0.0f ? 1.0f : 0.0f;
    default: return v;
  }
}

std::vector<Tensor> evaluate_elementwise_program(const ElementwiseProgram& p, const std::vector<const Tensor*>& inputs,
                                                 const std::string& who) {
  if (inputs.size() != p.input_dtypes.size())
    throw InputError(who + ": expects " + std::to_string(p.input_dtypes.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k]->dtype != p.input_dtypes[k])
      throw InputError(who + ": input " + std::to_string(k) + " is " + std::string(dtype_name(inputs[k]->dtype)) +
                       ", expected " + std::string(dtype_name(p.input_dtypes[k])));
    shapes.push_back(inputs[k]->dims);
  }
  const std::vector<int64_t> out_shape = broadcast_shape(shapes, p.min_rank, who);
  std::vector<std::vector<int64_t>> strides;
  for (const auto& s : shapes) strides.push_back(broadcast_strides(s, out_shape));

  std::vector<Tensor> outputs;
  for (DType t : p.output_dtypes()) outputs.emplace_back(t, out_shape);
  int64_t n = 1;
  for (int64_t d : out_shape) n *= d;

  std::vector<float> reg(p.instrs.size());
  std::vector<int64_t> coord(out_shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < p.instrs.size(); ++k) {
      const ElemInstr& in = p.instrs[k];
      float v;
      if (in.op == ElemOp::kInput) {
        const auto& st = strides[static_cast<size_t>(in.input)];
        int64_t off = 0;
        for (size_t d = 0; d < coord.size(); ++d) off += coord[d] * st[d];
        v = load(*inputs[static_cast<size_t>(in.input)], off);
      } else {
        float args[3] = {0, 0, 0};
        for (size_t a = 0; a < in.args.size(); ++a) args[a] = reg[static_cast<size_t>(in.args[a])];
        v = round_to_dtype(apply_elem_op(in, args), in.dtype);
      }
      reg[k] = v;
    }
    for (size_t o = 0; o < p.outputs.size(); ++o) store(outputs[o], i, reg[static_cast<size_t>(p.outputs[o])]);
    for (size_t d = coord.size(); d-- > 0;) {  // row-major increment of the coordinate
      if (++coord[d] < out_shape[d]) break;
      coord[d] = 0;
    }
  }
  return outputs;
}

}  // namespace amp
