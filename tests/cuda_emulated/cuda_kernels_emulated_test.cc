// The hand-written CUDA kernels of backends/cuda/*.cu (softmax, cross-entropy, layernorm,
// reductions, gather / scatter-add, strided copies, all-finite, dropout, ReLU masks) executed
// without a GPU:
// the exact .cu sources, rewritten at build time only where CUDA syntax must become C++ (the
// <<<...>>> launches), compiled as host C++ behind tests/support/cuda_emulator_prelude.h and run
// by the fiber emulator of tests/support/cuda_emulator.h — barriers, warp shuffles and votes,
// shared memory and atomics with their CUDA semantics, undefined behaviour refused. Each launcher
// is called the way the ops of backends/cuda/*_ops.cc call it (their parameter computations are
// mirrored here, each next to the op it copies) and what the kernels write is compared with the
// CPU backend, the project's reference, running the same op as a one-node model — the same
// comparisons as the GPU parity tests of tests/backends/cuda_backend_test.cc, which need a device.
//
// Shapes are picked for the code paths: rows shorter and longer than the block (the launchers
// choose 64/256/1024 threads by length) and of non-power-of-two length, softmax over a middle
// axis, reductions over non-adjacent axes and split into chunks (two passes), empty tensors,
// NaN and inf, ignore_index and weights, the multi-row blocks of layernorm's backward, repeated
// indices, Slice with negative steps, 64-bit copy offsets. The emulated device has 2 SMs, so
// launchers that size grids by SM count (gather, copies, all-finite, layernorm's backward) give
// few blocks and their grid-stride loops go round several times.
//
// Device buffers are host memory ending at an inaccessible page (a read or write past the end
// faults, and the emulator reports which kernel, block and thread); outputs start as 0xa5 bytes
// and workspaces as 0xff (NaN), so an element nobody writes, or scratch read before it is
// written, shows.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/ops/elementwise_program_eval.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

// The launchers as the emulated translation units define them: namespace amp::cuda renamed
// amp::cuda_emulated (see cuda_emulator_prelude.h), the same declarations.
#define cuda cuda_emulated
#include "backends/cuda/all_finite.cuh"
#include "backends/cuda/cross_entropy.cuh"
#include "backends/cuda/dropout.cuh"
#include "backends/cuda/gather.cuh"
#include "backends/cuda/layernorm.cuh"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/relu_mask.cuh"
#include "backends/cuda/softmax.cuh"
#include "backends/cuda/strided_copy.cuh"
#include "tests/cuda_emulated/emulator_checks.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

constexpr int kSmCount = 2;  // the emulated device's SMs: small, so SM-sized grids loop

// ---- Device memory stand-ins -------------------------------------------------------------------

using DeviceBuffer = test::GuardedBuffer;

constexpr unsigned char kOutputFill = 0xa5;     // an unwritten output element shows
constexpr unsigned char kWorkspaceFill = 0xff;  // scratch read before it is written is NaN

// ---- Tensors and the reference -------------------------------------------------------------------

void set(Tensor& x, int64_t k, double v) {
  switch (x.dtype) {
    case DType::kFloat: x.mutable_as<float>()[k] = static_cast<float>(v); break;
    case DType::kFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_fp16(static_cast<float>(v)); break;
    case DType::kBFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_bf16(static_cast<float>(v)); break;
    case DType::kInt64: x.mutable_as<int64_t>()[k] = static_cast<int64_t>(v); break;
    case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(v); break;
    default: ADD_FAILURE() << "no set for " << dtype_name(x.dtype);
  }
}

// -x, exactly (the sign bit), for ReduceMin as -ReduceMax(-x): the CPU backend has no ReduceMin.
Tensor negated(const Tensor& x) {
  Tensor y = x;
  for (int64_t k = 0; k < y.numel(); ++k) {
    if (y.dtype == DType::kFloat) y.mutable_as<float>()[k] = -y.mutable_as<float>()[k];
    else y.mutable_as<uint16_t>()[k] ^= 0x8000u;
  }
  return y;
}

Tensor ints(std::vector<int64_t> v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t k = 0; k < v.size(); ++k) t.mutable_as<int64_t>()[k] = v[k];
  return t;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t k = 0; k < d.size(); ++k) s += (k ? "," : "") + std::to_string(d[k]);
  return s + "]";
}

using test::Feeds;

// One node whose inputs are graph inputs with the feeds' types (an empty name: an absent
// optional input); outputs typed `out_types`. As in cuda_backend_test.cc.
using test::OneNode;

using test::expect_close;
using test::random_tensor;

const std::vector<DType> kFloatTypes = {DType::kFloat, DType::kFloat16, DType::kBFloat16};

// Launches recorded since `mark` whose kernel name starts with `prefix`.
std::vector<amp_emu::LaunchRecord> launched(size_t mark, const std::string& prefix) {
  std::vector<amp_emu::LaunchRecord> out;
  const auto& all = amp_emu::launches();
  for (size_t k = mark; k < all.size(); ++k)
    if (all[k].kernel.rfind(prefix, 0) == 0) out.push_back(all[k]);
  return out;
}

int64_t normalize(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < to && k < d.size(); ++k) p *= d[k];
  return p;
}

// ---- Softmax (softmax.cu) ---------------------------------------------------------------------

// Softmax / LogSoftmax at opset 13+ as Softmax::prepare (softmax_loss_ops.cc) launches it:
// [outer, len, inner] around the axis.
void check_softmax(DType t, const std::vector<int64_t>& dims, int64_t axis, bool log, uint32_t seed,
                   const std::function<void(Tensor&)>& edit = {}) {
  Tensor x = random_tensor(t, dims, seed, -8, 8);
  if (edit) edit(x);
  const std::string what = std::string(log ? "LogSoftmax" : "Softmax") + " " + std::string(dtype_name(t)) + " " +
                           dims_text(dims) + " axis " + std::to_string(axis);
  OneNode node(log ? "LogSoftmax" : "Softmax", {{"x", x}}, {t});
  node.attr(Attribute::of_int("axis", axis));
  const Tensor want = node.run_cpu()[0];
  const size_t a = static_cast<size_t>(normalize(axis, dims.size()));
  const int64_t outer = product(dims, 0, a), len = dims[a], inner = product(dims, a + 1, dims.size());
  DeviceBuffer in(x), out(x.nbytes(), kOutputFill);
  emu::softmax_forward(t, t, in.data(), out.data(), outer, len, inner, log, nullptr);
  expect_close(out.as(t, dims), want, what);
}

TEST(CudaKernelsEmulated, SoftmaxRowsOfEveryBlockSizeMatchTheCpu) {
  const size_t mark = amp_emu::launches().size();
  for (DType t : kFloatTypes)
    for (bool log : {false, true}) {
      // 64 threads: rows of 1, 5 (fewer than a warp), 64, 100 (twice round the block), 511.
      // 256 threads: 512, 700. 1024 threads: 4096, 5000 (not a power of two).
      uint32_t seed = 1;
      for (int64_t cols : {1, 5, 64, 100, 511, 512, 700}) check_softmax(t, {3, cols}, -1, log, seed++);
      for (int64_t cols : {4096, 5000}) check_softmax(t, {2, cols}, 1, log, seed++);
    }
  std::set<unsigned> threads;
  for (const auto& l : launched(mark, "softmax_rows_kernel")) threads.insert(l.block.x);
  EXPECT_EQ(threads, (std::set<unsigned>{64, 256, 1024}));
}

TEST(CudaKernelsEmulated, SoftmaxOverAMiddleAxisUsesTheStridedKernelAndMatchesTheCpu) {
  const size_t mark = amp_emu::launches().size();
  for (DType t : kFloatTypes)
    for (bool log : {false, true}) {
      check_softmax(t, {3, 7, 5}, 1, log, 20);
      check_softmax(t, {4, 9, 70}, 1, log, 21);  // 280 positions: a second, partial block
      check_softmax(t, {2, 3, 4, 5}, -3, log, 22);
      check_softmax(t, {6, 2, 300}, 0, log, 23);  // outer 1
    }
  EXPECT_FALSE(launched(mark, "softmax_strided_kernel").empty());
  EXPECT_TRUE(launched(mark, "softmax_rows_kernel").empty());
}

TEST(CudaKernelsEmulated, SoftmaxWithNanAndInfinitiesMatchesTheCpu) {
  for (DType t : kFloatTypes)
    for (bool log : {false, true})
      for (int64_t cols : {5, 300, 5000}) {
        // Row 0: a NaN first (the value a thread meets first); row 1: a NaN last; row 2: +inf;
        // row 3: -inf among finite values; row 4: all -inf.
        auto edit = [cols](Tensor& x) {
          set(x, 0, NAN);
          set(x, 2 * cols - 1, NAN);
          set(x, 2 * cols + cols / 2, INFINITY);
          set(x, 3 * cols + 1, -INFINITY);
          for (int64_t c = 0; c < cols; ++c) set(x, 4 * cols + c, -INFINITY);
        };
        check_softmax(t, {5, cols}, -1, log, 30, edit);
        // The same rows along a middle axis.
        auto edit_strided = [cols](Tensor& x) {  // [5, cols, 2]: column j of row r at (r * cols + c) * 2 + j
          set(x, 0, NAN);
          set(x, (1 * cols + cols - 1) * 2 + 1, NAN);
          set(x, (2 * cols + cols / 2) * 2, INFINITY);
          for (int64_t c = 0; c < cols; ++c) set(x, (4 * cols + c) * 2 + 1, -INFINITY);
        };
        if (cols <= 300) check_softmax(t, {5, cols, 2}, 1, log, 31, edit_strided);
      }
}

TEST(CudaKernelsEmulated, LaunchersRefuseTypesTheirKernelsDoNotTake) {
  DeviceBuffer buf(64, 0);
  EXPECT_THROW(emu::softmax_forward(DType::kInt32, DType::kInt32, buf.data(), buf.data(), 2, 2, 1, false, nullptr), InputError);
  EXPECT_THROW(emu::layernorm_forward(DType::kDouble, DType::kDouble, DType::kDouble, buf.data(), buf.data(), nullptr, buf.data(), nullptr, nullptr, 2, 2,
                                      1e-5f, nullptr),
               InputError);
  EXPECT_THROW(emu::all_finite({{DType::kInt64, 2}}, {buf.data()}, nullptr, static_cast<bool*>(buf.data()), kSmCount, nullptr),
               InputError);
  emu::CrossEntropyShape s;
  s.n = 1;
  s.classes = 2;
  s.label_type = DType::kFloat;
  EXPECT_THROW(emu::cross_entropy_forward(s, buf.data(), buf.data(), nullptr, buf.data(), nullptr, buf.data(), nullptr),
               InputError);
  emu::StridedCopy c;
  c.dims = {2};
  c.src_strides = c.dst_strides = {1};
  c.elem_bytes = 3;
  EXPECT_THROW(emu::strided_copy(c, buf.data(), buf.data(), kSmCount, nullptr), InputError);
}

TEST(CudaKernelsEmulated, SoftmaxOfEmptyTensorsLaunchesNothing) {
  const size_t mark = amp_emu::launches().size();
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{0, 5}, std::vector<int64_t>{3, 0}, std::vector<int64_t>{2, 0, 4}}) {
    DeviceBuffer in(0, 0), out(0, kOutputFill);
    const int64_t outer = dims[0], len = dims[1], inner = product(dims, 2, dims.size());
    EXPECT_NO_THROW(emu::softmax_forward(DType::kFloat, DType::kFloat, in.data(), out.data(), outer, len, inner, false, nullptr));
  }
  EXPECT_TRUE(launched(mark, "").empty());
}

// ---- Cross-entropy (cross_entropy.cu) --------------------------------------------------------

struct LossCase {
  DType type = DType::kFloat, label_type = DType::kInt64;
  std::vector<int64_t> dims;  // [n, classes, d...]
  std::string reduction = "mean";
  std::optional<int64_t> ignore;
  bool weights = false, log_prob = false;
  uint32_t seed = 1;
  std::function<void(Tensor& scores, Tensor& labels)> edit;
};

