// The fused-kernel code generator and NVRTC, which need no GPU: every generated kernel compiles for
// sm_80 and sm_90 (the NVRTC log is printed on failure), the source reads each input the way its
// broadcast needs and rounds where the program says, and the compiled-image cache hits in memory
// and on disk. Running the kernels is cuda_fused_kernel_test.cc's job, on a GPU.
#include <gtest/gtest.h>

#if !AMP_HAVE_CUDA
TEST(CudaCodegen, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA (nvcc not found): no code generator"; }
#else

#include <filesystem>
#include <fstream>
#include <regex>

#include "backends/cuda/elementwise_codegen.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "graph/error.h"
#include "graph/ops/elementwise_grouping.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

// x * sigmoid(x) in fp32 between casts from and to `t`.
std::string swish(const char* t) {
  return std::string("inputs ") + t + "\nmin_rank 0\n%0 = Input 0 : " + t +
         "\n%1 = Cast %0 : float\n%2 = Sigmoid %1 : float\n%3 = Mul %1 %2 : float\n%4 = Cast %3 : " + t +
         "\nreturn %4\n";
}
std::string add_relu(const char* t) {
  return std::string("inputs ") + t + " " + t + "\nmin_rank 0\n%0 = Input 0 : " + t + "\n%1 = Input 1 : " + t +
         "\n%2 = Add %0 %1 : " + t + "\n%3 = Relu %2 : " + t + "\nreturn %3\n";
}
// models/gpt.onnx's bias Add + GELU (Div, Erf, Add, Mul, Mul), with its intermediate x kept as an output.
std::string bias_gelu(const char* t) {
  const std::string T = t;
  return "inputs " + T + " " + T + "\nmin_rank 0\n%0 = Input 0 : " + T + "\n%1 = Input 1 : " + T +
         "\n%2 = Add %1 %0 : " + T + "\n%3 = Constant 0x1.6a09e6p+0 : " + T + "\n%4 = Div %2 %3 : " + T +
         "\n%5 = Erf %4 : " + T + "\n%6 = Constant 0x1p+0 : " + T + "\n%7 = Add %5 %6 : " + T +
         "\n%8 = Mul %2 %7 : " + T + "\n%9 = Constant 0x1p-1 : " + T + "\n%10 = Mul %8 %9 : " + T +
         "\nreturn %2 %10\n";
}
std::string masked_scores(const char* t) {
  const std::string T = t;
  return "inputs " + T + " bool\nmin_rank 0\n%0 = Input 0 : " + T + "\n%1 = Input 1 : bool\n%2 = Constant 0x1p-3 : " + T +
         "\n%3 = Mul %0 %2 : " + T + "\n%4 = Constant -inf : " + T + "\n%5 = Where %1 %3 %4 : " + T + "\nreturn %5\n";
}

using test::every_op_program;

void expect_compiles(const GeneratedKernel& k, const std::string& what) {
  for (const char* target : {"sm_80", "sm_90"}) {
    try {
      const CompiledKernelImage img = compile_cuda_source(k.source, k.name, target);
      EXPECT_GT(img.image.size(), 1000u) << what << " " << target;
      EXPECT_EQ(img.target, target);
    } catch (const Error& e) {
      ADD_FAILURE() << what << " for " << target << ": " << e.what() << "\n--- source ---\n" << k.source;
    }
  }
}

TEST(CudaCodegen, FusedGroupsCompileWithNvrtcForSm80AndSm90) {
  const std::vector<std::pair<std::string, std::string>> programs = {
      {"swish fp16", swish("float16")},       {"swish bf16", swish("bfloat16")},
      {"add+relu fp16", add_relu("float16")}, {"add+relu bf16", add_relu("bfloat16")},
      {"bias+gelu fp32", bias_gelu("float")}, {"bias+gelu fp16", bias_gelu("float16")},
      {"bias+gelu bf16", bias_gelu("bfloat16")}, {"masked scores fp16", masked_scores("float16")}};
  for (const auto& [what, text] : programs) {
    const ElementwiseProgram p = ElementwiseProgram::parse(text);
    // Every input read directly, and every input read through broadcast strides.
    expect_compiles(generate_elementwise_kernel(p, std::vector<InputIndexing>(p.input_dtypes.size(), InputIndexing::kSame)), what);
    expect_compiles(generate_elementwise_kernel(p, std::vector<InputIndexing>(p.input_dtypes.size(), InputIndexing::kBroadcast)),
                    what + " broadcast");
  }
  const std::vector<InputIndexing> mixed = {InputIndexing::kSame, InputIndexing::kScalar, InputIndexing::kBroadcast,
                                            InputIndexing::kBroadcast};
  expect_compiles(generate_elementwise_kernel(every_op_program(), mixed), "every op");
  expect_compiles(generate_elementwise_kernel(every_op_program(), mixed, /*wide_index=*/true), "every op, 64-bit index");
  // The same-shape kernels above have the vector loop (8 elements a thread); every op's program
  // is too large for it.
  for (const auto& [what, text] : programs) {
    const ElementwiseProgram p = ElementwiseProgram::parse(text);
    EXPECT_TRUE(generate_elementwise_kernel(p, std::vector<InputIndexing>(p.input_dtypes.size(), InputIndexing::kSame)).vectorized)
        << what;
  }
  EXPECT_FALSE(generate_elementwise_kernel(every_op_program(), {InputIndexing::kSame, InputIndexing::kScalar,
                                                                InputIndexing::kSame, InputIndexing::kSame})
                   .vectorized);
}

TEST(CudaCodegen, SourceReadsEachInputAsItsBroadcastNeedsAndRoundsPerInstruction) {
  const ElementwiseProgram p = ElementwiseProgram::parse(bias_gelu("float16"));
  const GeneratedKernel k = generate_elementwise_kernel(p, {InputIndexing::kSame, InputIndexing::kBroadcast});
  EXPECT_EQ(k.source.find("#include"), std::string::npos) << "NVRTC must not need an include path";
  EXPECT_NE(k.source.find("extern \"C\" __global__ void __launch_bounds__(256) " + k.name + "("), std::string::npos);
  EXPECT_NE(k.source.find("amp_f16_to_f32(in0[i])"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("amp_f16_to_f32(in1[off1])"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("FusedStrides st1"), std::string::npos);
  EXPECT_EQ(k.source.find("FusedStrides st0"), std::string::npos);
  // Seven computed fp16 instructions (Add Div Erf Add Mul Mul, and none for inputs or constants).
  const std::regex round_call("= amp_round_f16\\(");
  EXPECT_EQ(std::distance(std::sregex_iterator(k.source.begin(), k.source.end(), round_call), std::sregex_iterator()), 6);
  // sqrt(2) rounded to fp16 is 1.4140625 = 0x3fb50000 as an fp32 bit pattern.
  EXPECT_NE(k.source.find("__uint_as_float(0x3fb50000u)"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("out0[i] = amp_f32_to_f16(r2);"), std::string::npos);
  EXPECT_NE(k.source.find("out1[i] = amp_f32_to_f16(r10);"), std::string::npos);

  const GeneratedKernel scalar = generate_elementwise_kernel(p, {InputIndexing::kSame, InputIndexing::kScalar});
  EXPECT_NE(scalar.source.find("in1[0]"), std::string::npos);
  EXPECT_EQ(scalar.source.find("rest % dims.size"), std::string::npos) << "no index arithmetic without broadcast";
  EXPECT_NE(scalar.name, k.name) << "a different indexing is a different kernel";
  // Without a broadcast input, the vector loop: the same-shape input loaded 8 at a time, the
  // scalar read at 0, both outputs stored 8 at a time; then the tail one element at a time.
  EXPECT_TRUE(scalar.vectorized);
  EXPECT_FALSE(k.vectorized);
  EXPECT_EQ(k.source.find("vin0"), std::string::npos) << "a broadcast kernel has no vector loop";
  EXPECT_NE(scalar.source.find("if (true && amp_aligned16(in0) && amp_aligned16(out0) && amp_aligned16(out1))"),
            std::string::npos) << scalar.source;
  EXPECT_NE(scalar.source.find("amp_load8(in0 + 8 * g, vin0);"), std::string::npos) << scalar.source;
  EXPECT_EQ(scalar.source.find("vin1"), std::string::npos) << "the scalar is not loaded as a vector";
  EXPECT_NE(scalar.source.find("amp_f16_to_f32(vin0[j])"), std::string::npos);
  EXPECT_NE(scalar.source.find("vout1[j] = amp_f32_to_f16(r10);"), std::string::npos);
  EXPECT_NE(scalar.source.find("amp_store8(out1 + 8 * g, vout1);"), std::string::npos);
  EXPECT_NE(scalar.source.find("for (idx_t i = first + "), std::string::npos) << "the tail";
  EXPECT_NE(scalar.source.find("out1[i] = amp_f32_to_f16(r10);"), std::string::npos);
  EXPECT_EQ(generate_elementwise_kernel(p, {InputIndexing::kSame, InputIndexing::kBroadcast}).name, k.name)
      << "names are deterministic, so caches hit across runs";
  EXPECT_NE(k.source.find("typedef unsigned int idx_t;"), std::string::npos) << "32-bit index arithmetic by default";
  const GeneratedKernel wide = generate_elementwise_kernel(p, {InputIndexing::kSame, InputIndexing::kBroadcast}, true);
  EXPECT_NE(wide.source.find("typedef long long idx_t;"), std::string::npos);
  EXPECT_NE(wide.name, k.name);
  EXPECT_FALSE(needs_wide_index((int64_t{1} << 31) - 1));
  EXPECT_TRUE(needs_wide_index(int64_t{1} << 31));
}

TEST(CudaCodegen, FusionPassGroupsFeedTheGenerator) {
  // A graph through find_elementwise_groups straight into the generator: Cast -> Sigmoid -> Mul -> Cast.
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  const Shape s = Shape::of({4, 8});
  Value* x = g.add_input("x", ValueType::tensor(DType::kBFloat16, s));
  Node* c1 = g.add_node("Cast", {x}, {"x32"});
  c1->set_attr(Attribute::of_int("to", 1));
  c1->output(0)->set_type(ValueType::tensor(DType::kFloat, s));
  Node* sg = g.add_node("Sigmoid", {c1->output(0)}, {"s"});
  sg->output(0)->set_type(ValueType::tensor(DType::kFloat, s));
  Node* mul = g.add_node("Mul", {c1->output(0), sg->output(0)}, {"m"});
  mul->output(0)->set_type(ValueType::tensor(DType::kFloat, s));
  Node* c2 = g.add_node("Cast", {mul->output(0)}, {"y"});
  c2->set_attr(Attribute::of_int("to", 16));
  c2->output(0)->set_type(ValueType::tensor(DType::kBFloat16, s));
  g.add_output(c2->output(0));
  const auto groups = find_elementwise_groups(g, 2);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].program.to_text(), ElementwiseProgram::parse(swish("bfloat16")).to_text());
  expect_compiles(generate_elementwise_kernel(groups[0].program, choose_indexing({{4, 8}}, {4, 8})), "graph swish");
}

TEST(CudaCodegen, MultiTensorKernelsCompileAndFitTheParameterLimit) {
  // An AdamW-like program: master weight and gradient per element, learning rate as a scalar.
  const ElementwiseProgram p = ElementwiseProgram::parse(
      "inputs float float16 float\n%0 = Input 0 : float\n%1 = Input 1 : float16\n%2 = Input 2 : float\n"
      "%3 = Cast %1 : float\n%4 = Mul %2 %3 : float\n%5 = Sub %0 %4 : float\n%6 = Cast %5 : float16\nreturn %5 %6\n");
  const MultiTensorKernel mt = generate_multi_tensor_kernel(p, {InputIndexing::kSame, InputIndexing::kSame, InputIndexing::kScalar});
  EXPECT_EQ(mt.inputs, 3);
  EXPECT_EQ(mt.outputs, 2);
  // Slots of 3 inputs + 2 outputs + a count, 8 bytes each, and the list's count: within 4 KB.
  EXPECT_EQ(mt.capacity, 64);
  EXPECT_LE((static_cast<size_t>(mt.capacity) * 6 + 1) * 8, kKernelParamBytes);
  EXPECT_NE(mt.kernel.source.find("FusedTask task[64];"), std::string::npos) << mt.kernel.source;
  EXPECT_NE(mt.kernel.source.find("in2[0]"), std::string::npos) << "the learning rate is a scalar";
  EXPECT_EQ(mt.kernel.source.find("rest % dims.size"), std::string::npos);
  expect_compiles(mt.kernel, "multi-tensor update");
  EXPECT_THROW(generate_multi_tensor_kernel(p, {InputIndexing::kSame, InputIndexing::kBroadcast, InputIndexing::kScalar}), Error);
}

TEST(CudaCodegen, MultiTensorKernelsRunSeveralProgramsInOneLaunch) {
  // The update of parameters with fp16 gradients and of those with fp32 gradients: one kernel,
  // each tensor set naming its program.
  const ElementwiseProgram half = ElementwiseProgram::parse(
      "inputs float float16 float\n%0 = Input 0 : float\n%1 = Input 1 : float16\n%2 = Input 2 : float\n"
      "%3 = Cast %1 : float\n%4 = Mul %2 %3 : float\n%5 = Sub %0 %4 : float\n%6 = Cast %5 : float16\nreturn %5 %6\n");
  const ElementwiseProgram full = ElementwiseProgram::parse(
      "inputs float float float\n%0 = Input 0 : float\n%1 = Input 1 : float\n%2 = Input 2 : float\n"
      "%3 = Mul %2 %1 : float\n%4 = Sub %0 %3 : float\nreturn %4\n");
  using I = InputIndexing;
  const MultiTensorKernel mt =
      generate_multi_tensor_kernel({{&half, {I::kSame, I::kSame, I::kScalar}}, {&full, {I::kSame, I::kSame, I::kScalar}}});
  EXPECT_TRUE(mt.has_variant);
  EXPECT_EQ(mt.inputs, 3);
  EXPECT_EQ(mt.outputs, 2) << "the larger of the programs' output counts";
  EXPECT_EQ(mt.words_per_slot(), 3 + 2 + 2);
  EXPECT_LE((static_cast<size_t>(mt.capacity) * 7 + 1) * 8, kKernelParamBytes);
  EXPECT_NE(mt.kernel.source.find("unsigned long long variant;"), std::string::npos) << mt.kernel.source;
  EXPECT_NE(mt.kernel.source.find("case 1:"), std::string::npos) << mt.kernel.source;
  EXPECT_NE(mt.kernel.source.find("const unsigned short* __restrict__ in1"), std::string::npos) << "fp16 gradients";
  EXPECT_NE(mt.kernel.source.find("const float* __restrict__ in1"), std::string::npos) << "fp32 gradients";
  expect_compiles(mt.kernel, "two-program multi-tensor update");
  // One program keeps the plain layout: no variant word.
  EXPECT_FALSE(generate_multi_tensor_kernel(full, {I::kSame, I::kSame, I::kScalar}).has_variant);
}

TEST(CudaCodegen, IndexingFollowsTheBroadcast) {
  using I = InputIndexing;
  EXPECT_EQ(choose_indexing({{2, 3, 4}, {4}, {1}, {}, {2, 1, 4}, {1, 3, 4}}, {2, 3, 4}),
            (std::vector<I>{I::kSame, I::kBroadcast, I::kScalar, I::kScalar, I::kBroadcast, I::kBroadcast}));
  EXPECT_EQ(choose_indexing({{3, 4}, {1, 1, 3, 4}}, {1, 1, 3, 4}), (std::vector<I>{I::kSame, I::kSame}))
      << "leading 1s do not move a row-major index";
}

TEST(Nvrtc, TargetsAreRealArchsWhenKnownAndPtxOtherwise) {
  EXPECT_EQ(nvrtc_target_for(80), "sm_80");
  EXPECT_EQ(nvrtc_target_for(90), "sm_90");
  const std::string future = nvrtc_target_for(999);
  EXPECT_EQ(future.rfind("compute_", 0), 0u) << future;
  const ElementwiseProgram p = ElementwiseProgram::parse(add_relu("float16"));
  const GeneratedKernel k = generate_elementwise_kernel(p, {InputIndexing::kSame, InputIndexing::kScalar});
  const CompiledKernelImage ptx = compile_cuda_source(k.source, k.name, "compute_90");
  EXPECT_NE(ptx.image.find(".entry " + k.name), std::string::npos) << "PTX names the kernel";
  EXPECT_NE(ptx.image.find("cvt.rn.f16.f32"), std::string::npos) << "fp16 rounding is one instruction";
  EXPECT_EQ(ptx.image.find("fma.rn.f32"), std::string::npos) << "--fmad=false: no contraction across rounding points";
}

TEST(Nvrtc, CompileErrorsCarryTheLog) {
  try {
    compile_cuda_source("extern \"C\" __global__ void broken() { undefined_thing(); }\n", "broken", "sm_90");
    FAIL() << "compiled nonsense";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_thing"), std::string::npos) << "the NVRTC log is in the message: " << what;
  }
}

// The disk cache is on by default (DeviceContext: ~/.cache/onnx-amp/kernels/DEVICE): a folder that
// cannot be made must cost only the cache, never the run. Here its parent is a regular file.
TEST(Nvrtc, ACacheFolderThatCannotBeMadeLeavesTheCacheInMemory) {
  const std::string dir = test::temp_dir("kernel_cache_blocked");
  const std::string blocker = dir + "/a_file";
  std::ofstream(blocker) << "not a folder";
  const ElementwiseProgram p = ElementwiseProgram::parse(swish("float32"));
  const GeneratedKernel k = generate_elementwise_kernel(p, {InputIndexing::kSame});
  for (int process = 0; process < 2; ++process) {
    KernelImageCache cache(blocker + "/kernels");
    EXPECT_FALSE(cache.get(k.source, k.name, "sm_90").image.empty());
    EXPECT_EQ(cache.compiles(), 1u) << "compiled again: nothing was kept on disk";
    EXPECT_EQ(cache.disk_hits(), 0u);
  }
}

TEST(Nvrtc, CacheHitsInMemoryAndOnDisk) {
  const std::string dir = test::temp_dir("kernel_cache");
  const ElementwiseProgram p = ElementwiseProgram::parse(swish("float16"));
  const GeneratedKernel k = generate_elementwise_kernel(p, {InputIndexing::kSame});
  std::string first_image;
  {
    KernelImageCache cache(dir);
    const CompiledKernelImage& a = cache.get(k.source, k.name, "sm_90");
    const CompiledKernelImage& b = cache.get(k.source, k.name, "sm_90");
    EXPECT_EQ(&a, &b);
    EXPECT_EQ(cache.compiles(), 1u);
    EXPECT_EQ(cache.memory_hits(), 1u);
    cache.get(k.source, k.name, "sm_80");
    EXPECT_EQ(cache.compiles(), 2u) << "the target is part of the key";
    first_image = a.image;
  }
  KernelImageCache again(dir);
  const CompiledKernelImage& c = again.get(k.source, k.name, "sm_90");
  EXPECT_EQ(again.compiles(), 0u);
  EXPECT_EQ(again.disk_hits(), 1u);
  EXPECT_EQ(c.image, first_image);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.path().extension() == ".bin";
  EXPECT_EQ(files, 2u);
}

}  // namespace
}  // namespace amp

#endif
