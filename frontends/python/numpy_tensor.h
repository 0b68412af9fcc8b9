// numpy arrays <-> Tensors for the Python bindings. An array goes in without a copy: the Tensor is
// a view of the array's memory that holds a reference to it (the backend's copy into its own
// memory is the only one; a non-contiguous array is made contiguous first). A Tensor comes out
// without a copy too: the array owns the Tensor's storage. bfloat16, which numpy lacks, comes out
// as float32 (exact) and goes in as float32 (rounded to nearest even) or as uint16 raw bits.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace amp::python {

namespace py = pybind11;

// `value` (an array or anything numpy.asarray takes) as a Tensor; `what` names it in errors.
// `wanted`: the type the consumer needs when only bfloat16 may differ from the array's (kUndefined
// otherwise: the array's own type).
Tensor tensor_from_numpy(py::handle value, const std::string& what, DType wanted = DType::kUndefined);
py::array numpy_from_tensor(Tensor t);

// A dict of arrays keyed by name, in the dict's order.
std::vector<std::pair<std::string, Tensor>> tensors_from_dict(const py::dict& arrays, const std::string& what);
py::dict dict_from_tensors(std::vector<std::pair<std::string, Tensor>> tensors);

}  // namespace amp::python
