// The commands and the CUDA backend's module (backends/cuda_module.h): a CPU run maps none of the
// CUDA libraries (they cost ~240 MiB resident: issue 19), asking for the cuda device loads the
// module or says in one line why it cannot, and --device auto falls back to the CPU either way.
#include <gtest/gtest.h>

#include "graph/onnx_io.h"
#include "tests/support/one_node.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

const char* const kCudaLibraries[] = {"libcudart", "libcublas", "libnvrtc", "libcudnn", "libnccl", "libcuda."};

std::string mlp_run(const std::string& dir) {
  return binary_dir() + "/amp-run " + source_dir() + "/models/mlp.onnx --inputs " + source_dir() +
         "/models/mlp.sample.npz --outputs " + dir + "/o.npz";
}

TEST(CudaModule, CommandsDoNotLinkTheCudaLibraries) {
  for (const char* tool : {"amp-run", "amp-train", "amp-inspect", "amp-rewrite"}) {
    std::string out;
    ASSERT_EQ(run_command("ldd " + binary_dir() + "/" + tool, &out), 0) << out;
    for (const char* lib : kCudaLibraries) EXPECT_EQ(out.find(lib), std::string::npos) << tool << " links " << lib << ":\n" << out;
  }
}

// The dynamic loader's own account (LD_DEBUG=files) of every library a CPU run opens, dlopen
// included.
TEST(CudaModule, CpuRunsOpenNoCudaLibrary) {
  const std::string dir = temp_dir("cuda_module");
  for (const std::string& cmd : {mlp_run(dir) + " --device cpu", binary_dir() + "/amp-train --help"}) {
    std::string out;
    ASSERT_EQ(run_command("LD_DEBUG=files " + cmd + " 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("libdnnl"), std::string::npos) << "LD_DEBUG lists the libraries opened:\n" << out;
    for (const char* lib : kCudaLibraries) EXPECT_EQ(out.find(lib), std::string::npos) << cmd << " opens " << lib;
  }
}

#if AMP_HAVE_CUDA
TEST(CudaModule, MissingModuleIsOneLineAndAutoRunsOnTheCpu) {
  const std::string dir = temp_dir("cuda_module");
  std::string out;
  EXPECT_EQ(run_command("AMP_CUDA_BACKEND=" + dir + "/none.so " + mlp_run(dir) + " --device cuda 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("amp-run: error: cuda backend not available: libamp_cuda_backend.so not found (looked at " + dir +
                     "/none.so"),
            std::string::npos)
      << out;
  const size_t at = out.find("amp-run: error:");
  EXPECT_EQ(out.find('\n', at), out.size() - 1) << "one line, the last:\n" << out;
  ASSERT_EQ(run_command("AMP_CUDA_BACKEND=" + dir + "/none.so " + mlp_run(dir) + " --device auto 2>&1", &out), 0) << out;
  EXPECT_NE(out.find(" on cpu: "), std::string::npos) << out;
  // A file that is not a module: the loader's reason, still one line.
  ASSERT_EQ(run_command("echo 'not a library' > " + dir + "/bad.so", &out), 0);
  EXPECT_EQ(run_command("AMP_CUDA_BACKEND=" + dir + "/bad.so " + mlp_run(dir) + " --device cuda 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("cuda backend not available: cannot load " + dir + "/bad.so: "), std::string::npos) << out;
}

// The module built beside the commands loads into them (every symbol it needs of graph/ and
// backends/ is exported by the executable): without a GPU the reason is the backend's own, not the
// loader's.
TEST(CudaModule, BuiltModuleLoadsIntoTheCommands) {
  const std::string dir = temp_dir("cuda_module");
  std::string out;
  const int rc = run_command(mlp_run(dir) + " --device cuda 2>&1", &out);
  if (rc == 0) return;  // a GPU
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cuda backend not available: "), std::string::npos) << out;
  EXPECT_EQ(out.find("libamp_cuda_backend.so"), std::string::npos) << out;
  EXPECT_EQ(out.find("cannot load"), std::string::npos) << out;
}

// An InputError thrown inside the module (the cuda plan of an op the device cannot run) is caught
// by type in the command: one "error:" line and exit code 2, not "internal error:" and 3.
TEST(CudaModule, ErrorsThrownInTheModuleAreCaughtByType) {
  const std::string dir = temp_dir("cuda_module");
  OneNode trilu("Trilu", {{"x", Tensor(DType::kFloat, {2, 4})}}, {DType::kFloat});
  trilu.m.graph->name = "trilu";
  trilu.node->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2, 4})));
  save_model(trilu.m, dir + "/trilu.onnx");
  std::string out;
  EXPECT_EQ(run_command(binary_dir() + "/amp-inspect --cuda-plan " + dir + "/trilu.onnx 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("amp-inspect: error: "), std::string::npos) << out;
  EXPECT_NE(out.find("op Trilu is not supported by the cuda backend"), std::string::npos) << out;
}
#else
TEST(CudaModule, BuildWithoutCudaSaysSoAndAutoRunsOnTheCpu) {
  const std::string dir = temp_dir("cuda_module");
  std::string out;
  EXPECT_EQ(run_command(mlp_run(dir) + " --device cuda 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("amp-run: error: cuda backend not available: this build has no CUDA backend"), std::string::npos) << out;
  ASSERT_EQ(run_command(mlp_run(dir) + " --device auto 2>&1", &out), 0) << out;
  EXPECT_NE(out.find(" on cpu: "), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace amp::test
