// The generated fused kernels executed, without a GPU: the exact source elementwise_codegen.cc
// generates is compiled by the system C++ compiler behind tests/support/cuda_host_shim.h into one
// shared object, and each kernel runs every (block, thread) of a launch in turn, with the
// arguments the launcher packs (plan_fused_launch, plan_multi_tensor_launch). What it writes must
// be what evaluate_elementwise_program, the reference, computes for the same inputs: so the index
// arithmetic, broadcast strides, grid-stride loops, task-list slots and variant dispatch are
// proven, not only compiled. Kernels run on the fused units of real training steps' plans and on
// cases aimed at the index arithmetic (rank 5 broadcasts over middle dims, size-1 dims, n not a
// multiple of the block, 64-bit indices, empty and one-element tensors, task lists past capacity).
//
// Launches use 32 or 64 threads a block and a third of the blocks n needs, so every thread goes
// round the grid-stride loop about three times. Buffers end at an inaccessible page: a kernel that
// reads or writes past a tensor faults, and the fault is reported naming the kernel. Outputs
// start filled with 0xa5 bytes (no bool, no likely number), so an element no thread writes shows.
#include <gtest/gtest.h>

#if !AMP_HAVE_CUDA
TEST(CudaCodegenHost, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA (nvcc not found): no code generator"; }
#else

#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "backends/cuda/elementwise_codegen.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/schedule.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/onnx_io.h"
#include "graph/ops/elementwise_program_eval.h"
#include "passes/training/training_step.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/test_support.h"

namespace amp::cuda {
namespace {

// Outputs computed through exp, log, tanh, erf, pow, sigmoid or GELU may differ from the reference by
// this many units in the last place of their type (any later op included). Both sides call the
// host's libm, so they agree today (the tally printed says how often the allowance was used). The
// kernels are compiled with -fno-builtin so that this holds for transcendentals of constants too:
// GCC would fold those at compile time, correctly rounded (MPFR), where libm need not be (glibc's
// expf: up to ~0.5 ulp off), and a cancellation after it (1 + tanh in a tanh GELU of a constant
// near -1.5) made that 5 ulps of the output. How far CUDA's own expf
// or erff is from the host's (up to 2 ulp) is a GPU test's question, not this one's. Every other
// output — add, mul, sub, div, sqrt, casts, comparisons, where, min/max, clip — is exactly rounded
// on both sides and must match bit for bit; NaN matches any NaN (the GPU's conversions and
// arithmetic give a canonical NaN, the host keeps payloads).
constexpr int64_t kTranscendentalUlps = 2;

// ---- Host memory standing in for device buffers ------------------------------------------------

using test::GuardedBuffer;

// A kernel's access past a buffer lands here and returns to the launch, which reports it.
sigjmp_buf g_fault_return;

void on_fault(int) { siglongjmp(g_fault_return, 1); }

// Compiles generated kernels into a shared object and launches them on the host.
class HostKernels {
 public:
  ~HostKernels() {
    if (lib_) dlclose(lib_);
  }
  void add(const GeneratedKernel& k) {
    if (names_.insert(k.name).second) kernels_.push_back(k);
  }
  size_t size() const { return kernels_.size(); }

  // Writes each kernel to dir/<name>.cu, includes them into `parts` driver files (each kernel in
  // a namespace of its own: every source defines the same helper functions and structs),
  // compiles the parts in parallel and links them with the shim into one shared object.
  void build(const std::string& tag, int parts = 2) {
    const std::string dir = test::temp_dir(tag), support = test::source_dir() + "/tests/support";
    std::vector<std::string> drivers(static_cast<size_t>(parts));
    for (std::string& d : drivers) d = "#include \"cuda_host_shim.h\"\n";
    drivers[0] +=
        "extern \"C\" float amp_host_cvt_f16_to_f32(unsigned short h) { return amp_f16_to_f32(h); }\n"
        "extern \"C\" unsigned short amp_host_cvt_f32_to_f16(float f) { return amp_f32_to_f16(f); }\n"
        "extern \"C\" unsigned short amp_host_cvt_f32_to_bf16(float f) { return amp_f32_to_bf16(f); }\n";
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const GeneratedKernel& kern = kernels_[k];
      test::write_file(dir + "/" + kern.name + ".cu", kern.source);
      std::string& d = drivers[k % drivers.size()];
      d += "namespace " + kern.name + "_ns {\n#include \"" + kern.name + ".cu\"\n}\n";
      d += "extern \"C\" void " + kern.name + "_host(void** args, unsigned grid, unsigned block) {\n" +
           "  amp_host::launch(&" + kern.name + "_ns::" + kern.name + ", args, grid, block);\n}\n";
    }
    // -ffp-contract=off: no a*b+c contracted into an fma, as NVRTC's --fmad=false. -fno-builtin:
    // libm computes transcendentals of constants too (see kTranscendentalUlps).
    const std::string cxx =
        std::string("'") + AMP_HOST_CXX + "' -std=c++17 -O1 -fPIC -ffp-contract=off -fno-builtin -w -I'" + support + "'";
    std::string cmd = "cd '" + dir + "' && (";
    std::string objects;
    for (size_t p = 0; p < drivers.size(); ++p) {
      const std::string part = "part" + std::to_string(p);
      test::write_file(dir + "/" + part + ".cc", drivers[p]);
      cmd += cxx + " -c " + part + ".cc -o " + part + ".o & ";
      objects += " " + part + ".o";
    }
    cmd += "wait) && for o in" + objects + "; do test -f $o || exit 1; done && " + cxx + " -shared -o kernels.so" +
           objects;
    std::string log;
    const auto start = std::chrono::steady_clock::now();
    const int rc = test::run_command(cmd, &log);
    compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rc != 0)
      throw Error("host compile of " + std::to_string(kernels_.size()) + " kernels failed (" + cmd + "):\n" + log);
    lib_ = dlopen((dir + "/kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) throw Error(std::string("dlopen: ") + dlerror());
  }
  double compile_seconds() const { return compile_seconds_; }

  template <class F>
  F symbol(const std::string& name) const {
    void* s = dlsym(lib_, name.c_str());
    if (!s) throw Error("no symbol " + name + " in the host kernels");
    return reinterpret_cast<F>(s);
  }

  // kernel<<<grid, block>>>(args), args as cudaLaunchKernel takes them. Error when the kernel
  // touches memory outside its buffers.
  void launch(const std::string& kernel, void** args, unsigned grid, unsigned block) const {
    using Fn = void (*)(void**, unsigned, unsigned);
    const Fn fn = symbol<Fn>(kernel + "_host");
    struct sigaction action {
    }, old_segv{}, old_bus{};
    action.sa_handler = on_fault;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &old_segv);
    sigaction(SIGBUS, &action, &old_bus);
    const bool faulted = sigsetjmp(g_fault_return, 1) != 0;  // 1: the handler's blocked SIGSEGV is restored
    if (!faulted) fn(args, grid, block);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    if (faulted) throw Error("kernel " + kernel + " accessed memory outside its buffers");
  }

 private:
  std::vector<GeneratedKernel> kernels_;
  std::set<std::string> names_;
  void* lib_ = nullptr;
  double compile_seconds_ = 0;
};

// ---- Inputs and comparison ---------------------------------------------------------------------

// Values that exercise rounding: ordinary magnitudes, exact fp16 and bf16 ties, magnitudes from
// below fp16's subnormals to past its largest value, and with `specials` signed zeros,
// infinities and NaN.
float random_value(std::mt19937& rng, bool specials) {
  const uint32_t kind = rng() % 100;
  const uint32_t sign = (rng() & 1u) << 31;
  if (kind < 65) return std::uniform_real_distribution<float>(-4, 4)(rng);
  if (kind < 75)
    return bits_float(sign | ((113u + rng() % 30u) << 23) | ((rng() & 0x3ffu) << 13) | 0x1000u);  // fp16 tie
  if (kind < 82)
    return bits_float(sign | ((100u + rng() % 50u) << 23) | ((rng() & 0x7fu) << 16) | 0x8000u);  // bf16 tie
  if (kind < 95 || !specials) {
    const float m = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), static_cast<int>(rng() % 52) - 30);
    return sign ? -m : m;
  }
  const float special[] = {0.0f,     -0.0f,     INFINITY, -INFINITY, NAN,       65504.0f,
                           65520.0f, -65519.0f, 0x1p-24f, 0x1p-25f,  0x1.8p-25f};
  return special[rng() % (sizeof special / sizeof special[0])];
}

