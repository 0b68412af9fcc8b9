// The proto -> IR step of loading, with the external-data reader passed in so that the files the
// load pipeline already checked and mapped are not mapped again.
#pragma once

#include <string>

#include "graph/external_data.h"
#include "graph/model.h"

namespace onnx {
class ModelProto;
}

namespace amp {

// Moves tensor data out of the proto. Throws InputError naming path_for_errors.
Model import_model_proto(onnx::ModelProto& proto, const std::string& path_for_errors, ExternalDataReader& external);

}  // namespace amp
