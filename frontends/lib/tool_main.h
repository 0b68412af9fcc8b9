// The shared shape of every amp-* command: parse with CLI11, run, and turn failures into one clear
// error line and the documented exit code (0 success, 2 bad input or usage, 1 internal failure).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace amp {

enum ExitCode { kExitOk = 0, kExitInternal = 1, kExitBadInput = 2 };

// Parses argv into app, then calls body; any exception becomes "<tool>: error: <what>" on stderr.
int tool_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

}  // namespace amp
