#include "kernels/parallel.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RRAG_PAUSE() _mm_pause()
#else
#define RRAG_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

#include "kernels/runtime.hpp"

namespace rrag {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- interruption

std::atomic<InterruptHook> g_interrupt_hook{nullptr};

thread_local bool t_is_worker = false;   // a pool thread: never checks for interrupts
thread_local bool t_in_call = false;     // inside a CallScope
thread_local bool t_in_job = false;      // the caller of a pool job (nested loops run alone)
thread_local Clock::time_point t_last_check;
thread_local uint32_t t_tick = 0;

// True when a check is due now and the hook reports a signal.
bool interrupt_pending_now() {
  if (t_is_worker || !t_in_call) return false;
  const Clock::time_point now = Clock::now();
  if (now - t_last_check < std::chrono::milliseconds(kInterruptPeriodMs)) return false;
  t_last_check = now;
  const InterruptHook hook = g_interrupt_hook.load(std::memory_order_acquire);
  return hook != nullptr && hook();
}

// ---------------------------------------------------------------- the pool

// How long an idle worker spins before it sleeps. Short: on a busy machine spinning takes
// CPU from other work (and from our own preempted threads); long enough that back-to-back
// calls find their workers awake. RRAG_SPIN_US overrides it (0 = sleep at once).
int64_t spin_micros() {
  static const int64_t us = [] {
    const char* env = std::getenv("RRAG_SPIN_US");
    if (env == nullptr) return int64_t(50);
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    return (end != env && v >= 0 && v <= 100000) ? int64_t(v) : int64_t(50);
  }();
  return us;
}

// One job at a time. Its state word packs what a worker needs to decide whether to join
// without touching the job: epoch (bits 32-63) | max_workers (17-31) | closed (16) |
// active workers (0-15). A worker joins by incrementing `active` while the epoch is the one
// it woke for and the job is not closed; the caller closes the job when it runs out of
// blocks and then waits only for the workers that joined.
struct Job {
  BlockFn fn = nullptr;
  void* ctx = nullptr;
  int64_t n = 0, grain = 1, n_blocks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  bool interrupted = false;  // written by the caller only
  std::mutex error_mutex;
  int64_t error_block = std::numeric_limits<int64_t>::max();
  std::exception_ptr error;

  // Claims and runs blocks until none are left or the job stops.
  void run(int worker) {
    while (!stop.load(std::memory_order_relaxed)) {
      if (worker == 0 && interrupt_pending_now()) {
        interrupted = true;
        stop.store(true, std::memory_order_relaxed);
        break;
      }
      const int64_t b = next.fetch_add(1, std::memory_order_relaxed);
      if (b >= n_blocks) break;
      const int64_t begin = b * grain, end = std::min(n, begin + grain);
      try {
        fn(ctx, begin, end, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (b < error_block) {
          error_block = b;
          error = std::current_exception();
        }
        stop.store(true, std::memory_order_relaxed);
      }
    }
  }
};

constexpr uint64_t kActiveMask = 0xFFFF, kClosed = uint64_t(1) << 16;
constexpr int kWorkersShift = 17;
constexpr uint64_t kWorkersMask = 0x7FFF;
constexpr int kEpochShift = 32;

inline uint64_t epoch_of(uint64_t s) { return s >> kEpochShift; }
inline int max_workers_of(uint64_t s) { return static_cast<int>((s >> kWorkersShift) & kWorkersMask); }

class Pool {
 public:
  int size() const { return n_threads_.load(std::memory_order_relaxed); }