// Random contents for a tensor; a single element (a learning rate, a loss scale, a step count
// read by every element) gets a plain value in [0.25, 2) so it does not turn everything into NaN.
Tensor random_tensor(DType t, const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor x(t, dims);
  const bool one = x.numel() == 1;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = one ? std::uniform_real_distribution<float>(0.25f, 2.0f)(rng) : random_value(rng, true);
    switch (t) {
      case DType::kFloat:
        x.mutable_as<float>()[i] = v;
        break;
      case DType::kFloat16:  // a fifth raw bit patterns: every kind of fp16, NaN payloads included
        x.mutable_as<uint16_t>()[i] = !one && rng() % 5 == 0 ? static_cast<uint16_t>(rng()) : fp32_to_fp16(v);
        break;
      case DType::kBFloat16:
        x.mutable_as<uint16_t>()[i] = !one && rng() % 5 == 0 ? static_cast<uint16_t>(rng()) : fp32_to_bf16(v);
        break;
      case DType::kBool:
        x.mutable_as<uint8_t>()[i] = static_cast<uint8_t>(rng() & 1u);
        break;
      default:
        throw Error("no random " + std::string(dtype_name(t)));
    }
  }
  return x;
}

// Per output of p: does it depend on a transcendental function?
std::vector<bool> transcendental_outputs(const ElementwiseProgram& p) {
  std::vector<bool> t(p.instrs.size(), false);
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const ElemOp op = p.instrs[k].op;
    t[k] = op == ElemOp::kExp || op == ElemOp::kLog || op == ElemOp::kTanh || op == ElemOp::kErf ||
           op == ElemOp::kPow || op == ElemOp::kSigmoid || op == ElemOp::kGelu || op == ElemOp::kGeluTanh ||
           op == ElemOp::kGeluGrad || op == ElemOp::kGeluTanhGrad;
    for (int a : p.instrs[k].args) t[k] = t[k] || t[static_cast<size_t>(a)];
  }
  std::vector<bool> out;
  for (int o : p.outputs) out.push_back(t[static_cast<size_t>(o)]);
  return out;
}

// Element i of a float, fp16, bf16 or bool tensor's bytes as (bits, is NaN, position on a line
// where neighbouring values are one apart).
struct Element {
  uint32_t bits;
  bool nan;
  int64_t ordinal;
};
Element element(DType t, const unsigned char* bytes, int64_t i) {
  uint32_t bits = 0;
  int width = 32;
  switch (t) {
    case DType::kFloat:
      std::memcpy(&bits, bytes + 4 * i, 4);
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      bits = h;
      width = 16;
      break;
    }
    default:
      return {bytes[i], false, bytes[i]};
  }
  const uint32_t sign = 1u << (width - 1), magnitude = bits & (sign - 1);
  const uint32_t inf = t == DType::kFloat ? 0x7f800000u : t == DType::kFloat16 ? 0x7c00u : 0x7f80u;
  return {bits, magnitude > inf, (bits & sign) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude)};
}

std::string show(DType t, const Element& e) {
  char buf[64];
  const float v = t == DType::kFloat      ? bits_float(e.bits)
                  : t == DType::kFloat16  ? fp16_to_fp32(static_cast<uint16_t>(e.bits))
                  : t == DType::kBFloat16 ? bf16_to_fp32(static_cast<uint16_t>(e.bits))
                                          : static_cast<float>(e.bits);
  std::snprintf(buf, sizeof buf, "0x%0*x (%.9g)",
                t == DType::kFloat  ? 8
                : t == DType::kBool ? 2
                                    : 4,
                e.bits, static_cast<double>(v));
  return buf;
}

struct Tally {
  size_t kernels = 0, launches = 0, elements = 0, tolerated = 0;
  int64_t worst_ulps = 0;
};

// Compares one output with the reference element by element; prints the first few mismatches.
void expect_output_matches(const std::string& what, const std::string& kernel, size_t output, const Tensor& want,
                           const unsigned char* got, bool transcendental, Tally& tally) {
  size_t mismatches = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const Element w = element(want.dtype, want.data(), i), g = element(want.dtype, got, i);
    ++tally.elements;
    if (w.bits == g.bits || (w.nan && g.nan)) continue;
    const int64_t ulps = std::llabs(w.ordinal - g.ordinal);
    if (transcendental && !w.nan && !g.nan && ulps <= kTranscendentalUlps) {
      ++tally.tolerated;
      tally.worst_ulps = std::max(tally.worst_ulps, ulps);
      continue;
    }
    if (++mismatches <= 5)
      ADD_FAILURE() << what << "\n  kernel " << kernel << ", output " << output << " (" << dtype_name(want.dtype)
                    << "), element " << i << " of " << want.numel() << ": got " << show(want.dtype, g) << ", expected "
                    << show(want.dtype, w) << (transcendental ? " (beyond the transcendental allowance)" : "");
  }
  if (mismatches > 5)
    ADD_FAILURE() << what << ": kernel " << kernel << ", output " << output << ": " << mismatches << " of "
                  << want.numel() << " elements differ";
}

