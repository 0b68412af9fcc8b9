// TensorProto <-> Tensor. Import accepts every storage form ONNX allows (raw_data, the typed
// fields with their packing rules, external data) and ends with little-endian bytes: raw_data is
// moved out of the proto, external data becomes a view of the mapped file. Export writes raw_data
// (string_data for strings), or hands the bytes to an ExternalDataWriter.
#pragma once

#include <string>

#include "graph/external_data.h"
#include "graph/tensor.h"

namespace onnx {
class TensorProto;
}

namespace amp {

// Throws InputError naming model_path and the tensor for malformed data. Leaves the proto's
// raw_data empty (moved into the tensor).
Tensor tensor_from_proto(onnx::TensorProto& proto, const std::string& model_path, ExternalDataReader& external);

// Tensors of at least external_threshold bytes go to `external` when it is given.
void tensor_to_proto(const Tensor& t, onnx::TensorProto* proto, ExternalDataWriter* external = nullptr,
                     size_t external_threshold = 0);

}  // namespace amp
