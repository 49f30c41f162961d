#include "kernels/cosine_matrix.hpp"

#include <algorithm>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/row_norms.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

void cosine_matrix(const float* a, int64_t n, const float* b, int64_t m, int64_t d, float* out,
                   bool check_finite) {
  check_dim(d, "a");
  std::vector<float> inv_a(n), inv_b(m);
  inverse_row_norms(a, n, d, inv_a.data(), check_finite, "a");
  inverse_row_norms(b, m, d, inv_b.data(), check_finite, "b");
  if (n == 0 || m == 0) return;
  const auto& prims = primitives();
  // Tiles of 8 a-panels x 16 b-panels: both packed blocks stay in L2 while the
  // micro-kernels run; the tile shape never changes a result (one FMA chain per output).
  const int64_t rows_a = 8 * prims.gemm_mr, rows_b = 16 * prims.gemm_nr;
  const int64_t tiles_a = (n + rows_a - 1) / rows_a, tiles_b = (m + rows_b - 1) / rows_b;
  // Threads split b's tiles: each packs its 16-panel b block once and sweeps the cheaper
  // 8-panel a blocks past it. Only when b has too few tiles to feed every thread is a split
  // instead (b blocks are then re-packed per tile).
  const bool split_b = tiles_b >= get_num_threads() || tiles_b >= tiles_a;
  const int64_t outer = split_b ? tiles_b : tiles_a, inner = split_b ? tiles_a : tiles_b;
  struct Packed {
    std::vector<float> a, b;
  };
  // Parallel from ~2M multiply-adds (about a millisecond on one core) on.
  const uint64_t fmas = std::min<uint64_t>(bytes_for({n, m, d}, 1), uint64_t(1) << 62);
  const int workers = workers_for(static_cast<int64_t>(fmas), int64_t(1) << 21, outer * inner);
  // A task is one outer tile against a run of inner tiles: at least ~8 tasks a worker, so
  // that a worker preempted by another process holds up only a small share of the call
  // (packing the outer block once more per task costs ~1 % of its multiply-adds).
  const int64_t runs_per_outer = std::clamp<int64_t>((8 * int64_t(workers) + outer - 1) / outer, 1, inner);
  const int64_t run = (inner + runs_per_outer - 1) / runs_per_outer;
  const int64_t runs = (inner + run - 1) / run;
  std::vector<Packed> packed(static_cast<size_t>(workers));
  parallel_for(outer * runs, 1, workers, [&](int64_t task, int64_t, int worker) {
    Packed& p = packed[static_cast<size_t>(worker)];
    if (p.a.empty()) {
      p.a.resize(size_t(rows_a * d));
      p.b.resize(size_t(rows_b * d));
    }
    const int64_t o = task / runs, in_lo = (task % runs) * run, in_hi = std::min(inner, in_lo + run);
    for (int64_t in = in_lo; in < in_hi; ++in) {
      const int64_t ta = split_b ? in : o, tb = split_b ? o : in;
      const int64_t i0 = ta * rows_a, j0 = tb * rows_b;
      const int64_t na = std::min(rows_a, n - i0), nb = std::min(rows_b, m - j0);
      const bool first = in == in_lo;
      if (first || !split_b) prims.pack_panels(b + j0 * d, nb, d, prims.gemm_nr, p.b.data());
      if (first || split_b) prims.pack_panels(a + i0 * d, na, d, prims.gemm_mr, p.a.data());
      prims.gemm_packed(p.a.data(), na, p.b.data(), nb, d, out + i0 * m + j0, m, inv_a.data() + i0,
                        inv_b.data() + j0);
    }
  });
}

}  // namespace rrag