// ---- Cases: a kernel, its launch, inputs and the reference's outputs --------------------------

constexpr unsigned char kUnwritten = 0xa5;

// Blocks for a grid-stride loop that goes round about three times.
unsigned host_grid(int64_t n, unsigned block) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n + 3 * block - 1) / (3 * block)));
}

struct Case {
  std::string what;
  GeneratedKernel kernel;
  std::vector<Tensor> inputs;    // every operand, in the launcher's order
  std::vector<Tensor> expected;  // every output, likewise
  std::vector<bool> transcendental;
  unsigned block = 32;
  // Launches the kernel over device-like buffers of the inputs and outputs; returns the launches.
  std::function<size_t(const HostKernels&, const Case&, const std::vector<const void*>&, const std::vector<void*>&)>
      run;
};

// How a case runs one fused launch: its kernel over the launch's arguments.
std::function<size_t(const HostKernels&, const Case&, const std::vector<const void*>&, const std::vector<void*>&)>
run_launch(std::shared_ptr<FusedLaunch> launch) {
  return [launch](const HostKernels& hk, const Case& self, const std::vector<const void*>& ins,
                  const std::vector<void*>& outs) -> size_t {
    // The launcher skips n = 0; run it anyway: the kernel must not touch its (empty) buffers.
    std::vector<void*> args = launch->args(ins, outs);
    hk.launch(self.kernel.name, args.data(), host_grid(launch->n, self.block), self.block);
    return 1;
  };
}

Case fused_case(const std::string& what, const ElementwiseProgram& p, const std::vector<std::vector<int64_t>>& in_dims,
                std::mt19937& rng, bool wide_index = false, unsigned block = 32) {
  Case c;
  c.what = what;
  c.block = block;
  for (size_t k = 0; k < in_dims.size(); ++k) c.inputs.push_back(random_tensor(p.input_dtypes[k], in_dims[k], rng));
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(&t);
  c.expected = evaluate_elementwise_program(p, in, what);
  c.transcendental = transcendental_outputs(p);
  std::vector<std::vector<int64_t>> out_dims;
  for (const Tensor& t : c.expected) out_dims.push_back(t.dims);
  auto launch = std::make_shared<FusedLaunch>(plan_fused_launch(p, in_dims, out_dims));
  if (wide_index) launch->kernel = generate_elementwise_kernel(p, launch->indexing, true);
  c.kernel = launch->kernel;
  c.run = run_launch(launch);
  return c;
}

// A row-major tensor stored channels-last (TensorDesc::channels_last): N, spatial..., C.
Tensor stored_channels_last(const Tensor& t) {
  cuda::TensorDesc d{t.dtype, t.dims};
  d.channels_last = true;
  const std::vector<int64_t> st = d.strides();
  Tensor out(t.dtype, t.dims);
  const size_t elem = dtype_size(t.dtype);
  std::vector<int64_t> idx(t.dims.size(), 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t at = 0;
    for (size_t k = 0; k < idx.size(); ++k) at += idx[k] * st[k];
    std::memcpy(out.mutable_data() + at * elem, t.data() + i * elem, elem);
    for (size_t k = idx.size(); k-- > 0;)
      if (++idx[k] < t.dims[k]) break;
      else idx[k] = 0;
  }
  return out;
}

// fused_case over operands stored in layouts of their own: the inputs marked in_cl are given to
// the kernel channels-last, and the outputs are expected channels-last when out_cl.
Case layout_case(const std::string& what, const ElementwiseProgram& p, const std::vector<std::vector<int64_t>>& in_dims,
                 const std::vector<bool>& in_cl, bool out_cl, std::mt19937& rng) {
  Case c;
  c.what = what;
  std::vector<Tensor> row_major;
  for (size_t k = 0; k < in_dims.size(); ++k) row_major.push_back(random_tensor(p.input_dtypes[k], in_dims[k], rng));
  std::vector<const Tensor*> in;
  for (const Tensor& t : row_major) in.push_back(&t);
  const std::vector<Tensor> expected = evaluate_elementwise_program(p, in, what);
  c.transcendental = transcendental_outputs(p);
  std::vector<cuda::TensorDesc> descs;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    descs.push_back({p.input_dtypes[k], in_dims[k]});
    descs.back().channels_last = in_cl[k];
    c.inputs.push_back(in_cl[k] ? stored_channels_last(row_major[k]) : row_major[k]);
  }
  for (const Tensor& t : expected) {
    descs.push_back({t.dtype, t.dims});
    descs.back().channels_last = out_cl;
    c.expected.push_back(out_cl ? stored_channels_last(t) : t);
  }
  std::vector<const cuda::TensorDesc*> in_desc, out_desc;
  for (size_t k = 0; k < descs.size(); ++k) (k < in_dims.size() ? in_desc : out_desc).push_back(&descs[k]);
  auto launch = std::make_shared<FusedLaunch>(plan_fused_launch(p, in_desc, out_desc));
  c.kernel = launch->kernel;
  c.run = run_launch(launch);
  return c;
}

// Groups running programs[variant_of_group[g]] on random inputs of dims in_dims_of_group[g].
Case multi_tensor_case(const std::string& what, const std::vector<ElementwiseProgram>& programs,
                       const std::vector<int>& variant_of_group,
                       const std::vector<std::vector<std::vector<int64_t>>>& in_dims_of_group, std::mt19937& rng,
                       bool wide_index = false, unsigned block = 32) {
  Case c;
  c.what = what;
  c.block = block;
  std::vector<std::vector<int64_t>> in_dims, out_dims;
  for (size_t g = 0; g < variant_of_group.size(); ++g) {
    const ElementwiseProgram& p = programs[static_cast<size_t>(variant_of_group[g])];
    std::vector<const Tensor*> in;
    const size_t first = c.inputs.size();
    for (size_t k = 0; k < p.input_dtypes.size(); ++k) {
      in_dims.push_back(in_dims_of_group[g][k]);
      c.inputs.push_back(random_tensor(p.input_dtypes[k], in_dims_of_group[g][k], rng));
    }
    for (size_t k = first; k < c.inputs.size(); ++k) in.push_back(&c.inputs[k]);
    for (Tensor& t : evaluate_elementwise_program(p, in, what)) {
      out_dims.push_back(t.dims);
      c.expected.push_back(std::move(t));
    }
    for (bool t : transcendental_outputs(p)) c.transcendental.push_back(t);
  }
  auto launch =
      std::make_shared<MultiTensorLaunch>(plan_multi_tensor_launch(programs, variant_of_group, in_dims, out_dims));
  if (wide_index) {
    std::vector<MultiTensorVariant> variants;
    for (size_t v = 0; v < programs.size(); ++v) variants.push_back({&programs[v], launch->indexing[v]});
    const MultiTensorKernel wide = generate_multi_tensor_kernel(variants, true);
    EXPECT_EQ(wide.words_per_slot(), launch->mt.words_per_slot());
    EXPECT_EQ(wide.capacity, launch->mt.capacity);
    launch->mt = wide;
  }
  c.kernel = launch->mt.kernel;
  c.run = [launch](const HostKernels& hk, const Case& self, const std::vector<const void*>& ins,
                   const std::vector<void*>& outs) -> size_t {
    size_t launches = 0;
    for (size_t first = 0; first < launch->groups(); first += static_cast<size_t>(launch->mt.capacity), ++launches) {
      std::vector<uint64_t> words = launch->task_list(first, ins, outs);
      void* args[] = {words.data()};
      hk.launch(self.kernel.name, args, host_grid(launch->largest, self.block), self.block);
    }
    return launches;
  };
  return c;
}

