#include "backends/cuda/elementwise_codegen.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "graph/error.h"
#include "graph/gelu.h"
#include "graph/ops/elementwise_program_eval.h"

namespace amp {
namespace {

#define AMP_STRINGIFY(...) #__VA_ARGS__
#define AMP_EXPAND_STRINGIFY(...) AMP_STRINGIFY(__VA_ARGS__)

// Conversions as single cvt instructions: no cuda_fp16.h, so NVRTC needs no include path.
// cvt.rn.bf16.f32 needs sm_80, the oldest arch this project builds for. NVRTC never defines
// AMP_HOST_EMULATION: the host shim of the tests (tests/support/cuda_host_shim.h) does, and gives
// the three cvt helpers in software to run the same source on the CPU.
constexpr const char* kPrelude = R"(
#ifndef AMP_HOST_EMULATION
__device__ __forceinline__ float amp_f16_to_f32(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short amp_f32_to_f16(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ unsigned short amp_f32_to_bf16(float f) {
  unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b;
}
#endif
__device__ __forceinline__ float amp_bf16_to_f32(unsigned short b) {
  return __uint_as_float(static_cast<unsigned int>(b) << 16);
}
__device__ __forceinline__ float amp_round_f16(float f) { return amp_f16_to_f32(amp_f32_to_f16(f)); }
__device__ __forceinline__ float amp_round_bf16(float f) { return amp_bf16_to_f32(amp_f32_to_bf16(f)); }
__device__ __forceinline__ float amp_round_bool(float f) { return f != 0.0f ? 1.0f : 0.0f; }
__device__ __forceinline__ float amp_clamp(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }
__device__ __forceinline__ float amp_remainder(float a, float b) {
  const float r = fmodf(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
// Eight neighbouring elements in as few accesses as their bytes allow (one 16-byte access for
// 16-bit types, two for float, one 8-byte access for bool); the pointer is 16-byte aligned. The
// host emulation copies the bytes (no pointer punning for its compiler to act on).
struct alignas(16) amp_v16 { unsigned int w[4]; };
struct alignas(8) amp_v8 { unsigned int w[2]; };
template <class V, class T>
__device__ __forceinline__ V amp_vload(const T* p) {
#ifdef AMP_HOST_EMULATION
  V v; memcpy(&v, p, sizeof v); return v;
#else
  return *reinterpret_cast<const V*>(p);
#endif
}
template <class V, class T>
__device__ __forceinline__ void amp_vstore(T* p, const V& v) {
#ifdef AMP_HOST_EMULATION
  memcpy(p, &v, sizeof v);
#else
  *reinterpret_cast<V*>(p) = v;
#endif
}
__device__ __forceinline__ void amp_load8(const unsigned short* p, unsigned short (&e)[8]) {
  const amp_v16 u = amp_vload<amp_v16>(p);
  for (int j = 0; j < 4; ++j) { e[2 * j] = static_cast<unsigned short>(u.w[j] & 0xffffu); e[2 * j + 1] = static_cast<unsigned short>(u.w[j] >> 16); }
}
__device__ __forceinline__ void amp_store8(unsigned short* p, const unsigned short (&e)[8]) {
  amp_v16 u;
  for (int j = 0; j < 4; ++j) u.w[j] = static_cast<unsigned int>(e[2 * j]) | (static_cast<unsigned int>(e[2 * j + 1]) << 16);
  amp_vstore(p, u);
}
__device__ __forceinline__ void amp_load8(const float* p, float (&e)[8]) {
  const amp_v16 a = amp_vload<amp_v16>(p), b = amp_vload<amp_v16>(p + 4);
  for (int j = 0; j < 4; ++j) { e[j] = __uint_as_float(a.w[j]); e[4 + j] = __uint_as_float(b.w[j]); }
}
__device__ __forceinline__ void amp_store8(float* p, const float (&e)[8]) {
  amp_v16 a, b;
  for (int j = 0; j < 4; ++j) { a.w[j] = __float_as_uint(e[j]); b.w[j] = __float_as_uint(e[4 + j]); }
  amp_vstore(p, a);
  amp_vstore(p + 4, b);
}
__device__ __forceinline__ void amp_load8(const unsigned char* p, unsigned char (&e)[8]) {
  const amp_v8 u = amp_vload<amp_v8>(p);
  for (int j = 0; j < 8; ++j) e[j] = static_cast<unsigned char>((u.w[j / 4] >> (8 * (j % 4))) & 0xffu);
}
__device__ __forceinline__ void amp_store8(unsigned char* p, const unsigned char (&e)[8]) {
  amp_v8 u;
  u.w[0] = u.w[1] = 0u;
  for (int j = 0; j < 8; ++j) u.w[j / 4] |= static_cast<unsigned int>(e[j]) << (8 * (j % 4));
  amp_vstore(p, u);
}
__device__ __forceinline__ bool amp_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}
)";

// The exact bits of an fp32 value as a CUDA expression (inf and NaN included).
std::string float_literal(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  char buf[96];
  std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08xu) /* %g */", bits, static_cast<double>(f));
  return buf;
}

// GELU and its derivative, the operations of graph/gelu.h in its order with its float constants,
// so that the host evaluation of a fused group gives the same bits (NVRTC may contract a * b + c
// into an FMA on the device, a last-bit difference the GPU tests allow).
const std::string& gelu_functions() {
  static const std::string text = [] {
    const std::string sqrt_half = float_literal(static_cast<float>(kGeluSqrtHalf));
    const std::string inv_sqrt_2pi = float_literal(static_cast<float>(kGeluInvSqrt2Pi));
    const std::string beta = float_literal(static_cast<float>(kGeluTanhBeta));
    const std::string kappa = float_literal(static_cast<float>(kGeluTanhKappa));
    const std::string kappa3 = float_literal(static_cast<float>(kGeluTanhKappa3));
    return std::string(fast_math_source()) +
           "__device__ __forceinline__ float amp_gelu(float x) {\n"
           "  return x * 0.5f * (1.0f + amp_erff(x * " + sqrt_half + "));\n}\n"
           "__device__ __forceinline__ float amp_gelu_tanh(float x) {\n"
           "  const float inner = " + beta + " * (x + " + kappa + " * (x * x * x));\n"
           "  return x * 0.5f * (1.0f + tanhf(inner));\n}\n"
           "__device__ __forceinline__ float amp_gelu_grad(float dy, float x) {\n"
           "  float exp_half_x_sq;\n"
           "  const float cdf = 0.5f * (1.0f + amp_erff_with_exp(x * " + sqrt_half + ", &exp_half_x_sq));\n"
           "  const float pdf = exp_half_x_sq * " + inv_sqrt_2pi + ";\n"
           "  return dy * (cdf + x * pdf);\n}\n"
           "__device__ __forceinline__ float amp_gelu_tanh_grad(float dy, float x) {\n"
           "  const float x_sq = x * x;\n"
           "  const float inner = " + beta + " * (x + " + kappa + " * (x_sq * x));\n"
           "  const float t = tanhf(inner);\n"
           "  const float left = 0.5f * x;\n"
           "  const float right = 1.0f + t;\n"
           "  const float left_derivative = 0.5f * right;\n"
           "  const float right_derivative = left * (1.0f - t * t) * (" + beta + " * (1.0f + " + kappa3 + " * x_sq));\n"
           "  return dy * (left_derivative + right_derivative);\n}\n";
  }();
  return text;
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::kFloat: return "float";
    case DType::kFloat16:
    case DType::kBFloat16: return "unsigned short";
    case DType::kBool: return "unsigned char";
    default: throw Error("internal: no storage type for " + std::string(dtype_name(t)));
  }
}

std::string load_expr(DType t, const std::string& ref) {
  switch (t) {
    case DType::kFloat: return ref;
    case DType::kFloat16: return "amp_f16_to_f32(" + ref + ")";
    case DType::kBFloat16: return "amp_bf16_to_f32(" + ref + ")";
    case DType::kBool: return "(" + ref + " != 0 ? 1.0f : 0.0f)";
    default: throw Error("internal: cannot load " + std::string(dtype_name(t)));
  }
}

std::string store_expr(DType t, const std::string& reg) {
  switch (t) {
    case DType::kFloat: return reg;
    case DType::kFloat16: return "amp_f32_to_f16(" + reg + ")";
    case DType::kBFloat16: return "amp_f32_to_bf16(" + reg + ")";
    case DType::kBool: return "static_cast<unsigned char>(" + reg + " != 0.0f)";
    default: throw Error("internal: cannot store " + std::string(dtype_name(t)));
  }
}

std::string rounded(DType t, const std::string& expr) {
  switch (t) {
    case DType::kFloat16: return "amp_round_f16(" + expr + ")";
    case DType::kBFloat16: return "amp_round_bf16(" + expr + ")";
    case DType::kBool: return "amp_round_bool(" + expr + ")";
    default: return expr;
  }
}

// The row's CUDA expression (graph/ops/elementwise_ops.inc) over these registers and params.
std::string substitute(const ElemInstr& in, const std::vector<std::string>& args) {
  std::string t = elem_op_info(in.op).cuda;
  const std::pair<std::string, std::string> subs[] = {
      {"{a}", args.size() > 0 ? args[0] : ""},
      {"{b}", args.size() > 1 ? args[1] : ""},
      {"{c}", args.size() > 2 ? args[2] : ""},
      {"{alpha}", float_literal(in.alpha)},
      {"{beta}", float_literal(in.beta)}};
  for (const auto& [key, value] : subs)
    for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + value.size()))
      t.replace(at, key.size(), value);
  return t;
}

}  // namespace

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<InputIndexing> choose_indexing(const std::vector<std::vector<int64_t>>& input_shapes,
                                           const std::vector<int64_t>& out) {
  std::vector<InputIndexing> indexing;
  for (const auto& s : input_shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    // A leading run of 1s does not change the row-major index: [1,T,C] over [T,C] reads at i.
    std::vector<int64_t> squeezed = s, out_squeezed = out;
    while (!squeezed.empty() && squeezed.front() == 1) squeezed.erase(squeezed.begin());
    while (!out_squeezed.empty() && out_squeezed.front() == 1) out_squeezed.erase(out_squeezed.begin());
    if (squeezed == out_squeezed) indexing.push_back(InputIndexing::kSame);
    else if (n == 1) indexing.push_back(InputIndexing::kScalar);
    else indexing.push_back(InputIndexing::kBroadcast);
  }
  return indexing;
}

