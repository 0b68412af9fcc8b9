// Tensor data held by initializers, Constant attributes and backends. The bytes live in a shared
// Buffer: an owned string (a protobuf raw_data field is moved in, never copied) or a window onto a
// memory-mapped external-data file, so a 2 GB model is neither read twice nor held twice.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace amp {

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class OwnedBuffer final : public Buffer {
 public:
  explicit OwnedBuffer(std::string bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(bytes_.data()); }
  size_t size() const override { return bytes_.size(); }
  uint8_t* mutable_data() { return reinterpret_cast<uint8_t*>(bytes_.data()); }

 private:
  std::string bytes_;
};

// A read-only private mapping of a whole file; tensors hold views into it.
class MappedFile final : public Buffer {
 public:
  // Throws InputError naming the path when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile() override;
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

// Where an initializer's bytes came from when they were external, kept so an export can write
// them back the same way.
struct ExternalLocation {
  std::string location;  // relative to the model's folder
  int64_t offset = 0;
  int64_t length = -1;
  std::string checksum;
};

struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::string doc_string;
  std::optional<ExternalLocation> external;
  std::vector<std::string> strings;  // the elements when dtype is kString

  Tensor() = default;
  Tensor(DType type, std::vector<int64_t> shape);  // zero-filled owned storage
  static Tensor from_bytes(DType type, std::vector<int64_t> shape, std::string bytes);
  static Tensor view(DType type, std::vector<int64_t> shape, std::shared_ptr<const Buffer> buffer,
                     size_t offset);

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  const uint8_t* data() const;
  // Writable bytes; copies first when the storage is shared or mapped (copy on write).
  uint8_t* mutable_data();
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data());
  }
  template <class T>
  T* mutable_as() {
    return reinterpret_cast<T*>(mutable_data());
  }
  // Element i converted to double, for float/int/bool types of any width (fp16 and bf16 too).
  double element(int64_t i) const;
  // Same dtype, dims and bytes (or strings); names and storage location are not compared.
  bool same_contents(const Tensor& other) const;

 private:
  std::shared_ptr<const Buffer> buffer_;
  size_t offset_ = 0;
};

}  // namespace amp