// Compiles every case's kernel, runs each case and compares all it wrote with the reference, twice:
// over buffers that end where a guard page begins (a read or write past the end faults; most start
// unaligned, so the kernels compute one element at a time), and over buffers that start 16-byte
// aligned, rounded up to 16 bytes (the kernels without broadcast inputs take 8 elements a thread,
// then the n % 8 left; the bytes past each output must stay unwritten). Returns how many aligned
// runs had a vector kernel, n % 8 != 0 and n >= 16: the vector loop and its tail both ran.
size_t run_cases(const std::string& tag, const std::vector<Case>& cases) {
  HostKernels hk;
  for (const Case& c : cases) hk.add(c.kernel);
  const auto start = std::chrono::steady_clock::now();
  hk.build(tag);
  Tally tally;
  tally.kernels = hk.size();
  size_t vector_with_tail = 0;
  auto padded = [](size_t bytes, bool aligned) { return aligned ? (bytes + 15) / 16 * 16 : bytes; };
  for (const bool aligned : {false, true})
    for (const Case& c : cases) {
      const std::string what = c.what + (aligned ? " (aligned buffers)" : "");
      std::vector<std::unique_ptr<GuardedBuffer>> in_buf, out_buf;
      std::vector<const void*> ins;
      std::vector<void*> outs;
      for (const Tensor& t : c.inputs) {
        in_buf.push_back(std::make_unique<GuardedBuffer>(padded(t.nbytes(), aligned), 0));
        if (t.nbytes()) std::memcpy(in_buf.back()->data(), t.data(), t.nbytes());
        ins.push_back(in_buf.back()->data());
      }
      for (const Tensor& t : c.expected) {
        out_buf.push_back(std::make_unique<GuardedBuffer>(padded(t.nbytes(), aligned), kUnwritten));
        outs.push_back(out_buf.back()->data());
      }
      try {
        tally.launches += c.run(hk, c, ins, outs);
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      for (size_t k = 0; k < c.inputs.size(); ++k)
        EXPECT_TRUE(!c.inputs[k].nbytes() || !std::memcmp(in_buf[k]->data(), c.inputs[k].data(), c.inputs[k].nbytes()))
            << what << ": kernel " << c.kernel.name << " wrote into input " << k;
      for (size_t k = 0; k < c.expected.size(); ++k) {
        expect_output_matches(what, c.kernel.name, k, c.expected[k], static_cast<const unsigned char*>(out_buf[k]->data()),
                              c.transcendental[k], tally);
        const auto* bytes = static_cast<const unsigned char*>(out_buf[k]->data());
        for (size_t b = c.expected[k].nbytes(); b < out_buf[k]->size(); ++b)
          if (bytes[b] != kUnwritten) {
            ADD_FAILURE() << what << ": kernel " << c.kernel.name << " wrote past output " << k << " (byte " << b << ")";
            break;
          }
      }
      const int64_t n = c.expected.empty() ? 0 : c.expected[0].numel();
      vector_with_tail += aligned && c.kernel.vectorized && n % 8 != 0 && n >= 16;
    }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "[ host     ] %s: %zu cases (each over guarded and aligned buffers), %zu kernels (compiled in %.1f s), %zu launches, "
      "%zu elements compared, %zu within %lld ulp of a transcendental (worst %lld), %zu aligned runs with a vector loop "
      "and a tail, %.1f s in all\n",
      tag.c_str(), cases.size(), tally.kernels, hk.compile_seconds(), tally.launches, tally.elements, tally.tolerated,
      static_cast<long long>(kTranscendentalUlps), static_cast<long long>(tally.worst_ulps), vector_with_tail, seconds);
  return vector_with_tail;
}

// ---- Real programs: every fused unit of training steps' plans ---------------------------------

using test::mixed_precision_step;

// The plan for feeds of N=2, T=8 (other symbols 2), the initial state, and every output and state
// update as targets: what cuda_schedule_test.cc plans.
ShapePlan plan_step(const Schedule& s, std::vector<Tensor>& feeds) {
  feeds = test::zero_feeds(s);
  return test::plan_with(s, feeds);
}

// One case per fused unit of the step's plan, with random inputs of the plan's types and dims.
void add_plan_cases(const char* model, DType precision, std::mt19937& rng, std::vector<Case>& cases,
                    std::map<std::string, int>& seen) {
  TrainingStep step = mixed_precision_step(model, precision);
  const Schedule s(step.model, test::step_options(step));
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_step(s, feeds);
  const std::string prefix = std::string(model) + " " + std::string(dtype_name(precision)) + ": ";
  for (const Unit* u : p.order) {
    const std::string what = prefix + u->kind + " at " + u->where;
    auto dims_of = [&](const std::vector<int>& values) {
      std::vector<std::vector<int64_t>> dims;
      for (int v : values) dims.push_back(p.desc.at(static_cast<size_t>(v)).dims);
      return dims;
    };
    if (const auto* op = dynamic_cast<const FusedElementwiseOp*>(u->op.get())) {
      std::vector<DType> types;
      for (int v : u->in) types.push_back(p.desc[static_cast<size_t>(v)].dtype);
      EXPECT_EQ(types, op->program().input_dtypes) << what;
      cases.push_back(fused_case(what, op->program(), dims_of(u->in), rng));
      ++seen["fused"];
    } else if (const auto* mt = dynamic_cast<const MultiTensorFusedOp*>(u->op.get())) {
      std::vector<std::vector<std::vector<int64_t>>> in_dims;
      size_t at = 0;
      for (int v : mt->variant_of_group()) {
        const size_t inputs = mt->programs()[static_cast<size_t>(v)].input_dtypes.size();
        in_dims.push_back(dims_of(
            std::vector<int>(u->in.begin() + static_cast<long>(at), u->in.begin() + static_cast<long>(at + inputs))));
        at += inputs;
      }
      ASSERT_EQ(at, u->in.size()) << what;
      cases.push_back(multi_tensor_case(what, mt->programs(), mt->variant_of_group(), in_dims, rng));
      ++seen[mt->programs().size() > 1 ? "multi-tensor, several programs" : "multi-tensor"];
    } else {
      continue;
    }
    // The plan's output dims are the reference's.
    const Case& c = cases.back();
    ASSERT_EQ(c.expected.size(), u->out.size()) << what;
    for (size_t k = 0; k < u->out.size(); ++k) {
      EXPECT_EQ(c.expected[k].dims, p.desc[static_cast<size_t>(u->out[k])].dims) << what << " output " << k;
      EXPECT_EQ(c.expected[k].dtype, p.desc[static_cast<size_t>(u->out[k])].dtype) << what << " output " << k;
    }
    for (const Tensor& t : c.inputs) {
      ++seen["input: " + std::string(dtype_name(t.dtype))];
      if (t.numel() == 1)
        ++seen["input: scalar"];
      else if (t.dims != c.expected[0].dims)
        ++seen["input: broadcast"];
    }
    for (const Tensor& t : c.expected) ++seen["output: " + std::string(dtype_name(t.dtype))];
    if (c.expected.size() > 1) ++seen["several outputs"];
  }
}

