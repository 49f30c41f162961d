#include "kernels/runtime.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <stdexcept>

#include "kernels/parallel.hpp"

namespace rrag {
namespace {

// RRAG_X86_SIMD (set by CMake): the AVX2 / AVX-512 primitives are compiled in (x86-64 only).
bool cpu_has(const char* feature_set) {
  const std::string s = feature_set;
#if RRAG_X86_SIMD
  if (s == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (s == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
  return s == "scalar";
}

const simd::Primitives* by_name(const std::string& name) {
  if (name == "scalar") return &simd::primitives_scalar();
#if RRAG_X86_SIMD
  if (name == "avx2") return &simd::primitives_avx2();
  if (name == "avx512") return &simd::primitives_avx512();
#endif
  return nullptr;
}

const simd::Primitives* best_available() {
#if RRAG_X86_SIMD
  if (cpu_has("avx512")) return &simd::primitives_avx512();
  if (cpu_has("avx2")) return &simd::primitives_avx2();
#endif
  return &simd::primitives_scalar();
}

const simd::Primitives* initial_primitives() {
  if (const char* env = std::getenv("RRAG_SIMD")) {
    const simd::Primitives* p = by_name(env);
    if (p && cpu_has(env)) return p;
  }
  return best_available();
}

// CPUs this process may run on: its affinity mask, lowered to a cgroup CPU quota when one is
// set (containers started with --cpus report the host's CPUs otherwise).
int usable_cpus() {
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus < 1) cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");  // cgroup v2: "<quota> <period>" or "max <period>"
  std::string quota;
  long long period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const long long q = std::atoll(quota.c_str());
    if (q > 0) cpus = std::min<long long>(cpus, std::max<long long>(1, (q + period - 1) / period));
  }
  return cpus;
}

// RRAG_NUM_THREADS, else OMP_NUM_THREADS (what users already set to limit threads), else the
// usable CPUs; clamped to [1, kMaxThreads].
int initial_num_threads() {
  for (const char* name : {"RRAG_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* env = std::getenv(name)) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end != env && v >= 1) return static_cast<int>(std::min<long>(v, kMaxThreads));
    }
  }
  return std::min(usable_cpus(), kMaxThreads);
}

const simd::Primitives* g_primitives = initial_primitives();
std::atomic<int> g_num_threads{initial_num_threads()};

}  // namespace

int get_num_threads() { return g_num_threads.load(std::memory_order_relaxed); }

void set_num_threads(int64_t n) {
  if (n < 1 || n > kMaxThreads)
    throw std::invalid_argument("n: the thread count must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                                std::to_string(n));
  g_num_threads.store(static_cast<int>(n), std::memory_order_relaxed);
}

int max_threads() { return kMaxThreads; }

namespace {

int64_t initial_memory_budget() {
  if (const char* env = std::getenv("RRAG_MEMORY_BUDGET")) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end != env && v >= 0) return v;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) return int64_t(pages) / 2 * int64_t(page);
  return int64_t(8) << 30;
}

std::atomic<int64_t> g_memory_budget{initial_memory_budget()};

std::string format_bytes(uint64_t bytes) {
  if (bytes == std::numeric_limits<uint64_t>::max()) return "more than 2^64 bytes";
  char buf[64];
  if (bytes >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

}  // namespace

int64_t memory_budget() { return g_memory_budget.load(std::memory_order_relaxed); }

void set_memory_budget(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("nbytes: the memory budget must be >= 0, got " + std::to_string(bytes));
  g_memory_budget.store(bytes, std::memory_order_relaxed);
}

uint64_t bytes_for(std::initializer_list<int64_t> sizes, uint64_t elem_bytes) {
  unsigned __int128 total = elem_bytes;
  const unsigned __int128 cap = std::numeric_limits<uint64_t>::max();
  for (const int64_t s : sizes) {
    total *= static_cast<unsigned __int128>(s > 0 ? s : 0);
    if (total > cap) return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(total);
}

void check_budget(uint64_t bytes, const char* arg, const std::string& what) {
  const int64_t budget = memory_budget();
  if (bytes <= static_cast<uint64_t>(budget)) return;
  throw std::invalid_argument(std::string(arg) + ": " + what + " would need " + format_bytes(bytes) +
                              ", more than the memory budget of " + format_bytes(uint64_t(budget)) +
                              " (rrag_kernels.set_memory_budget)");
}

const simd::Primitives& primitives() { return *g_primitives; }
std::string simd_level() { return g_primitives->name; }

std::vector<std::string> available_simd_levels() {
  std::vector<std::string> out;
  for (const char* name : {"scalar", "avx2", "avx512"})
    if (cpu_has(name)) out.emplace_back(name);
  return out;
}

void set_simd_level(const std::string& name) {
  const simd::Primitives* p = by_name(name);
  if (!p && (name == "avx2" || name == "avx512"))
    throw std::invalid_argument("name: SIMD level '" + name + "' is x86-64 only; this build has 'scalar'");
  if (!p) throw std::invalid_argument("name: unknown SIMD level '" + name + "' (scalar, avx2, avx512)");
  if (!cpu_has(name.c_str()))
    throw std::invalid_argument("name: this CPU does not support SIMD level '" + name + "'");
  g_primitives = p;
}

std::string compiler_id() {
#ifdef RRAG_COMPILER_ID
  return RRAG_COMPILER_ID;
#else
  return "unknown";
#endif
}

bool native_build() {
#if defined(RRAG_NATIVE_BUILD) && RRAG_NATIVE_BUILD
  return true;
#else
  return false;
#endif
}

void BadRowTracker::throw_if_bad(const char* arg) const {
  const int64_t row = first();
  if (row < 0) return;
  throw std::invalid_argument(std::string(arg) + ": contains NaN or inf (first at row " +
                              std::to_string(row) +
                              "), or a row whose squared norm overflows float32");
}

}  // namespace rrag
