// The scheduler of the CUDA kernel emulator (cuda_emulator.h says what it guarantees). Compiled
// as plain host C++, without the prelude's macros.
//
// Switching between fibers: ucontext starts a fiber on its own stack (makecontext, setcontext),
// _setjmp/_longjmp switch after that. swapcontext would save and restore the signal mask, a
// system call each way, and a test switches a hundred million times. A fiber that reaches the end
// of the kernel parks in fiber_main and runs the next block's thread from there, so contexts are
// made once per fiber, not per block. (_FORTIFY_SOURCE would turn _longjmp into __longjmp_chk,
// which refuses to jump to another stack.)
#undef _FORTIFY_SOURCE
#include "tests/support/cuda_emulator.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

namespace amp_emu {
namespace detail {

uint3 g_thread_idx, g_block_idx;
dim3 g_block_dim, g_grid_dim;

}  // namespace detail

namespace {

// Kernel frames are small, but a fiber also runs libm and the emulator's own calls; the pages a
// fiber never touches cost nothing (anonymous mappings are committed on first touch).
constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;

enum class State { kReady, kBarrier, kWarp, kExited, kFailed };

struct Fiber {
  ucontext_t ctx{};     // where the fiber starts: fiber_main on its stack
  jmp_buf jump;         // where it left off, once started
  bool started = false;
  unsigned index = 0;  // linear thread index in the block
  uint3 tid{};
  State state = State::kReady;
  // Where it waits: the __syncthreads or warp intrinsic, and its operands.
  const char* name = nullptr;
  const char* file = nullptr;
  int line = 0;
  WarpOp op = WarpOp::kSyncWarp;
  unsigned mask = 0;
  uint64_t value = 0;
  int arg = 0, width = 32;
  uint64_t result = 0;
};

// A stack per fiber, mapped once and reused by every block; an inaccessible page below each
// catches an overflow.
class Stacks {
 public:
  char* get(unsigned i) {
    while (stacks_.size() <= i) {
      const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (p == MAP_FAILED) throw Error("cuda emulator: cannot map a fiber stack");
      mprotect(p, page, PROT_NONE);
      stacks_.push_back(static_cast<char*>(p) + page);
    }
    return stacks_[i];
  }

