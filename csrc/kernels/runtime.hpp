// Process-wide settings the kernels read: thread count and the active SIMD primitives.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "simd/primitives.hpp"

namespace rrag {

// Threads the kernels use (the pool in parallel.hpp). Defaults at load time to
// RRAG_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may use (affinity mask
// and cgroup quota). set_num_threads throws std::invalid_argument outside [1, max_threads()].
int get_num_threads();
void set_num_threads(int64_t n);
int max_threads();

// The active primitive set: the best the CPU supports unless overridden (RRAG_SIMD env var
// at load time, or set_simd_level). Names: "scalar", "avx2", "avx512".
const simd::Primitives& primitives();
std::string simd_level();
std::vector<std::string> available_simd_levels();
void set_simd_level(const std::string& name);  // throws std::invalid_argument

// The memory budget: the most bytes one kernel call may allocate for its outputs and scratch.
// Ops whose sizes would exceed it throw std::invalid_argument naming the argument that sets
// the size, before allocating. Default: half the physical memory, or RRAG_MEMORY_BUDGET
// (bytes) when set at load time.
int64_t memory_budget();
void set_memory_budget(int64_t bytes);  // throws std::invalid_argument unless bytes >= 0

// elem_bytes * the product of the sizes, saturating at UINT64_MAX instead of overflowing
// (sizes < 0 count as 0).
uint64_t bytes_for(std::initializer_list<int64_t> sizes, uint64_t elem_bytes);

// Throws "<arg>: <what> would need <bytes>, more than the memory budget ..." when bytes
// exceeds memory_budget().
void check_budget(uint64_t bytes, const char* arg, const std::string& what);

std::string compiler_id();
bool native_build();

// Inverse norm from a squared norm: 0 for a zero vector (so its cosine is 0, never NaN).
// The square root is taken in double so that it adds no rounding of its own.
inline float inverse_norm(float sqnorm) {
  return sqnorm > 0.0f ? float(1.0 / std::sqrt(double(sqnorm))) : 0.0f;
}

// A squared norm is finite iff the row holds no NaN/inf and does not overflow float32, so
// the kernels get the finiteness check for free from a pass they make anyway.
inline bool finite_sqnorm(float sqnorm) { return std::isfinite(sqnorm); }

// Lowest bad row seen by any thread; -1 when none. Thread-count independent by taking the
// minimum, so the error names the same row however the work was split.
class BadRowTracker {
 public:
  void report(int64_t row) {
    int64_t seen = first_.load(std::memory_order_relaxed);
    while ((seen < 0 || row < seen) && !first_.compare_exchange_weak(seen, row, std::memory_order_relaxed)) {
    }
  }
  int64_t first() const { return first_.load(std::memory_order_relaxed); }
  // Throws std::invalid_argument "<arg>: contains NaN or inf (row r) ..." when a row was bad.
  void throw_if_bad(const char* arg) const;

 private:
  std::atomic<int64_t> first_{-1};
};

}  // namespace rrag
