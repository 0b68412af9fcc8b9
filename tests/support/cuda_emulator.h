// A CPU emulator for the hand-written CUDA kernels of backends/cuda/*.cu, so that the exact kernel
// sources run in CI, where there is no GPU (tests/cuda_emulated/). This header is the emulator's
// interface without any CUDA keyword macro: the test includes it to read the launch log and
// choose a schedule; tests/support/cuda_emulator_prelude.h, force-included into the rewritten
// .cu files, adds the keywords, built-in variables and intrinsics on top of it.
//
// How a launch runs (cuda_emulator.cc): blocks one after another; the threads of a block as
// cooperative fibers (each on its own stack, started with ucontext, switched with _setjmp /
// _longjmp) on the calling OS thread, each running until it reaches
// __syncthreads, a warp-synchronous intrinsic (shuffles, votes, __syncwarp) or its end.
// __syncthreads lets every fiber go once every live (not yet returned) thread of the block waits
// at the same __syncthreads. A warp intrinsic completes once every lane its mask names has
// reached the same intrinsic at the same source line; then all of them see each other's
// deposited values at once, as in lockstep. A lane named in a mask that has returned, waits at a
// __syncthreads or at another intrinsic, a mask that leaves out the calling lane or names lanes
// the block does not have (blockDim.x not a multiple of 32), threads at two different
// __syncthreads, or a fault (a read past a buffer that ends at an inaccessible page) are
// undefined behaviour on a GPU; here each is an amp_emu::Error naming the kernel, block, threads
// and source lines. Since fibers never preempt each other, atomics are plain read-modify-writes.
//
// Order: between synchronisation points, fibers run one at a time, a warp as far as it can get
// before the next warp starts. Blocks alternate between ascending order (warp 0 first, lane 0
// first) and descending order, so a missing barrier shows whichever side of it the racing reader
// is on. __shared__ variables (and dynamic shared memory) are filled with 0xff bytes (NaN as a
// float) for every block, so a read of shared memory nobody in the block wrote shows as well.
#pragma once

