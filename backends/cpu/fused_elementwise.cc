// ai.onnx_amp FusedElementwise on the CPU: one pass over the broadcast of the group's inputs that
// runs its program (graph/ops/elementwise_program.h) on blocks of fp32 registers, instead of one
// pass through memory per op (an SGD update's Mul, Sub and Where; a ReLU gradient's Greater and
// Where; the casts around them).
//
// Each instruction runs its row's host math over a block (the loop vectorises) and rounds the
// block to the instruction's type, exactly as evaluate_elementwise_program does element by
// element and as the unfused kernels do op by op: the fused step computes the same bits.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/elementwise_program.h"
#include "graph/ops/elementwise_program_eval.h"

namespace amp::cpu {
namespace {

constexpr int64_t kBlock = 256;

using BlockFn = void (*)(float* out, const float* a, const float* b, const float* c, int64_t m, ElemParamValues p);

template <class Row>
AMP_VECTOR_CLONES void block_op(float* out, const float* a, const float* b, const float* c, int64_t m,
                                ElemParamValues p) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) out[j] = static_cast<float>(Row::math(a[j], b[j], c[j], p));
}

AMP_VECTOR_CLONES void to_bool(float* x, int64_t m) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) x[j] = x[j] != 0.0f ? 1.0f : 0.0f;
}

AMP_VECTOR_CLONES void bool_to_float(const uint8_t* in, float* out, int64_t m) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) out[j] = in[j] ? 1.0f : 0.0f;
}

AMP_VECTOR_CLONES void float_to_bool(const float* in, uint8_t* out, int64_t m) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) out[j] = in[j] != 0.0f;
}

// x rounded to t in place (fp16/bf16 to nearest even, bool to 0/1); fp32 is left as it is.
void round_block(float* x, int64_t m, DType t, uint16_t* staging) {
  switch (t) {
    case DType::kFloat16:
      narrow(x, reinterpret_cast<f16*>(staging), m);
      widen(reinterpret_cast<const f16*>(staging), x, m);
      break;
    case DType::kBFloat16:
      narrow(x, reinterpret_cast<bf16*>(staging), m);
      widen(reinterpret_cast<const bf16*>(staging), x, m);
      break;
    case DType::kBool: to_bool(x, m); break;
    default: break;
  }
}

// x[0, m) of a tensor of type t, starting at element `at`, as fp32.
void load_block(const View& v, int64_t at, float* out, int64_t m) {
  switch (v.dtype) {
    case DType::kFloat: std::memcpy(out, v.as<float>() + at, static_cast<size_t>(m) * sizeof(float)); break;
    case DType::kFloat16: widen(v.as<f16>() + at, out, m); break;
    case DType::kBFloat16: widen(v.as<bf16>() + at, out, m); break;
    case DType::kBool: bool_to_float(reinterpret_cast<const uint8_t*>(v.as<bool>()) + at, out, m); break;
    default: throw Error("internal: a fused kernel reads " + std::string(dtype_name(v.dtype)));
  }
}

float load_one(const View& v, int64_t at) {
  float x;
  load_block(v, at, &x, 1);
  return x;
}

void store_block(const float* x, View& v, int64_t at, int64_t m) {
  switch (v.dtype) {
    case DType::kFloat: std::memcpy(v.as<float>() + at, x, static_cast<size_t>(m) * sizeof(float)); break;
    case DType::kFloat16: narrow(x, v.as<f16>() + at, m); break;
    case DType::kBFloat16: narrow(x, v.as<bf16>() + at, m); break;
    case DType::kBool: float_to_bool(x, reinterpret_cast<uint8_t*>(v.as<bool>()) + at, m); break;
    default: throw Error("internal: a fused kernel writes " + std::string(dtype_name(v.dtype)));
  }
}

class FusedElementwise final : public Kernel {
 public:
  FusedElementwise(const Node& n, int64_t) : FusedElementwise(ElementwiseProgram::parse(n.attr_string("program", ""))) {}
  explicit FusedElementwise(ElementwiseProgram program) : program_(std::move(program)) {
    program_.check();
    // A group of constants only (Dropout's 1 - ratio) computes the same values every run.
    if (program_.input_dtypes.empty()) constants_ = evaluate_elementwise_program(program_, {}, "FusedElementwise");
    for (const ElemInstr& in : program_.instrs) {
      BlockFn fn = nullptr;
      if (in.op != ElemOp::kInput && in.op != ElemOp::kConstant)
        fn = elementwise::visit(in.op, [](auto row) -> BlockFn { return &block_op<decltype(row)>; });
      fns_.push_back(fn);
    }
  }

