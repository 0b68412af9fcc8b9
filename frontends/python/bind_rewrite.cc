// onnx_amp.rewrite: amp-rewrite's rewrite (frontends/lib/model_rewrite.h) of a path or a
// ModelProto's bytes, returned as bytes (or written where `output` says, as amp-rewrite -o writes
// it) with the --report JSON and the warnings amp-rewrite prints.
#include <pybind11/stl.h>

#include <filesystem>
#include <optional>

#include "frontends/lib/calibrate.h"
#include "frontends/lib/model_rewrite.h"
#include "frontends/python/bindings.h"
#include "frontends/python/numpy_tensor.h"
#include "graph/error.h"

namespace amp::python {

namespace {

// Protobuf refuses to serialize a message of 2 GB or more.
constexpr size_t kProtobufLimit = (size_t{1} << 31) - 1;

// What calibrate= asks (amp-rewrite --calibrate, calibrate.h): the feeds, held while the GIL is
// released, and the options.
struct Calibration {
  Feeds feeds;
  CalibrationOptions options;
  bool write_unmet = false;
};

py::tuple rewrite(const py::object& model, const std::string& name, const std::string& base_dir, RewriteSettings settings,
                  const std::string& output, const std::optional<Calibration>& calibration) {
  const ModelSource source = model_source(model, name, base_dir);
  std::string bytes, report, external_data;
  std::vector<std::string> warnings;
  {
    py::gil_scoped_release release;
    AmpPolicy policy = make_rewrite_policy(settings);
    if (!output.empty()) {
      const auto dir = std::filesystem::absolute(output).parent_path();
      if (!std::filesystem::is_directory(dir)) throw InputError(output + ": no such directory '" + dir.string() + "'");
    }
    Model m = source.load();
    std::optional<CalibrationResult> calibrated;
    if (calibration && m.training_info.empty()) {  // a training step is refused by rewrite_model
      calibrated = calibrate(m, calibration->feeds, policy, calibration->options, "calibrate=");
      if (calibrated->below_floor && !calibration->write_unmet)
        throw InputError(source.path + ": " + calibration_floor_text(*calibrated) +
                         " (write_unmet=True rewrites with that placement)");
      calibrated->apply(policy);
    }
    const RewrittenModel r = rewrite_model(std::move(m), policy, source.path, settings.verify_each);
    if (!output.empty()) {
      external_data = save_rewrite(r, output);
    } else {
      size_t tensor_bytes = 0;
      for (const Value* v : r.model.graph->initializers()) tensor_bytes += v->initializer().nbytes();
      if (tensor_bytes >= kProtobufLimit)
        throw InputError(source.path + ": the rewrite holds " + std::to_string(tensor_bytes >> 20) +
                         " MiB of tensors, past protobuf's 2 GB: pass output=PATH to write it with external data");
      bytes = serialize_model(r.model);
    }
    auto json = rewrite_report_of(r, source.path, output, external_data);
    if (calibrated) json["calibration"] = calibration_json(*calibrated);
    report = json.dump(2);
    warnings = r.warnings;
    if (calibrated && calibrated->below_floor) warnings.push_back(calibration_floor_text(*calibrated));
  }
  return py::make_tuple(output.empty() ? py::object(py::bytes(bytes)) : py::object(py::none()), report, warnings);
}

}  // namespace

void bind_rewrite(py::module_& m) {
  m.def(
      "rewrite",
      [](const py::object& model, const std::string& name, const std::string& base_dir, const std::string& dtype,
         std::optional<bool> keep_io_types, const std::string& weights, const std::vector<std::string>& allow,
         const std::vector<std::string>& deny, const std::vector<std::string>& infer,
         const std::vector<std::string>& clear, const std::vector<std::string>& block_nodes,
         const std::vector<std::string>& block_node_names, const std::vector<std::string>& keep_fp32_ops,
         const std::string& config, const std::string& output, const py::object& calibrate_feeds,
         std::optional<double> max_error, const std::string& metric, bool write_unmet,
         const std::string& cast_placement, std::optional<double> min_magnitude) {
        RewriteSettings s;
        s.dtype = dtype;
        s.keep_io_types = keep_io_types;
        s.weights = weights;
        s.cast_placement = cast_placement;
        s.min_magnitude = min_magnitude;
        s.allow = allow;
        s.deny = deny;
        s.infer = infer;
        s.clear = clear;
        s.block = block_nodes;
        s.block_names = block_node_names;
        s.block_ops = keep_fp32_ops;
        s.config = config;
        s.edits_source = "keyword arguments";
        std::optional<Calibration> calibration;
        if (!calibrate_feeds.is_none()) {
          calibration.emplace();
          calibration->feeds = tensors_from_dict(calibrate_feeds.cast<py::dict>(), "calibrate=");
          calibration->options.metric = parse_calibration_metric(metric);
          calibration->options.max_error = max_error;
          calibration->write_unmet = write_unmet;
        }
        return rewrite(model, name, base_dir, s, output, calibration);
      },
      py::arg("model"), py::arg("name"), py::arg("base_dir"), py::arg("dtype"), py::arg("keep_io_types"),
      py::arg("weights"), py::arg("allow"), py::arg("deny"), py::arg("infer"), py::arg("clear"),
      py::arg("block_nodes"), py::arg("block_node_names"), py::arg("keep_fp32_ops"), py::arg("config"),
      py::arg("output"), py::arg("calibrate"), py::arg("max_error"), py::arg("metric"), py::arg("write_unmet"),
      py::arg("cast_placement"), py::arg("min_magnitude"),
      "amp-rewrite of a path (str) or serialized model (bytes): (bytes or None when written to output, report "
      "JSON, warnings)");
}

}  // namespace amp::python
