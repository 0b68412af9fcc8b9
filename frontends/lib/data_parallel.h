// What amp-train does differently when mpirun or srun starts several copies of it (README,
// "Data-parallel training"): each process trains one replica of the model on its share of every
// global batch, and the step graph averages the gradients (passes/training/all_reduce_gradients.h).
// This file holds the rest: which samples a rank reads (PyTorch's DistributedSampler rule), the
// sums that make the logged loss, accuracy and validation those of the global batch, the check
// that every rank was started alike and stays alike, and how an error on one rank ends them all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backends/communicator.h"
#include "frontends/lib/metrics_log.h"
#include "graph/error.h"
#include "graph/tensor.h"

namespace amp {

// An error every rank raises at the same point with the same message (options that differ, a
// loss that stays non-finite): rank 0 prints it and every rank exits with its code, none waiting.
class CollectiveError : public InputError {
 public:
  using InputError::InputError;
};

class DataParallel {
 public:
  explicit DataParallel(std::shared_ptr<Communicator> c) : comm_(std::move(c)) {}
  // Started by a launcher (mpirun, srun), even as its only process: the step then has AllReduce nodes.
  bool active() const { return comm_ != nullptr; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }
  bool root() const { return rank() == 0; }
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }
  // "rank 1 of 2 on node7", for messages.
  std::string who() const;

  // Samples each rank reads per epoch from a data set of n: ceil(n / size).
  int64_t shard_size(int64_t n) const { return (n + size() - 1) / size(); }
  // This rank's samples of an epoch, from the epoch's order of the whole data set (the same on
  // every rank, drawn from the shared seed): the order padded to shard_size() * size() by
  // repeating its start, then every size()-th from position rank() — DistributedSampler's rule.
  // Batch k of every rank together is then positions [k*size*B, (k+1)*size*B) of the order: one
  // process with batch size*B reads the same samples per step.
  std::vector<int64_t> shard(const std::vector<int64_t>& order) const;
  // Validation rows of this rank: rank, rank + size, ... below n, each sample read once overall.
  std::vector<int64_t> validation_rows(int64_t n) const;

  // Element-wise sums over the ranks, in place (nothing to do with one process).
  void sum(std::vector<double>& values) const;

  // Refuses a run whose ranks were started differently: `settings` is everything that must agree
  // (options, digests of the model, data and initial state) as flat JSON; every rank throws the same
  // CollectiveError naming the first setting that differs and the ranks' values.
  void check_started_alike(const nlohmann::json& settings) const;
  // Error naming the first state tensor whose bytes differ between ranks (they are averaged
  // alike, so this is a defect, caught before it is checkpointed).
  void check_same_state(const std::vector<std::pair<std::string, Tensor>>& state) const;

 private:
  std::shared_ptr<Communicator> comm_;
};

// AMP_TRAIN_RANK_DIR=DIR, a debugging aid (the tests use it): every rank writes its own view of
// the run, so ranks can be compared with each other — DIR/rank<R>.jsonl, one record per optimizer
// step (this rank's loss beside the global one, the loss scale, whether the step was skipped), and
// DIR/rank<R>.state.npz, its whole training state at the end. Unset: nothing is written.
class RankLog {
 public:
  explicit RankLog(const DataParallel& dp);
  void step(const nlohmann::json& record);
  void state(const std::vector<std::pair<std::string, Tensor>>& state) const;
  bool active() const { return !prefix_.empty(); }  // writes anything at all

 private:
  std::string prefix_;  // DIR/rank<R>, or empty
  MetricsLog steps_;
};

// A 64-bit digest of bytes (std::hash), for comparing files and tensors across ranks.
uint64_t digest(const void* data, size_t bytes);
// Of a file's contents; InputError naming it when it cannot be read.
uint64_t file_digest(const std::string& path);

// Runs `body`, this process's part of the run. With several processes, an error one rank meets
// alone prints "<tool>: error: rank R of N on HOST: <what>" and ends every process with the exit
// code the error has (2 for bad input, 1 otherwise) — never a rank left waiting for one that
// stopped; a CollectiveError is printed by rank 0 only and every rank returns its code.
int run_as_rank(const std::string& tool, const std::shared_ptr<Communicator>& comm, const std::function<int()>& body);

}  // namespace amp
