// The accuracy's ArgMax read in the loss's pass over the scores.
//
// A classification step counts its correct predictions as ArgMax(scores, last axis) == labels
// (passes/training/loss.cc, add_correct_count). Its ArgMax read GPT-2's [tokens, 50257] scores
// once more after the loss had read them: 0.93 ms of a 45 ms step at 16 x 1024 tokens on an H200
// (2026-11-28). The loss's kernel keeps one block per row over the same elements, so it finds the
// row's ArgMax as well (cross_entropy.cu, with ArgMax's ties and NaNs: arg_best.cuh) and the
// ArgMax unit does not run.
//
// Pairs are found when the schedule is built: a SoftmaxCrossEntropyLoss unit and an ArgMax over the
// last axis whose input is the loss's scores (as the unit reads them, past a widening Cast it
// absorbed) or a Reshape of one from the other. A plan merges a pair where the two read the same
// bytes: one root (views), the loss's scores [N, C] and the ArgMax's N rows of C, one type. The
// merged unit runs where the earlier of the two ran, its inputs all written by then.
#pragma once

#include <vector>

#include "backends/cuda/schedule.h"
#include "graph/node.h"

namespace amp::cuda {

// The mergeable pairs among a schedule's fixed units (nodes: per program step, its node).
std::vector<MergedUnit> loss_argmax_candidates(const Program& program, const std::vector<std::unique_ptr<Unit>>& units,
                                               const std::vector<const Node*>& nodes);

// Replaces each pair that reads the same scores in p.order by its merged unit.
void merge_loss_argmax(const std::vector<MergedUnit>& candidates, ShapePlan& p);

}  // namespace amp::cuda
