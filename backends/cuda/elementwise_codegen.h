// CUDA C++ source for one fused elementwise group, compiled at load time by NVRTC
// (nvrtc_compiler.h). One thread per element of the broadcast iteration space, grid-stride loop
// (eight neighbouring elements a thread, loaded and stored as vectors, where no input broadcasts
// and the pointers are 16-byte aligned: the arena's always are);
// inputs widened to fp32, every instruction computed in fp32 and rounded to its graph type exactly
// where evaluate_elementwise_program rounds, outputs narrowed once. The source needs no headers
// (fp16/bf16 conversions are cvt instructions), so it compiles wherever NVRTC runs.
//
// Each input is read one of three ways, chosen per launch shape: at the element's own index (same
// shape as the output, the common case: no index arithmetic at all), at 0 (a scalar), or through
// broadcast strides (a bias row, a mask), which costs one div/mod per dim per element.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ops/elementwise_program.h"

namespace amp {

inline constexpr int kFusedMaxRank = 8;

// Kernel parameter blocks, passed by value. The generated source spells the same structs (from
// these macros), so host and device layouts cannot drift apart.
#define AMP_FUSED_DIMS_STRUCT \
  struct FusedDims {          \
    long long size[8];        \
    int rank;                 \
  };
#define AMP_FUSED_STRIDES_STRUCT \
  struct FusedStrides {          \
    long long stride[8];         \
  };
AMP_FUSED_DIMS_STRUCT
AMP_FUSED_STRIDES_STRUCT

// How a fused kernel reads an input: at the element's own index, at 0, at a broadcast offset
// (walked from the element's coordinates), or at a broadcast offset that stays the same over every
// aligned run of 8 elements (kRunOf8: the input repeats over the innermost dim of the launch's
// space, which holds a multiple of 8 elements — a squeeze-and-excitation scale [N, C, 1, 1] over
// [N, C, H, W] with H * W a multiple of 8), which the vector loop walks to once per 8 elements.
enum class InputIndexing : uint8_t { kSame, kScalar, kBroadcast, kRunOf8 };
inline bool walks_offset(InputIndexing ix) { return ix == InputIndexing::kBroadcast || ix == InputIndexing::kRunOf8; }

struct GeneratedKernel {
  std::string name;    // the extern "C" kernel symbol, "amp_fused_<hash of the body>"
  std::string source;  // complete translation unit
  // No kBroadcast input and a program of at most 40 instructions and 4 outputs: where its
  // pointers are 16-byte aligned, a thread takes 8 elements at a time (a launch needs an eighth
  // of the threads).
  bool vectorized = false;
};

// Kernel arguments, in order: long long n, FusedDims dims, then per input a const pointer (and a
// FusedStrides after it when that input is kBroadcast or kRunOf8), then per output a pointer. Element types
// are the program's: float, unsigned short (fp16/bf16 bits) or unsigned char (bool). Index
// arithmetic is 32-bit unless wide_index (needed from 2^31 elements on, see needs_wide_index).
GeneratedKernel generate_elementwise_kernel(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing,
                                            bool wide_index = false);
// True when n elements (plus a grid-stride step past the end) do not fit 32-bit unsigned indices.
inline bool needs_wide_index(int64_t n) { return n >= (int64_t{1} << 31); }

// The multi-tensor form: one launch applies a program to up to `capacity` sets of tensors (every
// parameter's optimizer update at once, where one launch per parameter would spend more time
// launching than computing for small layers). With several variants — programs with their own
// indexing, e.g. the update of parameters with fp16 gradients and of those with fp32 ones — each
// tensor set names the variant it runs, and one launch still serves them all. The tensor sets
// travel in the kernel's one argument, a FusedTaskList: `capacity` slots of (`inputs` input
// pointers, `outputs` output pointers, element count[, variant]), 8 bytes each, then an int count
// of the slots in use; `inputs`/`outputs` are the largest of the variants'. Inputs are read at the
// element's index or at 0 (a scalar), never broadcast.
inline constexpr size_t kKernelParamBytes = 4096;  // CUDA's limit for kernel parameters before 12.1
inline constexpr size_t kMultiTensorMaxTasks = 64;

struct MultiTensorKernel {
  GeneratedKernel kernel;
  int inputs = 0, outputs = 0;  // pointer slots per tensor set
  int capacity = 0;             // tensor sets per launch
  bool has_variant = false;     // each slot ends with its variant's number (more than one variant)
  int words_per_slot() const { return inputs + outputs + 1 + (has_variant ? 1 : 0); }
};
struct MultiTensorVariant {
  const ElementwiseProgram* program = nullptr;
  std::vector<InputIndexing> indexing;
};
MultiTensorKernel generate_multi_tensor_kernel(const std::vector<MultiTensorVariant>& variants, bool wide_index = false);
inline MultiTensorKernel generate_multi_tensor_kernel(const ElementwiseProgram& p, const std::vector<InputIndexing>& indexing,
                                                      bool wide_index = false) {
  return generate_multi_tensor_kernel({MultiTensorVariant{&p, indexing}}, wide_index);
}

// How each input is read over the iteration space `out`.
std::vector<InputIndexing> choose_indexing(const std::vector<std::vector<int64_t>>& input_shapes,
                                           const std::vector<int64_t>& out);

// FNV-1a, 64 bits: names kernels and keys the compiled-image cache.
uint64_t fnv1a64(const std::string& bytes);
std::string hex64(uint64_t v);

}  // namespace amp
