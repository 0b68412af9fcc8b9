// The CUDA backend's Mean, BitShift and bitwise ops (broadcast_ops.cc) against the CPU backend, bit
// for bit, through a plan (two runs: the second replays a captured graph): Mean of broadcast
// operands in float, float16, bfloat16 and double, BitShift LEFT and RIGHT in the four unsigned
// types, ai.onnx_amp BitwiseAnd, Or, Xor (broadcast) and Not in the eight integer types. Without
// a GPU these run in test_cuda_backend_emulated (host stand-ins for the runtime, the hand-written
// kernels on the fiber emulator) and skip in test_backends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::OneNode;

void expect_same(const OneNode& one) {
  const Tensor cpu = one.run_cpu()[0];
  auto exe = make_backend("cuda")->compile(one.m, {});
  for (int run = 0; run < 2; ++run)
    EXPECT_TRUE(exe->run(one.feeds, one.outputs)[0].same_contents(cpu)) << "run " << run << " differs from the CPU's";
}

TEST(CudaBroadcastOps, TheDeviceRunsThem) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
  const cuda::CudaBackend b;
  for (const char* op : {"Mean", "BitShift"}) {
    Node* n = g.add_node(op, {x, x}, std::vector<std::string>{std::string(op) + "_out"});
    EXPECT_EQ(b.unsupported_reason(*n), "") << op;
  }
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"}) {
    Node* n = g.add_node(op, {x, x}, std::vector<std::string>{std::string(op) + "_out"}, kAmpDomain);
    EXPECT_EQ(b.unsupported_reason(*n), "") << op;
  }
}

TEST(CudaBroadcastOps, BitwiseOpsMatchTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 40;
  auto bits = [&](DType t, std::vector<int64_t> dims) {  // every bit pattern, negative values included
    Tensor x(t, std::move(dims));
    for (size_t k = 0; k < x.nbytes(); ++k) x.mutable_data()[k] = static_cast<uint8_t>((seed++ * 2654435761u) >> 13);
    return x;
  };
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16,
                  DType::kUInt32, DType::kUInt64}) {
    SCOPED_TRACE(dtype_name(t));
    expect_same(OneNode("BitwiseAnd", {{"a", bits(t, {3, 4})}, {"b", bits(t, {4})}}, {t}, kAmpDomain));
    expect_same(OneNode("BitwiseOr", {{"a", bits(t, {2, 1, 3})}, {"b", bits(t, {5, 1})}}, {t}, kAmpDomain));
    expect_same(OneNode("BitwiseXor", {{"a", bits(t, {})}, {"b", bits(t, {2, 3})}}, {t}, kAmpDomain));
    expect_same(OneNode("BitwiseNot", {{"x", bits(t, {3, 5})}}, {t}, kAmpDomain));
  }
}

TEST(CudaBroadcastOps, MeanMatchesTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 20;
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
    SCOPED_TRACE(dtype_name(t));
    auto values = [&](std::vector<int64_t> dims) {
      const Tensor f = test::random_tensor(DType::kFloat, dims, seed++, -50.0f, 50.0f);
      Tensor x(t, dims);
      for (int64_t k = 0; k < x.numel(); ++k) {
        if (t == DType::kDouble) x.mutable_as<double>()[k] = f.as<float>()[k] / 3.0;
        else test::put_float(x, k, f.as<float>()[k]);
      }
      return x;
    };
    expect_same(OneNode("Mean", {{"a", values({3, 1, 5})}, {"b", values({4, 5})}, {"c", values({})}}, {t}));
    expect_same(OneNode("Mean", {{"a", values({6, 7})}}, {t}));
  }
}

TEST(CudaBroadcastOps, BitShiftMatchesTheCpu) {
  REQUIRE_GPU();
  for (DType t : {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64})
    for (const char* direction : {"LEFT", "RIGHT"}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + direction);
      const int64_t bits = 8 * static_cast<int64_t>(dtype_size(t));
      Tensor x(t, {3, 4}), y(t, {4});
      for (int64_t k = 0; k < 12; ++k) {
        const uint64_t v = 0x9e3779b97f4a7c15ull >> (k * 3);
        if (t == DType::kUInt8) x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(v);
        if (t == DType::kUInt16) x.mutable_as<uint16_t>()[k] = static_cast<uint16_t>(v);
        if (t == DType::kUInt32) x.mutable_as<uint32_t>()[k] = static_cast<uint32_t>(v);
        if (t == DType::kUInt64) x.mutable_as<uint64_t>()[k] = v;
      }
      const int64_t shifts[] = {0, 3, bits - 1, bits};  // the last gives 0
      for (int64_t k = 0; k < 4; ++k) {
        if (t == DType::kUInt8) y.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(shifts[k]);
        if (t == DType::kUInt16) y.mutable_as<uint16_t>()[k] = static_cast<uint16_t>(shifts[k]);
        if (t == DType::kUInt32) y.mutable_as<uint32_t>()[k] = static_cast<uint32_t>(shifts[k]);
        if (t == DType::kUInt64) y.mutable_as<uint64_t>()[k] = static_cast<uint64_t>(shifts[k]);
      }
      OneNode one("BitShift", {{"x", x}, {"y", y}}, {t});
      one.attr(Attribute::of_string("direction", direction));
      expect_same(one);
    }
}

#endif

}  // namespace
}  // namespace amp
