// widen.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU): fp16 and bf16 tensors widened to fp32, 40 of them (three launches of up to 16),
// of sizes 0 to past the grid, with NaN, infinities, -0 and subnormals, each bit for bit what the
// CPU backend's Cast to float computes (NaN as NaN: the device's canonical NaN is 0x7fffffff); and
// fp32 narrowed back to fp16 and bf16, bit for bit the CPU backend's Cast from float (round to
// nearest even, overflow to infinity, subnormals kept). Every other tensor starts 16-byte aligned
// in a buffer rounded up to 16 bytes (the 8-at-a-time path, then its tail of n % 8; the bytes past
// n must stay as they were), the others end where the guard page begins (mostly unaligned: one at
// a time, and a read or write past the end faults).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

#define cuda cuda_emulated
#include "backends/cuda/widen.cuh"
#undef cuda

namespace amp {
namespace {

// Bytes for n elements of `size` bytes: exactly, or rounded up to 16 so the buffer starts aligned.
size_t buffer_bytes(int64_t n, size_t size, bool aligned) {
  const size_t bytes = static_cast<size_t>(n) * size;
  return aligned ? (bytes + 15) / 16 * 16 : bytes;
}

// The bytes of b past its first `used` are still `fill`.
void expect_untouched_after(const test::GuardedBuffer& b, size_t used, unsigned char fill, const std::string& what) {
  const unsigned char* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = used; i < b.size(); ++i)
    if (p[i] != fill) {
      ADD_FAILURE() << what << ": byte " << i << " past the " << used << " written was changed";
      return;
    }
}

TEST(CudaKernelsEmulated, WideningToFloatIsTheCpusCastForEveryTask) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<Tensor> inputs, wants;
    std::vector<std::unique_ptr<test::GuardedBuffer>> in, out;
    std::vector<cuda_emulated::Widening> tasks;
    for (int k = 0; k < 40; ++k) {
      const int64_t n = k == 3 ? 0 : (k * 97) % 3000 + 1;
      Tensor x = test::random_tensor(t, {n}, 500 + static_cast<uint32_t>(k), -70000, 70000);
      const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-7f, -3e-39f};
      for (int64_t i = 0; i < n; i += 7) {
        const float v = specials[(i / 7) % 6];
        x.mutable_as<uint16_t>()[i] = t == DType::kFloat16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      }
      test::OneNode cast("Cast", {{"x", x}}, {DType::kFloat});
      cast.attr(Attribute::of_int("to", 1));
      wants.push_back(cast.run_cpu()[0]);
      const bool aligned = k % 2 == 1;
      in.push_back(std::make_unique<test::GuardedBuffer>(buffer_bytes(n, 2, aligned), 0));
      if (n) std::memcpy(in.back()->data(), x.data(), x.nbytes());
      out.push_back(std::make_unique<test::GuardedBuffer>(buffer_bytes(n, 4, aligned), 0xa5));
      tasks.push_back({t, in.back()->data(), static_cast<float*>(out.back()->data()), n});
    }
    cuda_emulated::widen_to_float(tasks, 2, nullptr);
    int vector_with_tail = 0;
    for (size_t k = 0; k < tasks.size(); ++k) {
      const size_t used = static_cast<size_t>(tasks[k].n) * 4;
      expect_untouched_after(*out[k], used, 0xa5, std::string(dtype_name(t)) + " task " + std::to_string(k));
      vector_with_tail += reinterpret_cast<uintptr_t>(out[k]->data()) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(in[k]->data()) % 16 == 0 && tasks[k].n % 8 != 0;
      test::GuardedBuffer exact(used, 0);
      if (used) std::memcpy(exact.data(), out[k]->data(), used);
      const Tensor got = exact.as(DType::kFloat, wants[k].dims);
      for (int64_t i = 0; i < got.numel(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, got.data() + 4 * i, 4);
        std::memcpy(&b, wants[k].data() + 4 * i, 4);
        if (a != b && !(std::isnan(got.element(i)) && std::isnan(wants[k].element(i)))) {  // NaN payloads differ
          ADD_FAILURE() << dtype_name(t) << " task " << k << "[" << i << "]: " << std::hex << a << " want " << b;
          break;
        }
      }
    }
    EXPECT_GE(vector_with_tail, 10) << "tasks that take the 8-at-a-time path and have a tail";
  }
  EXPECT_THROW(cuda_emulated::widen_to_float({{DType::kFloat, nullptr, nullptr, 1}}, 2, nullptr), InputError);
}

TEST(CudaKernelsEmulated, NarrowingFromFloatIsTheCpusCast) {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5000}, int64_t{4999}, int64_t{5003}}) {
      Tensor x = test::random_tensor(DType::kFloat, {n}, 600 + static_cast<uint32_t>(n), -70000, 70000);
      // Ties between neighbours (1 + 2^-11 and 1 + 2^-8 round to even), beyond fp16's range,
      // subnormals of either type, and the specials.
      const float specials[] = {NAN, INFINITY, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 65520.0f, 3e-6f, 1e-40f};
      for (int64_t i = 0; i < n; i += 5) x.mutable_as<float>()[i] = specials[(i / 5) % 8];
      test::OneNode cast("Cast", {{"x", x}}, {t});
      cast.attr(Attribute::of_int("to", t == DType::kFloat16 ? 10 : 16));
      const Tensor want = cast.run_cpu()[0];
      // 5003: both buffers start aligned (8 at a time, then 3); 4999 ends at the guard page.
      const bool aligned = n == 5003;
      test::GuardedBuffer in(buffer_bytes(n, 4, aligned), 0), out(buffer_bytes(n, 2, aligned), 0xa5);
      if (n) std::memcpy(in.data(), x.data(), x.nbytes());
      cuda_emulated::narrow_from_float(t, static_cast<const float*>(in.data()), out.data(), n, 2, nullptr);
      expect_untouched_after(out, static_cast<size_t>(n) * 2, 0xa5, "narrowed " + std::to_string(n));
      test::GuardedBuffer exact(static_cast<size_t>(n) * 2, 0);
      if (n) std::memcpy(exact.data(), out.data(), exact.size());
      const Tensor got = exact.as(t, {n});
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t a = got.as<uint16_t>()[i], b = want.as<uint16_t>()[i];
        if (a != b && !(std::isnan(got.element(i)) && std::isnan(want.element(i)))) {
          ADD_FAILURE() << dtype_name(t) << "[" << i << "] of " << x.as<float>()[i] << ": " << std::hex << a << " want " << b;
          break;
        }
      }
    }
  EXPECT_THROW(cuda_emulated::narrow_from_float(DType::kFloat, nullptr, nullptr, 1, 2, nullptr), InputError);
}

}  // namespace
}  // namespace amp