 private:
  std::vector<char*> stacks_;
};

struct LaunchState {
  const char* kernel = "";
  const char* file = "";
  int line = 0;
  void (*body)(const void*) = nullptr;
  const void* closure = nullptr;
};

// Everything about the block that runs now.
struct Block {
  std::unique_ptr<Fiber[]> fibers{new Fiber[kMaxThreads]};  // never moved: contexts point into themselves
  unsigned threads = 0, warps = 0, live = 0, arrived = 0;
  std::vector<uint32_t> warp_arrived;  // per warp: lanes waiting at a warp intrinsic
  bool released = false;               // a barrier opened: the scheduler starts over from the first warp
  int barrier_result = 0;              // of the latest __syncthreads_count/and/or
  std::string error;
};

Stacks g_stacks;
Block g_block;
LaunchState g_launch;
jmp_buf g_scheduler;
Fiber* g_current = nullptr;
std::vector<LaunchRecord> g_launches;
Order g_order = Order::kAlternate;
Stats g_stats;
cudaError_t g_last_error = cudaSuccess;
std::vector<unsigned char> g_dynamic_shared;
uint64_t g_block_serial = 0;  // one per block run
std::vector<std::pair<const void*, uint64_t>> g_shared_poisoned;  // variable -> the block that poisoned it last

// Faults inside a fiber come back to run_grid through this.
sigjmp_buf g_fault_jump;
volatile sig_atomic_t g_fault_armed = 0;
void* volatile g_fault_address = nullptr;
volatile int g_fault_signal = 0;
Fiber* volatile g_fault_fiber = nullptr;

std::string where(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}

std::string coords(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

std::string describe_launch() {
  return std::string("kernel ") + g_launch.kernel + " (launched at " + where(g_launch.file, g_launch.line) + ") block " +
         coords(detail::g_block_idx) + " of grid " + coords(uint3{detail::g_grid_dim.x, detail::g_grid_dim.y, detail::g_grid_dim.z}) +
         ", " + std::to_string(g_block.threads) + " threads";
}

std::string thread_name(const Fiber& f) {
  return "thread " + std::to_string(f.index) + " (warp " + std::to_string(f.index / 32) + " lane " +
         std::to_string(f.index % 32) + ")";
}

std::string waiting_at(const Fiber& f) {
  switch (f.state) {
    case State::kExited: return "has returned";
    case State::kReady: return "is running";
    case State::kFailed: return "failed";
    case State::kBarrier: return std::string("waits at ") + f.name + " (" + where(f.file, f.line) + ")";
    case State::kWarp:
      return std::string("waits at ") + f.name + " (" + where(f.file, f.line) + ", mask 0x" +
             [&] {
               char b[16];
               std::snprintf(b, sizeof b, "%08x", f.mask);
               return std::string(b);
             }() +
             ")";
  }
  return "?";
}

// Back to the scheduler; returns when the scheduler resumes this fiber.
void yield() {
  Fiber& f = *g_current;
  ++g_stats.switches;
  if (_setjmp(f.jump) == 0) _longjmp(g_scheduler, 1);
}

// Records the error and leaves the fiber for good: the scheduler throws it (and every fiber of
// the block starts afresh at the next launch).
[[noreturn]] void fail(const std::string& message) {
  if (g_block.error.empty()) g_block.error = message;
  g_current->state = State::kFailed;
  _longjmp(g_scheduler, 1);
}

void release_barrier() {
  const Fiber* first = nullptr;
  int count = 0, all = 1, any = 0;
  for (unsigned i = 0; i < g_block.threads; ++i) {
    Fiber& f = g_block.fibers[i];
    if (f.state != State::kBarrier) continue;
    if (!first) {
      first = &f;
    } else if (f.line != first->line || std::strcmp(f.file, first->file) != 0 || std::strcmp(f.name, first->name) != 0) {
      fail(describe_launch() + ": threads wait at different barriers (undefined behaviour): " + thread_name(*first) + " " +
           waiting_at(*first) + ", " + thread_name(f) + " " + waiting_at(f));
    }
    count += f.value != 0;
    all &= f.value != 0;
    any |= f.value != 0;
  }
  if (first && std::strcmp(first->name, "__syncthreads_count") == 0) g_block.barrier_result = count;
  if (first && std::strcmp(first->name, "__syncthreads_and") == 0) g_block.barrier_result = all;
  if (first && std::strcmp(first->name, "__syncthreads_or") == 0) g_block.barrier_result = any;
  for (unsigned i = 0; i < g_block.threads; ++i)
    if (g_block.fibers[i].state == State::kBarrier) g_block.fibers[i].state = State::kReady;
  g_block.arrived = 0;
  g_block.released = true;
  ++g_stats.barriers;
}

void barrier(const char* name, int predicate, const char* file, int line) {
  Fiber& f = *g_current;
  f.state = State::kBarrier;
  f.name = name;
  f.file = file;
  f.line = line;
  f.value = predicate != 0;
  if (++g_block.arrived == g_block.live) release_barrier();
  yield();
}

std::string lane_list(uint32_t lanes) {
  std::string s;
  for (int l = 0; l < 32;) {
    if (!(lanes >> l & 1u)) {
      ++l;
      continue;
    }
    int e = l;
    while (e + 1 < 32 && (lanes >> (e + 1) & 1u)) ++e;
    if (!s.empty()) s += ",";
    s += e == l ? std::to_string(l) : std::to_string(l) + "-" + std::to_string(e);
    l = e + 1;
  }
  return s;
}

bool same_site(const Fiber& a, const Fiber& b) {
  return a.op == b.op && a.line == b.line && a.mask == b.mask && std::strcmp(a.file, b.file) == 0;
}

// Every lane of `mask` in warp w waits at a warp intrinsic: the same one, or it is an error.
void resolve_warp(unsigned w, unsigned mask) {
  Fiber* lanes[32] = {};
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1u) lanes[l] = &g_block.fibers[w * 32 + l];
  const Fiber* first = nullptr;
  for (unsigned l = 0; l < 32; ++l) {
    if (!lanes[l]) continue;
    if (!first) first = lanes[l];
    else if (!same_site(*first, *lanes[l]))
      fail(describe_launch() + ": warp " + std::to_string(w) + " diverged (undefined behaviour): " + thread_name(*first) +
           " " + waiting_at(*first) + ", " + thread_name(*lanes[l]) + " " + waiting_at(*lanes[l]));
  }
  uint64_t any = 0, all = 1, ballot = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (lanes[l]) {
      any |= lanes[l]->value != 0;
      all &= lanes[l]->value != 0;
      ballot |= static_cast<uint64_t>(lanes[l]->value != 0) << l;
    }
  for (unsigned l = 0; l < 32; ++l) {
    Fiber* f = lanes[l];
    if (!f) continue;
    const unsigned width = static_cast<unsigned>(f->width);
    unsigned src = l;
    switch (f->op) {
      case WarpOp::kShflIdx: src = (l & ~(width - 1)) + (static_cast<unsigned>(f->arg) & (width - 1)); break;
      case WarpOp::kShflUp:
        if ((l & (width - 1)) >= static_cast<unsigned>(f->arg)) src = l - static_cast<unsigned>(f->arg);
        break;
      case WarpOp::kShflDown:
        if ((l & (width - 1)) + static_cast<unsigned>(f->arg) < width) src = l + static_cast<unsigned>(f->arg);
        break;
      case WarpOp::kShflXor: {
        const unsigned j = l ^ static_cast<unsigned>(f->arg);
        // A lane of a later group of `width` lanes (or past the warp) gives the caller its own value.
        if (j < 32 && j <= (l | (width - 1))) src = j;
        break;
      }
      default: break;
    }
    switch (f->op) {
      case WarpOp::kAny: f->result = any; break;
      case WarpOp::kAll: f->result = all; break;
      case WarpOp::kBallot: f->result = ballot; break;
      case WarpOp::kSyncWarp: f->result = 0; break;
      default:
        if (!lanes[src])
          fail(describe_launch() + ": " + thread_name(*f) + " " + waiting_at(*f) + " reads lane " + std::to_string(src) +
               ", which its mask leaves out (undefined value)");
        f->result = lanes[src]->value;
    }
  }
  for (unsigned l = 0; l < 32; ++l)
    if (lanes[l]) lanes[l]->state = State::kReady;
  g_block.warp_arrived[w] &= ~mask;
  ++g_stats.warp_ops;
}

// Every lane still running is blocked and no barrier or warp intrinsic can complete: say why.
std::string describe_stuck() {
  std::ostringstream out;
  out << describe_launch() << ": threads can never go on (undefined behaviour on a GPU):";
  for (unsigned w = 0; w < g_block.warps; ++w) {
    for (unsigned l = 0; l < 32; ++l) {
      const unsigned i = w * 32 + l;
      if (i >= g_block.threads) break;
      const Fiber& f = g_block.fibers[i];
      if (f.state != State::kWarp) continue;
      uint32_t missing = 0;
      for (unsigned k = 0; k < 32; ++k)
        if (f.mask >> k & 1u) {
          const unsigned j = w * 32 + k;
          if (j >= g_block.threads || !(g_block.fibers[j].state == State::kWarp && same_site(f, g_block.fibers[j])))
            missing |= 1u << k;
        }
      out << "\n  " << thread_name(f) << " " << waiting_at(f) << " for lanes " << lane_list(missing) << ":";
      for (unsigned k = 0; k < 32; ++k)
        if (missing >> k & 1u) {
          const unsigned j = w * 32 + k;
          if (j >= g_block.threads) out << " lane " << k << " does not exist (blockDim " << g_block.threads << ");";
          else out << " lane " << k << " " << waiting_at(g_block.fibers[j]) << ";";
        }
      return out.str();  // the first stuck lane says enough
    }
  }
  for (unsigned i = 0; i < g_block.threads; ++i)
    if (g_block.fibers[i].state != State::kExited) {
      out << "\n  " << thread_name(g_block.fibers[i]) << " " << waiting_at(g_block.fibers[i]);
      break;
    }
  return out.str();
}

// A fiber: this thread of every block it is given, one after another.
void fiber_main() {
  for (;;) {
    try {
      g_launch.body(g_launch.closure);
    } catch (const std::exception& e) {
      fail(describe_launch() + ": " + thread_name(*g_current) + " threw " + e.what());
    }
    g_current->state = State::kExited;
    --g_block.live;
    if (g_block.arrived > 0 && g_block.arrived == g_block.live) release_barrier();
    yield();  // parked until the next block
  }
}

void resume(Fiber& f) {
  detail::g_thread_idx = f.tid;
  g_current = &f;
  ++g_stats.switches;
  if (_setjmp(g_scheduler) == 0) {
    if (g_current->started) _longjmp(g_current->jump, 1);
    g_current->started = true;
    makecontext(&g_current->ctx, fiber_main, 0);
    setcontext(&g_current->ctx);
  }
  g_current = nullptr;
  if (!g_block.error.empty()) throw Error(g_block.error);
}

// After an error or a fault, fibers stopped inside a kernel: each starts afresh next time.
void restart_all_fibers() {
  for (unsigned i = 0; i < kMaxThreads; ++i) g_block.fibers[i].started = false;
  g_current = nullptr;
}

// Static shared memory is poisoned by the first thread of a block that passes its declaration
// (shared_declared); dynamic shared memory here.
void poison_shared() {
  ++g_block_serial;
  if (!g_dynamic_shared.empty()) std::memset(g_dynamic_shared.data(), 0xff, g_dynamic_shared.size());
}

// Thread i of the block about to run. A fiber's context is made the first time it is used (a
// stack, getcontext); out of line, as getcontext returns twice as far as the compiler knows.
__attribute__((noinline)) void prepare_fiber(Fiber& f, unsigned i) {
  const dim3 bd = detail::g_block_dim;
  f.index = i;
  f.tid = uint3{i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
  f.state = State::kReady;
  if (f.ctx.uc_stack.ss_sp) return;
  char* stack = g_stacks.get(i);
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
}

void run_block(bool descending) {
  Block& b = g_block;
  b.live = b.threads;
  b.arrived = 0;
  b.released = false;
  b.error.clear();
  std::fill(b.warp_arrived.begin(), b.warp_arrived.end(), 0u);
  for (unsigned i = 0; i < b.threads; ++i) prepare_fiber(b.fibers[i], i);
  poison_shared();
  for (;;) {
    bool ran = false;
    for (unsigned k = 0; k < b.warps && !b.released; ++k) {
      const unsigned w = descending ? b.warps - 1 - k : k;
      for (bool again = true; again && !b.released;) {
        again = false;
        for (unsigned j = 0; j < 32 && !b.released; ++j) {
          const unsigned i = w * 32 + (descending ? 31 - j : j);
          if (i >= b.threads || b.fibers[i].state != State::kReady) continue;
          resume(b.fibers[i]);
          again = ran = true;
        }
      }
    }
    if (b.released) {  // after a barrier, start again from the first warp in order
      b.released = false;
      continue;
    }
    if (!ran) break;
  }
  if (b.live > 0) throw Error(describe_stuck());
}

void run_blocks(dim3 grid, uint64_t launch_index) {
  uint64_t linear = 0;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x, ++linear) {
        detail::g_block_idx = uint3{x, y, z};
        const bool descending = g_order == Order::kDescending ||
                                (g_order == Order::kAlternate && (launch_index + linear) % 2 == 1);
        run_block(descending);
        ++g_stats.blocks;
        g_stats.threads += g_block.threads;
      }
}

void on_fault(int sig, siginfo_t* info, void*) {
  if (!g_fault_armed || !g_current) {
    signal(sig, SIG_DFL);  // not a kernel's fault: crash as usual
    return;
  }
  g_fault_signal = sig;
  g_fault_address = info->si_addr;
  g_fault_fiber = g_current;
  siglongjmp(g_fault_jump, 1);
}

// SIGSEGV/SIGBUS handlers on their own stack (a fiber's stack may be what overflowed) while a
// grid runs; the previous ones come back after.
class FaultGuard {
 public:
  FaultGuard() {
    static std::vector<char> alt(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, &old_stack_);
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv_);
    sigaction(SIGBUS, &sa, &old_bus_);
  }
  ~FaultGuard() {
    g_fault_armed = 0;
    sigaction(SIGSEGV, &old_segv_, nullptr);
    sigaction(SIGBUS, &old_bus_, nullptr);
    sigaltstack(&old_stack_, nullptr);
  }