namespace {

// The statements computing one element i: loads (in<k>[i], in<k>[0] or in<k>[off<k>]), one fp32
// register per instruction rounded to its type, stores out<k>[i]. In a vector loop (`vector`),
// element j of the thread's eight: same-shape inputs read vin<k>[j] and outputs write vout<k>[j],
// arrays the loop loads and stores eight at a time.
std::string element_body(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing, bool vector = false) {
  std::ostringstream body;
  const std::vector<DType> out_types = p.output_dtypes();
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const ElemInstr& in = p.instrs[k];
    std::string expr;
    if (in.op == ElemOp::kInput) {
      const size_t i = static_cast<size_t>(in.input);
      const std::string index = indexing[i] == InputIndexing::kSame ? "i"
                                : indexing[i] == InputIndexing::kScalar ? "0"
                                                                         : "off" + std::to_string(i);
      const std::string ref = vector && indexing[i] == InputIndexing::kSame ? "vin" + std::to_string(i) + "[j]"
                                                                            : "in" + std::to_string(i) + "[" + index + "]";
      expr = load_expr(in.dtype, ref);
    } else if (in.op == ElemOp::kConstant) {
      expr = float_literal(round_to_dtype(in.alpha, in.dtype));
    } else {
      std::vector<std::string> args;
      for (int a : in.args) args.push_back("r" + std::to_string(a));
      expr = rounded(in.dtype, substitute(in, args));
    }
    body << "    const float r" << k << " = " << expr << ";  // " << elem_op_info(in.op).name << " : "
         << dtype_name(in.dtype) << "\n";
  }
  for (size_t k = 0; k < p.outputs.size(); ++k)
    body << "    " << (vector ? "vout" : "out") << k << (vector ? "[j]" : "[i]") << " = "
         << store_expr(out_types[k], "r" + std::to_string(p.outputs[k])) << ";\n";
  return body.str();
}

