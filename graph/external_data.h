// External tensor data (TensorProto.data_location = EXTERNAL): reading maps each data file once and
// hands out views, refusing locations that escape the model's folder; writing appends tensors to
// one data file beside the model, published atomically like the model itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "graph/atomic_file.h"
#include "graph/tensor.h"

namespace amp {

class ExternalDataReader {
 public:
  // model_path names the model in error messages; locations are resolved against base_dir.
  ExternalDataReader(std::string model_path, std::string base_dir);
  // The tensor's bytes as a view into the mapped file. Throws InputError naming the model file and
  // the tensor for an unsafe or missing location and for a range beyond the end of the file.
  Tensor view(const std::string& tensor_name, DType dtype, std::vector<int64_t> dims, const ExternalLocation& where);
  // The location checks of view() alone (the file is mapped and kept for later views).
  void check_location(const std::string& tensor_name, const std::string& location) { map(tensor_name, location); }

 private:
  std::shared_ptr<MappedFile> map(const std::string& tensor_name, const std::string& location);

  std::string model_path_;
  std::string base_dir_;
  std::map<std::string, std::shared_ptr<MappedFile>> mapped_;  // by resolved real path
};

// Where save_model puts the external data of a model written to model_path: <model_path>.data.
std::string external_data_path(const std::string& model_path);

class ExternalDataWriter {
 public:
  // Data goes to external_data_path(model_path), first into a temporary file.
  explicit ExternalDataWriter(const std::string& model_path);

  // Appends the bytes and says where they went (location relative to the model's folder).
  ExternalLocation append(const uint8_t* data, size_t size);
  bool empty() const { return file_.size() == 0; }
  void commit() { file_.commit(); }

 private:
  std::string location_;
  AtomicFile file_;
};

}  // namespace amp