 private:
  stack_t old_stack_{};
  struct sigaction old_segv_ {}, old_bus_ {};
};

bool valid_config(dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535 &&
         block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= 1024 && block.y <= 1024 && block.z <= 64 &&
         threads <= kMaxThreads && shared_bytes <= 48 * 1024;
}

}  // namespace

const std::vector<LaunchRecord>& launches() { return g_launches; }
void clear_launches() { g_launches.clear(); }
void set_order(Order order) { g_order = order; }
Stats stats() { return g_stats; }

namespace detail {

void run_grid(const char* kernel, const char* file, int line, int max_threads, dim3 grid, dim3 block, size_t shared_bytes,
              cudaStream_t, void (*body)(const void*), const void* closure) {
  if (g_current) throw Error("cuda emulator: a kernel launched another kernel (dynamic parallelism is not emulated)");
  LaunchRecord record;
  record.kernel = kernel;
  record.site = where(file, line);
  record.grid = grid;
  record.block = block;
  record.shared_bytes = shared_bytes;
  record.ran = valid_config(grid, block, shared_bytes);
  // Sure to fit the registers: within the kernel's __launch_bounds__, or 256 threads without them.
  const bool fits = static_cast<uint64_t>(block.x) * block.y * block.z <= static_cast<unsigned>(max_threads ? max_threads : 256);
  const bool ran = record.ran;
  record.ran = ran && fits;
  g_launches.push_back(record);
  const uint64_t launch_index = g_stats.launches++;
  if (!ran) {
    g_last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (!fits) {
    std::fprintf(stderr, "cuda emulator: %s at %s launched with %u threads, %s\n", kernel, record.site.c_str(),
                 block.x * block.y * block.z,
                 max_threads ? ("beyond its __launch_bounds__(" + std::to_string(max_threads) + ")").c_str()
                             : "more than 256 without __launch_bounds__");
    g_last_error = cudaErrorLaunchOutOfResources;
    return;
  }
  g_launch = LaunchState{kernel, file, line, body, closure};
  g_block.threads = block.x * block.y * block.z;
  g_block.warps = (g_block.threads + 31) / 32;
  g_block.warp_arrived.assign(g_block.warps, 0u);
  g_dynamic_shared.assign(shared_bytes, 0xff);
  g_block_dim = block;
  g_grid_dim = grid;

  FaultGuard guard;
  if (sigsetjmp(g_fault_jump, 1)) {
    g_fault_armed = 0;
    const Fiber* f = g_fault_fiber;
    restart_all_fibers();
    char address[32];
    std::snprintf(address, sizeof address, "%p", g_fault_address);
    throw Error(describe_launch() + ": " + (f ? thread_name(*f) : std::string("a thread")) + " " +
                (g_fault_signal == SIGBUS ? "bus error" : "invalid memory access") + " at " + address +
                " (past the end of a buffer, or a fiber stack overflow)");
  }
  g_fault_armed = 1;
  try {
    run_blocks(grid, launch_index);
  } catch (...) {
    restart_all_fibers();
    throw;
  }
  g_fault_armed = 0;
}

void syncthreads(const char* file, int line) { barrier("__syncthreads", 0, file, line); }

int syncthreads_reduce(int op, int predicate, const char* file, int line) {
  barrier(op == 0 ? "__syncthreads_count" : op == 1 ? "__syncthreads_and" : "__syncthreads_or", predicate, file, line);
  return g_block.barrier_result;
}

uint64_t warp_op(WarpOp op, const char* name, const char* file, int line, unsigned mask, uint64_t value, int arg,
                 int width) {
  if (!g_current) throw Error(std::string(name) + " called outside a kernel");
  Fiber& f = *g_current;
  const unsigned lane = f.index % 32, w = f.index / 32;
  const unsigned lanes_here = std::min(32u, g_block.threads - w * 32);
  const uint32_t existing = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  f.name = name;
  f.file = file;
  f.line = line;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  if (!(mask >> lane & 1u))
    fail(describe_launch() + ": " + thread_name(f) + " calls " + name + " (" + where(file, line) +
         ") with a mask that leaves it out (undefined behaviour)");
  if (mask & ~existing)
    fail(describe_launch() + ": " + thread_name(f) + " calls " + name + " (" + where(file, line) + ") naming lanes " +
         lane_list(mask & ~existing) + " of warp " + std::to_string(w) + ", which do not exist (blockDim.x = " +
         std::to_string(g_block.threads) + " is not a multiple of 32)");
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fail(describe_launch() + ": " + name + " (" + where(file, line) + ") with width " + std::to_string(width) +
         ", not a power of two up to 32");
  f.state = State::kWarp;
  g_block.warp_arrived[w] |= 1u << lane;
  if ((g_block.warp_arrived[w] & mask) == mask) resolve_warp(w, mask);
  yield();
  return f.result;
}

void trap(const char* file, int line) {
  fail(describe_launch() + ": " + thread_name(*g_current) + " executed __trap() at " + where(file, line));
}

void check_aligned(const void* p, size_t alignment, const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(p) % alignment == 0) return;
  char address[32];
  std::snprintf(address, sizeof address, "%p", p);
  fail(describe_launch() + ": " + (g_current ? thread_name(*g_current) : std::string("a thread")) + " makes a " +
       std::to_string(alignment) + "-byte vector access at " + address + ", not " + std::to_string(alignment) +
       "-byte aligned (" + where(file, line) + "; a GPU stops the kernel: cudaErrorMisalignedAddress)");
}

void shared_declared(void* variable, size_t bytes) {
  for (auto& [p, serial] : g_shared_poisoned)
    if (p == variable) {
      if (serial != g_block_serial) {
        std::memset(variable, 0xff, bytes);
        serial = g_block_serial;
      }
      return;
    }
  std::memset(variable, 0xff, bytes);
  g_shared_poisoned.emplace_back(variable, g_block_serial);
}

void* dynamic_shared_memory() { return g_dynamic_shared.empty() ? nullptr : g_dynamic_shared.data(); }

cudaError_t take_last_error() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t peek_last_error() { return g_last_error; }

namespace {
LaunchHook g_launch_hook = nullptr;
}  // namespace
void set_launch_hook(LaunchHook hook) { g_launch_hook = hook; }
LaunchHook launch_hook() { return g_launch_hook; }

}  // namespace detail
}  // namespace amp_emu
