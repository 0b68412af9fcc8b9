// The commands on what issue 16 (the real model zoo) asks of them, end to end:
// - amp-train --dtype bf16 runs every convolution and product of the step in bf16, forward and
//   backward (ONNX's shape inference on the saved step says so, not our own types), though opset
//   17's Conv schema leaves bf16 out;
// - amp-rewrite --dtype bf16, whose output must stay valid ONNX, keeps those Convs fp32 and says
//   so plainly: how many, which op types, why, what the user can do;
// - a model with an op we lack (ONNX's LpNormalization) fails in amp-run and amp-train with one line
//   naming the file, the node and the op, exit 2; amp-rewrite writes its (valid) rewrite and says
//   in one line, with the file, node and op, that amp-run cannot run it;
// - an upsampling head as PyTorch exports F.interpolate (Resize bilinear both ways and nearest) runs
//   in amp-run as torch computes it, and its fp16 rewrite keeps Resize and its scales in fp32,
//   passes ONNX's full check and runs in ONNX Runtime and amp-run within fp16's error of torch.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string tool(const std::string& name) { return test::binary_dir() + "/" + name; }
std::string script() { return test::source_dir() + "/tests/frontends/zoo_model.py"; }

std::vector<std::string> lines_with(const std::string& text, const std::string& word) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find(word) != std::string::npos) out.push_back(line);
  return out;
}

