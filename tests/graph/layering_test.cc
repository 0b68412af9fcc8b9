// The README's layout rule, checked on every source file's project includes (#include "..."):
// graph/ includes graph/ only, and not graph/ops/ (amp_graph is the IR alone; amp_ops sits on
// it); graph/ops/ includes graph/; passes/ includes graph/ and passes/; backends/ includes graph/
// and backends/, never passes/. A file breaking it fails here, named with the include.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace amp::test {
namespace {

namespace fs = std::filesystem;

struct FolderRule {
  std::string folder;                 // files under it
  std::vector<std::string> allowed;   // include prefixes they may use
  std::vector<std::string> excepted;  // prefixes refused although an allowed one matches
};

const std::vector<FolderRule> kRules = {
    {"graph/ops/", {"graph/"}, {}},
    {"graph/", {"graph/"}, {"graph/ops/"}},
    {"passes/", {"graph/", "passes/"}, {}},
    {"backends/", {"graph/", "backends/"}, {}},
};

const FolderRule* rule_for(const std::string& path) {
  for (const FolderRule& r : kRules)
    if (path.rfind(r.folder, 0) == 0) return &r;
  return nullptr;
}

bool starts_with_any(const std::string& s, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (s.rfind(p, 0) == 0) return true;
  return false;
}

TEST(Layering, FoldersIncludeOnlyWhatTheyMayDependOn) {
  const fs::path root = source_dir();
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> broken;
  size_t files = 0;
  for (const char* top : {"graph", "passes", "backends"})
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh" && ext != ".inc"))
        continue;
      const std::string path = fs::relative(entry.path(), root).generic_string();
      const FolderRule* rule = rule_for(path);
      ASSERT_NE(rule, nullptr) << path;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int no = 1; std::getline(in, line); ++no) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[1];
        if (target.find('/') == std::string::npos) continue;  // a sibling ("foo.h"): same folder
        if (!starts_with_any(target, rule->allowed) || starts_with_any(target, rule->excepted))
          broken.push_back(path + ":" + std::to_string(no) + " includes \"" + target + "\"");
      }
    }
  EXPECT_GT(files, 100u);
  for (const std::string& b : broken) ADD_FAILURE() << b;
}

}  // namespace
}  // namespace amp::test
