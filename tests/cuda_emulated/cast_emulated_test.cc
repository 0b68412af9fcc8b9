// cast.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run without
// a GPU) against the CPU backend's one-node Cast, byte for byte, for every pair of the eight types
// it casts (bool, uint8, int8, int32, int64, float, float16, bfloat16): values every source type
// holds, with fractions (truncated toward zero to integers), halfway points of float16 (rounded to
// even), large int64 and int32 values (rounded through float32 to the 16-bit types, as the CPU
// does), zeros and negatives (bool), more elements than the grid. Out-of-range float -> integer
// casts are undefined in ONNX and are not drawn.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/cast.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

constexpr DType kTypes[] = {DType::kBool,  DType::kUInt8, DType::kInt8,    DType::kInt32,
                            DType::kInt64, DType::kFloat, DType::kFloat16, DType::kBFloat16};

// Values of `from` that every target holds or converts without undefined behaviour: within
// [0, 127] for the small integer targets, fractional values for the float sources, large ones for
// the wide integer sources going to floats.
Tensor source(DType from, DType to, int64_t n) {
  Tensor x(from, {n});
  const bool small_target = to == DType::kUInt8 || to == DType::kInt8;
  for (int64_t k = 0; k < n; ++k) {
    double v = static_cast<double>(k % 128) * ((k / 128) % 2 && to != DType::kUInt8 && from != DType::kUInt8 ? -1 : 1);
    if (k % 5 == 1) v += 0.5;                                        // a halfway point / a fraction
    if (k % 11 == 2) v = 0;                                          // zero
    if (!small_target && k % 13 == 3) v = 2049.0 + 2.0 * (k % 7);   // float16's spacing of 2 above 2048
    if (!small_target && to != DType::kInt32 && k % 17 == 4 && from == DType::kInt64) v = 9007199254740993.0 + k;
    switch (from) {
      case DType::kBool: x.mutable_as<uint8_t>()[k] = k % 3 == 0; break;
      case DType::kUInt8: x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(static_cast<int64_t>(v < 0 ? -v : v) % 256); break;
      case DType::kInt8: x.mutable_as<int8_t>()[k] = static_cast<int8_t>(static_cast<int64_t>(v) % 128); break;
      case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(v); break;
      case DType::kInt64:
        x.mutable_as<int64_t>()[k] = v > 9e15 ? int64_t{9007199254740993} + k : static_cast<int64_t>(v);
        break;
      case DType::kFloat: x.mutable_as<float>()[k] = static_cast<float>(v); break;
      case DType::kFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_fp16(static_cast<float>(v)); break;
      case DType::kBFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_bf16(static_cast<float>(v)); break;
      default: break;
    }
  }
  return x;
}

TEST(CudaKernelsEmulated, CastsMatchTheCpuByteForByte) {
  int pairs = 0;
  for (DType from : kTypes)
    for (DType to : kTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      ASSERT_TRUE(emu::cast_supported(from, to));
      const Tensor x = source(from, to, 5000);  // > 16 blocks x 256 threads: the loop goes round
      test::OneNode node("Cast", {{"x", x}}, {to});
      node.attr(Attribute::of_int("to", static_cast<int64_t>(to)));
      const Tensor want = node.run_cpu()[0];
      test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
      emu::cast(from, to, x.numel(), in.data(), out.data(), 2, nullptr);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU's Cast";
      ++pairs;
    }
  EXPECT_EQ(pairs, 64);
  EXPECT_FALSE(emu::cast_supported(DType::kDouble, DType::kFloat));
  EXPECT_FALSE(emu::cast_supported(DType::kFloat, DType::kUInt16));
  EXPECT_THROW(emu::cast(DType::kFloat, DType::kDouble, 1, nullptr, nullptr, 2, nullptr), InputError);
}

}  // namespace
}  // namespace amp