// Programs up to this many instructions and outputs take the vector loop: eight elements of a
// larger one do not fit the registers (ptxas for sm_90, 2026-11-27: the multi-tensor AdamW of two
// variants, 31 instructions each, 94 registers; a 67-instruction program of every op and 9
// outputs, 255 registers and 680 bytes spilled).
constexpr size_t kVectorMaxInstrs = 40, kVectorMaxOutputs = 4;

// Whether a kernel of p over these inputs has the vector loop: every input read at the element's
// own index, at 0, or at an offset constant over runs of 8 (no per-element broadcast walk), and p
// small enough.
bool vectorizable(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing) {
  if (p.instrs.size() > kVectorMaxInstrs || p.outputs.size() > kVectorMaxOutputs) return false;
  for (InputIndexing ix : indexing)
    if (ix == InputIndexing::kBroadcast) return false;
  return true;
}

// The statements giving each walked input (walks_offset) its offset off<k> for element `index`:
// one walk over the coordinates serves them all. Empty without such inputs.
std::string offsets_walk(const std::vector<InputIndexing>& indexing, const std::string& index,
                         const std::string& indent) {
  bool any = false;
  for (InputIndexing ix : indexing) any |= walks_offset(ix);
  if (!any) return "";
  std::ostringstream body;
  for (size_t k = 0; k < indexing.size(); ++k)
    if (walks_offset(indexing[k])) body << indent << "idx_t off" << k << " = 0;\n";
  body << indent << "idx_t rest = " << index << ";\n"
       << indent << "for (int d = dims.rank - 1; d >= 0; --d) {\n"
       << indent << "  const idx_t size = static_cast<idx_t>(dims.size[d]);\n"
       << indent << "  const idx_t c = rest % size;\n"
       << indent << "  rest /= size;\n";
  for (size_t k = 0; k < indexing.size(); ++k)
    if (walks_offset(indexing[k]))
      body << indent << "  off" << k << " += c * static_cast<idx_t>(st" << k << ".stride[d]);\n";
  body << indent << "}\n";
  return body.str();
}

