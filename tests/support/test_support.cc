#include "tests/support/test_support.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace amp::test {

namespace fs = std::filesystem;

static std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string source_dir() { return env_or("AMP_SOURCE_DIR", AMP_SOURCE_DIR); }
std::string binary_dir() { return env_or("AMP_BINARY_DIR", AMP_BINARY_DIR); }
std::string testdata_dir() { return env_or("AMP_TESTDATA", "/usr/share/libonnx-testdata/data"); }

std::string temp_dir(const std::string& tag) {
  // Per process: ctest runs the cases of one suite as parallel processes that would share the folder.
  fs::path p = fs::path(binary_dir()) / "test-tmp" / (tag + "." + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

int run_command(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* f = popen(full.c_str(), "r");
  if (!f) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int status = pclose(f);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run_python(const std::string& script_and_args, std::string* output) {
  return run_command(env_or("AMP_PYTHON", "/usr/bin/python3") + " " + script_and_args, output);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

}  // namespace amp::test
