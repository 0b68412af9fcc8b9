// amp-train's loop: builds the training step from a model (or reads a saved one), compiles it and
// its evaluation twin on a backend, and runs it over seeded, shuffled batches — validation per
// epoch, metrics, checkpoints, resume — then reports time per step, throughput and peak memory.
#pragma once

#include <cstdint>
#include <string>

#include "backends/communicator.h"
#include "frontends/lib/lr_schedule.h"
#include "frontends/lib/training_history.h"
#include "passes/training/training_step.h"

namespace amp {

struct TrainOptions {
  std::string model;
  std::string data, val;
  TrainingSpec spec;
  int64_t epochs = 0;  // passes over the data; with neither epochs nor steps, one epoch
  int64_t steps = 0;   // optimizer steps
  int64_t batch_size = 32;
  LrSchedule schedule;  // total is filled in by train()
  std::string device = "cpu";
  uint64_t seed = 0;
  bool shuffle = true;
  int threads = 0;
  bool tf32 = false;  // fp32 products and convolutions on TF32 Tensor Cores (cuda)
  std::string save, checkpoint, resume, metrics, save_training_graph;
  bool quiet = false;  // no progress or log lines
  bool strict_data = false;        // NaN or inf in the data is an error, not a warning
  int64_t max_skipped_steps = 50;  // this many skipped steps in a row stop the run
  std::string label;   // shown before progress and log lines ("fp32" in --compare-fp32's first run)
  // The processes of a data-parallel run (join_launched_processes()); null: this process alone.
  // --batch-size is then per process, as in PyTorch DDP, and rank 0 alone writes files.
  std::shared_ptr<Communicator> communicator;
};

struct TrainResult {
  int64_t steps = 0;    // optimizer steps run by this process
  int64_t skipped = 0;  // of those, skipped for inf/NaN gradients
  double final_loss = 0;
  double seconds_per_step = 0;  // mean over the steps after the first (which plans the shapes), if any
  double samples_per_second = 0;  // of every process together
  size_t backend_peak_bytes = 0;  // state + the plan's arena, as the backend reports them
  size_t peak_rss_bytes = 0;      // the process's peak resident memory
  double val_loss = -1, val_accuracy = -1;  // the last validation pass; -1 without one
  int64_t val_non_finite = 0;               // its samples whose outputs hold a NaN or inf
  bool root = true;  // rank 0 of a data-parallel run, or the only process: the one that reports
  TrainingHistory history;                  // this process's steps and validation passes
};

// Throws InputError for bad models, data or options (naming the file, node and op).
TrainResult train(const TrainOptions& options);

}  // namespace amp
