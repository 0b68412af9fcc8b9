#include "backends/cuda/fused_elementwise_op.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"
#include "graph/ops/elementwise_program_eval.h"

namespace amp::cuda {

namespace {

constexpr int kBlock = 256;  // the generated kernels' __launch_bounds__

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<std::vector<int64_t>> dims_of(const std::vector<const TensorDesc*>& list) {
  std::vector<std::vector<int64_t>> dims;
  for (const TensorDesc* t : list) dims.push_back(t->dims);
  return dims;
}

// The launch of row-major operands without its kernel: the checks, the iteration space, how each
// input is read and its broadcast strides.
FusedLaunch row_major_launch(const ElementwiseProgram& program, const std::vector<std::vector<int64_t>>& in_dims,
                             const std::vector<std::vector<int64_t>>& out_dims) {
  if (in_dims.size() != program.input_dtypes.size() || out_dims.size() != program.outputs.size())
    throw Error("internal: fused kernel operands do not match its program");
  const std::vector<int64_t> space = out_dims.at(0);
  if (space.size() > static_cast<size_t>(kFusedMaxRank))
    throw InputError("a fused elementwise kernel handles up to " + std::to_string(kFusedMaxRank) + " dims, got " +
                     std::to_string(space.size()));
  for (const std::vector<int64_t>& d : out_dims)
    if (d != space) throw Error("internal: outputs of a fused kernel differ in shape");
  // The inputs must broadcast into the iteration space, not beyond it.
  std::vector<std::vector<int64_t>> all = in_dims;
  all.push_back(space);
  if (broadcast_shape(all, program.min_rank, "fused elementwise kernel") != space)
    throw InputError("fused elementwise kernel: inputs broadcast beyond the output shape");

  FusedLaunch l;
  l.n = numel(space);
  l.indexing = choose_indexing(in_dims, space);
  l.dims.rank = static_cast<int>(space.size());
  for (size_t d = 0; d < space.size(); ++d) l.dims.size[d] = space[d];
  l.strides.resize(in_dims.size());
  for (size_t k = 0; k < in_dims.size(); ++k) {
    const std::vector<int64_t> s = broadcast_strides(in_dims[k], space);
    for (size_t d = 0; d < s.size(); ++d) l.strides[k].stride[d] = s[d];
  }
  return l;
}

// Merges neighbouring dims of the iteration space that every broadcast input walks as one (its
// stride over the outer dim is the inner's times the inner's size: both contiguous, or both
// repeated with stride 0), and drops dims of size 1: the kernel's per-element index arithmetic
// is one division and one remainder per dim. A squeeze-and-excitation scale [N, C, 1, 1] over
// [N, C, H, W] becomes [N * C] over [N * C, H * W]: 2 dims instead of 4.
void collapse_dims(FusedLaunch& l) {
  std::vector<size_t> broadcast;
  for (size_t k = 0; k < l.indexing.size(); ++k)
    if (l.indexing[k] == InputIndexing::kBroadcast) broadcast.push_back(k);
  int rank = 0;
  for (int d = 0; d < l.dims.rank; ++d) {
    const long long size = l.dims.size[d];
    if (size == 1) continue;
    bool merges = rank > 0;
    for (size_t k : broadcast)
      merges = merges && l.strides[k].stride[rank - 1] == l.strides[k].stride[d] * size;
    if (merges) {
      l.dims.size[rank - 1] *= size;
      for (size_t k : broadcast) l.strides[k].stride[rank - 1] = l.strides[k].stride[d];
      continue;
    }
    l.dims.size[rank] = size;
    for (size_t k : broadcast) l.strides[k].stride[rank] = l.strides[k].stride[d];
    ++rank;
  }
  for (int d = rank; d < l.dims.rank; ++d) {
    l.dims.size[d] = 0;
    for (size_t k : broadcast) l.strides[k].stride[d] = 0;
  }
  l.dims.rank = rank;
}

// Broadcast inputs that repeat over the space's innermost dim, of a multiple of 8 elements, read
// one offset per aligned run of 8 (kRunOf8), so that the kernel keeps its vector loop:
// efficientnet_b0's squeeze-and-excitation products, one per 8 elements of the space [N * C, H * W]
// walked element by element, ran at 190-380 GB/s on an H200 (2026-11-28).
void runs_of_8(FusedLaunch& l) {
  if (l.dims.rank < 1 || l.dims.size[l.dims.rank - 1] % 8 != 0) return;
  for (size_t k = 0; k < l.indexing.size(); ++k)
    if (l.indexing[k] == InputIndexing::kBroadcast && l.strides[k].stride[l.dims.rank - 1] == 0)
      l.indexing[k] = InputIndexing::kRunOf8;
}

// The dims merged, the runs of 8 found, and the kernel generated.
void finish_launch(const ElementwiseProgram& program, FusedLaunch& l) {
  collapse_dims(l);
  runs_of_8(l);
  l.kernel = generate_elementwise_kernel(program, l.indexing, needs_wide_index(l.n));
}

}  // namespace

FusedLaunch plan_fused_launch(const ElementwiseProgram& program, const std::vector<std::vector<int64_t>>& in_dims,
                              const std::vector<std::vector<int64_t>>& out_dims) {
  FusedLaunch l = row_major_launch(program, in_dims, out_dims);
  finish_launch(program, l);
  return l;
}

FusedLaunch plan_fused_launch(const ElementwiseProgram& program, const std::vector<const TensorDesc*>& in,
                              const std::vector<const TensorDesc*>& out) {
  FusedLaunch l = row_major_launch(program, dims_of(in), dims_of(out));
  bool any = false;
  for (const TensorDesc* t : in) any |= t->channels_last;
  for (const TensorDesc* t : out) {
    any |= t->channels_last;
    if (t->channels_last != out.at(0)->channels_last) throw Error("internal: outputs of a fused kernel stored in two layouts");
  }
  if (!any) {
    finish_launch(program, l);
    return l;
  }
  // The iteration space in the outputs' storage order: perm[j] is the dim of dims' order walked
  // j-th from the outermost (N, spatial..., C for channels-last outputs).
  const std::vector<int64_t>& space = out.at(0)->dims;
  const size_t rank = space.size();
  std::vector<size_t> perm(rank);
  for (size_t d = 0; d < rank; ++d) perm[d] = d;
  if (out.at(0)->channels_last && rank >= 3) std::rotate(perm.begin() + 1, perm.begin() + 2, perm.end());
  std::vector<int64_t> walked;
  for (size_t d : perm) walked.push_back(space[d]);
  const std::vector<int64_t> dense = contiguous_strides(walked);
  l.dims.rank = static_cast<int>(rank);
  for (size_t j = 0; j < rank; ++j) l.dims.size[j] = walked[j];
  for (size_t k = 0; k < in.size(); ++k) {
    // The input's stored strides over the space (0 where it broadcasts), in the walk's order.
    const std::vector<int64_t> own = in[k]->strides();
    const size_t offset = rank - in[k]->dims.size();
    std::vector<int64_t> st(rank, 0);
    for (size_t j = 0; j < rank; ++j) {
      const size_t d = perm[j];
      if (d < offset || in[k]->dims[d - offset] == 1) continue;
      st[j] = own[d - offset];
    }
    bool same = true, scalar = true;
    for (size_t j = 0; j < rank; ++j) {
      if (walked[j] == 1) continue;
      same &= st[j] == dense[j];
      scalar &= st[j] == 0;
    }
    l.indexing[k] = scalar ? InputIndexing::kScalar : same ? InputIndexing::kSame : InputIndexing::kBroadcast;
    for (size_t j = 0; j < rank; ++j) l.strides[k].stride[j] = st[j];
  }
  finish_launch(program, l);
  return l;
}

std::vector<void*> FusedLaunch::args(const std::vector<const void*>& ins, const std::vector<void*>& outs) const {
  // cudaLaunchKernel takes void** but only reads through it.
  std::vector<void*> a = {const_cast<long long*>(&n), const_cast<FusedDims*>(&dims)};
  for (size_t k = 0; k < ins.size(); ++k) {
    a.push_back(const_cast<const void**>(&ins[k]));
    if (walks_offset(indexing[k])) a.push_back(const_cast<FusedStrides*>(&strides[k]));
  }
  for (size_t k = 0; k < outs.size(); ++k) a.push_back(const_cast<void**>(&outs[k]));
  return a;
}

std::unique_ptr<PreparedOp> FusedElementwiseOp::prepare(const OpShapes& shapes, DeviceContext& ctx) const {
  const FusedLaunch launch = plan_fused_launch(program_, shapes.in, shapes.out);
  const cudaKernel_t fn = ctx.load_kernel(launch.kernel);
  const unsigned grid = grid_for(launch.kernel.vectorized ? (launch.n + 7) / 8 : launch.n, kBlock, ctx);

  return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
    if (launch.n == 0) return;
    std::vector<void*> args = launch.args(b.in, b.out);
    AMP_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(grid), dim3(kBlock), args.data(), 0,
                                    c.stream()));
  });
}

