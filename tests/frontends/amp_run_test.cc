// amp-run end to end: the demo models' outputs against PyTorch's (models/*.sample.npz), and the
// one-line errors with exit code 2 for inputs that do not fit the model.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "frontends/lib/npz.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

std::string amp_run() { return binary_dir() + "/amp-run"; }

Tensor array(const std::string& path, const std::string& key) {
  for (auto& [k, t] : read_npz(path))
    if (k == key) return t;
  ADD_FAILURE() << path << " has no " << key;
  return {};
}

// Also with --device auto --tf32: on a GPU, fp32 products and convolutions on TF32 Tensor Cores
// (a 10-bit mantissa in the products) stay within 3e-3 of PyTorch's fp32; the CPU ignores it.
TEST(AmpRun, DemoModelsMatchPyTorch) {
  const std::string dir = temp_dir("amp_run");
  for (const std::string extra : {"", " --device auto --tf32"})
  for (const char* name : {"mlp", "cnn", "gpt"}) {
    SCOPED_TRACE(extra);
    const std::string sample = source_dir() + "/models/" + name + ".sample.npz";
    const std::string out_path = dir + "/" + name + ".out.npz";
    std::string out;
    // The sample also holds the reference "logits": amp-run ignores arrays that are not inputs.
    ASSERT_EQ(run_command(amp_run() + " " + source_dir() + "/models/" + name + ".onnx --inputs " + sample +
                              " --outputs " + out_path + extra,
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("array 'logits' is not a graph input; ignored"), std::string::npos) << out;
    const Tensor got = array(out_path, "logits"), want = array(sample, "logits");
    ASSERT_EQ(got.dims, want.dims);
    double scale = 0, err = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::abs(want.element(i)));
      err = std::max(err, std::abs(got.element(i) - want.element(i)));
    }
    EXPECT_LT(err / scale, extra.empty() ? 1e-5 : 3e-3) << name;
  }
}

TEST(AmpRun, InputsThatDoNotFitExitWithCode2AndOneLine) {
  const std::string dir = temp_dir("amp_run_errors");
  std::string out;
  ASSERT_EQ(run_python(source_dir() + "/tests/frontends/npz_reference.py write " + dir, &out), 0) << out;
  const std::string model = source_dir() + "/models/mlp.onnx";
  auto run = [&](const std::string& inputs, const std::string& extra = "") {
    const int rc = run_command(amp_run() + " " + model + " --inputs " + inputs + " --outputs " + dir + "/o.npz " + extra, &out);
    EXPECT_EQ(rc, 2) << out;
    return out;
  };
  EXPECT_NE(run(dir + "/wrong_key.npz").find("wrong_key.npz: no array 'input' for graph input input (float[N,1,28,28])"),
            std::string::npos)
      << out;
  EXPECT_NE(run(dir + "/float64.npz").find("input 'input' expects float[N,1,28,28], got double[4,1,28,28]"),
            std::string::npos)
      << out;
  EXPECT_NE(run(dir + "/fortran.npz").find("Fortran order"), std::string::npos) << out;
  EXPECT_NE(run(dir + "/missing.npz").find("missing.npz: cannot read as .npz"), std::string::npos) << out;
  EXPECT_NE(run(dir + "/py_stored.npz", "--device tpu").find("--device"), std::string::npos) << out;
  // No GPU here (or no CUDA in this build): asking for one by name is a clear error, auto falls back.
  const int rc = run_command(amp_run() + " " + model + " --inputs " + source_dir() + "/models/mlp.sample.npz --outputs " +
                                 dir + "/o.npz --device cuda",
                             &out);
  if (out.find("cuda backend not available") != std::string::npos) {
    EXPECT_EQ(rc, 2) << out;
  }
  EXPECT_EQ(run_command(amp_run() + " " + model + " --inputs " + source_dir() + "/models/mlp.sample.npz --outputs " +
                            dir + "/o.npz --device auto",
                        &out),
            0)
      << out;
  EXPECT_EQ(out.find("error:"), std::string::npos) << out;
}

