// ONNX's own tools (checker, version converter, shape inference) dereference null pointers and
// index past the end on some malformed models (ONNX 1.12; found by fuzzing: Gemm-6 inference on a
// rank-0 input, the converter on an undefined graph output). Their failures must become an error
// message, not take the process down, so they are first rehearsed in a forked child.
#pragma once

#include <functional>
#include <string>

namespace amp {

// Runs `work` in a forked copy of this process (its effects stay there; exceptions count as
// finishing). Returns "" when the child finished, else what went wrong: "crashed with signal
// Segmentation fault", "did not finish within 300 s". Returns "" when fork itself fails.
std::string rehearse_in_child(const std::function<void()>& work, int timeout_seconds);

}  // namespace amp
