#include "kernels/row_norms.hpp"

#include <algorithm>

#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

void inverse_row_norms(const float* x, int64_t n, int64_t d, float* inv, bool check_finite,
                       const char* arg) {
  constexpr int64_t kChunk = 1024;
  const auto& prims = primitives();
  BadRowTracker bad;
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  // Below ~256k floats (a few tens of microseconds) waking a worker costs more than it saves.
  parallel_for(n, kChunk, workers_for(n * d, int64_t(1) << 18, n_chunks), [&](int64_t lo, int64_t hi, int) {
    prims.row_sqnorms(x + lo * d, hi - lo, d, inv + lo);
    for (int64_t r = lo; r < hi; ++r) {
      if (check_finite && !finite_sqnorm(inv[r])) bad.report(r);
      inv[r] = inverse_norm(inv[r]);
    }
  });
  bad.throw_if_bad(arg);
}

}  // namespace rrag