// The loop over elements [0, n): when every same-shape input and output pointer is 16-byte
// aligned, thread g of the grid-stride loop takes elements 8g to 8g + 7 — each array loaded and
// stored in one or two vector accesses (a warp moves 512 bytes of fp16 an access instead of 64),
// the eight computed one after another — and the n % 8 left one at a time; else one at a time
// throughout. `ins` and `outs`: the pointer expressions and storage types, in the program's order.
std::string element_loops(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing,
                          const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                          const std::string& indent) {
  std::ostringstream s;
  const std::vector<DType> out_types = p.output_dtypes();
  const std::string walk_i = offsets_walk(indexing, "i", indent + "  ");
  if (!vectorizable(p, indexing)) {
    s << indent << "for (idx_t i = static_cast<idx_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {\n"
      << walk_i << element_body(p, indexing) << indent << "}\n";
    return s.str();
  }
  std::string aligned;
  for (size_t k = 0; k < ins.size(); ++k)
    if (indexing[k] == InputIndexing::kSame) aligned += " && amp_aligned16(" + ins[k] + ")";
  for (const std::string& o : outs) aligned += " && amp_aligned16(" + o + ")";
  s << indent << "idx_t first = 0;\n"
    << indent << "if (true" << aligned << ") {\n"
    << indent << "  const idx_t groups = n / 8;\n"
    << indent << "  for (idx_t g = static_cast<idx_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step) {\n";
  for (size_t k = 0; k < ins.size(); ++k)
    if (indexing[k] == InputIndexing::kSame)
      s << indent << "    " << storage_type(p.input_dtypes[k]) << " vin" << k << "[8];\n"
        << indent << "    amp_load8(" << ins[k] << " + 8 * g, vin" << k << ");\n";
  for (size_t k = 0; k < outs.size(); ++k) s << indent << "    " << storage_type(out_types[k]) << " vout" << k << "[8];\n";
  s << offsets_walk(indexing, "8 * g", indent + "    ");  // kRunOf8 inputs: one offset for the eight
  s << indent << "#pragma unroll\n"
    << indent << "    for (int j = 0; j < 8; ++j) {\n"
    << element_body(p, indexing, true) << indent << "    }\n";
  for (size_t k = 0; k < outs.size(); ++k) s << indent << "    amp_store8(" << outs[k] << " + 8 * g, vout" << k << ");\n";
  s << indent << "  }\n"
    << indent << "  first = groups * 8;\n"
    << indent << "}\n"
    << indent << "for (idx_t i = first + static_cast<idx_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    << walk_i << element_body(p, indexing) << indent << "}\n";
  return s.str();
}

