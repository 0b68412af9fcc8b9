// Convolution algorithm choices kept between processes (backends/cuda/algorithm_store.h): read back
// by the next store of the same cuDNN version, never by another's, malformed lines skipped; and a
// device context (on a GPU, or the host stand-ins in test_cuda_backend_emulated) finds in a new
// process what the previous one remembered, in the kernel cache's folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/algorithm_store.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_context.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using cuda::AlgorithmStore;

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("amp-algorithms-" + name + "-" +
                                                                              std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

size_t lines_of(const std::string& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(CudaAlgorithmStore, ChoicesOutliveTheProcessForTheSameLibraryVersionOnly) {
  const std::filesystem::path dir = fresh_folder("store");
  const std::string forward = "forward convolution bfloat16 x[128,64,56,56] w[64,64,3,3] pads [1,1] strides [1,1]";
  const std::string filter = "fp32 backward-filter convolution float16 x[8,3,32,32] w[16,3,3,3]";
  {
    AlgorithmStore store(dir.string(), "cudnn 91900");
    EXPECT_EQ(store.read_from_file(), 0u);
    store.remember(forward, 1);
    store.remember(filter, 0);
    store.remember(filter, 0);  // unchanged: not written again
    store.remember(forward, 6);  // the one that ran after a refusal: the later line wins
    EXPECT_EQ(store.find(forward), 6);
    EXPECT_EQ(lines_of(store.file()), 4u) << "a header and three lines";
  }
  AlgorithmStore again(dir.string(), "cudnn 91900");
  EXPECT_EQ(again.read_from_file(), 3u);
  EXPECT_EQ(again.find(forward), 6);
  EXPECT_EQ(again.find(filter), 0);
  EXPECT_FALSE(again.find("backward-data convolution float x[1,1,1,1]"));
  // Another cuDNN reads none of it: its choices may not be its own algorithms' best.
  AlgorithmStore other(dir.string(), "cudnn 92000");
  EXPECT_FALSE(other.find(forward));
  EXPECT_NE(other.file(), again.file());
  // Lines that are not this store's are skipped; the rest still count.
  {
    std::ofstream out(again.file(), std::ios::app);
    out << "garbage\n" << "99\tout of range\n" << "x3\tnot a number\n" << "\tno algorithm\n" << "2\t" << filter << "\n";
  }
  AlgorithmStore checked(dir.string(), "cudnn 91900");
  EXPECT_EQ(checked.read_from_file(), 4u);
  EXPECT_EQ(checked.find(filter), 2);
  EXPECT_FALSE(checked.find("out of range"));
  // A file whose first line is not the header (another program's, a truncated write) is not read.
  { std::ofstream(again.file()) << "2\t" << forward << "\n"; }
  EXPECT_EQ(AlgorithmStore(dir.string(), "cudnn 91900").read_from_file(), 0u);
  // No folder: memory only, nothing written.
  AlgorithmStore memory("", "cudnn 91900");
  memory.remember(forward, 1);
  EXPECT_EQ(memory.find(forward), 1);
  EXPECT_EQ(memory.file(), "");
  std::filesystem::remove_all(dir);
}

TEST(CudaBackendGpu, ANewDeviceContextFindsTheAlgorithmsTheLastOneChose) {
  std::string why;
  if (!cuda::CudaBackend().available(&why)) GTEST_SKIP() << "no usable CUDA device: " << why;
  const std::filesystem::path dir = fresh_folder("context");
  const char* before = std::getenv("AMP_KERNEL_CACHE_DIR");
  const std::string kept = before ? before : "";
  setenv("AMP_KERNEL_CACHE_DIR", dir.c_str(), 1);
  const std::string key = "forward convolution float x[2,3,9,9] w[4,3,3,3] pads [1,1] strides [2,2]";
  {
    cuda::DeviceContext first;
    EXPECT_FALSE(first.remembered_algorithm(key));
    first.remember_algorithm(key, 1);
  }
  cuda::DeviceContext second;
  EXPECT_EQ(second.remembered_algorithm(key), 1);
  if (before) setenv("AMP_KERNEL_CACHE_DIR", kept.c_str(), 1);
  else unsetenv("AMP_KERNEL_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
