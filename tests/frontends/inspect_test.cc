// amp-inspect's figures for the models/ exports agree with python3-onnx's reading of the same
// files; its text, --nodes and --dot outputs are well formed; bad input gives one error line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "tests/support/fp16_conv_chain_model.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using nlohmann::json;

std::string inspect_bin() { return test::binary_dir() + "/amp-inspect"; }

class InspectModels : public ::testing::TestWithParam<std::string> {};

TEST_P(InspectModels, JsonMatchesPythonOnnx) {
  const std::string model = test::source_dir() + "/models/" + GetParam();
  std::string ours, ref;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json " + model + " 2>/dev/null", &ours), 0) << ours;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/inspect_reference.py " + model, &ref), 0) << ref;
  json a = json::parse(ours), b = json::parse(ref);
  for (const char* key : {"nodes", "ops", "node_precisions", "parameters", "parameter_bytes", "casts", "ir_version", "opsets"})
    EXPECT_EQ(a[key], b[key]) << key;
  std::vector<std::string> in, out;
  for (const auto& v : a["inputs"]) in.push_back(v["name"]);
  for (const auto& v : a["outputs"]) out.push_back(v["name"]);
  EXPECT_EQ(json(in), b["inputs"]);
  EXPECT_EQ(json(out), b["outputs"]);
  EXPECT_GT(a["parameters"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, InspectModels,
                         ::testing::Values("mlp.onnx", "mlp.train.onnx", "cnn.onnx", "cnn.train.onnx", "gpt.onnx",
                                           "gpt.train.onnx"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '.') c = '_';
                           return s;
                         });

TEST(Inspect, RewrittenModelShowsPrecisionAndReason) {
  const std::string dir = test::temp_dir("inspect_rewrite");
  const std::string model = dir + "/gpt.amp.onnx";
  std::string out, ref;
  ASSERT_EQ(test::run_command(test::binary_dir() + "/amp-rewrite " + test::source_dir() + "/models/gpt.onnx -o " +
                                  model + " 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json " + model + " 2>/dev/null", &out), 0) << out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/inspect_reference.py " + model, &ref), 0) << ref;
  json a = json::parse(out), b = json::parse(ref);
  EXPECT_EQ(a["node_precisions"], b["node_precisions"]);
  EXPECT_GT(b["node_precisions"]["float16"].get<int>(), 0);
  EXPECT_EQ(a["casts"], b["casts"]);
  ASSERT_TRUE(a.contains("rewrite"));
  EXPECT_GT(a["rewrite"]["decisions"]["fp16 allow-list"].get<int>(), 0);
  ASSERT_EQ(test::run_command(inspect_bin() + " --nodes " + model + " 2>/dev/null", &out), 0);
  EXPECT_NE(out.find("why: allow-list: MatMul"), std::string::npos) << out.substr(0, 2000);
}

