// The mixed-precision rewrite on every model of libonnx-testdata's pytorch-converted and
// pytorch-operator sets and on the models/ exports. For each model:
//   - the fp16 and the bf16 rewrites pass ONNX's full check (checker + strict shape inference) and
//     verify(), are topologically sorted, and keep the graph inputs' and outputs' names and types;
//   - rewriting the rewrite changes nothing: the second output file is byte-identical to the first;
//   - the fp16 rewrite runs in ONNX Runtime (onnxruntime-node, CPU) and its outputs match the fp32
//     model's, run in ONNX Runtime on the same inputs, within the tolerance below. The fp32 model is
//     the original as load_model reads it (upgraded to opset 17, which ONNX Runtime runs for every
//     model; some originals are at opsets it no longer supports), so the comparison isolates the
//     rewrite.
// bf16 is not run: ONNX Runtime's CPU provider has almost no bf16 kernels.
//
// Tolerance: for each float output, max|fp16 - fp32| <= 1e-2 * max(1, max|fp32|): ten fp16 units
// in the last place (epsilon 2^-10 ~ 9.8e-4) at the output's own scale, room for rounding the
// activations to fp16 at a few layers. Integer and bool outputs must be equal.
// ONNX Runtime's CPU provider has few fp16 kernels: it runs fp16 nodes in fp32 behind Casts of its
// own and drops fp32 -> fp16 -> fp32 pairs, so single-op models often match exactly and the errors
// measured here understate what fp16 kernels on a GPU give. What this proves is that the rewrite is
// a model ONNX Runtime loads and runs and that it computes the same function.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/tensor_proto.h"
#include "graph/verify.h"
#include "passes/pipelines.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-2;

// Models with no valid fp32 reference, and why. Each is still rewritten and checked; the test fails
// when the cause goes away, so the entry gets removed.
const std::map<std::string, std::string>& known_failures() {
  static const std::map<std::string, std::string> known = [] {
    const std::string prelu =
        "opset 6 PRelu with a per-channel slope [C]: ONNX's version converter upgrades it unchanged, and from "
        "opset 9 on the slope broadcasts against the last axis, so the upgraded fp32 model is invalid (ONNX Runtime: "
        "'Attempting to broadcast an axis by a dimension other than 1') and ONNX Runtime has no PRelu-6 to run the "
        "original";
    return std::map<std::string, std::string>{{"pytorch-converted/test_PReLU_1d_multiparam", prelu},
                                              {"pytorch-converted/test_PReLU_2d_multiparam", prelu},
                                              {"pytorch-converted/test_PReLU_3d_multiparam", prelu}};
  }();
  return known;
}

struct Case {
  std::string name;    // "pytorch-converted/test_Conv2d", "models/gpt"
  std::string model;   // path of the fp32 model
  std::string inputs;  // folder with input_N.pb; empty: generated
  std::string no_compare;  // why outputs are not compared ("" compares)
};

// Names the case in test listings instead of gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* set : {"pytorch-converted", "pytorch-operator"}) {
    const fs::path dir = fs::path(test::testdata_dir()) / set;
    if (!fs::exists(dir)) continue;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names)
      cases.push_back({std::string(set) + "/" + n, (dir / n / "model.onnx").string(), (dir / n / "test_data_set_0").string(), ""});
  }
  for (const char* m : {"mlp", "cnn", "gpt", "mlp.train", "cnn.train", "gpt.train"})
    cases.push_back({std::string("models/") + m, test::source_dir() + "/models/" + m + ".onnx", "",
                     std::string(m) == "cnn.train" ? "training-mode Dropout draws a new random mask in every run" : ""});
  return cases;
}

