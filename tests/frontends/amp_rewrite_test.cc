// amp-rewrite as a user runs it: exit codes and one-line errors, the --report JSON checked against
// python3-onnx's reading of the written model, --explain, config files and list edits, blocked
// nodes, --no-keep-io-types, --weights lowp, idempotence through the command line, the default
// output beside the input (never replacing a file unasked) and --force's atomic replacement.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace amp {
namespace {

using nlohmann::json;

std::string tool() { return test::binary_dir() + "/amp-rewrite"; }
std::string model(const std::string& name) { return test::source_dir() + "/models/" + name; }

// Runs amp-rewrite with `args`; returns the exit code, output in `out`.
int rewrite(const std::string& args, std::string* out) { return test::run_command(tool() + " " + args, out); }

json reference(const std::string& path) {
  std::string out;
  EXPECT_EQ(test::run_python(test::source_dir() + "/tests/frontends/amp_rewrite_reference.py " + path, &out), 0) << out;
  return json::parse(out);
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(AmpRewrite, ReportAgreesWithTheWrittenModel) {
  const std::string dir = test::temp_dir("amp_rewrite_report");
  std::string out;
  ASSERT_EQ(rewrite(model("gpt.onnx") + " -o " + dir + "/gpt16.onnx --report " + dir + "/report.json", &out), 0) << out;
  EXPECT_NE(out.find("nodes: "), std::string::npos) << out;
  const json report = json::parse(test::read_file(dir + "/report.json"));
  const json ref = reference(dir + "/gpt16.onnx");
  EXPECT_EQ(ref["check"], "");
  EXPECT_EQ(report["casts"]["after"], ref["casts"]);
  EXPECT_EQ(ref["metadata"]["onnx-amp.rewrite"], "dtype=fp16 keep_io_types=true weights=keep cast_placement=compute");
  for (const auto& [name, type] : ref["outputs"].items()) EXPECT_EQ(type, 1) << name;  // float, as before
  int low = 0;
  for (const json& n : report["nodes"]) {
    const std::string name = n["node"].get<std::string>().substr(0, n["node"].get<std::string>().find(" ("));
    ASSERT_TRUE(ref["nodes"].contains(name)) << name;
    const json& r = ref["nodes"][name];
    // The record in the file says what the report says...
    EXPECT_EQ(r["record"], "amp: " + n["precision"].get<std::string>() + " " + n["rule"].get<std::string>() + ": " +
                               n["reason"].get<std::string>());
    // ...and a low node's floating outputs are float16 in the file (a Cast's is its 'to').
    if (n["precision"] == "fp16" && n["op"] != "Cast") {
      ++low;
      EXPECT_EQ(r["float_outputs"], json::array({"float16"})) << name;
    }
  }
  EXPECT_EQ(report["nodes_per_precision"]["fp16"].get<int>(), low + [&] {
    int casts = 0;
    for (const json& n : report["nodes"]) casts += n["op"] == "Cast" && n["precision"] == "fp16";
    return casts;
  }());
  EXPECT_GT(low, 20);
}

TEST(AmpRewrite, ExplainPrintsTheChainOfReasons) {
  const std::string dir = test::temp_dir("amp_rewrite_explain");
  std::string out;
  // The summary goes to stderr, the explanation to stdout: keep stdout alone.
  const std::string cmd = tool() + " " + model("gpt.onnx") + " -o " + dir + "/g.onnx --explain /blocks.0/attn/Where";
  // The attention mask's Where, between the scaled scores and the softmax: with the Casts at the
  // consumers (autocast's placement) it runs in its inputs' precision, back to the product...
  ASSERT_EQ(test::run_command("{ " + cmd + " --cast-placement consumer 2>/dev/null; }", &out), 0) << out;
  EXPECT_EQ(out,
            "/blocks.0/attn/Where (Where): fp16, inputs-low: all its inputs are low precision\n"
            "/blocks.0/attn/Mul (Mul): fp16, inputs-low: all its inputs are low precision\n"
            "/blocks.0/attn/MatMul (MatMul): fp16, allow-list: MatMul is on the allow list: matrix product: tensor "
            "cores, fp32 accumulation (autocast: matmul, bmm)\n");
  // ...and by default, with each Cast beside an op that computes, in fp32 beside the softmax.
  ASSERT_EQ(test::run_command("{ " + cmd + " 2>/dev/null; }", &out), 0) << out;
  EXPECT_EQ(out,
            "/blocks.0/attn/Where (Where): fp32, next-to-fp32: data movement next to fp32 /blocks.0/attn/Softmax "
            "(Softmax): the Cast goes beside the op that computes (cast placement 'compute')\n"
            "/blocks.0/attn/Softmax (Softmax): fp32, deny-list: Softmax is on the deny list: sums of exponentials "
            "overflow fp16 (autocast: softmax in fp32)\n");
}

TEST(AmpRewrite, RewritingTheOutputAgainGivesTheSameBytes) {
  const std::string dir = test::temp_dir("amp_rewrite_twice");
  std::string out;
  for (const char* m : {"gpt.onnx", "cnn.onnx"}) {
    ASSERT_EQ(rewrite(model(m) + " -o " + dir + "/once.onnx --dtype bf16 --weights lowp", &out), 0) << out;
    ASSERT_EQ(rewrite(dir + "/once.onnx -o " + dir + "/twice.onnx --dtype bf16 --weights lowp", &out), 0) << out;
    EXPECT_EQ(test::read_file(dir + "/once.onnx"), test::read_file(dir + "/twice.onnx")) << m;
    EXPECT_NE(out.find("casts: 0 inserted, 0 retargeted, 0 removed"), std::string::npos) << out;
  }
}

TEST(AmpRewrite, ConfigFileAndFlagsEditTheListsTogether) {
  const std::string dir = test::temp_dir("amp_rewrite_config");
  test::write_file(dir + "/policy.json", R"({"dtype": "bf16", "allow": ["-Conv"], "block_nodes": ["/fc/.*"],
                                              "cast_placement": "consumer", "min_magnitude": 1e-7})");
  std::string out;
  ASSERT_EQ(rewrite(model("cnn.onnx") + " -o " + dir + "/c.onnx --config " + dir + "/policy.json --dtype fp16 --report " +
                        dir + "/r.json 2>&1",
                    &out),
            0)
      << out;
  const json report = json::parse(test::read_file(dir + "/r.json"));
  EXPECT_EQ(report["dtype"], "fp16");  // the flag wins over the file
  EXPECT_EQ(report["cast_placement"], "consumer");
  EXPECT_FLOAT_EQ(report["min_magnitude"].get<float>(), 1e-7f);
  for (const json& n : report["nodes"]) {
    if (n["op"] == "Conv") {
      EXPECT_EQ(n["rule"], "not-listed") << n["node"];
    }
    if (n["node"].get<std::string>().rfind("/fc/", 0) == 0) {
      EXPECT_EQ(n["rule"], "blocked") << n["node"];
    }
  }
}

TEST(AmpRewrite, NoKeepIoTypesAndLowPrecisionWeights) {
  const std::string dir = test::temp_dir("amp_rewrite_io");
  std::string out;
  ASSERT_EQ(rewrite(model("mlp.onnx") + " -o " + dir + "/m.onnx --no-keep-io-types --weights lowp", &out), 0) << out;
  const json ref = reference(dir + "/m.onnx");
  EXPECT_EQ(ref["check"], "");
  EXPECT_EQ(ref["inputs"]["input"], 10);
  EXPECT_EQ(ref["outputs"]["logits"], 10);
  EXPECT_EQ(ref["initializer_types"], json::array({"float16"}));
  EXPECT_EQ(ref["casts"], 0);
}

TEST(AmpRewrite, ReportsProductsThatAreNotMultiplesOfEight) {
  const std::string dir = test::temp_dir("amp_rewrite_align");
  std::string out;
  ASSERT_EQ(rewrite(model("mlp.onnx") + " -o " + dir + "/m.onnx --report " + dir + "/r.json", &out), 0) << out;
  const json report = json::parse(test::read_file(dir + "/r.json"));
  ASSERT_EQ(report["tensor_core_alignment"].size(), 1u) << report["tensor_core_alignment"].dump();
  const json& flagged = report["tensor_core_alignment"][0];
  EXPECT_EQ(flagged["op"], "Gemm");
  const json expected = json::parse(R"j([{"dim": "N (output columns)", "size": 10, "pad_to": 16, "padding": 6}])j");
  EXPECT_EQ(flagged["fixes"], expected);
}

TEST(AmpRewrite, WeightsStoredExternallyStayExternal) {
  const std::string dir = test::temp_dir("amp_rewrite_external");
  std::string out;
  ASSERT_EQ(test::run_python("-c \"import onnx; onnx.save(onnx.load('" + model("gpt.onnx") + "'), '" + dir +
                                 "/ext.onnx', save_as_external_data=True, location='ext.onnx.data', size_threshold=0)\"",
                             &out),
            0)
      << out;
  ASSERT_EQ(rewrite(dir + "/ext.onnx -o " + dir + "/out.onnx", &out), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out.onnx.data"));
  EXPECT_LT(std::filesystem::file_size(dir + "/out.onnx"), std::filesystem::file_size(dir + "/out.onnx.data"));
  EXPECT_EQ(reference(dir + "/out.onnx")["check"], "");
}

TEST(AmpRewrite, BadInputIsOneErrorLineAndExitCode2) {
  const std::string dir = test::temp_dir("amp_rewrite_bad");
  test::write_file(dir + "/junk.onnx", "not a model");
  test::write_file(dir + "/bad.json", R"({"allow": ["MatMul"], "colour": "blue"})");
  test::write_file(dir + "/placement.json", R"({"cast_placement": "nowhere"})");
  const std::string m = model("mlp.onnx") + " -o " + dir + "/out.onnx";
  const std::pair<std::string, std::string> cases[] = {
      {dir + "/junk.onnx -o " + dir + "/out.onnx", "junk.onnx"},
      {m + " --allow Softmax --deny Softmax", "Softmax is put on two lists"},
      {m + " --allow NotAnOp", "'NotAnOp' on the allow list (command line) is not an ONNX op"},
      {m + " --deny -MatMul", "MatMul is not on that list"},
      {m + " --block-node '('", "bad node pattern '('"},
      {m + " --config " + dir + "/bad.json", "unknown key 'colour'"},
      {m + " --explain nowhere", "no node named 'nowhere'"},
      {m + " --dtype fp8", "--dtype"},
      {m + " --keep-io-types --no-keep-io-types", "excludes"},
      {m + " --cast-placement sideways", "--cast-placement"},
      {m + " --min-magnitude 2", "min_magnitude 2.000000: must be from 0 to 1"},
      {m + " --config " + dir + "/placement.json", "unknown cast placement 'nowhere' (compute or consumer)"},
      {model("mlp.onnx") + " -o " + model("mlp.onnx") + " --force", "is the input model"},
      {model("mlp.onnx") + " -o " + dir + "/missing/out.onnx", "no such directory"},
  };
  for (const auto& [args, message] : cases) {
    std::string out;
    EXPECT_EQ(rewrite(args, &out), 2) << args << "\n" << out;
    EXPECT_EQ(count_lines(out), 1) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
    EXPECT_EQ(out.rfind("amp-rewrite: error: ", 0), 0u) << out;
  }
}

TEST(AmpRewrite, WithoutOutputWritesBesideTheInputAndReplacesNothingUnasked) {
  const std::string dir = test::temp_dir("amp_rewrite_default_output");
  std::filesystem::copy_file(model("mlp.onnx"), dir + "/model.onnx");
  const std::string input = test::read_file(dir + "/model.onnx");
  auto in_dir = [&](const std::string& args, std::string* out) {
    return test::run_command("cd " + dir + " && " + tool() + " " + args, out);
  };
  std::string out;
  ASSERT_EQ(in_dir("model.onnx", &out), 0) << out;
  EXPECT_EQ(out.rfind("amp-rewrite: wrote model.amp.onnx from model.onnx (fp16, ", 0), 0u) << out;
  EXPECT_EQ(reference(dir + "/model.amp.onnx")["check"], "");
  EXPECT_EQ(reference(dir + "/model.amp.onnx")["metadata"]["onnx-amp.rewrite"], "dtype=fp16 keep_io_types=true weights=keep cast_placement=compute");
  const std::string first = test::read_file(dir + "/model.amp.onnx");

  // Again: refused in one line, nothing touched.
  EXPECT_EQ(in_dir("model.onnx --weights lowp", &out), 2) << out;
  EXPECT_EQ(out, "amp-rewrite: error: model.amp.onnx: exists; --force replaces it, -o writes elsewhere\n");
  EXPECT_EQ(test::read_file(dir + "/model.amp.onnx"), first);
  // bf16 has a name of its own, so both rewrites of a model sit side by side.
  ASSERT_EQ(in_dir("model.onnx --dtype bf16", &out), 0) << out;
  EXPECT_EQ(out.rfind("amp-rewrite: wrote model.amp-bf16.onnx from model.onnx (bf16, ", 0), 0u) << out;
  EXPECT_EQ(reference(dir + "/model.amp-bf16.onnx")["metadata"]["onnx-amp.rewrite"],
            "dtype=bf16 keep_io_types=true weights=keep cast_placement=compute");
  // --force replaces it with what was asked for.
  ASSERT_EQ(in_dir("model.onnx --weights lowp --force", &out), 0) << out;
  EXPECT_EQ(reference(dir + "/model.amp.onnx")["metadata"]["onnx-amp.rewrite"], "dtype=fp16 keep_io_types=true weights=lowp cast_placement=compute");
  // The input is never replaced, --force or not; a model not named .onnx gets the suffix added.
  EXPECT_EQ(in_dir("model.onnx -o ./model.onnx --force", &out), 2) << out;
  EXPECT_EQ(out, "amp-rewrite: error: ./model.onnx: is the input model; write the rewrite elsewhere (-o)\n");
  EXPECT_EQ(test::read_file(dir + "/model.onnx"), input);
  std::filesystem::copy_file(model("mlp.onnx"), dir + "/plain");
  ASSERT_EQ(in_dir("plain", &out), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/plain.amp.onnx"));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"model.amp-bf16.onnx", "model.amp.onnx", "model.onnx", "plain", "plain.amp.onnx"}));
}

TEST(AmpRewrite, ForcedRewriteThatFailsToWriteKeepsTheOldModelAndItsData) {
  // The model file (1.7 MB of small inline constants) is larger than its data file (one weight:
  // 1 MB in fp32, 0.5 MB in fp16). With files limited to 1.2 MB, a --force --weights lowp rewrite
  // writes its data file and fails on the model file: the old pair must stay as it was (were the
  // new data renamed into place first, the old model would name bytes past its end).
  const std::string dir = test::temp_dir("amp_rewrite_force_atomic");
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/external_heavy_model.py " + dir + "/big.onnx", &out), 0)
      << out;
  ASSERT_EQ(rewrite(dir + "/big.onnx", &out), 0) << out;
  EXPECT_EQ(out.rfind("amp-rewrite: wrote " + dir + "/big.amp.onnx and " + dir + "/big.amp.onnx.data from ", 0), 0u) << out;
  const std::string model_bytes = test::read_file(dir + "/big.amp.onnx"), data_bytes = test::read_file(dir + "/big.amp.onnx.data");
  ASSERT_GT(model_bytes.size(), size_t{1200} << 10);
  ASSERT_EQ(data_bytes.size(), 1000000u);
  // SIGXFSZ ignored: a write past the limit fails with EFBIG instead of killing the process.
  EXPECT_EQ(test::run_command("bash -c \"ulimit -f 1200; trap '' XFSZ; exec " + tool() + " " + dir +
                                  "/big.onnx --force --weights lowp\"",
                              &out),
            1)
      << out;
  EXPECT_NE(out.find("File too large"), std::string::npos) << out;
  EXPECT_EQ(count_lines(out), 1) << out;
  EXPECT_EQ(test::read_file(dir + "/big.amp.onnx"), model_bytes);
  EXPECT_EQ(test::read_file(dir + "/big.amp.onnx.data"), data_bytes);
  EXPECT_EQ(reference(dir + "/big.amp.onnx")["check"], "");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  // Without the limit the same command replaces both.
  ASSERT_EQ(rewrite(dir + "/big.onnx --force --weights lowp", &out), 0) << out;
  EXPECT_EQ(std::filesystem::file_size(dir + "/big.amp.onnx.data"), 500000u);
  EXPECT_EQ(reference(dir + "/big.amp.onnx")["metadata"]["onnx-amp.rewrite"], "dtype=fp16 keep_io_types=true weights=lowp cast_placement=compute");
}

TEST(AmpRewrite, VerifyEachRunsEveryPassChecked) {
  const std::string dir = test::temp_dir("amp_rewrite_verify");
  std::string out;
  ASSERT_EQ(rewrite(model("gpt.onnx") + " -o " + dir + "/g.onnx --verify-each --report " + dir + "/r.json", &out), 0) << out;
  const json report = json::parse(test::read_file(dir + "/r.json"));
  std::vector<std::string> passes;
  for (const json& p : report["passes"]) passes.push_back(p["pass"]);
  EXPECT_EQ(passes, (std::vector<std::string>{"name-nodes", "recognize-layer-norm", "cast-cleanup", "flatten-linear",
                                              "amp-colour", "amp-insert-casts", "cast-cleanup", "amp-record-decisions"}));
  // In each of gpt's two blocks the attention's input projection and the MLP's first layer read a
  // LayerNorm's output on 3-D tokens.
  EXPECT_EQ(report["passes"][3]["stats"]["linear layers flattened"], 4) << report["passes"][3].dump();
  EXPECT_NE(out.find("  linear layers: 4 batched MatMul + bias on 2-D rows"), std::string::npos) << out;
}

// A graph output ONNX's inference leaves unranked (after a Reshape to Shape(x), as in opset 21's
// GroupNormalization body) is written with the shape the shape rules give it: the full checker
// requires one on every graph output.
TEST(AmpRewrite, AnOutputOnnxCannotRankIsWrittenWithItsShape) {
  const std::string dir = test::temp_dir("rewrite_unranked");
  const std::string script = test::source_dir() + "/tests/frontends/unranked_output_model.py";
  std::string out;
  ASSERT_EQ(test::run_python(script + " make " + dir + "/m.onnx", &out), 0) << out;
  ASSERT_EQ(rewrite(dir + "/m.onnx -o " + dir + "/m.amp.onnx", &out), 0) << out;
  ASSERT_EQ(test::run_python(script + " check " + dir + "/m.amp.onnx", &out), 0) << out;
  EXPECT_NE(out.find("[1, 4, 3, 3]"), std::string::npos) << out;
}

// Opset 18's ops that opset 17 has no node for, carried into ai.onnx_amp for amp-run, are written
// as opset-17 ops that compute the same: BitwiseAnd / Or / Xor / Not as arithmetic on their bits,
// Col2Im as a ScatterElements add, ScatterElements and ScatterND with reduction max / min as a
// comparison of the indices with every row, DeformConv as GatherElements sampling and a MatMul. The rewrite passes the full checker, and ONNX Runtime computes
// from it, at its default and at no optimization, what its own kernels compute from the published
// model: in all eight integer types on their extremes (bit for bit), Col2Im 2-D with dilations,
// pads and strides (within 1e-6); 1-D and 3-D Col2Im, which ONNX Runtime computes wrongly, against
// numpy's computation of ONNX's definition; the scatters' max and min with repeated and negative
// indices in float and integer data; DeformConv with groups, offset groups, a mask, bias, stride,
// dilation and pads (within 1e-5).
TEST(AmpRewrite, NewerOpsWithoutAnOpset17NodeBecomeOpset17OpsThatOnnxRuntimeRunsAlike) {
  const std::string ort = test::source_dir() + "/tests/ort";
  if (!std::filesystem::exists(ort + "/node_modules/onnxruntime-node") || test::run_command("node --version", nullptr) != 0)
    GTEST_SKIP() << "ONNX Runtime is not installed: cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install";
  const std::string dir = test::temp_dir("rewrite_newer_ops");
  const std::string script = test::source_dir() + "/tests/frontends/newer_ops_rewrite_check.py";
  std::string out;
  ASSERT_EQ(test::run_python(script + " make " + dir, &out), 0) << out;
  for (const auto& [name, outputs] : {std::pair<std::string, int>{"bitwise", 34}, {"col2im", 2}, {"col2im_nd", 2}, {"scatter", 8}, {"deform", 2}}) {
    SCOPED_TRACE(name);
    const std::string model = dir + "/" + name + ".onnx", rewritten = dir + "/" + name + ".amp.onnx";
    ASSERT_EQ(rewrite(model + " -o " + rewritten, &out), 0) << out;
    EXPECT_NE(out.find("written as the opset-17 ops that compute"), std::string::npos) << out;
    ASSERT_EQ(test::run_python("-c \"import onnx; m = onnx.load('" + rewritten + "'); "
                               "onnx.checker.check_model(m, full_check=True); "
                               "print(sorted({n.op_type for n in m.graph.node if n.domain not in ('', 'ai.onnx')}))\"",
                               &out),
              0)
        << out;
    EXPECT_NE(out.find("[]"), std::string::npos) << out;  // no ai.onnx_amp node left
    for (const std::string level : {"all", "disabled"}) {
      const std::string run = "ORT_GRAPH_OPTIMIZATION=" + level + " node " + ort + "/run_model.js ";
      const std::string in = dir + "/" + name + "_in", published = dir + "/" + name + "_published_" + level,
                        ours = dir + "/" + name + "_rewrite_" + level;
      ASSERT_EQ(test::run_command(run + rewritten + " " + in + " " + ours, &out), 0) << out;
      if (name == "col2im_nd") {  // ONNX Runtime's Col2Im is wrong there (microsoft/onnxruntime#18156): numpy
        ASSERT_EQ(test::run_python(script + " col2im " + dir + " " + ours, &out), 0) << level << ": " << out;
        EXPECT_NE(out.find(std::to_string(outputs) + " outputs as numpy computes them"), std::string::npos) << out;
        continue;
      }
      ASSERT_EQ(test::run_command(run + model + " " + in + " " + published, &out), 0) << out;
      // DeformConv's sums of C / group * K products run in another order: 1e-5.
      ASSERT_EQ(test::run_python(script + " compare " + published + " " + ours + (name == "deform" ? " 1e-5" : ""), &out), 0)
          << level << ": " << out;
      EXPECT_NE(out.find(std::to_string(outputs) + " outputs equal"), std::string::npos) << out;
    }
  }
}

}  // namespace
}  // namespace amp