std::string describe(const LossCase& c) {
  std::ostringstream s;
  s << dtype_name(c.type) << " scores " << dims_text(c.dims) << " " << dtype_name(c.label_type) << " labels, reduction "
    << c.reduction << (c.ignore ? ", ignore_index " + std::to_string(*c.ignore) : "") << (c.weights ? ", weights" : "")
    << (c.log_prob ? ", log_prob" : "");
  return s.str();
}

// The shape CrossEntropy / CrossEntropyGrad build (loss_shape and fill_dims, softmax_loss_ops.cc).
emu::CrossEntropyShape loss_shape(const LossCase& c) {
  emu::CrossEntropyShape s;
  s.reduction = c.reduction == "none" ? emu::LossReduction::kNone
                : c.reduction == "sum" ? emu::LossReduction::kSum
                                       : emu::LossReduction::kMean;
  s.ignore_index = c.ignore;
  s.type = c.type;
  s.label_type = c.label_type;
  s.n = c.dims[0];
  s.classes = c.dims[1];
  s.inner = product(c.dims, 2, c.dims.size());
  return s;
}

void check_cross_entropy(const LossCase& c) {
  const std::string what = describe(c);
  SCOPED_TRACE(what);
  std::vector<int64_t> label_dims = c.dims;
  label_dims.erase(label_dims.begin() + 1);
  Tensor scores = random_tensor(c.type, c.dims, c.seed, -4, 4);
  Tensor labels = random_tensor(c.label_type, label_dims, c.seed + 1, 0, static_cast<float>(c.dims[1]));
  if (c.ignore)
    for (int64_t k = 0; k < labels.numel(); k += 3) set(labels, k, static_cast<double>(*c.ignore));  // every third
  if (c.edit) c.edit(scores, labels);
  const Tensor weights = random_tensor(c.type, {c.dims[1]}, c.seed + 2, 0.25f, 2.0f);
  const emu::CrossEntropyShape s = loss_shape(c);
  const std::vector<int64_t> loss_dims = c.reduction == "none" ? label_dims : std::vector<int64_t>{};
  const int64_t loss_count = product(loss_dims, 0, loss_dims.size());

  // Forward: SoftmaxCrossEntropyLoss(scores, labels, [weights]) -> loss, [log_prob]
  {
    Feeds in = {{"x", scores}, {"y", labels}};
    if (c.weights) in.push_back({"w", weights});
    std::vector<DType> outs = {c.type};
    if (c.log_prob) outs.push_back(c.type);
    OneNode node("SoftmaxCrossEntropyLoss", in, outs);
    node.attr(Attribute::of_string("reduction", c.reduction));
    if (c.ignore) node.attr(Attribute::of_int("ignore_index", *c.ignore));
    const std::vector<Tensor> want = node.run_cpu();
    DeviceBuffer x(scores), y(labels), w(weights), ws(emu::cross_entropy_workspace(s), kWorkspaceFill);
    DeviceBuffer loss(static_cast<size_t>(loss_count) * dtype_size(c.type), kOutputFill);
    DeviceBuffer log_prob(c.log_prob ? scores.nbytes() : 0, kOutputFill);
    emu::cross_entropy_forward(s, x.data(), y.data(), c.weights ? w.data() : nullptr, loss.data(),
                               c.log_prob ? log_prob.data() : nullptr, ws.data(), nullptr);
    // The row losses are fp32 on both sides; the mean's sum runs in another order.
    expect_close(loss.as(c.type, loss_dims), want[0], "loss of " + what, 10.0);
    if (c.log_prob) expect_close(log_prob.as(c.type, c.dims), want[1], "log_prob of " + what, 10.0);
  }
  // Backward: SoftmaxCrossEntropyLossGrad(dloss, scores, labels, [weights]) -> dscores
  {
    const Tensor dloss = random_tensor(c.type, loss_dims, c.seed + 3, 0.5f, 2.0f);
    Feeds in = {{"d", dloss}, {"x", scores}, {"y", labels}};
    if (c.weights) in.push_back({"w", weights});
    OneNode node("SoftmaxCrossEntropyLossGrad", in, {c.type}, kAmpDomain);
    node.attr(Attribute::of_string("reduction", c.reduction));
    if (c.ignore) node.attr(Attribute::of_int("ignore_index", *c.ignore));
    const Tensor want = node.run_cpu()[0];
    DeviceBuffer d(dloss), x(scores), y(labels), w(weights), ws(emu::cross_entropy_workspace(s), kWorkspaceFill);
    DeviceBuffer dx(scores.nbytes(), kOutputFill);
    emu::cross_entropy_backward(s, d.data(), x.data(), y.data(), c.weights ? w.data() : nullptr, dx.data(), ws.data(),
                                nullptr);
    // The CPU recomputes softmax in fp64.
    expect_close(dx.as(c.type, c.dims), want, "dscores of " + what, 10.0);
  }
}

TEST(CudaKernelsEmulated, CrossEntropyForwardAndBackwardMatchTheCpu) {
  uint32_t seed = 100;
  for (DType t : kFloatTypes)
    for (const char* reduction : {"mean", "sum", "none"}) {
      // 10 classes: fewer than the block's 256 threads; 300 and 1000: more; 2003: rows that start
      // at every 16-byte phase, several vector loads a thread and a tail (float_types.cuh's for_row).
      // 20011: past 4 vector loads a thread, which for_row and map_row issue 4 ahead.
      for (int64_t classes : {10, 300, 1000, 2003, 20011}) {
        LossCase c;
        c.type = t;
        c.dims = {classes >= 1000 ? 3 : 12, classes};
        c.reduction = reduction;
        c.seed = seed++;
        c.log_prob = classes != 300;
        check_cross_entropy(c);
        c.ignore = -100;  // ignore_index outside the classes, as PyTorch's default
        c.weights = true;
        c.label_type = DType::kInt32;
        c.seed = seed++;
        check_cross_entropy(c);
      }
      // [n, classes, d]: the class axis strided (inner 4); ignore_index a real class.
      LossCase c;
      c.type = t;
      c.dims = {3, 7, 4};
      c.reduction = reduction;
      c.ignore = 2;
      c.weights = true;
      c.log_prob = true;
      c.seed = seed++;
      check_cross_entropy(c);
      c.dims = {2, 300, 3};
      c.ignore.reset();
      c.weights = false;
      c.seed = seed++;
      check_cross_entropy(c);
    }
  // 1040 rows: more than the 1024 threads of the single block that sums the row losses (and,
  // for the mean's gradient, the weights), so its threads go round.
  LossCase many;
  many.dims = {2, 3, 520};
  many.ignore = 1;
  many.weights = true;
  for (const char* reduction : {"mean", "sum"}) {
    many.reduction = reduction;
    many.seed = seed++;
    check_cross_entropy(many);
  }
}

TEST(CudaKernelsEmulated, CrossEntropyWithNanInfAndNoRowsMatchesTheCpu) {
  for (DType t : kFloatTypes)
    for (const char* reduction : {"mean", "sum", "none"}) {
      LossCase c;
      c.type = t;
      c.dims = {6, 300};
      c.reduction = reduction;
      c.ignore = 0;
      c.seed = 200;
      c.edit = [](Tensor& x, Tensor& y) {
        set(y, 1, 5);
        set(y, 2, 7);
        set(y, 4, 9);
        set(x, 300 + 17, NAN);               // row 1: a NaN score, a counted row: its loss and the mean are NaN
        set(x, 2 * 300 + 7, INFINITY);       // row 2: +inf at the label
        set(x, 4 * 300 + 3, -INFINITY);      // row 4: -inf elsewhere is harmless
      };
      check_cross_entropy(c);
      // A NaN in an ignored row (label 0 = ignore_index) leaves the loss alone; that row's
      // gradient is 0 * NaN = NaN, as PyTorch's.
      c.edit = [](Tensor& x, Tensor& y) {
        set(y, 5, 0);
        set(x, 5 * 300 + 1, NAN);
        set(y, 1, 3);
      };
      c.seed = 201;
      check_cross_entropy(c);
      // Every row ignored: a mean of 0/0 = NaN, but gradients of exactly 0 (PyTorch's).
      c.edit = [](Tensor&, Tensor& y) {
        for (int64_t r = 0; r < 6; ++r) set(y, r, 0);
      };
      c.seed = 202;
      check_cross_entropy(c);
      // No rows: no row kernel (a grid of 0 is an invalid launch) but the scalar is written:
      // 0 for sum, 0/0 = NaN for mean.
      LossCase empty;
      empty.type = t;
      empty.dims = {0, 5};
      empty.reduction = reduction;
      check_cross_entropy(empty);
    }
}

TEST(CudaKernelsEmulated, CrossEntropyGivesNanForALabelOutOfRange) {
  // The CPU throws for it; a kernel cannot, so the row's loss is NaN (the step's inf/NaN check
  // reports it), as cross_entropy.cu documents.
  LossCase c;
  c.dims = {4, 10};
  const emu::CrossEntropyShape s = loss_shape(c);
  Tensor scores = random_tensor(DType::kFloat, c.dims, 1);
  Tensor labels = ints({1, 2, 10, 3});
  DeviceBuffer x(scores), y(labels), ws(emu::cross_entropy_workspace(s), kWorkspaceFill), loss(4, kOutputFill);
  emu::cross_entropy_forward(s, x.data(), y.data(), nullptr, loss.data(), nullptr, ws.data(), nullptr);
  EXPECT_TRUE(std::isnan(loss.as(DType::kFloat, {}).element(0)));
}

// ---- LayerNormalization (layernorm.cu) --------------------------------------------------------

// As LayerNorm / LayerNormGrad (normalization_ops.cc): rows = dims before the axis, cols = from it.
void split_rows(const std::vector<int64_t>& dims, int64_t axis, int64_t* rows, int64_t* cols) {
  const size_t a = static_cast<size_t>(normalize(axis, dims.size()));
  *rows = product(dims, 0, a);
  *cols = product(dims, a, dims.size());
}

void check_layernorm(DType t, const std::vector<int64_t>& dims, int64_t axis, bool bias, bool stats, uint32_t seed) {
  const std::string what = std::string("LayerNormalization ") + std::string(dtype_name(t)) + " " + dims_text(dims) +
                           " axis " + std::to_string(axis) + (bias ? " with bias" : "") + (stats ? " with stats" : "");
  int64_t rows, cols;
  split_rows(dims, axis, &rows, &cols);
  const std::vector<int64_t> param_dims(dims.begin() + normalize(axis, dims.size()), dims.end());
  // An offset mean (3 to 5) against the spread: the two-pass variance matters.
  const Tensor x = random_tensor(t, dims, seed, 3, 5), scale = random_tensor(t, param_dims, seed + 1),
               b = random_tensor(t, param_dims, seed + 2);
  Feeds in = {{"x", x}, {"s", scale}};
  if (bias) in.push_back({"b", b});
  std::vector<DType> outs = {t};
  if (stats) outs.insert(outs.end(), {DType::kFloat, DType::kFloat});
  OneNode node("LayerNormalization", in, outs);
  node.attr(Attribute::of_int("axis", axis));
  const std::vector<Tensor> want = node.run_cpu();
  DeviceBuffer dx(x), ds(scale), db(b), y(x.nbytes(), kOutputFill);
  DeviceBuffer mean(stats ? static_cast<size_t>(rows) * 4 : 0, kOutputFill), inv(stats ? static_cast<size_t>(rows) * 4 : 0, kOutputFill);
  emu::layernorm_forward(t, t, t, dx.data(), ds.data(), bias ? db.data() : nullptr, y.data(),
                         stats ? static_cast<float*>(mean.data()) : nullptr, stats ? static_cast<float*>(inv.data()) : nullptr,
                         rows, cols, 1e-5f, nullptr);
  // The CPU's statistics are fp32 sums too, in another order.
  expect_close(y.as(t, dims), want[0], what, 10.0);
  if (stats) {
    expect_close(mean.as(DType::kFloat, want[1].dims), want[1], "mean of " + what, 10.0);
    expect_close(inv.as(DType::kFloat, want[2].dims), want[2], "inv_std of " + what, 10.0);
  }
}

