// The extension module onnx_amp._onnx_amp. Errors: amp::InputError becomes onnx_amp.InputError (a
// ValueError), any other amp::Error onnx_amp.Error (a RuntimeError), each carrying the one line
// the commands print after "<command>: error: ". Logs go to stderr as the commands' do.
#include <dlfcn.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "frontends/python/bindings.h"
#include "graph/error.h"

namespace amp::python {

ModelSource model_source(const py::object& model, const std::string& name, const std::string& base_dir) {
  ModelSource s;
  if (py::isinstance<py::bytes>(model)) {
    s.bytes = model.cast<std::string>();
    s.path = name;
    s.base_dir = base_dir;
  } else {
    s.path = model.cast<std::string>();
  }
  return s;
}

void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

namespace {

// The CUDA backend's module (libamp_cuda_backend.so, loaded on the first device="cuda" or "auto")
// finds graph/, graph/ops/ and backends/ in the process that loads it, as in the commands, which
// export their symbols. Python loads this extension with RTLD_LOCAL, which hides them: made global
// here, once.
void export_own_symbols() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&export_own_symbols), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

}  // namespace

}  // namespace amp::python

PYBIND11_MODULE(_onnx_amp, m) {
  namespace py = pybind11;
  m.doc() = "onnx-amp's C++ libraries: the bindings onnx_amp's Python modules call";
  amp::python::export_own_symbols();
  if (!spdlog::get("onnx_amp")) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("onnx_amp"));
    spdlog::set_pattern("%^%l%$: %v");
  }
  static py::handle error = PyErr_NewException("onnx_amp.Error", PyExc_RuntimeError, nullptr);
  static py::handle input_error =
      PyErr_NewException("onnx_amp.InputError", py::make_tuple(error, py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  m.attr("Error") = error;
  m.attr("InputError") = input_error;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const amp::InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    } catch (const amp::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  amp::python::bind_rewrite(m);
  amp::python::bind_runner(m);
  amp::python::bind_trainer(m);
  amp::python::bind_precision_search(m);
}
