// `amp-rewrite --calibrate` on the small models of calibration_models.py: a model built to overflow
// in one node (calibration keeps that node and what reads its values, nothing else, and the result
// is finite and as accurate on held-out inputs as the same function without the overflow, against
// numpy's float64), one that needs nothing kept (the same bytes as the plain rewrite), an
// ill-conditioned one whose input rounding alone exceeds E (the floor, checked against numpy, is
// reported and nothing written), bad data (one line naming file and input, exit 2), and the
// in-memory entry point a binding calls.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "frontends/lib/calibrate.h"
#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using nlohmann::json;

std::string tool(const std::string& name) { return test::binary_dir() + "/" + name; }

class Calibrate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("calibrate"));
    std::string out;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/calibration_models.py " + *dir_, &out), 0) << out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string path(const std::string& name) { return *dir_ + "/" + name; }

  // amp-rewrite MODEL --calibrate DATA ... -o OUT --report OUT.json; stderr and stdout in `out`.
  int rewrite(const std::string& model, const std::string& args, std::string* out) {
    return test::run_command(tool("amp-rewrite") + " " + path(model) + " " + args + " 2>&1", out);
  }
  // max |y - ref| / max |ref| of amp-run's output of `model` on heldout.npz against numpy's float64.
  double heldout_error(const std::string& model) {
    std::string out;
    EXPECT_EQ(test::run_command(tool("amp-run") + " " + model + " --inputs " + path("heldout.npz") + " --outputs " +
                                    model + ".out.npz 2>&1",
                                &out),
              0)
        << out;
    const Tensor y = read_npz(model + ".out.npz").at(0).second;
    const Tensor ref = read_npz(path("heldout_ref.npz")).at(0).second;
    double err = 0, top = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      if (!std::isfinite(y.element(i))) return INFINITY;
      err = std::max(err, std::fabs(y.element(i) - ref.element(i)));
      top = std::max(top, std::fabs(ref.element(i)));
    }
    return err / top;
  }

  static std::string* dir_;
};
std::string* Calibrate::dir_ = nullptr;

