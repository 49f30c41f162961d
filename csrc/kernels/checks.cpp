#include "kernels/checks.hpp"

#include <atomic>

#include "kernels/parallel.hpp"

namespace rrag {

void check_offsets_parallel(const int64_t* offsets, int64_t n_segments, int64_t n_rows, const char* arg) {
  if (n_segments < 0) fail(arg, "negative segment count");
  std::atomic<bool> decreasing{false};
  constexpr int64_t kBlock = int64_t(1) << 16;
  parallel_for(n_segments, kBlock, workers_for(n_segments, kBlock), [&](int64_t lo, int64_t hi, int) {
    int64_t bad = 0;
    for (int64_t s = lo; s < hi; ++s) bad += offsets[s + 1] < offsets[s] ? 1 : 0;
    if (bad != 0) decreasing.store(true, std::memory_order_relaxed);
  });
  if (decreasing.load() || offsets[0] != 0 || offsets[n_segments] != n_rows)
    check_offsets(offsets, n_segments, n_rows, arg);
}

}  // namespace rrag