TEST(CudaCodegenHost, EveryFusedUnitOfTrainingStepsRunsAsItsReferenceComputes) {
  std::mt19937 rng(11);
  std::vector<Case> cases;
  std::map<std::string, int> seen;
  add_plan_cases("gpt.train.onnx", DType::kFloat16, rng, cases, seen);
  add_plan_cases("gpt.train.onnx", DType::kBFloat16, rng, cases, seen);
  add_plan_cases("cnn.train.onnx", DType::kFloat16, rng, cases, seen);
  add_plan_cases("mlp.train.onnx", DType::kBFloat16, rng, cases, seen);
  std::string summary;
  for (const auto& [k, n] : seen) summary += (summary.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::printf("[ host     ] plans: %s\n", summary.c_str());
  // What the plans must have exercised. No generated kernel of these steps writes a bool any more:
  // the ReLU masks are written as bits by the BatchNorm+ReLU units and cuBLASLt's epilogues; bool
  // outputs are exercised by the random and every-op programs below.
  for (const char* k : {"fused", "multi-tensor, several programs", "input: scalar", "input: broadcast",
                        "input: float16", "input: bfloat16", "input: float", "input: bool", "output: float16",
                        "output: bfloat16", "output: float", "several outputs"})
    EXPECT_GT(seen[k], 0) << k << "\n" << summary;
  EXPECT_GE(run_cases("codegen-host-plans", cases), 1u);
}

// ---- Targeted cases ----------------------------------------------------------------------------

ElementwiseProgram parse(const std::string& text) { return ElementwiseProgram::parse(text); }

// x * bf16 row * fp32 column + scalar, masked, in four output types: rank 5 with broadcasts over
// middle dims, a lower-rank input, a scalar and a bool mask.
const char* kMiddleBroadcast = R"(inputs float16 bfloat16 float bool float
min_rank 0
%0 = Input 0 : float16
%1 = Input 1 : bfloat16
%2 = Input 2 : float
%3 = Input 3 : bool
%4 = Input 4 : float
%5 = Cast %0 : float
%6 = Cast %1 : float
%7 = Mul %5 %6 : float
%8 = Add %7 %2 : float
%9 = Mul %8 %4 : float
%10 = Cast %9 : float16
%11 = Constant -inf : float16
%12 = Where %3 %10 %11 : float16
%13 = Greater %8 %2 : bool
%14 = Cast %9 : bfloat16
return %12 %13 %14 %9
)";

// Exactly rounded ops over broadcasts into a space with a size-1 dim.
const char* kSizeOneDim = R"(inputs float float float bfloat16 float16
min_rank 0
%0 = Input 0 : float
%1 = Input 1 : float
%2 = Input 2 : float
%3 = Input 3 : bfloat16
%4 = Input 4 : float16
%5 = Sub %0 %1 : float
%6 = Abs %5 : float
%7 = Sqrt %6 : float
%8 = Div %7 %2 : float
%9 = Cast %3 : float
%10 = Max %8 %9 : float
%11 = Min %10 %0 : float
%12 = Clip %11 %1 %2 : float
%13 = Cast %12 : bfloat16
%14 = Cast %4 : float
%15 = Mul %14 %11 : float
%16 = Cast %15 : float16
%17 = Neg %16 : float16
%18 = Floor %17 : float16
return %13 %8 %18
)";

// models/gpt.onnx's bias Add + GELU in fp16, its pre-activation kept as an output.
const char* kBiasGelu = R"(inputs float16 float16
min_rank 0
%0 = Input 0 : float16
%1 = Input 1 : float16
%2 = Add %1 %0 : float16
%3 = Constant 0x1.6a09e6p+0 : float16
%4 = Div %2 %3 : float16
%5 = Erf %4 : float16
%6 = Constant 0x1p+0 : float16
%7 = Add %5 %6 : float16
%8 = Mul %2 %7 : float16
%9 = Constant 0x1p-1 : float16
%10 = Mul %8 %9 : float16
return %2 %10
)";

// Every storage type read and written: fp16, bf16, float and bool in, each computed from all four.
const char* kAllStorageTypes = R"(inputs float16 bfloat16 float bool
min_rank 0
%0 = Input 0 : float16
%1 = Input 1 : bfloat16
%2 = Input 2 : float
%3 = Input 3 : bool
%4 = Cast %0 : float
%5 = Cast %1 : float
%6 = Add %4 %5 : float
%7 = Mul %6 %2 : float
%8 = Where %3 %7 %2 : float
%9 = Cast %8 : float16
%10 = Cast %8 : bfloat16
%11 = Greater %8 %2 : bool
return %8 %9 %10 %11
)";

// MobileNetV3's squeeze-and-excite gate and activation in fp16: a channel bias, HardSigmoid with
// nn.Hardsigmoid's alpha 1/6 as the gate, HardSwish of the product.
const char* kBiasHardSwish = R"(inputs float16 float16
min_rank 0
%0 = Input 0 : float16
%1 = Input 1 : float16
%2 = Add %1 %0 : float16
%3 = HardSigmoid %2 0x1.555556p-3 0x1p-1 : float16
%4 = Mul %2 %3 : float16
%5 = HardSwish %4 : float16
return %3 %5
)";

// An inlined [1,1] constant makes the space rank 2 for a rank-1 input.
const char* kMinRank = R"(inputs bfloat16
min_rank 2
%0 = Input 0 : bfloat16
%1 = Constant 0x1.8p+1 : bfloat16
%2 = Mul %0 %1 : bfloat16
%3 = Sigmoid %2 : bfloat16
return %3
)";

