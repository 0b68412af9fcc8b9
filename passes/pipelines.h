// Every pass pipeline of the project, declared in one place: a command picks one, tests and
// benchmarks run the same list.
#pragma once

#include "passes/amp/amp_passes.h"
#include "passes/pass_manager.h"

namespace amp {

// amp-rewrite: name-nodes (reports and records name every node), recognize-layer-norm (a LayerNorm
// exported before opset 17 as ReduceMean ... Sqrt, Div becomes one LayerNormalization, which stays
// fp32; ONNX Runtime would otherwise fuse the chain together with its leading Cast from fp16 into
// a LayerNormalization it rejects), cast-cleanup (the model's own
// useless Casts would block colouring), amp-colour, amp-insert-casts, cast-cleanup (exact round
// trips the new Casts made with old ones), amp-record-decisions. The passes fill `result`, which
// must outlive the manager.
PassManager amp_rewrite_pipeline(const AmpPolicy& policy, AmpResult& result, bool verify_each);
// amp_rewrite_pipeline's first three passes (name-nodes, recognize-layer-norm, cast-cleanup): the
// model as colouring sees it, in fp32. Calibration measures that model; rewriting it again is a
// no-op for these passes, so its node names are the rewrite's.
PassManager amp_prepare_pipeline(bool verify_each = false);

}  // namespace amp
