// Feeds prefetched from another thread (Executable::prefetch, backends/cuda/feed_prefetch.h): the
// run given the prefetched tensors computes exactly what it computes from an ordinary upload, and
// takes them from the device slots (counted); a tensor written after its prefetch, or another
// tensor of the same size, is uploaded as usual and its own values are what the run reads; a
// prefetch no run takes is let go when the slots run out. Across CUDA Graph replays (the third
// run of a plan on). amp-train's loop prefetches every next batch this way; the tests holding its
// losses to the CPU backend's and to PyTorch's run through it.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/cuda_executable.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::Feeds;
using test::random_tensor;

// y = ReduceSum(x * w) over x's columns: x [rows, 512] fp32, 2 MiB at 1024 rows (a prefetched
// feed: at least FeedPrefetch::kMinBytes), w [512] small (always uploaded by the run).
Model row_sums(int64_t rows) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({rows, 512})));
  Value* w = g.add_input("w", ValueType::tensor(DType::kFloat, Shape::of({512})));
  Node* prod = g.add_node("Mul", {x, w}, {"xw"});
  prod->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({rows, 512})));
  Tensor axes(DType::kInt64, {1});
  axes.mutable_as<int64_t>()[0] = 1;
  Node* c = g.add_node("Constant", {}, {"axes"});
  c->set_attr(Attribute::of_tensor("value", axes));
  c->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({1})));
  Node* sum = g.add_node("ReduceSum", {prod->output(0), c->output(0)}, {"y"});
  sum->set_attr(Attribute::of_int("keepdims", 0));
  sum->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({rows})));
  g.add_output(sum->output(0));
  return m;
}

TEST(CudaBackendGpu, PrefetchedFeedsComputeWhatUploadedOnesDo) {
  REQUIRE_GPU();
  const int64_t rows = 1024;
  const Model m = row_sums(rows);
  const Tensor w = random_tensor(DType::kFloat, {512}, 2);
  std::vector<Feeds> batches;
  for (uint32_t k = 0; k < 6; ++k) batches.push_back({{"x", random_tensor(DType::kFloat, {rows, 512}, 10 + k)}, {"w", w}});

  // What each batch gives uploaded by the run itself.
  auto plain = make_backend("cuda")->compile(m, {});
  std::vector<Tensor> want;
  for (const Feeds& f : batches) want.push_back(plain->run(f, {"y"})[0]);
  EXPECT_EQ(dynamic_cast<cuda::CudaExecutable&>(*plain).prefetched_bytes(), 0u);

  auto exe = make_backend("cuda")->compile(m, {});
  auto& cuda_exe = dynamic_cast<cuda::CudaExecutable&>(*exe);
  const size_t x_bytes = batches[0][0].second.nbytes();
  // A loader's pattern: batch k + 1 prefetched on another thread while batch k runs.
  exe->prefetch(batches[0]);
  for (size_t k = 0; k < batches.size(); ++k) {
    std::thread loader;
    if (k + 1 < batches.size()) loader = std::thread([&, k] { exe->prefetch(batches[k + 1]); });
    const Tensor got = exe->run(batches[k], {"y"})[0];
    if (loader.joinable()) loader.join();
    EXPECT_TRUE(got.same_contents(want[k])) << "batch " << k;
  }
  EXPECT_EQ(cuda_exe.prefetched_bytes(), batches.size() * x_bytes) << "every batch's x came from a slot";
  // One slot or more (how many depends on how the loader and the runs interleave), each with a
  // staging buffer of the feed's size.
  EXPECT_GE(cuda_exe.prefetch_staging_bytes(), x_bytes) << "the uploads went through page-locked staging";
  EXPECT_EQ(cuda_exe.prefetch_staging_bytes() % x_bytes, 0u);
  EXPECT_GE(cuda_exe.graph_replays(), 3u);

  // Written after its prefetch: the tensor copies its bytes on write, and the run reads the new ones.
  Feeds changed = batches[1];
  exe->prefetch(changed);
  changed[0].second.mutable_as<float>()[7] += 1.0f;
  const Tensor after_write = exe->run(changed, {"y"})[0];
  EXPECT_TRUE(after_write.same_contents(plain->run(changed, {"y"})[0]));
  EXPECT_FALSE(after_write.same_contents(want[1])) << "the run read the prefetched, stale bytes";
  EXPECT_EQ(cuda_exe.prefetched_bytes(), batches.size() * x_bytes);

  // Prefetches no run takes: the slots fill, the oldest is let go, and the runs still compute
  // what uploads give (here from batches prefetched earlier, or uploaded).
  for (const Feeds& f : batches) exe->prefetch(f);
  for (size_t k = 0; k < batches.size(); ++k)
    EXPECT_TRUE(exe->run(batches[k], {"y"})[0].same_contents(want[k])) << "batch " << k << " after the slots filled";
  EXPECT_EQ(cuda_exe.prefetched_bytes(), (batches.size() + cuda::FeedPrefetch::kMaxSlots) * x_bytes)
      << "the last kMaxSlots prefetches were taken";
}

// The staging copy: pieces of at least 8 MiB among the threads asked for, every byte where it
// belongs, whatever the remainder (no device needed).
TEST(FeedPrefetchStaging, TheCopyInPiecesMovesEveryByte) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{5} << 20, (size_t{41} << 20) + 7})
    for (unsigned threads : {1u, 3u, 8u}) {
      std::vector<unsigned char> src(bytes), dst(bytes, 0xAB);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
      cuda::FeedPrefetch::copy_host_bytes(dst.data(), src.data(), bytes, threads);
      EXPECT_TRUE(dst == src) << bytes << " bytes, " << threads << " threads";
    }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