void check_layernorm_grad(DType t, const std::vector<int64_t>& dims, int64_t axis, bool params, uint32_t seed) {
  const std::string what = std::string("LayerNormalizationGrad ") + std::string(dtype_name(t)) + " " + dims_text(dims) +
                           " axis " + std::to_string(axis) + (params ? "" : " (dX only)");
  int64_t rows, cols;
  split_rows(dims, axis, &rows, &cols);
  const std::vector<int64_t> param_dims(dims.begin() + normalize(axis, dims.size()), dims.end());
  const Tensor dy = random_tensor(t, dims, seed), x = random_tensor(t, dims, seed + 1, -1, 3),
               scale = random_tensor(t, param_dims, seed + 2);
  std::vector<DType> outs = {t};
  if (params) outs.insert(outs.end(), {t, t});
  OneNode node("LayerNormalizationGrad", {{"dy", dy}, {"x", x}, {"s", scale}}, outs, kAmpDomain);
  node.attr(Attribute::of_int("axis", axis));
  const std::vector<Tensor> want = node.run_cpu();
  DeviceBuffer ddy(dy), dx_in(x), ds(scale), dx(x.nbytes(), kOutputFill), dscale(params ? scale.nbytes() : 0, kOutputFill),
      dbias(params ? scale.nbytes() : 0, kOutputFill);
  DeviceBuffer ws(emu::layernorm_backward_workspace(rows, cols, kSmCount), kWorkspaceFill);
  emu::layernorm_backward(t, t, t, ddy.data(), dx_in.data(), ds.data(), dx.data(), params ? dscale.data() : nullptr,
                          params ? dbias.data() : nullptr, rows, cols, 1e-5f, ws.data(), kSmCount, nullptr);
  // The CPU keeps statistics and sums in fp64; the kernel in fp32 (as the GPU parity test, x10).
  expect_close(dx.as(t, dims), want[0], "dX of " + what, 10.0);
  if (params) {
    expect_close(dscale.as(t, param_dims), want[1], "dScale of " + what, 10.0);
    expect_close(dbias.as(t, param_dims), want[2], "dBias of " + what, 10.0);
  }
}

TEST(CudaKernelsEmulated, LayerNormForwardMatchesTheCpu) {
  const size_t mark = amp_emu::launches().size();
  uint32_t seed = 300;
  for (DType t : kFloatTypes) {
    // cols 7 (a block of 256 threads mostly idle), 32, 300 (more than the block), 1000; 32, 1000,
    // 768 and 1024 are multiples of 8 up to 1024: a warp a row (forward_warp_rows), 9 rows over
    // two blocks of 8 warps; 1032: past them, a block a row again.
    for (int64_t cols : {7, 32, 300, 1000}) check_layernorm(t, {5, cols}, -1, true, true, seed += 3);
    for (int64_t cols : {768, 1024, 1032}) check_layernorm(t, {9, cols}, -1, true, true, seed += 3);
    check_layernorm(t, {2, 3, 50}, 1, false, true, seed += 3);  // normalised over two dims, no bias
    check_layernorm(t, {4, 9, 32}, -1, true, false, seed += 3);
  }
  EXPECT_FALSE(launched(mark, "forward_warp_rows").empty());
  EXPECT_FALSE(launched(mark, "forward_kernel").empty());
}

TEST(CudaKernelsEmulated, LayerNormBackwardMatchesTheCpu) {
  const size_t mark = amp_emu::launches().size();
  uint32_t seed = 400;
  for (DType t : kFloatTypes) {
    // 1 row; 3 rows (a block each); 10 rows on 2 * kSmCount = 4 blocks: blocks go round the rows
    // and add into their partial sums, which the column kernel then adds up.
    for (int64_t rows : {1, 3, 10})
      for (int64_t cols : {7, 300, 1000}) check_layernorm_grad(t, {rows, cols}, -1, true, seed += 3);
    // A warp a row (backward_warp_rows): 37 rows on kSmCount = 2 blocks of 8 warps, so warps take
    // two or three and each block adds its warps' sums in turn; 768 columns, 3 groups of 8 a lane.
    check_layernorm_grad(t, {37, 64}, -1, true, seed += 3);
    check_layernorm_grad(t, {10, 768}, -1, true, seed += 3);
    check_layernorm_grad(t, {3, 4, 25}, 1, true, seed += 3);
    check_layernorm_grad(t, {10, 40}, -1, false, seed += 3);  // no dScale / dBias: no column kernel
  }
  bool multi_row_blocks = false;
  for (const auto& l : launched(mark, "backward_kernel")) multi_row_blocks |= l.grid.x == 2 * kSmCount;
  EXPECT_TRUE(multi_row_blocks);
  EXPECT_FALSE(launched(mark, "backward_warp_rows").empty());
  EXPECT_FALSE(launched(mark, "column_sums_kernel").empty());
}

// ---- Casts absorbed into the kernels (CudaOp::reads_any_float) ---------------------------------

// t as `to`, by the CPU backend's own Cast: what the unfused graph computes.
Tensor cast_on_cpu(const Tensor& t, DType to) {
  if (t.dtype == to) return t;
  OneNode cast("Cast", {{"x", t}}, {to});
  cast.attr(Attribute::of_int("to", static_cast<int64_t>(to)));
  return cast.run_cpu()[0];
}

// Mixed precision puts Casts around every fp32 op: LayerNormalization(x fp32) -> Cast(fp16),
// Cast(dY fp16 -> fp32) -> LayerNormalizationGrad, Cast(scores fp16 -> fp32) -> Softmax,
// SoftmaxCrossEntropyLossGrad -> Cast(fp16). The kernels read and write those types themselves;
// what they store must be what the op and the Cast compute one after the other on the CPU.
TEST(CudaKernelsEmulated, KernelsThatAbsorbCastsComputeWhatTheCastAndTheOpCompute) {
  uint32_t seed = 450;
  for (DType low : {DType::kFloat16, DType::kBFloat16}) {
    const std::string lt(dtype_name(low));
    const std::vector<int64_t> dims = {6, 300};
    // LayerNormalization: x fp32 -> y low, and x low (widened) -> y fp32.
    for (const bool narrow_out : {true, false}) {
      const DType x_type = narrow_out ? DType::kFloat : low, y_type = narrow_out ? low : DType::kFloat;
      const Tensor x = random_tensor(x_type, dims, seed += 3, 3, 5), scale = random_tensor(DType::kFloat, {300}, seed + 1),
                   b = random_tensor(DType::kFloat, {300}, seed + 2);
      OneNode node("LayerNormalization", {{"x", cast_on_cpu(x, DType::kFloat)}, {"s", scale}, {"b", b}}, {DType::kFloat});
      const Tensor want = cast_on_cpu(node.run_cpu()[0], y_type);
      DeviceBuffer dx(x), ds(scale), db(b), y(want.nbytes(), kOutputFill);
      emu::layernorm_forward(DType::kFloat, x_type, y_type, dx.data(), ds.data(), db.data(), y.data(), nullptr, nullptr, 6,
                             300, 1e-5f, nullptr);
      expect_close(y.as(y_type, dims), want, "LayerNormalization " + std::string(dtype_name(x_type)) + " -> " +
                                                 std::string(dtype_name(y_type)), 10.0);
    }
    // LayerNormalizationGrad: dY low (widened), x and scale fp32, dX low or fp32.
    for (const DType dx_type : {low, DType::kFloat}) {
      const Tensor dy = random_tensor(low, dims, seed += 3), x = random_tensor(DType::kFloat, dims, seed + 1, -1, 3),
                   scale = random_tensor(DType::kFloat, {300}, seed + 2);
      OneNode node("LayerNormalizationGrad", {{"dy", cast_on_cpu(dy, DType::kFloat)}, {"x", x}, {"s", scale}},
                   {DType::kFloat, DType::kFloat, DType::kFloat}, kAmpDomain);
      const std::vector<Tensor> want = node.run_cpu();
      DeviceBuffer ddy(dy), dx_in(x), ds(scale), dx(static_cast<size_t>(x.numel()) * dtype_size(dx_type), kOutputFill),
          dscale(scale.nbytes(), kOutputFill), dbias(scale.nbytes(), kOutputFill);
      DeviceBuffer ws(emu::layernorm_backward_workspace(6, 300, kSmCount), kWorkspaceFill);
      emu::layernorm_backward(DType::kFloat, low, dx_type, ddy.data(), dx_in.data(), ds.data(), dx.data(), dscale.data(),
                              dbias.data(), 6, 300, 1e-5f, ws.data(), kSmCount, nullptr);
      const std::string what = "LayerNormalizationGrad dY " + lt + " dX " + std::string(dtype_name(dx_type));
      expect_close(dx.as(dx_type, dims), cast_on_cpu(want[0], dx_type), "dX of " + what, 10.0);
      expect_close(dscale.as(DType::kFloat, {300}), want[1], "dScale of " + what, 10.0);
      expect_close(dbias.as(DType::kFloat, {300}), want[2], "dBias of " + what, 10.0);
    }
    // Softmax over rows of attention scores: low -> fp32 and fp32 -> low, both kernels.
    for (const auto& shape : std::vector<std::vector<int64_t>>{{8, 40}, {3, 40, 5}}) {
      const int64_t axis = 1, outer = shape[0], len = shape[1], inner = shape.size() > 2 ? shape[2] : 1;
      for (const bool narrow_out : {true, false}) {
        const DType x_type = narrow_out ? DType::kFloat : low, y_type = narrow_out ? low : DType::kFloat;
        const Tensor x = random_tensor(x_type, shape, seed += 3, -8, 8);
        OneNode node("Softmax", {{"x", cast_on_cpu(x, DType::kFloat)}}, {DType::kFloat});
        node.attr(Attribute::of_int("axis", axis));
        const Tensor want = cast_on_cpu(node.run_cpu()[0], y_type);
        DeviceBuffer in(x), out(want.nbytes(), kOutputFill);
        emu::softmax_forward(x_type, y_type, in.data(), out.data(), outer, len, inner, false, nullptr);
        expect_close(out.as(y_type, shape), want,
                     "Softmax " + dims_text(shape) + " " + std::string(dtype_name(x_type)) + " -> " +
                         std::string(dtype_name(y_type)));
      }
    }
    // Softmax read as it is and narrowed: low scores in, fp32 probabilities and their low copy out.
    for (const auto& shape : std::vector<std::vector<int64_t>>{{8, 40}, {3, 40, 5}}) {
      const int64_t outer = shape[0], len = shape[1], inner = shape.size() > 2 ? shape[2] : 1;
      const Tensor x = random_tensor(low, shape, seed += 3, -8, 8);
      OneNode node("Softmax", {{"x", cast_on_cpu(x, DType::kFloat)}}, {DType::kFloat});
      node.attr(Attribute::of_int("axis", 1));
      const Tensor want = node.run_cpu()[0], want_copy = cast_on_cpu(want, low);
      DeviceBuffer in(x), out(want.nbytes(), kOutputFill), copy(want_copy.nbytes(), kOutputFill);
      emu::softmax_forward(low, DType::kFloat, in.data(), out.data(), outer, len, inner, false, nullptr, copy.data(), low);
      const std::string what = "Softmax " + dims_text(shape) + " " + lt + " -> float and a " + lt + " copy";
      expect_close(out.as(DType::kFloat, shape), want, what);
      expect_close(copy.as(low, shape), want_copy, what + " (the copy)");
      // The copy is exactly the stored fp32 result narrowed, whatever the kernel's order of sums.
      EXPECT_TRUE(copy.as(low, shape).same_contents(cast_on_cpu(out.as(DType::kFloat, shape), low))) << what;
    }
    // SoftmaxGrad: dY low (widened) and fp32 Y in, dX low or fp32 out; rows and the strided kernel.
    for (const auto& shape : std::vector<std::vector<int64_t>>{{8, 40}, {3, 40, 5}, {2, 700}}) {
      const int64_t outer = shape[0], len = shape[1], inner = shape.size() > 2 ? shape[2] : 1;
      OneNode sm("Softmax", {{"x", random_tensor(DType::kFloat, shape, seed += 3, -4, 4)}}, {DType::kFloat});
      sm.attr(Attribute::of_int("axis", 1));
      const Tensor y = sm.run_cpu()[0], dy = random_tensor(low, shape, seed + 1);
      for (const DType dx_type : {low, DType::kFloat}) {
        OneNode node("SoftmaxGrad", {{"dy", cast_on_cpu(dy, DType::kFloat)}, {"y", y}}, {DType::kFloat}, kAmpDomain);
        node.attr(Attribute::of_int("axis", 1));
        const Tensor want = cast_on_cpu(node.run_cpu()[0], dx_type);
        DeviceBuffer ddy(dy), dyv(y), dx(want.nbytes(), kOutputFill);
        emu::softmax_backward(DType::kFloat, low, dx_type, ddy.data(), dyv.data(), dx.data(), outer, len, inner, nullptr);
        // The CPU sums in fp64, the kernel in fp32.
        expect_close(dx.as(dx_type, shape), want,
                     "SoftmaxGrad " + dims_text(shape) + " dY " + lt + " dX " + std::string(dtype_name(dx_type)), 10.0);
      }
    }
    // SoftmaxCrossEntropyLossGrad: fp32 scores, dscores stored in low.
    {
      const Tensor scores = random_tensor(DType::kFloat, {12, 10}, seed += 3, -4, 4),
                   labels = random_tensor(DType::kInt64, {12}, seed + 1, 0, 10),
                   dloss = random_tensor(DType::kFloat, {}, seed + 2, 0.5f, 2.0f);
      OneNode node("SoftmaxCrossEntropyLossGrad", {{"d", dloss}, {"x", scores}, {"y", labels}}, {DType::kFloat}, kAmpDomain);
      node.attr(Attribute::of_string("reduction", "mean"));
      const Tensor want = cast_on_cpu(node.run_cpu()[0], low);
      emu::CrossEntropyShape s;
      s.n = 12;
      s.classes = 10;
      s.type = DType::kFloat;
      s.grad_type = low;
      DeviceBuffer d(dloss), x(scores), y(labels), ws(emu::cross_entropy_workspace(s), kWorkspaceFill),
          dx(want.nbytes(), kOutputFill);
      emu::cross_entropy_backward(s, d.data(), x.data(), y.data(), nullptr, dx.data(), ws.data(), nullptr);
      expect_close(dx.as(low, {12, 10}), want, "dscores stored as " + lt, 10.0);
    }
  }
  // Low-precision parameters take no other storage type: the kernel would read them as fp32.
  DeviceBuffer buf(1024, 0);
  EXPECT_THROW(emu::layernorm_forward(DType::kFloat16, DType::kFloat, DType::kFloat16, buf.data(), buf.data(), nullptr,
                                      buf.data(), nullptr, nullptr, 2, 2, 1e-5f, nullptr),
               InputError);
}

