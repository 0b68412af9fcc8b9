#include "graph/tensor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>
#include <cstring>

#include "graph/error.h"
#include "graph/half.h"

namespace amp {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError(path + ": cannot map: " + std::strerror(err));
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::shared_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(p), size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

namespace {

// Zero-filled owned storage from calloc: a large block is fresh pages that take no memory until
// written, so zero-initialised state (optimizer moments) costs nothing until a run writes it, and
// a copy of it read from them (a backend's own state) is the only one resident.
class ZeroedBuffer final : public Buffer {
 public:
  explicit ZeroedBuffer(size_t n) : data_(static_cast<uint8_t*>(std::calloc(n ? n : 1, 1))), size_(n) {
    if (!data_) throw std::bad_alloc();
  }
  ~ZeroedBuffer() override { std::free(data_); }
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }
  uint8_t* mutable_data() { return data_; }

 private:
  uint8_t* data_;
  size_t size_;
};

}  // namespace

Tensor::Tensor(DType type, std::vector<int64_t> shape) : dtype(type), dims(std::move(shape)) {
  if (dtype == DType::kString)
    strings.resize(static_cast<size_t>(numel()));
  else
    buffer_ = std::make_shared<ZeroedBuffer>(nbytes());
}

Tensor Tensor::from_bytes(DType type, std::vector<int64_t> shape, std::string bytes) {
  Tensor t;
  t.dtype = type;
  t.dims = std::move(shape);
  if (bytes.size() != t.nbytes())
    throw InputError("tensor data has " + std::to_string(bytes.size()) + " bytes, its type and shape need " +
                     std::to_string(t.nbytes()));
  t.buffer_ = std::make_shared<OwnedBuffer>(std::move(bytes));
  return t;
}

Tensor Tensor::view(DType type, std::vector<int64_t> shape, std::shared_ptr<const Buffer> buffer, size_t offset) {
  Tensor t;
  t.dtype = type;
  t.dims = std::move(shape);
  if (offset > buffer->size() || buffer->size() - offset < t.nbytes())
    throw InputError("tensor data needs " + std::to_string(t.nbytes()) + " bytes at offset " + std::to_string(offset) +
                     ", the buffer has " + std::to_string(buffer->size()));
  t.buffer_ = std::move(buffer);
  t.offset_ = offset;
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const uint8_t* Tensor::data() const {
  static const uint8_t kEmpty[8] = {};
  return buffer_ ? buffer_->data() + offset_ : kEmpty;
}

uint8_t* Tensor::mutable_data() {
  if (auto* zeroed = dynamic_cast<const ZeroedBuffer*>(buffer_.get());
      zeroed && buffer_.use_count() == 1 && offset_ == 0 && zeroed->size() == nbytes())
    return const_cast<ZeroedBuffer*>(zeroed)->mutable_data();
  auto* owned = dynamic_cast<const OwnedBuffer*>(buffer_.get());
  if (!owned || buffer_.use_count() != 1 || offset_ != 0 || owned->size() != nbytes()) {
    auto fresh = std::make_shared<OwnedBuffer>(std::string(reinterpret_cast<const char*>(data()), nbytes()));
    buffer_ = fresh;
    offset_ = 0;
    return fresh->mutable_data();
  }
  return const_cast<OwnedBuffer*>(owned)->mutable_data();
}

double Tensor::element(int64_t i) const {
  const uint8_t* p = data();
  switch (dtype) {
    case DType::kFloat: return as<float>()[i];
    case DType::kDouble: return as<double>()[i];
    case DType::kFloat16: return fp16_to_fp32(as<uint16_t>()[i]);
    case DType::kBFloat16: return bf16_to_fp32(as<uint16_t>()[i]);
    case DType::kInt8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kUInt8: return p[i];
    case DType::kBool: return p[i] != 0;
    case DType::kInt16: return as<int16_t>()[i];
    case DType::kUInt16: return as<uint16_t>()[i];
    case DType::kInt32: return as<int32_t>()[i];
    case DType::kUInt32: return as<uint32_t>()[i];
    case DType::kInt64: return static_cast<double>(as<int64_t>()[i]);
    case DType::kUInt64: return static_cast<double>(as<uint64_t>()[i]);
    default: throw Error("tensor '" + name + "': element() is not defined for " + std::string(dtype_name(dtype)));
  }
}

bool Tensor::same_contents(const Tensor& other) const {
  if (dtype != other.dtype || dims != other.dims) return false;
  if (dtype == DType::kString) return strings == other.strings;
  return std::memcmp(data(), other.data(), nbytes()) == 0;
}

}  // namespace amp
