// The kernels' own worker pool (replaces OpenMP): parallel loops that behave on a busy machine,
// report errors and allocation failures to the caller, and notice Ctrl-C.
//
// Why not OpenMP: with libgomp's default wait policy a thread that finishes its share spins
// (up to ~300,000 pause instructions) at every barrier and after every region. On a machine
// whose cores are all busy with other processes that spinning takes CPU time from the very
// thread it waits for, and a statically scheduled region waits for its slowest, preempted
// thread: measured 0.4-0.6x of NumPy under a load of 2 busy processes on 2 cores, against
// 3-7x with one thread. This pool instead
//   * hands out work in blocks from a shared counter, so a preempted worker delays a call by at
//     most the block it holds, and the calling thread (worker 0) takes whatever is left;
//   * lets a worker spin only briefly (kSpinMicros) before it sleeps on a condition variable,
//     and lets the caller wait for a worker's last block by yielding, not spinning;
//   * runs small jobs on the calling thread alone (workers_for), where waking a worker would
//     cost more than it saves;
//   * runs a job on the caller alone when the pool is busy with another thread's job (or when
//     a kernel calls parallel_for from inside a worker), so concurrent callers never wait on
//     each other.
// Results never depend on the number of workers or on which worker ran a block: a kernel's
// blocks write disjoint outputs, and per-worker partial results are combined in an order that
// does not depend on the split (the kernels say how).
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <type_traits>

namespace rrag {

// set_num_threads accepts 1 .. kMaxThreads.
constexpr int kMaxThreads = 1024;

// ---------------------------------------------------------------- interruption (Ctrl-C)

// Thrown by check_interrupt / parallel_for on the calling thread when the interrupt hook
// reports a pending signal; the bindings turn it into the pending Python exception
// (KeyboardInterrupt).
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

// The hook returns true when the call should stop (a signal handler raised). The bindings
// install one that takes the GIL and runs Python's signal handlers on the main thread.
using InterruptHook = bool (*)();
void set_interrupt_hook(InterruptHook hook);

// A kernel call on this thread (the bindings open one around every call, with the GIL
// released): checks happen only inside one, and only once it has run for
// kInterruptPeriodMs, so short calls never pay for one.
class CallScope {
 public:
  CallScope();
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  bool outer_;
};

// Throws Interrupted when a check is due and the hook reports a signal. Cheap (a clock read
// every 256 calls); a no-op on pool workers. For long serial loops.
void check_interrupt();

constexpr int kInterruptPeriodMs = 100;

// ---------------------------------------------------------------- parallel loops

using BlockFn = void (*)(void* ctx, int64_t begin, int64_t end, int worker);

// Runs fn(ctx, begin, end, worker) over [0, n) cut into blocks of `grain` indices, on at most
// `workers` threads: the caller is worker 0, pool threads are 1 .. workers - 1. Blocks are
// claimed in increasing order. An exception in a block stops new claims and is rethrown here
// (the one of the lowest block when several throw: the same one at any thread count);
// std::bad_alloc reaches Python as MemoryError. The caller checks for interrupts between its
// blocks and then throws Interrupted once every running block has finished.
void parallel_blocks(int64_t n, int64_t grain, int workers, BlockFn fn, void* ctx);

// parallel_blocks with a callable body(begin, end, worker).
template <class Body>
void parallel_for(int64_t n, int64_t grain, int workers, Body&& body) {
  using B = std::remove_reference_t<Body>;
  parallel_blocks(
      n, grain, workers,
      [](void* ctx, int64_t begin, int64_t end, int worker) { (*static_cast<B*>(ctx))(begin, end, worker); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// Threads for a job of `work` units when each thread should get at least `min_work` units
// and there are `n_blocks` blocks: min(get_num_threads(), work / min_work, n_blocks), >= 1.
// Kernels size per-worker scratch with this same value (worker indices are < it).
int workers_for(int64_t work, int64_t min_work, int64_t n_blocks = std::numeric_limits<int64_t>::max());

// Testing hook: multiplies every kernel's min_work (0 = use every thread on any input, so small
// test inputs exercise the pool; 1 = the default thresholds).
void set_min_work_scale(double scale);

// Pool threads started so far (for tests; they start on first use and are kept).
int pool_size();

}  // namespace rrag