MultiTensorLaunch plan_multi_tensor_launch(const std::vector<ElementwiseProgram>& programs,
                                           const std::vector<int>& variant_of_group,
                                           const std::vector<std::vector<int64_t>>& in_dims,
                                           const std::vector<std::vector<int64_t>>& out_dims) {
  const size_t groups = variant_of_group.size(), variants = programs.size();
  MultiTensorLaunch l;
  l.variant_of_group = variant_of_group;
  // Where each group's operands start.
  l.in_at.assign(groups + 1, 0);
  l.out_at.assign(groups + 1, 0);
  for (size_t g = 0; g < groups; ++g) {
    const ElementwiseProgram& p = programs.at(static_cast<size_t>(variant_of_group[g]));
    l.in_at[g + 1] = l.in_at[g] + p.input_dtypes.size();
    l.out_at[g + 1] = l.out_at[g] + p.outputs.size();
  }
  if (in_dims.size() != l.in_at[groups] || out_dims.size() != l.out_at[groups])
    throw Error("internal: multi-tensor kernel operands do not match its groups");
  // How a group reads each input; the groups of one variant must read alike (the schedule batched
  // them so), and the first group of each variant says how.
  auto indexing_of = [&](size_t g) {
    std::vector<InputIndexing> ix;
    const std::vector<int64_t>& space = out_dims[l.out_at[g]];
    for (size_t k = l.in_at[g]; k < l.in_at[g + 1]; ++k)
      ix.push_back(in_dims[k] == space ? InputIndexing::kSame
                   : numel(in_dims[k]) == 1 ? InputIndexing::kScalar
                                            : InputIndexing::kBroadcast);
    return ix;
  };
  std::vector<std::vector<InputIndexing>>& indexing = l.indexing;
  indexing.resize(variants);
  std::vector<bool> seen(variants, false);
  for (size_t g = 0; g < groups; ++g) {
    const size_t v = static_cast<size_t>(variant_of_group[g]);
    if (!seen[v]) {
      indexing[v] = indexing_of(g);
      seen[v] = true;
    } else if (indexing_of(g) != indexing[v]) {
      throw Error("internal: batched groups of one program read their inputs differently");
    }
    l.counts.push_back(numel(out_dims[l.out_at[g]]));
    l.largest = std::max(l.largest, l.counts.back());
  }
  std::vector<MultiTensorVariant> list;
  for (size_t v = 0; v < variants; ++v) {
    if (!seen[v]) throw Error("internal: a multi-tensor program no group runs");
    list.push_back({&programs[v], indexing[v]});
  }
  l.mt = generate_multi_tensor_kernel(list, needs_wide_index(l.largest));
  return l;
}

