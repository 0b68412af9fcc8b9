// amp-train's loop: builds the training step from a model (or reads a saved one), compiles it and
// its evaluation twin on a backend, and runs it over seeded, shuffled batches — validation per
// epoch, metrics, checkpoints, resume — then reports time per step, throughput and peak memory.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/communicator.h"
#include "frontends/lib/lr_schedule.h"
#include "frontends/lib/training_history.h"
#include "frontends/lib/training_session.h"
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
  // --calibrate DATA.npz [--max-error E]: the forward's nodes that break accuracy on DATA stay
  // fp32 in the step (calibrate.h); max_error < 0: the default E.
  std::string calibrate;
  double calibrate_max_error = -1;
  bool quiet = false;  // no progress or log lines
  bool memory_report = false;  // end --metrics with a record {"memory": MemoryReport's parts}
  bool strict_data = false;        // NaN or inf in the data is an error, not a warning
  int64_t max_skipped_steps = 50;  // this many skipped steps in a row stop the run
  std::string label;   // shown before progress and log lines ("fp32" in --compare-fp32's first run)
  // The processes of a data-parallel run (join_launched_processes()); null: this process alone.
  // --batch-size is then per process, as in PyTorch DDP, and rank 0 alone writes files.
  std::shared_ptr<Communicator> communicator;
};

// Where the training step's memory goes (amp-train --memory-report, and the last --metrics
// record), in bytes. Every figure but `other` is the backend's own count of what it allocated:
// its state tensor by tensor, and its arena — the buffers live at the arena's peak sorted by what
// made them, plus the arena's bytes not live at that peak. `other` is the process's peak resident
// memory less all of those: the program, libraries, the data set, the model's graph, allocator
// slack, and whatever was resident at another moment than the step.
struct MemoryReport {
  size_t weights = 0;                // state: the model's own initializers (fp32 masters when mixed)
  size_t optimizer_state = 0;        // state: moments, step count, loss scale
  size_t low_precision_weights = 0;  // arena at its peak: fp16/bf16 casts of the weights
  size_t gradients = 0;              // arena at its peak: values computed from the loss (gradients, the
                                     // backward's and the optimizer's temporaries)
  size_t activations = 0;            // arena at its peak: the forward's values
  size_t scratch = 0;                // arena at its peak: kernels' scratch
  size_t arena = 0;                  // the whole arena (the four above + arena_unused_at_peak)
  size_t arena_unused_at_peak = 0;   // arena bytes no buffer holds at its peak (the plan's fragmentation)
  size_t constants = 0;              // initializers that are not state, values computed while planning
  size_t validation = 0;             // the validation model's executable (state + arena + constants), with --val
  size_t other = 0;                  // peak_rss less everything above
  size_t peak_rss = 0;
  // The largest buffers live at the arena's peak, largest first: "value (op)" and bytes.
  std::vector<std::pair<std::string, size_t>> largest;
  std::vector<std::pair<std::string, size_t>> parts() const {
    return {{"weights", weights},
            {"optimizer_state", optimizer_state},
            {"low_precision_weights", low_precision_weights},
            {"gradients", gradients},
            {"activations", activations},
            {"kernel_scratch", scratch},
            {"arena_unused_at_peak", arena_unused_at_peak},
            {"arena", arena},
            {"constants", constants},
            {"validation", validation},
            {"other", other},
            {"peak_rss", peak_rss}};
  }
};

struct TrainResult {
  int64_t steps = 0;    // optimizer steps run by this process
  int64_t skipped = 0;  // of those, skipped for inf/NaN gradients
  double final_loss = 0;
  double seconds_per_step = 0;  // mean over the steps after the first (which plans the shapes), if any
  double first_step_seconds = 0;  // the first step of this process: planning (on a GPU also cuDNN's
                                  // algorithm measurements and kernel compilation) and its run
  double samples_per_second = 0;  // of every process together
  size_t backend_peak_bytes = 0;  // state + the plan's arena, as the backend reports them
  size_t peak_rss_bytes = 0;      // the process's peak resident memory
  double val_loss = -1, val_accuracy = -1;  // the last validation pass; -1 without one
  int64_t val_non_finite = 0;               // its samples whose outputs hold a NaN or inf
  bool root = true;  // rank 0 of a data-parallel run, or the only process: the one that reports
  TrainingHistory history;                  // this process's steps and validation passes
  MemoryReport memory;
};

// Throws InputError for bad models, data or options (naming the file, node and op).
TrainResult train(const TrainOptions& options);

// The training session a run of these options drives (its model read from options.model).
SessionOptions session_options(const TrainOptions& options);

}  // namespace amp
