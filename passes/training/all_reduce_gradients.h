// Data-parallel training (DESIGN.md, "Data parallel as part of the step graph"): every process of
// the run trains a replica on its own part of the global batch, and the step averages what the
// batches made across the replicas with ai.onnx_amp AllReduce nodes, so every replica applies the
// same update and the state stays bit-identical on every rank. Averaged:
//  - the fp32 gradients as they leave the backward pass; with loss scaling still scaled, so the
//    inf/NaN check reads the average (an overflow on one rank makes every rank skip) and the
//    unscaling Mul reads it too; with --accumulate, the accumulated gradient, once per optimizer
//    step (the node's `reduce` input is the step's apply flag);
//  - BatchNorm's running statistics: each rank normalises with its own batch's statistics, as
//    PyTorch DDP does without SyncBatchNorm, and their average keeps every rank's state the same
//    (DDP broadcasts rank 0's instead).
// 16-bit gradients are reduced as the fp32 values the master weights receive: the average is then
// the single-process mean up to the order of a sum, and a sum of N scaled fp16 gradients cannot
// overflow fp16 where no rank's did (README, "Data-parallel training", has the measured cost).
//
// Gradients go in buckets of at most bucket_bytes, in the order the backward pass produces them,
// each node placed right after the last producer of its inputs: a backend that overlaps (the CUDA
// backend, NCCL on a second stream) reduces the last layers' gradients while the backward pass
// still computes the first layers'.
#pragma once

#include <cstdint>

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

struct DataParallelSpec {
  bool enabled = false;
  int64_t bucket_bytes = int64_t{25} << 20;  // PyTorch DDP's default bucket_cap_mb
};

class AllReduceGradientsPass final : public Pass {
 public:
  AllReduceGradientsPass(TrainingGraph& tg, const DataParallelSpec& spec) : tg_(tg), spec_(spec) {}
  std::string name() const override { return "all-reduce-gradients"; }
  std::string summary() const override {
    return "average gradients and BatchNorm statistics across data-parallel replicas, in buckets";
  }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  DataParallelSpec spec_;
};

}  // namespace amp
