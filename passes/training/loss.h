// The loss a training step minimises: a scalar graph output the model already computes, or one
// appended to a model output from the command line. Appended losses are the numerically stable
// forms (softmax cross entropy through log-softmax, BCE through log(1 + exp(-|x|))), mean-reduced
// over the batch, computed in fp32 (fp64 for a float64 model).
#pragma once

#include <optional>
#include <string>

#include "graph/model.h"

namespace amp {

enum class LossKind { kCrossEntropy, kMse, kBceWithLogits };
std::optional<LossKind> loss_kind_from_name(const std::string& name);  // "cross_entropy", "mse", "bce_with_logits"
const char* loss_kind_name(LossKind k);

struct LossSpec {
  std::optional<LossKind> kind;  // unset: the model's own scalar output is the loss
  std::string target;            // the output the loss reads (or that is the loss); "" picks the only one
  std::string labels = "labels"; // name of the graph input that receives the labels
};

struct LossInfo {
  Value* loss = nullptr;    // scalar fp32 (fp64 for a float64 target)
  Value* target = nullptr;  // the model output the loss was appended to (null for a model's own loss)
  Value* labels = nullptr;  // the labels input (null for a model's own loss)
  bool classification = false;  // accuracy is meaningful: argmax of target vs labels
};

// For a classification loss: the count of rows whose largest score is the label (ArgMax over the
// last axis, ties to the first class, Equal, summed as a float scalar), made a graph output, so a
// training step reports its accuracy by fetching one number rather than every score (a language
// model's scores are batch x tokens x vocabulary: GPT-2's at 16 x 1024 tokens are 1.6 GB in bf16).
// Null for other losses.
Value* add_correct_count(Graph& g, const LossInfo& info);

// Appends the loss (or finds the model's own) and makes it a graph output. Labels for cross
// entropy are int64 class indices shaped like the target without its last (class) axis; targets
// of rank > 2 are flattened to [rows, classes]. MSE and BCE labels are float, shaped like the
// target. Throws InputError naming the model for a missing or ambiguous target.
LossInfo add_loss(Model& m, const LossSpec& spec);

}  // namespace amp
