// One prepared CUDA op run alone on the device (a GPU, or the host stand-ins of
// test_cuda_backend_emulated), its operands stored channels-last or not as the test says, for
// checking an op's channels-last path (CudaOp::channels_last) against its own NCHW one on the same
// data: the plan's layout decisions and adapters (channels_last.h) are left out, so a difference
// is the op's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/device_context.h"
#include "graph/error.h"
#include "graph/tensor.h"

namespace amp::test {

namespace channels_last_detail {

// Copies a [N, C, spatial...] row-major tensor to [N, spatial..., C] row-major (to_nhwc) or back,
// element by element as bytes: any dtype.
inline Tensor permute_channels(const Tensor& t, bool to_nhwc) {
  if (t.dims.size() < 3)
    throw InputError("channels-last needs [N, C, spatial...], not rank " + std::to_string(t.dims.size()));
  // The channel dim's place in t's dims and in the result's.
  const size_t rank = t.dims.size(), c_from = to_nhwc ? 1 : rank - 1;
  const int64_t N = t.dims[0], C = t.dims[c_from];
  int64_t spatial = 1;
  std::vector<int64_t> out_dims{N};
  if (to_nhwc) {
    for (size_t d = 2; d < rank; ++d) out_dims.push_back(t.dims[d]);
    out_dims.push_back(C);
  } else {
    out_dims.push_back(C);
    for (size_t d = 1; d + 1 < rank; ++d) out_dims.push_back(t.dims[d]);
  }
  for (size_t d = 0; d < rank; ++d)
    if (d != 0 && d != c_from) spatial *= t.dims[d];
  Tensor out(t.dtype, out_dims);
  const size_t e = dtype_size(t.dtype);
  const uint8_t* src = t.data();
  uint8_t* dst = out.mutable_data();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < spatial; ++p) {
        const int64_t nchw = (n * C + c) * spatial + p, nhwc = (n * spatial + p) * C + c;
        const int64_t from = to_nhwc ? nchw : nhwc, to = to_nhwc ? nhwc : nchw;
        std::memcpy(dst + static_cast<size_t>(to) * e, src + static_cast<size_t>(from) * e, e);
      }
  return out;
}

}  // namespace channels_last_detail

// Channels-last copy of a row-major [N, C, spatial...] tensor: the same elements as a row-major
// [N, spatial..., C] tensor (its bytes are what a channels-last TensorDesc of dims [N, C,
// spatial...] stores; a filter [K, C/g, R, S] so becomes KRSC). from_channels_last undoes it:
// [N, spatial..., C] row-major back to [N, C, spatial...].
inline Tensor to_channels_last(const Tensor& t) { return channels_last_detail::permute_channels(t, true); }
inline Tensor from_channels_last(const Tensor& t) { return channels_last_detail::permute_channels(t, false); }

// Runs one prepared CUDA op once on the device (emulated here): inputs given row-major in ONNX's
// layout (null = absent optional input); those with layout.in[i] set are uploaded channels-last
// and described so (TensorDesc::channels_last); outputs are described by `outs` (dtype, dims,
// packed_bytes; dtype kUndefined = an absent optional output, returned as an empty Tensor) and
// returned row-major in ONNX's layout (transposed back when layout.out[k]); a packed output
// (packed_bytes > 0) comes back as its raw bytes in a uint8 Tensor. Outputs start as all-ones
// bytes (NaN in every float type), so an element the op leaves unwritten shows. Host contents of
// the inputs are not given to prepare (OpShapes::host null), TF32 is off.
inline std::vector<Tensor> run_cuda_op(const cuda::CudaOp& op, cuda::DeviceContext& ctx,
                                       const std::vector<const Tensor*>& inputs,
                                       const std::vector<cuda::TensorDesc>& outs,
                                       const cuda::ChannelsLastOperands& layout) {
  auto listed = [](const std::vector<bool>& v, size_t i) { return i < v.size() && v[i]; };
  std::vector<cuda::TensorDesc> in_descs(inputs.size()), out_descs = outs;
  cuda::OpShapes shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]) in_descs[i] = {inputs[i]->dtype, inputs[i]->dims, 0, listed(layout.in, i)};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes.in.push_back(inputs[i] ? &in_descs[i] : nullptr);
    shapes.host.push_back(nullptr);
  }
  for (size_t k = 0; k < out_descs.size(); ++k) {
    out_descs[k].channels_last = listed(layout.out, k) && out_descs[k].packed_bytes == 0;
    shapes.out.push_back(out_descs[k].dtype == DType::kUndefined ? nullptr : &out_descs[k]);
  }
  const std::unique_ptr<cuda::PreparedOp> prepared = op.prepare(shapes, ctx);

  std::vector<cuda::DeviceBuffer> in_buffers, out_buffers;
  cuda::OpBuffers b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      in_buffers.emplace_back();
      b.in.push_back(nullptr);
      continue;
    }
    const Tensor stored = listed(layout.in, i) ? to_channels_last(*inputs[i]) : *inputs[i];
    in_buffers.emplace_back(std::max<size_t>(stored.nbytes(), 1));
    AMP_CUDA_CHECK(cudaMemcpy(in_buffers.back().data(), stored.data(), stored.nbytes(), cudaMemcpyHostToDevice));
    b.in.push_back(in_buffers.back().data());
  }
  for (const cuda::TensorDesc& d : out_descs) {
    if (d.dtype == DType::kUndefined) {
      out_buffers.emplace_back();
      b.out.push_back(nullptr);
      continue;
    }
    out_buffers.emplace_back(std::max<size_t>(d.nbytes(), 1));
    AMP_CUDA_CHECK(cudaMemset(out_buffers.back().data(), 0xFF, d.nbytes()));
    b.out.push_back(out_buffers.back().data());
  }
  const cuda::DeviceBuffer workspace(std::max<size_t>(prepared->workspace_bytes(), 1));
  const cuda::DeviceBuffer seed(sizeof(unsigned long long));
  AMP_CUDA_CHECK(cudaMemset(seed.data(), 0, seed.size()));
  b.workspace = workspace.data();
  b.seed = static_cast<const unsigned long long*>(seed.data());

  prepared->enqueue(b, ctx);
  if (cudaEvent_t done = prepared->completion()) AMP_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), done, 0));
  AMP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));

  std::vector<Tensor> results;
  for (size_t k = 0; k < out_descs.size(); ++k) {
    const cuda::TensorDesc& d = out_descs[k];
    if (d.dtype == DType::kUndefined) {
      results.emplace_back();
      continue;
    }
    if (d.packed_bytes > 0) {
      Tensor raw(DType::kUInt8, {static_cast<int64_t>(d.packed_bytes)});
      AMP_CUDA_CHECK(cudaMemcpy(raw.mutable_data(), out_buffers[k].data(), d.packed_bytes, cudaMemcpyDeviceToHost));
      results.push_back(std::move(raw));
      continue;
    }
    std::vector<int64_t> stored_dims = d.dims;
    if (d.channels_last) {  // [N, C, spatial...] stored as [N, spatial..., C]
      stored_dims.erase(stored_dims.begin() + 1);
      stored_dims.push_back(d.dims[1]);
    }
    Tensor stored(d.dtype, stored_dims);
    AMP_CUDA_CHECK(cudaMemcpy(stored.mutable_data(), out_buffers[k].data(), d.nbytes(), cudaMemcpyDeviceToHost));
    results.push_back(d.channels_last ? from_channels_last(stored) : std::move(stored));
  }
  return results;
}

}  // namespace amp::test
