// ConvTranspose in the commands (issue 16 item 3): amp-train --dtype bf16 on a U-Net block as
// PyTorch exports it (tests/passes/torch_exports.py's unet_block: strided Conv down, three
// ConvTranspose2d up) runs every ConvTranspose, and the Conv and ConvGrad of its gradients, in bf16
// — ONNX's shape inference on the saved step says so, not our own types — though opset 17's
// ConvTranspose schema leaves bf16 out.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tests/support/test_support.h"

namespace amp {
namespace {

TEST(ConvTransposeCommands, Bf16TrainingRunsEveryConvTransposeAndItsGradientsInBf16) {
  const std::string dir = test::temp_dir("convt_bf16_train");
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/passes/torch_exports.py unet_block " + dir, &out), 0) << out;
  ASSERT_EQ(test::run_command("/usr/bin/python3 -c \"import numpy as np; r=np.random.default_rng(3); "
                              "np.savez('" + dir + "/train.npz', input=r.standard_normal((8,3,16,16),dtype=np.float32), "
                              "labels=r.integers(0,10,8).astype(np.int64))\"",
                              &out),
            0)
      << out;
  const std::string step = dir + "/step.onnx";
  ASSERT_EQ(test::run_command(test::binary_dir() + "/amp-train " + dir + "/model.onnx --data " + dir +
                                  "/train.npz --loss cross_entropy --batch-size 4 --steps 2 --seed 1 --dtype bf16 "
                                  "--save-training-graph " + step + " 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/zoo_model.py check " + step, &out), 0) << out;
  std::map<std::string, int> bf16, other;
  std::istringstream in(out);
  std::string op, a, b;
  while (in >> op >> a >> b) (a == "BFLOAT16" && b == "BFLOAT16" ? bf16 : other)[op]++;
  // Forward: 2 Conv, 3 ConvTranspose, 1 Gemm. Backward: each Conv's ConvGrad (2), each
  // ConvTranspose's dX (a Conv, 3) and dW (a ConvGrad, 3), the Gemm's 2 products.
  EXPECT_EQ(bf16["ConvTranspose"], 3) << out;
  EXPECT_EQ(bf16["Conv"], 5) << out;
  EXPECT_EQ(bf16["ConvGrad"], 5) << out;
  EXPECT_EQ(bf16["Gemm"], 3) << out;
  EXPECT_TRUE(other.empty()) << "products not in bf16:\n" << out;
}

}  // namespace
}  // namespace amp
