// AllReduce (ai.onnx_amp, graph/amp_ops.h): the mean of each input over the processes of a
// data-parallel run, one node being one bucket and one collective (Communicator::sum, MPI_Allreduce):
// the inputs are packed into the kernel's scratch as fp32 (fp64 for double), summed in place across
// the ranks, divided by their number and unpacked, 16-bit types rounded once. Packing costs a copy
// of the bucket (microseconds for these models' 0.1-1 MB of gradients) and saves a collective's
// latency per tensor. The collective blocks: with one thread per rank no core is left to progress
// it beside the backward pass (README, "Data-parallel training").
//
// The `reduce` flag is a shape input: a plan knows whether its runs exchange, so the accumulation
// micro-batches (reduce false: outputs are the inputs) and the step's last one are two plans, the
// way the CUDA backend captures one graph with the collective and one without.
#include <cstring>

#include "backends/communicator.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class AllReduce final : public Kernel {
 public:
  AllReduce(const Node&, int64_t) {}

  size_t infer(KernelIO& io) const override {
    if (io.has_in(0) && (io.input(0).dtype != DType::kBool || io.input(0).numel() != 1))
      throw InputError("AllReduce's reduce input must be a bool scalar");
    if (io.out.size() + 1 != io.in.size())
      throw InputError("AllReduce has " + std::to_string(io.in.size() - 1) + " inputs to reduce but " +
                       std::to_string(io.out.size()) + " outputs");
    size_t floats = 0, doubles = 0;
    for (size_t i = 1; i < io.in.size(); ++i) {
      if (!io.has_in(i) || !io.has_out(i - 1)) throw InputError("AllReduce's inputs and outputs must all be present");
      const View& x = io.input(i);
      if (!is_floating(x.dtype)) throw InputError("AllReduce takes floating-point tensors, not " + std::string(dtype_name(x.dtype)));
      io.output(i - 1).dtype = x.dtype;
      io.output(i - 1).dims = x.dims;
      (x.dtype == DType::kDouble ? doubles : floats) += static_cast<size_t>(x.numel());
    }
    return doubles * sizeof(double) + floats * sizeof(float);
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const bool reduce = !io.has_in(0) || *io.input(0).as<bool>();
    const int ranks = ctx.communicator ? ctx.communicator->size() : 1;
    if (!reduce || ranks == 1) {
      for (size_t i = 1; i < io.in.size(); ++i)
        if (io.input(i).nbytes()) std::memcpy(io.output(i - 1).data, io.input(i).data, io.input(i).nbytes());
      return;
    }
    size_t doubles = 0;
    for (size_t i = 1; i < io.in.size(); ++i)
      if (io.input(i).dtype == DType::kDouble) doubles += static_cast<size_t>(io.input(i).numel());
    auto* wide = static_cast<double*>(io.workspace);
    auto* narrow_sums = reinterpret_cast<float*>(wide + doubles);
    // Pack.
    size_t at_double = 0, at_float = 0;
    for (size_t i = 1; i < io.in.size(); ++i) {
      const View& x = io.input(i);
      const int64_t n = x.numel();
      switch (x.dtype) {
        case DType::kDouble: std::memcpy(wide + at_double, x.data, x.nbytes()); at_double += n; break;
        case DType::kFloat: std::memcpy(narrow_sums + at_float, x.data, x.nbytes()); at_float += n; break;
        case DType::kFloat16: widen(x.as<f16>(), narrow_sums + at_float, n); at_float += n; break;
        default: widen(x.as<bf16>(), narrow_sums + at_float, n); at_float += n; break;
      }
    }
    if (at_double) ctx.communicator->sum(wide, at_double);
    if (at_float) ctx.communicator->sum(narrow_sums, at_float);
    for (size_t k = 0; k < at_double; ++k) wide[k] /= ranks;
    const float divisor = static_cast<float>(ranks);
    for (size_t k = 0; k < at_float; ++k) narrow_sums[k] /= divisor;
    // Unpack.
    at_double = at_float = 0;
    for (size_t i = 1; i < io.in.size(); ++i) {
      View& y = io.output(i - 1);
      const int64_t n = y.numel();
      switch (y.dtype) {
        case DType::kDouble: std::memcpy(y.data, wide + at_double, y.nbytes()); at_double += n; break;
        case DType::kFloat: std::memcpy(y.data, narrow_sums + at_float, y.nbytes()); at_float += n; break;
        case DType::kFloat16: narrow(narrow_sums + at_float, y.as<f16>(), n); at_float += n; break;
        default: narrow(narrow_sums + at_float, y.as<bf16>(), n); at_float += n; break;
      }
    }
  }
};

}  // namespace

const std::vector<OpEntry>& all_reduce_ops() {
  static const std::vector<OpEntry> ops = {
      {"AllReduce", make_kernel<AllReduce>, 0, {0}},
  };
  return ops;
}

}  // namespace amp::cpu
