#include "graph/external_data.h"

#include <climits>
#include <cstdlib>
#include <cerrno>
#include <cstring>

#include "graph/error.h"

namespace amp {

namespace {

// Offsets of external tensors are rounded up to this so mapped tensors stay aligned for any
// element type and for vector loads.
constexpr uint64_t kExternalAlignment = 64;

std::string file_name_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool has_parent_component(const std::string& location) {
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find_first_of("/\\", start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return {};
  return buf;
}

}  // namespace

ExternalDataReader::ExternalDataReader(std::string model_path, std::string base_dir)
    : model_path_(std::move(model_path)), base_dir_(base_dir.empty() ? std::string(".") : std::move(base_dir)) {}

std::shared_ptr<MappedFile> ExternalDataReader::map(const std::string& tensor_name, const std::string& location) {
  const std::string where = model_path_ + ": tensor '" + tensor_name + "': external data location '" + location + "'";
  if (location.empty()) throw InputError(where + " is empty");
  if (location.find('\0') != std::string::npos) throw InputError(where + " contains a NUL byte");
  if (location[0] == '/' || location[0] == '\\') throw InputError(where + " is absolute; it must be relative to the model's folder");
  if (has_parent_component(location)) throw InputError(where + " contains '..'; it must stay inside the model's folder");
  const std::string folder = real_path(base_dir_);
  if (folder.empty()) throw InputError(where + ": cannot resolve the model's folder '" + base_dir_ + "': " + std::strerror(errno));
  const std::string resolved = real_path(base_dir_ + "/" + location);
  if (resolved.empty()) throw InputError(where + ": cannot open the file: " + std::strerror(errno));
  // Symlinks are followed before the check, so a link pointing out of the folder is refused too.
  if (resolved.compare(0, folder.size(), folder) != 0 || (folder != "/" && resolved.size() > folder.size() &&
                                                          resolved[folder.size()] != '/'))
    throw InputError(where + " resolves to '" + resolved + "', outside the model's folder '" + folder + "'");
  auto it = mapped_.find(resolved);
  if (it != mapped_.end()) return it->second;
  std::shared_ptr<MappedFile> file;
  try {
    file = MappedFile::open(resolved);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
  mapped_.emplace(resolved, file);
  return file;
}

Tensor ExternalDataReader::view(const std::string& tensor_name, DType dtype, std::vector<int64_t> dims,
                                const ExternalLocation& where) {
  std::shared_ptr<MappedFile> file = map(tensor_name, where.location);
  Tensor shape_only;
  shape_only.dtype = dtype;
  shape_only.dims = dims;
  const uint64_t need = shape_only.nbytes();
  const std::string what = model_path_ + ": tensor '" + tensor_name + "': external data in '" + where.location + "'";
  if (where.offset < 0) throw InputError(what + " has a negative offset");
  if (where.length >= 0 && static_cast<uint64_t>(where.length) != need)
    throw InputError(what + " has length " + std::to_string(where.length) + ", its type and shape need " +
                     std::to_string(need) + " bytes");
  const uint64_t offset = static_cast<uint64_t>(where.offset);
  if (offset > file->size() || file->size() - offset < need)
    throw InputError(what + ": bytes " + std::to_string(offset) + ".." + std::to_string(offset + need) +
                     " lie beyond the end of the file (" + std::to_string(file->size()) + " bytes)");
  Tensor t = Tensor::view(dtype, std::move(dims), file, offset);
  t.external = where;
  return t;
}

std::string external_data_path(const std::string& model_path) {
  return model_path + ".data";
}

ExternalDataWriter::ExternalDataWriter(const std::string& model_path)
    : location_(file_name_of(external_data_path(model_path))), file_(external_data_path(model_path)) {}

ExternalLocation ExternalDataWriter::append(const uint8_t* data, size_t size) {
  static const char kZeros[kExternalAlignment] = {};
  const uint64_t pad = (kExternalAlignment - file_.size() % kExternalAlignment) % kExternalAlignment;
  file_.write(kZeros, pad);
  ExternalLocation where;
  where.location = location_;
  where.offset = static_cast<int64_t>(file_.size());
  where.length = static_cast<int64_t>(size);
  file_.write(data, size);
  return where;
}

}  // namespace amp
