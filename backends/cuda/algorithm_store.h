// The convolution algorithms chosen per shape (cuDNN's measured fastest, or the one that ran after
// a refusal), kept between processes beside the generated kernels' images: one cache folder per
// device (device_context.cc's kernel_cache_dir), and in it one file per cuDNN version, so a choice
// is only ever read back by the library that made it. Measuring every algorithm of every shape is
// most of a first run's start-up (cudnnFind*AlgorithmEx runs each algorithm on scratch buffers of
// the layer's size: ResNet-50 has 53 convolutions, three directions each); a second run reads the
// choices instead. Entries are checked before use: a line that does not parse is skipped, and a
// convolution takes a remembered algorithm only when cuDNN's heuristic still ranks it runnable for
// the shape (convolution_ops.cc), else it measures again.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace amp::cuda {

class AlgorithmStore {
 public:
  // folder empty: memory only. versions: what the choices depend on besides the device ("cudnn
  // 91900"), part of the file's name and of its first line.
  AlgorithmStore(const std::string& folder, const std::string& versions);

  std::optional<int> find(const std::string& key) const;
  // Remembered in memory, and appended to the file (one write of one line; a failure to write
  // costs only the persistence, never the run).
  void remember(const std::string& key, int algo);

  const std::string& file() const { return file_; }
  size_t read_from_file() const { return read_; }

 private:
  std::string file_, header_;
  std::map<std::string, int> choices_;
  size_t read_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace amp::cuda