// Two inputs that broadcast each other: neither has the space's shape.
const char* kRowMinusColumn = R"(inputs float float
min_rank 0
%0 = Input 0 : float
%1 = Input 1 : float
%2 = Sub %0 %1 : float
%3 = Cast %2 : float16
return %3
)";

// AdamW on an fp32 master weight from a gradient of type G (the schedule's optimizer program, in
// short): inputs w, g, m, v, lr (a scalar), inverse loss scale (a scalar); outputs w, m, v.
std::string adamw(const char* g) {
  return std::string("inputs float ") + g + R"( float float float float
min_rank 0
%0 = Input 0 : float
%1 = Input 1 : )" +
         g + R"(
%2 = Input 2 : float
%3 = Input 3 : float
%4 = Input 4 : float
%5 = Input 5 : float
%6 = Cast %1 : float
%7 = Mul %6 %5 : float
%8 = Constant 0x1.ccccccp-1 : float
%9 = Mul %2 %8 : float
%10 = Constant 0x1.99999ap-4 : float
%11 = Mul %7 %10 : float
%12 = Add %9 %11 : float
%13 = Constant 0x1.ff7ceep-1 : float
%14 = Mul %3 %13 : float
%15 = Mul %7 %7 : float
%16 = Constant 0x1.0624dep-10 : float
%17 = Mul %15 %16 : float
%18 = Add %14 %17 : float
%19 = Sqrt %18 : float
%20 = Constant 0x1.0c6f7ap-20 : float
%21 = Add %19 %20 : float
%22 = Div %12 %21 : float
%23 = Mul %22 %4 : float
%24 = Sub %0 %23 : float
return %24 %12 %18
)";
}

using test::every_op_program;

TEST(CudaCodegenHost, TargetedIndexingCasesRunAsTheirReferenceComputes) {
  std::mt19937 rng(23);
  std::vector<Case> cases;
  const ElementwiseProgram middle = parse(kMiddleBroadcast), size_one = parse(kSizeOneDim), gelu = parse(kBiasGelu),
                           min_rank = parse(kMinRank), every = every_op_program();
  const std::vector<std::vector<int64_t>> middle_dims = {
      {2, 3, 4, 5, 6}, {2, 1, 4, 1, 6}, {4, 1, 6}, {1, 3, 1, 5, 1}, {}};
  for (bool wide : {false, true}) {
    const std::string w = wide ? " (64-bit indices)" : "";
    cases.push_back(fused_case("rank 5, broadcasts over middle dims" + w, middle, middle_dims, rng, wide));
    cases.push_back(fused_case("rank 4 with a size-1 dim" + w, size_one,
                               {{3, 1, 5, 7}, {1, 1, 5, 1}, {7}, {3, 1, 1, 1}, {1, 1, 7}}, rng, wide, 64));
    cases.push_back(
        fused_case("every op, broadcast rows and columns" + w, every, {{4, 33}, {33}, {4, 1}, {4, 33}}, rng, wide));
    cases.push_back(
        fused_case("every op, all full-size, n = 1000" + w, every, {{1000}, {1000}, {1000}, {1000}}, rng, wide, 64));
  }
  EXPECT_NE(cases[0].kernel.source.find("typedef unsigned int idx_t;"), std::string::npos);
  EXPECT_NE(cases[4].kernel.source.find("typedef long long idx_t;"), std::string::npos);
  // The vector loop (8 elements a thread where the pointers are aligned): every storage type in
  // and out, sizes under, at and past 8 with and without a tail, a scalar input beside them; the
  // every-op program is too large for it (registers).
  const ElementwiseProgram all_types = parse(kAllStorageTypes);
  for (int64_t n : {int64_t{7}, int64_t{8}, int64_t{9}, int64_t{17}, int64_t{1003}}) {
    cases.push_back(fused_case("every storage type, n = " + std::to_string(n) + " (vector loop)", all_types,
                               {{n}, {n}, {n}, {n}}, rng, false, n > 100 ? 64 : 32));
    EXPECT_TRUE(cases.back().kernel.vectorized);
  }
  cases.push_back(fused_case("every storage type, the float input a scalar (vector loop)", all_types,
                             {{1003}, {1003}, {}, {1003}}, rng, true));
  cases.push_back(fused_case("bias + GELU, a scalar bias over 1003 elements (vector loop)", gelu, {{1}, {1003}}, rng));
  EXPECT_TRUE(cases.back().kernel.vectorized);
  EXPECT_NE(cases.back().kernel.source.find("amp_load8(in1 + 8 * g, vin1);"), std::string::npos);
  EXPECT_FALSE(cases[0].kernel.vectorized) << "broadcast strides: one element at a time";
  EXPECT_FALSE(cases[3].kernel.vectorized) << "every op: too large for eight elements in registers";
  cases.push_back(fused_case("bias + GELU over [8,125], fp16", gelu, {{125}, {8, 125}}, rng));
  cases.push_back(fused_case("bias + GELU, one element", gelu, {{1}, {1}}, rng));
  cases.push_back(fused_case("bias + GELU, rank 0", gelu, {{}, {}}, rng));
  cases.push_back(fused_case("bias + GELU, no element", gelu, {{125}, {0, 125}}, rng));
  cases.push_back(fused_case("bias + HardSigmoid gate + HardSwish over [8,125], fp16", parse(kBiasHardSwish),
                             {{125}, {8, 125}}, rng));
  cases.push_back(fused_case("min_rank 2 over a rank-1 input", min_rank, {{77}}, rng));
  cases.push_back(
      fused_case("a [1,7] row minus a [5,1,1,2,1] column", parse(kRowMinusColumn), {{1, 7}, {5, 1, 1, 2, 1}}, rng));
  // Channels-last operands (backends/cuda/channels_last.h): a per-channel bias over an NHWC
  // activation, written NHWC (inside a region), written row-major and read row-major into NHWC
  // (the transposes at a region's edge); every op with inputs stored each its own way.
  const std::vector<std::vector<int64_t>> bias_dims = {{5, 1, 1}, {2, 5, 3, 4}};
  cases.push_back(layout_case("bias + GELU, NHWC in and out", gelu, bias_dims, {false, true}, true, rng));
  cases.push_back(layout_case("bias + GELU, NHWC in, row-major out", gelu, bias_dims, {false, true}, false, rng));
  cases.push_back(layout_case("bias + GELU, row-major in, NHWC out", gelu, bias_dims, {false, false}, true, rng));
  cases.push_back(layout_case("bias + GELU, rank 5 NHWC in, NHWC out", gelu, {{1, 3, 1, 1, 2}, {2, 3, 2, 4, 2}},
                              {true, true}, true, rng));
  cases.push_back(layout_case("every op, mixed layouts", every, {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}},
                              {true, false, false, true}, true, rng));
  cases.push_back(layout_case("every op, mixed layouts, row-major out", every,
                              {{2, 3, 4, 5}, {1, 3, 1, 1}, {2, 3, 4, 5}, {2, 3, 4, 5}}, {true, true, true, false},
                              false, rng));

  // Multi-tensor: AdamW for fp16 and fp32 gradients in one launch, tensors of many sizes (0 and 1
  // among them), more groups than a task list holds.
  const std::vector<ElementwiseProgram> two = {parse(adamw("float16")), parse(adamw("float"))};
  std::vector<int> variant_of_group;
  std::vector<std::vector<std::vector<int64_t>>> in_dims;
  const std::vector<std::vector<int64_t>> sizes = {{1000}, {1}, {0}, {37, 3}, {64}, {2, 257}, {33}, {0, 5}, {1, 1}};
  for (size_t g = 0; g < 60; ++g) {
    const std::vector<int64_t> d =
        g < sizes.size() ? sizes[g] : std::vector<int64_t>{static_cast<int64_t>(rng() % 300)};
    variant_of_group.push_back(static_cast<int>(g % 3 == 0));
    in_dims.push_back({d, d, d, d, {}, {}});
  }
  for (bool wide : {false, true}) {
    const std::string w = wide ? " (64-bit indices)" : "";
    cases.push_back(
        multi_tensor_case("AdamW, two programs, 60 tensors" + w, two, variant_of_group, in_dims, rng, wide));
    // One program (no variant word), the every-op program's many outputs, a few sizes.
    std::vector<std::vector<std::vector<int64_t>>> every_dims;
    for (const std::vector<int64_t>& d : sizes) every_dims.push_back({d, d, {}, d});
    cases.push_back(multi_tensor_case("every op, one program, 9 tensors" + w, {every},
                                      std::vector<int>(sizes.size(), 0), every_dims, rng, wide, 64));
  }
  const std::vector<InputIndexing> ix = {InputIndexing::kSame, InputIndexing::kSame,   InputIndexing::kSame,
                                         InputIndexing::kSame, InputIndexing::kScalar, InputIndexing::kScalar};
  const MultiTensorKernel mt = generate_multi_tensor_kernel({{&two[0], ix}, {&two[1], ix}});
  EXPECT_TRUE(mt.has_variant);
  EXPECT_LT(mt.capacity, 60) << "the AdamW case must need more than one task list";
  EXPECT_GE(run_cases("codegen-host-targeted", cases), 5u);
}