// Issue 13: a NaN in one of the 4 samples makes that sample's outputs NaN and leaves the other
// three finite (and, in fp32, PyTorch's), in the model and in its fp16 and bf16 rewrites; amp-run
// says which output and sample. (gpt.onnx reads token ids: no NaN to give it.) With a GPU, the
// same on --device cuda, but for the NaN sample itself (see below).
TEST(AmpRun, NaNInOneSampleGivesNaNOutputsForThatSampleOnly) {
  const std::string dir = temp_dir("amp_run_nan");
  std::vector<std::string> devices{"cpu"};
  std::string out;
  if (run_command(amp_run() + " " + source_dir() + "/models/mlp.onnx --inputs " + source_dir() +
                      "/models/mlp.sample.npz --outputs " + dir + "/probe.npz --device cuda",
                  &out) == 0)
    devices.push_back("cuda");
  for (const char* name : {"mlp", "cnn"}) {
    const std::string sample = source_dir() + "/models/" + name + ".sample.npz";
    Tensor x = array(sample, "input");
    const Tensor want = array(sample, "logits");
    constexpr int64_t kBad = 2;
    const int64_t per_sample = x.numel() / x.dims[0];
    x.mutable_as<float>()[kBad * per_sample + per_sample / 2] = std::numeric_limits<float>::quiet_NaN();
    const std::string inputs = dir + "/" + name + ".nan.npz";
    write_npz(inputs, {{"input", x}});
    for (const char* dtype : {"fp32", "fp16", "bf16"}) {
      std::string model = source_dir() + "/models/" + name + ".onnx";
      if (std::string(dtype) != "fp32") {
        const std::string rewritten = dir + "/" + name + "." + dtype + ".onnx";
        ASSERT_EQ(run_command(binary_dir() + "/amp-rewrite " + model + " -o " + rewritten + " --force --dtype " + dtype, &out),
                  0)
            << out;
        model = rewritten;
      }
      for (const std::string& device : devices) {
        SCOPED_TRACE(std::string(name) + " " + dtype + " on " + device);
        const std::string out_path = dir + "/" + name + "." + dtype + ".out.npz";
        ASSERT_EQ(run_command(amp_run() + " " + model + " --inputs " + inputs + " --outputs " + out_path + " --device " +
                                  device,
                              &out),
                  0)
            << out;
        const Tensor got = array(out_path, "logits");
        ASSERT_EQ(got.dims, want.dims);
        const int64_t classes = got.numel() / got.dims[0];
        for (int64_t r = 0; r < got.dims[0]; ++r)
          for (int64_t c = 0; c < classes; ++c) {
            const double v = got.element(r * classes + c);
            if (r == kBad) {
              // On a GPU, cuBLASLt's and cuDNN's fused ReLU epilogues map NaN to 0 (README, known
              // limits): the sample may come out finite there.
              if (device == "cpu") {
                EXPECT_TRUE(std::isnan(v)) << "sample " << r << " class " << c << ": " << v;
              }
            } else {
              ASSERT_TRUE(std::isfinite(v)) << "sample " << r << " class " << c;
              if (std::string(dtype) == "fp32" && device == "cpu") {
                EXPECT_NEAR(v, want.element(r * classes + c), 1e-4) << "sample " << r << " class " << c;
              }
            }
          }
        if (device == "cpu") {
          EXPECT_NE(out.find("output 'logits' has " + std::to_string(classes) +
                             " NaN and 0 inf in 1 of 4 samples, the first sample 2"),
                    std::string::npos)
              << out;
        }
      }
    }
  }
}

// AffineGrid (opset 20), read through its opset-17 form (graph/onnx_newer_opsets.cc), against
// torch.nn.functional.affine_grid (tests/frontends/affine_grid_reference.py): 2-D and 3-D,
// align_corners 0 and 1, the four float types (16-bit ones against the grid of the widened theta
// in float32, rounded once), size a constant or a graph input, an extent of 1.
TEST(AmpRun, Opset20AffineGridMatchesTorch) {
  const std::string dir = temp_dir("amp_run_affine_grid");
  std::string names;
  ASSERT_EQ(run_python(source_dir() + "/tests/frontends/affine_grid_reference.py " + dir, &names), 0) << names;
  std::istringstream lines(names);
  int cases = 0;
  for (std::string name; std::getline(lines, name);) {
    if (name.rfind("affine_grid", 0) != 0) continue;  // torch's warnings
    ++cases;
    const std::string base = dir + "/" + name;
    std::string out;
    ASSERT_EQ(run_command(amp_run() + " " + base + ".onnx --inputs " + base + ".in.npz --outputs " + base + ".out.npz", &out), 0)
        << out;
    EXPECT_NE(out.find("AffineGrid: its function body"), std::string::npos) << out;
    const Tensor got = array(base + ".out.npz", "grid"), want = array(base + ".ref.npz", "grid");
    ASSERT_EQ(got.dtype, want.dtype) << name;
    ASSERT_EQ(got.dims, want.dims) << name;
    if (is_low_precision(want.dtype)) {
      // Computed in float32 and rounded once, as the reference: one 16-bit step apart where the
      // float32 results (coordinates by another formula, a few roundings) straddle a rounding
      // boundary, or a few float32 roundings apart near 0.
      for (int64_t i = 0; i < want.numel(); ++i) {
        const int steps = std::abs(ordered16(got.as<uint16_t>()[i]) - ordered16(want.as<uint16_t>()[i]));
        EXPECT_TRUE(steps <= 1 || std::abs(got.element(i) - want.element(i)) <= 4e-7)
            << name << " [" << i << "]: " << got.element(i) << " vs " << want.element(i);
      }
      continue;
    }
    double scale = 0, err = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::abs(want.element(i)));
      err = std::max(err, std::abs(got.element(i) - want.element(i)));
    }
    // A few roundings of the coordinates and the product with theta.
    EXPECT_LE(err / scale, want.dtype == DType::kDouble ? 1e-14 : 4e-7) << name;
  }
  EXPECT_EQ(cases, 7);
}

}  // namespace
}  // namespace amp::test
