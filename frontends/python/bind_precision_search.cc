// onnx_amp.auto_mixed_precision: the search of frontends/lib/precision_search.h with the user's
// inputs and check (onnxconverter-common's validate_fn and rtol/atol), which Python calls between
// attempts; Ctrl-C stops the search there.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "frontends/lib/precision_search.h"
#include "frontends/python/bindings.h"
#include "frontends/python/numpy_tensor.h"
#include "graph/onnx_io.h"

namespace amp::python {

namespace {

py::list arrays(const std::vector<Tensor>& tensors) {
  py::list out;
  for (const Tensor& t : tensors) out.append(numpy_from_tensor(t));
  return out;
}

py::tuple search(const py::object& model, const std::string& name, const std::string& base_dir, const py::dict& feeds,
                 const py::object& validate, std::optional<double> rtol, std::optional<double> atol,
                 bool keep_io_types, const std::string& dtype) {
  const ModelSource source = model_source(model, name, base_dir);
  NamedTensors inputs = tensors_from_dict(feeds, "feed_dict");
  RewriteSettings settings;
  settings.dtype = dtype;
  settings.keep_io_types = keep_io_types;
  settings.weights = "lowp";
  settings.min_magnitude = 1e-7;  // as convert_float_to_float16's default min_positive_val, which onnxconverter-common's search uses
  const OutputCheck check = [&](const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate) {
    py::gil_scoped_acquire gil;
    check_signals();
    if (rtol && !outputs_close(reference, candidate, *rtol, atol.value_or(0))) return false;
    return validate.is_none() || validate(arrays(reference), arrays(candidate)).cast<bool>();
  };
  PrecisionSearch result;
  std::string bytes;
  {
    py::gil_scoped_release release;
    result = search_fp32_nodes(source, settings, inputs, check, RunSettings{});
    bytes = serialize_model(result.rewrite.model);
    inputs.clear();
  }
  return py::make_tuple(py::bytes(bytes), result.kept_fp32, result.attempts);
}

}  // namespace

void bind_precision_search(py::module_& m) {
  m.def("search_fp32_nodes", &search, py::arg("model"), py::arg("name"), py::arg("base_dir"), py::arg("feeds"),
        py::arg("validate"), py::arg("rtol"), py::arg("atol"), py::arg("keep_io_types"), py::arg("dtype"),
        "rewrite, check on the feeds, keep failing nodes in fp32: (model bytes, nodes kept fp32, attempts)");
}

}  // namespace amp::python