#include <cuda_runtime.h>  // dim3, uint3, cudaStream_t, cudaError_t: types only, no runtime calls

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace amp_emu {

// Undefined behaviour or a fault detected while emulating a kernel.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One launch as the emulator received it; `ran` is false for a launch the CUDA runtime would
// refuse (grid or block of 0, over 1024 threads, grid.y over 65535...): it records
// cudaErrorInvalidConfiguration for the next cudaGetLastError, as the runtime does.
struct LaunchRecord {
  std::string kernel;  // as written before <<< (template arguments by name: "softmax_rows_kernel<T>")
  std::string site;    // file:line of the launch
  dim3 grid, block;
  size_t shared_bytes = 0;
  bool ran = false;
};
const std::vector<LaunchRecord>& launches();
void clear_launches();

enum class Order {
  kAlternate,   // block b of the k-th launch: ascending when b + k is even, else descending
  kAscending,   // warp 0 first, lane 0 first within a warp
  kDescending,  // the last warp first, lane 31 first
};
void set_order(Order order);

// Counters since the start of the process (for the test's summary).
struct Stats {
  uint64_t launches = 0, blocks = 0, threads = 0, switches = 0, barriers = 0, warp_ops = 0;
};
Stats stats();

enum class WarpOp { kShflIdx, kShflUp, kShflDown, kShflXor, kAny, kAll, kBallot, kSyncWarp };

namespace detail {

// The built-in variables of the fiber running now; the scheduler sets them before it switches.
extern uint3 g_thread_idx, g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

// Runs body() as every thread of every block of the grid (see above); throws Error.
void run_grid(const char* kernel, const char* file, int line, int max_threads, dim3 grid, dim3 block, size_t shared_bytes,
              cudaStream_t stream, void (*body)(const void*), const void* closure);

// Called from kernel code (through the prelude's macros) in the fiber running now.
void syncthreads(const char* file, int line);
int syncthreads_reduce(int op, int predicate, const char* file, int line);  // op: 0 count, 1 and, 2 or
uint64_t warp_op(WarpOp op, const char* name, const char* file, int line, unsigned mask, uint64_t value, int arg,
                 int width);
[[noreturn]] void trap(const char* file, int line);
// A vector load or store of `alignment` bytes at p (float_types.cuh's load8 / store8): fails the
// launch where p is not so aligned, as a GPU does.
void check_aligned(const void* p, size_t alignment, const char* file, int line);
void* dynamic_shared_memory();
// A __shared__ variable's declaration was reached: the first thread of a block to pass it fills
// it with 0xff bytes (the launch rewriter inserts the call after each declaration).
void shared_declared(void* variable, size_t bytes);

cudaError_t take_last_error();
cudaError_t peek_last_error();

// Where a launch goes. With no hook (test_cuda_emulated) it runs at once. A host stand-in of the
// CUDA runtime (tests/cuda_backend_emulated/) installs one that takes the launch's work, its
// arguments copied, when the stream is being captured into a CUDA Graph, to run at each replay;
// it returns false to let the launch run now.
using LaunchHook = bool (*)(cudaStream_t stream, std::function<void()>&& work);
void set_launch_hook(LaunchHook hook);
LaunchHook launch_hook();

}  // namespace detail

// kernel<<<grid, block, shared_bytes, stream>>>(args...) is rewritten (tests/support/
// cuda_rewrite_launches.py) into launch("kernel", __FILE__, __LINE__, kernel, max_threads, grid,
// block, shared_bytes, stream)(args...), max_threads the kernel's __launch_bounds__ (0: none).
// The arguments convert to the kernel's parameter types as in a call, and each thread gets its own
// copy of them, as from a GPU's parameter space. A block of more threads than the bounds, or of
// more than 256 for a kernel without them, is refused with cudaErrorLaunchOutOfResources: without
// bounds ptxas may give a kernel up to 255 registers a thread, and only 256 such threads fit an
// SM's 65536 registers (a GPU refuses the launch exactly when they do not; the emulator, which has
// no register counts, refuses every launch that is not sure to fit).
template <class... P>
class Launch {
 public:
  Launch(const char* kernel_name, const char* file, int line, void (*kernel)(P...), int max_threads, dim3 grid,
         dim3 block, size_t shared_bytes, cudaStream_t stream)
      : name_(kernel_name), file_(file), line_(line), kernel_(kernel), max_threads_(max_threads), grid_(grid),
        block_(block), shared_bytes_(shared_bytes), stream_(stream) {}

  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launch passes one argument per kernel parameter");
    if (const detail::LaunchHook hook = detail::launch_hook()) {
      // The arguments converted to the parameter types now, as into a GPU's parameter space.
      std::function<void()> work = [self = *this,
                                    params = std::tuple<std::remove_cv_t<std::remove_reference_t<P>>...>(
                                        std::forward<A>(args)...)]() mutable {
        std::apply([&](auto&... p) { self.run(p...); }, params);
      };
      if (hook(stream_, std::move(work))) return;
    }
    run(args...);
  }

 private:
  template <class... A>
  void run(A&... args) const {
    auto call = [&] { kernel_(args...); };
    using Call = decltype(call);
    detail::run_grid(name_, file_, line_, max_threads_, grid_, block_, shared_bytes_, stream_,
                     [](const void* c) { (*static_cast<const Call*>(c))(); }, &call);
  }

  const char* name_;
  const char* file_;
  int line_;
  void (*kernel_)(P...);
  int max_threads_;
  dim3 grid_, block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
};

template <class... P>
Launch<P...> launch(const char* kernel_name, const char* file, int line, void (*kernel)(P...), int max_threads,
                    dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
  return Launch<P...>(kernel_name, file, line, kernel, max_threads, grid, block, shared_bytes, stream);
}

}  // namespace amp_emu
