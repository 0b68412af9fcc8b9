// onnx_amp.Runner / onnx_amp.run: amp-run's runner (frontends/lib/model_runner.h), compiled once,
// run on dicts of numpy arrays.
#include <pybind11/stl.h>

#include <memory>

#include "frontends/lib/model_runner.h"
#include "frontends/python/bindings.h"
#include "frontends/python/numpy_tensor.h"

namespace amp::python {

namespace {

class Runner {
 public:
  Runner(const py::object& model, const std::string& name, const std::string& base_dir, const RunSettings& settings) {
    const ModelSource source = model_source(model, name, base_dir);
    py::gil_scoped_release release;
    const Model m = source.load();
    runner_ = std::make_unique<ModelRunner>(m, source.path, settings);
  }

  py::dict run(const py::dict& inputs) {
    NamedTensors feeds;
    for (const auto& [key, value] : inputs) {
      const std::string name = py::str(key);
      // bfloat16 inputs take float32 arrays (rounded) or uint16 bits: numpy has no bfloat16.
      DType wanted = DType::kUndefined;
      for (const auto& [input, type] : runner_->inputs())
        if (input == name) wanted = type.elem;
      feeds.emplace_back(name, tensor_from_numpy(value, "inputs['" + name + "']",
                                                 wanted == DType::kBFloat16 ? wanted : DType::kUndefined));
    }
    NamedTensors outputs;
    {
      py::gil_scoped_release release;
      outputs = runner_->run(std::move(feeds), "inputs");
    }
    return dict_from_tensors(std::move(outputs));
  }

  std::vector<std::pair<std::string, std::string>> inputs() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [name, type] : runner_->inputs()) out.emplace_back(name, type.str());
    return out;
  }

  std::string device() const { return runner_->backend().name(); }

 private:
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace

void bind_runner(py::module_& m) {
  py::class_<Runner>(m, "Runner")
      .def(py::init([](const py::object& model, const std::string& name, const std::string& base_dir,
                       const std::string& device, int threads, uint64_t seed, bool tf32) {
             return std::make_unique<Runner>(model, name, base_dir, RunSettings{device, threads, seed, tf32});
           }),
           py::arg("model"), py::arg("name"), py::arg("base_dir"), py::arg("device"), py::arg("threads"),
           py::arg("seed"), py::arg("tf32"))
      .def("run", &Runner::run, py::arg("inputs"))
      .def_property_readonly("inputs", &Runner::inputs)
      .def_property_readonly("device", &Runner::device);
}

}  // namespace amp::python