std::string full_check(const Model& m) {
  try {
    onnx::ModelProto proto = to_proto(m);
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string io_signature(const Model& m) {
  std::string s;
  for (const Value* v : m.graph->inputs()) s += "in " + v->name() + ":" + v->type().str() + "\n";
  for (const Value* v : m.graph->outputs()) s += "out " + v->name() + ":" + v->type().str() + "\n";
  return s;
}

// Rewrites `model` to `out`; "" or what went wrong.
std::string rewrite_file(const std::string& model, const std::string& out, DType target) {
  Model m = load_model(model);
  const std::string io_before = io_signature(m);
  AmpResult result;
  PassManager pm = amp_rewrite_pipeline(AmpPolicy(target), result, /*verify_each=*/true);
  pm.run(m);
  if (auto problems = verify(m); !problems.empty()) return "verify: " + problems[0];
  if (!m.graph->is_topologically_sorted()) return "not topologically sorted";
  if (io_signature(m) != io_before) return "graph inputs/outputs changed:\n" + io_before + "vs\n" + io_signature(m);
  if (std::string problem = full_check(m); !problem.empty()) return "onnx full check: " + problem;
  save_model(m, out);
  return "";
}

// Rewrite, check, rewrite the rewrite and compare bytes.
std::string rewrite_twice(const std::string& model, const std::string& out, DType target) {
  if (std::string e = rewrite_file(model, out, target); !e.empty()) return e;
  const std::string again = out + ".again.onnx";
  if (std::string e = rewrite_file(out, again, target); !e.empty()) return "second rewrite: " + e;
  if (test::read_file(out) != test::read_file(again)) {
    Model a = load_model(out), b = load_model(again);
    return "the second rewrite differs from the first: " + structural_diff(a, b);
  }
  return "";
}

void write_input(const std::string& path, const Tensor& t) {
  onnx::TensorProto proto;
  tensor_to_proto(t, &proto);
  std::ofstream(path, std::ios::binary) << proto.SerializeAsString();
}

// Inputs for the models/ exports: images for mlp and cnn, token ids for gpt, fixed seed.
void generate_inputs(const std::string& model, const std::string& dir) {
  std::mt19937 rng(1234);
  if (model.find("gpt") != std::string::npos) {
    Tensor t(DType::kInt64, {2, 16});
    t.name = "tokens";
    std::uniform_int_distribution<int64_t> ids(0, 63);
    for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<int64_t>()[i] = ids(rng);
    write_input(dir + "/input_0.pb", t);
  } else {
    Tensor t(DType::kFloat, {4, 1, 28, 28});
    t.name = "input";
    std::normal_distribution<float> pixels(0.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<float>()[i] = pixels(rng);
    write_input(dir + "/input_0.pb", t);
  }
}

Tensor read_output(const std::string& path) {
  onnx::TensorProto proto;
  std::ifstream in(path, std::ios::binary);
  if (!proto.ParseFromIstream(&in)) throw Error(path + ": not a TensorProto");
  ExternalDataReader external(path, fs::path(path).parent_path().string());
  return tensor_from_proto(proto, path, external);
}

// "" when the fp16 outputs match the fp32 ones; `figures` gets "max error / max reference" per output.
std::string compare_outputs(const std::string& ref_dir, const std::string& got_dir, std::string* figures) {
  if (!fs::exists(ref_dir + "/output_0.pb")) return "ONNX Runtime wrote no outputs (see ort.log)";
  for (int k = 0; fs::exists(ref_dir + "/output_" + std::to_string(k) + ".pb"); ++k) {
    const std::string file = "/output_" + std::to_string(k) + ".pb";
    if (!fs::exists(got_dir + file)) return "missing " + file;
    const Tensor ref = read_output(ref_dir + file), got = read_output(got_dir + file);
    if (ref.dtype != got.dtype || ref.dims != got.dims) return "output " + std::to_string(k) + ": type or shape differs";
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double a = ref.element(i), b = got.element(i);
      if (std::isnan(a) != std::isnan(b)) return "output " + std::to_string(k) + ": NaN at element " + std::to_string(i);
      if (std::isnan(a) || (std::isinf(a) && a == b)) continue;
      max_err = std::max(max_err, std::fabs(a - b));
      max_ref = std::max(max_ref, std::fabs(a));
    }
    std::ostringstream f;
    f << (k ? ", " : "") << max_err << " / " << max_ref;
    *figures += f.str();
    const double bound = is_floating(ref.dtype) ? kRelativeTolerance * std::max(1.0, max_ref) : 0.0;
    if (!(max_err <= bound))
      return "output " + std::to_string(k) + ": max error " + std::to_string(max_err) + " > " + std::to_string(bound);
  }
  return "";
}

struct Result {
  std::string fp16_rewrite, bf16_rewrite, ort, comparison, figures;
};

bool ort_available(std::string* why) {
  const std::string dir = test::source_dir() + "/tests/ort";
  if (!fs::exists(dir + "/node_modules/onnxruntime-node")) {
    *why = "ONNX Runtime is not installed: cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install";
    return false;
  }
  return test::run_command("node --version", nullptr) == 0 || (*why = "node is not on PATH", false);
}

// One case: its fp16 and bf16 rewrites, and ONNX Runtime on the fp32 model and the fp16 rewrite.
// Per case, not for all at once: CTest runs every case in a process of its own, and each would
// otherwise rewrite all 123 models again (a minute a case here).
Result compute(const Case& c) {
  Result r;
  std::string ort_why;
  const bool ort = ort_available(&ort_why);
  const std::string dir = test::temp_dir("amp_rewrite_conformance") + "/" + c.name;
  fs::create_directories(dir);
  auto guarded = [](const std::function<std::string()>& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      return std::string("threw: ") + e.what();
    }
  };
  r.fp16_rewrite = guarded([&] {
    save_model(load_model(c.model), dir + "/fp32.onnx");
    return rewrite_twice(c.model, dir + "/fp16.onnx", DType::kFloat16);
  });
  r.bf16_rewrite = guarded([&] { return rewrite_twice(c.model, dir + "/bf16.onnx", DType::kBFloat16); });
  if (!ort) {
    r.ort = ort_why;
    return r;
  }
  if (!r.fp16_rewrite.empty()) return r;
  std::string inputs = c.inputs;
  if (inputs.empty()) {
    inputs = dir + "/inputs";
    fs::create_directories(inputs);
    generate_inputs(c.model, inputs);
  }
  std::string jobs;
  for (const char* side : {"32", "16"}) jobs += dir + "/fp" + side + ".onnx\t" + inputs + "\t" + dir + "/out" + side + "\n";
  test::write_file(dir + "/jobs.txt", jobs);
  std::string log;
  test::run_command("node " + test::source_dir() + "/tests/ort/run_model.js --jobs " + dir + "/jobs.txt", &log);
  test::write_file(dir + "/ort.log", log);
  for (const char* side : {"/out32", "/out16"})
    if (fs::exists(dir + side + "/error.txt")) r.ort += std::string(side + 1) + ": " + test::read_file(dir + side + "/error.txt");
  if (r.ort.empty() && c.no_compare.empty()) r.comparison = compare_outputs(dir + "/out32", dir + "/out16", &r.figures);
  return r;
}

class AmpRewriteConformance : public ::testing::TestWithParam<Case> {};

TEST_P(AmpRewriteConformance, ValidIdempotentAndMatchesFp32InOnnxRuntime) {
  const Result r = compute(GetParam());
  EXPECT_EQ(r.fp16_rewrite, "") << "fp16";
  EXPECT_EQ(r.bf16_rewrite, "") << "bf16";
  if (r.ort.rfind("ONNX Runtime is not installed", 0) == 0 || r.ort == "node is not on PATH") GTEST_SKIP() << r.ort;
  if (auto known = known_failures().find(GetParam().name); known != known_failures().end()) {
    EXPECT_EQ(r.ort.rfind("out32: ", 0), 0u) << "the known failure is gone, remove it from known_failures(): " << r.ort;
    GTEST_SKIP() << "known failure: " << known->second;
  }
  EXPECT_EQ(r.ort, "");
  EXPECT_EQ(r.comparison, "");
  if (!GetParam().no_compare.empty()) GTEST_SKIP() << "runs in ONNX Runtime; outputs not compared: " << GetParam().no_compare;
  std::cout << "[ figures  ] " << GetParam().name << ": max |fp16 - fp32| / max |fp32| = " << r.figures << "\n";
}

INSTANTIATE_TEST_SUITE_P(Models, AmpRewriteConformance, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

}  // namespace
}  // namespace amp