// The program as a comment, so a generated kernel says what it computes.
std::string program_comment(const ElementwiseProgram& p) {
  std::ostringstream src;
  src << "// Generated by onnx-amp from this fused elementwise program:\n";
  std::istringstream text(p.to_text());
  for (std::string line; std::getline(text, line);) src << "//   " << line << "\n";
  return src.str();
}

// The helpers every kernel uses, and its index type: 32-bit arithmetic when the tensors allow it
// (a 64-bit div/mod is a long software sequence on the GPU, a 32-bit one a few instructions).
std::string prelude(bool wide_index) {
  return std::string(kPrelude) + gelu_functions() + "\ntypedef " + (wide_index ? "long long" : "unsigned int") + " idx_t;\n\n";
}

std::string source_head(const ElementwiseProgram& p, bool wide_index) { return program_comment(p) + prelude(wide_index); }

}  // namespace

GeneratedKernel generate_elementwise_kernel(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing,
                                            bool wide_index) {
  p.check();
  if (indexing.size() != p.input_dtypes.size()) throw Error("internal: one indexing per fused input expected");

  std::ostringstream params, body;
  params << "long long n, FusedDims dims";
  for (size_t k = 0; k < p.input_dtypes.size(); ++k) {
    params << ", const " << storage_type(p.input_dtypes[k]) << "* __restrict__ in" << k;
    if (walks_offset(indexing[k])) params << ", FusedStrides st" << k;
  }
  const std::vector<DType> out_types = p.output_dtypes();
  for (size_t k = 0; k < out_types.size(); ++k) params << ", " << storage_type(out_types[k]) << "* __restrict__ out" << k;

  GeneratedKernel kernel;
  kernel.vectorized = vectorizable(p, indexing);
  std::vector<std::string> ins, outs;
  for (size_t k = 0; k < p.input_dtypes.size(); ++k) ins.push_back("in" + std::to_string(k));
  for (size_t k = 0; k < out_types.size(); ++k) outs.push_back("out" + std::to_string(k));
  const std::string loops = element_loops(p, indexing, ins, outs, "  ");
  kernel.name = "amp_fused_" + hex64(fnv1a64(std::to_string(wide_index) + params.str() + loops));
  kernel.source = source_head(p, wide_index) + AMP_EXPAND_STRINGIFY(AMP_FUSED_DIMS_STRUCT) + "\n" +
                  AMP_EXPAND_STRINGIFY(AMP_FUSED_STRIDES_STRUCT) + "\n\n" +
                  "extern \"C\" __global__ void __launch_bounds__(256) " + kernel.name + "(" + params.str() + ") {\n" +
                  "  const idx_t step = static_cast<idx_t>(gridDim.x) * blockDim.x;\n" + loops + "}\n";
  return kernel;
}