// ---- Reductions (reduce.cu) -------------------------------------------------------------------

const char* kind_name(emu::ReduceKind k) {
  switch (k) {
    case emu::ReduceKind::kSum: return "ReduceSum";
    case emu::ReduceKind::kMean: return "ReduceMean";
    case emu::ReduceKind::kMax: return "ReduceMax";
    case emu::ReduceKind::kMin: return "ReduceMin";
    case emu::ReduceKind::kProd: return "ReduceProd";
    case emu::ReduceKind::kL1: return "ReduceL1";
    case emu::ReduceKind::kSumSquare: return "ReduceSumSquare";
    case emu::ReduceKind::kL2: return "ReduceL2";
    case emu::ReduceKind::kLogSum: return "ReduceLogSum";
  }
  return "?";
}

// The plan's result for x reduced over `reduced`.
Tensor run_plan(const Tensor& x, const std::vector<bool>& reduced, emu::ReduceKind kind, const std::vector<int64_t>& out_dims) {
  const emu::ReducePlan plan(x.dtype, x.dims, reduced, kind, kSmCount);
  DeviceBuffer in(x), ws(plan.workspace_bytes(), kWorkspaceFill);
  int64_t count = 1;
  for (size_t d = 0; d < x.dims.size(); ++d)
    if (!reduced[d]) count *= x.dims[d];
  DeviceBuffer out(static_cast<size_t>(count) * dtype_size(x.dtype), kOutputFill);
  plan.enqueue(in.data(), out.data(), ws.data(), nullptr);
  return out.as(x.dtype, out_dims);
}

// ReduceSum/Mean/Max/Min over `axes` (empty: all, as Reduce::reduced_axes in reduction_ops.cc),
// against the CPU's ReduceSum/Mean/Max (ReduceMin as -ReduceMax(-x): the CPU has none).
void check_reduce(DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& axes, emu::ReduceKind kind,
                  uint32_t seed, const std::function<void(Tensor&)>& edit = {}) {
  std::string what = std::string(kind_name(kind)) + " " + std::string(dtype_name(t)) + " " + dims_text(dims) + " axes " +
                     dims_text(axes);
  Tensor x = random_tensor(t, dims, seed);
  if (edit) edit(x);
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize(a, dims.size()))] = true;
  const bool min = kind == emu::ReduceKind::kMin;
  const char* op = min || kind == emu::ReduceKind::kMax ? "ReduceMax" : kind_name(kind);
  Feeds in = {{"x", min ? negated(x) : x}};
  if (kind == emu::ReduceKind::kSum && !axes.empty()) in.push_back({"axes", ints(axes)});  // an input from opset 13
  OneNode node(op, in, {t});
  if (kind != emu::ReduceKind::kSum && !axes.empty()) node.attr(Attribute::of_ints("axes", axes));  // an attribute until 18
  Tensor want = node.run_cpu()[0];
  if (min) want = negated(want);
  // Sums of up to thousands of terms in another order: x10, as the GPU parity test.
  expect_close(run_plan(x, reduced, kind, want.dims), want, what, 10.0);
}

TEST(CudaKernelsEmulated, ReductionsOverAnyAxesMatchTheCpu) {
  const size_t mark = amp_emu::launches().size();
  uint32_t seed = 500;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{6, 300, 5}, {0}},        {{6, 30, 5}, {-1}},     {{6, 40, 5}, {0, 2}},  // non-adjacent: two passes
      {{6, 300, 5}, {}},         {{6, 300, 5}, {1}},     {{3, 4, 5, 6}, {1, 3}},
      {{3, 4, 5, 6}, {0, 3}},    {{4, 3, 5, 6}, {0, 2, 3}},  // a conv bias gradient: H*W first, then N over C
      {{4, 100}, {1}},           {{3, 2500}, {1}},       // rows of 128 and 512 threads
      {{512, 8}, {0}},           {{333, 10}, {0}},       {{300, 3, 7}, {0}},  // long r over few outputs: chunks
      {{2, 700, 6}, {1}},        {{4, 1, 5}, {1}},       // a reduced axis of extent 1: a copy pass
  };
  for (DType t : kFloatTypes)
    for (emu::ReduceKind kind : {emu::ReduceKind::kSum, emu::ReduceKind::kMean, emu::ReduceKind::kMax, emu::ReduceKind::kMin})
      for (const auto& [dims, axes] : cases) check_reduce(t, dims, axes, kind, seed++);
  bool chunked = false, wide_rows = false, narrow_rows = false;
  for (const auto& l : launched(mark, "reduce_columns")) chunked |= l.grid.y > 1;
  for (const auto& l : launched(mark, "reduce_rows")) (l.block.x == 512 ? wide_rows : narrow_rows) = true;
  EXPECT_TRUE(chunked) << "no reduction was split into chunks";
  EXPECT_TRUE(wide_rows && narrow_rows);
}

// ReduceL1, ReduceL2, ReduceSumSquare and ReduceLogSum (positive inputs): |x| or x^2 read by the
// first pass, the root or logarithm taken by the last, also through chunks, two passes and a copy
// pass over an axis of extent 1 (not the identity for these kinds); an empty axis gives 0 (-inf).
TEST(CudaKernelsEmulated, NormLikeReductionsOverAnyAxesMatchTheCpu) {
  auto positive = [](Tensor& x) {
    for (int64_t k = 0; k < x.numel(); ++k) set(x, k, 0.1f + std::fabs(static_cast<float>(x.element(k))));
  };
  uint32_t seed = 680;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{6, 300, 5}, {0}}, {{6, 40, 5}, {0, 2}}, {{6, 300, 5}, {}}, {{3, 2500}, {1}}, {{333, 10}, {0}}, {{4, 1, 5}, {1}},
      {{3, 0, 4}, {1}}};
  for (DType t : kFloatTypes)
    for (const auto& [dims, axes] : cases) {
      for (emu::ReduceKind kind : {emu::ReduceKind::kL1, emu::ReduceKind::kL2, emu::ReduceKind::kSumSquare})
        check_reduce(t, dims, axes, kind, seed++);
      check_reduce(t, dims, axes, emu::ReduceKind::kLogSum, seed++, positive);
    }
}

// ReduceProd (keras2onnx's Tensordot multiplies a shape's dims with it) on values near 1, so that
// products of thousands of factors neither underflow nor overflow and the comparison means something;
// a NaN wins; an empty axis gives 1.
TEST(CudaKernelsEmulated, ProductsOverAnyAxesMatchTheCpu) {
  auto near_one = [](Tensor& x) {
    for (int64_t k = 0; k < x.numel(); ++k) set(x, k, 1.0f + static_cast<float>(x.element(k)) / 64.0f);
  };
  uint32_t seed = 650;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{6, 300, 5}, {0}}, {{6, 40, 5}, {0, 2}}, {{6, 300, 5}, {}}, {{3, 2500}, {1}}, {{333, 10}, {0}}, {{4, 1, 5}, {1}}};
  for (DType t : kFloatTypes) {
    for (const auto& [dims, axes] : cases) check_reduce(t, dims, axes, emu::ReduceKind::kProd, seed++, near_one);
    check_reduce(t, {3, 2500}, {1}, emu::ReduceKind::kProd, seed++, [&](Tensor& x) {
      near_one(x);
      set(x, 2500 + 17, NAN);
    });
    check_reduce(t, {3, 0, 4}, {1}, emu::ReduceKind::kProd, seed++);
  }
}

TEST(CudaKernelsEmulated, ReductionsWithNanAndEmptyAxesMatchTheCpu) {
  for (DType t : kFloatTypes)
    for (emu::ReduceKind kind : {emu::ReduceKind::kSum, emu::ReduceKind::kMean, emu::ReduceKind::kMax, emu::ReduceKind::kMin}) {
      // A NaN wins in every kind, whether a block (rows), a column or a chunk meets it.
      auto nan_at = [](std::vector<int64_t> ks) {
        return [ks](Tensor& x) {
          for (int64_t k : ks) set(x, k, NAN);
        };
      };
      check_reduce(t, {3, 2500}, {1}, kind, 600, nan_at({0, 2500 + 2499}));
      check_reduce(t, {512, 8}, {0}, kind, 601, nan_at({3, 511 * 8 + 5}));
      check_reduce(t, {6, 40, 5}, {0, 2}, kind, 602, nan_at({7}));
      check_reduce(t, {4, 5}, {0}, kind, 603, [](Tensor& x) { set(x, 6, INFINITY); set(x, 7, -INFINITY); });
      // Empty reduced axis: the identity (0; NaN for the mean; -inf / +inf for max / min, ONNX's).
      check_reduce(t, {3, 0, 4}, {1}, kind, 604);
    }
  const Tensor empty(DType::kFloat, {3, 0, 4});
  const Tensor max = run_plan(empty, {false, true, false}, emu::ReduceKind::kMax, {3, 4});
  const Tensor min = run_plan(empty, {false, true, false}, emu::ReduceKind::kMin, {3, 4});
  for (int64_t k = 0; k < 12; ++k) {
    EXPECT_EQ(max.element(k), -INFINITY);
    EXPECT_EQ(min.element(k), INFINITY);
  }
  // No output elements: nothing launched.
  const size_t mark = amp_emu::launches().size();
  run_plan(Tensor(DType::kFloat, {0, 5}), {false, true}, emu::ReduceKind::kSum, {0});
  EXPECT_TRUE(launched(mark, "").empty());
}

