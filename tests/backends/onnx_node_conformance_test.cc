// ONNX's own node tests (libonnx-testdata: model.onnx + test_data_set_0/{input,output}_N.pb), and
// its PyTorch-export suites, on the CPU backend: every test whose ops are all in the CPU op table
// (backends/cpu/*_ops(), the elementwise ones one per row of graph/ops/elementwise_ops.inc) must
// reproduce the stored outputs (floats within rtol 1e-3 / atol 1e-5, fp16 within 1e-2 / 1e-3, integers and bools
// exactly), unless backends/cpu/conformance_exceptions.txt lists it with a reason. An exception
// that passes, or names no test, fails too: the list must stay true.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "backends/cpu/kernel.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/tensor_proto.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

namespace fs = std::filesystem;

// The default-domain ops the CPU backend has a kernel for.
std::set<std::string> claimed_ops() {
  std::set<std::string> ops;
  for (const cpu::OpEntry& e : cpu::op_table()) ops.insert(std::string(e.op));
  return ops;
}

// "test_name: reason" lines.
std::map<std::string, std::string> exceptions() {
  std::map<std::string, std::string> out;
  std::istringstream in(read_file(source_dir() + "/backends/cpu/conformance_exceptions.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    out[line.substr(0, colon)] = colon == std::string::npos ? "" : line.substr(colon + 1);
  }
  return out;
}

Tensor read_tensor_pb(const std::string& path) {
  onnx::TensorProto proto;
  std::ifstream in(path, std::ios::binary);
  if (!proto.ParseFromIstream(&in)) throw InputError(path + ": not a TensorProto");
  ExternalDataReader external(path, fs::path(path).parent_path().string());
  return tensor_from_proto(proto, path, external);
}

std::vector<Tensor> read_set(const fs::path& dir, const std::string& prefix) {
  std::vector<Tensor> out;
  for (size_t i = 0; fs::exists(dir / (prefix + std::to_string(i) + ".pb")); ++i)
    out.push_back(read_tensor_pb((dir / (prefix + std::to_string(i) + ".pb")).string()));
  return out;
}

// The op types of the model's graphs (subgraphs of If, Loop and Scan included), or nothing when a
// node is of a non-ONNX domain.
bool collect_ops(const onnx::GraphProto& g, std::set<std::string>& ops) {
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
    ops.insert(n.op_type());
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !collect_ops(a.g(), ops)) return false;
      for (const auto& sub : a.graphs())
        if (!collect_ops(sub, ops)) return false;
    }
  }
  return true;
}

std::optional<std::set<std::string>> ops_of(const std::string& model_path) {
  onnx::ModelProto proto;
  std::ifstream in(model_path, std::ios::binary);
  if (!proto.ParseFromIstream(&in)) return std::nullopt;
  std::set<std::string> ops;
  if (!collect_ops(proto.graph(), ops)) return std::nullopt;
  return ops;
}

std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype != want.dtype)
    return "type " + std::string(dtype_name(got.dtype)) + ", expected " + std::string(dtype_name(want.dtype));
  if (got.dims != want.dims) return "shape differs";
  const bool half = is_low_precision(want.dtype);
  const double rtol = half ? 1e-2 : 1e-3, atol = half ? 1e-3 : 1e-5;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.element(i), b = want.element(i);
    const bool ok = is_floating(want.dtype)
                        ? (a == b || (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= atol + rtol * std::abs(b))
                        : a == b;
    if (!ok) return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b);
  }
  return "";
}

// numpy has no bfloat16, so the test data stores bf16 tensors as uint16 bit patterns.
Tensor as_type(const Tensor& t, DType want) {
  if (t.dtype == DType::kUInt16 && want == DType::kBFloat16)
    return Tensor::from_bytes(want, t.dims, std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
  return t;
}

// "" on success, else why the test failed.
std::string run_node_test(const fs::path& dir) {
  try {
    const Model m = load_model((dir / "model.onnx").string());
    const fs::path data = dir / "test_data_set_0";
    const std::vector<Tensor> inputs = read_set(data, "input_"), outputs = read_set(data, "output_");
    std::vector<std::pair<std::string, Tensor>> feeds;
    size_t next = 0;
    for (const Value* v : m.graph->inputs()) {
      if (v->has_initializer()) continue;
      if (next == inputs.size()) break;  // trailing optional inputs left out
      feeds.emplace_back(v->name(), as_type(inputs[next++], v->dtype()));
    }
    std::vector<std::string> fetches;
    for (const Value* v : m.graph->outputs()) fetches.push_back(v->name());
    if (fetches.size() != outputs.size()) return "the test stores " + std::to_string(outputs.size()) + " outputs";
    const auto got = make_backend("cpu")->compile(m, {})->run(feeds, fetches);
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string diff = compare(got[i], as_type(outputs[i], m.graph->outputs()[i]->dtype()));
      if (!diff.empty()) return "output '" + fetches[i] + "': " + diff;
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Runs one libonnx-testdata suite ("node", and the PyTorch exports in "pytorch-converted",
// "pytorch-operator", "simple"); exceptions are keyed "<suite>/<test>".
class TestdataSuite : public ::testing::TestWithParam<const char*> {};

TEST_P(TestdataSuite, EveryTestOfClaimedOpsPasses) {
  const std::string suite = GetParam();
  const std::set<std::string> claimed = claimed_ops();
  std::map<std::string, std::string> excepted;
  for (const auto& [name, reason] : exceptions())
    if (name.rfind(suite + "/", 0) == 0) excepted.emplace(name, reason);
  int passed = 0, failed = 0, skipped_by_exception = 0;
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(testdata_dir() + "/" + suite)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    const std::string name = suite + "/" + dir.filename().string();
    const auto ops = ops_of((dir / "model.onnx").string());
    if (!ops || !std::includes(claimed.begin(), claimed.end(), ops->begin(), ops->end())) continue;
    const std::string why = run_node_test(dir);
    auto exception = excepted.find(name);
    if (exception != excepted.end()) {
      EXPECT_FALSE(why.empty()) << name << " passes but is listed as an exception (" << exception->second << ")";
      excepted.erase(exception);
      ++skipped_by_exception;
      continue;
    }
    if (why.empty()) {
      ++passed;
    } else {
      ++failed;
      ADD_FAILURE() << name << ": " << why;
    }
  }
  for (const auto& [name, reason] : excepted) ADD_FAILURE() << "exception " << name << " names no test of claimed ops";
  std::printf("%s: %d passed, %d failed, %d excepted\n", suite.c_str(), passed, failed, skipped_by_exception);
  EXPECT_GT(passed, 0);
}

INSTANTIATE_TEST_SUITE_P(Libonnx, TestdataSuite,
                         ::testing::Values("node", "pytorch-converted", "pytorch-operator", "simple"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace amp::test
