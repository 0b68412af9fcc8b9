// The pieces of the extension module _onnx_amp, one file each: module.cc makes the module (errors,
// logging) and calls the others. Every function here is a thin adapter: Python arguments in, the
// frontends/lib call that amp-rewrite, amp-run or amp-train makes, Python values out; the GIL is
// released while C++ runs.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "frontends/lib/model_source.h"

namespace amp::python {

namespace py = pybind11;

void bind_rewrite(py::module_& m);
void bind_runner(py::module_& m);
void bind_trainer(py::module_& m);
void bind_precision_search(py::module_& m);

// The model argument of every call, as __init__.py passes it: a path (str) or serialized bytes (an
// onnx.ModelProto), named `name` in messages, its external data in base_dir.
ModelSource model_source(const py::object& model, const std::string& name, const std::string& base_dir);

// Raises KeyboardInterrupt (as error_already_set) when Ctrl-C was pressed: called, with the GIL,
// between the steps of a long call.
void check_signals();

}  // namespace amp::python