TEST(CudaKernelsEmulated, GlobalPoolsAndSumToShapeMatchTheCpu) {
  for (DType t : kFloatTypes) {
    // GlobalAveragePool: a mean over every dim after N and C (GlobalAveragePool::prepare).
    const Tensor x = random_tensor(t, {2, 3, 4, 5}, 700);
    const Tensor want = OneNode("GlobalAveragePool", {{"x", x}}, {t}).run_cpu()[0];
    expect_close(run_plan(x, {false, false, true, true}, emu::ReduceKind::kMean, want.dims), want,
                 "GlobalAveragePool " + std::string(dtype_name(t)), 10.0);
    // GlobalMaxPool: the same plan with the max (GlobalPool::prepare).
    const Tensor want_max = OneNode("GlobalMaxPool", {{"x", x}}, {t}).run_cpu()[0];
    expect_close(run_plan(x, {false, false, true, true}, emu::ReduceKind::kMax, want_max.dims), want_max,
                 "GlobalMaxPool " + std::string(dtype_name(t)), 0.0);
    // SumToShape(x [4, 3, 5], [3, 1]): the leading dim and the broadcast one (SumToShape::reduced_axes).
    const Tensor g = random_tensor(t, {4, 3, 5}, 701);
    const Tensor want_sum = OneNode("SumToShape", {{"x", g}, {"shape", ints({3, 1})}}, {t}, kAmpDomain).run_cpu()[0];
    expect_close(run_plan(g, {true, false, true}, emu::ReduceKind::kSum, want_sum.dims), want_sum,
                 "SumToShape " + std::string(dtype_name(t)), 10.0);
  }
}

// ---- Gather and scatter-add (gather.cu) ------------------------------------------------------

// As gather_shape (data_movement_ops.cc).
emu::GatherShape gather_shape(const std::vector<int64_t>& data, const Tensor& indices, int64_t axis_attr, DType type) {
  emu::GatherShape g;
  const size_t axis = static_cast<size_t>(normalize(axis_attr, data.size()));
  g.outer = product(data, 0, axis);
  g.axis = data[axis];
  g.inner = product(data, axis + 1, data.size());
  g.m = indices.numel();
  g.index_type = indices.dtype;
  g.type = type;
  g.elem_bytes = dtype_size(type);
  return g;
}

void check_gather(DType t, const std::vector<int64_t>& data_dims, const Tensor& indices, int64_t axis, uint32_t seed) {
  const std::string what = "Gather " + std::string(dtype_name(t)) + " " + dims_text(data_dims) + " axis " +
                           std::to_string(axis) + " indices " + dims_text(indices.dims);
  const Tensor data = random_tensor(t, data_dims, seed, -100, 100);
  OneNode node("Gather", {{"w", data}, {"i", indices}}, {t});
  node.attr(Attribute::of_int("axis", axis));
  const Tensor want = node.run_cpu()[0];
  const emu::GatherShape g = gather_shape(data_dims, indices, axis, t);
  DeviceBuffer d(data), i(indices), out(want.nbytes(), kOutputFill);
  emu::gather(g, d.data(), i.data(), out.data(), kSmCount, nullptr);
  expect_close(out.as(t, want.dims), want, what, 0.0);  // copies: exact
}

void check_scatter_add(DType t, const std::vector<int64_t>& data_dims, const Tensor& indices, int64_t axis, uint32_t seed) {
  const std::string what = "GatherGrad " + std::string(dtype_name(t)) + " " + dims_text(data_dims) + " axis " +
                           std::to_string(axis) + " indices " + dims_text(indices.dims);
  const size_t a = static_cast<size_t>(normalize(axis, data_dims.size()));
  std::vector<int64_t> dy_dims(data_dims.begin(), data_dims.begin() + a);
  dy_dims.insert(dy_dims.end(), indices.dims.begin(), indices.dims.end());
  dy_dims.insert(dy_dims.end(), data_dims.begin() + a + 1, data_dims.end());
  const Tensor dy = random_tensor(t, dy_dims, seed);
  OneNode node("GatherGrad", {{"dy", dy}, {"s", ints(data_dims)}, {"i", indices}}, {t}, kAmpDomain);
  node.attr(Attribute::of_int("axis", axis));
  const Tensor want = node.run_cpu()[0];
  const emu::GatherShape g = gather_shape(data_dims, indices, axis, t);
  DeviceBuffer d(dy), i(indices), out(want.nbytes(), kOutputFill), ws(emu::scatter_add_workspace(g), kWorkspaceFill);
  emu::scatter_add(g, d.data(), i.data(), out.data(), ws.data(), kSmCount, nullptr);
  // fp32 sums of the repeated rows' terms (the CPU's in fp64), rounded once.
  expect_close(out.as(t, want.dims), want, what, 10.0);
}

TEST(CudaKernelsEmulated, GatherMatchesTheCpu) {
  // Negative indices count from the end. 6000 elements: more than the 16 blocks of 256 threads
  // the launcher gives 2 SMs, so the grid-stride loop goes round twice.
  check_gather(DType::kFloat, {10, 16}, random_tensor(DType::kInt64, {3, 4}, 800, -10, 10), 0, 801);
  check_gather(DType::kFloat16, {4, 6, 5}, random_tensor(DType::kInt32, {7}, 802, -6, 6), 1, 803);
  check_gather(DType::kBFloat16, {50, 100}, random_tensor(DType::kInt64, {60}, 804, 0, 50), 0, 805);
  check_gather(DType::kInt64, {5, 7}, random_tensor(DType::kInt32, {2, 3}, 806, -7, 7), -1, 807);  // 8-byte elements
  check_gather(DType::kBool, {9, 3}, random_tensor(DType::kInt64, {4}, 808, 0, 9), 0, 809);         // 1-byte elements
  check_gather(DType::kFloat, {4, 0}, random_tensor(DType::kInt64, {3}, 810, 0, 4), 0, 811);        // empty rows
  // An index outside the axis cannot be reported from a kernel: its row reads as zeros (the
  // CPU throws; gather.cu documents the zeros).
  const Tensor data = random_tensor(DType::kFloat, {3, 4}, 812);
  const Tensor idx = ints({1, 3, -4, 2});
  DeviceBuffer d(data), i(idx), out(4 * 4 * 4, kOutputFill);
  emu::gather(gather_shape({3, 4}, idx, 0, DType::kFloat), d.data(), i.data(), out.data(), kSmCount, nullptr);
  const Tensor got = out.as(DType::kFloat, {4, 4});
  for (int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(got.element(c), data.element(4 + c));
    EXPECT_EQ(got.element(4 + c), 0.0);
    EXPECT_EQ(got.element(8 + c), 0.0);
    EXPECT_EQ(got.element(12 + c), data.element(8 + c));
  }
}

TEST(CudaKernelsEmulated, ScatterAddWithRepeatedIndicesMatchesTheCpu) {
  for (DType t : kFloatTypes) {
    // 12 indices into 10 rows: repeats certain; negative ones valid.
    check_scatter_add(t, {10, 16}, random_tensor(DType::kInt64, {3, 4}, 900, -10, 10), 0, 901);
    check_scatter_add(t, {4, 6, 5}, random_tensor(DType::kInt32, {9}, 902, 0, 3), 1, 903);  // outer 4, only rows 0-2
    check_scatter_add(t, {8, 300}, random_tensor(DType::kInt64, {40}, 904, 0, 8), 0, 905);  // 12000 adds, 5 per row
    check_scatter_add(t, {6, 4}, Tensor(DType::kInt64, {0}), 0, 906);                        // no indices: zeros
  }
}

// ---- Strided copies (strided_copy.cu) --------------------------------------------------------

// The copy each op builds (data_movement_ops.cc), then simplify() and strided_copy() as copy_op
// runs them; a SliceGrad zeroes its output first.
void run_copy(emu::StridedCopy c, const void* src, void* dst, size_t zero_bytes = 0) {
  if (zero_bytes) std::memset(dst, 0, zero_bytes);
  emu::strided_copy(emu::simplify(std::move(c)), src, dst, kSmCount, nullptr);
}

