// amp-rewrite --html / amp-inspect --html and --explain: the chain of reasons read back from a
// written model's decision records is, node for node, the one amp-rewrite computed in memory when
// it wrote it (so the page, which shows the recorded chain, shows what amp-rewrite --explain
// prints); the page is one file that names nothing outside itself. The page in a browser:
// tests/browser/page_tests.sh (ctest -L browser).
#include <gtest/gtest.h>

#include <set>


#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string explain_args(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += " --explain '" + n + "'";
  return s;
}

class HtmlPage : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(HtmlPage, RecordedChainsAreAmpRewritesAndThePageIsSelfContained) {
  const auto& [model, dtype] = GetParam();
  const std::string dir = test::temp_dir("html_page_" + model + dtype);
  const std::string in = test::source_dir() + "/models/" + model;
  std::string rewrite_out, inspect_out;
  const std::string rewrite = test::binary_dir() + "/amp-rewrite " + in + " -o " + dir + "/out.onnx --dtype " + dtype +
                              " --html " + dir + "/page.html";
  ASSERT_EQ(test::run_command(rewrite + " 2>&1", &rewrite_out), 0) << rewrite_out;
  // The input's nodes that are still in the rewrite (LayerNorm recognition replaces some chains).
  const Model input = load_model(in), output = load_model(dir + "/out.onnx");
  std::set<std::string> kept;
  for (const Node* n : output.graph->nodes()) kept.insert(n->name);
  std::vector<std::string> names;
  for (const Node* n : input.graph->nodes())
    if (!n->name.empty() && kept.count(n->name)) names.push_back(n->name);
  ASSERT_GT(names.size(), 10u);
  ASSERT_EQ(test::run_command("(" + rewrite + " --force" + explain_args(names) + " 2>/dev/null)", &rewrite_out), 0)
      << rewrite_out;
  ASSERT_EQ(test::run_command(test::binary_dir() + "/amp-inspect " + dir + "/out.onnx" + explain_args(names) + " 2>&1",
                              &inspect_out),
            0)
      << inspect_out;
  EXPECT_EQ(inspect_out, rewrite_out);
  // Some chains are longer than one line: `from` was followed.
  EXPECT_NE(rewrite_out.find("reached from"), std::string::npos);

  const std::string page = test::read_file(dir + "/page.html");
  for (const std::string& name : names) EXPECT_NE(page.find("\"" + name + "\""), std::string::npos) << name;
  // Nothing to fetch: no src= or import, no request calls, url() only of the page's own ids, and
  // the one address is the SVG namespace's (a name, never fetched).
  for (const char* fetch : {"src=", "@import", "fetch(", "XMLHttpRequest", "<link", "<iframe"})
    EXPECT_EQ(page.find(fetch), std::string::npos) << fetch;
  for (size_t at = page.find("://"); at != std::string::npos; at = page.find("://", at + 3))
    EXPECT_EQ(page.substr(at >= 4 ? at - 4 : 0, 30), "http://www.w3.org/2000/svg';\n ");
  for (size_t at = page.find("url("); at != std::string::npos; at = page.find("url(", at + 4))
    EXPECT_EQ(page.substr(at, 5), "url(#");
}

INSTANTIATE_TEST_SUITE_P(Models, HtmlPage,
                         ::testing::Values(std::make_pair(std::string("cnn.onnx"), std::string("fp16")),
                                           std::make_pair(std::string("gpt.onnx"), std::string("fp16")),
                                           std::make_pair(std::string("gpt.onnx"), std::string("bf16"))),
                         [](const auto& info) {
                           return info.param.first.substr(0, info.param.first.find('.')) + "_" + info.param.second;
                         });

TEST(HtmlPage, ExplainNeedsRecordsAndAKnownNode) {
  const std::string dir = test::temp_dir("html_page_errors");
  std::string out;
  EXPECT_EQ(test::run_command(test::binary_dir() + "/amp-inspect " + test::source_dir() + "/models/cnn.onnx --explain /conv1/Conv 2>&1", &out), 2);
  EXPECT_NE(out.find("no decision records"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(test::binary_dir() + "/amp-rewrite " + test::source_dir() + "/models/cnn.onnx -o " + dir +
                                  "/cnn.amp.onnx 2>&1",
                              &out),
            0);
  EXPECT_EQ(test::run_command(test::binary_dir() + "/amp-inspect " + dir + "/cnn.amp.onnx --explain nowhere 2>&1", &out), 2);
  EXPECT_NE(out.find("no node named 'nowhere'"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::binary_dir() + "/amp-inspect " + dir + "/cnn.amp.onnx --html " + dir + "/no/such/dir/p.html 2>&1", &out), 2);
  EXPECT_NE(out.find("no such directory"), std::string::npos) << out;
}

}  // namespace
}  // namespace amp
