// Numerics-driven placement (`amp-rewrite --calibrate DATA.npz`, `amp-train --calibrate`): runs
// the model in fp32 and the op-list rewrite on calibration inputs with the CPU backend (whose
// 16-bit arithmetic rounds as a GPU does), measures every low-precision node on its own, and keeps
// in fp32 the fewest nodes, cheapest first, that bring every output within a tolerance E. The
// placement is expressed as AmpPolicy::keep_calibrated entries, so colouring decides those nodes
// fp32 with the rule "calibration" and the rest of the rewrite (casts, records, reports) is the
// ordinary one.
//
// Evaluations of the whole model, each one compile + run on the CPU backend:
//   1. the fp32 model with a 16-bit twin of every low-precision node beside it, fed the fp32
//      values its original reads rounded once (the node's own error, overflow and underflow);
//   2. the fp32 model with its inputs and the weights the op lists lower at 16-bit precision
//      (11 significant bits for fp16, 8 for bf16; fp32's range: overflow and underflow are what
//      placement removes): the floor, below which no 16-bit placement goes; the default E is
//      twice the floor (storing activations in 16 bits adds about as much again);
//   3. only when E is below the floor: the inputs alone at 16-bit precision, for the report;
//   4. the op-list rewrite (the error before);
//   5. with the nodes whose own 16-bit result overflows kept (one evaluation, all at once: an inf
//      reaches every output downstream);
//   6. then nodes whose own error is beyond what rounding explains, cheapest first, the rest by
//      error, in batches that double (1, 2, 4, ...), one evaluation per batch, and a bisection
//      inside the batch that reached E for its shortest sufficient prefix.
// A model that needs nothing takes 3 evaluations; log2 of the suspects more otherwise — not a
// search over the node list with one evaluation per candidate subset.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"
#include "graph/tensor.h"
#include "passes/amp/amp_policy.h"

namespace amp {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

enum class CalibrationMetric {
  kMaxRelative,  // per output: max |y - fp32| / max |fp32|; the model's error is the worst output's
  kTop1,         // per output of rank >= 1: share of rows (last axis) whose argmax differs from fp32's
};

struct CalibrationOptions {
  CalibrationMetric metric = CalibrationMetric::kMaxRelative;
  // E. Unset: twice the floor (the error of the fp32 model with its inputs and weights at 16-bit
  // precision).
  std::optional<double> max_error;
  // CPU threads of the evaluations (0: all cores). One by default: a calibration batch is small, so
  // every op's share of a parallel region is microseconds, and with the cores shared the threads
  // wait at each region's barrier for the one the scheduler took away (calibration_models.py's
  // ResNet-18 on the project's 2-core machine at load 8.5: 12.2 s with 2 threads, 2.0 s with 1).
  int threads = 1;
  // The forward of a training step (amp-train --calibrate): prepared as the step prepares it
  // (name-nodes, recognize-gelu, recognize-layer-norm) and measured in eval mode (Dropout off,
  // BatchNorm on its running statistics), so that every evaluation computes the same function.
  bool training_forward = false;
};

// One low-precision node of the op-list rewrite, computed alone in 16 bits from the fp32 values of
// its inputs (each rounded once, as its input Casts would) and compared with its fp32 output.
struct NodeMeasurement {
  std::string node, op;
  double local_error = 0;  // max |y16 - y32| / max |y32| over its floating outputs; inf on overflow
  int64_t overflow = 0;    // values finite in fp32 that are inf or NaN in 16 bits
  int64_t underflow = 0;   // values non-zero in fp32 that are zero in 16 bits
  int64_t values = 0;      // output values compared
  int64_t macs = 0;        // multiply-adds of a product (Conv, ConvTranspose, MatMul, Gemm); 0 otherwise
  int64_t cost() const { return macs > 0 ? macs : values; }  // what keeping it in fp32 costs
};

struct KeptNode {
  std::string node, op;
  int step = 0;            // the evaluation step that kept it (1: overflow)
  std::string why;         // "overflow" or "error"
  double error_before = 0, error_after = 0;  // the model's error before and after its step
  size_t kept_with = 0;    // other nodes kept in the same step
  NodeMeasurement measured;
};

struct CalibrationResult {
  std::string dtype;              // "fp16" / "bf16"
  CalibrationMetric metric = CalibrationMetric::kMaxRelative;
  double target = 0;              // E as used
  bool target_is_default = false;   // E was not given: twice the floor
  double floor_inputs = 0;        // error with only the inputs at 16-bit precision (measured when below_floor)
  double floor = 0;               // with the inputs and the weights at 16-bit precision
  double error_op_list = 0;       // the op-list rewrite's error (inf when it is not finite)
  double error_calibrated = 0;    // with `kept` in fp32
  std::string worst_output;       // the output with the largest error after calibration
  bool reached = false;           // error_calibrated <= target
  bool below_floor = false;       // target < floor: 16 bits cannot reach it, whatever is kept
  std::vector<NodeMeasurement> measured;  // every low-precision node of the op-list rewrite, graph order
  std::vector<KeptNode> kept;             // in the order they were kept
  int64_t macs_total = 0, macs_low_op_list = 0, macs_low_calibrated = 0;
  int evaluations = 0;
  double seconds = 0;
  // Where the seconds went: prepare (copy, prepare passes, colouring), measure (the twins' model
  // built and compared), floor, rewrite (each evaluation's copy and rewrite), compile, run, compare.
  std::vector<std::pair<std::string, double>> seconds_by_phase;

  // Puts every kept node into `policy` (AmpPolicy::keep_calibrated) with its reason and measurements.
  void apply(AmpPolicy& policy) const;
};

// Checks `feeds` against the model's inputs: every input without an initializer fed, every array
// an input, dtype, rank and static dims as declared, at least one value, all finite. Throws
// InputError "<source>: input '<name>': <what is wrong>".
void check_calibration_feeds(const Model& model, const Feeds& feeds, const std::string& source);

// Calibrates the placement of `policy` (its target, lists, blocked nodes, io and weight settings)
// for `model` (fp32, as loaded: the rewrite's preparing passes are run on a copy) on `feeds`.
// `source` names the feeds in errors. The model is not changed. When the target is below the floor
// the search still runs, for the default E (twice the floor), and the result says below_floor.
CalibrationResult calibrate(const Model& model, const Feeds& feeds, const AmpPolicy& policy,
                            const CalibrationOptions& options, const std::string& source = "calibration data");

// For --report (the "calibration" object) and the lines amp-rewrite and amp-train print.
nlohmann::ordered_json calibration_json(const CalibrationResult& r);
std::string calibration_summary_text(const CalibrationResult& r);
// When below_floor: what the floor is and why nothing was written, one paragraph.
std::string calibration_floor_text(const CalibrationResult& r);

const char* calibration_metric_name(CalibrationMetric m);  // "max-relative", "top1"
// "max-relative" / "top1"; InputError otherwise.
CalibrationMetric parse_calibration_metric(const std::string& s);

}  // namespace amp
