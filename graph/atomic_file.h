// A file that appears complete or not at all: bytes go to "<path>.tmp.<pid>", commit() fsyncs and
// renames it over <path>, so a crash or a full disk never leaves a half-written model behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace amp {

class AtomicFile {
 public:
  // Throws Error naming the path when the temporary file cannot be created.
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // removes the temporary file unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  uint64_t size() const { return size_; }
  void commit();

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace amp