TEST_F(Calibrate, KeepsTheOverflowingNodeAndOnlyWhatReadsItsValues) {
  std::string out;
  ASSERT_EQ(rewrite("overflow.onnx", "--calibrate " + path("calib.npz") + " -o " + path("overflow.cal.onnx") +
                                         " --report " + path("overflow.json") + " --explain fc2",
                    &out),
            0)
      << out;
  const json cal = json::parse(test::read_file(path("overflow.json")))["calibration"];
  std::set<std::string> kept;
  for (const json& k : cal["kept"]) kept.insert(k["node"].get<std::string>());
  // fc2's values reach ~1e6; relu2 and fc3 read them: in fp16 each would round its input to inf.
  EXPECT_EQ(kept, (std::set<std::string>{"fc2", "relu2", "fc3"})) << cal.dump(1);
  EXPECT_EQ(cal["error_op_list"], "inf");
  EXPECT_TRUE(cal["reached"]);
  for (const json& k : cal["kept"]) {
    EXPECT_EQ(k["why"], "overflow");
    EXPECT_GT(k["overflow"].get<int64_t>(), 0);
  }
  // fc1 is the only product left in fp16: 16x32 of the 16x32 + 32x32 + 32x8 multiply-adds per row.
  EXPECT_EQ(cal["macs"]["total"].get<int64_t>(), 64 * (16 * 32 + 32 * 32 + 32 * 8));
  EXPECT_EQ(cal["macs"]["low_calibrated"].get<int64_t>(), 64 * 16 * 32);
  // Three evaluations to measure and see the op lists fail, one with the overflowing nodes kept.
  EXPECT_EQ(cal["evaluations"].get<int>(), 4);
  EXPECT_NE(out.find("fc2 (MatMul): fp32, calibration: kept fp32 by calibration: its own fp16 result overflows"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  measured: own_error=inf, overflow="), std::string::npos) << out;
  EXPECT_NE(out.find("calibration: kept 3 nodes in fp32"), std::string::npos) << out;

  // Judged on other inputs: finite, and within the fp16 error of the same function without the
  // overflow (healthy.onnx's op-list rewrite), both against float64.
  ASSERT_EQ(rewrite("healthy.onnx", "-o " + path("healthy.fp16.onnx"), &out), 0) << out;
  ASSERT_EQ(rewrite("overflow.onnx", "-o " + path("overflow.fp16.onnx"), &out), 0) << out;
  const double own = heldout_error(path("healthy.fp16.onnx"));
  EXPECT_GT(own, 1e-5);  // fp16 rounding shows
  EXPECT_FALSE(std::isfinite(heldout_error(path("overflow.fp16.onnx"))));
  EXPECT_LE(heldout_error(path("overflow.cal.onnx")), own);

  // The record in the written model, as ONNX's Python reads it.
  ASSERT_EQ(test::run_python("-c \"import onnx; m = onnx.load('" + path("overflow.cal.onnx") +
                                 "'); print([n.doc_string for n in m.graph.node if n.name == 'fc2'][0])\"",
                             &out),
            0)
      << out;
  EXPECT_EQ(out.rfind("amp: fp32 calibration: kept fp32 by calibration: ", 0), 0u) << out;
  EXPECT_NE(out.find("\namp.own_error: inf\namp.overflow: "), std::string::npos) << out;
}

TEST_F(Calibrate, AModelThatNeedsNothingIsTheOpListRewrite) {
  std::string out;
  ASSERT_EQ(rewrite("healthy.onnx", "-o " + path("healthy.plain.onnx"), &out), 0) << out;
  ASSERT_EQ(rewrite("healthy.onnx", "--calibrate " + path("calib.npz") + " -o " + path("healthy.cal.onnx") +
                                        " --report " + path("healthy.json"),
                    &out),
            0)
      << out;
  const json cal = json::parse(test::read_file(path("healthy.json")))["calibration"];
  EXPECT_TRUE(cal["kept"].empty()) << cal.dump(1);
  EXPECT_TRUE(cal["reached"]);
  EXPECT_TRUE(cal["target_is_default"]);
  EXPECT_EQ(cal["evaluations"].get<int>(), 3);
  EXPECT_LE(cal["error_op_list"].get<double>(), cal["target"].get<double>());
  EXPECT_EQ(cal["macs"]["low_calibrated"], cal["macs"]["total"]);
  EXPECT_EQ(test::read_file(path("healthy.cal.onnx")), test::read_file(path("healthy.plain.onnx")));
  EXPECT_NE(out.find("calibration: kept 0 nodes in fp32"), std::string::npos) << out;
}

TEST_F(Calibrate, BelowTheFloorSaysSoAndWritesNothing) {
  const json floor = json::parse(test::read_file(path("ill_floor.json")));
  std::string out;
  const std::string args = "--calibrate " + path("ill_calib.npz") + " --max-error 1e-3 -o " + path("ill.cal.onnx") +
                           " --report " + path("ill.json");
  EXPECT_EQ(rewrite("ill.onnx", args, &out), 2) << out;
  EXPECT_NE(out.find("cannot reach E 0.001 in fp16: rounding the inputs alone to fp16's precision already moves the outputs by"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Nothing written"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(path("ill.cal.onnx")));
  EXPECT_FALSE(std::filesystem::exists(path("ill.json")));

  ASSERT_EQ(rewrite("ill.onnx", args + " --write-unmet", &out), 0) << out;
  const json cal = json::parse(test::read_file(path("ill.json")))["calibration"];
  EXPECT_TRUE(cal["below_floor"]);
  EXPECT_FALSE(cal["reached"]);
  // The floor amp-rewrite measured (fp32 on rounded inputs) is numpy's float64 one.
  EXPECT_NEAR(cal["floor_inputs"].get<double>(), floor["floor_inputs"].get<double>(),
              1e-2 * floor["floor_inputs"].get<double>());
  EXPECT_NE(out.find("calibration: warning: cannot reach E"), std::string::npos) << out;
}

TEST_F(Calibrate, BadDataIsOneLineNamingTheFileAndInput) {
  const std::string bad = path("bad.npz");
  struct Case {
    std::vector<std::pair<std::string, Tensor>> arrays;
    std::string message;
  };
  Tensor wrong_width(DType::kFloat, {4, 15});
  Tensor ok(DType::kFloat, {4, 16});
  Tensor doubles(DType::kDouble, {4, 16});
  Tensor nan(DType::kFloat, {4, 16});
  nan.mutable_as<float>()[5] = NAN;
  const std::vector<Case> cases = {
      {{{"x", wrong_width}}, bad + ": input 'x': shape [4,15], the model's input is float[N,16]"},
      {{{"x", ok}, {"labels", ok}}, bad + ": array 'labels' is not an input of " + path("healthy.onnx") + " (its inputs: x)"},
      {{{"y", ok}}, bad + ": array 'y' is not an input of " + path("healthy.onnx") + " (its inputs: x)"},
      {{{"x", doubles}}, bad + ": input 'x': double array, the model's input is float[N,16]"},
      {{{"x", nan}}, bad + ": input 'x': value 5 is nan: calibration compares finite outputs"},
  };
  for (const Case& c : cases) {
    write_npz(bad, c.arrays);
    std::string out;
    EXPECT_EQ(rewrite("healthy.onnx", "--calibrate " + bad + " -o " + path("bad.onnx"), &out), 2) << out;
    EXPECT_EQ(out, "amp-rewrite: error: " + c.message + "\n");
    EXPECT_FALSE(std::filesystem::exists(path("bad.onnx")));
  }
}

// Without keep_io_types an evaluation whose input is fp16 gets the data converted as a caller
// converts it (clamped to 65504): values beyond the range crashed calibration (a null clamp record).
// x 1e5 overflows fc1 on its own, so every node is kept and x stays fp32 in the rewrite.
TEST_F(Calibrate, DataBeyondFp16sRangeForFp16Inputs) {
  Tensor big = read_npz(path("calib.npz")).at(0).second;
  for (int64_t i = 0; i < big.numel(); ++i) big.mutable_as<float>()[i] *= 1e5f;
  write_npz(path("big.npz"), {{"x", big}});
  std::string out;
  ASSERT_EQ(rewrite("healthy.onnx", "--no-keep-io-types --calibrate " + path("big.npz") + " -o " + path("big.cal.onnx") +
                                        " --report " + path("big.json"),
                    &out),
            0)
      << out;
  const json cal = json::parse(test::read_file(path("big.json")))["calibration"];
  EXPECT_TRUE(cal["reached"]) << cal.dump(1);
  EXPECT_EQ(cal["kept"].front()["node"], "fc1") << cal.dump(1);
  EXPECT_EQ(cal["kept"].front()["why"], "overflow");
  EXPECT_EQ(load_model(path("big.cal.onnx")).graph->inputs().front()->dtype(), DType::kFloat);
}

// amp-train --calibrate: the step's forward keeps the same nodes fp32, so the first step's loss is
// finite (NaN without) and within fp16's rounding of the fp32 step's (2 unit roundoffs, 2^-10).
TEST_F(Calibrate, TrainingStepKeepsTheSameNodes) {
  write_npz(path("train.npz"), {{"x", read_npz(path("calib.npz")).at(0).second}, {"labels", Tensor(DType::kFloat, {64, 8})}});
  auto first_loss = [&](const std::string& args) {
    std::string out;
    EXPECT_EQ(test::run_command(tool("amp-train") + " " + path("overflow.onnx") + " --data " + path("train.npz") +
                                    " --loss mse --steps 1 --batch-size 64 --no-shuffle --metrics " + path("m.jsonl") +
                                    " " + args + " 2>&1",
                                &out),
              0)
        << out;
    const std::string log = test::read_file(path("m.jsonl"));
    const json step = json::parse(log.substr(0, log.find('\n')));
    return std::make_pair(step["loss"].is_null() ? NAN : step["loss"].get<double>(), out);
  };
  const double fp32 = first_loss("--dtype fp32").first;
  EXPECT_TRUE(std::isnan(first_loss("--dtype fp16").first));
  const auto [calibrated, out] = first_loss("--dtype fp16 --calibrate " + path("calib.npz"));
  EXPECT_NEAR(calibrated, fp32, std::ldexp(fp32, -10)) << out;
  EXPECT_NE(out.find("kept 3 nodes in fp32 (3 overflow, 0 error): fc2 (MatMul), relu2 (Relu), fc3 (MatMul)"),
            std::string::npos)
      << out;
}

// What a binding (onnx_amp.rewrite(..., calibrate=feeds)) calls: the model and feeds in memory.
TEST_F(Calibrate, InMemoryEntryPointMatchesTheCommand) {
  const Model m = load_model(path("overflow.onnx"));
  Feeds feeds = read_npz(path("calib.npz"));
  AmpPolicy policy;
  const CalibrationResult r = calibrate(m, feeds, policy, {});
  std::set<std::string> kept;
  for (const KeptNode& k : r.kept) kept.insert(k.node);
  EXPECT_EQ(kept, (std::set<std::string>{"fc2", "relu2", "fc3"}));
  r.apply(policy);
  ASSERT_NE(policy.calibrated_nodes().count("fc3"), 0u);
  EXPECT_EQ(policy.calibrated_nodes().at("fc3").measurements.at(0).first, "own_error");
  // A top-1 metric sees the same overflow (NaN rows disagree) and needs the same nodes.
  CalibrationOptions top1;
  top1.metric = CalibrationMetric::kTop1;
  const CalibrationResult t = calibrate(m, feeds, AmpPolicy(), top1);
  EXPECT_EQ(t.kept.size(), 3u);
  EXPECT_EQ(t.error_calibrated, 0);
}

}  // namespace
}  // namespace amp
