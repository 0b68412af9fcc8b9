// Time and size of the --html page of a model, the model already loaded (amp-inspect's load of a
// 2 GB training step takes longer than the page and is not the page's cost):
//
//   build/tests/bench_html_page MODEL [REPEATS]     (default 3)
//
// prints the model's nodes, the page's bytes, and the seconds html_page() took each time.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "frontends/lib/html_page.h"
#include "graph/onnx_io.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_html_page MODEL [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  amp::LoadOptions options;
  options.target_opset = 0;  // as amp-inspect loads it
  const amp::Model m = amp::load_model(argv[1], options);
  std::printf("%s: %lld nodes in the main graph%s\n", argv[1], static_cast<long long>(m.graph->num_nodes()),
              m.training_info.empty() ? "" : " (a training step: the page draws the whole step graph)");
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::string page = amp::html_page(m, {argv[1], nullptr});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("page %d: %.3f s, %zu bytes (%.2f MB)\n", i + 1, s, page.size(), page.size() / 1e6);
  }
  return 0;
}