TEST(ZooCommands, Bf16TrainingRunsEveryConvolutionAndProductInBf16) {
  const std::string dir = test::temp_dir("zoo_bf16_train");
  std::string out;
  // 32 images of the cnn's input, labels 0..9.
  ASSERT_EQ(test::run_command("/usr/bin/python3 -c \"import numpy as np; r=np.random.default_rng(3); "
                              "np.savez('" + dir + "/train.npz', input=r.random((32,1,28,28),dtype=np.float32), "
                              "labels=r.integers(0,10,32).astype(np.int64))\"",
                              &out),
            0)
      << out;
  const std::string step = dir + "/step.onnx";
  ASSERT_EQ(test::run_command(tool("amp-train") + " " + test::source_dir() + "/models/cnn.train.onnx --data " + dir +
                                  "/train.npz --loss cross_entropy --batch-size 16 --steps 2 --seed 1 --dtype bf16 "
                                  "--save-training-graph " + step + " 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_python(script() + " check " + step, &out), 0) << out;
  std::map<std::string, int> bf16, other;
  std::istringstream in(out);
  std::string op, a, b;
  while (in >> op >> a >> b) (a == "BFLOAT16" && b == "BFLOAT16" ? bf16 : other)[op]++;
  // The cnn: 4 Conv and 1 Gemm forward; 4 ConvGrad and the Gemm's 2 products backward.
  EXPECT_EQ(bf16["Conv"], 4) << out;
  EXPECT_EQ(bf16["ConvGrad"], 4) << out;
  EXPECT_EQ(bf16["Gemm"], 3) << out;
  EXPECT_TRUE(other.empty()) << "products not in bf16:\n" << out;
}

TEST(ZooCommands, Bf16RewriteSaysWhichAllowListedOpsStayFp32AndWhy) {
  const std::string dir = test::temp_dir("zoo_bf16_rewrite");
  std::string out;
  ASSERT_EQ(test::run_command(tool("amp-rewrite") + " " + test::source_dir() + "/models/cnn.onnx --dtype bf16 -o " + dir +
                                  "/cnn.bf16.onnx 2>&1",
                              &out),
            0)
      << out;
  const auto warnings = lines_with(out, "allow-listed");
  ASSERT_EQ(warnings.size(), 1u) << out;
  const std::string& w = warnings[0];
  EXPECT_NE(w.find("4 allow-listed ops (4 Conv) stay fp32"), std::string::npos) << w;
  EXPECT_NE(w.find("Conv-11's type constraint T does not allow bfloat16"), std::string::npos) << w;
  EXPECT_NE(w.find("--dtype fp16"), std::string::npos) << w;
  EXPECT_NE(w.find("amp-train --dtype bf16"), std::string::npos) << w;
  // The output is valid ONNX (the checker, shape inference) with its Convs in fp32.
  ASSERT_EQ(test::run_python(script() + " check " + dir + "/cnn.bf16.onnx", &out), 0) << out;
  EXPECT_EQ(lines_with(out, "Conv FLOAT FLOAT").size(), 4u) << out;
  // fp16 has no such ops: no warning.
  ASSERT_EQ(test::run_command(tool("amp-rewrite") + " " + test::source_dir() + "/models/cnn.onnx -o " + dir +
                                  "/cnn.fp16.onnx 2>&1",
                              &out),
            0)
      << out;
  EXPECT_TRUE(lines_with(out, "allow-listed").empty()) << out;
}

TEST(ZooCommands, AnOpWeLackIsNamedWithFileAndNodeInEveryCommand) {
  const std::string dir = test::temp_dir("zoo_missing_op");
  std::string out;
  ASSERT_EQ(test::run_python(script() + " missing " + dir, &out), 0) << out;
  const std::string model = dir + "/missing.onnx";
  const std::string where = model + ": ";

  ASSERT_EQ(test::run_command(tool("amp-run") + " " + model + " --inputs " + dir + "/missing_in.npz --outputs " + dir +
                                  "/out.npz 2>&1",
                              &out),
            2)
      << out;
  auto errors = lines_with(out, "error");
  ASSERT_EQ(errors.size(), 1u) << out;
  EXPECT_NE(errors[0].find(where), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("the_gap"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("LpNormalization"), std::string::npos) << errors[0];

  ASSERT_EQ(test::run_command(tool("amp-train") + " " + model + " --data " + dir +
                                  "/missing_train.npz --loss mse --steps 1 --batch-size 4 2>&1",
                              &out),
            2)
      << out;
  errors = lines_with(out, "error");
  ASSERT_EQ(errors.size(), 1u) << out;
  EXPECT_NE(errors[0].find(where), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("the_gap"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("LpNormalization"), std::string::npos) << errors[0];

  ASSERT_EQ(test::run_command(tool("amp-rewrite") + " " + model + " -o " + dir + "/missing.amp.onnx 2>&1", &out), 0) << out;
  const auto warnings = lines_with(out, "LpNormalization");
  ASSERT_EQ(warnings.size(), 1u) << out;
  EXPECT_NE(warnings[0].find(where), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("the_gap"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("amp-run"), std::string::npos) << warnings[0];
}

TEST(ZooCommands, UpsamplingHeadRunsAndItsRewriteKeepsResizeScalesFp32) {
  const std::string dir = test::temp_dir("zoo_upsample");
  std::string out;
  ASSERT_EQ(test::run_python(script() + " upsample " + dir, &out), 0) << out;
  // fp32 in amp-run: torch's output to 1e-5 of its largest value.
  ASSERT_EQ(test::run_command(tool("amp-run") + " " + dir + "/model.onnx --inputs " + dir + "/input.npz --outputs " + dir +
                                  "/fp32.npz 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_command("/usr/bin/python3 -c \"import numpy as np; a=np.load('" + dir + "/fp32.npz')['output']; "
                              "b=np.load('" + dir + "/reference.npz')['output']; e=abs(a-b).max()/abs(b).max(); "
                              "print(e); assert e <= 1e-5\"",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_command(tool("amp-rewrite") + " " + dir + "/model.onnx -o " + dir + "/model.amp.onnx 2>&1", &out), 0)
      << out;
  ASSERT_EQ(test::run_command("node " + test::source_dir() + "/tests/ort/run_model.js " + dir + "/model.amp.onnx " + dir +
                                  "/in " + dir + "/ort",
                              &out),
            0)
      << out;
  // fp16 convolutions (3 Conv of up to 72 terms): within 1e-2 of torch's fp32 output.
  ASSERT_EQ(test::run_python(script() + " resize " + dir + "/model.amp.onnx " + dir + "/ort/output_0.pb 1e-2", &out), 0)
      << out;
  ASSERT_EQ(test::run_command(tool("amp-run") + " " + dir + "/model.amp.onnx --inputs " + dir + "/input.npz --outputs " +
                                  dir + "/fp16.npz 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_python(script() + " resize " + dir + "/model.amp.onnx " + dir + "/fp16.npz 1e-2", &out), 0) << out;
}

}  // namespace
}  // namespace amp