  size_t infer(KernelIO& io) const override {
    if (io.in.size() != program_.input_dtypes.size())
      throw InputError("expects " + std::to_string(program_.input_dtypes.size()) + " inputs, got " +
                       std::to_string(io.in.size()));
    std::vector<const std::vector<int64_t>*> dims;
    for (size_t k = 0; k < io.in.size(); ++k) {
      const View& v = io.input(k);
      if (v.dtype != program_.input_dtypes[k])
        throw InputError("input " + std::to_string(k) + " is " + std::string(dtype_name(v.dtype)) + ", the program reads " +
                         std::string(dtype_name(program_.input_dtypes[k])));
      dims.push_back(&v.dims);
    }
    std::vector<int64_t> out = Broadcast::result_dims(dims);
    if (static_cast<int>(out.size()) < program_.min_rank) out.insert(out.begin(), program_.min_rank - out.size(), 1);
    const std::vector<DType> types = program_.output_dtypes();
    if (io.out.size() != types.size())
      throw InputError("expects " + std::to_string(types.size()) + " outputs, got " + std::to_string(io.out.size()));
    for (size_t k = 0; k < types.size(); ++k)
      if (io.has_out(k)) {
        io.output(k).dtype = types[k];
        io.output(k).dims = out;
      }
    return static_cast<size_t>(std::max(io.threads, 1)) * slot_bytes();
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    std::vector<const std::vector<int64_t>*> dims;
    for (size_t k = 0; k < io.in.size(); ++k) dims.push_back(&io.input(k).dims);
    if (dims.empty()) {  // constants only: computed once, by the host evaluator
      for (size_t o = 0; o < constants_.size(); ++o)
        if (io.has_out(o)) std::memcpy(io.output(o).data, constants_[o].data(), constants_[o].nbytes());
      return;
    }
    const Broadcast bc(dims);
    const size_t n_in = io.in.size(), n_instr = program_.instrs.size();
    auto* workspace = static_cast<uint8_t*>(io.workspace);
    for_each_span(bc, ctx.threads, [&](int64_t r, int64_t c0, int64_t n) {
      // This thread's slot: registers, offsets, staging for 16-bit rounding.
      uint8_t* slot = workspace + static_cast<size_t>(omp_get_thread_num()) * slot_bytes();
      float* regs = reinterpret_cast<float*>(slot);
      auto* offs = reinterpret_cast<int64_t*>(regs + n_instr * kBlock);
      auto** ptr = reinterpret_cast<const float**>(offs + std::max<size_t>(n_in, 1));  // each instruction's block
      auto* staging = reinterpret_cast<uint16_t*>(ptr + n_instr);
      bc.row_offsets(r, offs);
      for (size_t k = 0; k < n_in; ++k) offs[k] += c0 * bc.inner_stride(k);
      // Constants and inputs held along the span fill their registers once for all its blocks.
      auto held = [&](const ElemInstr& in) {
        return in.op == ElemOp::kConstant || (in.op == ElemOp::kInput && !bc.inner_stride(static_cast<size_t>(in.input)));
      };
      for (size_t k = 0; k < n_instr; ++k) {
        const ElemInstr& in = program_.instrs[k];
        if (!held(in)) continue;
        float* reg = regs + k * kBlock;
        std::fill(reg, reg + kBlock,
                  in.op == ElemOp::kConstant ? in.alpha : load_one(io.input(static_cast<size_t>(in.input)), offs[in.input]));
        ptr[k] = reg;
      }
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t m = std::min(kBlock, n - i0);
        for (size_t k = 0; k < n_instr; ++k) {
          const ElemInstr& in = program_.instrs[k];
          float* reg = regs + k * kBlock;
          if (held(in)) continue;
          if (in.op == ElemOp::kInput) {
            const View& v = io.input(static_cast<size_t>(in.input));
            const int64_t at = offs[in.input];
            if (v.dtype == DType::kFloat) {
              ptr[k] = v.as<float>() + at + i0;  // read in place
              continue;
            }
            load_block(v, at + i0, reg, m);
          } else {
            const float* a = in.args.empty() ? reg : ptr[static_cast<size_t>(in.args[0])];
            const float* b = in.args.size() > 1 ? ptr[static_cast<size_t>(in.args[1])] : a;
            const float* c = in.args.size() > 2 ? ptr[static_cast<size_t>(in.args[2])] : b;
            fns_[k](reg, a, b, c, m, ElemParamValues{in.alpha, in.beta});
            round_block(reg, m, in.dtype, staging);
          }
          ptr[k] = reg;
        }
        for (size_t o = 0; o < program_.outputs.size(); ++o)
          if (io.has_out(o))
            store_block(ptr[static_cast<size_t>(program_.outputs[o])], io.output(o), r * bc.inner() + c0 + i0, m);
      }
    });
  }

 private:
  // Per thread: a block of registers per instruction, the inputs' row offsets, where each
  // instruction's block is, 16-bit staging.
  size_t slot_bytes() const {
    const size_t bytes = program_.instrs.size() * kBlock * sizeof(float) +
                         std::max<size_t>(program_.input_dtypes.size(), 1) * sizeof(int64_t) +
                         program_.instrs.size() * sizeof(const float*) + kBlock * sizeof(uint16_t);
    return (bytes + 63) / 64 * 64;
  }

  ElementwiseProgram program_;
  std::vector<BlockFn> fns_;
  std::vector<Tensor> constants_;  // the outputs of a program without inputs
};

}  // namespace

std::unique_ptr<Kernel> make_fused_elementwise_kernel(ElementwiseProgram program) {
  return std::make_unique<FusedElementwise>(std::move(program));
}

const std::vector<OpEntry>& fused_elementwise_ops() {
  static const std::vector<OpEntry> ops = {{kFusedElementwiseOp, make_kernel<FusedElementwise>, 0, {}}};
  return ops;
}

}  // namespace amp::cpu
