#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/grad_kernels.h"
#include "backends/cuda/cast.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/schedule.h"
#include "graph/error.h"
#include "graph/ops/elementwise_grouping.h"

namespace amp {

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

namespace cuda {

bool CudaBackend::available(std::string* why) const {
  const std::string reason = device_unavailable_reason();
  if (why) *why = reason;
  return reason.empty();
}

std::string CudaBackend::unsupported_reason(const Node& n) const {
  if (elem_op_of(n) && !is_fusable_node(n)) {
    // The comparisons of int32 and int64 operands have a kernel of their own (int_compare_ops.cc),
    // and so do Casts between the integer types and the others (cast_ops.cc).
    const bool integers = n.inputs().size() == 2 && n.input(0) && n.input(1) &&
                          n.input(0)->dtype() == n.input(1)->dtype() &&
                          (n.input(0)->dtype() == DType::kInt32 || n.input(0)->dtype() == DType::kInt64);
    const bool castable = n.domain().empty() && n.op_type() == "Cast" && n.inputs().size() == 1 && n.input(0) &&
                          n.output(0) && cast_supported(n.input(0)->dtype(), n.output(0)->dtype());
    if ((integers || castable) && find_cuda_op(n.domain(), n.op_type())) return "";
    return "elementwise " + n.op_type() +
           " runs on the device only on float, float16, bfloat16 and bool tensors (comparisons also on int32 and "
           "int64, Casts also from and to uint8, int8, int32 and int64)";
  }
  const DType first = n.inputs().empty() || !n.input(0) ? DType::kUndefined : n.input(0)->dtype();
  // Ops whose device kernels take fewer types (of their first input) than the CPU's.
  struct DeviceTypes {
    std::string_view op;
    std::vector<DType> types;
    std::string_view names;
  };
  static const std::vector<DType> floats = {DType::kFloat, DType::kFloat16, DType::kBFloat16};
  static const DeviceTypes device_types[] = {
      {"ArgMax", floats, "float, float16 and bfloat16"},
      {"ArgMin", floats, "float, float16 and bfloat16"},
      {"Hardmax", floats, "float, float16 and bfloat16"},
      {"InstanceNormalization", floats, "float, float16 and bfloat16"},
      {"MeanVarianceNormalization", floats, "float, float16 and bfloat16"},
      {"ReduceLogSumExp", floats, "float, float16 and bfloat16"},
      {"GridSample", floats, "float, float16 and bfloat16"},
      {"RoiAlign", {DType::kFloat, DType::kFloat16}, "float and float16"},
      {"TopK",
       {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32, DType::kInt64},
       "float, float16, bfloat16, double, int32 and int64"},
  };
  if (n.domain().empty() && first != DType::kUndefined)
    for (const DeviceTypes& d : device_types)
      if (d.op == n.op_type() && std::find(d.types.begin(), d.types.end(), first) == d.types.end())
        return n.op_type() + " runs on the device only on " + std::string(d.names) + " tensors, not " +
               std::string(dtype_name(first));
  if (find_cuda_op(n.domain(), n.op_type())) return "";
  if (n.domain() == kAmpDomain && n.op_type() == kFusedElementwiseOp) return "";
  if (elem_op_of(n)) return "";
  // Nodes that read nothing but constants and dims run on the host while a run is planned: Constant,
  // and the ops whose kernels read only their inputs' dims (Shape, Size, EyeLike).
  if (n.domain().empty() && n.op_type() == "Constant") return "";
  const cpu::OpEntry* host = cpu::find_op(n.domain(), n.op_type());
  if (n.domain().empty() && is_random_op(n.op_type()))
    return "no device kernel for " + n.op_type() + ": it draws new values every run, so it cannot run on the host "
           "while planning";
  if (host && !host->reads_data) return "";
  if (host)
    return "no device kernel for " + n.op_type() + ": it runs (on the host, while planning) only when its inputs are constants or shapes";
  return "op " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() + " is not supported by the cuda backend";
}

std::unique_ptr<Executable> CudaBackend::compile(const Model& m, const CompileOptions& options) {
  std::shared_ptr<DeviceContext> ctx;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ctx_) {
      std::string why;
      if (!available(&why)) throw InputError("cuda backend not available: " + why);
      int device = 0;
      if (options.communicator) {
        int devices = 0;
        AMP_CUDA_CHECK(cudaGetDeviceCount(&devices));
        device = device_for_local_rank(options.communicator->local_rank(), options.communicator->local_size(), devices);
      }
      ctx_ = std::make_shared<DeviceContext>(device);
    }
    ctx = ctx_;
  }
  if (options.communicator) ctx->start_collectives(*options.communicator);
  return std::make_unique<CudaExecutable>(m, options, std::move(ctx));
}

}  // namespace cuda
}  // namespace amp
