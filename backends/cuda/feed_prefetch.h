// Feeds uploaded while the step before them runs (Executable::prefetch): a training loop's next
// batch. On an H100 (2026-11-27) ResNet-50's bf16 step at batch 128 took 65.4 ms of which 48.1 ms
// were kernels; the batch, 77 MB of fp32 images, was copied from pageable host memory inside the
// step, before its kernels, at the few GB/s such copies reach. Prefetched, it is copied on a
// stream of its own into a device slot while the previous step's kernels run, and the step that
// reads it starts with a device-to-device copy out of the slot (after waiting for the upload's
// event), about 0.05 ms for those 77 MB.
//
// A slot keeps a reference to the tensor it holds (its bytes cannot be freed and reused at the
// same address while the slot holds it), and a run takes a slot only for the very bytes it was
// given — the same address and size: a tensor written after its prefetch has copied its bytes on
// write (graph/tensor.h), so it no longer matches, and is uploaded as usual. Taken slots are free
// for the next prefetch once the copy out of them has run (an event the next upload waits for).
// Small tensors (a learning rate, a flag) are not worth a slot and are uploaded by the run.
//
// Each slot uploads through a page-locked host buffer of its own: the feed's bytes copied into it
// (by several threads for large feeds), then one DMA copy. On an H200 (2026-11-28) the upload
// straight from pageable memory, with the batch's gather on the loader's thread, took longer than
// ResNet-50's 49 ms bf16 step at batch 128: its steps took 65 ms, 16 ms of them with the device
// idle. Where page-locked memory cannot be had (cudaMallocHost fails), the slot uploads from the
// feed's own bytes as before.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/device_context.h"
#include "graph/tensor.h"

namespace amp::cuda {

class FeedPrefetch {
 public:
  explicit FeedPrefetch(int device) : device_(device) {}
  ~FeedPrefetch();
  FeedPrefetch(const FeedPrefetch&) = delete;
  FeedPrefetch& operator=(const FeedPrefetch&) = delete;

  // Any thread: starts the upload of each feed of at least kMinBytes into a free slot (a new one,
  // up to kMaxSlots; else the one held longest without being taken).
  void prefetch(const std::vector<std::pair<std::string, Tensor>>& feeds);
  // The run's thread: when `host` (bytes long) was prefetched, enqueues on `stream` a wait for its
  // upload and the copy into dst, frees the slot, and returns true; else false.
  bool take(const void* host, size_t bytes, void* dst, cudaStream_t stream);
  // Bytes the runs took from slots so far (for tests and benchmarks).
  size_t bytes_taken() const;
  // Device bytes the slots hold.
  size_t slot_bytes() const;
  // Page-locked host bytes the slots' staging buffers hold (for tests and benchmarks).
  size_t staging_bytes() const;

  // dst = src (bytes long), cut into pieces of at least 8 MiB among up to `threads` threads.
  static void copy_host_bytes(void* dst, const void* src, size_t bytes, unsigned threads);

  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kMaxSlots = 4;

 private:
  // Page-locked host memory (cudaMallocHost), freed with cudaFreeHost.
  struct PinnedFree {
    void operator()(void* p) const;
  };
  struct Slot {
    DeviceBuffer buffer;
    std::unique_ptr<void, PinnedFree> staging;  // null when page-locked memory was refused
    size_t staging_size = 0;
    Tensor held;            // the prefetched tensor (its bytes stay where they are)
    bool filling = false;   // a prefetch is uploading into it
    bool ready = false;     // its upload is enqueued, and no run has taken it yet
    uint64_t since = 0;     // when it was filled, for eviction
    cudaEvent_t uploaded = nullptr, consumed = nullptr;
  };
  // The slot for `bytes` (locked): a free one, a new one, or the oldest untaken; -1 when every
  // slot is being filled.
  int claim();

  const int device_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;  // never more than kMaxSlots: reserved, so a Slot never moves
  cudaStream_t copies_ = nullptr;
  uint64_t fills_ = 0;
  size_t taken_ = 0;
};

}  // namespace amp::cuda