emu::StridedCopy transpose_copy(const std::vector<int64_t>& in_dims, std::vector<int64_t> perm,
                                const std::vector<int64_t>& out_dims, size_t elem_bytes) {
  if (perm.empty())
    for (size_t d = in_dims.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  const std::vector<int64_t> in_strides = emu::contiguous_strides(in_dims);
  emu::StridedCopy c;
  c.dims = out_dims;
  c.dst_strides = emu::contiguous_strides(c.dims);
  for (int64_t p : perm) c.src_strides.push_back(in_strides.at(static_cast<size_t>(normalize(p, in_dims.size()))));
  c.elem_bytes = elem_bytes;
  return c;
}

// slice_window: the first element and step per axis, with ONNX's clamping of starts.
void slice_window(const std::vector<int64_t>& dims, const std::vector<int64_t>& starts, std::vector<int64_t> axes,
                  std::vector<int64_t> steps, std::vector<int64_t>* start, std::vector<int64_t>* step) {
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  start->assign(dims.size(), 0);
  step->assign(dims.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = static_cast<size_t>(normalize(axes[i], dims.size()));
    const int64_t dim = dims[a], st = steps[i];
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    b = st > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
    (*start)[a] = b;
    (*step)[a] = st;
  }
}

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

TEST(CudaKernelsEmulated, TransposeSliceExpandConcatSplitMatchTheCpu) {
  // Transpose: a [B,T,H,D] -> [B,H,T,D] swap (rows of D merged), a full reversal, the default
  // perm; 2-, 4- and 8-byte elements; rows of D = 16 (fp16), 24 (bf16) and 8 (fp32) elements,
  // copied 16 bytes at a time, and of D = 12 in fp16 (8 bytes at a time).
  const std::vector<std::tuple<DType, std::vector<int64_t>, std::vector<int64_t>>> transposes = {
      {DType::kFloat16, {2, 3, 4, 5}, {0, 2, 1, 3}},
      {DType::kFloat16, {2, 3, 4, 16}, {0, 2, 1, 3}},
      {DType::kBFloat16, {2, 5, 3, 24}, {0, 2, 1, 3}},
      {DType::kFloat, {4, 6, 8}, {1, 0, 2}},
      {DType::kFloat16, {3, 2, 12}, {1, 0, 2}},
      {DType::kFloat, {3, 4, 5, 6}, {3, 1, 2, 0}},
      {DType::kInt64, {7, 9}, {}},
      {DType::kBFloat16, {70, 80}, {1, 0}},  // 5600 elements: more than the 16 blocks of 256 threads on 2 SMs
      {DType::kFloat, {2, 1, 3, 1, 5}, {4, 2, 0, 1, 3}},
      // Through shared-memory tiles (transposed_dim): NCHW -> NHWC and back with partial tiles,
      // a batch of them, the source-contiguous dim not next to the innermost, 1-, 2-, 4- and
      // 8-byte elements.
      {DType::kFloat16, {2, 40, 5, 7}, {0, 2, 3, 1}},
      {DType::kBFloat16, {3, 5, 7, 40}, {0, 3, 1, 2}},
      {DType::kFloat, {33, 65}, {1, 0}},
      {DType::kBool, {2, 9, 70}, {0, 2, 1}},
      {DType::kInt64, {9, 3, 10}, {2, 1, 0}},
  };
  uint32_t seed = 1000;
  size_t tiled = 0;
  for (const auto& [t, dims, perm] : transposes) {
    const Tensor x = random_tensor(t, dims, seed++);
    OneNode node("Transpose", {{"x", x}}, {t});
    if (!perm.empty()) node.attr(Attribute::of_ints("perm", perm));
    const Tensor want = node.run_cpu()[0];
    DeviceBuffer in(x), out(want.nbytes(), kOutputFill);
    const emu::StridedCopy c = transpose_copy(dims, perm, want.dims, dtype_size(t));
    tiled += emu::transposed_dim(emu::simplify(c)).has_value();
    run_copy(c, in.data(), out.data());
    expect_close(out.as(t, want.dims), want, "Transpose " + dims_text(dims) + " perm " + dims_text(perm), 0.0);
  }
  EXPECT_EQ(tiled, 6u) << "the five cases after the comment and [70, 80] -> [80, 70] go through tiles";
  // Slice (negative steps walk down from the base) and its gradient SliceGrad.
  const std::vector<std::pair<std::vector<int64_t>, SliceArgs>> slices = {
      {{6, 8}, {{5, 1}, {0, 7}, {0, 1}, {-2, 3}}},
      {{5, 7, 9}, {{-1}, {-100}, {2}, {-1}}},  // the last axis reversed
      {{5, 7, 9}, {{1, 6, 0}, {4, 0, 9}, {0, 1, 2}, {1, -3, 4}}},
      {{4, 600}, {{10}, {590}, {1}, {7}}},
      {{4, 64}, {{0, 8}, {4, 40}, {0, 1}, {1, 1}}},  // rows of 32 from the 8th: 16 bytes at a time
      {{4, 64}, {{0, 3}, {4, 35}, {0, 1}, {1, 1}}},  // from the 3rd: the offsets keep 2-byte copies
      {{3, 4}, {{2}, {2}, {0}, {1}}},  // empty
  };
  for (const auto& [dims, s] : slices) {
    for (DType t : {DType::kFloat, DType::kFloat16}) {
      const std::string what = "Slice " + std::string(dtype_name(t)) + " " + dims_text(dims) + " starts " +
                               dims_text(s.starts) + " steps " + dims_text(s.steps);
      const Tensor x = random_tensor(t, dims, seed++);
      OneNode node("Slice", {{"x", x}, {"st", ints(s.starts)}, {"en", ints(s.ends)}, {"ax", ints(s.axes)}, {"sp", ints(s.steps)}},
                   {t});
      const Tensor want = node.run_cpu()[0];
      std::vector<int64_t> start, step;
      slice_window(dims, s.starts, s.axes, s.steps, &start, &step);
      // As Slice::prepare.
      const std::vector<int64_t> in_strides = emu::contiguous_strides(dims);
      emu::StridedCopy c;
      c.dims = want.dims;
      c.dst_strides = emu::contiguous_strides(c.dims);
      for (size_t d = 0; d < dims.size(); ++d) {
        c.src_strides.push_back(in_strides[d] * step[d]);
        c.src_base += start[d] * in_strides[d];
      }
      c.elem_bytes = dtype_size(t);
      DeviceBuffer in(x), out(want.nbytes(), kOutputFill);
      run_copy(c, in.data(), out.data());
      expect_close(out.as(t, want.dims), want, what, 0.0);

      // SliceGrad(dY, shape, starts, ends, axes, steps): zeros with dY in the window (SliceGrad::prepare).
      const Tensor dy = random_tensor(t, want.dims, seed++);
      OneNode grad("SliceGrad", {{"dy", dy}, {"shape", ints(dims)}, {"st", ints(s.starts)}, {"en", ints(s.ends)},
                                 {"ax", ints(s.axes)}, {"sp", ints(s.steps)}},
                   {t}, kAmpDomain);
      const Tensor want_grad = grad.run_cpu()[0];
      const std::vector<int64_t> out_strides = emu::contiguous_strides(dims);
      emu::StridedCopy g;
      g.dims = dy.dims;
      g.src_strides = emu::contiguous_strides(g.dims);
      for (size_t d = 0; d < dims.size(); ++d) {
        g.dst_strides.push_back(out_strides[d] * step[d]);
        g.dst_base += start[d] * out_strides[d];
      }
      g.elem_bytes = dtype_size(t);
      DeviceBuffer din(dy), dout(want_grad.nbytes(), kOutputFill);
      run_copy(g, din.data(), dout.data(), want_grad.nbytes());
      expect_close(dout.as(t, want_grad.dims), want_grad, "SliceGrad of " + what, 0.0);
    }
  }
  // Expand: a source stride of 0 repeats (Expand::prepare).
  for (const auto& [in_dims, shape] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{3, 1}, {2, 3, 4}}, {{1, 5, 1}, {4, 5, 300}}, {{6}, {3, 1, 6}}}) {
    const Tensor x = random_tensor(DType::kBFloat16, in_dims, seed++);
    const Tensor want = OneNode("Expand", {{"x", x}, {"s", ints(shape)}}, {DType::kBFloat16}).run_cpu()[0];
    emu::StridedCopy c;
    c.dims = want.dims;
    c.dst_strides = emu::contiguous_strides(c.dims);
    c.src_strides = broadcast_strides(in_dims, c.dims);
    c.elem_bytes = 2;
    DeviceBuffer in(x), out(want.nbytes(), kOutputFill);
    run_copy(c, in.data(), out.data());
    expect_close(out.as(DType::kBFloat16, want.dims), want, "Expand " + dims_text(in_dims) + " to " + dims_text(shape), 0.0);
  }
  // Concat and Split: each part a block of the whole along the axis (part_copy).
  auto part_copy = [](const std::vector<int64_t>& part, const std::vector<int64_t>& whole, size_t axis, int64_t offset,
                      size_t elem_bytes, bool into_whole) {
    emu::StridedCopy c;
    c.dims = part;
    const std::vector<int64_t> ps = emu::contiguous_strides(part), ws = emu::contiguous_strides(whole);
    c.src_strides = into_whole ? ps : ws;
    c.dst_strides = into_whole ? ws : ps;
    (into_whole ? c.dst_base : c.src_base) = offset * ws[axis];
    c.elem_bytes = elem_bytes;
    return emu::simplify(c);
  };
  for (int64_t axis : {0, 1, 2}) {
    std::vector<std::vector<int64_t>> parts = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
    parts[1][static_cast<size_t>(axis)] = 5;
    parts[2][static_cast<size_t>(axis)] = 1;
    Feeds in;
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    for (size_t k = 0; k < parts.size(); ++k) {
      in.push_back({"p" + std::to_string(k), random_tensor(DType::kFloat, parts[k], seed++)});
      bufs.push_back(std::make_unique<DeviceBuffer>(in.back().second));
    }
    OneNode node("Concat", in, {DType::kFloat});
    node.attr(Attribute::of_int("axis", axis));
    const Tensor want = node.run_cpu()[0];
    DeviceBuffer out(want.nbytes(), kOutputFill);
    int64_t offset = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      emu::strided_copy(part_copy(parts[k], want.dims, static_cast<size_t>(axis), offset, 4, true), bufs[k]->data(),
                        out.data(), kSmCount, nullptr);
      offset += parts[k][static_cast<size_t>(axis)];
    }
    expect_close(out.as(DType::kFloat, want.dims), want, "Concat axis " + std::to_string(axis), 0.0);

    // Split of the concatenation back into the parts.
    OneNode split("Split", {{"x", want}, {"split", ints({parts[0][axis], parts[1][axis], parts[2][axis]})}},
                  {DType::kFloat, DType::kFloat, DType::kFloat});
    split.attr(Attribute::of_int("axis", axis));
    const std::vector<Tensor> want_parts = split.run_cpu();
    DeviceBuffer whole(want);
    offset = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      DeviceBuffer part(want_parts[k].nbytes(), kOutputFill);
      emu::strided_copy(part_copy(parts[k], want.dims, static_cast<size_t>(axis), offset, 4, false), whole.data(),
                        part.data(), kSmCount, nullptr);
      offset += parts[k][static_cast<size_t>(axis)];
      expect_close(part.as(DType::kFloat, want_parts[k].dims), want_parts[k],
                   "Split axis " + std::to_string(axis) + " part " + std::to_string(k), 0.0);
    }
  }
}

TEST(CudaKernelsEmulated, StridedCopyRefusesMoreThanEightDimsAfterMerging) {
  // A transpose of 9 dims of 2 reversed: no two neighbours merge (strided_copy.cu's kMaxDims).
  const std::vector<int64_t> dims(9, 2);
  emu::StridedCopy c = transpose_copy(dims, {8, 7, 6, 5, 4, 3, 2, 1, 0}, dims, 4);
  EXPECT_THROW(emu::simplify(c), InputError);
  EXPECT_THROW(emu::strided_copy(c, nullptr, nullptr, kSmCount, nullptr), InputError);
  // The first two swapped: the last seven merge into one run of 128 elements.
  c = transpose_copy(dims, {1, 0, 2, 3, 4, 5, 6, 7, 8}, dims, 4);
  EXPECT_EQ(emu::simplify(c).dims, (std::vector<int64_t>{2, 2, 128}));
}

TEST(CudaKernelsEmulated, StridedCopyReachesPast2GiBWithWideOffsets) {
  // Offsets of 2^31 and more need the 64-bit kernel: three bytes 2^30 apart in a 2 GiB source
  // (a reserved mapping; only the pages touched become memory).
  const size_t bytes = (size_t{1} << 31) + 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "cannot reserve 2 GiB of address space";
  auto* src = static_cast<unsigned char*>(p);
  for (int k = 0; k < 3; ++k) src[static_cast<size_t>(k) << 30] = static_cast<unsigned char>(11 * (k + 1));
  emu::StridedCopy c;
  c.dims = {3};
  c.src_strides = {int64_t{1} << 30};
  c.dst_strides = {1};
  c.elem_bytes = 1;
  DeviceBuffer out(3, kOutputFill);
  const size_t mark = amp_emu::launches().size();
  emu::strided_copy(c, src, out.data(), kSmCount, nullptr);
  const auto* got = static_cast<const unsigned char*>(out.data());
  EXPECT_EQ(got[0], 11);
  EXPECT_EQ(got[1], 22);
  EXPECT_EQ(got[2], 33);
  EXPECT_EQ(launched(mark, "strided_copy_kernel<E, long long>").size(), 1u);
  munmap(p, bytes);
  // Reversed (a negative stride from the top): the same three bytes in the other order.
  void* q = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (q == MAP_FAILED) GTEST_SKIP() << "cannot reserve 2 GiB of address space a second time";
  src = static_cast<unsigned char*>(q);
  for (int k = 0; k < 3; ++k) src[static_cast<size_t>(k) << 30] = static_cast<unsigned char>(11 * (k + 1));
  c.src_strides = {-(int64_t{1} << 30)};
  c.src_base = int64_t{2} << 30;
  emu::strided_copy(c, src, out.data(), kSmCount, nullptr);
  EXPECT_EQ(got[0], 33);
  EXPECT_EQ(got[2], 11);
  // In a multi-copy launch with a small copy: the whole launch takes the 64-bit kernel.
  DeviceBuffer small_src(2, 7), small(2, kOutputFill), again(3, kOutputFill);
  emu::StridedCopy pair;
  pair.dims = {2};
  pair.src_strides = pair.dst_strides = {1};
  pair.elem_bytes = 1;
  const size_t multi = amp_emu::launches().size();
  emu::strided_copies({pair, c}, {small_src.data(), src}, {small.data(), again.data()}, kSmCount, nullptr);
  EXPECT_EQ(launched(multi, "strided_copies_kernel<long long>").size(), 1u);
  EXPECT_EQ(std::memcmp(again.data(), out.data(), 3), 0);
  EXPECT_EQ(static_cast<const unsigned char*>(small.data())[1], 7);
  munmap(q, bytes);
}