MultiTensorKernel generate_multi_tensor_kernel(const std::vector<MultiTensorVariant>& variants, bool wide_index) {
  if (variants.empty()) throw Error("internal: a multi-tensor kernel needs a program");
  MultiTensorKernel mt;
  mt.has_variant = variants.size() > 1;
  for (const MultiTensorVariant& v : variants) {
    const ElementwiseProgram& p = *v.program;
    p.check();
    if (v.indexing.size() != p.input_dtypes.size()) throw Error("internal: one indexing per fused input expected");
    for (InputIndexing ix : v.indexing)
      if (walks_offset(ix)) throw Error("internal: a multi-tensor kernel reads no broadcast input");
    if (p.input_dtypes.empty()) throw Error("internal: a multi-tensor kernel needs inputs");
    mt.inputs = std::max(mt.inputs, static_cast<int>(p.input_dtypes.size()));
    mt.outputs = std::max(mt.outputs, static_cast<int>(p.outputs.size()));
  }
  mt.capacity = static_cast<int>(
      std::min<size_t>(kMultiTensorMaxTasks, (kKernelParamBytes - 8) / (static_cast<size_t>(mt.words_per_slot()) * 8)));

  std::ostringstream decl, body;
  decl << "struct FusedTask {\n  const void* in[" << mt.inputs << "];\n  void* out[" << mt.outputs
       << "];\n  unsigned long long n;\n" << (mt.has_variant ? "  unsigned long long variant;\n" : "") << "};\n"
       << "struct FusedTaskList {\n  FusedTask task[" << mt.capacity << "];\n  int count;\n};\n";
  body << "    const idx_t n = static_cast<idx_t>(task.n);\n";
  if (mt.has_variant) body << "    switch (task.variant) {\n";
  for (size_t v = 0; v < variants.size(); ++v) {
    const ElementwiseProgram& p = *variants[v].program;
    const std::vector<DType> out_types = p.output_dtypes();
    if (mt.has_variant) body << "    case " << v << ": {\n";
    for (size_t k = 0; k < p.input_dtypes.size(); ++k)
      body << "    const " << storage_type(p.input_dtypes[k]) << "* __restrict__ in" << k << " = static_cast<const "
           << storage_type(p.input_dtypes[k]) << "*>(task.in[" << k << "]);\n";
    for (size_t k = 0; k < out_types.size(); ++k)
      body << "    " << storage_type(out_types[k]) << "* __restrict__ out" << k << " = static_cast<"
           << storage_type(out_types[k]) << "*>(task.out[" << k << "]);\n";
    std::vector<std::string> ins, outs;
    for (size_t k = 0; k < p.input_dtypes.size(); ++k) ins.push_back("in" + std::to_string(k));
    for (size_t k = 0; k < out_types.size(); ++k) outs.push_back("out" + std::to_string(k));
    body << "    {\n" << element_loops(p, variants[v].indexing, ins, outs, "    ") << "    }\n";
    if (mt.has_variant) body << "    } break;\n";
  }
  if (mt.has_variant) body << "    default: break;\n    }\n";
  mt.kernel.vectorized = true;
  for (const MultiTensorVariant& v : variants) mt.kernel.vectorized &= vectorizable(*v.program, v.indexing);
  mt.kernel.name = "amp_fused_mt_" + hex64(fnv1a64(std::to_string(wide_index) + decl.str() + body.str()));
  // Every program's listing, then one prelude.
  std::string head;
  for (const MultiTensorVariant& v : variants) head += program_comment(*v.program);
  mt.kernel.source = head + prelude(wide_index) + decl.str() + "\nextern \"C\" __global__ void __launch_bounds__(256) " + mt.kernel.name +
                     "(FusedTaskList list) {\n" + "  const idx_t step = static_cast<idx_t>(gridDim.x) * blockDim.x;\n" +
                     "  for (int t = 0; t < list.count; ++t) {\n    const FusedTask& task = list.task[t];\n" + body.str() +
                     "  }\n}\n";
  return mt;
}

}  // namespace amp
