#include "backends/cuda/feed_prefetch.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "backends/cuda/cuda_check.h"

namespace amp::cuda {

void FeedPrefetch::PinnedFree::operator()(void* p) const {
  if (p) cudaFreeHost(p);
}

void FeedPrefetch::copy_host_bytes(void* dst, const void* src, size_t bytes, unsigned threads) {
  constexpr size_t kPiece = size_t{8} << 20;
  const size_t pieces = std::max<size_t>(1, std::min<size_t>(std::max(threads, 1u), bytes / kPiece));
  const size_t per = (bytes + pieces - 1) / pieces;
  auto copy = [&](size_t k) {
    const size_t at = k * per;
    if (at < bytes) std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, std::min(per, bytes - at));
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < pieces; ++k) helpers.emplace_back(copy, k);
  copy(0);
  for (std::thread& t : helpers) t.join();
}

FeedPrefetch::~FeedPrefetch() {
  if (copies_) cudaStreamSynchronize(copies_);
  for (Slot& s : slots_) {
    if (s.uploaded) cudaEventDestroy(s.uploaded);
    if (s.consumed) cudaEventDestroy(s.consumed);
  }
  if (copies_) cudaStreamDestroy(copies_);
}

int FeedPrefetch::claim() {
  for (size_t k = 0; k < slots_.size(); ++k)
    if (!slots_[k].filling && !slots_[k].ready) return static_cast<int>(k);
  if (slots_.size() < kMaxSlots) {
    if (slots_.empty()) slots_.reserve(kMaxSlots);
    Slot& s = slots_.emplace_back();
    AMP_CUDA_CHECK(cudaEventCreateWithFlags(&s.uploaded, cudaEventDisableTiming));
    AMP_CUDA_CHECK(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming));
    return static_cast<int>(slots_.size() - 1);
  }
  int oldest = -1;  // a prefetch no run took (its run planned again, say): its tensor is let go
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].ready && (oldest < 0 || slots_[k].since < slots_[static_cast<size_t>(oldest)].since))
      oldest = static_cast<int>(k);
  return oldest;
}

void FeedPrefetch::prefetch(const std::vector<std::pair<std::string, Tensor>>& feeds) {
  for (const auto& [name, t] : feeds) {
    const size_t bytes = t.nbytes();
    if (bytes < kMinBytes || t.dtype == DType::kString) continue;
    Slot* slot = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The current device is per thread: this may be a loader's thread.
      AMP_CUDA_CHECK(cudaSetDevice(device_));
      if (!copies_) AMP_CUDA_CHECK(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking));
      const int k = claim();
      if (k < 0) return;
      slot = &slots_[static_cast<size_t>(k)];
      slot->filling = true;
      slot->ready = false;
      slot->held = Tensor();
      if (slot->buffer.size() < bytes) slot->buffer = DeviceBuffer(bytes);
      if (slot->staging_size < bytes) {
        AMP_CUDA_CHECK(cudaEventSynchronize(slot->uploaded));  // its last upload read the old one
        slot->staging.reset();
        slot->staging_size = 0;
        void* pinned = nullptr;
        if (cudaMallocHost(&pinned, bytes) == cudaSuccess) {
          slot->staging.reset(pinned);
          slot->staging_size = bytes;
        } else {
          cudaGetLastError();  // refused: this slot uploads from pageable memory
        }
      }
    }
    // Outside the lock: the copy into the staging buffer takes as long as a memcpy of the feed,
    // and the run that may be taking another slot meanwhile must not wait. The slot's previous
    // upload has read its staging buffer before this overwrites it, and the run that took the slot
    // last has copied out of its device buffer before the upload does.
    AMP_CUDA_CHECK(cudaEventSynchronize(slot->uploaded));
    const void* source = t.data();
    if (slot->staging) {
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      copy_host_bytes(slot->staging.get(), t.data(), bytes, std::min(8u, std::max(1u, cores / 2)));
      source = slot->staging.get();
    }
    AMP_CUDA_CHECK(cudaStreamWaitEvent(copies_, slot->consumed, 0));
    AMP_CUDA_CHECK(cudaMemcpyAsync(slot->buffer.data(), source, bytes, cudaMemcpyHostToDevice, copies_));
    AMP_CUDA_CHECK(cudaEventRecord(slot->uploaded, copies_));
    std::lock_guard<std::mutex> lock(mutex_);
    slot->held = t;  // shares its bytes: they stay put while the slot holds them
    slot->filling = false;
    slot->ready = true;
    slot->since = ++fills_;
  }
}

bool FeedPrefetch::take(const void* host, size_t bytes, void* dst, cudaStream_t stream) {
  if (bytes < kMinBytes) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Slot& s : slots_) {
    if (!s.ready || s.held.data() != host || s.held.nbytes() != bytes) continue;
    AMP_CUDA_CHECK(cudaStreamWaitEvent(stream, s.uploaded, 0));
    AMP_CUDA_CHECK(cudaMemcpyAsync(dst, s.buffer.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    AMP_CUDA_CHECK(cudaEventRecord(s.consumed, stream));
    s.ready = false;
    s.held = Tensor();
    taken_ += bytes;
    return true;
  }
  return false;
}

size_t FeedPrefetch::bytes_taken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return taken_;
}

size_t FeedPrefetch::staging_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const Slot& s : slots_) bytes += s.staging_size;
  return bytes;
}

size_t FeedPrefetch::slot_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const Slot& s : slots_) bytes += s.buffer.size();
  return bytes;
}

}  // namespace amp::cuda