// The multi-copy launch (strided_copies) writes exactly what each of its copies writes alone
// (strided_copy, checked against the CPU above): transposes of 1-, 2-, 4- and 8-byte elements, a
// Slice with negative steps, an Expand (stride 0), the three parts of a Concat writing one buffer,
// an empty copy, and 20 copies in all, so the task list is split over two launches of 16 and 4.
TEST(CudaKernelsEmulated, MultiCopyLaunchesWriteWhatEachCopyWritesAlone) {
  struct Case {
    emu::StridedCopy copy;
    size_t src_bytes;
    int dst;  // which destination buffer
  };
  std::vector<Case> cases;
  std::vector<size_t> dst_bytes;
  auto add = [&](emu::StridedCopy c, size_t src_bytes, size_t out_bytes) {
    cases.push_back({emu::simplify(std::move(c)), src_bytes, static_cast<int>(dst_bytes.size())});
    dst_bytes.push_back(out_bytes);
  };
  const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, size_t>> transposes = {
      {{2, 3, 4, 5}, {0, 2, 1, 3}, 2}, {{3, 4, 5, 6}, {3, 1, 2, 0}, 4}, {{7, 9}, {}, 8}, {{5, 6}, {1, 0}, 1},
      {{4, 6, 8}, {2, 0, 1}, 2},       {{70, 80}, {1, 0}, 2},          {{2, 1, 3, 1, 5}, {4, 2, 0, 1, 3}, 4}};
  for (const auto& [dims, perm, bytes] : transposes) {
    std::vector<int64_t> out_dims = dims;
    std::vector<int64_t> p = perm;
    if (p.empty()) std::reverse(out_dims.begin(), out_dims.end());
    else
      for (size_t d = 0; d < p.size(); ++d) out_dims[d] = dims[static_cast<size_t>(p[d])];
    const size_t n = static_cast<size_t>(product(dims, 0, dims.size()));
    add(transpose_copy(dims, perm, out_dims, bytes), n * bytes, n * bytes);
  }
  // [5, 7, 9] fp32, every axis reversed with steps -1, -2, -3 (Slice::prepare's copy).
  {
    std::vector<int64_t> start, step;
    slice_window({5, 7, 9}, {-1, -1, -1}, {}, {-1, -2, -3}, &start, &step);
    const std::vector<int64_t> in_strides = emu::contiguous_strides({5, 7, 9});
    emu::StridedCopy c;
    c.dims = {5, 4, 3};
    c.dst_strides = emu::contiguous_strides(c.dims);
    for (size_t d = 0; d < 3; ++d) {
      c.src_strides.push_back(in_strides[d] * step[d]);
      c.src_base += start[d] * in_strides[d];
    }
    add(c, 5 * 7 * 9 * 4, 5 * 4 * 3 * 4);
  }
  // Expand of [3, 1] to [2, 3, 300], bf16.
  {
    emu::StridedCopy c;
    c.dims = {2, 3, 300};
    c.dst_strides = emu::contiguous_strides(c.dims);
    c.src_strides = {0, 1, 0};
    c.elem_bytes = 2;
    add(c, 3 * 2, 2 * 3 * 300 * 2);
  }
  // Concat of [2, 3, 4], [2, 5, 4], [2, 1, 4] along axis 1: three copies into one [2, 9, 4].
  {
    const std::vector<int64_t> whole = {2, 9, 4};
    const std::vector<int64_t> ws = emu::contiguous_strides(whole);
    int64_t offset = 0;
    const int shared = static_cast<int>(dst_bytes.size());
    dst_bytes.push_back(2 * 9 * 4 * 4);
    for (int64_t rows : {3, 5, 1}) {
      emu::StridedCopy c;
      c.dims = {2, rows, 4};
      c.src_strides = emu::contiguous_strides(c.dims);
      c.dst_strides = ws;
      c.dst_base = offset * ws[1];
      cases.push_back({emu::simplify(c), static_cast<size_t>(2 * rows * 4 * 4), shared});
      offset += rows;
    }
  }
  // An empty copy, then more transposes up to 20 copies.
  {
    emu::StridedCopy c;
    c.dims = {3, 0};
    c.src_strides = {1, 3};
    c.dst_strides = {0, 1};
    add(c, 0, 0);
  }
  for (int64_t k = 0; cases.size() < 20; ++k) {
    const std::vector<int64_t> dims = {3 + k, 5, 2};
    const size_t n = static_cast<size_t>(product(dims, 0, 3));
    add(transpose_copy(dims, {1, 2, 0}, {5, 2, 3 + k}, 4), n * 4, n * 4);
  }
  ASSERT_EQ(cases.size(), 20u);

  // Sources of random bytes; each copy alone into fresh buffers, then all in one call.
  std::mt19937 rng(77);
  std::vector<std::unique_ptr<DeviceBuffer>> src, alone, together;
  for (const Case& c : cases) {
    src.push_back(std::make_unique<DeviceBuffer>(c.src_bytes, 0));
    auto* bytes = static_cast<unsigned char*>(src.back()->data());
    for (size_t b = 0; b < c.src_bytes; ++b) bytes[b] = static_cast<unsigned char>(rng());
  }
  for (size_t bytes : dst_bytes) {
    alone.push_back(std::make_unique<DeviceBuffer>(bytes, kOutputFill));
    together.push_back(std::make_unique<DeviceBuffer>(bytes, kOutputFill));
  }
  for (size_t k = 0; k < cases.size(); ++k)
    emu::strided_copy(cases[k].copy, src[k]->data(), alone[cases[k].dst]->data(), kSmCount, nullptr);
  std::vector<emu::StridedCopy> copies;
  std::vector<const void*> from;
  std::vector<void*> to;
  for (size_t k = 0; k < cases.size(); ++k) {
    copies.push_back(cases[k].copy);
    from.push_back(src[k]->data());
    to.push_back(together[cases[k].dst]->data());
  }
  // The transposes through tiles (transposed_dim) launch one by one; the rest share launches of 16.
  size_t tiled = 0, batched = 0;
  for (const Case& c : cases) {
    const bool tiles = emu::transposed_dim(c.copy).has_value();
    tiled += tiles;
    batched += !tiles && product(c.copy.dims, 0, c.copy.dims.size()) > 0;
  }
  EXPECT_GE(tiled, 3u) << "[70, 80] -> [80, 70] and the last transposes, [k + 3, 10] -> [10, k + 3] from k = 5";
  const size_t mark = amp_emu::launches().size();
  emu::strided_copies(copies, from, to, kSmCount, nullptr);
  EXPECT_EQ(launched(mark, "strided_copies_kernel").size(), (batched + 15) / 16) << batched << " copies batched";
  EXPECT_EQ(launched(mark, "transpose_tiles").size(), tiled);
  EXPECT_EQ(launched(mark, "strided_copy_kernel").size(), 0u);
  for (size_t d = 0; d < dst_bytes.size(); ++d)
    EXPECT_EQ(std::memcmp(together[d]->data(), alone[d]->data(), dst_bytes[d]), 0) << "destination " << d;

  // One copy is strided_copy's own launch.
  const size_t one = amp_emu::launches().size();
  emu::strided_copies({cases[0].copy}, {src[0]->data()}, {together[0]->data()}, kSmCount, nullptr);
  EXPECT_EQ(launched(one, "strided_copy_kernel").size(), 1u);
  EXPECT_EQ(launched(one, "strided_copies_kernel").size(), 0u);
}

// ---- AllFinite (all_finite.cu) ----------------------------------------------------------------

bool run_all_finite(const std::vector<Tensor>& tensors, const float* scale) {
  std::vector<emu::CheckedTensor> checked;
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<const void*> data;
  for (const Tensor& t : tensors) {
    checked.push_back({t.dtype, t.numel()});
    bufs.push_back(std::make_unique<DeviceBuffer>(t));
    data.push_back(bufs.back()->data());
  }
  DeviceBuffer flag(1, kOutputFill), s(scale ? 4 : 0, 0);
  if (scale) std::memcpy(s.data(), scale, 4);
  emu::all_finite(checked, data, scale ? static_cast<const float*>(s.data()) : nullptr, static_cast<bool*>(flag.data()),
                  kSmCount, nullptr);
  const unsigned char v = *static_cast<const unsigned char*>(flag.data());
  EXPECT_TRUE(v == 0 || v == 1) << "the flag is not a bool: " << int(v);
  return v == 1;
}

bool cpu_all_finite(const std::vector<Tensor>& tensors, const float* scale) {
  Feeds in;
  if (scale) {
    Tensor s(DType::kFloat, {});
    s.mutable_as<float>()[0] = *scale;
    in.push_back({"scale", s});
  }
  for (size_t k = 0; k < tensors.size(); ++k) in.push_back({"g" + std::to_string(k), tensors[k]});
  return OneNode(scale ? "AllFiniteScaled" : "AllFinite", in, {DType::kBool}, kAmpDomain).run_cpu()[0].element(0) != 0;
}

TEST(CudaKernelsEmulated, AllFiniteMatchesTheCpu) {
  // 60 tensors of the three types: two launches (48 per launch); 5000 elements: 8 blocks
  // (4 per SM), so threads go round the grid-stride loop.
  std::vector<Tensor> tensors;
  for (int k = 0; k < 60; ++k)
    tensors.push_back(random_tensor(kFloatTypes[k % 3], {k == 50 ? 5000 : 30 + 7 * k}, 1100 + k, -100, 100));
  tensors.push_back(Tensor(DType::kFloat, {0}));
  const float half = 0.5f, big = 1e37f;
  struct Edit {
    std::string what;
    int tensor;
    int64_t index;
    double value;
  };
  const std::vector<Edit> edits = {
      {"clean", -1, 0, 0},
      {"NaN in the first launch", 3, 0, NAN},
      {"NaN in the second launch, the last element", 50, 4999, NAN},
      {"+inf in an fp16 tensor", 1, 10, INFINITY},
      {"-inf in a bf16 tensor", 59, 7, -INFINITY},
      {"large fp32: finite, inf once scaled", 0, 5, 1e38},
  };
  for (const Edit& e : edits) {
    std::vector<Tensor> ts = tensors;
    if (e.tensor >= 0) set(ts[static_cast<size_t>(e.tensor)], e.index, e.value);
    for (const float* scale : {static_cast<const float*>(nullptr), &half, &big}) {
      const std::string what = e.what + (scale ? ", scaled by " + std::to_string(*scale) : "");
      EXPECT_EQ(run_all_finite(ts, scale), cpu_all_finite(ts, scale)) << what;
    }
  }
  EXPECT_TRUE(run_all_finite({}, nullptr));  // nothing to check: true, no launch
}

// ---- Dropout (dropout.cu) ---------------------------------------------------------------------

TEST(CudaKernelsEmulated, DropoutKeepsTheRightFractionAndScalesKeptElements) {
  // The mask comes from the kernel's own hash (it need not equal the CPU's): checked are the
  // fraction kept, y = x / (1 - ratio) where kept and 0 where not, and the same mask for the same
  // (seed, salt), another for another.
  const int64_t n = 5003;  // not a multiple of the block; 20 blocks of work on 16 blocks
  for (DType t : kFloatTypes)
    for (float ratio : {0.1f, 0.25f, 0.5f}) {
      const Tensor x = random_tensor(t, {n}, 1200, 0.5f, 2.0f);
      auto run = [&](unsigned long long seed_value, uint64_t salt, bool with_mask, Tensor* mask_out) {
        DeviceBuffer in(x), y(x.nbytes(), kOutputFill), mask(with_mask ? static_cast<size_t>(n) : 0, kOutputFill),
            seed(8, 0);
        std::memcpy(seed.data(), &seed_value, 8);
        emu::dropout_forward(t, in.data(), y.data(), with_mask ? static_cast<bool*>(mask.data()) : nullptr, n, ratio,
                             static_cast<const unsigned long long*>(seed.data()), salt, kSmCount, nullptr);
        if (mask_out) *mask_out = mask.as(DType::kBool, {n});
        return y.as(t, {n});
      };
      Tensor mask;
      const Tensor y = run(42, 7, true, &mask);
      const float scale = 1.0f / (1.0f - ratio);
      int64_t kept = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double m = mask.element(k);
        ASSERT_TRUE(m == 0 || m == 1) << "mask[" << k << "] is not a bool";
        kept += m == 1;
        const float want = m == 1 ? static_cast<float>(x.element(k)) * scale : 0.0f;
        Tensor one(t, {1});
        set(one, 0, want);  // rounded to the type once, as the kernel stores it
        ASSERT_EQ(y.element(k), one.element(0)) << dtype_name(t) << " ratio " << ratio << " element " << k;
      }
      // Binomial(n, 1 - ratio): within 5 standard deviations.
      const double p = 1.0 - ratio, sd = std::sqrt(p * (1 - p) / static_cast<double>(n));
      EXPECT_NEAR(static_cast<double>(kept) / n, p, 5 * sd) << dtype_name(t) << " ratio " << ratio;
      Tensor same, other_seed, other_salt;
      EXPECT_TRUE(run(42, 7, false, nullptr).same_contents(y)) << "without a mask, the same output";
      run(42, 7, true, &same);
      run(43, 7, true, &other_seed);
      run(42, 8, true, &other_salt);
      EXPECT_TRUE(same.same_contents(mask));
      EXPECT_FALSE(other_seed.same_contents(mask));
      EXPECT_FALSE(other_salt.same_contents(mask));
    }
}

