// Helpers shared by the tests: where the sources, build and test data are, running the Python
// references (/usr/bin/python3 with Debian's torch/onnx/numpy), and temporary folders.
#pragma once

#include <string>

namespace amp::test {

std::string source_dir();
std::string binary_dir();
std::string testdata_dir();  // libonnx-testdata's data folder
// A fresh empty folder under the build tree, private to this process (not removed afterwards).
std::string temp_dir(const std::string& tag);
// Runs a shell command; returns its exit code and fills `output` with stdout+stderr.
int run_command(const std::string& cmd, std::string* output);
// Runs /usr/bin/python3 with the given script path and arguments; exit code as above.
int run_python(const std::string& script_and_args, std::string* output);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& contents);

}  // namespace amp::test