  // Runs the job on up to `workers` threads; returns false (nothing run) when the pool is
  // busy with another caller's job, so that the caller runs it alone.
  bool run(Job& job, int workers) {
    std::unique_lock<std::mutex> busy(run_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    workers = std::min(workers, grow(workers - 1) + 1);
    if (workers <= 1) return false;
    // Publish: the job pointer first, then the new epoch (release) that workers acquire.
    job_ = &job;
    const uint64_t epoch = (epoch_of(state_.load(std::memory_order_relaxed)) + 1) & 0xFFFFFFFFu;
    // seq_cst, like the load of sleepers_ below and the worker's increment of it before it
    // re-reads the state: either the worker sees the new epoch or this sees the sleeper.
    state_.store((epoch << kEpochShift) | (uint64_t(workers) << kWorkersShift), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    job.run(0);
    // No block left to claim: close the job to late workers, wait for the ones that joined.
    uint64_t s = state_.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
    for (int spin = 0; (s & kActiveMask) != 0; ++spin) {
      if (spin < 64) RRAG_PAUSE();
      else std::this_thread::yield();  // the worker we wait for may be preempted: let it run
      s = state_.load(std::memory_order_acquire);
    }
    job_ = nullptr;
    return true;
  }

 private:
  // Starts threads until there are `wanted` (or thread creation fails); returns how many run.
  int grow(int wanted) {
    wanted = std::min(wanted, kMaxThreads - 1);
    int have = n_threads_.load(std::memory_order_relaxed);
    while (have < wanted) {
      try {
        std::thread(&Pool::worker_loop, this, have + 1).detach();
      } catch (const std::exception&) {
        break;  // the system refuses more threads: run with the ones there are
      }
      n_threads_.store(++have, std::memory_order_relaxed);
    }
    return have;
  }

  void worker_loop(int worker) {
    t_is_worker = true;
    uint64_t seen = epoch_of(state_.load(std::memory_order_acquire));
    for (;;) {
      uint64_t s = wait_for_new_epoch(seen);
      seen = epoch_of(s);
      // Join unless the job is closed or does not want this many workers.
      bool joined = false;
      while (epoch_of(s) == seen && !(s & kClosed) && worker < max_workers_of(s)) {
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
          joined = true;
          break;
        }
      }
      if (!joined) continue;
      job_->run(worker);
      state_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  uint64_t wait_for_new_epoch(uint64_t seen) {
    uint64_t s = state_.load(std::memory_order_acquire);
    if (epoch_of(s) != seen) return s;
    const Clock::time_point until = Clock::now() + std::chrono::microseconds(spin_micros());
    for (int spin = 0;; ++spin) {
      RRAG_PAUSE();
      s = state_.load(std::memory_order_acquire);
      if (epoch_of(s) != seen) return s;
      if ((spin & 63) == 63 && Clock::now() >= until) break;
    }
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    wake_.wait(lock, [&] {
      s = state_.load(std::memory_order_seq_cst);
      return epoch_of(s) != seen;
    });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return s;
  }

  std::mutex run_mutex_;
  std::atomic<uint64_t> state_{0};
  Job* job_ = nullptr;
  std::atomic<int> n_threads_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

// Created on first use and never destroyed (its threads are detached and live until the
// process exits). A forked child has none of the parent's threads: it starts a new pool and
// leaks the old one, whose mutexes may have been held by a parent thread at the fork.
std::atomic<Pool*> g_pool{nullptr};
std::mutex g_pool_mutex;
std::once_flag g_atfork_once;

void forget_pool_in_child() {
  g_pool.store(nullptr, std::memory_order_relaxed);
  new (&g_pool_mutex) std::mutex();
}

Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, forget_pool_in_child); });
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  p = g_pool.load(std::memory_order_relaxed);
  if (p == nullptr) {
    p = new Pool();
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

void run_alone(int64_t n, int64_t grain, int64_t n_blocks, BlockFn fn, void* ctx) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (interrupt_pending_now()) throw Interrupted();
    const int64_t begin = b * grain;
    fn(ctx, begin, std::min(n, begin + grain), 0);
  }
}

}  // namespace

void set_interrupt_hook(InterruptHook hook) { g_interrupt_hook.store(hook, std::memory_order_release); }

CallScope::CallScope() : outer_(!t_in_call) {
  if (outer_) {
    t_in_call = true;
    t_last_check = Clock::now();
    t_tick = 0;
  }
}

CallScope::~CallScope() {
  if (outer_) t_in_call = false;
}

void check_interrupt() {
  if ((++t_tick & 255u) != 0) return;
  if (interrupt_pending_now()) throw Interrupted();
}

void parallel_blocks(int64_t n, int64_t grain, int workers, BlockFn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_blocks = n / grain + (n % grain != 0 ? 1 : 0);
  workers = static_cast<int>(std::min<int64_t>(std::max(workers, 1), n_blocks));
  if (workers > 1 && !t_is_worker && !t_in_job) {
    Job job;
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.grain = grain;
    job.n_blocks = n_blocks;
    t_in_job = true;
    bool ran = false;
    try {
      ran = pool().run(job, workers);
    } catch (...) {
      t_in_job = false;
      throw;
    }
    t_in_job = false;
    if (ran) {
      if (job.error) std::rethrow_exception(job.error);
      if (job.interrupted) throw Interrupted();
      return;
    }
  }
  run_alone(n, grain, n_blocks, fn, ctx);
}

namespace {
std::atomic<double> g_min_work_scale{1.0};
}

void set_min_work_scale(double scale) { g_min_work_scale.store(scale < 0.0 ? 0.0 : scale, std::memory_order_relaxed); }

int workers_for(int64_t work, int64_t min_work, int64_t n_blocks) {
  const double scaled = double(min_work) * g_min_work_scale.load(std::memory_order_relaxed);
  const int64_t by_work = scaled >= 1.0 ? static_cast<int64_t>(double(work) / scaled) : std::numeric_limits<int64_t>::max();
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({int64_t(get_num_threads()), by_work, n_blocks})));
}

int pool_size() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  return p != nullptr ? p->size() : 0;
}

}  // namespace rrag