// gpt.onnx's two layers each compute attention as MatMul, Mul, Where(triu buffer), Softmax,
// MatMul: amp-inspect counts them as the chains amp-train fuses; the MLP and CNN have none.
TEST(Inspect, CountsTheAttentionChainsAmpTrainFuses) {
  std::string out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json " + test::source_dir() + "/models/gpt.onnx 2>/dev/null", &out), 0);
  const json a = json::parse(out)["attention_chains"];
  EXPECT_EQ(a["total"], 2);
  EXPECT_EQ(a["causal"], 2);
  EXPECT_EQ(a["masked"], 0);
  ASSERT_EQ(test::run_command(inspect_bin() + " " + test::source_dir() + "/models/gpt.onnx 2>/dev/null", &out), 0);
  EXPECT_NE(out.find("attention:  2 MatMul-Softmax-MatMul chains"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json " + test::source_dir() + "/models/cnn.onnx 2>/dev/null", &out), 0);
  EXPECT_EQ(json::parse(out)["attention_chains"]["total"], 0);
}

TEST(Inspect, NodesAndDot) {
  const std::string dir = test::temp_dir("inspect");
  const std::string model = test::source_dir() + "/models/cnn.onnx";
  std::string out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --nodes --dot " + dir + "/cnn.dot " + model, &out), 0) << out;
  EXPECT_NE(out.find("Conv"), std::string::npos);
  EXPECT_NE(out.find("float[N,16,28,28]"), std::string::npos) << out;  // shapes come from shape inference
  std::string dot = test::read_file(dir + "/cnn.dot");
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("fillcolor=\"#9ecae1\""), std::string::npos);  // fp32 nodes are coloured
  // Graphviz itself accepts the file.
  EXPECT_EQ(test::run_command("dot -Tsvg " + dir + "/cnn.dot -o " + dir + "/cnn.svg", &out), 0) << out;
}

// --cuda-plan works out what the cuda backend would run without a device: every node of the
// model (python3-onnx's count) is in one device unit, one view, one host step or read through
// (the attention's Split, composed into the head transposes' copies), and the arena
// needs no more than the sum of its buffers and no less than what is live at once.
TEST(Inspect, CudaPlanPlacesEveryNodeAndSizesTheArena) {
  const std::string model = test::source_dir() + "/models/gpt.onnx";
  std::string out, ref;
#if AMP_HAVE_CUDA
  ASSERT_EQ(test::run_command(inspect_bin() + " --json --cuda-plan --dim N=4 --dim T=16 " + model + " 2>&1", &out), 0) << out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/inspect_reference.py " + model, &ref), 0) << ref;
  const json plan = json::parse(out)["cuda_plan"];
  const int64_t nodes = json::parse(ref)["nodes"].get<int64_t>();
  EXPECT_EQ(plan["nodes"].get<int64_t>(), nodes);
  int64_t placed = plan["host_steps"].get<int64_t>() + plan["read_through"].get<int64_t>();
  int64_t host_by_op = 0;  // the host steps, counted again by op type
  for (const auto& [op, n] : plan["host_step_ops"].items()) host_by_op += n.get<int64_t>();
  EXPECT_EQ(host_by_op, plan["host_steps"].get<int64_t>());
  EXPECT_GT(plan["host_step_ops"].value("Shape", 0), 0) << "the attention's head shapes are computed while planning";
  for (const auto& [kind, n] : plan["views"].items()) placed += n.get<int64_t>();
  for (const auto& u : plan["units"]) placed += u["nodes"].get<int64_t>();
  EXPECT_EQ(placed, nodes);
  EXPECT_GT(plan["read_through"].get<int64_t>(), 0) << "the attention's Split runs inside its head transposes";
  EXPECT_EQ(plan["device_units"].get<size_t>(), plan["units"].size());
  EXPECT_GT(plan["views"].value("Reshape", 0), 0) << "the attention's head reshapes move no byte";
  const auto& mem = plan["memory"];
  EXPECT_GE(mem["arena_bytes"].get<int64_t>(), mem["peak_live_bytes"].get<int64_t>());
  EXPECT_LE(mem["arena_bytes"].get<int64_t>(), mem["without_reuse_bytes"].get<int64_t>());
  EXPECT_GT(mem["peak_live_bytes"].get<int64_t>(), 4 * 16 * 64 * 4) << "at least one [N,T,64] fp32 activation";
  // Traffic: every unit reads its operands and writes its results once. mlp.onnx at N=64 is three
  // fp32 Gemms, 784 -> 128 -> 64 -> 10 (models/torch_models.py), after a Flatten that is a view.
  ASSERT_EQ(test::run_command(inspect_bin() + " --json --cuda-plan --dim N=64 " + test::source_dir() +
                                  "/models/mlp.onnx 2>&1",
                              &out),
            0)
      << out;
  const json mlp = json::parse(out)["cuda_plan"];
  auto gemm_bytes = [](int64_t n, int64_t in, int64_t out_features) {
    return 4 * (n * in + out_features * in + out_features + n * out_features);  // X, W, b, Y
  };
  EXPECT_EQ(mlp["memory"]["moved_bytes"].get<int64_t>(), gemm_bytes(64, 784, 128) + gemm_bytes(64, 128, 64) + gemm_bytes(64, 64, 10));
  EXPECT_EQ(mlp["views"].value("Flatten", 0), 1);
  // The text form lists the same units, one line each.
  ASSERT_EQ(test::run_command(inspect_bin() + " --cuda-plan --dim N=4 --dim T=16 " + model + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("MatMul+Add"), std::string::npos) << out;
  EXPECT_NE(out.find("device units: " + std::to_string(plan["device_units"].get<int>())), std::string::npos) << out;
  // A dim left out is one error line naming the input and the dim.
  EXPECT_EQ(test::run_command(inspect_bin() + " --cuda-plan --dim N=4 " + model + " 2>&1", &out), 2);
  EXPECT_NE(out.find("input 'tokens'"), std::string::npos) << out;
  EXPECT_NE(out.find("--dim T=VALUE"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(test::run_command(inspect_bin() + " --cuda-plan --dim N=four " + model + " 2>&1", &out), 2) << out;
#else
  EXPECT_EQ(test::run_command(inspect_bin() + " --cuda-plan --dim N=4 --dim T=16 " + model + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("no CUDA backend"), std::string::npos) << out;
#endif
}

#if AMP_HAVE_CUDA
// The zoo's ScatterND (Swin) and Einsum (MaxViT) and the training gradients of Pad and Resize run
// on the device: --cuda-plan gives each a device unit (it refused the model while the cuda backend
// had no kernel for them), and an Einsum that is not one product is one error line naming the node.
TEST(Inspect, CudaPlanRunsScatterNDEinsumPadGradAndResizeGradOnTheDevice) {
  const std::string dir = test::temp_dir("inspect_zoo_ops");
  auto ints = [](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    Tensor t(DType::kInt64, std::move(dims));
    for (size_t k = 0; k < v.size(); ++k) t.mutable_as<int64_t>()[k] = v[k];
    t.name = name;
    return t;
  };
  auto build = [&](const std::string& equation, std::vector<int64_t> einsum_dims) {
    Model m;
    m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
    Graph& g = *m.graph;
    g.name = "zoo_ops";
    auto input = [&](const std::string& name, std::vector<int64_t> dims) {
      return g.add_input(name, ValueType::tensor(DType::kFloat, Shape::of(dims)));
    };
    auto output = [&](Node* n, std::vector<int64_t> dims) {
      n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of(dims)));
      g.add_output(n->output(0));
    };
    Value* shape = g.add_initializer(ints("shape", {4}, {1, 2, 4, 5}));
    Node* pad = g.add_node("PadGrad", {input("dy_pad", {1, 2, 7, 8}), g.add_initializer(ints("pads", {8}, {0, 0, 1, 2, 0, 0, 2, 1})), shape},
                           {"dx_pad"}, kAmpDomain);
    pad->set_attr(Attribute::of_string("mode", "reflect"));
    output(pad, {1, 2, 4, 5});
    Tensor scales(DType::kFloat, {4});
    for (int k = 0; k < 4; ++k) scales.mutable_as<float>()[k] = k < 2 ? 1.0f : 2.0f;
    scales.name = "scales";
    Node* resize = g.add_node("ResizeGrad", {input("dy_resize", {1, 2, 8, 10}), shape, g.add_initializer(scales)}, {"dx_resize"},
                              kAmpDomain);
    resize->set_attr(Attribute::of_string("mode", "linear"));
    output(resize, {1, 2, 4, 5});
    Node* einsum = g.add_node("Einsum", {input("q", {2, 3, 5, 8}), input("k", {2, 3, 4, 8})}, {"scores"});
    einsum->name = "attn_scores";
    einsum->set_attr(Attribute::of_string("equation", equation));
    output(einsum, einsum_dims);
    Node* scatter = g.add_node("ScatterND", {input("data", {4, 6}), g.add_initializer(ints("idx", {2, 1}, {3, 0})), input("u", {2, 6})},
                               {"scattered"});
    output(scatter, {4, 6});
    save_model(m, dir + "/zoo_ops.onnx");
  };
  build("bhid,bhjd->bhij", {2, 3, 5, 4});
  std::string out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json --cuda-plan " + dir + "/zoo_ops.onnx 2>&1", &out), 0) << out;
  const json plan = json::parse(out)["cuda_plan"];
  std::vector<std::string> kinds;
  for (const auto& u : plan["units"]) kinds.push_back(u["kind"].get<std::string>());
  for (const char* op : {"PadGrad", "ResizeGrad", "Einsum", "ScatterND"})
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), op), kinds.end()) << op << " has no device unit:\n" << out;
  build("bhid,bhjd->bhi", {2, 3, 5});  // j summed within the second operand alone
  EXPECT_EQ(test::run_command(inspect_bin() + " --cuda-plan " + dir + "/zoo_ops.onnx 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("attn_scores (Einsum)"), std::string::npos) << out;
  EXPECT_NE(out.find("unsupported Einsum equation 'bhid,bhjd->bhi'"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// An fp16 convolution chain (tests/support/fp16_conv_chain_model.h: Cast, Conv 3x3, Relu, MaxPool,
// Conv 1x1, Cast back): --cuda-plan shows
// the convolutions and the pool computing channels-last (backends/cuda/channels_last.h), the
// values between them stored so, the Casts transposing as they convert (no unit of their own), and
// one transpose around each 3x3 convolution for its weights (an initializer, kept as ONNX lays it
// out; a 1x1 filter is the same bytes both ways), counted in the traffic.
TEST(Inspect, CudaPlanShowsAnFp16ConvolutionChainChannelsLast) {
  const std::string dir = test::temp_dir("inspect_channels_last");
  const Model m = test::fp16_conv_chain_model(false);
  save_model(m, dir + "/conv_chain.onnx");

  std::string out;
  ASSERT_EQ(test::run_command(inspect_bin() + " --json --cuda-plan " + dir + "/conv_chain.onnx 2>&1", &out), 0) << out;
  const json plan = json::parse(out)["cuda_plan"];
  int nhwc = 0, conversions = 0;
  int64_t conversion_bytes = 0;
  for (const auto& u : plan["units"]) {
    const std::string kind = u["kind"].get<std::string>();
    const bool layout_op = kind.rfind("Conv", 0) == 0 || kind == "MaxPool";
    EXPECT_EQ(u["layout"].get<std::string>() == "NHWC", layout_op) << kind;
    nhwc += layout_op;
    for (const auto& c : u["conversions"]) {
      ++conversions;
      conversion_bytes += 2 * c["bytes"].get<int64_t>();
      EXPECT_EQ(c["value"].get<std::string>(), "w3") << kind << " transposes " << c;
      EXPECT_EQ(c["to"].get<std::string>(), "NHWC");
    }
  }
  EXPECT_EQ(nhwc, 3) << out;
  EXPECT_EQ(conversions, 1) << out;
  EXPECT_EQ(plan["channels_last"]["units"].get<int>(), 3);
  EXPECT_EQ(plan["channels_last"]["conversion_bytes"].get<int64_t>(), 2 * 16 * 8 * 3 * 3 * 2);
  EXPECT_EQ(conversion_bytes, plan["channels_last"]["conversion_bytes"].get<int64_t>());
  // The same model planned row-major moves exactly the transposes' bytes fewer.
  ASSERT_EQ(test::run_command("AMP_CUDA_CHANNELS_LAST=0 " + inspect_bin() + " --json --cuda-plan " + dir +
                                  "/conv_chain.onnx 2>&1",
                              &out),
            0)
      << out;
  const json row_major = json::parse(out)["cuda_plan"];
  EXPECT_EQ(row_major["channels_last"]["units"].get<int>(), 0);
  EXPECT_EQ(row_major["memory"]["moved_bytes"].get<int64_t>() + conversion_bytes,
            plan["memory"]["moved_bytes"].get<int64_t>());
  ASSERT_EQ(test::run_command(inspect_bin() + " --cuda-plan " + dir + "/conv_chain.onnx 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("[computes NHWC]"), std::string::npos) << out;
  EXPECT_NE(out.find("[transposes w3 to NHWC]"), std::string::npos) << out;
  EXPECT_NE(out.find("float16[2,16,12,12] NHWC"), std::string::npos) << out;
  EXPECT_NE(out.find("layout:       3 units compute channels-last (NHWC); 1 transposes"), std::string::npos) << out;
}
#endif

TEST(Inspect, BadInputIsOneLineAndExitCode2) {
  const std::string dir = test::temp_dir("inspect_bad");
  test::write_file(dir + "/junk.onnx", "this is not a model");
  std::string out;
  EXPECT_EQ(test::run_command(inspect_bin() + " " + dir + "/junk.onnx", &out), 2);
  EXPECT_NE(out.find("junk.onnx"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(test::run_command(inspect_bin() + " " + dir + "/missing.onnx", &out), 2);
  EXPECT_EQ(test::run_command(inspect_bin() + " --no-such-flag x", &out), 2);
}

}  // namespace
}  // namespace amp