// The launch merges neighbouring dims that every broadcast input walks as one and drops dims of
// size 1 (fused_elementwise_op.cc, collapse_dims): one division and remainder per element and dim.
TEST(CudaCodegenHost, BroadcastLaunchesMergeTheDimsEveryInputWalksAsOne) {
  const ElementwiseProgram mul = parse("inputs float16 float16\nmin_rank 0\n%0 = Input 0 : float16\n"
                                       "%1 = Input 1 : float16\n%2 = Mul %0 %1 : float16\nreturn %2\n");
  struct Expect {
    std::vector<std::vector<int64_t>> in;
    std::vector<long long> sizes, strides;  // the merged space, and input 1's strides over it
  };
  const Expect cases[] = {
      {{{2, 3, 4, 5}, {2, 3, 1, 1}}, {6, 20}, {1, 0}},     // a squeeze-and-excitation scale
      {{{4, 5, 6}, {6}}, {20, 6}, {0, 1}},                 // a bias over rows
      {{{2, 3, 4}, {2, 1, 4}}, {2, 3, 4}, {4, 0, 1}},      // a middle broadcast: nothing merges
      {{{2, 1, 3, 1, 4}, {1, 1, 3, 1, 1}}, {2, 3, 4}, {0, 1, 0}},  // size-1 dims dropped
  };
  auto dims_text = [](const std::vector<int64_t>& d) {
    std::string t = "[";
    for (size_t k = 0; k < d.size(); ++k) t += (k ? "," : "") + std::to_string(d[k]);
    return t + "]";
  };
  std::mt19937 rng(41);
  std::vector<Case> run;
  for (const Expect& e : cases) {
    const FusedLaunch l = plan_fused_launch(mul, e.in, {e.in[0]});
    ASSERT_EQ(l.indexing[1], InputIndexing::kBroadcast);
    ASSERT_EQ(l.dims.rank, static_cast<int>(e.sizes.size())) << dims_text(e.in[1]);
    for (size_t d = 0; d < e.sizes.size(); ++d) {
      EXPECT_EQ(l.dims.size[d], e.sizes[d]) << dims_text(e.in[1]) << " dim " << d;
      EXPECT_EQ(l.strides[1].stride[d], e.strides[d]) << dims_text(e.in[1]) << " dim " << d;
    }
    run.push_back(fused_case("x * " + dims_text(e.in[1]) + " over " + dims_text(e.in[0]), mul, e.in, rng));
  }
  run_cases("codegen-host-merged-dims", run);
}

// A broadcast input that repeats over the space's innermost dim of a multiple of 8 elements reads
// one offset per run of 8 (kRunOf8) and keeps the vector loop; beside a per-element broadcast, or
// over runs of another length, the kernel walks every element. Each against the CPU evaluation.
TEST(CudaCodegenHost, BroadcastsConstantOverRunsOfEightKeepTheVectorLoop) {
  const ElementwiseProgram mul = parse("inputs float16 float16\nmin_rank 0\n%0 = Input 0 : float16\n"
                                       "%1 = Input 1 : float16\n%2 = Mul %0 %1 : float16\nreturn %2\n");
  const ElementwiseProgram fma = parse("inputs bfloat16 float bfloat16\nmin_rank 0\n%0 = Input 0 : bfloat16\n"
                                       "%1 = Input 1 : float\n%2 = Input 2 : bfloat16\n%3 = Mul %0 %1 : float\n"
                                       "%4 = Add %3 %2 : bfloat16\nreturn %4\n");
  struct Expect {
    const ElementwiseProgram* p;
    std::vector<std::vector<int64_t>> in;
    std::vector<InputIndexing> indexing;
    bool vectorized;
  };
  using I = InputIndexing;
  const Expect cases[] = {
      {&mul, {{2, 3, 4, 4}, {2, 3, 1, 1}}, {I::kSame, I::kRunOf8}, true},       // an SE scale over 4 x 4 planes
      {&mul, {{3, 5, 24}, {1, 5, 1}}, {I::kSame, I::kRunOf8}, true},            // a per-channel scale
      {&mul, {{2, 3, 5, 5}, {2, 3, 1, 1}}, {I::kSame, I::kBroadcast}, false},   // runs of 25
      {&fma, {{4, 6, 8}, {4, 6, 1}, {6, 8}}, {I::kSame, I::kRunOf8, I::kBroadcast}, false},  // [6, 8] repeats over N
      {&fma, {{4, 6, 8}, {4, 6, 1}, {4, 6, 8}}, {I::kSame, I::kRunOf8, I::kSame}, true},
      {&fma, {{4, 6, 8}, {4, 6, 1}, {4, 1, 8}}, {I::kSame, I::kRunOf8, I::kBroadcast}, false},
  };
  std::mt19937 rng(43);
  std::vector<Case> run;
  int k = 0;
  for (const Expect& e : cases) {
    std::vector<int64_t> space = e.in[0];
    const FusedLaunch l = plan_fused_launch(*e.p, e.in, {space});
    EXPECT_EQ(l.indexing, e.indexing) << "case " << k;
    EXPECT_EQ(l.kernel.vectorized, e.vectorized) << "case " << k;
    run.push_back(fused_case("runs of 8, case " + std::to_string(k++), *e.p, e.in, rng));
  }
  run_cases("codegen-host-runs-of-8", run);
}

