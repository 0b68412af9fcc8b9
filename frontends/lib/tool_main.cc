#include "frontends/lib/tool_main.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <new>

#include "graph/error.h"

namespace amp {

int tool_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  // Logs go to stderr so stdout stays clean for --json and friends; SPDLOG_LEVEL=debug shows more.
  spdlog::set_default_logger(spdlog::stderr_color_mt("amp"));
  spdlog::set_pattern("%^%l%$: %v");
  spdlog::cfg::load_env_levels();
  const std::string tool = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return kExitBadInput;
  }
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", tool.c_str());
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", tool.c_str(), e.what());
    return kExitInternal;
  }
}

}  // namespace amp
