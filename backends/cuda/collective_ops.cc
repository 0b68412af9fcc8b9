// AllReduce (ai.onnx_amp, graph/amp_ops.h) on GPUs: one bucket is one NCCL group of
// ncclAllReduce(ncclAvg) calls, one per tensor, which NCCL runs as one launch (no packing copy),
// on NCCL's own stream. The unit records an event on the step's stream, NCCL's stream waits for
// it, and the step's stream waits for NCCL's only at the first reader of the averages
// (CudaExecutable::enqueue_step): the backward's launches between them run meanwhile. Fork and
// join are events, which CUDA Graph capture turns into edges of the captured step, so the
// collective is a node of it, replayed with it (NCCL takes part in capture since 2.9).
//
// A bucket's gradients arrive as the backward pass leaves them, in fp16 or bf16: the op absorbs the
// widening Casts (CudaOp::reads_any_float) and widens them itself on NCCL's stream, into the fp32
// buffers NCCL then averages in place (widen.cuh says why not as Cast units).
//
// The reduce flag is a plan-time value (the op's shape input): a plan whose runs do not exchange
// (the micro-batches of gradient accumulation) copies its inputs on the step's stream instead, so
// accumulation captures two graphs, one with the collective and one without. The averages are
// fp32 or fp64: NCCL would sum fp16 and bf16 in their own precision, not in fp32 as the op
// promises (the step graphs average fp32 gradients).
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/cuda/widen.cuh"
#include "graph/amp_ops.h"

namespace amp::cuda {
namespace {

struct Bucket {
  std::vector<size_t> counts;
  std::vector<ncclDataType_t> types;
  std::vector<DType> inputs;  // an fp16/bf16 input is widened into its output first
  std::vector<size_t> bytes;  // of each output
};

// Widens the bucket's fp16/bf16 inputs into their outputs on `stream`; true for those.
std::vector<bool> widen_inputs(const Bucket& bucket, const OpBuffers& b, const DeviceContext& ctx, cudaStream_t stream) {
  std::vector<Widening> tasks;
  std::vector<bool> widened;
  for (size_t i = 0; i < bucket.inputs.size(); ++i) {
    widened.push_back(bucket.inputs[i] == DType::kFloat16 || bucket.inputs[i] == DType::kBFloat16);
    if (widened.back())
      tasks.push_back({bucket.inputs[i], b.in[i + 1], static_cast<float*>(b.out[i]), static_cast<int64_t>(bucket.counts[i])});
  }
  widen_to_float(tasks, ctx.sm_count(), stream);
  return widened;
}

class PreparedAllReduce final : public PreparedOp {
 public:
  PreparedAllReduce(Bucket bucket, const NcclCommunicator& nccl) : bucket_(std::move(bucket)), nccl_(nccl) {
    AMP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    AMP_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  ~PreparedAllReduce() override {
    cudaEventDestroy(ready_);
    cudaEventDestroy(done_);
  }
  void enqueue(const OpBuffers& b, DeviceContext& ctx) const override {
    AMP_CUDA_CHECK(cudaEventRecord(ready_, ctx.stream()));
    AMP_CUDA_CHECK(cudaStreamWaitEvent(nccl_.stream(), ready_, 0));
    const std::vector<bool> widened = widen_inputs(bucket_, b, ctx, nccl_.stream());
    AMP_NCCL_CHECK(ncclGroupStart());
    for (size_t i = 0; i < bucket_.counts.size(); ++i)
      AMP_NCCL_CHECK(ncclAllReduce(widened[i] ? b.out[i] : b.in[i + 1], b.out[i], bucket_.counts[i], bucket_.types[i],
                                   ncclAvg, nccl_.comm(), nccl_.stream()));
    AMP_NCCL_CHECK(ncclGroupEnd());
    AMP_CUDA_CHECK(cudaEventRecord(done_, nccl_.stream()));
  }
  cudaEvent_t completion() const override { return done_; }

 private:
  Bucket bucket_;
  const NcclCommunicator& nccl_;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
};

class AllReduce final : public CudaOp {
 public:
  AllReduce(const Node&, int64_t) {}
  bool reads_any_float(size_t input) const override { return input >= 1; }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (s.has_in(0) && (!s.host[0] || s.host[0]->numel() != 1))
      throw InputError("AllReduce's reduce flag must be a scalar known before the run");
    const bool reduce = !s.has_in(0) || s.host[0]->element(0) != 0;
    if (s.out.size() + 1 != s.in.size()) throw InputError("AllReduce needs one output per input it reduces");
    Bucket bucket;
    for (size_t i = 1; i < s.in.size(); ++i) {
      if (!s.has_in(i) || !s.has_out(i - 1)) throw InputError("AllReduce's inputs and outputs must all be present");
      const DType t = s.out[i - 1]->dtype;
      if (t != DType::kFloat && t != DType::kDouble)
        throw InputError("AllReduce averages float or double tensors on cuda, not " + std::string(dtype_name(t)) +
                         " (NCCL would sum them in their own precision)");
      bucket.counts.push_back(static_cast<size_t>(s.out[i - 1]->numel()));
      bucket.types.push_back(t == DType::kFloat ? ncclFloat32 : ncclFloat64);
      bucket.inputs.push_back(s.in[i]->dtype);
      bucket.bytes.push_back(s.out[i - 1]->nbytes());
    }
    // One process, or a micro-batch that does not exchange: each output is its input, widened.
    if (!reduce || !ctx.collectives())
      return std::make_unique<PreparedFunction>([bucket](const OpBuffers& b, DeviceContext& c) {
        const std::vector<bool> widened = widen_inputs(bucket, b, c, c.stream());
        for (size_t i = 0; i < bucket.bytes.size(); ++i)
          if (!widened[i] && bucket.bytes[i])
            AMP_CUDA_CHECK(cudaMemcpyAsync(b.out[i], b.in[i + 1], bucket.bytes[i], cudaMemcpyDeviceToDevice, c.stream()));
      });
    return std::make_unique<PreparedAllReduce>(std::move(bucket), *ctx.collectives());
  }
};

}  // namespace

const std::vector<CudaOpEntry>& collective_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {kAmpDomain, "AllReduce", make_op<AllReduce>},
  };
  return ops;
}

}  // namespace amp::cuda