std::vector<uint64_t> MultiTensorLaunch::task_list(size_t first, const std::vector<const void*>& ins,
                                                   const std::vector<void*>& outs) const {
  const size_t slot = static_cast<size_t>(mt.words_per_slot()), capacity = static_cast<size_t>(mt.capacity);
  const size_t max_in = static_cast<size_t>(mt.inputs), max_out = static_cast<size_t>(mt.outputs);
  std::vector<uint64_t> words(capacity * slot + 1, 0);
  const size_t used = std::min(capacity, groups() - first);
  for (size_t j = 0; j < used; ++j) {
    const size_t g = first + j;
    uint64_t* w = &words[j * slot];
    for (size_t k = in_at[g]; k < in_at[g + 1]; ++k) w[k - in_at[g]] = reinterpret_cast<uint64_t>(ins[k]);
    for (size_t k = out_at[g]; k < out_at[g + 1]; ++k) w[max_in + k - out_at[g]] = reinterpret_cast<uint64_t>(outs[k]);
    w[max_in + max_out] = static_cast<uint64_t>(counts[g]);
    if (mt.has_variant) w[max_in + max_out + 1] = static_cast<uint64_t>(variant_of_group[g]);
  }
  words[capacity * slot] = used;  // int count: the low 4 bytes on a little-endian GPU
  return words;
}

std::unique_ptr<PreparedOp> MultiTensorFusedOp::prepare(const OpShapes& shapes, DeviceContext& ctx) const {
  const MultiTensorLaunch launch =
      plan_multi_tensor_launch(programs_, variant_of_group_, dims_of(shapes.in), dims_of(shapes.out));
  const cudaKernel_t fn = ctx.load_kernel(launch.mt.kernel);
  const unsigned grid = grid_for(launch.mt.kernel.vectorized ? (launch.largest + 7) / 8 : launch.largest, kBlock, ctx);

  return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
    for (size_t first = 0; first < launch.groups(); first += static_cast<size_t>(launch.mt.capacity)) {
      std::vector<uint64_t> words = launch.task_list(first, b.in, b.out);
      void* args[] = {words.data()};
      AMP_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(grid), dim3(kBlock), args, 0, c.stream()));
    }
  });
}

}  // namespace amp::cuda
