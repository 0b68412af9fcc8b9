// onnxconverter-common's auto_convert_mixed_precision done with this project's rewrite and runner:
// rewrite with the op lists, run the rewrite and the fp32 model on the user's inputs, and when the
// outputs fail the user's check, search for the low-precision nodes to keep in fp32.
//
// The search is onnxconverter-common's segment bisection (its SegmentList): the candidates, in
// graph order, start as one segment; the largest undecided segment is tried in low precision
// together with the segments already accepted, every other candidate blocked; it is accepted when
// the check passes, split in halves when it fails, and kept fp32 when a single node fails. Here the
// candidates are only the nodes the op lists put in low precision (not every node of the graph,
// whose fp32 ops would all be "converted" and checked there), and the first attempt is the plain
// rewrite, which usually passes: one attempt instead of tens.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontends/lib/model_rewrite.h"
#include "frontends/lib/model_runner.h"
#include "frontends/lib/model_source.h"

namespace amp {

// True when `candidate` (the rewrite's outputs, graph order) is close enough to `reference` (the
// fp32 model's).
using OutputCheck = std::function<bool(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate)>;

// numpy.allclose(reference, candidate, rtol, atol) on every output: |r - c| <= atol + rtol * |c|,
// NaN equal to nothing; outputs of different element counts are not close.
bool outputs_close(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate, double rtol, double atol);

struct PrecisionSearch {
  RewrittenModel rewrite;              // the accepted rewrite
  std::vector<std::string> kept_fp32;  // nodes the search blocked, in graph order
  int attempts = 0;                    // rewrites run and checked
};

// InputError when the fp32 model fails the check against itself, or when no rewrite passes (the
// final one, with every failing node in fp32, is checked too).
PrecisionSearch search_fp32_nodes(const ModelSource& source, const RewriteSettings& settings, const NamedTensors& feeds,
                                  const OutputCheck& check, const RunSettings& run);

}  // namespace amp
