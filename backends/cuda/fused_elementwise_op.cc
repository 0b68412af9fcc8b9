#include "backends/cuda/fused_elementwise_op.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"
#include "passes/fusion/elementwise_program_eval.h"

namespace amp::cuda {

std::unique_ptr<PreparedOp> FusedElementwiseOp::prepare(const OpShapes& shapes, DeviceContext& ctx) const {
  if (shapes.in.size() != program_.input_dtypes.size() || shapes.out.size() != program_.outputs.size())
    throw Error("internal: fused kernel operands do not match its program");
  const std::vector<int64_t> space = shapes.out.at(0)->dims;
  if (space.size() > static_cast<size_t>(kFusedMaxRank))
    throw InputError("a fused elementwise kernel handles up to " + std::to_string(kFusedMaxRank) + " dims, got " +
                     std::to_string(space.size()));
  std::vector<std::vector<int64_t>> in_dims;
  for (const TensorDesc* t : shapes.in) in_dims.push_back(t->dims);
  for (const TensorDesc* t : shapes.out)
    if (t->dims != space) throw Error("internal: outputs of a fused kernel differ in shape");
  // The inputs must broadcast into the iteration space, not beyond it.
  std::vector<std::vector<int64_t>> all = in_dims;
  all.push_back(space);
  if (broadcast_shape(all, program_.min_rank, "fused elementwise kernel") != space)
    throw InputError("fused elementwise kernel: inputs broadcast beyond the output shape");

  const int64_t n = shapes.out[0]->numel();
  const std::vector<InputIndexing> indexing = choose_indexing(in_dims, space);
  const cudaKernel_t fn = ctx.load_kernel(generate_elementwise_kernel(program_, indexing, needs_wide_index(n)));

  FusedDims dims{};
  dims.rank = static_cast<int>(space.size());
  for (size_t d = 0; d < space.size(); ++d) dims.size[d] = space[d];
  std::vector<FusedStrides> strides(in_dims.size());
  for (size_t k = 0; k < in_dims.size(); ++k) {
    const std::vector<int64_t> s = broadcast_strides(in_dims[k], space);
    for (size_t d = 0; d < s.size(); ++d) strides[k].stride[d] = s[d];
  }
  constexpr int kBlock = 256;  // the generated kernels' __launch_bounds__
  const unsigned grid = grid_for(n, kBlock, ctx);

  return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
    if (n == 0) return;
    long long count = n;
    FusedDims d = dims;
    std::vector<FusedStrides> st = strides;
    std::vector<const void*> ins = b.in;
    std::vector<void*> outs = b.out;
    // Arguments in the generated signature's order: n, dims, (input, [strides])..., outputs...
    std::vector<void*> args = {&count, &d};
    for (size_t k = 0; k < ins.size(); ++k) {
      args.push_back(&ins[k]);
      if (indexing[k] == InputIndexing::kBroadcast) args.push_back(&st[k]);
    }
    for (void*& o : outs) args.push_back(&o);
    AMP_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(grid), dim3(kBlock), args.data(), 0,
                                    c.stream()));
  });
}

std::unique_ptr<PreparedOp> MultiTensorFusedOp::prepare(const OpShapes& shapes, DeviceContext& ctx) const {
  const size_t groups = variant_of_group_.size(), variants = programs_.size();
  // Where each group's operands start.
  std::vector<size_t> in_at(groups + 1, 0), out_at(groups + 1, 0);
  for (size_t g = 0; g < groups; ++g) {
    const ElementwiseProgram& p = programs_.at(static_cast<size_t>(variant_of_group_[g]));
    in_at[g + 1] = in_at[g] + p.input_dtypes.size();
    out_at[g + 1] = out_at[g] + p.outputs.size();
  }
  if (shapes.in.size() != in_at[groups] || shapes.out.size() != out_at[groups])
    throw Error("internal: multi-tensor kernel operands do not match its groups");
  // How a group reads each input; the groups of one variant must read alike (the schedule batched
  // them so), and the first group of each variant says how.
  auto indexing_of = [&](size_t g) {
    std::vector<InputIndexing> ix;
    for (size_t k = in_at[g]; k < in_at[g + 1]; ++k) {
      const TensorDesc& in = *shapes.in[k];
      ix.push_back(in.dims == shapes.out[out_at[g]]->dims ? InputIndexing::kSame
                   : in.numel() == 1                      ? InputIndexing::kScalar
                                                          : InputIndexing::kBroadcast);
    }
    return ix;
  };
  std::vector<std::vector<InputIndexing>> indexing(variants);
  std::vector<bool> seen(variants, false);
  std::vector<int64_t> counts;
  int64_t largest = 0;
  for (size_t g = 0; g < groups; ++g) {
    const size_t v = static_cast<size_t>(variant_of_group_[g]);
    if (!seen[v]) {
      indexing[v] = indexing_of(g);
      seen[v] = true;
    } else if (indexing_of(g) != indexing[v]) {
      throw Error("internal: batched groups of one program read their inputs differently");
    }
    counts.push_back(shapes.out[out_at[g]]->numel());
    largest = std::max(largest, counts.back());
  }
  std::vector<MultiTensorVariant> list;
  for (size_t v = 0; v < variants; ++v) {
    if (!seen[v]) throw Error("internal: a multi-tensor program no group runs");
    list.push_back({&programs_[v], indexing[v]});
  }
  const MultiTensorKernel mt = generate_multi_tensor_kernel(list, needs_wide_index(largest));
  const cudaKernel_t fn = ctx.load_kernel(mt.kernel);
  constexpr int kBlock = 256;
  const unsigned grid = grid_for(largest, kBlock, ctx);
  const size_t slot = static_cast<size_t>(mt.words_per_slot()), capacity = static_cast<size_t>(mt.capacity);
  const size_t max_in = static_cast<size_t>(mt.inputs);
  const std::vector<int> variant_of_group = variant_of_group_;

  return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
    for (size_t first = 0; first < groups; first += capacity) {
      // The FusedTaskList argument: capacity slots of 8-byte words, then the count.
      std::vector<uint64_t> words(capacity * slot + 1, 0);
      const size_t used = std::min(capacity, groups - first);
      for (size_t j = 0; j < used; ++j) {
        const size_t g = first + j;
        uint64_t* w = &words[j * slot];
        for (size_t k = in_at[g]; k < in_at[g + 1]; ++k) w[k - in_at[g]] = reinterpret_cast<uint64_t>(b.in[k]);
        for (size_t k = out_at[g]; k < out_at[g + 1]; ++k)
          w[max_in + k - out_at[g]] = reinterpret_cast<uint64_t>(b.out[k]);
        w[max_in + static_cast<size_t>(mt.outputs)] = static_cast<uint64_t>(counts[g]);
        if (mt.has_variant) w[max_in + static_cast<size_t>(mt.outputs) + 1] = static_cast<uint64_t>(variant_of_group[g]);
      }
      words[capacity * slot] = used;  // int count: the low 4 bytes on a little-endian GPU
      void* args[] = {words.data()};
      AMP_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(grid), dim3(kBlock), args, 0, c.stream()));
    }
  });
}

}  // namespace amp::cuda
