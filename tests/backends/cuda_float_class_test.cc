// The CUDA backend's IsNaN and IsInf (float_class_ops.cc) against the CPU backend, bit for bit, in
// float, float16, bfloat16 and double, through a plan (two runs: the second replays a captured
// graph). Without a GPU these run in test_cuda_backend_emulated (host stand-ins for the runtime,
// the hand-written kernels on the fiber emulator) and skip in test_backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/half.h"
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

TEST(CudaFloatClass, TheDeviceRunsThem) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
  const cuda::CudaBackend b;
  for (const char* op : {"IsNaN", "IsInf"}) {
    Node* n = g.add_node(op, {x}, std::vector<std::string>{std::string(op) + "_out"});
    EXPECT_EQ(b.unsupported_reason(*n), "") << op;
  }
}

// [3, 50] values with NaNs, both infinities and ordinary values planted, in each float type;
// IsInf with each choice of signs.
TEST(CudaFloatClass, IsNaNAndIsInfMatchTheCpu) {
  REQUIRE_GPU();
  const float special[] = {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           0.0f, -2.5f};
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
    Tensor x(t, {3, 50});
    const Tensor r = test::random_tensor(DType::kFloat, {3, 50}, 31, -100.0f, 100.0f);
    for (int64_t k = 0; k < x.numel(); ++k) {
      const float v = k % 4 == 0 ? special[(k / 4) % 5] : r.as<float>()[k];
      if (t == DType::kDouble) x.mutable_as<double>()[k] = v;
      else test::put_float(x, k, v);
    }
    struct Case {
      const char* op;
      int positive, negative;
    };
    for (const Case& c : {Case{"IsNaN", 1, 1}, Case{"IsInf", 1, 1}, Case{"IsInf", 1, 0}, Case{"IsInf", 0, 1}}) {
      SCOPED_TRACE(std::string(c.op) + " " + std::string(dtype_name(t)) + " positive " + std::to_string(c.positive) +
                   " negative " + std::to_string(c.negative));
      OneNode one(c.op, {{"x", x}}, {DType::kBool});
      if (std::string(c.op) == "IsInf") {
        one.attr(Attribute::of_int("detect_positive", c.positive));
        one.attr(Attribute::of_int("detect_negative", c.negative));
      }
      const Tensor cpu = one.run_cpu()[0];
      auto exe = make_backend("cuda")->compile(one.m, {});
      for (int run = 0; run < 2; ++run)
        EXPECT_TRUE(exe->run(one.feeds, one.outputs)[0].same_contents(cpu)) << "run " << run << " differs from the CPU's";
    }
  }
}

#endif

}  // namespace
}  // namespace amp
