// Process-wide settings the kernels read: thread count and the active SIMD primitives.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "simd/primitives.hpp"

namespace rrag {

// Threads the kernels use (OpenMP). Defaults to omp_get_max_threads() at load time.
int get_num_threads();
void set_num_threads(int n);

// The active primitive set: the best the CPU supports unless overridden (RRAG_SIMD env var
// at load time, or set_simd_level). Names: "scalar", "avx2", "avx512".
const simd::Primitives& primitives();
std::string simd_level();
std::vector<std::string> available_simd_levels();
void set_simd_level(const std::string& name);  // throws std::invalid_argument

std::string compiler_id();
int openmp_version();
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
#pragma omp critical(rrag_bad_row)
    if (first_ < 0 || row < first_) first_ = row;
  }
  int64_t first() const { return first_; }
  // Throws std::invalid_argument "<arg>: contains NaN or inf (row r) ..." when a row was bad.
  void throw_if_bad(const char* arg) const;

 private:
  int64_t first_ = -1;
};

}  // namespace rrag