// ---- ReLU masks (relu_mask.cu) ------------------------------------------------------------------

// The bitmask of a bool [rows, cols] mask as cuBLASLt's RELU_AUX epilogues lay it out: row r at
// bit r * ld, bit i in bit i % 8 of byte i / 8, the rest of each row clear.
std::vector<uint8_t> mask_bits(const Tensor& mask, int64_t ld) {
  const int64_t rows = mask.dims[0], cols = mask.dims[1];
  std::vector<uint8_t> bits(static_cast<size_t>(rows * ld / 8), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      if (mask.element(r * cols + j) != 0) bits[static_cast<size_t>((r * ld + j) / 8)] |= uint8_t(1u << ((r * ld + j) % 8));
  return bits;
}

Tensor zero_scalar(DType t) {
  Tensor z(t, {});
  set(z, 0, 0.0);
  return z;
}

TEST(CudaKernelsEmulated, ReluMasksAreTheBitsOfGreaterAndApplyAsWhere) {
  // Rows shorter than a word, not a multiple of one, exactly 128 bits and past them; the ReLU's
  // result with exact zeros, -0, NaN, inf and subnormals. The bits are those of the CPU's
  // Greater(y, 0); the gradient masked by them the CPU's Where(mask, dy, 0).
  uint32_t seed = 1300;
  for (DType t : kFloatTypes)
    for (int64_t cols : {1, 31, 64, 100, 128, 130, 300})
      for (int64_t rows : {1, 3, 5}) {
        const std::string what = std::string(dtype_name(t)) + " [" + std::to_string(rows) + "," + std::to_string(cols) + "]";
        const int64_t ld = (cols + 127) / 128 * 128;
        Tensor y = random_tensor(t, {rows, cols}, seed++);
        const double specials[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1e-40, -1e-40};
        for (int64_t k = 0; k < rows * cols; k += 3) set(y, k, specials[(k / 3) % 7]);
        OneNode greater("Greater", {{"y", y}, {"z", zero_scalar(t)}}, {DType::kBool});
        const Tensor mask = greater.run_cpu()[0];
        const std::vector<uint8_t> want = mask_bits(mask, ld);
        DeviceBuffer dy_in(y), bits(want.size(), kOutputFill);
        emu::write_relu_mask(t, dy_in.data(), bits.data(), rows, cols, ld, kSmCount, nullptr);
        EXPECT_EQ(std::memcmp(bits.data(), want.data(), want.size()), 0) << what;

        const Tensor dy = random_tensor(t, {rows, cols}, seed++);
        OneNode where("Where", {{"m", mask}, {"dy", dy}, {"z", zero_scalar(t)}}, {t});
        DeviceBuffer masked(dy);
        emu::apply_relu_mask(t, masked.data(), bits.data(), rows, cols, ld, kSmCount, nullptr);
        EXPECT_TRUE(masked.as(t, {rows, cols}).same_contents(where.run_cpu()[0])) << what;
      }
}

// ---- The emulator itself ----------------------------------------------------------------------

namespace checks = emu::emulator_checks;

TEST(CudaKernelEmulator, WarpIntrinsicsFollowTheirDefinitions) {
  Tensor in(DType::kInt32, {64});
  for (int t = 0; t < 64; ++t) in.mutable_as<int32_t>()[t] = (t * 37 + 11) % 97;
  DeviceBuffer din(in), dout(64 * 8 * 4, kOutputFill);
  checks::warp_intrinsics(static_cast<const int*>(din.data()), static_cast<int*>(dout.data()));
  const int* v = in.as<int32_t>();
  const auto* o = static_cast<const int*>(dout.data());
  for (int t = 0; t < 64; ++t) {
    const int w = t / 32 * 32, lane = t % 32;
    int sum = 0, half = 0;
    unsigned ballot = 0;
    bool any = false, all = true;
    for (int l = 0; l < 32; ++l) {
      sum += v[w + l];
      if (l / 16 == lane / 16) half += v[w + l];
      ballot |= static_cast<unsigned>(v[w + l] % 3 == 0) << l;
      any |= v[w + l] > 90;
      all &= v[w + l] >= 0;
    }
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_EQ(o[8 * t + 0], sum);
    EXPECT_EQ(o[8 * t + 1], lane + 3 < 32 ? v[t + 3] : v[t]);       // down: lanes past the end keep their own
    EXPECT_EQ(o[8 * t + 2], lane % 16 >= 5 ? v[t - 5] : v[t]);      // up within 16 lanes
    EXPECT_EQ(o[8 * t + 3], v[w + lane / 8 * 8 + 7]);               // lane 7 of each group of 8
    EXPECT_EQ(static_cast<unsigned>(o[8 * t + 4]), ballot);
    EXPECT_EQ(o[8 * t + 5], any ? 1 : 0);
    EXPECT_EQ(o[8 * t + 6], all ? 1 : 0);
    EXPECT_EQ(o[8 * t + 7], half);
  }
}

TEST(CudaKernelEmulator, SharedMemoryBarriersAndAtomics) {
  // Dynamic shared memory, __syncthreads_count and atomicAdd over 3 blocks of 96 threads.
  Tensor in = random_tensor(DType::kInt32, {3 * 96}, 1300, -5, 5);
  DeviceBuffer din(in), dout(3 * 96 * 4, kOutputFill), counts(3 * 4, kOutputFill), counter(4, 0);
  checks::reverse_in_shared(static_cast<const int*>(din.data()), static_cast<int*>(dout.data()), 3, 96);
  checks::count_positive(static_cast<const int*>(din.data()), static_cast<int*>(counts.data()),
                         static_cast<unsigned*>(counter.data()), 3, 96);
  const int* v = in.as<int32_t>();
  for (int b = 0; b < 3; ++b) {
    int positive = 0;
    for (int t = 0; t < 96; ++t) {
      EXPECT_EQ(static_cast<const int*>(dout.data())[b * 96 + t], v[b * 96 + 95 - t]);
      positive += v[b * 96 + t] > 0;
    }
    EXPECT_EQ(static_cast<const int*>(counts.data())[b], positive);
  }
  EXPECT_EQ(*static_cast<const unsigned*>(counter.data()), 3u * 96u);
  // float_types.cuh's block_sum for every block size the kernels use.
  for (int threads : {32, 64, 128, 256, 512, 1024}) {
    Tensor x = random_tensor(DType::kFloat, {threads}, 1301);
    double want = 0;
    for (int k = 0; k < threads; ++k) want += x.element(k);
    DeviceBuffer dx(x), out(4, kOutputFill);
    checks::block_sum(static_cast<const float*>(dx.data()), static_cast<float*>(out.data()), threads);
    EXPECT_NEAR(*static_cast<const float*>(out.data()), want, 1e-4 * threads) << threads << " threads";
  }
}

// The message of the amp_emu::Error `f` throws.
std::string emulator_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const amp_emu::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CudaKernelEmulator, UndefinedBehaviourIsReported) {
  DeviceBuffer out(4 * 64, kOutputFill), in(4 * 64, 0);
  auto* o = static_cast<float*>(out.data());
  std::string m = emulator_error([&] { checks::shuffle_after_a_lane_returned(o); });
  EXPECT_NE(m.find("lane 5 has returned"), std::string::npos) << m;
  EXPECT_NE(m.find("early_exit_kernel"), std::string::npos) << m;
  m = emulator_error([&] { checks::lanes_at_different_shuffles(o); });
  EXPECT_NE(m.find("warp 0 diverged"), std::string::npos) << m;
  EXPECT_NE(m.find("emulator_checks.cu:"), std::string::npos) << m;
  m = emulator_error([&] { checks::threads_at_different_barriers(o); });
  EXPECT_NE(m.find("different barriers"), std::string::npos) << m;
  // block_sum's shuffles name all 32 lanes: a block of 48 threads has a warp of 16.
  m = emulator_error([&] { checks::block_sum(static_cast<const float*>(in.data()), o, 48); });
  EXPECT_NE(m.find("which do not exist"), std::string::npos) << m;
  m = emulator_error([&] { checks::read_past_the_end(static_cast<const float*>(in.data()), o, 33); });
  EXPECT_NE(m.find("invalid memory access"), std::string::npos) << m;
  EXPECT_NE(m.find("lane 31"), std::string::npos) << m;  // in[64] is the first element past the end
  // A refused launch: cudaGetLastError reports it, AMP_CUDA_CHECK throws.
  try {
    checks::empty_grid();
    ADD_FAILURE() << "a grid of 0 blocks was launched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidConfiguration"), std::string::npos) << e.what();
  }
  // And the emulator still runs kernels after all that.
  checks::block_sum(static_cast<const float*>(in.data()), o, 32);
  EXPECT_EQ(o[0], 0.0f);
}

TEST(CudaKernelEmulator, UnwrittenSharedMemoryAndMissingBarriersShow) {
  DeviceBuffer out(4 * 64 * 2, kOutputFill);
  checks::read_unwritten_shared(static_cast<float*>(out.data()), 2);
  const auto* o = static_cast<const float*>(out.data());
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 64; ++t) {
      if (t < 32) {
        EXPECT_EQ(o[b * 64 + t], static_cast<float>(t));
      }
      else EXPECT_TRUE(std::isnan(o[b * 64 + t])) << "block " << b << " thread " << t;  // even after block 0 ran
    }
  // Without the barrier, warp 0 reads what warp 7 has not written yet in one order, and warp 7
  // what warp 0 has not in the other: blocks alternate, so both show.
  Tensor in = random_tensor(DType::kFloat, {2 * 256}, 1400);
  DeviceBuffer din(in), dout(4 * 512, kOutputFill);
  checks::exchange_without_barrier(static_cast<const float*>(din.data()), static_cast<float*>(dout.data()), 2);
  const auto* e = static_cast<const float*>(dout.data());
  int stale_low = 0, stale_high = 0;  // threads 0-127 read what 128-255 write, and the other way
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 256; ++t) (t < 128 ? stale_low : stale_high) += std::isnan(e[b * 256 + t]);
  EXPECT_GT(stale_low, 0);
  EXPECT_GT(stale_high, 0);
}

// What the emulator did in this process, printed at the end.
class EmulatorSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    const amp_emu::Stats s = amp_emu::stats();
    std::printf("cuda emulator: %llu launches, %llu blocks, %llu threads, %llu barriers, %llu warp intrinsics, %llu "
                "fiber switches\n",
                static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.blocks),
                static_cast<unsigned long long>(s.threads), static_cast<unsigned long long>(s.barriers),
                static_cast<unsigned long long>(s.warp_ops), static_cast<unsigned long long>(s.switches));
  }
};
[[maybe_unused]] ::testing::Environment* const kSummary = ::testing::AddGlobalTestEnvironment(new EmulatorSummary);

}  // namespace
}  // namespace amp