// A random program over random broadcasts: 1-5 inputs of random types read at full size, with
// leading dims dropped, with size-1 dims, or as scalars, in a space of rank 0-6 (min_rank too);
// 4-16 ops of every kind and constants, each rounded to a random type; 1-3 outputs.
ElementwiseProgram random_program(std::mt19937& rng, std::vector<std::vector<int64_t>>& in_dims) {
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7};
  const DType types[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kBool};
  std::vector<int64_t> space(rng() % 7);
  for (int64_t& d : space) d = sizes[rng() % 6];
  ElementwiseProgram p;
  p.min_rank = static_cast<int>(rng() % (space.size() + 1));
  in_dims.clear();
  for (size_t k = 0, inputs = 1 + rng() % 5; k < inputs; ++k) {
    std::vector<int64_t> d = space;
    switch (rng() % 4) {
      case 0:
        break;
      case 1:
        d.erase(d.begin(), d.begin() + static_cast<long>(rng() % (d.size() + 1)));
        break;
      case 2:
        for (int64_t& x : d) x = rng() % 2 ? x : 1;
        break;
      default:
        d.assign(rng() % (d.size() + 1), 1);
    }
    in_dims.push_back(d);
    p.input_dtypes.push_back(types[rng() % 4]);
    ElemInstr in;
    in.op = ElemOp::kInput;
    in.input = static_cast<int>(k);
    in.dtype = p.input_dtypes.back();
    p.add(in);
  }
  for (size_t k = 0, ops = 4 + rng() % 13; k < ops; ++k) {
    ElemInstr in;
    in.dtype = types[rng() % 8 == 0 ? 3 : rng() % 3];
    if (rng() % 6 == 0) {
      in.op = ElemOp::kConstant;
      in.dtype = types[rng() % 3];
      in.alpha = random_value(rng, false);
    } else {
      in.op = static_cast<ElemOp>(static_cast<int>(ElemOp::kIdentity) + static_cast<int>(rng() % (kNumElemOps - 2)));
      for (int a = 0; a < elem_op_info(in.op).arity; ++a) in.args.push_back(static_cast<int>(rng() % p.instrs.size()));
      in.alpha = std::uniform_real_distribution<float>(-1, 1)(rng);
      in.beta = std::uniform_real_distribution<float>(-1, 1)(rng);
      if (elem_op_info(in.op).yields_bool()) in.dtype = DType::kBool;
    }
    p.add(in);
  }
  for (size_t k = 0, outputs = 1 + rng() % 3; k < outputs; ++k)
    p.outputs.push_back(static_cast<int>(p.instrs.size() - 1 - rng() % std::min<size_t>(p.instrs.size(), 6)));
  p.check();
  return p;
}

TEST(CudaCodegenHost, RandomProgramsOverRandomBroadcastsRunAsTheirReferenceComputes) {
  std::mt19937 rng(31);
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k) {
    std::vector<std::vector<int64_t>> in_dims;
    const ElementwiseProgram p = random_program(rng, in_dims);
    const bool wide = k % 4 == 3;
    cases.push_back(
        fused_case("random program " + std::to_string(k) + (wide ? " (64-bit indices)" : "") + ":\n" + p.to_text(), p,
                   in_dims, rng, wide, k % 2 ? 64 : 32));
  }
  EXPECT_GE(run_cases("codegen-host-random", cases), 1u);
}

// The shim's conversions, written another way than graph/half.h, agree with it on every fp16 and
// bf16 value, on every tie between neighbours and around it, and on random fp32 bit patterns (NaN:
// both NaN, the GPU's being canonical).
TEST(CudaCodegenHost, HostShimConversionsAreTheGpusRoundToNearestEven) {
  HostKernels hk;
  hk.build("codegen-host-shim", 1);
  const auto f16_to_f32 = hk.symbol<float (*)(unsigned short)>("amp_host_cvt_f16_to_f32");
  const auto f32_to_f16 = hk.symbol<unsigned short (*)(float)>("amp_host_cvt_f32_to_f16");
  const auto f32_to_bf16 = hk.symbol<unsigned short (*)(float)>("amp_host_cvt_f32_to_bf16");
  size_t failures = 0;
  auto check16 = [&](const char* what, float f, uint16_t got, uint16_t want, uint16_t inf) {
    const bool both_nan = (got & 0x7fffu) > inf && (want & 0x7fffu) > inf;
    if (got != want && !both_nan && ++failures <= 10)
      ADD_FAILURE() << what << "(" << std::hexfloat << f << " = 0x" << std::hex << float_bits(f) << "): shim 0x" << got
                    << ", graph/half.h 0x" << want;
  };
  auto check = [&](float f) {
    check16("f32_to_f16", f, f32_to_f16(f), fp32_to_fp16(f), 0x7c00u);
    check16("f32_to_bf16", f, f32_to_bf16(f), fp32_to_bf16(f), 0x7f80u);
  };
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h)), want = fp16_to_fp32(static_cast<uint16_t>(h));
    if (float_bits(got) != float_bits(want) && !(std::isnan(got) && std::isnan(want)) && ++failures <= 10)
      ADD_FAILURE() << "f16_to_f32(0x" << std::hex << h << "): shim 0x" << float_bits(got) << ", graph/half.h 0x"
                    << float_bits(want);
    // The value, the ties with its upper neighbour in fp16 and bf16, and one fp32 ulp either side.
    const uint32_t f16 = float_bits(want), bf16 = h << 16;
    for (uint32_t base : {f16, f16 + 0x1000u, bf16, bf16 + 0x8000u})
      for (uint32_t d : {0u, 1u, 0xffffffffu}) check(bits_float(base + d));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) check(bits_float(static_cast<uint32_t>(rng())));
  EXPECT_EQ(failures, 0u);
}

}  // namespace
}  // namespace amp::cuda

#endif
